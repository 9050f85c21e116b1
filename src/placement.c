/* SPDX-License-Identifier: MIT */
/*
 * placement.c - the CPUs that take a disk's interrupts.
 *
 * /sys/dev/block/MAJ:MIN links to the disk's node under /sys/devices;
 * going up from it, the first device with interrupt lines of its own
 * (msi_irqs/, or a legacy `irq`) is the controller: the PCI function
 * of a virtio disk, an NVMe drive, an AHCI host. A device mapper or md
 * device has none; the devices in its slaves/ do. Each line's routing
 * is /proc/irq/N/effective_affinity_list, how often it fired
 * /sys/kernel/irq/N/per_cpu_count.
 */
#include "internal.h"
#include "placement.h"

#include <aggring/placement.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Lines of one device looked at: NVMe has one per CPU plus one. */
#define MAX_LINES 1024
/* Levels of stacked devices followed down (dm on md on disks...). */
#define MAX_STACK 4
/* Lines under 1/QUIET_SHARE of the busiest line's count are left out. */
#define QUIET_SHARE 64

struct irq_line {
	unsigned irq;
	bool counted;		/* per_cpu_count was readable */
	unsigned long long count;
};

int agr__parse_cpu_list(const char *s, int *cpus, int max)
{
	int n = 0;

	while (*s && *s != '\n') {
		char *end;
		long lo, hi;

		errno = 0;
		lo = strtol(s, &end, 10);
		if (errno || end == s || lo < 0 || *s == '-' || *s == '+')
			return -EINVAL;
		hi = lo;
		if (*end == '-') {
			s = end + 1;
			hi = strtol(s, &end, 10);
			if (errno || end == s || *s == '-' || *s == '+')
				return -EINVAL;
		}
		if (hi < lo || hi >= CPU_SETSIZE || n + (hi - lo + 1) > max)
			return -EINVAL;
		for (; lo <= hi; lo++)
			cpus[n++] = (int)lo;
		if (*end == ',' && end[1] && end[1] != '\n')
			end++;
		else if (*end && strcmp(end, "\n") != 0)
			return -EINVAL;
		s = end;
	}
	return n;
}

/* The text of a small file, NUL-terminated; 0 or a negative errno. */
static int read_text(const char *path, char *buf, size_t len)
{
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	got = read(fd, buf, len - 1);
	if (got < 0)
		got = -errno;
	close(fd);
	if (got < 0)
		return (int)got;
	buf[got] = '\0';
	return 0;
}

/* The lines listed in DEV/msi_irqs/, at most `max`. */
static int msi_lines(const char *dev, struct irq_line *lines, int max)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (snprintf(path, sizeof(path), "%s/msi_irqs", dev) >= PATH_MAX)
		return 0;
	d = opendir(path);
	if (!d)
		return 0;
	while (n < max && (e = readdir(d))) {
		char *end;
		unsigned long irq = strtoul(e->d_name, &end, 10);

		if (end != e->d_name && !*end && irq <= UINT_MAX)
			lines[n++] = (struct irq_line){ .irq = (unsigned)irq };
	}
	closedir(d);
	return n;
}

/* DEV/irq as one line, if DEV has a legacy interrupt. */
static int legacy_line(const char *dev, struct irq_line *line)
{
	char path[PATH_MAX], text[32], *end;
	unsigned long irq;

	if (snprintf(path, sizeof(path), "%s/irq", dev) >= PATH_MAX ||
	    read_text(path, text, sizeof(text)) < 0)
		return 0;
	irq = strtoul(text, &end, 10);
	if (end == text || (*end && *end != '\n') || irq == 0 ||
	    irq > UINT_MAX)
		return 0;
	*line = (struct irq_line){ .irq = (unsigned)irq };
	return 1;
}

/*
 * The interrupt lines of the first device at or above `node` that has
 * any, below the devices directory (the first `top_len` characters of
 * `node`); 0 if none does. Cuts `node` down as it goes up.
 */
static int device_lines(char *node, size_t top_len, struct irq_line *lines,
			int max)
{
	while (strlen(node) > top_len) {
		char *slash;
		int n = msi_lines(node, lines, max);

		if (n == 0)
			n = legacy_line(node, lines);
		if (n > 0)
			return n;
		slash = strrchr(node, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	return 0;
}

/* Sums SYS/kernel/irq/N/per_cpu_count ("3,0,12") into line->count. */
static void count_line(const char *sys, struct irq_line *line)
{
	char path[PATH_MAX], text[8192];
	const char *s = text;

	if (snprintf(path, sizeof(path), "%s/kernel/irq/%u/per_cpu_count",
		     sys, line->irq) >= PATH_MAX ||
	    read_text(path, text, sizeof(text)) < 0)
		return;
	line->count = 0;
	while (*s && *s != '\n') {
		char *end;
		unsigned long long c = strtoull(s, &end, 10);

		if (end == s)
			return;
		line->count += c;
		s = *end == ',' ? end + 1 : end;
	}
	line->counted = true;
}

/* Adds the CPUs line `irq` is routed to now, if that can be read. */
static void add_routing(const char *proc, unsigned irq, cpu_set_t *set)
{
	static const char *const names[] = { "effective_affinity_list",
					     "smp_affinity_list" };
	char path[PATH_MAX], text[8192];
	int cpus[CPU_SETSIZE];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int n;

		if (snprintf(path, sizeof(path), "%s/irq/%u/%s", proc, irq,
			     names[i]) >= PATH_MAX ||
		    read_text(path, text, sizeof(text)) < 0)
			continue;
		n = agr__parse_cpu_list(text, cpus, CPU_SETSIZE);
		if (n <= 0)
			continue;
		for (int k = 0; k < n; k++)
			CPU_SET((size_t)cpus[k], set);
		return;
	}
}

/*
 * Adds the CPUs of one controller's `n` lines, but for those that fired
 * under 1/QUIET_SHARE as often as its busiest (when every count could
 * be read and any line fired at all).
 */
static void add_controller(const char *sys, const char *proc,
			   struct irq_line *lines, int n, cpu_set_t *set)
{
	unsigned long long busiest = 0;
	bool all_counted = true;

	for (int i = 0; i < n; i++) {
		count_line(sys, &lines[i]);
		all_counted = all_counted && lines[i].counted;
		if (lines[i].count > busiest)
			busiest = lines[i].count;
	}
	for (int i = 0; i < n; i++)
		if (!all_counted || busiest == 0 ||
		    lines[i].count >= busiest / QUIET_SHARE)
			add_routing(proc, lines[i].irq, set);
}

struct roots {
	const char *sys, *proc;
	size_t top_len;		/* of the real path of SYS/devices */
	struct irq_line *lines;	/* room for MAX_LINES */
};

/*
 * Adds the CPUs of `node`'s controller or, for a device stacked on
 * others (device mapper, md: no controller of its own, a slaves/
 * directory), of the controllers of the devices under it, `depth`
 * levels down at most.
 */
static void add_device(const struct roots *r, const char *node, int depth,
		       cpu_set_t *set)
{
	char path[PATH_MAX], under[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int n;

	snprintf(path, sizeof(path), "%s", node);
	n = device_lines(path, r->top_len, r->lines, MAX_LINES);
	if (n > 0) {
		add_controller(r->sys, r->proc, r->lines, n, set);
		return;
	}
	if (depth == 0 ||
	    snprintf(path, sizeof(path), "%s/slaves", node) >= PATH_MAX)
		return;
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/slaves/%s", node,
			     e->d_name) >= PATH_MAX ||
		    !realpath(path, under) ||
		    strncmp(under, node, r->top_len) != 0)
			continue;
		add_device(r, under, depth - 1, set);
	}
	closedir(d);
}

int agr__disk_irq_cpus_at(const char *sys, const char *proc,
			  unsigned major, unsigned minor, int *cpus,
			  size_t cap)
{
	char link[PATH_MAX], devices[PATH_MAX], node[PATH_MAX], top[PATH_MAX];
	struct roots r = { .sys = sys, .proc = proc };
	cpu_set_t set;
	int found = 0;

	if (snprintf(link, sizeof(link), "%s/dev/block/%u:%u", sys, major,
		     minor) >= PATH_MAX ||
	    snprintf(devices, sizeof(devices), "%s/devices", sys) >= PATH_MAX)
		return -ENODEV;
	if (!realpath(link, node) || !realpath(devices, top))
		return -ENODEV;
	/* A made-up layout whose disk is not under SYS/devices: none. */
	r.top_len = strlen(top);
	if (strncmp(node, top, r.top_len) != 0 || node[r.top_len] != '/')
		return -ENODEV;
	r.lines = calloc(MAX_LINES, sizeof(*r.lines));
	if (!r.lines)
		return -ENOMEM;
	CPU_ZERO(&set);
	add_device(&r, node, MAX_STACK, &set);
	free(r.lines);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET((size_t)cpu, &set))
			continue;
		if ((size_t)found < cap)
			cpus[found] = cpu;
		found++;
	}
	return found ? found : -ENODEV;
}

AGR_API int agr_disk_irq_cpus(const char *path, int *cpus, size_t cap)
{
	struct stat st;
	dev_t dev;

	if (!path || (!cpus && cap))
		return -EINVAL;
	if (stat(path, &st) < 0)
		return -errno;
	dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	return agr__disk_irq_cpus_at("/sys", "/proc", major(dev), minor(dev),
				     cpus, cap);
}
