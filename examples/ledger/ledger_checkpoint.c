/* SPDX-License-Identifier: MIT */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fallocate, FALLOC_FL_PUNCH_HOLE, SEEK_DATA */
#endif
#include "ledger_checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledger_checkpoint_build.h"
#include "ledger_journal.h"
#include "util.h"

/* ---- finding them ---- */

/* Whether `name` is checkpoint-SEQ.ckpt; sets *seq. */
static bool is_checkpoint_name(const char *name, uint64_t *seq)
{
	int end = 0;

	return sscanf(name, "checkpoint-%" SCNu64 ".ckpt%n", seq, &end) == 1 &&
	       end > 0 && name[end] == '\0' && *seq > 0;
}

static int seq_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The checkpoints' SEQs in dir, newest first; *n of them, to free(). */
static int list_checkpoints(const char *dir, uint64_t **seqs, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	uint64_t seq;

	*seqs = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		if (!is_checkpoint_name(e->d_name, &seq))
			continue;
		*seqs = xrealloc(*seqs, (*n + 1) * sizeof(**seqs));
		(*seqs)[(*n)++] = seq;
	}
	closedir(d);
	if (*n)
		qsort(*seqs, *n, sizeof(**seqs), seq_desc);
	return 0;
}

static void checkpoint_path(char *path, size_t cap, const char *dir,
			    uint64_t seq, const char *ext)
{
	snprintf(path, cap, "%s/checkpoint-%020" PRIu64 ".%s", dir, seq, ext);
}

/* The whole of the file at path, in *buf (to free()), *len bytes. */
static int read_whole(const char *path, char **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t n;
	size_t got = 0;

	*buf = NULL;
	if (fd < 0 || fstat(fd, &st) < 0) {
		n = -errno;
		if (fd >= 0)
			close(fd);
		return (int)n;
	}
	*buf = xrealloc(NULL, (size_t)st.st_size + 1);
	while (got < (size_t)st.st_size &&
	       (n = read(fd, *buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	close(fd);
	*len = got;
	(*buf)[got] = '\0';
	return 0;
}

/* ---- reading one ---- */

/* A checkpoint's text, checked: where its parts are. */
struct parsed {
	uint64_t seq, events;
	uint64_t *pos;
	unsigned npos;
	const char *body, *body_end; /* the "s" and "x" lines */
	uint64_t records;
};

/* The line at *p (up to end), advancing *p past its '\n'; NULL if none. */
static const char *next_line(const char **p, const char *end, size_t *len)
{
	const char *line = *p, *nl;

	if (line >= end)
		return NULL;
	nl = memchr(line, '\n', (size_t)(end - line));
	if (!nl)
		return NULL;
	*len = (size_t)(nl - line) + 1;
	*p = nl + 1;
	return line;
}

/* Header and positions; false if they are not as written. */
static bool parse_head(struct parsed *c, const char **p, const char *end)
{
	unsigned nj, i, idx;
	uint64_t off;
	size_t len;
	const char *line = next_line(p, end, &len);
	int n = 0;

	if (!line || strncmp(line, CHECKPOINT_MAGIC, strlen(CHECKPOINT_MAGIC)) ||
	    sscanf(line, CHECKPOINT_MAGIC "%" SCNu64 " %u %" SCNu64 "%n",
		   &c->seq, &nj, &c->events, &n) != 3 || line[n] != '\n' ||
	    nj > 1u << 20)
		return false;
	c->pos = xcalloc(nj ? nj : 1, sizeof(*c->pos));
	c->npos = nj;
	for (i = 0; i < nj; i++) {
		line = next_line(p, end, &len);
		n = 0;
		if (!line || sscanf(line, "pos %u %" SCNu64 "%n", &idx, &off,
				    &n) != 2 || line[n] != '\n' || idx != i)
			return false;
		c->pos[i] = off;
	}
	return true;
}

/* The "end LINES CRC" line at [p, end): whether it matches. */
static bool parse_tail(const char *start, const char *p, const char *end,
		       uint64_t lines)
{
	uint64_t want;
	unsigned crc;
	int n = 0;

	if (sscanf(p, "end %" SCNu64 " %8x%n", &want, &crc, &n) != 2 ||
	    p + n + 1 != end || p[n] != '\n' || want != lines)
		return false;
	return crc == record_crc32(start, (size_t)(p - start));
}

/*
 * Checks the whole of buf[0, len) (len + 1 bytes, NUL-terminated):
 * header, every record's own CRC, the line count and the file's CRC.
 */
static bool parse_checkpoint(const char *buf, size_t len, struct parsed *c)
{
	const char *p = buf, *end = buf + len, *line;
	struct record rec;
	size_t n;

	*c = (struct parsed){ 0 };
	if (!parse_head(c, &p, end))
		return false;
	c->body = p;
	while ((line = next_line(&p, end, &n)) != NULL &&
	       strncmp(line, "end ", 4) != 0) {
		if (n < 3 || (line[0] != 's' && line[0] != 'x') ||
		    line[1] != ' ' || !record_parse(line + 2, n - 2, &rec))
			return false;
		c->records++;
	}
	if (!line)
		return false;
	c->body_end = line;
	return parse_tail(buf, line, end, 1 + c->npos + c->records);
}

/* Applies a checked checkpoint's records. */
static void apply_checkpoint(const struct parsed *c, struct accounts *a,
			     void (*xfer)(void *, const struct record *),
			     void *arg)
{
	const char *p = c->body, *line;
	struct record rec;
	size_t n;

	while (p < c->body_end && (line = next_line(&p, c->body_end, &n))) {
		if (!record_parse(line + 2, n - 2, &rec))
			die("checkpoint changed while read"); /* checked */
		if (line[0] == 'x')
			xfer(arg, &rec);
		else if (!accounts_apply(a, &rec))
			die("checkpoint %" PRIu64 ": the balance of %s "
			    "overflows", c->seq, rec.key);
	}
}

/* Reads checkpoint seq; true if it is valid (then *c is filled). */
static bool read_checkpoint(const char *dir, uint64_t seq, char **buf,
			    size_t *len, struct parsed *c)
{
	char path[PATH_MAX];
	int ret;

	checkpoint_path(path, sizeof(path), dir, seq, "ckpt");
	ret = read_whole(path, buf, len);
	if (ret < 0) {
		warnf("%s: %s; using the one before", path, strerror(-ret));
		return false;
	}
	if (parse_checkpoint(*buf, *len, c) && c->seq == seq)
		return true;
	warnf("%s: torn or corrupt (%zu bytes); using the one before", path,
	      *len);
	free(c->pos);
	free(*buf);
	*buf = NULL;
	return false;
}

int checkpoint_load(const char *dir, struct accounts *accounts,
		    void (*xfer)(void *arg, const struct record *rec),
		    void *arg, struct checkpoint *cp)
{
	uint64_t *seqs;
	size_t n, i, len;
	struct parsed c;
	char *buf;
	int ret = list_checkpoints(dir, &seqs, &n);

	*cp = (struct checkpoint){ 0 };
	if (ret < 0)
		return ret;
	for (i = 0; i < n; i++) {
		if (!read_checkpoint(dir, seqs[i], &buf, &len, &c)) {
			cp->skipped++;
			continue;
		}
		apply_checkpoint(&c, accounts, xfer, arg);
		cp->seq = c.seq;
		cp->pos = c.pos;
		cp->npos = c.npos;
		cp->size = len;
		cp->records = c.records;
		cp->events = c.events;
		free(buf);
		break;
	}
	free(seqs);
	return 0;
}

/* Reads the header of checkpoint seq into prev; false if it has none. */
static bool read_head(const char *dir, uint64_t seq, struct checkpoint *prev)
{
	char path[PATH_MAX], *buf;
	struct parsed c = { 0 };
	const char *p;
	size_t len = 0;
	bool ok;

	checkpoint_path(path, sizeof(path), dir, seq, "ckpt");
	if (read_whole(path, &buf, &len) < 0) {
		free(buf);
		return false;
	}
	p = buf;
	ok = parse_head(&c, &p, buf + len) && c.seq == seq;
	if (ok) {
		*prev = (struct checkpoint){ .seq = seq, .pos = c.pos,
					     .npos = c.npos, .size = len,
					     .events = c.events };
		c.pos = NULL;
	}
	free(c.pos);
	free(buf);
	return ok;
}

int checkpoint_before(const char *dir, uint64_t seq, struct checkpoint *prev)
{
	uint64_t *seqs;
	size_t n, i = 0;
	int ret = list_checkpoints(dir, &seqs, &n);

	*prev = (struct checkpoint){ 0 };
	if (ret < 0)
		return ret;
	while (i < n && seqs[i] >= seq)
		i++;
	if (i < n)
		read_head(dir, seqs[i], prev);
	free(seqs);
	return 0;
}

bool checkpoint_journal_intact(int fd, uint64_t from)
{
	struct stat st;
	off_t data;

	if (fstat(fd, &st) < 0 || from >= (uint64_t)st.st_size)
		return true; /* nothing there to lose */
	data = lseek(fd, (off_t)from, SEEK_DATA);
	if (data < 0)
		return errno == EINVAL; /* no SEEK_DATA here: no holes either */
	return (uint64_t)data <= from;
}

/* ---- the disk steps ---- */

struct cycle {
	const char *dir;
	const struct checkpoint_options *o;
	uint64_t freed;
};

static void trace(const struct cycle *c, enum checkpoint_op op,
		  const char *path, const char *to, const void *data,
		  uint64_t len)
{
	if (c->o && c->o->trace)
		c->o->trace->op(c->o->trace->arg, op, path, to, data, len);
}

/* Writes the new file at tmp; fsync'd unless the planted bug says not. */
static int write_tmp(const struct cycle *c, const char *tmp,
		     const struct checkpoint_builder *b)
{
	int fd, ret = 0;
	size_t done = 0;
	ssize_t n = 0;

	trace(c, CHECKPOINT_OP_WRITE, tmp, NULL, b->out, b->len);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (done < b->len && (n = write(fd, b->out + done,
					    b->len - done)) > 0)
		done += (size_t)n;
	if (done < b->len)
		ret = n < 0 ? -errno : -ENOSPC;
	if (ret == 0 && !(c->o && c->o->bug == CHECKPOINT_BUG_NO_FSYNC)) {
		trace(c, CHECKPOINT_OP_FSYNC, tmp, NULL, NULL, 0);
		if (fsync(fd) < 0)
			ret = -errno;
	}
	close(fd);
	return ret;
}

static int sync_dir(const struct cycle *c)
{
	int fd, ret = 0;

	trace(c, CHECKPOINT_OP_SYNC_DIR, c->dir, NULL, NULL, 0);
	fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Frees fd's [0, len); adds the bytes the disk got back to *freed. */
static int punch(int fd, uint64_t len, uint64_t *freed)
{
	struct stat before, after;

	if (fstat(fd, &before) < 0 ||
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		      (off_t)len) < 0 ||
	    fstat(fd, &after) < 0)
		return -1;
	if (after.st_blocks < before.st_blocks)
		*freed += (uint64_t)(before.st_blocks - after.st_blocks) * 512u;
	return 0;
}

/* Frees journal-I.log's whole blocks before pos[I]. */
static void punch_journals(struct cycle *c, const uint64_t *pos,
			   unsigned npos)
{
	static bool warned;
	char path[PATH_MAX];
	unsigned i;

	for (i = 0; i < npos; i++) {
		uint64_t len = pos[i] / JOURNAL_BLOCK * JOURNAL_BLOCK;
		int fd;

		if (!len)
			continue;
		snprintf(path, sizeof(path), "%s/journal-%u.log", c->dir, i);
		trace(c, CHECKPOINT_OP_PUNCH, path, NULL, NULL, len);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if ((fd < 0 || punch(fd, len, &c->freed) < 0) && !warned) {
			warned = true;
			warnf("checkpoint: freeing %s: %s (the journal keeps "
			      "its space)", path, strerror(errno));
		}
		if (fd >= 0)
			close(fd);
	}
}

/* Unlinks every checkpoint but `keep` and `prev`, and stale .tmp files. */
static int unlink_others(const struct cycle *c, uint64_t keep, uint64_t prev)
{
	uint64_t *seqs;
	size_t n, i;
	char path[PATH_MAX];
	bool any = false;
	int ret = list_checkpoints(c->dir, &seqs, &n);

	for (i = 0; ret == 0 && i < n; i++) {
		if (seqs[i] == keep || seqs[i] == prev)
			continue;
		checkpoint_path(path, sizeof(path), c->dir, seqs[i], "ckpt");
		trace(c, CHECKPOINT_OP_UNLINK, path, NULL, NULL, 0);
		if (unlink(path) < 0 && errno != ENOENT)
			ret = -errno;
		any = true;
	}
	free(seqs);
	return ret == 0 && any ? sync_dir(c) : ret;
}

/* Steps 1 to 4 (ledger_checkpoint.h) for the text in b. */
static int commit(struct cycle *c, const struct checkpoint_builder *b, uint64_t seq,
		  const struct checkpoint *base, const uint64_t *pos,
		  unsigned npos)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	int ret;

	checkpoint_path(tmp, sizeof(tmp), c->dir, seq, "tmp");
	checkpoint_path(path, sizeof(path), c->dir, seq, "ckpt");
	if (c->o && c->o->bug == CHECKPOINT_BUG_EARLY_PUNCH)
		punch_journals(c, pos, npos);
	ret = write_tmp(c, tmp, b);
	if (ret == 0) {
		trace(c, CHECKPOINT_OP_RENAME, tmp, path, NULL, 0);
		if (rename(tmp, path) < 0)
			ret = -errno;
	}
	if (ret == 0)
		ret = sync_dir(c);
	if (ret < 0) {
		warnf("checkpoint %s: %s", path, strerror(-ret));
		unlink(tmp);
		return ret;
	}
	ret = unlink_others(c, seq, base->seq);
	if (ret < 0)
		warnf("checkpoint: removing old ones: %s", strerror(-ret));
	if (base->seq)
		punch_journals(c, base->pos, base->npos);
	return 0;
}

/* The positions of the new checkpoint: ends, else the base's. */
static unsigned new_positions(const struct checkpoint *base,
			      const uint64_t *ends, unsigned nends,
			      uint64_t **pos)
{
	unsigned n = nends > base->npos ? nends : base->npos, i;

	*pos = xcalloc(n ? n : 1, sizeof(**pos));
	for (i = 0; i < n; i++)
		(*pos)[i] = i < nends && ends[i] > checkpoint_pos(base, i) ?
				    ends[i] :
				    checkpoint_pos(base, i);
	return n;
}

/*
 * Whether checkpoint b->base is on the disk as loaded or written: its
 * size, and its last line's count and CRC over the rest (a cheap
 * check, not a parse: the builder's state is what it holds).
 */
static bool base_intact(const struct checkpoint_builder *b)
{
	char path[PATH_MAX], *buf, *last;
	size_t len;
	bool ok;

	checkpoint_path(path, sizeof(path), b->dir, b->base.seq, "ckpt");
	if (read_whole(path, &buf, &len) < 0) {
		free(buf);
		return false;
	}
	ok = len == b->base.size && len >= 2 && buf[len - 1] == '\n';
	if (ok) {
		buf[len - 1] = '\0';
		last = strrchr(buf, '\n');
		buf[len - 1] = '\n';
		ok = last && parse_tail(buf, last + 1, buf + len,
					1 + b->base.npos + b->base.records);
	}
	free(buf);
	return ok;
}

/*
 * Whether b's state is still that of the newest checkpoint in the
 * directory (none was written, removed or changed behind its back);
 * *next is the SEQ after every checkpoint there, valid or not.
 */
static bool builder_current(const struct checkpoint_builder *b,
			    uint64_t *next)
{
	uint64_t *seqs;
	size_t n;
	bool same;

	*next = 1;
	if (list_checkpoints(b->dir, &seqs, &n) < 0)
		return false;
	if (n)
		*next = seqs[0] + 1;
	same = n ? seqs[0] == b->base.seq : b->base.seq == 0;
	free(seqs);
	if (!b->loaded || !same || !b->base.seq)
		return b->loaded && same;
	return base_intact(b);
}

/* The checkpoint just made current is what b's state holds now. */
static void become_base(struct checkpoint_builder *b, uint64_t seq,
			uint64_t *pos, unsigned npos)
{
	free(b->base.pos);
	b->base.seq = seq;
	b->base.pos = pos;
	b->base.npos = npos;
	b->base.size = b->len;
	b->base.records = b->lines - 1 - npos;
	b->base.events += b->events;
	b->base.skipped = 0;
}

struct checkpoint_builder *checkpoint_builder_new(const char *dir)
{
	struct checkpoint_builder *b = xcalloc(1, sizeof(*b));
	size_t n = strlen(dir) + 1;

	b->dir = memcpy(xrealloc(NULL, n), dir, n);
	b->accounts = accounts_new(1);
	return b;
}

void checkpoint_builder_free(struct checkpoint_builder *b)
{
	if (!b)
		return;
	builder_reset(b);
	accounts_free(b->accounts);
	free(b->x);
	free(b->out);
	free(b->rd);
	free(b->dir);
	free(b);
}

int checkpoint_builder_take(struct checkpoint_builder *b,
			    const uint64_t *ends, unsigned nends,
			    const struct checkpoint_options *o,
			    struct checkpoint_stats *st)
{
	return checkpoint_builder_take_state(b, ends, nends, NULL, o, st);
}

int checkpoint_builder_take_state(struct checkpoint_builder *b,
				  const uint64_t *ends, unsigned nends,
				  const struct checkpoint_state *state,
				  const struct checkpoint_options *o,
				  struct checkpoint_stats *st)
{
	struct cycle c = { .dir = b->dir, .o = o };
	uint64_t t0 = now_ns(), *pos = NULL, seq;
	unsigned npos = 0, i;
	int ret = 0;

	if (!builder_current(b, &seq) || (b->stale && !state)) {
		builder_reset(b);
		ret = builder_load(b);
	}
	b->state = state;
	b->events = 0;
	for (i = 0; ret == 0 && i < nends; i++)
		if (ends[i] > checkpoint_pos(&b->base, i))
			ret = builder_add_journal(b, i,
						  checkpoint_pos(&b->base, i),
						  ends[i]);
	if (ret == 0) {
		builder_match_xfers(b);
		npos = new_positions(&b->base, ends, nends, &pos);
		builder_text(b, seq, b->base.events + b->events, pos, npos);
		ret = commit(&c, b, seq, &b->base, pos, npos);
	}
	b->state = NULL;
	if (ret < 0) { /* the state may be past the disk's: load again */
		free(pos);
		builder_reset(b);
		return ret;
	}
	b->stale = b->stale || state;
	if (st)
		*st = (struct checkpoint_stats){
			.seq = seq, .size = b->len,
			.records = b->lines - 1 - npos, .events = b->events,
			.journal_pos = checkpoint_pos_sum(
				&(struct checkpoint){ .pos = pos, .npos = npos }),
			.base_pos = checkpoint_pos_sum(&b->base),
			.freed = c.freed, .duration_ns = now_ns() - t0,
		};
	become_base(b, seq, pos, npos);
	return 0;
}

int checkpoint_take(const char *dir, const uint64_t *ends, unsigned nends,
		    const struct checkpoint_options *o,
		    struct checkpoint_stats *st)
{
	struct checkpoint_builder *b = checkpoint_builder_new(dir);
	int ret = checkpoint_builder_take(b, ends, nends, o, st);

	checkpoint_builder_free(b);
	return ret;
}
