/* conf_value.c - one value of the configuration: what a key allows (for
 * messages), the messages themselves, parsing and storing one value,
 * checking and writing back the value a field holds. */
#include "config.h"

#include "conf_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "units.h"

/* ---- small helpers ---- */

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_ctrl(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* Write s into buf for a message: control characters as \xNN, cut after
 * `max` bytes with "...", in single quotes when `quote`. */
/* ---- what a key allows, for messages ---- */

void tfs_conf_fmt_size(uint64_t v, char *buf, size_t cap)
{
	if (tfs_format_size_exact(v, buf, cap))
		buf[0] = '\0';
}

void tfs_conf_fmt_duration(uint64_t v, char *buf, size_t cap)
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
		tfs_conf_fmt_size(o->min, lo, sizeof(lo));
		tfs_conf_fmt_size(o->max, hi, sizeof(hi));
		break;
	case OPT_DURATION:
		if (o->min == 0 && o->max == TFS_DURATION_FOREVER) {
			snprintf(buf, cap, "any duration, or forever");
			return buf;
		}
		tfs_conf_fmt_duration(o->min, lo, sizeof(lo));
		tfs_conf_fmt_duration(o->max, hi, sizeof(hi));
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

/* Replace err with "<where><message>".  For a file the prefix is
 * "FILE:LINE: [section] key: " (parts that are NULL are left out); for
 * the command line "ORIGIN ASSIGNMENT: ". */
void tfs_conf_fail(struct tfs_dbuf *err, const struct where *w, const char *section,
		   const char *key, const char *fmt, ...)
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
			      tfs_escape(esc, sizeof(esc), w->assignment, MAX_QUOTE, false));
	} else if (w->src == SRC_ENV) {
		tfs_dbuf_addf(err, "environment %s=%s: ", w->origin,
			      tfs_escape(esc, sizeof(esc), w->assignment, MAX_QUOTE, true));
		if (section && *section)
			tfs_dbuf_addf(err, "[%s] ", section);
		if (key)
			tfs_dbuf_addf(err, "%s: ", key);
	} else if (w->src == SRC_FILE) {
		tfs_dbuf_adds(err, w->file);
		if (w->line)
			tfs_dbuf_addf(err, ":%u", w->line);
		tfs_dbuf_adds(err, ": ");
		if (section && *section)
			tfs_dbuf_addf(err, "[%s] ",
				      tfs_escape(esc, sizeof(esc), section, MAX_QUOTE, false));
		if (key)
			tfs_dbuf_addf(err,
				      "%s: ", tfs_escape(esc, sizeof(esc), key, MAX_QUOTE, false));
	} else {
		if (section && *section)
			tfs_dbuf_addf(err, "[%s] ", section);
		if (key)
			tfs_dbuf_addf(err, "%s: ", key);
	}
	tfs_dbuf_adds(err, msg);
}

/* ---- parsing one value ---- */

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

/* Parse and check `v` for option o.  Returns 0 with *out set, or EINVAL
 * with the reason (without the location) in msg. */
int tfs_conf_parse_value(const struct opt *o, const char *v, union value *out, size_t *slen,
			 char *msg, size_t cap)
{
	char q[QBUF];
	char allowed[256];
	int rc = 0;

	tfs_escape(q, sizeof(q), v, MAX_QUOTE, true);

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
int tfs_conf_store_value(struct tfs_config *cfg, const struct opt *o, const union value *val,
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
		org->env = w->src == SRC_ENV ? w->origin : NULL;
		org->seq = ++cfg->seq;
	}
	return 0;
}

/* Apply "[section] key = value" from w.  Returns 0, EINVAL or ENOMEM, with
 * the message in err. */
int tfs_conf_apply(struct tfs_config *cfg, const struct where *w, const char *section,
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
		tfs_conf_fail(err, w, NULL, key,
			      "key outside of any section (a [section] line must come first)");
		return EINVAL;
	}
	if (!tfs_conf_section_known(section)) {
		tfs_conf_fail(err, w, section, key, "unknown section [%s] (allowed: %s)",
			      tfs_escape(esc, sizeof(esc), section, MAX_QUOTE, false),
			      tfs_conf_list_names(names, sizeof(names), NULL));
		return EINVAL;
	}
	o = tfs_conf_find_opt(section, key);
	if (o == NULL) {
		tfs_conf_fail(err, w, section, key,
			      "unknown key '%s' in section [%s] (allowed: %s)",
			      tfs_escape(esc, sizeof(esc), key, MAX_QUOTE, false), section,
			      tfs_conf_list_names(names, sizeof(names), section));
		return EINVAL;
	}
	rc = tfs_conf_parse_value(o, value, &val, &slen, msg, sizeof(msg));
	if (rc) {
		tfs_conf_fail(err, w, section, key, "%s", msg);
		return rc;
	}
	rc = tfs_conf_store_value(cfg, o, &val, slen, w);
	if (rc)
		tfs_conf_fail(err, w, section, key, "out of memory");
	return rc;
}

/* ---- checking and writing the value a field holds ---- */

/* Check the current value of one option (a caller may have changed a
 * field since it was parsed).  Returns 0 or EINVAL. */
int tfs_conf_check_value(const struct tfs_config *cfg, const struct opt *o, const struct where *w,
			 struct tfs_dbuf *err)
{
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
				tfs_conf_fail(err, w, o->section, o->key,
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

			tfs_conf_fail(err, w, o->section, o->key, "invalid %s %s%s%s (allowed: %s)",
				      type_name(o), tfs_escape(q, sizeof(q), s, MAX_QUOTE, true),
				      why[0] ? ": " : "", why,
				      describe_syntax(o, allowed, sizeof(allowed)));
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

		tfs_conf_fmt_size(u, v, sizeof(v));
		bad = !range_ok(o, u) || !pow2_ok(o, u);
		break;
	}
	case OPT_DURATION: {
		uint64_t u = tfs_conf_load_uint(cfg, o);

		tfs_conf_fmt_duration(u, v, sizeof(v));
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
			tfs_conf_fmt_size(u, v, sizeof(v));
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
			tfs_conf_fail(err, w, o->section, o->key, "invalid value %s (allowed: %s)",
				      v, describe_syntax(o, allowed, sizeof(allowed)));
			return EINVAL;
		}
		return 0;
	case OPT_LOGLEVEL:
		if ((unsigned)tfs_conf_load_int(cfg, o) > TFS_LOG_DEBUG) {
			snprintf(v, sizeof(v), "%d", tfs_conf_load_int(cfg, o));
			tfs_conf_fail(err, w, o->section, o->key,
				      "invalid log level %s (allowed: %s)", v,
				      describe_syntax(o, allowed, sizeof(allowed)));
			return EINVAL;
		}
		return 0;
	case OPT_BOOL:
	case OPT_SOURCE:
		return 0;
	}
	if (bad) {
		tfs_conf_fail(err, w, o->section, o->key, "%s is out of range (allowed: %s)", v,
			      describe_range(o, allowed, sizeof(allowed)));
		return EINVAL;
	}
	return 0;
}

int tfs_conf_format_value(const struct tfs_config *cfg, const struct opt *o, struct tfs_dbuf *out)
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
		tfs_conf_fmt_size(tfs_conf_load_uint(cfg, o), buf, sizeof(buf));
		break;
	case OPT_SIZE_PCT: {
		double pct = tfs_conf_load_double(cfg, o->pct_off);

		if (pct != 0.0) {
			fmt_pct(pct, buf, sizeof(buf));
			return tfs_dbuf_addf(out, "%s%%", buf);
		}
		tfs_conf_fmt_size(tfs_conf_load_uint(cfg, o), buf, sizeof(buf));
		break;
	}
	case OPT_DURATION:
		tfs_conf_fmt_duration(tfs_conf_load_uint(cfg, o), buf, sizeof(buf));
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
