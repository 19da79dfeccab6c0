/* node_opts.c - the FlexVolume option table and value checks.  Values of
 * options that map onto a tierfs key are checked by src/conf.c itself, on a
 * scratch configuration, so the driver and `tierfs mount` never disagree. */
#include "config.h"

#include "node_opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf.h"
#include "escape.h"
#include "source.h"
#include "units.h"

enum tfs_node_kind {
	K_SOURCE,   /* s3://BUCKET[/PREFIX] */
	K_BUCKET,   /* a bucket name */
	K_PREFIX,   /* a key prefix */
	K_BOOL,     /* readOnly */
	K_SIZE,     /* a tierfs size key */
	K_SIZE_PCT, /* a tierfs size key that also takes N% */
	K_DURATION, /* a tierfs duration key */
	K_TIERFS,   /* any other tierfs key: conf.c checks it */
};

struct tfs_node_opt_def {
	const char *name;
	const char *tierfs; /* "section.key", or NULL */
	enum tfs_node_kind kind;
	enum tfs_node_limit_kind limit;
	const char *limit_key;
};

static const struct tfs_node_opt_def defs[TFS_NODE_OPT_COUNT] = {
	[TFS_NODE_OPT_SOURCE] = { "source", NULL, K_SOURCE, TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_BUCKET] = { "bucket", NULL, K_BUCKET, TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_PREFIX] = { "prefix", NULL, K_PREFIX, TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_ENDPOINT] = { "endpoint", "backend.endpoint", K_TIERFS, TFS_NODE_LIMIT_NONE,
				    NULL },
	[TFS_NODE_OPT_REGION] = { "region", "backend.region", K_TIERFS, TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_PATH_STYLE] = { "pathStyle", "backend.path_style", K_TIERFS,
				      TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_RAM_SIZE] = { "ramSize", "ram.size", K_SIZE, TFS_NODE_LIMIT_MAX,
				    "maxRamSize" },
	[TFS_NODE_OPT_SSD_SIZE] = { "ssdSize", "ssd.size", K_SIZE_PCT, TFS_NODE_LIMIT_MAX,
				    "maxSsdSize" },
	[TFS_NODE_OPT_BLOCK_SIZE] = { "blockSize", "cache.block_size", K_SIZE, TFS_NODE_LIMIT_MAX,
				      "maxBlockSize" },
	[TFS_NODE_OPT_READAHEAD] = { "readahead", "prefetch.readahead", K_SIZE, TFS_NODE_LIMIT_MAX,
				     "maxReadahead" },
	[TFS_NODE_OPT_POLICY] = { "policy", "cache.policy", K_TIERFS, TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_METADATA_TTL] = { "metadataTTL", "cache.metadata_ttl", K_DURATION,
					TFS_NODE_LIMIT_MIN, "minMetadataTTL" },
	[TFS_NODE_OPT_WRITEBACK] = { "writeback", "writeback.mode", K_TIERFS, TFS_NODE_LIMIT_NONE,
				     NULL },
	[TFS_NODE_OPT_NEAR_BUCKET] = { "nearBucket", "near.bucket", K_TIERFS, TFS_NODE_LIMIT_NONE,
				       NULL },
	[TFS_NODE_OPT_NEAR_PREFIX] = { "nearPrefix", "near.prefix", K_TIERFS, TFS_NODE_LIMIT_NONE,
				       NULL },
	[TFS_NODE_OPT_NEAR_ENDPOINT] = { "nearEndpoint", "near.endpoint", K_TIERFS,
					 TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_NEAR_WRITE_THROUGH] = { "nearWriteThrough", "near.write_through", K_TIERFS,
					      TFS_NODE_LIMIT_NONE, NULL },
	[TFS_NODE_OPT_READ_ONLY] = { "readOnly", NULL, K_BOOL, TFS_NODE_LIMIT_NONE, NULL },
};

#define MAX_QUOTE 100

const char *tfs_node_opt_name(enum tfs_node_opt o)
{
	return (unsigned)o < TFS_NODE_OPT_COUNT ? defs[o].name : "?";
}

const char *tfs_node_opt_tierfs_key(enum tfs_node_opt o)
{
	return (unsigned)o < TFS_NODE_OPT_COUNT ? defs[o].tierfs : NULL;
}

enum tfs_node_limit_kind tfs_node_opt_limit_kind(enum tfs_node_opt o)
{
	return (unsigned)o < TFS_NODE_OPT_COUNT ? defs[o].limit : TFS_NODE_LIMIT_NONE;
}

const char *tfs_node_opt_limit_key(enum tfs_node_opt o)
{
	return (unsigned)o < TFS_NODE_OPT_COUNT ? defs[o].limit_key : NULL;
}

int tfs_node_opt_find(const char *name, bool ignore_case, enum tfs_node_opt *out)
{
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		if (ignore_case ? strcasecmp(defs[i].name, name) == 0
				: strcmp(defs[i].name, name) == 0) {
			*out = (enum tfs_node_opt)i;
			return 0;
		}
	}
	return ENOENT;
}

int tfs_node_opt_find_limit(const char *key, enum tfs_node_opt *out)
{
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		if (defs[i].limit_key && strcasecmp(defs[i].limit_key, key) == 0) {
			*out = (enum tfs_node_opt)i;
			return 0;
		}
	}
	return ENOENT;
}

/* Join the names (limit keys when `limits`) with ", " into buf. */
static const char *join(char *buf, size_t cap, bool limits)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		const char *s = limits ? defs[i].limit_key : defs[i].name;

		if (s == NULL)
			continue;
		int r = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", s);
		if (r < 0 || (size_t)r >= cap - n)
			break;
		n += (size_t)r;
	}
	return buf;
}

const char *tfs_node_opt_list(char *buf, size_t cap)
{
	return join(buf, cap, false);
}

const char *tfs_node_opt_limit_list(char *buf, size_t cap)
{
	return join(buf, cap, true);
}

const char *tfs_node_quote(char *buf, size_t cap, const char *s)
{
	if (cap < 16) {
		if (cap)
			buf[0] = '\0';
		return buf;
	}
	return tfs_escape(buf, cap, s, MAX_QUOTE, true);
}

static bool has_ctrl(const char *s)
{
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	}
	return false;
}

__attribute__((format(printf, 3, 4))) static int fail(struct tfs_dbuf *err, const char *origin,
						      const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (err == NULL)
		return EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tfs_dbuf_reset(err);
	tfs_dbuf_addf(err, "%s: %s", origin, msg);
	return EINVAL;
}

/* Check "key=value" with src/conf.c.  Its message reads "ORIGIN
 * ASSIGNMENT: why" (conf.h); only "why" is kept, after our own origin. */
static int check_tierfs(const char *key, const char *value, const char *origin,
			struct tfs_dbuf *err)
{
	struct tfs_config scratch;
	struct tfs_dbuf assign, msg;
	static const char tag[] = "fv";
	int rc;

	rc = tfs_config_defaults(&scratch);
	if (rc)
		return rc;
	tfs_dbuf_init(&assign, 64 * 1024);
	tfs_dbuf_init(&msg, 4096);
	rc = tfs_dbuf_addf(&assign, "%s=%s", key, value);
	if (rc == 0)
		rc = tfs_config_set(&scratch, tfs_dbuf_str(&assign), tag, &msg);
	if (rc == EINVAL) {
		/* The assignment is shown cut after 100 bytes with "...". */
		const char *m = tfs_dbuf_str(&msg);
		const char *a = tfs_dbuf_str(&assign);
		size_t alen = strlen(a) > MAX_QUOTE ? MAX_QUOTE : strlen(a);
		const char *why = m;

		if (strncmp(m, tag, sizeof(tag) - 1) == 0 && m[sizeof(tag) - 1] == ' ' &&
		    strncmp(m + sizeof(tag), a, alen) == 0) {
			const char *p = m + sizeof(tag) + alen;

			if (strlen(a) > MAX_QUOTE && strncmp(p, "...", 3) == 0)
				p += 3;
			if (strncmp(p, ": ", 2) == 0)
				why = p + 2;
		}
		fail(err, origin, "%s", *why ? why : "invalid value");
	}
	tfs_dbuf_free(&assign);
	tfs_dbuf_free(&msg);
	tfs_config_clear(&scratch);
	return rc;
}

static bool bucket_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_';
}

static int check_bucket(const char *v, const char *origin, struct tfs_dbuf *err)
{
	char q[TFS_NODE_QUOTE_BUFLEN];
	size_t n = strlen(v);

	if (n == 0)
		return fail(err, origin, "a bucket name is required");
	for (const char *p = v; *p; p++) {
		if (!bucket_char(*p))
			return fail(err, origin,
				    "%s is not a bucket name (allowed: letters, digits, "
				    "'.', '-' and '_'; put the path in prefix)",
				    tfs_node_quote(q, sizeof(q), v));
	}
	if (n > 255)
		return fail(err, origin, "a bucket name has at most 255 characters, not %zu", n);
	return 0;
}

/* Parse SOURCE with src/source.c and insist on S3. */
static int check_source(const char *v, const char *origin, struct tfs_dbuf *err)
{
	char q[TFS_NODE_QUOTE_BUFLEN];
	char msg[512];
	struct tfs_source s;
	int rc;

	if (has_ctrl(v))
		return fail(err, origin, "%s contains a control character",
			    tfs_node_quote(q, sizeof(q), v));
	if (strncmp(v, "s3://", 5) != 0)
		return fail(err, origin, "%s is not an S3 source (allowed: s3://BUCKET[/PREFIX])",
			    tfs_node_quote(q, sizeof(q), v));
	rc = tfs_source_parse(v, &s, msg, sizeof(msg));
	if (rc == ENOMEM)
		return rc;
	if (rc)
		return fail(err, origin, "%s", msg);
	rc = check_bucket(s.bucket, origin, err);
	tfs_source_clear(&s);
	return rc;
}

static int check_prefix(const char *v, const char *origin, struct tfs_dbuf *err)
{
	char q[TFS_NODE_QUOTE_BUFLEN];

	if (has_ctrl(v))
		return fail(err, origin, "%s contains a control character",
			    tfs_node_quote(q, sizeof(q), v));
	if (v[0] == '/' || strstr(v, "//"))
		return fail(err, origin,
			    "%s has an empty path segment (write a/b, not /a/b or a//b)",
			    tfs_node_quote(q, sizeof(q), v));
	return 0;
}

int tfs_node_opt_check(enum tfs_node_opt o, const char *value, const char *origin, bool from_pod,
		       struct tfs_node_value *out, struct tfs_dbuf *err)
{
	struct tfs_node_value v = { 0 };
	char q[TFS_NODE_QUOTE_BUFLEN];
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	if ((unsigned)o >= TFS_NODE_OPT_COUNT)
		return EINVAL;
	const struct tfs_node_opt_def *d = &defs[o];

	switch (d->kind) {
	case K_SOURCE:
		rc = check_source(value, origin, err);
		break;
	case K_BUCKET:
		rc = check_bucket(value, origin, err);
		break;
	case K_PREFIX:
		rc = check_prefix(value, origin, err);
		break;
	case K_BOOL:
		rc = tfs_parse_bool(value, &v.flag);
		if (rc)
			rc = fail(err, origin,
				  "%s is not a boolean (allowed: true/false, yes/no, "
				  "on/off, 1/0)",
				  tfs_node_quote(q, sizeof(q), value));
		break;
	case K_SIZE:
	case K_SIZE_PCT:
	case K_DURATION:
	case K_TIERFS:
		rc = check_tierfs(d->tierfs, value, origin, err);
		if (rc)
			break;
		/* conf.c accepted it, so these parse; they only fill *out. */
		if (d->kind == K_SIZE) {
			rc = tfs_parse_size(value, &v.num);
		} else if (d->kind == K_SIZE_PCT) {
			double pct = 0;

			rc = tfs_parse_size_or_pct(value, &v.num, &pct);
			v.pct = pct > 0;
		} else if (d->kind == K_DURATION) {
			rc = tfs_parse_duration(value, &v.num);
		}
		if (rc) /* blanks around the value: conf.c trims, the parsers do not */
			rc = fail(err, origin, "%s: remove the blanks around the value",
				  tfs_node_quote(q, sizeof(q), value));
		break;
	default:
		rc = EINVAL;
		break;
	}
	if (rc == 0 && from_pod && v.pct)
		rc = fail(err, origin,
			  "%s: a volume must give an absolute size (every volume's cache "
			  "shares the node's disk; only the node config may use N%%)",
			  tfs_node_quote(q, sizeof(q), value));
	if (rc == 0 && out)
		*out = v;
	return rc;
}

int tfs_node_opt_check_limit(enum tfs_node_opt o, const char *value, const char *origin,
			     uint64_t *num, struct tfs_dbuf *err)
{
	char q[TFS_NODE_QUOTE_BUFLEN];
	uint64_t v;
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	if ((unsigned)o >= TFS_NODE_OPT_COUNT || defs[o].limit == TFS_NODE_LIMIT_NONE)
		return EINVAL;
	if (defs[o].kind == K_DURATION) {
		rc = tfs_parse_duration(value, &v);
		if (rc)
			return fail(err, origin,
				    "%s is not a duration (allowed: a number with "
				    "ms/s/m/h suffix, or forever)",
				    tfs_node_quote(q, sizeof(q), value));
	} else {
		rc = tfs_parse_size(value, &v);
		if (rc)
			return fail(err, origin,
				    "%s is not a size (allowed: bytes with K/M/G/T "
				    "suffix; N%% cannot be a limit)",
				    tfs_node_quote(q, sizeof(q), value));
	}
	*num = v;
	return 0;
}

bool tfs_node_opt_within(enum tfs_node_opt o, const struct tfs_node_value *v, uint64_t limit)
{
	switch (tfs_node_opt_limit_kind(o)) {
	case TFS_NODE_LIMIT_MAX:
		return v->pct || v->num <= limit;
	case TFS_NODE_LIMIT_MIN:
		return v->num >= limit;
	default:
		return true;
	}
}

void tfs_node_opt_format_limit(enum tfs_node_opt o, uint64_t limit, char *buf, size_t cap)
{
	int rc;

	if ((unsigned)o < TFS_NODE_OPT_COUNT && defs[o].kind == K_DURATION)
		rc = tfs_format_duration(limit, buf, cap);
	else
		rc = tfs_format_size_exact(limit, buf, cap);
	if (rc && cap)
		snprintf(buf, cap, "%llu", (unsigned long long)limit);
}
