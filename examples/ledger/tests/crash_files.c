/* SPDX-License-Identifier: MIT */
/*
 * crash_files.c - check_crash_states' scratch directories and whole
 * files: where a run and its crash states are written, and read back.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crash_states.h"
#include "testutil.h"

/* On a disk when it can: tmpfs may refuse O_DIRECT. */
const char *disk_root(void)
{
	const char *dir = getenv("TMPDIR");

	if (dir && *dir)
		return dir;
	return access("/var/tmp", W_OK) == 0 ? "/var/tmp" : "/tmp";
}

/* Crash states are only read back: in memory when it can. */
const char *state_root(void)
{
	return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : disk_root();
}

char *make_dir(const char *root, const char *what)
{
	char *dir = malloc(PATH_MAX);

	ck_assert_ptr_nonnull(dir);
	snprintf(dir, PATH_MAX, "%s/aggring-%s-XXXXXX", root, what);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	return dir;
}

void remove_dir(char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(dir);
}

char *read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *p;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	p = calloc(1, (size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pread(fd, p, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return p;
}

void write_file(const char *path, const char *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, p, len, 0), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}
