/* conf_internal.h - what the configuration's files share.  Not for use
 * outside src/conf*.c.
 *
 * Calls go one way: conf.c (defaults, the file, -o, validation, reload,
 * dump: the API of conf.h) -> conf_value.c (what a key allows, messages,
 * parsing, storing, checking and writing one value) -> conf_keys.c (the
 * option table and the accessors over it); conf.c also calls conf_keys.c,
 * and conf_keys.c calls neither.  Each section below lists what one file
 * exports to the files above it.  Nothing here keeps state: the table is
 * const, and every function works on the struct tfs_config and the
 * buffers its caller passes and owns.
 */
#ifndef TFS_CONF_INTERNAL_H
#define TFS_CONF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "escape.h"

/* ---- the option table (conf_keys.c) ---- */

enum opt_type {
	OPT_STR,      /* char *; "" stores NULL */
	OPT_PATH,     /* char *; an absolute path; "" stores NULL */
	OPT_URL,      /* char *; http[s]://host[:port][/]; "" stores NULL */
	OPT_LISTEN,   /* char *; loopback HOST:PORT or unix:/PATH; "" stores NULL */
	OPT_BOOL,     /* bool */
	OPT_UINT,     /* unsigned or uint64_t, in [min, max] */
	OPT_SIZE,     /* unsigned or uint64_t bytes, in [min, max] */
	OPT_SIZE_PCT, /* uint64_t bytes in [min, max], or "N%" into pct_off */
	OPT_DURATION, /* unsigned or uint64_t in units of `scale` ms; range in ms */
	OPT_PERCENT,  /* double in [min, max] */
	OPT_ENUM,     /* an int-sized enum named by `names` */
	OPT_LOGLEVEL, /* enum tfs_log_level (tfs_log_level_parse) */
	OPT_SOURCE,   /* not a key: set from the mount source; `hint` says so */
};

enum {
	OPTF_REQUIRED = 1 << 0, /* strings: must not be empty */
	OPTF_POW2 = 1 << 1,     /* sizes: a power of two */
	OPTF_FOREVER = 1 << 2,  /* durations: "forever" is allowed */
	OPTF_TOKEN = 1 << 3,    /* strings: letters, digits, '-', '_', '.' */
	OPTF_RELOAD = 1 << 4,   /* applied by a reload without a remount */
	OPTF_SECRET = 1 << 5,   /* strings: `tierfs config` does not show the value */
};

struct opt_name {
	const char *name;
	int value;
};

struct opt {
	const char *section;
	const char *key;
	enum opt_type type;
	unsigned flags;
	size_t off;     /* offsetof(struct tfs_config, field) */
	size_t size;    /* sizeof(field) */
	size_t pct_off; /* OPT_SIZE_PCT: the double holding "N%" */
	uint64_t min;
	uint64_t max;
	uint64_t scale; /* OPT_DURATION: milliseconds per stored unit */
	const struct opt_name *names;
	const char *def;  /* default, in the file syntax */
	const char *hint; /* OPT_SOURCE */
};

/* The options, in the order of `tierfs config`'s dump: grouped by
 * section, the sections in the order the dump prints them. */
extern const struct opt tfs_conf_options[];
/* The number of entries of tfs_conf_options (at most
 * TFS_CONFIG_MAX_OPTIONS): option i's origin is cfg->origin[i]. */
extern const size_t tfs_conf_nopts;

/* The field at offset `off` of cfg (an opt's off or pct_off). */
void *tfs_conf_field(struct tfs_config *cfg, size_t off);
const void *tfs_conf_cfield(const struct tfs_config *cfg, size_t off);

/* The value of an OPT_UINT, OPT_SIZE, OPT_SIZE_PCT (the bytes) or
 * OPT_DURATION field, whichever its size (unsigned or uint64_t); a
 * duration in milliseconds, whatever its scale. */
uint64_t tfs_conf_load_uint(const struct tfs_config *cfg, const struct opt *o);
/* Store v into such a field: v has been checked against the option's
 * range, so it fits; a duration is divided by its scale. */
void tfs_conf_store_uint(struct tfs_config *cfg, const struct opt *o, uint64_t v);
/* The double at offset `off` (OPT_PERCENT's off, OPT_SIZE_PCT's pct_off). */
double tfs_conf_load_double(const struct tfs_config *cfg, size_t off);
/* An OPT_ENUM or OPT_LOGLEVEL field, as the int it is stored as. */
int tfs_conf_load_int(const struct tfs_config *cfg, const struct opt *o);
/* A string field (or OPT_SOURCE's): NULL when empty.  cfg keeps owning it. */
const char *tfs_conf_load_str(const struct tfs_config *cfg, const struct opt *o);
/* Whether o is a string key (OPT_STR, OPT_PATH, OPT_URL, OPT_LISTEN): its
 * field is a char * that tfs_config_clear() frees. */
bool tfs_conf_is_string(const struct opt *o);

/* o's index in tfs_conf_options (and in cfg->origin). */
size_t tfs_conf_opt_index(const struct opt *o);
/* The key whose field is at offsetof(struct tfs_config, ...) `off`
 * (OPT_SOURCE entries left out), or NULL. */
const struct opt *tfs_conf_opt_by_field(size_t off);
/* Whether some key is in `section` (case-insensitive). */
bool tfs_conf_section_known(const char *section);
/* The entry of "[section] key" (case-insensitive; OPT_SOURCE entries
 * included), or NULL. */
const struct opt *tfs_conf_find_opt(const char *section, const char *key);
/* Write "backend, near, ..." (the sections, section NULL) or the keys of
 * `section` (OPT_SOURCE entries left out) into buf, truncated to cap
 * bytes with the NUL.  Returns buf. */
const char *tfs_conf_list_names(char *buf, size_t cap, const char *section);
/* The name of value v in `names` (ended by a NULL name), or NULL. */
const char *tfs_conf_enum_name(const struct opt_name *names, int v);

/* ---- one value (conf_value.c) ---- */

#define MAX_QUOTE 100 /* bytes of a bad value shown in a message */
/* The size of a buffer for tfs_escape(..., MAX_QUOTE, ...) (escape.h). */
#define QBUF TFS_ESCAPE_BUFLEN(MAX_QUOTE)

enum src {
	SRC_DEFAULT,
	SRC_FILE,
	SRC_CMDLINE,
	SRC_ENV
};

/* Where an assignment comes from, for messages and origins. */
struct where {
	enum src src;
	const char *file;       /* SRC_FILE */
	unsigned line;          /* SRC_FILE */
	const char *origin;     /* SRC_CMDLINE: printed before the assignment;
				 * SRC_ENV: the variable's name (static) */
	const char *assignment; /* SRC_CMDLINE; SRC_ENV: the variable's value */
};

/* A value tfs_conf_parse_value() parsed, for tfs_conf_store_value(). */
union value {
	uint64_t u;
	double d;
	bool b;
	int e;
	struct {
		uint64_t bytes;
		double pct;
	} sp;
	const char *s; /* points into the input, len bytes */
};

/* v bytes or milliseconds as the file syntax writes them ("64M", "1500ms",
 * "forever") into buf; "" when cap is too small (TFS_UNITS_BUFLEN is
 * enough). */
void tfs_conf_fmt_size(uint64_t v, char *buf, size_t cap);
void tfs_conf_fmt_duration(uint64_t v, char *buf, size_t cap);

/* Replace err (unless NULL) with "<where><message>".  For a file the
 * prefix is "FILE:LINE: [section] key: " (parts that are NULL or 0 are
 * left out), for the command line "ORIGIN ASSIGNMENT: ", for a default
 * "[section] key: ".  The names in a file's prefix and the assignment are
 * escaped; the message is cut at 1023 bytes. */
__attribute__((format(printf, 5, 6))) void tfs_conf_fail(struct tfs_dbuf *err,
							 const struct where *w, const char *section,
							 const char *key, const char *fmt, ...);

/* Parse and check `v` for option o.  Returns 0 with *out set (a string
 * points into v, its length in *slen), or EINVAL with the reason (without
 * the location) in msg (cap bytes).  OPT_SOURCE options are EINVAL. */
int tfs_conf_parse_value(const struct opt *o, const char *v, union value *out, size_t *slen,
			 char *msg, size_t cap);
/* Store a value tfs_conf_parse_value() returned into cfg (a string is
 * copied; cfg owns the copy and frees the old one) and remember where it
 * came from: a default clears the origin, a file line or -o sets it and
 * takes the next cfg->seq.  Returns 0, ENOMEM (then nothing changed) or
 * EINVAL for an OPT_SOURCE option. */
int tfs_conf_store_value(struct tfs_config *cfg, const struct opt *o, const union value *val,
			 size_t slen, const struct where *w);
/* Apply "[section] key = value" from w (section and key as written,
 * matched case-insensitively).  Returns 0, EINVAL (unknown section or key,
 * bad value: cfg unchanged) or ENOMEM, with the message in err. */
int tfs_conf_apply(struct tfs_config *cfg, const struct where *w, const char *section,
		   const char *key, const char *value, struct tfs_dbuf *err);

/* Check the value o's field holds now (a caller may have changed it since
 * it was parsed) against o's syntax and range.  Returns 0, or EINVAL with
 * the message, prefixed as w says, in err. */
int tfs_conf_check_value(const struct tfs_config *cfg, const struct opt *o, const struct where *w,
			 struct tfs_dbuf *err);
/* Append o's value in the file syntax to out (nothing for an empty string
 * or an OPT_SOURCE option).  Returns 0, or ENOMEM or EOVERFLOW from
 * tfs_dbuf. */
int tfs_conf_format_value(const struct tfs_config *cfg, const struct opt *o, struct tfs_dbuf *out);

#endif
