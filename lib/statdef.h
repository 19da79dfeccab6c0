/* statdef.h - typed statistics: each member of the stats JSON (`tierfs
 * stats --json`) and each Prometheus sample is defined once, by a row of a
 * table, and both are built from that row.
 *
 * The model.  A part of the code that keeps counters (the RAM tier, the
 * backend, the FUSE layer...) owns one object of the stats JSON, its
 * section ("ram", "backend.near", "" for the top level).  For it, it
 * declares:
 *
 *   - a snapshot struct, one plain field per member (uint64_t, int64_t,
 *     double, bool, const char *, a histogram, a JSON value it builds);
 *   - a table (struct tfs_stattab) of rows (struct tfs_statdef), one per
 *     field, made with TFS_STAT(): the row names the field, so the JSON
 *     key is the field's name and the compiler checks that the field
 *     exists; the row also says what the member is as a metric: a counter,
 *     a gauge or a histogram with its Prometheus name, help text and
 *     label, or "JSON only" with the reason it has no metric.
 *
 * To report, the owner fills a snapshot (under its lock) and calls
 * tfs_stat_add_section() (or tfs_stat_json() on an object it builds),
 * which adds one member per row, in the rows' order, named by the row and
 * placed under the section's name.  The Prometheus exposition
 * (src/metrics.c) walks the same rows and reads each sample at the row's
 * section and key in the stats JSON, so a member renamed is renamed in
 * both.  src/stats_schema.c lists every table of the daemon;
 * tests/unit/test_stats_schema.c checks the rows (each family has a
 * member, each member a family or a reason, docs/metrics.md matches them)
 * and tests/integration/test_ops.py a live daemon against the docs.
 *
 * Families.  Several rows may feed one metric family: rows of one table
 * or of several (tierfs_cache_hits_total: the ram and ssd tables), each
 * with its own label value.  The family's help text is given by exactly
 * one of its rows (the first in the schema's order); the others give
 * NULL.  A table whose `each` is set describes every member object of its
 * section instead (the per-operation objects of "backend" and "fuse"):
 * each sample gets the label `each` with the member's name.  A table
 * marked metrics_only builds no JSON: its rows name members another
 * table builds (tierfs_near_far_bytes_total reads far's GET bytes).
 *
 * Adding a counter: a field in the snapshot struct, a row in the table
 * (in the place the member should take), the field filled where the
 * snapshot is; and, for a metric, a line in docs/metrics.md (the unit
 * test names what is missing).
 *
 * Example (a counter, and a member with no metric):
 *
 *	struct pf_snap { uint64_t queued; uint64_t pending; };
 *	#define ROW(f, ...) TFS_STAT(struct pf_snap, f, __VA_ARGS__)
 *	static const struct tfs_statdef rows[] = {
 *		ROW(queued, TFS_COUNTER, "tierfs_prefetch_queued_total", "Runs queued."),
 *		ROW(pending, TFS_JSON_ONLY, NULL, "the queue's length, a diagnostic"),
 *	};
 */
#ifndef TFS_STATDEF_H
#define TFS_STATDEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct tfs_hist;

/* The type of a snapshot field, found by TFS_STAT() from the field. */
enum tfs_stat_vtype {
	TFS_STAT_U64,  /* uint64_t: a JSON integer */
	TFS_STAT_I64,  /* int64_t: a JSON integer */
	TFS_STAT_F64,  /* double: a JSON number */
	TFS_STAT_BOOL, /* bool: a JSON boolean (1 or 0 as a metric) */
	TFS_STAT_STR,  /* const char *: a JSON string (NULL: null) */
	TFS_STAT_OPT,  /* struct tfs_stat_opt: an integer, or no member */
	TFS_STAT_HIST, /* const struct tfs_hist *: tfs_hist_json() (NULL: no member) */
	TFS_STAT_JSON, /* struct json_object *: added as is, the reference
			* passing to the stats object (NULL: null) */
};

/* What a row is in the Prometheus exposition. */
enum tfs_stat_kind {
	TFS_JSON_ONLY, /* JSON only; `help` says why */
	TFS_COUNTER,   /* a number that only grows */
	TFS_GAUGE,     /* a number that goes up and down */
	TFS_HISTOGRAM, /* a TFS_STAT_HIST: _bucket, _sum, _count */
	TFS_INFO,      /* a string member: one sample, 1, labelled
			* `label`="the string" and, if `label_value` names
			* another member of the section, that name="its
			* value" */
};

/* A member that only some configurations have (it is left out of the
 * JSON, and so of the exposition, when !set). */
struct tfs_stat_opt {
	uint64_t v;
	bool set;
};

struct tfs_statdef {
	const char *key; /* the JSON member: the field's name */
	size_t off;      /* of the field in the snapshot */
	enum tfs_stat_vtype vtype;
	enum tfs_stat_kind kind;
	const char *metric;      /* the family, NULL for TFS_JSON_ONLY */
	const char *help;        /* the family's help; NULL: given by another row
				  * of the family; for TFS_JSON_ONLY, why */
	const char *label;       /* the samples' label, or NULL */
	const char *label_value; /* its value for this row */
	bool ms_to_s;            /* milliseconds shown in seconds; UINT64_MAX
				  * ("forever") is +Inf */
};

struct tfs_stattab {
	const char *section; /* path of the object in the stats JSON:
			      * "a.b", "" for the top level */
	const char *each;    /* NULL, or: the rows describe every member
			      * object of the section, labelled so */
	const struct tfs_statdef *rows;
	size_t n;
	/* Not used to build JSON: metrics over members another table builds
	 * (the row's field names a member of that table's snapshot). */
	bool metrics_only;
};

#define TFS_STAT_VTYPE_OF(x) \
	_Generic((x),                                                                      \
		uint64_t: TFS_STAT_U64,                                                    \
		int64_t: TFS_STAT_I64,                                                     \
		double: TFS_STAT_F64,                                                      \
		bool: TFS_STAT_BOOL,                                                       \
		const char *: TFS_STAT_STR,                                                \
		struct tfs_stat_opt: TFS_STAT_OPT,                                         \
		const struct tfs_hist *: TFS_STAT_HIST,                                    \
		struct json_object *: TFS_STAT_JSON)

/* A row for field `field` of snapshot struct `type`: the member `field`,
 * of kind `kind_`, in family `name` (NULL for TFS_JSON_ONLY) with help
 * `text` (for TFS_JSON_ONLY: why it has no metric); then optional members
 * (TFS_LABEL(), .ms_to_s = true). */
#define TFS_STAT(type, field, kind_, name, text, ...)                                              \
	{                                                                                          \
		.key = #field, .off = offsetof(type, field),                                       \
		.vtype = TFS_STAT_VTYPE_OF(((type *)0)->field), .kind = (kind_), .metric = (name), \
		.help = (text), __VA_ARGS__                                                        \
	}
/* The same for a member named `key` whose value is at `member` of `type`
 * (an element of an array of counters: `count[C_HITS]`). */
#define TFS_STAT_KEY(type, member, key_, kind_, name, text, ...)                  \
	{                                                                         \
		.key = (key_), .off = offsetof(type, member),                     \
		.vtype = TFS_STAT_VTYPE_OF(((type *)0)->member), .kind = (kind_), \
		.metric = (name), .help = (text), __VA_ARGS__                     \
	}
#define TFS_LABEL(name, value) .label = (name), .label_value = (value)
#define TFS_STATTAB(sec, rowsv, ...)                                                        \
	{                                                                                   \
		.section = (sec), .rows = (rowsv), .n = sizeof(rowsv) / sizeof((rowsv)[0]), \
		__VA_ARGS__                                                                 \
	}

/* Add one member to the object `o` per row of `t`, in order, with the
 * value of the row's field in `snap` (a struct of the table's type).
 * Returns 0, or ENOMEM (the members added so far stay; TFS_STAT_JSON
 * values are put either way).  `t` must not be metrics_only. */
int tfs_stat_json(struct json_object *o, const struct tfs_stattab *t, const void *snap);

/* A new object holding `t`'s members (tfs_stat_json()), or NULL on
 * ENOMEM (the TFS_STAT_JSON values are put). */
struct json_object *tfs_stat_object(const struct tfs_stattab *t, const void *snap);

/* The name of the section's object in its parent: the last component of
 * t->section ("near" for "backend.near"). */
const char *tfs_stat_name(const struct tfs_stattab *t);

/* Add the section's object (tfs_stat_object()) to `parent` under
 * tfs_stat_name(t).  Returns 0 or ENOMEM (nothing added). */
int tfs_stat_add_section(struct json_object *parent, const struct tfs_stattab *t, const void *snap);

#endif
