/* units.c - parsers and formatters for sizes, durations, percentages and
 * booleans (the grammar is in units.h). */
#include "config.h"

#include "units.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A parsed "DIGITS [. DIGITS]". */
struct number {
	uint64_t ip;   /* integer part */
	double frac;   /* fractional part, 0 <= frac < 1 */
	bool overflow; /* the integer part exceeds UINT64_MAX */
};

struct unit {
	const char *name;
	uint64_t mult;
};

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

static const struct unit size_units[] = {
	{ "", 1 },      { "b", 1 },    { "k", KIB },   { "kb", KIB },  { "kib", KIB },
	{ "m", MIB },   { "mb", MIB }, { "mib", MIB }, { "g", GIB },   { "gb", GIB },
	{ "gib", GIB }, { "t", TIB },  { "tb", TIB },  { "tib", TIB }, { NULL, 0 },
};

static const struct unit duration_units[] = {
	{ "", 1000 }, /* a bare number is seconds */
	{ "ms", 1 },  { "s", 1000 }, { "m", 60 * 1000 }, { "h", 60 * 60 * 1000 }, { NULL, 0 },
};

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static const char *skip_blanks(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* Parse "DIGITS [. DIGITS]" at the start of s.  Returns 0 and sets *n and
 * *end (the first character after the number), or EINVAL.  An integer part
 * that does not fit is reported in n->overflow, so that the caller can
 * still tell junk (EINVAL) from a well-formed but too large value (ERANGE). */
static int parse_number(const char *s, struct number *n, const char **end)
{
	int saved_errno = errno;
	char *e;

	if (!is_digit(*s))
		return EINVAL;
	errno = 0;
	unsigned long long ip = strtoull(s, &e, 10);
	n->overflow = errno == ERANGE;
	errno = saved_errno;
	n->ip = n->overflow ? UINT64_MAX : (uint64_t)ip;
	n->frac = 0.0;
	if (*e == '.') {
		uint64_t digits = 0;
		double scale = 1.0;
		unsigned count = 0;

		e++;
		if (!is_digit(*e))
			return EINVAL;
		for (; is_digit(*e); e++) {
			/* 18 digits are more than a double holds */
			if (count++ < 18) {
				digits = digits * 10 + (uint64_t)(*e - '0');
				scale *= 10.0;
			}
		}
		n->frac = (double)digits / scale;
	}
	*end = e;
	return 0;
}

/* Match the rest of a value, after optional blanks, against a unit table
 * (case-insensitive).  "1 " (blanks and no unit) does not match. */
static const struct unit *match_unit(const char *rest, const struct unit *table)
{
	const char *u = skip_blanks(rest);

	if (u != rest && *u == '\0')
		return NULL;
	for (const struct unit *t = table; t->name; t++) {
		if (strcasecmp(u, t->name) == 0)
			return t;
	}
	return NULL;
}

/* n * mult, rounded down.  ERANGE when it exceeds UINT64_MAX. */
static int scale_number(const struct number *n, uint64_t mult, uint64_t *out)
{
	if (n->overflow || (mult && n->ip > UINT64_MAX / mult))
		return ERANGE;
	uint64_t v = n->ip * mult;
	/* mult <= 2^40, so the product is below mult and exact enough */
	uint64_t f = (uint64_t)(n->frac * (double)mult);
	if (f > UINT64_MAX - v)
		return ERANGE;
	*out = v + f;
	return 0;
}

int tfs_parse_size(const char *s, uint64_t *bytes)
{
	struct number n;
	const char *end;
	const struct unit *u;
	uint64_t v;
	int rc;

	rc = parse_number(s, &n, &end);
	if (rc)
		return rc;
	u = match_unit(end, size_units);
	if (u == NULL)
		return EINVAL;
	rc = scale_number(&n, u->mult, &v);
	if (rc)
		return rc;
	*bytes = v;
	return 0;
}

/* Parse "N" or "N%" ("%" mandatory when sign_required) into a percentage
 * from 0 to 100. */
static int parse_pct(const char *s, bool sign_required, double *pct)
{
	struct number n;
	const char *end;
	const char *p;
	int rc;

	rc = parse_number(s, &n, &end);
	if (rc)
		return rc;
	p = skip_blanks(end);
	if (*p == '%')
		p++;
	else if (sign_required || p != end)
		return EINVAL;
	if (*p != '\0')
		return EINVAL;
	if (n.overflow || n.ip > 100)
		return ERANGE;
	double v = (double)n.ip + n.frac;
	if (v > 100.0)
		return ERANGE;
	*pct = v;
	return 0;
}

int tfs_parse_size_or_pct(const char *s, uint64_t *bytes, double *pct)
{
	size_t len = strlen(s);
	int rc;

	if (len > 0 && s[len - 1] == '%') {
		double v;

		rc = parse_pct(s, true, &v);
		if (rc)
			return rc;
		if (v <= 0.0)
			return ERANGE;
		*pct = v;
		*bytes = 0;
		return 0;
	}

	uint64_t b;

	rc = tfs_parse_size(s, &b);
	if (rc)
		return rc;
	*bytes = b;
	*pct = 0.0;
	return 0;
}

int tfs_parse_percent(const char *s, double *pct)
{
	return parse_pct(s, false, pct);
}

int tfs_parse_duration(const char *s, uint64_t *ms)
{
	struct number n;
	const char *end;
	const struct unit *u;
	uint64_t v;
	int rc;

	if (strcasecmp(s, "forever") == 0) {
		*ms = TFS_DURATION_FOREVER;
		return 0;
	}
	rc = parse_number(s, &n, &end);
	if (rc)
		return rc;
	u = match_unit(end, duration_units);
	if (u == NULL)
		return EINVAL;
	rc = scale_number(&n, u->mult, &v);
	if (rc)
		return rc;
	if (v == TFS_DURATION_FOREVER)
		return ERANGE;
	*ms = v;
	return 0;
}

int tfs_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return EINVAL;
}

int tfs_parse_uint(const char *s, uint64_t *out)
{
	struct number n;
	const char *end;
	int rc;

	rc = parse_number(s, &n, &end);
	if (rc)
		return rc;
	if (*end != '\0' || strchr(s, '.'))
		return EINVAL;
	if (n.overflow)
		return ERANGE;
	*out = n.ip;
	return 0;
}

__attribute__((format(printf, 3, 4))) static int put(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (len == 0)
		return ERANGE;
	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		buf[0] = '\0';
		return EINVAL;
	}
	return (size_t)n < len ? 0 : ERANGE;
}

int tfs_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const names[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	unsigned i = 1;

	if (bytes < KIB)
		return put(buf, len, "%" PRIu64 " B", bytes);
	while (i < 6 && bytes >> (10 * (i + 1)) != 0)
		i++;

	uint64_t unit = UINT64_C(1) << (10 * i);
	uint64_t whole = bytes >> (10 * i);
	uint64_t rem = bytes & (unit - 1);
	/* rem < 2^60, so rem * 10 + unit / 2 < 2^64 */
	uint64_t tenths = (rem * 10 + unit / 2) / unit;

	if (tenths == 10) {
		whole++;
		tenths = 0;
		if (whole == 1024 && i < 6) {
			whole = 1;
			i++;
		}
	}
	if (tenths)
		return put(buf, len, "%" PRIu64 ".%" PRIu64 " %s", whole, tenths, names[i]);
	return put(buf, len, "%" PRIu64 " %s", whole, names[i]);
}

int tfs_format_size_exact(uint64_t bytes, char *buf, size_t len)
{
	static const struct unit units[] = {
		{ "T", TIB },
		{ "G", GIB },
		{ "M", MIB },
		{ "K", KIB },
	};

	if (bytes != 0) {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (bytes % units[i].mult == 0)
				return put(buf, len, "%" PRIu64 "%s", bytes / units[i].mult,
					   units[i].name);
		}
	}
	return put(buf, len, "%" PRIu64, bytes);
}

int tfs_format_duration(uint64_t ms, char *buf, size_t len)
{
	static const struct unit units[] = {
		{ "h", 60 * 60 * 1000 },
		{ "m", 60 * 1000 },
		{ "s", 1000 },
	};

	if (ms == TFS_DURATION_FOREVER)
		return put(buf, len, "forever");
	if (ms == 0)
		return put(buf, len, "0s");
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ms % units[i].mult == 0)
			return put(buf, len, "%" PRIu64 "%s", ms / units[i].mult, units[i].name);
	}
	return put(buf, len, "%" PRIu64 "ms", ms);
}
