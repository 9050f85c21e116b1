/* SPDX-License-Identifier: MIT */
/*
 * check_dio.c - O_DIRECT help (aggring/dio.h): the alignment of a file
 * in the build directory and of the block device under it, checked by
 * direct reads and writes through it, plain and on a worker's ring;
 * bad arguments; the fallbacks (a block size from BLKSSZGET or a
 * made-up /sys, a partition's disk, the default) on made-up statx
 * answers; aligned buffers and their rounding.
 *
 * Built with src/dio_align.c as well, so that the internal entry point
 * can be given made-up answers and a made-up /sys.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT, statx */
#endif

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <liburing.h>

#include <aggring.h>

#include "dio_align.h"
#include "testutil.h"

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif

/* ---- the log: what the library said, for the test to look at ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[8192];

static void keep_log(agr_log_level level, const char *msg, void *arg)
{
	size_t used;

	(void)level;
	(void)arg;
	pthread_mutex_lock(&log_lock);
	used = strlen(log_text);
	snprintf(log_text + used, sizeof(log_text) - used, "%s\n", msg);
	pthread_mutex_unlock(&log_lock);
}

static void log_start(void)
{
	log_text[0] = '\0';
	agr_set_log_hook(keep_log, NULL);
}

/* The log since log_start() holds `text`; then it starts over. */
static void assert_logged(const char *text)
{
	pthread_mutex_lock(&log_lock);
	if (!strstr(log_text, text))
		ck_abort_msg("no \"%s\" in the log:\n%s", text, log_text);
	log_text[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}

/* ---- a file in the build directory, opened with O_DIRECT ---- */

struct dfile {
	char path[64];
	int fd;
	size_t mem, off;
};

static bool is_pow2(size_t n)
{
	return n && (n & (n - 1)) == 0;
}

/*
 * Creates the file and opens it with O_DIRECT; false (and why, on
 * stderr) if the build directory's file system refuses O_DIRECT.
 */
static bool dfile_open(struct dfile *d)
{
	int tmp;

	snprintf(d->path, sizeof(d->path), "check_dio-XXXXXX");
	tmp = mkstemp(d->path);
	ck_assert_int_ge(tmp, 0);
	close(tmp);
	d->fd = open(d->path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (d->fd < 0) {
		ck_assert_int_eq(errno, EINVAL);
		fprintf(stderr, "skipped: the build directory refuses "
			"O_DIRECT\n");
		unlink(d->path);
		return false;
	}
	log_start();
	ck_assert_int_eq(agr_io_dio_alignment(d->fd, &d->mem, &d->off), 0);
	assert_logged("O_DIRECT alignment");
	ck_assert(is_pow2(d->mem));
	ck_assert(is_pow2(d->off));
	return true;
}

static void dfile_close(struct dfile *d)
{
	close(d->fd);
	unlink(d->path);
}

/* An aligned buffer of `size` bytes, each `fill`. */
static char *buffer(size_t size, size_t align, int fill)
{
	void *p = NULL;

	ck_assert_int_eq(agr_dio_alloc(size, align, &p), 0);
	ck_assert_ptr_nonnull(p);
	memset(p, fill, size);
	return p;
}

/* What statx itself says about `fd`: false if it says nothing. */
static bool kernel_dioalign(int fd, uint32_t *mem, uint32_t *off)
{
	struct statx stx;

	memset(&stx, 0, sizeof(stx));
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0 ||
	    !(stx.stx_mask & STATX_DIOALIGN))
		return false;
	memcpy(mem, (char *)&stx + 0x98, sizeof(*mem));
	memcpy(off, (char *)&stx + 0x9c, sizeof(*off));
	return true;
}

START_TEST(a_file_reports_what_statx_says)
{
	struct dfile d = { .fd = -1 };
	uint32_t mem, off;

	if (!dfile_open(&d))
		return;
	if (kernel_dioalign(d.fd, &mem, &off)) {
		ck_assert_uint_eq(d.mem, mem);
		ck_assert_uint_eq(d.off, off);
		ck_assert_int_eq(agr_io_dio_alignment(d.fd, &d.mem, &d.off), 0);
		assert_logged("from statx(STATX_DIOALIGN)");
	} else {
		fprintf(stderr, "note: no STATX_DIOALIGN here; alignment %zu/"
			"%zu from a fallback\n", d.mem, d.off);
	}
	dfile_close(&d);
}
END_TEST

/* Direct I/O through the answer works; off the answer it is refused. */
START_TEST(direct_io_through_the_alignment_works)
{
	struct dfile d = { .fd = -1 };
	char *out, *in;
	uint32_t mem, off;

	if (!dfile_open(&d))
		return;
	out = buffer(2 * d.off, d.mem, 'a');
	in = buffer(2 * d.off, d.mem, 0);
	memset(out + d.off, 'b', d.off);
	ck_assert_int_eq(pwrite(d.fd, out, 2 * d.off, 0), (ssize_t)(2 * d.off));
	ck_assert_int_eq(pread(d.fd, in, d.off, (off_t)d.off), (ssize_t)d.off);
	ck_assert_int_eq(memcmp(in, out + d.off, d.off), 0);
	/* The kernel's own answer is exact: half of it is refused. */
	if (kernel_dioalign(d.fd, &mem, &off) && off >= 2) {
		ck_assert_int_eq(pwrite(d.fd, out, d.off, (off_t)(d.off / 2)),
				 -1);
		ck_assert_int_eq(errno, EINVAL);
	}
	agr_dio_free(out);
	agr_dio_free(in);
	dfile_close(&d);
}
END_TEST

/* ---- the same on a worker's ring ---- */

struct ring_io {
	struct dfile d;
	char *out, *in;
	int wrote, read;
	struct tu_latch done;
};

static void ring_read(int res, void *arg)
{
	struct ring_io *r = arg;

	r->read = res;
	tu_latch_count_down(&r->done);
}

static void ring_written(int res, void *arg)
{
	struct ring_io *r = arg;
	int ret;

	r->wrote = res;
	ret = agr_io_read(agr_worker_current(), r->d.fd, r->in,
			  (unsigned)r->d.off, r->d.off, ring_read, r);
	if (ret < 0)
		ring_read(ret, r);
}

static void ring_task(void *arg)
{
	struct ring_io *r = arg;
	int ret = agr_io_write(agr_worker_current(), r->d.fd, r->out,
			       (unsigned)(2 * r->d.off), 0, ring_written, r);

	if (ret < 0) {
		r->wrote = ret;
		tu_latch_count_down(&r->done);
	}
}

START_TEST(direct_io_on_a_worker_ring)
{
	agr_named_aggregate named = { "disk", "Direct" };
	agr_supplier *sup = NULL;
	agr_scheduler *s = NULL;
	struct ring_io r = { .d.fd = -1, .wrote = INT_MIN, .read = INT_MIN };

	if (!dfile_open(&r.d))
		return;
	r.out = buffer(2 * r.d.off, r.d.mem, 'x');
	memset(r.out + r.d.off, 'y', r.d.off);
	r.in = buffer(r.d.off, r.d.mem, 0);
	tu_latch_init(&r.done, 1);
	ck_assert_int_eq(agr_supplier_new("dio", 1, &sup), 0);
	ck_assert_int_eq(agr_supplier_get_or_init(sup, &named, &s), 0);
	ck_assert_int_eq(agr_scheduler_schedule(s, 0, ring_task, &r), 0);
	ck_assert(tu_latch_wait(&r.done, TU_LONG_NS));
	ck_assert_int_eq(r.wrote, (int)(2 * r.d.off));
	ck_assert_int_eq(r.read, (int)r.d.off);
	ck_assert_int_eq(memcmp(r.in, r.out + r.d.off, r.d.off), 0);
	ck_assert_int_eq(agr_supplier_stop_gracefully(sup, TU_LONG_NS), 0);
	agr_supplier_free(sup);
	tu_latch_destroy(&r.done);
	agr_dio_free(r.out);
	agr_dio_free(r.in);
	dfile_close(&r.d);
}
END_TEST

/* ---- the block device under the build directory ---- */

/*
 * Opens /dev/NAME of the disk under "." or, where that is not allowed
 * (a container), /dev/loop0 (bound or not); -1 if neither, saying so.
 */
static int open_a_disk(void)
{
	char path[PATH_MAX], text[256], *name;
	struct stat st;
	FILE *f;
	int fd = -1;

	ck_assert_int_eq(stat(".", &st), 0);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/uevent",
		 major(st.st_dev), minor(st.st_dev));
	f = fopen(path, "r");
	while (f && fgets(text, sizeof(text), f)) {
		if (strncmp(text, "DEVNAME=", 8) != 0)
			continue;
		name = text + 8;
		name[strcspn(name, "\n")] = '\0';
		snprintf(path, sizeof(path), "/dev/%s", name);
		fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	}
	if (f)
		fclose(f);
	if (fd < 0)
		fd = open("/dev/loop0", O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		fprintf(stderr, "skipped: no block device to open, neither "
			"the build directory's nor /dev/loop0\n");
	return fd;
}

START_TEST(a_block_device_reports_its_logical_block_size)
{
	size_t mem, off;
	uint64_t bytes = 0;
	char *buf;
	int fd = open_a_disk(), size = 0;

	if (fd < 0)
		return;
	ck_assert_int_eq(ioctl(fd, BLKSSZGET, &size), 0);
	ck_assert_int_eq(ioctl(fd, BLKGETSIZE64, &bytes), 0);
	log_start();
	ck_assert_int_eq(agr_io_dio_alignment(fd, &mem, &off), 0);
	assert_logged("O_DIRECT alignment");
	ck_assert_uint_eq(off, (size_t)size);
	ck_assert(is_pow2(mem) && mem <= off);
	if (bytes >= 2 * off) { /* an unbound loop device has none */
		buf = buffer(off, mem, 0);
		ck_assert_int_eq(pread(fd, buf, off, (off_t)off),
				 (ssize_t)off);
		agr_dio_free(buf);
	}
	close(fd);
}
END_TEST

/* ---- bad arguments ---- */

/* A descriptor number that is not open, for -EBADF. */
static int unused_fd(void)
{
	int fd = 1000;

	while (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
		fd++;
	return fd;
}

/* `fd` is refused with `err`, both outputs zeroed, the log says `why`. */
static void assert_refused(int fd, int err, const char *why)
{
	size_t mem = 7, off = 7;

	log_start();
	ck_assert_int_eq(agr_io_dio_alignment(fd, &mem, &off), err);
	ck_assert_uint_eq(mem, 0);
	ck_assert_uint_eq(off, 0);
	assert_logged(why);
}

START_TEST(bad_arguments_are_refused_and_named)
{
	size_t n = 7;
	int fds[2], dir;

	assert_refused(-1, -EBADF, "fd -1 is negative");
	assert_refused(unused_fd(), -EBADF, "not an open descriptor");
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	assert_refused(fds[0], -EINVAL, "neither a regular file nor a block");
	dir = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dir, 0);
	assert_refused(dir, -EINVAL, "neither a regular file nor a block");

	log_start();
	ck_assert_int_eq(agr_io_dio_alignment(dir, NULL, &n), -EINVAL);
	ck_assert_uint_eq(n, 0);
	assert_logged("mem_align is NULL");
	n = 7;
	ck_assert_int_eq(agr_io_dio_alignment(dir, &n, NULL), -EINVAL);
	ck_assert_uint_eq(n, 0);
	assert_logged("offset_align is NULL");
	ck_assert_str_ne(agr_strerror(-EOPNOTSUPP), "unknown error");
	ck_assert_str_ne(agr_strerror(-EBADF), "unknown error");
	close(fds[0]);
	close(fds[1]);
	close(dir);
}
END_TEST

/* ---- the fallbacks, on made-up answers and a made-up /sys ---- */

static char sys_root[64];

static void make_parents(const char *path)
{
	char dir[PATH_MAX];

	ck_assert_uint_lt(strlen(path), sizeof(dir));
	strcpy(dir, path);
	for (char *p = dir + strlen(sys_root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		ck_assert(mkdir(dir, 0755) == 0 || errno == EEXIST);
		*p = '/';
	}
}

/* Writes `text` to SYS/REL, making its directories. */
static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", sys_root, rel);
	make_parents(path);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

/* SYS/REL, a symbolic link to `target` (relative, as sysfs's are). */
static void put_link(const char *rel, const char *target)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", sys_root, rel);
	make_parents(path);
	ck_assert_int_eq(symlink(target, path), 0);
}

/*
 * A whole disk 253:0 of 512-byte blocks, and 8:0 of 4096-byte blocks
 * with its partition 8:1; 9:0 says nonsense.
 */
static void make_sys(void)
{
	snprintf(sys_root, sizeof(sys_root), "check_dio-sys-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sys_root));
	put("devices/virtual/block/vdz/queue/logical_block_size", "512\n");
	put_link("dev/block/253:0", "../../devices/virtual/block/vdz");
	put("devices/pci0000:00/host0/block/sdz/queue/logical_block_size",
	    "4096\n");
	put("devices/pci0000:00/host0/block/sdz/sdz1/partition", "1\n");
	put_link("dev/block/8:0", "../../devices/pci0000:00/host0/block/sdz");
	put_link("dev/block/8:1",
		 "../../devices/pci0000:00/host0/block/sdz/sdz1");
	put("devices/virtual/block/odd/queue/logical_block_size", "1000\n");
	put_link("dev/block/9:0", "../../devices/virtual/block/odd");
}

static int remove_one(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static void remove_sys(void)
{
	ck_assert_int_eq(nftw(sys_root, remove_one, 8, FTW_DEPTH | FTW_PHYS),
			 0);
}

/* The alignments `f` gives on the made-up /sys, and from where. */
static void assert_alignment(struct agr__dio_facts f, int source,
			     size_t mem, size_t off)
{
	size_t got_mem = 1, got_off = 1;

	ck_assert_int_eq(agr__dio_alignment_of(&f, sys_root, &got_mem,
					       &got_off),
			 source);
	ck_assert_uint_eq(got_mem, mem);
	ck_assert_uint_eq(got_off, off);
}

START_TEST(statx_answers_first)
{
	struct agr__dio_facts f = { .dioalign = true, .mem_align = 4,
				    .offset_align = 512, .blkssz = 4096,
				    .major = 8, .minor = 0 };

	assert_alignment(f, AGR__DIO_STATX, 4, 512);
	f.mem_align = 0;
	f.offset_align = 0;
	assert_alignment(f, -EOPNOTSUPP, 0, 0);
}
END_TEST

/* Half an answer, or one that is not a power of two: not believed. */
START_TEST(a_strange_statx_answer_falls_back)
{
	struct agr__dio_facts f = { .dioalign = true, .mem_align = 0,
				    .offset_align = 512, .major = 253 };

	assert_alignment(f, AGR__DIO_BLOCK_SIZE, 512, 512);
	f.mem_align = 3;
	assert_alignment(f, AGR__DIO_BLOCK_SIZE, 512, 512);
	f.mem_align = 512;
	f.offset_align = 0;
	assert_alignment(f, AGR__DIO_BLOCK_SIZE, 512, 512);
}
END_TEST

START_TEST(without_statx_the_block_size)
{
	struct agr__dio_facts disk = { .major = 253, .minor = 0 };
	struct agr__dio_facts sd = { .major = 8, .minor = 0 };
	struct agr__dio_facts part = { .major = 8, .minor = 1 };
	struct agr__dio_facts blk = { .blkssz = 2048, .major = 253 };

	assert_alignment(disk, AGR__DIO_BLOCK_SIZE, 512, 512);
	assert_alignment(sd, AGR__DIO_BLOCK_SIZE, 4096, 4096);
	assert_alignment(part, AGR__DIO_BLOCK_SIZE, 4096, 4096);
	/* A block device's own BLKSSZGET comes before /sys. */
	assert_alignment(blk, AGR__DIO_BLOCK_SIZE, 2048, 2048);
	blk.blkssz = 100; /* not a block size: /sys then */
	assert_alignment(blk, AGR__DIO_BLOCK_SIZE, 512, 512);
}
END_TEST

START_TEST(neither_known_gives_the_default)
{
	struct agr__dio_facts none = { .major = 0, .minor = 45 };
	struct agr__dio_facts absent = { .major = 259, .minor = 7 };
	struct agr__dio_facts odd = { .major = 9, .minor = 0 };
	static const char *const junk[] = { "", "abc\n", "0\n", "512x\n",
					    "99999999999\n", "256\n" };

	assert_alignment(none, AGR__DIO_DEFAULT, 4096, 4096);
	assert_alignment(absent, AGR__DIO_DEFAULT, 4096, 4096);
	assert_alignment(odd, AGR__DIO_DEFAULT, 4096, 4096);
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		put("devices/virtual/block/odd/queue/logical_block_size",
		    junk[i]);
		assert_alignment(odd, AGR__DIO_DEFAULT, 4096, 4096);
	}
	/* No /sys at all. */
	ck_assert_int_eq(agr__dio_alignment_of(&odd, "/nonexistent/sys",
					       &(size_t){ 0 }, &(size_t){ 0 }),
			 AGR__DIO_DEFAULT);
}
END_TEST

/* A number from a file of this machine's /sys, or 0. */
static unsigned long sys_number(unsigned maj, unsigned min, const char *rel)
{
	char path[PATH_MAX];
	unsigned long n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%s", maj, min, rel);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &n) != 1)
		n = 0;
	fclose(f);
	return n;
}

/* This machine's /sys, for the device under the build directory. */
START_TEST(the_real_sys_is_read_as_laid_out)
{
	struct stat st;
	struct agr__dio_facts f;
	size_t mem, off;
	unsigned long want;

	ck_assert_int_eq(stat(".", &st), 0);
	f = (struct agr__dio_facts){ .major = major(st.st_dev),
				     .minor = minor(st.st_dev) };
	want = sys_number(f.major, f.minor, "queue/logical_block_size");
	if (!want && sys_number(f.major, f.minor, "partition"))
		want = sys_number(f.major, f.minor,
				  "../queue/logical_block_size");
	ck_assert_int_eq(agr__dio_alignment_of(&f, "/sys", &mem, &off),
			 want ? AGR__DIO_BLOCK_SIZE : AGR__DIO_DEFAULT);
	ck_assert_uint_eq(off, want ? want : 4096);
	ck_assert_uint_eq(mem, off);
}
END_TEST

/* ---- buffers ---- */

/* `size` at `align` is aligned, rounded, and its rounding zeroed. */
static void assert_buffer(size_t size, size_t align, size_t want_align,
			  size_t rounded)
{
	void *p = NULL;
	unsigned char *b;

	ck_assert_int_eq(agr_dio_alloc(size, align, &p), 0);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % want_align, 0);
	/* Under ASan exactly what was asked for: the rounded size. */
	ck_assert_uint_ge(malloc_usable_size(p), rounded);
	b = p;
	for (size_t i = size; i < rounded; i++)
		ck_assert_uint_eq(b[i], 0);
	memset(p, 0xa5, rounded); /* every byte of it is ours */
	agr_dio_free(p);
}

START_TEST(buffers_are_aligned_and_rounded)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	assert_buffer(1, 0, page, page);
	assert_buffer(page + 1, 0, page, 2 * page);
	assert_buffer(1000, 512, 512, 1024);
	assert_buffer(4096, 4096, 4096, 4096);
	assert_buffer(5, 4, 4, 8);
	assert_buffer(3, 1, 1, 3);
	assert_buffer(100, 65536, 65536, 65536);
	agr_dio_free(NULL);
}
END_TEST

START_TEST(bad_buffers_are_refused)
{
	static const size_t odd[] = { 3, 24, 4097, SIZE_MAX };
	void *p;

	log_start();
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		p = &p;
		ck_assert_int_eq(agr_dio_alloc(64, odd[i], &p), -EINVAL);
		ck_assert_ptr_null(p);
		assert_logged("align is not a power of two");
	}
	p = &p;
	ck_assert_int_eq(agr_dio_alloc(0, 512, &p), -EINVAL);
	ck_assert_ptr_null(p);
	assert_logged("size is 0");
	ck_assert_int_eq(agr_dio_alloc(512, 512, NULL), -EINVAL);
	assert_logged("out is NULL");
	p = &p;
	ck_assert_int_eq(agr_dio_alloc(SIZE_MAX - 100, 512, &p), -ENOMEM);
	ck_assert_ptr_null(p);
}
END_TEST

static bool ring_available(void)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(2, &ring, 0);

	if (ret < 0) {
		fprintf(stderr, "note: the ring test is left out: cannot create "
			"an io_uring ring: %s\n", strerror(-ret));
		return false;
	}
	io_uring_queue_exit(&ring);
	return true;
}

static Suite *dio_suite(void)
{
	Suite *s = suite_create("dio");
	TCase *files = tcase_create("files");
	TCase *fallback = tcase_create("fallback");
	TCase *buffers = tcase_create("buffers");

	tcase_add_test(files, a_file_reports_what_statx_says);
	tcase_add_test(files, direct_io_through_the_alignment_works);
	if (ring_available())
		tcase_add_test(files, direct_io_on_a_worker_ring);
	tcase_add_test(files, a_block_device_reports_its_logical_block_size);
	tcase_add_test(files, bad_arguments_are_refused_and_named);
	suite_add_tcase(s, files);

	tcase_add_checked_fixture(fallback, make_sys, remove_sys);
	tcase_add_test(fallback, statx_answers_first);
	tcase_add_test(fallback, a_strange_statx_answer_falls_back);
	tcase_add_test(fallback, without_statx_the_block_size);
	tcase_add_test(fallback, neither_known_gives_the_default);
	tcase_add_test(fallback, the_real_sys_is_read_as_laid_out);
	suite_add_tcase(s, fallback);

	tcase_add_test(buffers, buffers_are_aligned_and_rounded);
	tcase_add_test(buffers, bad_buffers_are_refused);
	suite_add_tcase(s, buffers);
	return s;
}

int main(void)
{
	return tu_run(dio_suite());
}
