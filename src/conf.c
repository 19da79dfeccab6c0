/* conf.c - the configuration: defaults, the INI file (parsed by
 * libinih), -o overrides, validation, reload and dump, over the option
 * table of conf_keys.c. */
#include "config.h"

#include "conf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "units.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

#define MAX_FILE (1024 * 1024) /* bytes in a configuration file */
#define MAX_QUOTE 100          /* bytes of a bad value shown in a message */
#define MAX_NAME 64            /* section and key names, with the NUL */
#define MIN_TIER_BLOCKS 4      /* a cache tier holds at least this many blocks */

const char *tfs_config_default_path(void)
{
	return SYSCONFDIR "/tierfs/tierfs.conf";
}

/* ---- small helpers ---- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_ctrl(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* Copy s[0..n) without surrounding blanks into dst (truncated to cap-1). */
static void copy_trimmed(char *dst, size_t cap, const char *s, size_t n)
{
	while (n && is_blank(*s)) {
		s++;
		n--;
	}
	while (n && is_blank(s[n - 1]))
		n--;
	if (n > cap - 1)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* Write s into buf for a message: control characters as \xNN, cut after
 * `max` bytes with "...", in single quotes when `quote`. */
static const char *escape(char *buf, size_t cap, const char *s, size_t max, bool quote)
{
	size_t o = 0;
	size_t i;

	/* the loop stops while there is room for one escape, "...", the quote
	 * and the NUL (callers pass QBUF bytes for max = MAX_QUOTE) */
	if (quote)
		buf[o++] = '\'';
	for (i = 0; i < max && s[i] && o + 8 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (is_ctrl(c))
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	if (s[i]) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	if (quote)
		buf[o++] = '\'';
	buf[o] = '\0';
	return buf;
}

#define QBUF (4 * MAX_QUOTE + 8)

/* ---- what a key allows, for messages ---- */

static void fmt_size(uint64_t v, char *buf, size_t cap)
{
	if (tfs_format_size_exact(v, buf, cap))
		buf[0] = '\0';
}

static void fmt_duration(uint64_t v, char *buf, size_t cap)
{
	if (tfs_format_duration(v, buf, cap))
		buf[0] = '\0';
}

/* The range of a numeric key, e.g. "5M to 5G" or "16M or more". */
static const char *describe_range(const struct opt *o, char *buf, size_t cap)
{
	char lo[TFS_UNITS_BUFLEN], hi[TFS_UNITS_BUFLEN];

	switch (o->type) {
	case OPT_UINT:
		snprintf(lo, sizeof(lo), "%" PRIu64, o->min);
		snprintf(hi, sizeof(hi), "%" PRIu64, o->max);
		break;
	case OPT_SIZE:
	case OPT_SIZE_PCT:
		fmt_size(o->min, lo, sizeof(lo));
		fmt_size(o->max, hi, sizeof(hi));
		break;
	case OPT_DURATION:
		if (o->min == 0 && o->max == TFS_DURATION_FOREVER) {
			snprintf(buf, cap, "any duration, or forever");
			return buf;
		}
		fmt_duration(o->min, lo, sizeof(lo));
		fmt_duration(o->max, hi, sizeof(hi));
		break;
	case OPT_PERCENT:
		snprintf(buf, cap, "%" PRIu64 " to %" PRIu64 ", optionally followed by %%", o->min,
			 o->max);
		return buf;
	default:
		buf[0] = '\0';
		return buf;
	}
	if (o->max == UINT64_MAX)
		snprintf(buf, cap, "%s or more%s", lo,
			 o->type == OPT_SIZE_PCT ? ", or N% with 0 < N <= 100" : "");
	else
		snprintf(buf, cap, "%s to %s%s", lo, hi,
			 o->flags & OPTF_POW2 ? ", a power of two" : "");
	return buf;
}

/* What a well-formed value of the key looks like. */
static const char *describe_syntax(const struct opt *o, char *buf, size_t cap)
{
	switch (o->type) {
	case OPT_SIZE:
		snprintf(buf, cap, "bytes with K/M/G/T suffix");
		break;
	case OPT_SIZE_PCT:
		snprintf(buf, cap, "bytes with K/M/G/T suffix or N%%");
		break;
	case OPT_DURATION:
		snprintf(buf, cap, "a number with ms/s/m/h suffix%s",
			 o->flags & OPTF_FOREVER ? " or forever" : "");
		break;
	case OPT_BOOL:
		snprintf(buf, cap, "true/false, yes/no, on/off, 1/0");
		break;
	case OPT_ENUM: {
		size_t n = 0;

		buf[0] = '\0';
		for (const struct opt_name *e = o->names; e->name && n < cap; e++) {
			int r = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", e->name);
			if (r < 0)
				break;
			n += (size_t)r;
		}
		break;
	}
	case OPT_LOGLEVEL: {
		size_t n = 0;

		buf[0] = '\0';
		for (int l = TFS_LOG_ERROR; l <= TFS_LOG_DEBUG && n < cap; l++) {
			int r = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "",
					 tfs_log_level_name((enum tfs_log_level)l));
			if (r < 0)
				break;
			n += (size_t)r;
		}
		break;
	}
	case OPT_PATH:
		snprintf(buf, cap, "an absolute path%s",
			 o->flags & OPTF_REQUIRED ? "" : ", or empty");
		break;
	case OPT_URL:
		snprintf(buf, cap, "http://HOST[:PORT] or https://HOST[:PORT], or empty");
		break;
	case OPT_LISTEN:
		snprintf(buf, cap,
			 "127.0.0.1:PORT (any 127.x.y.z), localhost:PORT, [::1]:PORT, "
			 "unix:/ABSOLUTE/PATH, or empty for none");
		break;
	case OPT_STR:
		snprintf(buf, cap, "%s%s",
			 o->flags & OPTF_TOKEN ? "letters, digits, '-', '_' and '.'" : "any text",
			 o->flags & OPTF_REQUIRED ? "" : ", or empty");
		break;
	default:
		describe_range(o, buf, cap);
		break;
	}
	return buf;
}

static const char *type_name(const struct opt *o)
{
	switch (o->type) {
	case OPT_SIZE:
	case OPT_SIZE_PCT:
		return "size";
	case OPT_DURATION:
		return "duration";
	case OPT_BOOL:
		return "boolean";
	case OPT_UINT:
		return "integer";
	case OPT_PERCENT:
		return "percentage";
	case OPT_LOGLEVEL:
		return "log level";
	case OPT_URL:
		return "URL";
	case OPT_LISTEN:
		return "listen address";
	default:
		return "value";
	}
}

/* ---- messages ---- */

enum src {
	SRC_DEFAULT,
	SRC_FILE,
	SRC_CMDLINE
};

/* Where an assignment comes from, for messages and origins. */
struct where {
	enum src src;
	const char *file;       /* SRC_FILE */
	unsigned line;          /* SRC_FILE */
	const char *origin;     /* SRC_CMDLINE: printed before the assignment */
	const char *assignment; /* SRC_CMDLINE */
};

/* Replace err with "<where><message>".  For a file the prefix is
 * "FILE:LINE: [section] key: " (parts that are NULL are left out); for
 * the command line "ORIGIN ASSIGNMENT: ". */
__attribute__((format(printf, 5, 6))) static void fail(struct tfs_dbuf *err, const struct where *w,
						       const char *section, const char *key,
						       const char *fmt, ...)
{
	char msg[1024];
	char esc[QBUF];
	va_list ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	tfs_dbuf_reset(err);
	if (w->src == SRC_CMDLINE) {
		tfs_dbuf_addf(err, "%s %s: ", w->origin,
			      escape(esc, sizeof(esc), w->assignment, MAX_QUOTE, false));
	} else if (w->src == SRC_FILE) {
		tfs_dbuf_adds(err, w->file);
		if (w->line)
			tfs_dbuf_addf(err, ":%u", w->line);
		tfs_dbuf_adds(err, ": ");
		if (section && *section)
			tfs_dbuf_addf(err, "[%s] ",
				      escape(esc, sizeof(esc), section, MAX_QUOTE, false));
		if (key)
			tfs_dbuf_addf(err, "%s: ", escape(esc, sizeof(esc), key, MAX_QUOTE, false));
	} else {
		if (section && *section)
			tfs_dbuf_addf(err, "[%s] ", section);
		if (key)
			tfs_dbuf_addf(err, "%s: ", key);
	}
	tfs_dbuf_adds(err, msg);
}

/* ---- parsing one value ---- */

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

static bool range_ok(const struct opt *o, uint64_t v)
{
	return v >= o->min && v <= o->max;
}

static bool pow2_ok(const struct opt *o, uint64_t v)
{
	return !(o->flags & OPTF_POW2) || (v && (v & (v - 1)) == 0);
}

/* http[s]://host[:port][/]: host a name or a [v6] literal; port 1..65535.
 * Sets *len to the length without the trailing '/'. */
static bool url_ok(const char *v, size_t *len)
{
	const char *p;

	if (strncasecmp(v, "http://", 7) == 0)
		p = v + 7;
	else if (strncasecmp(v, "https://", 8) == 0)
		p = v + 8;
	else
		return false;

	if (*p == '[') {
		const char *h = ++p;

		while (is_alnum(*p) || *p == ':' || *p == '.')
			p++;
		if (p == h || *p != ']')
			return false;
		p++;
	} else {
		const char *h = p;

		while (is_alnum(*p) || *p == '-' || *p == '.' || *p == '_')
			p++;
		if (p == h)
			return false;
	}
	if (*p == ':') {
		unsigned port = 0;
		const char *d = ++p;

		while (*p >= '0' && *p <= '9' && p - d < 5)
			port = port * 10 + (unsigned)(*p++ - '0');
		if (p == d || port == 0 || port > 65535)
			return false;
	}
	*len = (size_t)(p - v);
	if (*p == '/')
		p++;
	return *p == '\0';
}

/* Parse and check `v` for option o.  Returns 0 with *out set, or EINVAL
 * with the reason (without the location) in msg. */
/* The longest "key = value" line the file reader takes (libinih's line
 * buffer as Debian builds it), so that every value a dump writes loads
 * back. */
#define LINE_CHARS_MAX 199

/* Percentages keep six decimals: what the dump prints is what was parsed,
 * so a dump loads back to the same values (and validates the same way). */
static double round_pct(double d)
{
	char t[64];
	snprintf(t, sizeof(t), "%.6f", d);
	return strtod(t, NULL);
}

/* A percentage as the file syntax writes it: fixed point, no exponent,
 * no trailing zeros. */
static void fmt_pct(double d, char *buf, size_t len)
{
	snprintf(buf, len, "%.6f", d);
	char *dot = strchr(buf, '.');
	if (dot) {
		char *e = buf + strlen(buf);
		while (e > dot + 1 && e[-1] == '0')
			*--e = '\0';
		if (e == dot + 1)
			*dot = '\0';
	}
}

static int parse_value(const struct opt *o, const char *v, union value *out, size_t *slen,
		       char *msg, size_t cap)
{
	char q[QBUF];
	char allowed[256];
	int rc = 0;

	escape(q, sizeof(q), v, MAX_QUOTE, true);

	switch (o->type) {
	case OPT_STR:
	case OPT_PATH:
	case OPT_URL:
	case OPT_LISTEN:
		*slen = strlen(v);
		for (const char *p = v; *p; p++) {
			if (is_ctrl((unsigned char)*p)) {
				snprintf(msg, cap, "%s contains a control character (allowed: %s)",
					 q, describe_syntax(o, allowed, sizeof(allowed)));
				return EINVAL;
			}
		}
		if (strlen(o->key) + 3 + strlen(v) > LINE_CHARS_MAX) {
			snprintf(msg, cap,
				 "the value is too long: a configuration line holds at most "
				 "%d characters",
				 LINE_CHARS_MAX);
			return EINVAL;
		}
		if (*v == ';' || strstr(v, " ;") || strstr(v, "\t;")) {
			snprintf(msg, cap,
				 "%s: a ';' at the start or after a blank starts a comment in the "
				 "configuration file",
				 q);
			return EINVAL;
		}
		if (*v == '\0') {
			if (o->flags & OPTF_REQUIRED) {
				snprintf(msg, cap, "a value is required (allowed: %s)",
					 describe_syntax(o, allowed, sizeof(allowed)));
				return EINVAL;
			}
		} else if (o->type == OPT_PATH && *v != '/') {
			snprintf(msg, cap, "%s is not an absolute path (allowed: %s)", q,
				 describe_syntax(o, allowed, sizeof(allowed)));
			return EINVAL;
		} else if (o->type == OPT_URL && !url_ok(v, slen)) {
			rc = EINVAL;
		} else if (o->type == OPT_LISTEN) {
			char why[160];

			if (tfs_metrics_parse_listen(v, NULL, why, sizeof(why)) != 0) {
				snprintf(msg, cap, "invalid %s %s: %s (allowed: %s)", type_name(o),
					 q, why, describe_syntax(o, allowed, sizeof(allowed)));
				return EINVAL;
			}
		} else if (o->flags & OPTF_TOKEN) {
			for (const char *p = v; *p; p++) {
				if (!is_alnum(*p) && *p != '-' && *p != '_' && *p != '.')
					rc = EINVAL;
			}
		}
		out->s = v;
		break;
	case OPT_BOOL:
		rc = tfs_parse_bool(v, &out->b);
		break;
	case OPT_UINT:
		rc = tfs_parse_uint(v, &out->u);
		if (rc == 0 && !range_ok(o, out->u))
			rc = ERANGE;
		break;
	case OPT_SIZE:
		rc = tfs_parse_size(v, &out->u);
		if (rc == 0 && !range_ok(o, out->u))
			rc = ERANGE;
		if (rc == 0 && !pow2_ok(o, out->u)) {
			snprintf(msg, cap, "%s is not a power of two (allowed: %s)", q,
				 describe_range(o, allowed, sizeof(allowed)));
			return EINVAL;
		}
		break;
	case OPT_SIZE_PCT:
		rc = tfs_parse_size_or_pct(v, &out->sp.bytes, &out->sp.pct);
		if (rc == 0)
			out->sp.pct = round_pct(out->sp.pct);
		if (rc == 0 && out->sp.pct == 0.0 && !range_ok(o, out->sp.bytes))
			rc = ERANGE;
		break;
	case OPT_DURATION:
		rc = tfs_parse_duration(v, &out->u);
		if (rc == 0 && out->u == TFS_DURATION_FOREVER && !(o->flags & OPTF_FOREVER))
			rc = EINVAL;
		if (rc == 0 && !range_ok(o, out->u))
			rc = ERANGE;
		if (rc == 0 && out->u % o->scale != 0) {
			snprintf(msg, cap, "%s is not a whole number of seconds (allowed: %s)", q,
				 describe_range(o, allowed, sizeof(allowed)));
			return EINVAL;
		}
		break;
	case OPT_PERCENT:
		rc = tfs_parse_percent(v, &out->d);
		if (rc == 0)
			out->d = round_pct(out->d);
		if (rc == 0 && (out->d < (double)o->min || out->d > (double)o->max))
			rc = ERANGE;
		break;
	case OPT_ENUM:
		rc = EINVAL;
		for (const struct opt_name *n = o->names; n->name; n++) {
			if (strcasecmp(n->name, v) == 0) {
				out->e = n->value;
				rc = 0;
				break;
			}
		}
		break;
	case OPT_LOGLEVEL: {
		enum tfs_log_level l;

		rc = tfs_log_level_parse(v, &l);
		out->e = (int)l;
		break;
	}
	case OPT_SOURCE:
		snprintf(msg, cap, "not a configuration key: %s", o->hint);
		return EINVAL;
	}

	if (rc == ERANGE) {
		snprintf(msg, cap, "%s is out of range (allowed: %s)", q,
			 describe_range(o, allowed, sizeof(allowed)));
		return EINVAL;
	}
	if (rc) {
		snprintf(msg, cap, "invalid %s %s (allowed: %s)", type_name(o), q,
			 describe_syntax(o, allowed, sizeof(allowed)));
		return EINVAL;
	}
	return 0;
}

/* Store a parsed value and remember where it came from.  Returns 0 or
 * ENOMEM (then nothing changed). */
static int store_value(struct tfs_config *cfg, const struct opt *o, const union value *val,
		       size_t slen, const struct where *w)
{
	switch (o->type) {
	case OPT_STR:
	case OPT_PATH:
	case OPT_URL:
	case OPT_LISTEN: {
		char *s = NULL;
		char *old;

		if (slen) {
			s = strndup(val->s, slen);
			if (s == NULL)
				return ENOMEM;
		}
		memcpy(&old, tfs_conf_field(cfg, o->off), sizeof(old));
		free(old);
		memcpy(tfs_conf_field(cfg, o->off), &s, sizeof(s));
		break;
	}
	case OPT_BOOL:
		memcpy(tfs_conf_field(cfg, o->off), &val->b, sizeof(bool));
		break;
	case OPT_UINT:
	case OPT_SIZE:
	case OPT_DURATION:
		tfs_conf_store_uint(cfg, o, val->u);
		break;
	case OPT_SIZE_PCT:
		tfs_conf_store_uint(cfg, o, val->sp.bytes);
		memcpy(tfs_conf_field(cfg, o->pct_off), &val->sp.pct, sizeof(double));
		break;
	case OPT_PERCENT:
		memcpy(tfs_conf_field(cfg, o->off), &val->d, sizeof(double));
		break;
	case OPT_ENUM:
	case OPT_LOGLEVEL:
		memcpy(tfs_conf_field(cfg, o->off), &val->e, sizeof(int));
		break;
	case OPT_SOURCE:
		return EINVAL;
	}

	struct tfs_config_origin *org = &cfg->origin[tfs_conf_opt_index(o)];

	if (w->src == SRC_DEFAULT) {
		*org = (struct tfs_config_origin){ 0 };
	} else {
		org->line = w->src == SRC_FILE ? w->line : 0;
		org->cmdline = w->src == SRC_CMDLINE;
		org->seq = ++cfg->seq;
	}
	return 0;
}

/* Apply "[section] key = value" from w.  Returns 0, EINVAL or ENOMEM, with
 * the message in err. */
static int apply(struct tfs_config *cfg, const struct where *w, const char *section,
		 const char *key, const char *value, struct tfs_dbuf *err)
{
	char names[512];
	char msg[768];
	char esc[QBUF];
	union value val;
	size_t slen = 0;
	const struct opt *o;
	int rc;

	if (*section == '\0') {
		fail(err, w, NULL, key,
		     "key outside of any section (a [section] line must come first)");
		return EINVAL;
	}
	if (!tfs_conf_section_known(section)) {
		fail(err, w, section, key, "unknown section [%s] (allowed: %s)",
		     escape(esc, sizeof(esc), section, MAX_QUOTE, false),
		     tfs_conf_list_names(names, sizeof(names), NULL));
		return EINVAL;
	}
	o = tfs_conf_find_opt(section, key);
	if (o == NULL) {
		fail(err, w, section, key, "unknown key '%s' in section [%s] (allowed: %s)",
		     escape(esc, sizeof(esc), key, MAX_QUOTE, false), section,
		     tfs_conf_list_names(names, sizeof(names), section));
		return EINVAL;
	}
	rc = parse_value(o, value, &val, &slen, msg, sizeof(msg));
	if (rc) {
		fail(err, w, section, key, "%s", msg);
		return rc;
	}
	rc = store_value(cfg, o, &val, slen, w);
	if (rc)
		fail(err, w, section, key, "out of memory");
	return rc;
}

/* ---- defaults, clear ---- */

void tfs_config_clear(struct tfs_config *cfg)
{
	for (size_t i = 0; i < tfs_conf_nopts; i++) {
		if (tfs_conf_is_string(&tfs_conf_options[i])) {
			char *s;

			memcpy(&s, tfs_conf_field(cfg, tfs_conf_options[i].off), sizeof(s));
			free(s);
		}
	}
	free(cfg->backend.bucket);
	free(cfg->backend.prefix);
	free(cfg->path);
	memset(cfg, 0, sizeof(*cfg));
}

int tfs_config_defaults(struct tfs_config *cfg)
{
	const struct where w = { .src = SRC_DEFAULT };
	char msg[768];

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < tfs_conf_nopts; i++) {
		const struct opt *o = &tfs_conf_options[i];
		union value val;
		size_t slen = 0;
		int rc;

		if (o->type == OPT_SOURCE)
			continue;
		/* a default that does not parse is a bug in the table (conf_keys.c) */
		rc = parse_value(o, o->def, &val, &slen, msg, sizeof(msg));
		if (rc == 0)
			rc = store_value(cfg, o, &val, slen, &w);
		if (rc) {
			tfs_config_clear(cfg);
			return rc;
		}
	}
	return 0;
}

/* ---- the file ---- */

struct load_ctx {
	struct tfs_config *cfg;
	const char *file;
	const char *data;
	size_t len;
	size_t pos;
	unsigned lineno;   /* lines handed to inih so far */
	unsigned err_line; /* line of the first error found here; 0: none */
	int rc;            /* its errno */
	struct tfs_dbuf *err;
};

/* inih's line reader.  Each call returns exactly one line of the file, so
 * lineno is the line inih works on, and inih's return value (the first
 * line it found wrong) counts lines the same way.  Reading lines here
 * instead of with ini_parse() also fixes two traps of libinih as Debian
 * builds it (INI_ALLOW_MULTILINE, 200-byte INI_MAX_LINE): an indented line
 * would continue the previous value, and a long line would be split in two
 * (shifting every later line number).  Leading blanks are dropped here, so
 * indentation is harmless, and a long line is an error. */
static char *read_line(char *str, int num, void *stream)
{
	struct load_ctx *c = stream;
	struct where w = { .src = SRC_FILE, .file = c->file };
	const char *start, *nl;
	size_t n;

	if (c->err_line || c->pos >= c->len)
		return NULL;
	start = c->data + c->pos;
	nl = memchr(start, '\n', c->len - c->pos);
	n = nl ? (size_t)(nl - start) : c->len - c->pos;
	c->pos += n + (nl != NULL);
	w.line = ++c->lineno;

	if (n && start[n - 1] == '\r')
		n--;
	while (n && is_blank(*start)) {
		start++;
		n--;
	}
	if (n && (*start == ';' || *start == '#')) {
		/* A comment: inih would skip it; hand it an empty line, so a
		 * long comment is no error and line numbers stay right. */
		if (num < 1)
			return NULL;
		str[0] = '\0';
		return str;
	}
	if (memchr(start, '\0', n)) {
		fail(c->err, &w, NULL, NULL, "NUL byte in line");
		c->err_line = c->lineno;
		c->rc = EINVAL;
		return NULL;
	}
	if (num >= 1 && n >= (size_t)num) {
		/* An inline comment (" ;", as the dump's origins are) is
		 * dropped by inih anyway: only what precedes it must fit. */
		for (size_t i = 1; i < n; i++) {
			if (start[i] == ';' && (start[i - 1] == ' ' || start[i - 1] == '\t')) {
				n = i;
				while (n && is_blank(start[n - 1]))
					n--; /* inih strips these too */
				break;
			}
		}
	}
	if (num < 1 || n >= (size_t)num) {
		fail(c->err, &w, NULL, NULL, "line too long (more than %d characters)", num - 1);
		c->err_line = c->lineno;
		c->rc = EINVAL;
		return NULL;
	}
	memcpy(str, start, n);
	str[n] = '\0';
	return str;
}

/* inih's handler, for each "key = value".  Returns 1 to go on, or 0 after
 * the first error (inih then reports this line). */
static int on_value(void *user, const char *section, const char *key, const char *value)
{
	struct load_ctx *c = user;
	struct where w = { .src = SRC_FILE, .file = c->file, .line = c->lineno };
	char sec[MAX_NAME];
	int rc;

	if (c->err_line)
		return 0;
	/* inih keeps the blanks inside "[ ssd ]" */
	copy_trimmed(sec, sizeof(sec), section, strlen(section));
	rc = apply(c->cfg, &w, sec, key, value, c->err);
	if (rc) {
		c->err_line = c->lineno;
		c->rc = rc;
		return 0;
	}
	return 1;
}

/* Read the whole file (at most MAX_FILE bytes) into d.  Returns 0 or an
 * errno with the message in err. */
static int read_file(const char *path, bool must_exist, struct tfs_dbuf *d, struct tfs_dbuf *err)
{
	const struct where w = { .src = SRC_FILE, .file = path };
	char ebuf[128];
	char buf[4096];
	struct stat st;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = errno;
		if (rc != ENOENT || must_exist)
			fail(err, &w, NULL, NULL, "cannot open: %s",
			     strerror_r(rc, ebuf, sizeof(ebuf)));
		return rc;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = EISDIR;
		fail(err, &w, NULL, NULL, "cannot read: %s", strerror_r(rc, ebuf, sizeof(ebuf)));
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno;
			fail(err, &w, NULL, NULL, "cannot read: %s",
			     strerror_r(rc, ebuf, sizeof(ebuf)));
			goto out;
		}
		if (n == 0)
			break;
		rc = tfs_dbuf_add(d, buf, (size_t)n);
		if (rc == EOVERFLOW) {
			rc = EFBIG;
			fail(err, &w, NULL, NULL, "file too large (more than %d bytes)", MAX_FILE);
			goto out;
		}
		if (rc) {
			fail(err, &w, NULL, NULL, "out of memory");
			goto out;
		}
	}
out:
	close(fd);
	return rc;
}

/* Report line `line` of the file as a line inih could not parse. */
static void syntax_error(const struct load_ctx *c, unsigned line)
{
	const struct where w = { .src = SRC_FILE, .file = c->file, .line = line };
	const char *p = c->data, *end = c->data + c->len, *eol;
	char text[256];
	char q[QBUF];

	for (unsigned l = 1; l < line && p < end; l++) {
		eol = memchr(p, '\n', (size_t)(end - p));
		p = eol ? eol + 1 : end;
	}
	eol = memchr(p, '\n', (size_t)(end - p));
	if (eol == NULL)
		eol = end;
	if (eol > p && eol[-1] == '\r')
		eol--;
	copy_trimmed(text, sizeof(text), p, (size_t)(eol - p));
	fail(c->err, &w, NULL, NULL, "syntax error: expected '[section]' or 'key = value', got %s",
	     escape(q, sizeof(q), text, MAX_QUOTE, true));
}

int tfs_config_load(struct tfs_config *cfg, const char *path, bool must_exist, struct tfs_dbuf *err)
{
	struct tfs_dbuf data;
	struct load_ctx c = { .cfg = cfg, .err = err };
	char *copy;
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	if (path == NULL)
		path = tfs_config_default_path();
	c.file = path;
	tfs_dbuf_init(&data, MAX_FILE);
	rc = read_file(path, must_exist, &data, err);
	if (rc == ENOENT && !must_exist) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;

	copy = strdup(path);
	if (copy == NULL) {
		rc = ENOMEM;
		goto out;
	}
	free(cfg->path);
	cfg->path = copy;
	/* line numbers of an earlier file no longer mean anything */
	for (size_t i = 0; i < tfs_conf_nopts; i++)
		cfg->origin[i].line = 0;

	c.data = tfs_dbuf_str(&data);
	c.len = tfs_dbuf_len(&data);
	int bad = ini_parse_stream(read_line, &c, on_value, &c);

	if (bad < 0) {
		/* -2: inih could not allocate its line buffer */
		rc = ENOMEM;
	} else if (bad > 0 && (c.err_line == 0 || (unsigned)bad < c.err_line)) {
		/* a line inih could not parse: it calls no handler for it */
		syntax_error(&c, (unsigned)bad);
		rc = EINVAL;
	} else if (c.err_line) {
		rc = c.rc;
	}
out:
	tfs_dbuf_free(&data);
	return rc;
}

/* ---- -o ---- */

int tfs_config_set(struct tfs_config *cfg, const char *assignment, const char *origin,
		   struct tfs_dbuf *err)
{
	const struct where w = {
		.src = SRC_CMDLINE,
		.origin = origin ? origin : "command line: -o",
		.assignment = assignment,
	};
	char sec[MAX_NAME], key[MAX_NAME];
	const char *eq = strchr(assignment, '=');
	const char *dot;
	char *value;
	size_t vlen;
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	dot = eq ? memchr(assignment, '.', (size_t)(eq - assignment)) : NULL;
	if (dot) {
		copy_trimmed(sec, sizeof(sec), assignment, (size_t)(dot - assignment));
		copy_trimmed(key, sizeof(key), dot + 1, (size_t)(eq - dot - 1));
	}
	if (dot == NULL || sec[0] == '\0' || key[0] == '\0') {
		fail(err, &w, NULL, NULL, "expected section.key=value");
		return EINVAL;
	}
	vlen = strlen(eq + 1);
	value = malloc(vlen + 1);
	if (value == NULL)
		return ENOMEM;
	copy_trimmed(value, vlen + 1, eq + 1, vlen);
	rc = apply(cfg, &w, sec, key, value, err);
	free(value);
	return rc;
}

/* ---- validation ---- */

/* Prefix for a message about option o: where it was set last. */
static struct where where_of(const struct tfs_config *cfg, const struct opt *o)
{
	const struct tfs_config_origin *org = &cfg->origin[tfs_conf_opt_index(o)];
	struct where w = { .src = SRC_DEFAULT };

	if (org->cmdline) {
		w.src = SRC_FILE; /* "command line: [section] key: ..." */
		w.file = "command line";
	} else if (org->line && cfg->path) {
		w.src = SRC_FILE;
		w.file = cfg->path;
		w.line = org->line;
	}
	return w;
}

/* Check the current value of one option (a caller may have changed a
 * field since it was parsed).  Returns 0 or EINVAL. */
static int check_one(const struct tfs_config *cfg, const struct opt *o, struct tfs_dbuf *err)
{
	const struct where w = where_of(cfg, o);
	char allowed[256];
	char v[TFS_UNITS_BUFLEN];
	bool bad = false;

	v[0] = '\0';
	switch (o->type) {
	case OPT_STR:
	case OPT_PATH:
	case OPT_URL:
	case OPT_LISTEN: {
		const char *s = tfs_conf_load_str(cfg, o);
		char why[160];
		size_t len;

		if (s == NULL || *s == '\0') {
			if (o->flags & OPTF_REQUIRED) {
				fail(err, &w, o->section, o->key,
				     "a value is required (allowed: %s)",
				     describe_syntax(o, allowed, sizeof(allowed)));
				return EINVAL;
			}
			return 0;
		}
		why[0] = '\0';
		if ((o->type == OPT_PATH && *s != '/') ||
		    (o->type == OPT_URL && !url_ok(s, &len)) ||
		    (o->type == OPT_LISTEN &&
		     tfs_metrics_parse_listen(s, NULL, why, sizeof(why)))) {
			char q[QBUF];

			fail(err, &w, o->section, o->key, "invalid %s %s%s%s (allowed: %s)",
			     type_name(o), escape(q, sizeof(q), s, MAX_QUOTE, true),
			     why[0] ? ": " : "", why, describe_syntax(o, allowed, sizeof(allowed)));
			return EINVAL;
		}
		return 0;
	}
	case OPT_UINT: {
		uint64_t u = tfs_conf_load_uint(cfg, o);

		snprintf(v, sizeof(v), "%" PRIu64, u);
		bad = !range_ok(o, u);
		break;
	}
	case OPT_SIZE: {
		uint64_t u = tfs_conf_load_uint(cfg, o);

		fmt_size(u, v, sizeof(v));
		bad = !range_ok(o, u) || !pow2_ok(o, u);
		break;
	}
	case OPT_DURATION: {
		uint64_t u = tfs_conf_load_uint(cfg, o);

		fmt_duration(u, v, sizeof(v));
		bad = !range_ok(o, u);
		break;
	}
	case OPT_SIZE_PCT: {
		uint64_t u = tfs_conf_load_uint(cfg, o);
		double pct = tfs_conf_load_double(cfg, o->pct_off);

		if (pct != 0.0) {
			fmt_pct(pct, v, sizeof(v) - 1);
			size_t vl = strlen(v);
			snprintf(v + vl, sizeof(v) - vl, "%%");
			bad = !(pct > 0.0 && pct <= 100.0) || u != 0;
		} else {
			fmt_size(u, v, sizeof(v));
			bad = !range_ok(o, u);
		}
		break;
	}
	case OPT_PERCENT: {
		double d = tfs_conf_load_double(cfg, o->off);

		fmt_pct(d, v, sizeof(v));
		bad = !(d >= (double)o->min && d <= (double)o->max);
		break;
	}
	case OPT_ENUM:
		if (tfs_conf_enum_name(o->names, tfs_conf_load_int(cfg, o)) == NULL) {
			snprintf(v, sizeof(v), "%d", tfs_conf_load_int(cfg, o));
			fail(err, &w, o->section, o->key, "invalid value %s (allowed: %s)", v,
			     describe_syntax(o, allowed, sizeof(allowed)));
			return EINVAL;
		}
		return 0;
	case OPT_LOGLEVEL:
		if ((unsigned)tfs_conf_load_int(cfg, o) > TFS_LOG_DEBUG) {
			snprintf(v, sizeof(v), "%d", tfs_conf_load_int(cfg, o));
			fail(err, &w, o->section, o->key, "invalid log level %s (allowed: %s)", v,
			     describe_syntax(o, allowed, sizeof(allowed)));
			return EINVAL;
		}
		return 0;
	case OPT_BOOL:
	case OPT_SOURCE:
		return 0;
	}
	if (bad) {
		fail(err, &w, o->section, o->key, "%s is out of range (allowed: %s)", v,
		     describe_range(o, allowed, sizeof(allowed)));
		return EINVAL;
	}
	return 0;
}

/* Report a rule between options a and b that does not hold, at the place
 * where the later of the two was set. */
__attribute__((format(printf, 5, 6))) static int
cross_fail(const struct tfs_config *cfg, struct tfs_dbuf *err, const struct opt *a,
	   const struct opt *b, const char *fmt, ...)
{
	const struct tfs_config_origin *oa = &cfg->origin[tfs_conf_opt_index(a)];
	const struct tfs_config_origin *ob = &cfg->origin[tfs_conf_opt_index(b)];
	struct where w = where_of(cfg, oa->seq >= ob->seq ? a : b);
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fail(err, &w, NULL, NULL, "%s", msg);
	return EINVAL;
}

#define OPT_OF(f) tfs_conf_opt_by_field(offsetof(struct tfs_config, f))

int tfs_config_validate(const struct tfs_config *cfg, struct tfs_dbuf *err)
{
	char x[TFS_UNITS_BUFLEN], y[TFS_UNITS_BUFLEN];
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	for (size_t i = 0; i < tfs_conf_nopts; i++) {
		rc = check_one(cfg, &tfs_conf_options[i], err);
		if (rc)
			return rc;
	}

	if (!(cfg->ssd.low_watermark < cfg->ssd.high_watermark))
		return cross_fail(cfg, err, OPT_OF(ssd.low_watermark), OPT_OF(ssd.high_watermark),
				  "[ssd] low_watermark (%.15g%%) must be below high_watermark "
				  "(%.15g%%)",
				  cfg->ssd.low_watermark, cfg->ssd.high_watermark);

	if (cfg->writeback.retry_base_ms > cfg->writeback.retry_max_ms) {
		fmt_duration(cfg->writeback.retry_base_ms, x, sizeof(x));
		fmt_duration(cfg->writeback.retry_max_ms, y, sizeof(y));
		return cross_fail(cfg, err, OPT_OF(writeback.retry_base_ms),
				  OPT_OF(writeback.retry_max_ms),
				  "[writeback] retry_base (%s) must not exceed retry_max (%s)", x,
				  y);
	}
	if (cfg->backend.retry_base_ms > cfg->backend.retry_max_ms) {
		fmt_duration(cfg->backend.retry_base_ms, x, sizeof(x));
		fmt_duration(cfg->backend.retry_max_ms, y, sizeof(y));
		return cross_fail(cfg, err, OPT_OF(backend.retry_base_ms),
				  OPT_OF(backend.retry_max_ms),
				  "[backend] retry_base (%s) must not exceed retry_max (%s)", x, y);
	}

	const char *np = cfg->near_store.prefix;
	if (np && (np[0] == '/' || np[strlen(np) - 1] != '/'))
		return cross_fail(cfg, err, OPT_OF(near_store.prefix), OPT_OF(near_store.prefix),
				  "[near] prefix '%s' must end with '/' and not start with it", np);
	if (cfg->near_store.bucket == NULL && (cfg->near_store.prefix || cfg->near_store.endpoint))
		return cross_fail(cfg, err,
				  cfg->near_store.prefix ? OPT_OF(near_store.prefix)
							 : OPT_OF(near_store.endpoint),
				  OPT_OF(near_store.bucket),
				  "[near] endpoint and prefix need [near] bucket");

	if (cfg->backend.part_size > cfg->backend.multipart_threshold) {
		fmt_size(cfg->backend.part_size, x, sizeof(x));
		fmt_size(cfg->backend.multipart_threshold, y, sizeof(y));
		return cross_fail(
			cfg, err, OPT_OF(backend.part_size), OPT_OF(backend.multipart_threshold),
			"[backend] part_size (%s) must not exceed multipart_threshold (%s)", x, y);
	}

	/* block_size <= 64M, so this does not overflow */
	uint64_t min_tier = MIN_TIER_BLOCKS * cfg->cache.block_size;

	fmt_size(cfg->cache.block_size, y, sizeof(y));
	if (cfg->ram.size < min_tier) {
		fmt_size(cfg->ram.size, x, sizeof(x));
		return cross_fail(cfg, err, OPT_OF(ram.size), OPT_OF(cache.block_size),
				  "[ram] size (%s) must be at least %d times [cache] block_size "
				  "(%s)",
				  x, MIN_TIER_BLOCKS, y);
	}
	if (cfg->ssd.size_pct == 0.0 && cfg->ssd.size < min_tier) {
		fmt_size(cfg->ssd.size, x, sizeof(x));
		return cross_fail(cfg, err, OPT_OF(ssd.size), OPT_OF(cache.block_size),
				  "[ssd] size (%s) must be at least %d times [cache] block_size "
				  "(%s)",
				  x, MIN_TIER_BLOCKS, y);
	}
	return 0;
}

/* ---- reload ---- */

bool tfs_config_reloadable(const char *section, const char *key)
{
	const struct opt *o = tfs_conf_find_opt(section, key);

	return o && (o->flags & OPTF_RELOAD);
}

static int dump_value(const struct tfs_config *cfg, const struct opt *o, struct tfs_dbuf *out);

/* Copy option o's value and origin from `from` into `to`.  Returns 0 or
 * ENOMEM (to unchanged). */
static int copy_value(struct tfs_config *to, const struct tfs_config *from, const struct opt *o)
{
	if (tfs_conf_is_string(o)) {
		const char *s = tfs_conf_load_str(from, o);
		char *dup = s ? strdup(s) : NULL;
		char *old;

		if (s && dup == NULL)
			return ENOMEM;
		memcpy(&old, tfs_conf_field(to, o->off), sizeof(old));
		free(old);
		memcpy(tfs_conf_field(to, o->off), &dup, sizeof(dup));
	} else {
		memcpy(tfs_conf_field(to, o->off), tfs_conf_cfield(from, o->off), o->size);
		if (o->type == OPT_SIZE_PCT)
			memcpy(tfs_conf_field(to, o->pct_off), tfs_conf_cfield(from, o->pct_off),
			       sizeof(double));
	}
	to->origin[tfs_conf_opt_index(o)] = from->origin[tfs_conf_opt_index(o)];
	return 0;
}

int tfs_config_merge_reload(struct tfs_config *next, const struct tfs_config *cur,
			    tfs_config_change_fn fn, void *ctx)
{
	struct tfs_dbuf a, b;
	int rc = 0;

	tfs_dbuf_init(&a, 64 * 1024);
	tfs_dbuf_init(&b, 64 * 1024);
	for (size_t i = 0; i < tfs_conf_nopts && rc == 0; i++) {
		const struct opt *o = &tfs_conf_options[i];
		bool reload = (o->flags & OPTF_RELOAD) != 0;

		if (o->type == OPT_SOURCE)
			continue;
		tfs_dbuf_reset(&a);
		tfs_dbuf_reset(&b);
		rc = dump_value(cur, o, &a);
		if (rc == 0)
			rc = dump_value(next, o, &b);
		if (rc)
			break;
		if (strcmp(tfs_dbuf_str(&a), tfs_dbuf_str(&b)) == 0)
			continue;
		if (fn)
			fn(ctx, o->section, o->key, tfs_dbuf_str(&b), reload);
		if (!reload)
			rc = copy_value(next, cur, o);
	}
	tfs_dbuf_free(&a);
	tfs_dbuf_free(&b);
	return rc == EOVERFLOW ? ENOMEM : rc;
}

/* ---- dump ---- */

static int dump_value(const struct tfs_config *cfg, const struct opt *o, struct tfs_dbuf *out)
{
	char buf[TFS_UNITS_BUFLEN];

	buf[0] = '\0';
	switch (o->type) {
	case OPT_STR:
	case OPT_PATH:
	case OPT_URL:
	case OPT_LISTEN: {
		const char *s = tfs_conf_load_str(cfg, o);

		return s ? tfs_dbuf_adds(out, s) : 0;
	}
	case OPT_BOOL: {
		bool b;

		memcpy(&b, tfs_conf_cfield(cfg, o->off), sizeof(b));
		return tfs_dbuf_adds(out, b ? "true" : "false");
	}
	case OPT_UINT:
		return tfs_dbuf_addf(out, "%" PRIu64, tfs_conf_load_uint(cfg, o));
	case OPT_SIZE:
		fmt_size(tfs_conf_load_uint(cfg, o), buf, sizeof(buf));
		break;
	case OPT_SIZE_PCT: {
		double pct = tfs_conf_load_double(cfg, o->pct_off);

		if (pct != 0.0) {
			fmt_pct(pct, buf, sizeof(buf));
			return tfs_dbuf_addf(out, "%s%%", buf);
		}
		fmt_size(tfs_conf_load_uint(cfg, o), buf, sizeof(buf));
		break;
	}
	case OPT_DURATION:
		fmt_duration(tfs_conf_load_uint(cfg, o), buf, sizeof(buf));
		break;
	case OPT_PERCENT:
		fmt_pct(tfs_conf_load_double(cfg, o->off), buf, sizeof(buf));
		break;
	case OPT_ENUM: {
		const char *n = tfs_conf_enum_name(o->names, tfs_conf_load_int(cfg, o));

		return tfs_dbuf_adds(out, n ? n : "?");
	}
	case OPT_LOGLEVEL:
		return tfs_dbuf_adds(
			out, tfs_log_level_name((enum tfs_log_level)tfs_conf_load_int(cfg, o)));
	case OPT_SOURCE:
		break;
	}
	return tfs_dbuf_adds(out, buf);
}

int tfs_config_dump(const struct tfs_config *cfg, bool origins, struct tfs_dbuf *out)
{
	int rc = 0;

	if (origins)
		rc = tfs_dbuf_addf(out, "# tierfs configuration from %s\n",
				   cfg->path ? cfg->path : "built-in defaults (no file)");
	for (size_t i = 0; i < tfs_conf_nopts && rc == 0; i++) {
		const struct opt *o = &tfs_conf_options[i];
		const struct tfs_config_origin *org = &cfg->origin[i];
		bool first = i == 0 || strcmp(tfs_conf_options[i - 1].section, o->section) != 0;

		if (first)
			rc = tfs_dbuf_addf(out, "%s[%s]\n", i ? "\n" : "", o->section);
		if (rc)
			break;
		if (o->type == OPT_SOURCE) {
			const char *s = tfs_conf_load_str(cfg, o);

			if (origins && s)
				rc = tfs_dbuf_addf(out, "; %s = %s (from the mount source)\n",
						   o->key, s);
			continue;
		}
		rc = tfs_dbuf_addf(out, "%s =", o->key);
		/* "key =" for an empty string, "key = value" otherwise */
		if (rc == 0 && !(tfs_conf_is_string(o) && tfs_conf_load_str(cfg, o) == NULL))
			rc = tfs_dbuf_addc(out, ' ');
		if (rc == 0)
			rc = dump_value(cfg, o, out);
		if (rc == 0 && origins && org->cmdline)
			rc = tfs_dbuf_adds(out, "  ; -o");
		else if (rc == 0 && origins && org->line)
			rc = tfs_dbuf_addf(out, "  ; line %u", org->line);
		if (rc == 0)
			rc = tfs_dbuf_addc(out, '\n');
	}
	return rc;
}
