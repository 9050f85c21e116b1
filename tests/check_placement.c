/* SPDX-License-Identifier: MIT */
/*
 * check_placement.c - the CPUs of a disk's interrupts, found on made-up
 * /sys and /proc trees laid out as Linux lays them out (a single-queue
 * virtio disk, a partition, an NVMe drive, a legacy interrupt, device
 * mapper and md, a loop device, an old kernel), and on this machine's
 * own; and the CPU list parser AGR_WORKER_CPUS and /proc share.
 *
 * Built with src/placement.c itself (no ring, no library), so that the
 * internal entry point can be given the fixture's roots.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aggring/placement.h>

#include "placement.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the fixture: a /sys and a /proc under one temp dir ---- */

static char root[PATH_MAX], sys_root[PATH_MAX + 8], proc_root[PATH_MAX + 8];

static void make_parents(const char *path)
{
	char dir[PATH_MAX * 2];

	ck_assert_uint_lt(strlen(path), sizeof(dir));
	strcpy(dir, path);
	for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		ck_assert(mkdir(dir, 0755) == 0 || errno == EEXIST);
		*p = '/';
	}
}

/* Writes `text` to ROOT/REL, making its directories. */
static void put(const char *rel, const char *text)
{
	char path[PATH_MAX * 2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	make_parents(path);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

/* Makes the directory ROOT/REL and its parents. */
static void put_dir(const char *rel)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s/", root, rel);
	make_parents(path);
}

/* ROOT/REL, a symbolic link to `target` (relative, as sysfs's are). */
static void put_link(const char *rel, const char *target)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	make_parents(path);
	ck_assert_int_eq(symlink(target, path), 0);
}

/* One interrupt line: its number, fire counts and routing. */
static void put_irq(unsigned irq, const char *per_cpu_count,
		    const char *effective)
{
	char rel[128];

	if (per_cpu_count) {
		snprintf(rel, sizeof(rel), "sys/kernel/irq/%u/per_cpu_count",
			 irq);
		put(rel, per_cpu_count);
	}
	snprintf(rel, sizeof(rel), "proc/irq/%u/smp_affinity_list", irq);
	put(rel, "0-3\n");
	if (effective) {
		snprintf(rel, sizeof(rel),
			 "proc/irq/%u/effective_affinity_list", irq);
		put(rel, effective);
	}
}

static void msi(const char *device, unsigned irq)
{
	char rel[PATH_MAX];

	snprintf(rel, sizeof(rel), "sys/devices/%s/msi_irqs/%u", device, irq);
	put(rel, "msix\n");
}

static void make_root(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/aggring-placement-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(sys_root, sizeof(sys_root), "%s/sys", root);
	snprintf(proc_root, sizeof(proc_root), "%s/proc", root);
	put_dir("sys/devices");
	put_dir("sys/dev/block");
	put_dir("proc/irq");
}

static void remove_root(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

/* The CPUs of device MAJ:MIN in the fixture, the first `cap` in `cpus`. */
static int irq_cpus(unsigned major, unsigned minor, int *cpus, size_t cap)
{
	return agr__disk_irq_cpus_at(sys_root, proc_root, major, minor, cpus,
				     cap);
}

#define ASSERT_CPUS(got, cpus, ...)                                         \
	do {                                                                \
		static const int want_[] = { __VA_ARGS__ };                 \
		ck_assert_int_eq((got), (int)ARRAY_SIZE(want_));            \
		for (size_t k_ = 0; k_ < ARRAY_SIZE(want_); k_++)           \
			ck_assert_int_eq((cpus)[k_], want_[k_]);            \
	} while (0)

/*
 * A single-queue virtio disk as this project's CI machine has one: the
 * request line routed to CPU 1, the configuration line (fired once at
 * boot) to CPU 0. Partition vda1 is the disk's child.
 */
static void put_virtio_disk(void)
{
	const char *pci = "pci0000:00/0000:00:02.0";

	put_dir("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/vda1");
	put_link("sys/dev/block/254:0",
		 "../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda");
	put_link("sys/dev/block/254:1", "../../devices/pci0000:00/"
		 "0000:00:02.0/virtio1/block/vda/vda1");
	put("sys/devices/pci0000:00/0000:00:02.0/irq", "0\n");
	msi(pci, 35);
	msi(pci, 36);
	put_irq(35, "1,0\n", "0\n");
	put_irq(36, "0,62055084\n", "1\n");
}

START_TEST(virtio_disk_is_its_request_line_cpu)
{
	int cpus[8] = { -1, -1, -1, -1, -1, -1, -1, -1 };

	make_root();
	put_virtio_disk();
	ASSERT_CPUS(irq_cpus(254, 0, cpus, 8), cpus, 1);
	ck_assert_int_eq(cpus[1], -1);
	remove_root();
}
END_TEST

START_TEST(partition_is_its_disk)
{
	int cpus[8];

	make_root();
	put_virtio_disk();
	ASSERT_CPUS(irq_cpus(254, 1, cpus, 8), cpus, 1);
	remove_root();
}
END_TEST

/* Before any line fired busily, no line is left out. */
START_TEST(idle_device_counts_every_line)
{
	const char *pci = "pci0000:00/0000:00:03.0";
	int cpus[8];

	make_root();
	put_dir("sys/devices/pci0000:00/0000:00:03.0/virtio2/block/vdb");
	put_link("sys/dev/block/254:16",
		 "../../devices/pci0000:00/0000:00:03.0/virtio2/block/vdb");
	msi(pci, 40);
	msi(pci, 41);
	put_irq(40, "0,0\n", "0\n");
	put_irq(41, "0,0\n", "1\n");
	ASSERT_CPUS(irq_cpus(254, 16, cpus, 8), cpus, 0, 1);
	remove_root();
}
END_TEST

/*
 * An NVMe drive: an admin line and one line per CPU pair. Every busy
 * line's CPUs are listed; fewer are written than there are when `cap`
 * is short, and none when it is 0.
 */
START_TEST(nvme_lists_every_queue_and_honours_cap)
{
	const char *pci = "pci0000:00/0000:00:04.0";
	int cpus[8] = { -1, -1, -1, -1, -1, -1, -1, -1 };

	make_root();
	put_dir("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
	put_link("sys/dev/block/259:0",
		 "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
	msi(pci, 50);
	msi(pci, 51);
	msi(pci, 52);
	msi(pci, 53);
	put_irq(50, "30,0,0,0\n", "2\n");
	put_irq(51, "9000,0,0,0\n", "0-1\n");
	put_irq(52, "0,0,7000,0\n", "2\n");
	put_irq(53, "0,0,0,8000\n", "3\n");
	ASSERT_CPUS(irq_cpus(259, 0, cpus, 8), cpus, 0, 1, 2, 3);
	cpus[0] = cpus[1] = cpus[2] = cpus[3] = -1;
	ck_assert_int_eq(irq_cpus(259, 0, cpus, 2), 4);
	ck_assert_int_eq(cpus[0], 0);
	ck_assert_int_eq(cpus[1], 1);
	ck_assert_int_eq(cpus[2], -1);
	ck_assert_int_eq(irq_cpus(259, 0, NULL, 0), 4);
	remove_root();
}
END_TEST

/* No per_cpu_count, no effective affinity: every line, as routed. */
START_TEST(old_kernel_uses_every_line_and_smp_affinity)
{
	const char *pci = "pci0000:00/0000:00:05.0";
	int cpus[8];

	make_root();
	put_dir("sys/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/"
		"0:0:0:0/block/sda");
	put_link("sys/dev/block/8:0", "../../devices/pci0000:00/0000:00:05.0/"
		 "host0/target0:0:0/0:0:0:0/block/sda");
	msi(pci, 60);
	put_irq(60, NULL, NULL);
	ASSERT_CPUS(irq_cpus(8, 0, cpus, 8), cpus, 0, 1, 2, 3);
	remove_root();
}
END_TEST

/* A controller without MSI: its `irq` file names its one line. */
START_TEST(legacy_interrupt_line)
{
	int cpus[8];

	make_root();
	put_dir("sys/devices/pci0000:00/0000:00:06.0/ata1/host1/target1:0:0/"
		"1:0:0:0/block/sdb");
	put_link("sys/dev/block/8:16", "../../devices/pci0000:00/0000:00:06.0/"
		 "ata1/host1/target1:0:0/1:0:0:0/block/sdb");
	put("sys/devices/pci0000:00/0000:00:06.0/irq", "11\n");
	put_irq(11, "5,0,0,0\n", "2\n");
	ASSERT_CPUS(irq_cpus(8, 16, cpus, 8), cpus, 2);
	remove_root();
}
END_TEST

/*
 * Stacked devices: a device mapper volume on partition vda1, and an md
 * array over it and a disk behind a legacy line on CPU 2.
 */
START_TEST(stacked_devices_are_their_disks)
{
	int cpus[8];

	make_root();
	put_virtio_disk();
	put_dir("sys/devices/pci0000:00/0000:00:06.0/ata1/host1/target1:0:0/"
		"1:0:0:0/block/sdb");
	put("sys/devices/pci0000:00/0000:00:06.0/irq", "11\n");
	put_irq(11, "5,0,0,0\n", "2\n");
	put_dir("sys/devices/virtual/block/dm-0");
	put_link("sys/dev/block/253:0", "../../devices/virtual/block/dm-0");
	put_link("sys/devices/virtual/block/dm-0/slaves/vda1",
		 "../../../../pci0000:00/0000:00:02.0/virtio1/block/vda/vda1");
	ASSERT_CPUS(irq_cpus(253, 0, cpus, 8), cpus, 1);
	put_dir("sys/devices/virtual/block/md0");
	put_link("sys/dev/block/9:0", "../../devices/virtual/block/md0");
	put_link("sys/devices/virtual/block/md0/slaves/dm-0", "../../dm-0");
	put_link("sys/devices/virtual/block/md0/slaves/sdb",
		 "../../../../pci0000:00/0000:00:06.0/ata1/host1/"
		 "target1:0:0/1:0:0:0/block/sdb");
	ASSERT_CPUS(irq_cpus(9, 0, cpus, 8), cpus, 1, 2);
	remove_root();
}
END_TEST

/* Devices with no interrupts of their own, and unknown devices. */
START_TEST(virtual_and_unknown_devices_are_enodev)
{
	int cpus[8];

	make_root();
	put_dir("sys/devices/virtual/block/loop0");
	put_link("sys/dev/block/7:0", "../../devices/virtual/block/loop0");
	/* A line whose routing cannot be read counts for nothing. */
	put_dir("sys/devices/pci0000:00/0000:00:07.0/virtio3/block/vdc");
	put_link("sys/dev/block/254:32",
		 "../../devices/pci0000:00/0000:00:07.0/virtio3/block/vdc");
	msi("pci0000:00/0000:00:07.0", 70);
	ck_assert_int_eq(irq_cpus(7, 0, cpus, 8), -ENODEV);
	ck_assert_int_eq(irq_cpus(254, 32, cpus, 8), -ENODEV);
	ck_assert_int_eq(irq_cpus(1, 2, cpus, 8), -ENODEV);
	ck_assert_int_eq(agr__disk_irq_cpus_at("/nonexistent-sys", proc_root,
					       254, 0, cpus, 8), -ENODEV);
	remove_root();
}
END_TEST

/* The public call, on this machine's own /sys and /proc. */
START_TEST(public_call_on_this_machine)
{
	const char *paths[] = { ".", "/", "/proc/self", "/dev/null" };
	int cpus[CPU_SETSIZE];

	ck_assert_int_eq(agr_disk_irq_cpus(NULL, cpus, 1), -EINVAL);
	ck_assert_int_eq(agr_disk_irq_cpus(".", NULL, 1), -EINVAL);
	ck_assert_int_eq(agr_disk_irq_cpus("/nonexistent/aggring", cpus, 1),
			 -ENOENT);
	/* procfs has no disk. */
	ck_assert_int_eq(agr_disk_irq_cpus("/proc/self", cpus, 1), -ENODEV);
	for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
		int n = agr_disk_irq_cpus(paths[i], cpus, CPU_SETSIZE);

		/* Any machine may lack what it looks for; never garbage. */
		ck_assert_msg(n == -ENODEV || (n > 0 && n <= CPU_SETSIZE),
			      "%s: %d", paths[i], n);
		for (int k = 0; k < n; k++) {
			ck_assert_int_ge(cpus[k], 0);
			ck_assert_int_lt(cpus[k], CPU_SETSIZE);
			if (k)
				ck_assert_int_gt(cpus[k], cpus[k - 1]);
		}
		ck_assert_int_eq(agr_disk_irq_cpus(paths[i], NULL, 0), n);
	}
}
END_TEST

/* ---- the CPU list parser ---- */

START_TEST(parses_cpu_lists)
{
	static const struct {
		const char *text;
		int n;
		int cpus[6];
	} good[] = {
		{ "3", 1, { 3 } },
		{ "1\n", 1, { 1 } },
		{ "0,2-5", 5, { 0, 2, 3, 4, 5 } },
		{ "4-4,1", 2, { 4, 1 } },
		{ "0-1\n", 2, { 0, 1 } },
		{ "", 0, { 0 } },
	};
	static const char *const bad[] = {
		"-1", "1-", "3-1", "1,,2", "1,", "1,\n", "a", "1 2", "+1",
		"1-+2", "1\n\n", "99999999999999999999",
	};
	int cpus[CPU_SETSIZE];
	char max[32];

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		ck_assert_int_eq(agr__parse_cpu_list(good[i].text, cpus, 6),
				 good[i].n);
		for (int k = 0; k < good[i].n; k++)
			ck_assert_int_eq(cpus[k], good[i].cpus[k]);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_assert_msg(agr__parse_cpu_list(bad[i], cpus, 6) == -EINVAL,
			      "\"%s\" parsed", bad[i]);
	/* More CPUs than room, and a CPU beyond any cpu_set_t. */
	ck_assert_int_eq(agr__parse_cpu_list("0-6", cpus, 6), -EINVAL);
	snprintf(max, sizeof(max), "%d", CPU_SETSIZE);
	ck_assert_int_eq(agr__parse_cpu_list(max, cpus, CPU_SETSIZE), -EINVAL);
	snprintf(max, sizeof(max), "%d", CPU_SETSIZE - 1);
	ck_assert_int_eq(agr__parse_cpu_list(max, cpus, CPU_SETSIZE), 1);
}
END_TEST

static Suite *placement_suite(void)
{
	Suite *s = suite_create("placement");
	TCase *tc = tcase_create("disk interrupts");

	tcase_add_test(tc, virtio_disk_is_its_request_line_cpu);
	tcase_add_test(tc, partition_is_its_disk);
	tcase_add_test(tc, idle_device_counts_every_line);
	tcase_add_test(tc, nvme_lists_every_queue_and_honours_cap);
	tcase_add_test(tc, old_kernel_uses_every_line_and_smp_affinity);
	tcase_add_test(tc, legacy_interrupt_line);
	tcase_add_test(tc, stacked_devices_are_their_disks);
	tcase_add_test(tc, virtual_and_unknown_devices_are_enodev);
	tcase_add_test(tc, public_call_on_this_machine);
	suite_add_tcase(s, tc);
	tc = tcase_create("cpu lists");
	tcase_add_test(tc, parses_cpu_lists);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(placement_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
