/* test_stats_schema.c - the rows of the daemon's statistics
 * (src/stats_schema.h, lib/statdef.h): every row is complete, every
 * metric family is defined once and has a stats member, every stats
 * member has a metric or says why not, the exposition reads each row's
 * member, and docs/metrics.md names exactly the families of the rows. */
#include "config.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbuf.h"
#include "hist.h"
#include "metrics.h"
#include "stats_schema.h"

/* Every row of the schema, in order, with its table. */
struct row {
	const struct tfs_stattab *tab;
	const struct tfs_statdef *def;
};

static size_t all_rows(struct row *out, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < tfs_stats_schema_len; i++)
		for (size_t j = 0; j < tfs_stats_schema[i]->n; j++) {
			cr_assert_lt(n, cap);
			out[n++] =
				(struct row){ tfs_stats_schema[i], &tfs_stats_schema[i]->rows[j] };
		}
	return n;
}

static struct row rows[1024];
static size_t nrows;

static void setup(void)
{
	nrows = all_rows(rows, sizeof(rows) / sizeof(rows[0]));
}

TestSuite(stats_schema, .timeout = 30, .init = setup);

#define FOR_ROWS(i, t, r)                                                    \
	for (size_t i = 0; i < nrows; i++)                                   \
		for (const struct tfs_stattab *t = rows[i].tab; t; t = NULL) \
			for (const struct tfs_statdef *r = rows[i].def; r; r = NULL)

static bool valid_name(const char *s)
{
	if (strncmp(s, "tierfs_", 7) != 0)
		return false;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The first row (in the schema's order) of family `name`. */
static const struct tfs_statdef *family_head(const char *name)
{
	FOR_ROWS(i, t, r)
	{
		if (r->metric && strcmp(r->metric, name) == 0)
			return r;
	}
	return NULL;
}

Test(stats_schema, every_row_is_complete)
{
	size_t metrics = 0, json_only = 0;
	FOR_ROWS(i, t, r)
	{
		cr_assert(r->key && r->key[0], "%s: a row without a key", t->section);
		cr_assert((r->help && r->help[0]) || r->kind != TFS_JSON_ONLY,
			  "%s.%s: a member without a metric must say why", t->section, r->key);
		/* keys are unique in their object */
		for (const struct tfs_statdef *o = t->rows; o < r; o++)
			cr_assert(strcmp(o->key, r->key) != 0, "%s.%s twice", t->section, r->key);
		if (r->kind == TFS_JSON_ONLY) {
			cr_assert_null(r->metric, "%s.%s", t->section, r->key);
			cr_assert(!t->metrics_only, "%s.%s: a metrics-only row without a metric",
				  t->section, r->key);
			json_only++;
			continue;
		}
		metrics++;
		cr_assert(r->metric && valid_name(r->metric), "%s.%s: bad name %s", t->section,
			  r->key, r->metric ? r->metric : "(null)");
		switch (r->kind) {
		case TFS_COUNTER:
			cr_assert(ends_with(r->metric, "_total"), "%s", r->metric);
			/* fallthrough */
		case TFS_GAUGE:
			cr_assert(r->vtype == TFS_STAT_U64 || r->vtype == TFS_STAT_I64 ||
					  r->vtype == TFS_STAT_F64 || r->vtype == TFS_STAT_BOOL ||
					  r->vtype == TFS_STAT_OPT,
				  "%s: not a number", r->metric);
			cr_assert(!ends_with(r->metric, "_total") || r->kind == TFS_COUNTER, "%s",
				  r->metric);
			break;
		case TFS_HISTOGRAM:
			cr_assert_eq(r->vtype, TFS_STAT_HIST, "%s", r->metric);
			break;
		case TFS_INFO:
			cr_assert_eq(r->vtype, TFS_STAT_STR, "%s", r->metric);
			break;
		default:
			cr_assert_fail("%s: unknown kind", r->metric);
		}
		/* one family, one definition: the head gives the help, the
		 * others share its kind and label, each with its own value */
		const struct tfs_statdef *head = family_head(r->metric);
		cr_assert_eq(r->help != NULL, head == r, "%s: the help must be on its first row",
			     r->metric);
		cr_assert_eq(r->kind, head->kind, "%s", r->metric);
		cr_assert((r->label == NULL) == (head->label == NULL) &&
				  (r->label == NULL || strcmp(r->label, head->label) == 0),
			  "%s: rows with different labels", r->metric);
		FOR_ROWS(k, t2, o)
		{
			if (o == r || o->metric == NULL || strcmp(o->metric, r->metric) != 0)
				continue;
			cr_assert(r->label != NULL || t->each != NULL,
				  "%s: several rows but no label", r->metric);
			cr_assert(r->label == NULL || strcmp(o->label_value, r->label_value) != 0 ||
					  r->kind == TFS_INFO,
				  "%s: label value %s twice", r->metric, r->label_value);
		}
	}
	cr_assert_gt(metrics, 90);
	cr_assert_gt(json_only, 30);
}

/* ---- a stats object with every row's member ---- */

static struct tfs_hist hist;

/* The value of row `i` of table `ti` in the test object. */
static uint64_t value_of(size_t ti, size_t i)
{
	return 1000 * (ti + 1) + i + 1;
}

/* A snapshot of table `ti` with distinct values (the caller frees it). */
static void *snapshot(size_t ti)
{
	const struct tfs_stattab *t = tfs_stats_schema[ti];
	char *snap = calloc(1, 4096);
	cr_assert_not_null(snap);
	for (size_t i = 0; i < t->n; i++) {
		const struct tfs_statdef *r = &t->rows[i];
		char *p = snap + r->off;
		cr_assert_lt(r->off, 4000);
		switch (r->vtype) {
		case TFS_STAT_U64:
			*(uint64_t *)p = value_of(ti, i);
			break;
		case TFS_STAT_I64:
			*(int64_t *)p = (int64_t)value_of(ti, i);
			break;
		case TFS_STAT_F64:
			*(double *)p = (double)value_of(ti, i) + 0.5;
			break;
		case TFS_STAT_BOOL:
			*(bool *)p = true;
			break;
		case TFS_STAT_STR:
			*(const char **)p = r->key;
			break;
		case TFS_STAT_OPT:
			*(struct tfs_stat_opt *)p = (struct tfs_stat_opt){ value_of(ti, i), true };
			break;
		case TFS_STAT_HIST:
			*(const struct tfs_hist **)p = &hist;
			break;
		case TFS_STAT_JSON:
			*(struct json_object **)p = json_object_new_object();
			break;
		}
	}
	return snap;
}

/* The object at `path` of `root`, made if missing. */
static struct json_object *object_at(struct json_object *root, const char *path)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	struct json_object *o = root;
	for (char *save = NULL, *part = strtok_r(buf, ".", &save); part;
	     part = strtok_r(NULL, ".", &save)) {
		struct json_object *c;
		if (!json_object_object_get_ex(o, part, &c)) {
			c = json_object_new_object();
			json_object_object_add(o, part, c);
		}
		o = c;
	}
	return o;
}

/* Every table's members, at their sections; per-member tables ("each")
 * in a member named "x<table>". */
static struct json_object *full_stats(void)
{
	struct json_object *root = json_object_new_object();
	tfs_hist_add(&hist, 3000000);
	for (size_t ti = 0; ti < tfs_stats_schema_len; ti++) {
		const struct tfs_stattab *t = tfs_stats_schema[ti];
		struct json_object *o = object_at(root, t->section);
		void *snap = snapshot(ti);
		if (t->each) {
			char name[32];
			snprintf(name, sizeof(name), "x%zu", ti);
			o = object_at(o, name);
		}
		cr_assert_eq(tfs_stat_json(o, t, snap), 0);
		free(snap);
	}
	return root;
}

/* Whether member `key` of the object of table `ti` (its member object
 * for a per-member table) is a row of a table of that object, or the
 * object of another table. */
static bool has_row(size_t ti, const char *key)
{
	const struct tfs_stattab *t = tfs_stats_schema[ti];
	char path[160], name[32];
	snprintf(path, sizeof(path), "%s%s%s", t->section, t->section[0] ? "." : "", key);
	for (size_t o = 0; o < tfs_stats_schema_len; o++) {
		const struct tfs_stattab *u = tfs_stats_schema[o];
		if (strcmp(u->section, path) == 0)
			return true;
		if (strcmp(u->section, t->section) != 0)
			continue;
		snprintf(name, sizeof(name), "x%zu", o);
		if (!t->each && u->each && strcmp(key, name) == 0)
			return true;
		if ((u->each != NULL) != (t->each != NULL))
			continue;
		for (size_t i = 0; i < u->n; i++)
			if (strcmp(u->rows[i].key, key) == 0)
				return true;
	}
	return false;
}

Test(stats_schema, every_row_has_its_member_and_its_sample)
{
	struct json_object *st = full_stats();
	struct tfs_dbuf out;
	tfs_dbuf_init(&out, 16u << 20);
	cr_assert_eq(tfs_metrics_render(st, "m", &out), 0);
	const char *text = tfs_dbuf_str(&out);

	for (size_t ti = 0; ti < tfs_stats_schema_len; ti++) {
		const struct tfs_stattab *t = tfs_stats_schema[ti];
		char name[32], want[512], lab[160] = "";
		snprintf(name, sizeof(name), "x%zu", ti);
		struct json_object *sec = object_at(st, t->section), *v;
		if (t->each)
			sec = object_at(sec, name);
		/* every member of the object is a row */
		json_object_object_foreach(sec, key, val)
		{
			(void)val;
			cr_assert(has_row(ti, key), "%s.%s: a member without a row", t->section,
				  key);
		}
		for (size_t i = 0; i < t->n; i++) {
			const struct tfs_statdef *r = &t->rows[i];
			cr_assert(json_object_object_get_ex(sec, r->key, &v), "%s.%s missing",
				  t->section, r->key);
			if (r->kind == TFS_JSON_ONLY)
				continue;
			if (t->each)
				snprintf(lab, sizeof(lab), ",%s=\"%s\"", t->each, name);
			else if (r->label && r->kind != TFS_INFO)
				snprintf(lab, sizeof(lab), ",%s=\"%s\"", r->label, r->label_value);
			else
				lab[0] = '\0';
			switch (r->kind) {
			case TFS_HISTOGRAM:
				snprintf(want, sizeof(want), "\n%s_count{mount=\"m\"%s} 1\n",
					 r->metric, lab);
				break;
			case TFS_INFO:
				snprintf(want, sizeof(want),
					 "\n%s{mount=\"m\",%s=\"%s\",%s=\"%s\"} 1\n", r->metric,
					 r->label, r->key, r->label_value, r->label_value);
				break;
			default:
				if (r->vtype == TFS_STAT_BOOL)
					snprintf(want, sizeof(want), "\n%s{mount=\"m\"%s} 1\n",
						 r->metric, lab);
				else if (r->vtype == TFS_STAT_F64)
					snprintf(want, sizeof(want), "\n%s{mount=\"m\"%s} %.15g\n",
						 r->metric, lab, (double)value_of(ti, i) + 0.5);
				else if (r->ms_to_s)
					snprintf(want, sizeof(want), "\n%s{mount=\"m\"%s} %.15g\n",
						 r->metric, lab, (double)value_of(ti, i) / 1000.0);
				else
					snprintf(want, sizeof(want),
						 "\n%s{mount=\"m\"%s} %" PRIu64 "\n", r->metric,
						 lab, value_of(ti, i));
			}
			cr_assert_not_null(strstr(text, want), "%s.%s: no sample %s", t->section,
					   r->key, want + 1);
		}
	}
	/* one HELP and TYPE per family */
	FOR_ROWS(k, t, r)
	{
		char help[160];
		if (r->help == NULL || r->kind == TFS_JSON_ONLY)
			continue;
		snprintf(help, sizeof(help), "# HELP %s ", r->metric);
		const char *first = strstr(text, help);
		cr_assert_not_null(first, "%s: no HELP", r->metric);
		cr_assert_null(strstr(first + 1, help), "%s: HELP twice", r->metric);
	}
	tfs_dbuf_free(&out);
	json_object_put(st);
}

/* The members of family `name`, as docs/metrics.md's last column has
 * them ("ram.hits, ssd.hits"; "backend.*.requests" for per-member rows). */
static void members_of(const char *name, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = '\0';
	FOR_ROWS(i, t, r)
	{
		if (r->metric == NULL || strcmp(r->metric, name) != 0)
			continue;
		len += (size_t)snprintf(buf + len, cap - len, "%s%s%s%s%s%s%s", len ? ", " : "",
					t->section, t->section[0] ? "." : "", t->each ? "*." : "",
					r->key, r->kind == TFS_INFO ? ", " : "",
					r->kind == TFS_INFO ? r->label_value : "");
		cr_assert_lt(len, cap);
	}
}

Test(stats_schema, docs_name_every_family)
{
	char path[4096], line[1024];
	snprintf(path, sizeof(path), "%s/docs/metrics.md", TFS_SRCDIR);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	size_t documented = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[128];
		if (sscanf(line, "| `%127[a-z0-9_]` |", name) != 1)
			continue;
		documented++;
		cr_assert_not_null(family_head(name), "docs/metrics.md: %s has no row", name);
		/* the last column: the members, as the rows have them */
		char want[1024], *end = strrchr(line, '|'), *col;
		cr_assert_not_null(end);
		*end = '\0';
		col = strrchr(line, '|');
		cr_assert_not_null(col);
		col++;
		while (*col == ' ' || *col == '`')
			col++;
		for (end = col + strlen(col); end > col && (end[-1] == ' ' || end[-1] == '`');)
			*--end = '\0';
		members_of(name, want, sizeof(want));
		cr_assert_str_eq(col, want, "docs/metrics.md: %s from `%s`, the rows say `%s`",
				 name, col, want);
	}
	fclose(f);
	size_t families = 0;
	FOR_ROWS(k, t, r)
	{
		if (r->help == NULL || r->kind == TFS_JSON_ONLY)
			continue;
		families++;
		/* the docs name it in a table row */
		char want[160];
		snprintf(want, sizeof(want), "| `%s` |", r->metric);
		f = fopen(path, "r");
		bool found = false;
		while (!found && fgets(line, sizeof(line), f))
			found = strncmp(line, want, strlen(want)) == 0;
		fclose(f);
		cr_assert(found, "%s is not in docs/metrics.md", r->metric);
	}
	cr_assert_eq(documented, families);
}
