/* SPDX-License-Identifier: MIT */
/*
 * prom_reader.c - a strict reader of the Prometheus text format 0.0.4
 * for check_metrics, with what aggring promises beyond the grammar, and
 * its own test: it rejects what it should.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <aggring.h>

#include "metrics_test.h"
#include "testutil.h"

/* ==== a strict reader of the Prometheus text format 0.0.4 ==== */

/*
 * The reader compares the numbers it parsed exactly, on purpose: they
 * are counts far below 2^53, which a double holds exactly, and "close
 * to 6" would let a wrong count through. clang honours GCC's pragma.
 */
#pragma GCC diagnostic ignored "-Wfloat-equal"

static bool reject(struct expo *e, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool reject(struct expo *e, int line, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(e->error, sizeof(e->error), "line %d: ", line);

	va_start(ap, fmt);
	vsnprintf(e->error + n, sizeof(e->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

static bool is_name_start(char c, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':');
}

static bool is_name_char(char c, bool colon)
{
	return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

/*
 * A metric name [a-zA-Z_:][a-zA-Z0-9_:]* (colon) or a label name
 * [a-zA-Z_][a-zA-Z0-9_]* at *p, copied to `out`.
 */
static bool scan_name(const char **p, char *out, size_t cap, bool colon)
{
	const char *s = *p;
	size_t n = 0;

	if (!is_name_start(*s, colon))
		return false;
	while (is_name_char(s[n], colon))
		n++;
	if (n >= cap)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	*p = s + n;
	return true;
}

/* A quoted label value; only \\, \" and \n are escapes. */
static bool scan_value(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t n = 0;
	char c;

	if (*s++ != '"')
		return false;
	while ((c = *s++) != '"') {
		if (c == '\0')
			return false;
		if (c == '\\') {
			c = *s++;
			if (c == 'n')
				c = '\n';
			else if (c != '\\' && c != '"')
				return false;
		}
		if (n + 1 >= cap)
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	*p = s;
	return true;
}

/* All of `s` is one number, as strtod reads it. */
static bool scan_number(const char *s, double *v)
{
	char *end;

	if (*s == '\0' || *s == ' ' || *s == '\t')
		return false;
	*v = strtod(s, &end);
	return *end == '\0';
}

static struct family *find_family(struct expo *e, const char *name)
{
	int i;

	for (i = 0; i < e->nfamilies; i++)
		if (strcmp(e->families[i].name, name) == 0)
			return &e->families[i];
	return NULL;
}

const char *label_value(const struct sample *x, const char *name)
{
	int i;

	for (i = 0; i < x->nlabels; i++)
		if (strcmp(x->labels[i].name, name) == 0)
			return x->labels[i].value;
	return NULL;
}

/* HELP text: any text, with \\ and \n as its only escapes. */
static bool help_text_ok(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (*s == '\\' && *++s != '\\' && *s != 'n')
			return false;
	return true;
}

static bool parse_help(struct expo *e, const char *s, int ln)
{
	char name[64];

	if (!scan_name(&s, name, sizeof(name), true) || *s++ != ' ' ||
	    !help_text_ok(s))
		return reject(e, ln, "bad HELP line");
	return true;
}

static bool parse_type(struct expo *e, const char *s, int ln)
{
	struct family *f;
	char name[64];

	if (!scan_name(&s, name, sizeof(name), true) || *s++ != ' ')
		return reject(e, ln, "bad TYPE line");
	if (strcmp(s, "counter") && strcmp(s, "gauge") &&
	    strcmp(s, "histogram"))
		return reject(e, ln, "unknown type \"%s\"", s);
	if (find_family(e, name))
		return reject(e, ln, "a second TYPE line for %s", name);
	if (e->nfamilies == MAX_FAMILIES)
		return reject(e, ln, "too many families");
	if (e->current)
		e->current->closed = true;
	f = &e->families[e->nfamilies++];
	snprintf(f->name, sizeof(f->name), "%s", name);
	snprintf(f->type, sizeof(f->type), "%s", s);
	e->current = f;
	return true;
}

static bool parse_comment(struct expo *e, const char *s, int ln)
{
	if (strncmp(s, "# HELP ", 7) == 0)
		return parse_help(e, s + 7, ln);
	if (strncmp(s, "# TYPE ", 7) == 0)
		return parse_type(e, s + 7, ln);
	return reject(e, ln, "a comment that is neither HELP nor TYPE");
}

static bool parse_label(struct expo *e, struct sample *x, const char **p,
			int ln)
{
	struct label *l;

	if (x->nlabels == MAX_LABELS)
		return reject(e, ln, "too many labels");
	l = &x->labels[x->nlabels];
	if (!scan_name(p, l->name, sizeof(l->name), false) || *(*p)++ != '=' ||
	    !scan_value(p, l->value, sizeof(l->value)))
		return reject(e, ln, "bad label %d", x->nlabels + 1);
	if (label_value(x, l->name))
		return reject(e, ln, "label %s twice", l->name);
	x->nlabels++;
	return true;
}

/* Its own family, or for name_bucket/_sum/_count that histogram. */
static bool assign_family(struct expo *e, struct sample *x)
{
	static const char *const suffixes[] = { "_bucket", "_sum", "_count" };
	size_t n = strlen(x->name), k, i;
	struct family *f = find_family(e, x->name);
	char base[64];

	if (f) {
		x->family = f;
		x->kind = K_PLAIN;
		return strcmp(f->type, "histogram") != 0;
	}
	for (i = 0; i < ARRAY_SIZE(suffixes); i++) {
		k = strlen(suffixes[i]);
		if (n <= k || strcmp(x->name + n - k, suffixes[i]) != 0)
			continue;
		memcpy(base, x->name, n - k);
		base[n - k] = '\0';
		f = find_family(e, base);
		if (f && strcmp(f->type, "histogram") == 0) {
			x->family = f;
			x->kind = (enum kind)(K_BUCKET + (int)i);
			return true;
		}
	}
	return false;
}

/* The lines of one family come together, after its TYPE line. */
static bool check_grouping(struct expo *e, struct sample *x)
{
	struct family *f = x->family;

	if (f == e->current)
		return true;
	if (f->closed)
		return reject(e, x->line, "%s: lines of %s are not together",
			      x->name, f->name);
	if (e->current)
		e->current->closed = true;
	e->current = f;
	return true;
}

/* le on buckets only, and a number there. */
static bool check_le(struct expo *e, const struct sample *x)
{
	const char *le = label_value(x, "le");
	double v;

	if ((x->kind == K_BUCKET) != (le != NULL))
		return reject(e, x->line, "le label %s",
			      le ? "misplaced" : "missing");
	if (le && !scan_number(le, &v))
		return reject(e, x->line, "le=\"%s\" is not a number", le);
	return true;
}

static bool parse_sample(struct expo *e, const char *s, int ln)
{
	struct sample *x;

	if (e->nsamples == MAX_SAMPLES)
		return reject(e, ln, "too many samples");
	x = &e->samples[e->nsamples];
	memset(x, 0, sizeof(*x));
	x->line = ln;
	if (!scan_name(&s, x->name, sizeof(x->name), true))
		return reject(e, ln, "no metric name");
	if (*s++ != '{')
		return reject(e, ln, "no labels");
	for (;;) {
		if (!parse_label(e, x, &s, ln))
			return false;
		if (*s != ',')
			break;
		s++;
	}
	if (*s++ != '}' || *s++ != ' ')
		return reject(e, ln, "labels not closed by \"} \"");
	if (!scan_number(s, &x->value) || !isfinite(x->value))
		return reject(e, ln, "\"%s\" is not a finite number", s);
	if (!assign_family(e, x))
		return reject(e, ln, "%s: no family with a TYPE line before",
			      x->name);
	if (!check_grouping(e, x) || !check_le(e, x))
		return false;
	e->nsamples++;
	return true;
}

/* Same family and the same labels, le aside. */
static bool same_series(const struct sample *a, const struct sample *b)
{
	int i, na = 0, nb = 0;
	const char *v;

	if (a->family != b->family)
		return false;
	for (i = 0; i < a->nlabels; i++) {
		if (strcmp(a->labels[i].name, "le") == 0)
			continue;
		na++;
		v = label_value(b, a->labels[i].name);
		if (!v || strcmp(v, a->labels[i].value) != 0)
			return false;
	}
	for (i = 0; i < b->nlabels; i++)
		nb += strcmp(b->labels[i].name, "le") != 0;
	return na == nb;
}

/*
 * The series of histogram sample `count`: buckets with rising le and
 * non-decreasing counts, the last le="+Inf" equal to _count, one _sum.
 * Returns the number of buckets, or -1.
 */
static int check_series(struct expo *e, const struct sample *count)
{
	double le, prev_le = -HUGE_VAL, prev = 0;
	int i, buckets = 0, sums = 0;
	bool inf = false;

	for (i = 0; i < e->nsamples; i++) {
		const struct sample *x = &e->samples[i];

		if (!same_series(x, count) || x->kind == K_COUNT)
			continue;
		if (x->kind == K_SUM) {
			sums++;
			continue;
		}
		le = strtod(label_value(x, "le"), NULL);
		if (inf || !(le > prev_le) || x->value < prev) {
			reject(e, x->line, "bucket le=%g (%g) after le=%g (%g)",
			       le, x->value, prev_le, prev);
			return -1;
		}
		inf = isinf(le);
		prev_le = le;
		prev = x->value;
		buckets++;
	}
	if (!inf || prev != count->value) {
		reject(e, count->line, "%s %g, _count %g",
		       inf ? "+Inf bucket" : "no +Inf bucket; the last",
		       prev, count->value);
		return -1;
	}
	if (sums != 1) {
		reject(e, count->line, "%d _sum lines", sums);
		return -1;
	}
	return buckets;
}

/* Every bucket belongs to a series with a _count. */
static bool check_histograms(struct expo *e)
{
	int i, n, buckets = 0, seen = 0;

	for (i = 0; i < e->nsamples; i++) {
		if (e->samples[i].kind == K_BUCKET)
			buckets++;
		if (e->samples[i].kind != K_COUNT)
			continue;
		n = check_series(e, &e->samples[i]);
		if (n < 0)
			return false;
		seen += n;
	}
	if (seen != buckets)
		return reject(e, 0, "%d buckets without a _count",
			      buckets - seen);
	return true;
}

static bool same_labels(const struct sample *a, const struct sample *b)
{
	int i;
	const char *v;

	if (a->nlabels != b->nlabels)
		return false;
	for (i = 0; i < a->nlabels; i++) {
		v = label_value(b, a->labels[i].name);
		if (!v || strcmp(v, a->labels[i].value) != 0)
			return false;
	}
	return true;
}

static bool check_unique(struct expo *e)
{
	int i, j;

	for (i = 0; i < e->nsamples; i++)
		for (j = i + 1; j < e->nsamples; j++)
			if (strcmp(e->samples[i].name,
				   e->samples[j].name) == 0 &&
			    same_labels(&e->samples[i], &e->samples[j]))
				return reject(e, e->samples[j].line,
					      "the same sample as line %d",
					      e->samples[i].line);
	return true;
}

/* Reads `text` into `e`; false (with e->error) on the first fault. */
bool parse_exposition(struct expo *e, const char *text)
{
	const char *p = text, *nl;
	char line[1024];
	size_t len;
	int ln = 0;
	bool ok;

	memset(e, 0, sizeof(*e));
	if (*p == '\0')
		return reject(e, 0, "no text");
	while (*p) {
		ln++;
		nl = strchr(p, '\n');
		if (!nl)
			return reject(e, ln, "no newline at the end");
		len = (size_t)(nl - p);
		if (len == 0 || len >= sizeof(line))
			return reject(e, ln, "empty or overlong line");
		memcpy(line, p, len);
		line[len] = '\0';
		ok = line[0] == '#' ? parse_comment(e, line, ln) :
				      parse_sample(e, line, ln);
		if (!ok)
			return false;
		p = nl + 1;
	}
	return check_histograms(e) && check_unique(e);
}

/* ---- what aggring promises beyond the grammar ---- */

static const char *const allowed_labels[] = {
	"context", "aggregate", "dispatcher", "outcome", "result", "le",
	"scheduler", "worker"
};

static bool label_allowed(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(allowed_labels); i++)
		if (strcmp(name, allowed_labels[i]) == 0)
			return true;
	return false;
}

/*
 * context and aggregate on every sample, with dispatcher or (worker
 * figures) scheduler and worker; no other label but outcome or result
 * (counters) and le; no aggregate id as any value.
 */
bool check_label_policy(struct expo *e, const char *const *agg_ids,
			size_t nids)
{
	const struct sample *x;
	size_t k;
	int i, j;

	for (i = 0; i < e->nsamples; i++) {
		x = &e->samples[i];
		if (!label_value(x, "context") ||
		    !label_value(x, "aggregate") ||
		    !label_value(x, "dispatcher") ==
			    !(label_value(x, "scheduler") &&
			      label_value(x, "worker")))
			return reject(e, x->line, "a naming label is missing");
		if ((label_value(x, "outcome") || label_value(x, "result")) &&
		    strcmp(x->family->type, "counter") != 0)
			return reject(e, x->line, "outcome off a counter");
		for (j = 0; j < x->nlabels; j++) {
			if (!label_allowed(x->labels[j].name))
				return reject(e, x->line, "label %s",
					      x->labels[j].name);
			for (k = 0; k < nids; k++)
				if (strcmp(x->labels[j].value,
					   agg_ids[k]) == 0)
					return reject(e, x->line,
						      "aggregate id %s",
						      agg_ids[k]);
		}
	}
	return true;
}

const struct sample *find_sample(const struct expo *e,
				 const char *name,
				 const char *dispatcher,
				 const char *outcome)
{
	const struct sample *x;
	const char *v;
	int i;

	for (i = 0; i < e->nsamples; i++) {
		x = &e->samples[i];
		v = label_value(x, "outcome");
		if (!v)
			v = label_value(x, "result");
		if (strcmp(x->name, name) == 0 &&
		    label_value(x, "dispatcher") &&
		    strcmp(label_value(x, "dispatcher"), dispatcher) == 0 &&
		    (!outcome || (v && strcmp(v, outcome) == 0)))
			return x;
	}
	return NULL;
}

double value_of(const struct expo *e, const char *name,
		const char *dispatcher, const char *outcome)
{
	const struct sample *x = find_sample(e, name, dispatcher, outcome);

	ck_assert_msg(x != NULL, "no %s for %s (%s)", name, dispatcher,
		      outcome ? outcome : "-");
	return x->value;
}

const char *type_of(struct expo *e, const char *family)
{
	const struct family *f = find_family(e, family);

	return f ? f->type : "(none)";
}

struct expo *new_expo(void)
{
	struct expo *e = calloc(1, sizeof(*e));

	ck_assert_ptr_nonnull(e);
	return e;
}

/* ---- the reader rejects what it should ---- */

static bool parses(const char *text)
{
	struct expo *e = new_expo();
	bool ok = parse_exposition(e, text);

	free(e);
	return ok;
}

/* Texts the reader must refuse, each with why. */
#define M "# TYPE m counter\n"
#define H "# TYPE h histogram\n"
static const struct {
const char *why, *text;
} bad_texts[] = {
	{ "no text", "" },
	{ "no final newline", M "m{a=\"1\"} 3" },
	{ "no TYPE", "m{a=\"1\"} 3\n" },
	{ "no braces", M "m 3\n" },
	{ "no label", M "m{} 3\n" },
	{ "metric name", "# TYPE 1m counter\n" },
	{ "label name", M "m{1a=\"1\"} 3\n" },
	{ "colon in a label name", M "m{a:b=\"1\"} 3\n" },
	{ "unknown escape", M "m{a=\"\\t\"} 3\n" },
	{ "open quote", M "m{a=\"1} 3\n" },
	{ "label twice", M "m{a=\"1\",a=\"2\"} 3\n" },
	{ "not a number", M "m{a=\"1\"} 3x\n" },
	{ "two spaces", M "m{a=\"1\"}  3\n" },
	{ "a timestamp", M "m{a=\"1\"} 3 17\n" },
	{ "unknown type", "# TYPE m summary\n" },
	{ "TYPE twice", M M },
	{ "plain comment", "# a comment\n" },
	{ "blank line", M "\nm{a=\"1\"} 3\n" },
	{ "le off a bucket", M "m{le=\"1\"} 3\n" },
	{ "bucket without le", H "h_bucket{a=\"1\"} 1\n" },
	{ "bare histogram name", H "h{a=\"1\"} 1\n" },
	{ "falling buckets", H "h_bucket{a=\"1\",le=\"1\"} 2\n"
			       "h_bucket{a=\"1\",le=\"+Inf\"} 1\n"
			       "h_sum{a=\"1\"} 1\n"
			       "h_count{a=\"1\"} 1\n" },
	{ "no +Inf bucket", H "h_bucket{a=\"1\",le=\"1\"} 1\n"
			      "h_sum{a=\"1\"} 1\n"
			      "h_count{a=\"1\"} 1\n" },
	{ "+Inf is not _count", H "h_bucket{a=\"1\",le=\"+Inf\"} 2\n"
				  "h_sum{a=\"1\"} 1\n"
				  "h_count{a=\"1\"} 1\n" },
	{ "no _sum", H "h_bucket{a=\"1\",le=\"+Inf\"} 1\n"
		       "h_count{a=\"1\"} 1\n" },
	{ "family apart", M "# TYPE n gauge\nn{a=\"1\"} 1\n"
			    "m{a=\"1\"} 1\n" },
	{ "sample twice", M "m{a=\"1\"} 1\nm{a=\"1\"} 2\n" },
};
#undef M
#undef H

START_TEST(the_reader_is_strict)
{
	static const char *const good =
		"# HELP m_total Help \\\\ text\\n.\n"
		"# TYPE m_total counter\n"
		"m_total{a=\"x\\\"y\\\\z\\n\",b=\"\"} 3\n"
		"# TYPE h histogram\n"
		"h_bucket{a=\"1\",le=\"0.5\"} 1\n"
		"h_bucket{a=\"1\",le=\"+Inf\"} 2\n"
		"h_sum{a=\"1\"} 0.75\n"
		"h_count{a=\"1\"} 2\n";
	size_t i;

	ck_assert(parses(good));
	for (i = 0; i < ARRAY_SIZE(bad_texts); i++)
		ck_assert_msg(!parses(bad_texts[i].text), "accepted: %s",
			      bad_texts[i].why);
}
END_TEST

void prom_reader_tests(TCase *prom)
{
	tcase_add_test(prom, the_reader_is_strict);
}
