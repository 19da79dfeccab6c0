/* node_volume.c - the kubelet's options JSON, under the node's policy, and
 * the tierfs configuration it becomes. */
#include "config.h"

#include "node_volume.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "conf.h"
#include "node_sys.h"
#include "source.h"
#include "units.h"

/* What the pod gave, before the defaults are merged in. */
struct pod_opts {
	const char *value[TFS_NODE_OPT_COUNT]; /* borrowed from the request; NULL: absent */
	struct tfs_node_value parsed[TFS_NODE_OPT_COUNT];
};

int tfs_node_refuse(struct tfs_dbuf *err, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		tfs_dbuf_reset(err);
		tfs_dbuf_adds(err, msg);
	}
	return EINVAL;
}

void tfs_node_volume_clear(struct tfs_node_volume *v)
{
	free(v->source);
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++)
		free(v->value[i]);
	tfs_node_creds_clear(&v->creds);
	free(v->pod);
	free(v->pv);
	memset(v, 0, sizeof(*v));
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* A copy of s without surrounding blanks, or NULL (ENOMEM). */
static char *trimmed_dup(const char *s)
{
	while (is_blank(*s))
		s++;
	size_t n = strlen(s);
	while (n && is_blank(s[n - 1]))
		n--;
	return strndup(s, n);
}

/* The names of the options the node lets a pod set, for messages. */
static const char *allowed_list(const struct tfs_node_conf *node, char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		if (!node->allow[i])
			continue;
		int r = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "",
				 tfs_node_opt_name((enum tfs_node_opt)i));
		if (r < 0 || (size_t)r >= cap - n)
			break;
		n += (size_t)r;
	}
	if (n == 0)
		snprintf(buf, cap, "none");
	return buf;
}

/* One key of the volume's Secret, its value in plain text. */
static int take_secret(struct tfs_node_volume *v, const char *name, const char *value,
		       struct tfs_dbuf *err)
{
	char **slot;
	char q[TFS_NODE_QUOTE_BUFLEN];

	if (strcmp(name, "accessKey") == 0)
		slot = &v->creds.access_key;
	else if (strcmp(name, "secretKey") == 0)
		slot = &v->creds.secret_key;
	else if (strcmp(name, "sessionToken") == 0)
		slot = &v->creds.session_token;
	else
		return tfs_node_refuse(err,
				       "unknown key %s in the volume's Secret (allowed: accessKey, "
				       "secretKey, "
				       "sessionToken)",
				       tfs_node_quote(q, sizeof(q), name));
	char *copy;
	int rc = tfs_node_secret_plain(name, value, &copy, err);
	if (rc)
		return rc;
	if (*slot) {
		explicit_bzero(*slot, strlen(*slot));
		free(*slot);
	}
	*slot = copy;
	return 0;
}

/* One pod option: known, allowed, well-formed, within limits. */
static int take_option(const struct tfs_node_conf *node, struct pod_opts *p, const char *key,
		       const char *raw, struct tfs_dbuf *err)
{
	char q[TFS_NODE_QUOTE_BUFLEN], list[512], where[4200], lim[TFS_UNITS_BUFLEN], origin[128];
	enum tfs_node_opt o;

	if (tfs_node_opt_find(key, false, &o) != 0)
		return tfs_node_refuse(err, "unknown option %s (known: %s)",
				       tfs_node_quote(q, sizeof(q), key),
				       tfs_node_opt_list(list, sizeof(list)));
	if (!node->allow[o])
		return tfs_node_refuse(err,
				       "option %s: not allowed on this node (a volume may set: %s; "
				       "[pod] allow, %s)",
				       tfs_node_opt_name(o), allowed_list(node, list, sizeof(list)),
				       tfs_node_conf_where(node, node->allow_line, where,
							   sizeof(where)));
	char *value = trimmed_dup(raw);
	if (value == NULL)
		return ENOMEM;
	snprintf(origin, sizeof(origin), "option %s", tfs_node_opt_name(o));
	int rc = tfs_node_opt_check(o, value, origin, true, &p->parsed[o], err);
	if (rc == 0 && node->limit[o].set &&
	    !tfs_node_opt_within(o, &p->parsed[o], node->limit[o].value)) {
		tfs_node_opt_format_limit(o, node->limit[o].value, lim, sizeof(lim));
		rc = tfs_node_refuse(
			err, "option %s: %s is %s this node's limit %s = %s (%s)",
			tfs_node_opt_name(o), tfs_node_quote(q, sizeof(q), value),
			tfs_node_opt_limit_kind(o) == TFS_NODE_LIMIT_MAX ? "above" : "below",
			tfs_node_opt_limit_key(o), lim,
			tfs_node_conf_where(node, node->limit[o].line, where, sizeof(where)));
	}
	free(value);
	if (rc)
		return rc;
	/* The request outlives pod_opts; the trimmed form is taken again later. */
	p->value[o] = raw;
	return 0;
}

int tfs_node_parse_gid(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9' || strlen(s) > 10)
		return EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > 2147483647UL)
		return EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* The bucket and prefix of s3://BUCKET[/PREFIX] (already checked). */
static int split_source(const char *src, char **bucket, char **prefix)
{
	struct tfs_source s;
	char msg[256];
	int rc = tfs_source_parse(src, &s, msg, sizeof(msg));

	if (rc)
		return rc;
	*bucket = s.bucket;
	*prefix = s.prefix;
	s.bucket = s.prefix = NULL;
	tfs_source_clear(&s);
	return 0;
}

/* Replace *dst with a trimmed copy of src (NULL: free it). */
static int set_copy(char **dst, const char *src)
{
	char *c = NULL;

	if (src) {
		c = trimmed_dup(src);
		if (c == NULL)
			return ENOMEM;
	}
	free(*dst);
	*dst = c;
	return 0;
}

/* Decide s3://BUCKET[/PREFIX] from the pod's and the node's options. */
static int resolve_source(const struct tfs_node_conf *node, const struct pod_opts *p,
			  struct tfs_node_volume *v, struct tfs_dbuf *err)
{
	char *bucket = NULL, *prefix = NULL;
	const struct tfs_node_conf_default *d = node->def;
	int rc = 0;

	if (p->value[TFS_NODE_OPT_SOURCE] &&
	    (p->value[TFS_NODE_OPT_BUCKET] || p->value[TFS_NODE_OPT_PREFIX]))
		return tfs_node_refuse(err,
				       "options source and %s exclude each other (source is "
				       "s3://BUCKET[/PREFIX])",
				       p->value[TFS_NODE_OPT_BUCKET] ? "bucket" : "prefix");
	if (p->value[TFS_NODE_OPT_SOURCE]) {
		char *s = trimmed_dup(p->value[TFS_NODE_OPT_SOURCE]);

		rc = s ? split_source(s, &bucket, &prefix) : ENOMEM;
		free(s);
	} else if (p->value[TFS_NODE_OPT_BUCKET]) {
		rc = set_copy(&bucket, p->value[TFS_NODE_OPT_BUCKET]);
		if (rc == 0)
			rc = set_copy(&prefix, p->value[TFS_NODE_OPT_PREFIX]);
	} else {
		if (d[TFS_NODE_OPT_SOURCE].value)
			rc = split_source(d[TFS_NODE_OPT_SOURCE].value, &bucket, &prefix);
		else
			rc = set_copy(&bucket, d[TFS_NODE_OPT_BUCKET].value);
		if (rc == 0 && !d[TFS_NODE_OPT_SOURCE].value)
			rc = set_copy(&prefix, d[TFS_NODE_OPT_PREFIX].value);
		if (rc == 0 && p->value[TFS_NODE_OPT_PREFIX])
			rc = set_copy(&prefix, p->value[TFS_NODE_OPT_PREFIX]);
	}
	if (rc == 0 && (bucket == NULL || *bucket == '\0'))
		rc = tfs_node_refuse(err, "missing bucket: set the option source "
					  "(s3://BUCKET[/PREFIX]) or "
					  "bucket");
	if (rc == 0) {
		struct tfs_dbuf s;
		struct tfs_node_value unused;

		tfs_dbuf_init(&s, 8192);
		/* tfs_source_parse() wants no trailing '/' doubled: strip it. */
		size_t plen = prefix ? strlen(prefix) : 0;
		while (plen && prefix[plen - 1] == '/')
			prefix[--plen] = '\0';
		rc = tfs_dbuf_addf(&s, "s3://%s%s%s", bucket, plen ? "/" : "", plen ? prefix : "");
		if (rc == 0)
			rc = tfs_node_opt_check(TFS_NODE_OPT_SOURCE, tfs_dbuf_str(&s),
						"the volume's source", false, &unused, err);
		if (rc == 0) {
			v->source = tfs_dbuf_steal(&s);
			rc = v->source ? 0 : ENOMEM;
		}
		tfs_dbuf_free(&s);
	}
	free(bucket);
	free(prefix);
	return rc;
}

static int check_creds(const struct tfs_node_conf *node, const struct tfs_node_volume *v,
		       struct tfs_dbuf *err)
{
	if ((v->creds.access_key == NULL) != (v->creds.secret_key == NULL))
		return tfs_node_refuse(err,
				       "secret: the volume's Secret has %s but not %s (both are "
				       "required)",
				       v->creds.access_key ? "accessKey" : "secretKey",
				       v->creds.access_key ? "secretKey" : "accessKey");
	if (v->creds.access_key == NULL && v->creds.session_token)
		return tfs_node_refuse(err, "secret: the volume's Secret has sessionToken but not "
					    "accessKey "
					    "and secretKey");
	if (v->creds.access_key == NULL && node->credentials_file == NULL)
		return tfs_node_refuse(err,
				       "no credentials: give the volume a secretRef to a Secret of "
				       "type "
				       "tierfs/tierfs with accessKey and secretKey (or set "
				       "credentials_file "
				       "in [node] of %s)",
				       node->path ? node->path : "the node config");
	return 0;
}

static int dup_or_null(char **dst, const char *s)
{
	*dst = NULL;
	if (s && (*dst = strdup(s)) == NULL)
		return ENOMEM;
	return 0;
}

int tfs_node_volume_make(const struct tfs_node_request *rq, const struct tfs_node_conf *node,
			 struct tfs_node_volume *out, struct tfs_dbuf *err)
{
	struct pod_opts p = { 0 };
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (err)
		tfs_dbuf_reset(err);
	for (size_t i = 0; rc == 0 && i < rq->n_opt; i++)
		rc = take_option(node, &p, rq->opt[i].key, rq->opt[i].value, err);
	for (size_t i = 0; rc == 0 && i < rq->n_secret; i++)
		rc = take_secret(out, rq->secret[i].key, rq->secret[i].value, err);
	if (rc == 0 && rq->fsgroup && tfs_node_parse_gid(rq->fsgroup, &out->fsgroup)) {
		char q[TFS_NODE_QUOTE_BUFLEN];

		rc = tfs_node_refuse(err, "%s: %s is not a group id (0 to 2147483647)",
				     rq->fsgroup_origin ? rq->fsgroup_origin : "fsGroup",
				     tfs_node_quote(q, sizeof(q), rq->fsgroup));
	}
	if (rc == 0)
		rc = resolve_source(node, &p, out, err);
	if (rc == 0)
		rc = check_creds(node, out, err);
	if (rc)
		goto out;

	/* The other options: the pod's value, else the node's default. */
	bool ro_opt = false;
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		enum tfs_node_opt o = (enum tfs_node_opt)i;

		if (o == TFS_NODE_OPT_SOURCE || o == TFS_NODE_OPT_BUCKET ||
		    o == TFS_NODE_OPT_PREFIX)
			continue;
		const char *chosen = p.value[o] ? p.value[o] : node->def[o].value;
		if (chosen == NULL)
			continue;
		if (o == TFS_NODE_OPT_READ_ONLY) {
			ro_opt = p.value[o] ? p.parsed[o].flag : node->def[o].parsed.flag;
			continue;
		}
		rc = set_copy(&out->value[o], chosen);
		if (rc)
			goto out;
		out->from_pod[o] = p.value[o] != NULL;
	}
	out->read_only = ro_opt || rq->read_only;
	out->has_fsgroup = rq->fsgroup != NULL;
	if (out->read_only && out->from_pod[TFS_NODE_OPT_WRITEBACK] &&
	    strcmp(out->value[TFS_NODE_OPT_WRITEBACK], "off") != 0) {
		char q[TFS_NODE_QUOTE_BUFLEN];

		rc = tfs_node_refuse(
			err,
			"option writeback: %s on a read-only volume (readOnly or %s); use "
			"writeback=off or a read-write volume",
			tfs_node_quote(q, sizeof(q), out->value[TFS_NODE_OPT_WRITEBACK]),
			rq->read_only_origin ? rq->read_only_origin : "a read-only request");
		goto out;
	}
	rc = dup_or_null(&out->pod, rq->pod);
	if (rc == 0)
		rc = dup_or_null(&out->pv, rq->pv);
out:
	if (rc)
		tfs_node_volume_clear(out);
	return rc;
}

/* ---- the daemon's configuration ---- */

static int set_key(struct tfs_config *cfg, const char *key, const char *value, const char *origin,
		   struct tfs_dbuf *err)
{
	struct tfs_dbuf a;
	int rc;

	tfs_dbuf_init(&a, 64 * 1024);
	rc = tfs_dbuf_addf(&a, "%s=%s", key, value ? value : "");
	if (rc == 0)
		rc = tfs_config_set(cfg, tfs_dbuf_str(&a), origin, err);
	tfs_dbuf_free(&a);
	return rc;
}

int tfs_node_volume_tierfs_conf(const struct tfs_node_volume *v, const struct tfs_node_conf *node,
				const char *ssd_dir, const char *creds_file, struct tfs_dbuf *out,
				bool *writable, struct tfs_dbuf *err)
{
	struct tfs_config cfg;
	char origin[4300], where[4200];
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	rc = tfs_config_defaults(&cfg);
	if (rc)
		return rc;
	if (node->tierfs_conf)
		rc = tfs_config_load(&cfg, node->tierfs_conf, true, err);
	for (int i = 0; rc == 0 && i < TFS_NODE_OPT_COUNT; i++) {
		enum tfs_node_opt o = (enum tfs_node_opt)i;
		const char *key = tfs_node_opt_tierfs_key(o);

		if (key == NULL || v->value[o] == NULL)
			continue;
		if (v->from_pod[o])
			snprintf(origin, sizeof(origin), "option %s:", tfs_node_opt_name(o));
		else
			snprintf(origin, sizeof(origin), "%s: [defaults] %s:",
				 tfs_node_conf_where(node, node->def[o].line, where, sizeof(where)),
				 tfs_node_opt_name(o));
		rc = set_key(&cfg, key, v->value[o], origin, err);
	}
	/* The pod chooses the bucket and prefix, so whoever can write there
	 * chooses the modes: never trusted, whatever the node's base says. */
	if (rc == 0)
		rc = set_key(&cfg, "mount.trusted", "false",
			     node->driver == TFS_NODE_DRIVER_CSI ? "a CSI volume:"
								 : "a FlexVolume volume:",
			     err);
	if (rc == 0)
		rc = set_key(&cfg, "ssd.dir", ssd_dir, "the volume's cache directory:", err);
	if (rc == 0 && creds_file)
		rc = set_key(&cfg, "backend.credentials_file", creds_file,
			     "the volume's credentials file:", err);
	if (rc == 0 && node->daemon_log)
		rc = set_key(&cfg, "log.file", node->daemon_log, "[node] daemon_log:", err);
	if (rc == 0 && v->read_only)
		rc = set_key(&cfg, "writeback.mode", "off", "a read-only volume:", err);
	if (rc == 0) {
		rc = tfs_config_validate(&cfg, err);
		if (rc == EINVAL && err) {
			char *m = tfs_dbuf_steal(err);

			tfs_dbuf_addf(err, "the volume's settings do not fit together: %s",
				      m ? m : "");
			free(m);
		}
	}
	if (rc == 0)
		/* The source is on the daemon's command line; a comment line
		 * naming it could exceed the config reader's line limit. */
		rc = tfs_dbuf_addf(out,
				   "# Written by %s for one volume; rewritten at each mount.%s\n",
				   tfs_node_driver_name(node->driver),
				   v->read_only ? " Read-only." : "");
	if (rc == 0)
		rc = tfs_config_dump(&cfg, false, out);
	if (rc == 0 && writable)
		*writable = !v->read_only && cfg.writeback.mode != TFS_WB_OFF;
	tfs_config_clear(&cfg);
	return rc;
}

/* ---- the fingerprint ---- */

int tfs_node_volume_fingerprint(const struct tfs_node_volume *v, const unsigned char *key,
				size_t keylen, char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	struct tfs_dbuf s;
	int rc;

	if (len < TFS_NODE_HASH_LEN + 1)
		return ERANGE;
	tfs_dbuf_init(&s, 1 << 20);
	/* The whole credential, not just the access key ID, which is no
	 * secret: a volume that names another's key ID with a guessed
	 * secret key must not share its daemon. */
	rc = tfs_dbuf_addf(&s,
			   "source=%s\nro=%d\nfsgroup=%d:%u\naccess_key=%s\nsecret_key=%s\n"
			   "session_token=%s\n",
			   v->source, v->read_only, v->has_fsgroup, v->has_fsgroup ? v->fsgroup : 0,
			   v->creds.access_key ? v->creds.access_key : "",
			   v->creds.secret_key ? v->creds.secret_key : "",
			   v->creds.session_token ? v->creds.session_token : "");
	for (int i = 0; rc == 0 && i < TFS_NODE_OPT_COUNT; i++) {
		if (v->value[i])
			rc = tfs_dbuf_addf(&s, "%s=%s\n", tfs_node_opt_name((enum tfs_node_opt)i),
					   v->value[i]);
	}
	/* Keyed: without the node's key, the fingerprint tells nothing
	 * about the secret key in the text, however weak it is. */
	if (rc == 0 &&
	    (keylen == 0 || keylen > INT_MAX ||
	     HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)tfs_dbuf_str(&s),
		  tfs_dbuf_len(&s), md, &mdlen) == NULL ||
	     mdlen * 2 < TFS_NODE_HASH_LEN))
		rc = EIO;
	if (rc == 0) {
		for (int i = 0; i < TFS_NODE_HASH_LEN / 2; i++) {
			out[2 * i] = hex[md[i] >> 4];
			out[2 * i + 1] = hex[md[i] & 15];
		}
		out[TFS_NODE_HASH_LEN] = '\0';
	}
	if (s.buf)
		explicit_bzero(s.buf, s.len);
	explicit_bzero(md, sizeof(md));
	tfs_dbuf_free(&s);
	return rc;
}

/* ---- the mount options ---- */

int tfs_node_volume_mount_opts(const struct tfs_node_volume *v, const struct tfs_node_conf *node,
			       struct tfs_dbuf *out)
{
	int rc = tfs_dbuf_adds(out, v->read_only ? "allow_other,ro" : "allow_other");

	if (rc == 0 && v->has_fsgroup && node->fsgroup)
		rc = tfs_dbuf_addf(out, ",gid=%u,dir_mode=%04o,file_mode=%04o", v->fsgroup,
				   node->fsgroup_dir_mode, node->fsgroup_file_mode);
	if (rc == 0 && node->selinux_context) {
		rc = tfs_dbuf_adds(out, ",context=\"");
		for (const char *p = node->selinux_context; rc == 0 && *p; p++) {
			if (*p == ',' || *p == '\\')
				rc = tfs_dbuf_add(out, "\\", 1);
			if (rc == 0)
				rc = tfs_dbuf_add(out, p, 1);
		}
		if (rc == 0)
			rc = tfs_dbuf_adds(out, "\"");
	}
	return rc;
}
