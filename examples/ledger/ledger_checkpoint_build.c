/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT */
#endif
#include "ledger_checkpoint_build.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger_journal.h"
#include "util.h"

/*
 * Journal bytes read at a time: large reads, parsed in place, rather
 * than a stdio line at a time (the checkpointer reads every record the
 * server journals once more; its CPU comes out of the workers' on a
 * small machine).
 */
#define BUILD_READ (1u << 20)

void builder_reset(struct checkpoint_builder *b)
{
	size_t i;

	for (i = 0; i < b->nx; i++)
		free(b->x[i].line);
	b->nx = 0;
	accounts_free(b->accounts);
	b->accounts = accounts_new(1);
	free(b->base.pos);
	b->base = (struct checkpoint){ 0 };
	b->loaded = false;
	b->stale = false;
}

static void out_add(struct checkpoint_builder *b, const char *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->out = xrealloc(b->out, b->cap);
	}
	memcpy(b->out + b->len, p, n);
	b->len += n;
}

static void keep_xfer(void *arg, const struct record *rec)
{
	struct checkpoint_builder *b = arg;
	struct xrec *x;
	char line[CHECKPOINT_LINE_MAX];
	size_t n = checkpoint_line(line, 'x', rec);

	if (b->nx == b->x_cap) {
		b->x_cap = b->x_cap ? b->x_cap * 2 : 16;
		b->x = xrealloc(b->x, b->x_cap * sizeof(*b->x));
	}
	x = &b->x[b->nx++];
	x->line = memcpy(xrealloc(NULL, n), line, n);
	x->len = n;
	x->debit = rec->reply == 'd';
	snprintf(x->id, sizeof(x->id), "%s", rec->reqid);
}

int builder_load(struct checkpoint_builder *b)
{
	int ret = checkpoint_load(b->dir, b->accounts, keep_xfer, b, &b->base);

	b->loaded = ret == 0;
	return ret;
}

/*
 * Whether a record is a transfer's half: its tag " #d:", " #t:" or
 * " #r:" (keys, ids and results hold no spaces, so " #" starts the tag).
 */
static bool xfer_line(const char *p, size_t len)
{
	const char *tag = memmem(p, len, " #", 2);

	return tag && (size_t)(tag - p) + 4 <= len && tag[3] == ':' &&
	       (tag[2] == 'd' || tag[2] == 't' || tag[2] == 'r');
}

/*
 * Applies the whole lines of p[0, n) (with b->state, only the
 * transfers' halves: the accounts come from the tables); the bytes
 * they take. Stops at a record that does not parse or apply (*bad set).
 */
static size_t add_lines(struct checkpoint_builder *b, const char *p,
			size_t n, bool *bad)
{
	const char *at = p, *end = p + n, *nl;
	struct record rec;

	while (at < end && (nl = memchr(at, '\n', (size_t)(end - at)))) {
		size_t len = (size_t)(nl - at) + 1;

		if (b->state && !xfer_line(at, len)) { /* in the tables */
			b->events++;
			at += len;
			continue;
		}
		if (!record_parse(at, len, &rec) ||
		    !accounts_apply(b->accounts, &rec)) {
			*bad = true;
			break;
		}
		if (rec.reply == 'd' || rec.reply == 't' || rec.reply == 'r')
			keep_xfer(b, &rec);
		b->events++;
		at += len;
	}
	return (size_t)(at - p);
}

/*
 * Opens a journal to read. Direct (O_DIRECT) where the file system
 * takes it: the journal writes its own blocks direct, and a block left
 * in the page cache by a buffered read (the kernel's readahead goes
 * past what is asked) makes each of the worker's direct writes to it
 * wait for the cache to be invalidated, off its ring (io_uring hands it
 * to a kernel thread). A direct read leaves nothing there.
 */
static int open_journal(const char *path, bool *direct)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);

	*direct = fd >= 0;
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd;
}

static uint64_t block_down(uint64_t n)
{
	return n / JOURNAL_BLOCK * JOURNAL_BLOCK;
}

/*
 * Reads *fd's [from, to) through b->rd in whole blocks, BUILD_READ at a
 * time (bytes past `to` in its last block are not used: the journal may
 * be writing them); where its whole records end. Falls back to
 * buffered reads if a direct one is refused.
 */
static uint64_t add_file(struct checkpoint_builder *b, int *fd,
			 bool direct, const char *path, uint64_t from,
			 uint64_t to)
{
	uint64_t at = block_down(from);
	uint64_t end = block_down(to + JOURNAL_BLOCK - 1);
	size_t skip = (size_t)(from - at), have = 0, used, keep, upto;
	bool bad = false;
	ssize_t n;

	while (!bad && from < to) {
		size_t want = BUILD_READ - have;

		if (want > end - at - have)
			want = (size_t)(end - at - have);
		n = pread(*fd, b->rd + have, want, (off_t)(at + have));
		if (n < 0 && errno == EINVAL && direct) { /* once */
			direct = false;
			close(*fd);
			*fd = open(path, O_RDONLY | O_CLOEXEC);
			continue;
		}
		if (n <= 0)
			break;
		have += (size_t)n;
		upto = to - at < have ? (size_t)(to - at) : have;
		used = add_lines(b, b->rd + skip, upto - skip, &bad);
		from += used;
		skip += used;
		keep = (size_t)block_down(skip); /* blocks wholly applied */
		memmove(b->rd, b->rd + keep, have - keep);
		have -= keep;
		skip -= keep;
		at += keep;
		if (have == BUILD_READ) /* no line end in a whole buffer */
			break;
	}
	return from;
}

int builder_add_journal(struct checkpoint_builder *b, unsigned idx,
			uint64_t from, uint64_t to)
{
	char path[PATH_MAX];
	uint64_t end;
	bool direct;
	int fd;

	snprintf(path, sizeof(path), "%s/journal-%u.log", b->dir, idx);
	fd = open_journal(path, &direct);
	if (fd < 0) {
		warnf("checkpoint: %s: %s", path, strerror(errno));
		return -EIO;
	}
	if (!b->rd && posix_memalign((void **)&b->rd, JOURNAL_BLOCK,
				     BUILD_READ) != 0)
		die("out of memory");
	end = add_file(b, &fd, direct, path, from, to);
	if (fd >= 0)
		close(fd);
	if (end == to)
		return 0;
	warnf("checkpoint: %s: no whole record at %" PRIu64 " (durable to %"
	      PRIu64 ")", path, end, to);
	return -EIO;
}

static int xrec_cmp(const void *a, const void *b)
{
	const struct xrec *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	return c ? c : (int)y->debit - (int)x->debit;
}

void builder_match_xfers(struct checkpoint_builder *b)
{
	size_t i, kept = 0;

	if (b->nx)
		qsort(b->x, b->nx, sizeof(*b->x), xrec_cmp);
	for (i = 0; i < b->nx; i++) {
		if (i + 1 < b->nx && b->x[i].debit && !b->x[i + 1].debit &&
		    strcmp(b->x[i].id, b->x[i + 1].id) == 0) {
			free(b->x[i].line);
			free(b->x[i + 1].line);
			i++;
			continue;
		}
		b->x[kept++] = b->x[i];
	}
	b->nx = kept;
}

static void dump_state(void *arg, const struct record *rec)
{
	struct checkpoint_builder *b = arg;
	char line[CHECKPOINT_LINE_MAX];
	size_t n = checkpoint_line(line, 's', rec);

	out_add(b, line, n);
	b->lines++;
}

void builder_text(struct checkpoint_builder *b, uint64_t seq,
		  uint64_t events, const uint64_t *pos, unsigned npos)
{
	char line[128];
	unsigned i;
	size_t k;
	int n;

	b->len = 0;
	n = snprintf(line, sizeof(line),
		     CHECKPOINT_MAGIC "%" PRIu64 " %u %" PRIu64 "\n", seq, npos,
		     events);
	out_add(b, line, (size_t)n);
	for (i = 0; i < npos; i++) {
		n = snprintf(line, sizeof(line), "pos %u %" PRIu64 "\n", i,
			     pos[i]);
		out_add(b, line, (size_t)n);
	}
	b->lines = 1 + npos;
	if (b->state) {
		out_add(b, b->state->lines, b->state->len);
		b->lines += b->state->count;
	} else {
		accounts_dump(b->accounts, dump_state, b);
	}
	for (k = 0; k < b->nx; k++, b->lines++)
		out_add(b, b->x[k].line, b->x[k].len);
	n = snprintf(line, sizeof(line), "end %zu %08x\n", b->lines,
		     (unsigned)record_crc32(b->out, b->len));
	out_add(b, line, (size_t)n);
}
