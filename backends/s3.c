/* s3.c - the S3 backend: its operations table, the single-request
 * operations (HEAD, LIST, ranged GET, PUT, DELETE, COPY) and the instance's
 * life cycle (endpoint, credentials, cache identity).
 *
 * Calls go one way: s3.c -> s3_multipart.c (multipart uploads, also the
 * resumable ones, their abort and ListMultipartUploads) -> s3_request.c
 * (building, signing, sending and retrying one request; error mapping) ->
 * s3_http.c (transport and pooling), s3_sigv4.c, s3_xml.c (reply bodies).
 */
#include "config.h"

#include "backend_impl.h"
#include "s3_endpoint.h"
#include "s3_internal.h"
#include "s3_xml.h"

#include "backoff.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static int s3_head(void *priv, const char *key, struct tfs_obj_meta *out)
{
	struct s3 *s = priv;
	char *fk = s3_full_key(s, key);
	if (fk == NULL)
		return ENOMEM;
	int rc = s3_head_full(s, fk, out);
	free(fk);
	return rc;
}

static int s3_head_check(void *priv, const char *key, struct tfs_obj_check *out)
{
	struct s3 *s = priv;
	char *fk = s3_full_key(s, key);
	if (fk == NULL)
		return ENOMEM;
	int rc = s3_head_check_full(s, fk, out);
	free(fk);
	return rc;
}

static int s3_list(void *priv, const char *prefix, const char *delimiter, const char *token,
		   size_t max_keys, struct tfs_list_page *out)
{
	struct s3 *s = priv;
	struct tfs_http_resp r;
	char what[512], maxk[24];
	struct tfs_kv q[6];
	size_t n = 0;
	char *fp = s3_full_key(s, prefix);
	if (fp == NULL)
		return ENOMEM;
	snprintf(maxk, sizeof(maxk), "%zu", max_keys);
	q[n++] = (struct tfs_kv){ "list-type", "2" };
	q[n++] = (struct tfs_kv){ "prefix", fp };
	q[n++] = (struct tfs_kv){ "max-keys", maxk };
	q[n++] = (struct tfs_kv){ "encoding-type", "url" };
	if (delimiter && *delimiter)
		q[n++] = (struct tfs_kv){ "delimiter", delimiter };
	if (token && *token)
		q[n++] = (struct tfs_kv){ "continuation-token", token };
	s3_describe_op(what, sizeof(what), "LIST", s, fp);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "GET", .query = q, .n_query = n };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		rc = tfs_s3_xml_parse_list(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body),
					   s->cfg.prefix, out);
		if (rc)
			tfs_err(s->log,
				"s3: %s: malformed or refused ListObjectsV2 reply "
				"(bad XML, a size above 2^63-1, or truncated without a token)",
				what);
	}
	tfs_http_resp_clear(&r);
	free(fp);
	return rc;
}

/* Check that a 200 or 206 reply to GET bytes [off, off+len) is that
 * range: a 206's Content-Range must start at `off` and end at off+len-1,
 * or earlier only where the object ends (its total size); a 200 (the whole
 * object, of which the transfer kept the range) must have delivered
 * min(len, size - off) bytes of its Content-Length.  Returns 0 or EIO
 * (logged): such a reply is never cached. */
static int check_range_reply(struct s3 *s, const char *what, const struct tfs_http_resp *r,
			     uint64_t off, uint64_t len)
{
	uint64_t last = off + len - 1;

	if (r->status == 200) {
		if (r->content_length < 0)
			return 0; /* a body read to its end: r->got tells */
		uint64_t size = (uint64_t)r->content_length;
		uint64_t want = size > off ? size - off : 0;
		if (want > len)
			want = len;
		if (r->got == want)
			return 0;
		tfs_err(s->log,
			"s3: %s: whole-object reply of %" PRIu64 " bytes gave %" PRIu64 " bytes of "
			"the range",
			what, size, r->got);
		return EIO;
	}
	if (r->range_first < 0) {
		tfs_err(s->log, "s3: %s: 206 reply without a readable Content-Range", what);
		return EIO;
	}
	uint64_t first = (uint64_t)r->range_first, rlast = (uint64_t)r->range_last;
	bool ok = first == off && rlast <= last;
	if (ok && rlast < last)
		ok = r->range_total >= 0 && rlast + 1 == (uint64_t)r->range_total;
	if (ok && r->range_total >= 0 && rlast >= (uint64_t)r->range_total)
		ok = false;
	if (ok && r->content_length >= 0 && (uint64_t)r->content_length != rlast - first + 1)
		ok = false;
	if (ok)
		return 0;
	tfs_err(s->log,
		"s3: %s: reply for bytes %" PRId64 "-%" PRId64 "/%" PRId64 ", not the range asked "
		"for",
		what, r->range_first, r->range_last, r->range_total);
	return EIO;
}

static int s3_get_range(void *priv, const char *key, uint64_t off, uint64_t len,
			const char *if_match, struct tfs_io dst, size_t *got,
			char etag_out[TFS_ETAG_MAX])
{
	struct s3 *s = priv;
	struct tfs_http_resp r;
	char what[600], range[64];
	struct tfs_kv h[2];
	size_t n = 0;

	*got = 0;
	if (len == 0)
		return 0;
	char *fk = s3_full_key(s, key);
	if (fk == NULL)
		return ENOMEM;
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
	h[n++] = (struct tfs_kv){ "range", range };
	if (if_match && *if_match)
		h[n++] = (struct tfs_kv){ "if-match", if_match };
	snprintf(what, sizeof(what), "GET s3://%s/%s [%s]", s->cfg.bucket, fk, range + 6);
	tfs_http_resp_init(&r);
	struct s3_call c = {
		.method = "GET",
		.key = fk,
		.headers = h,
		.n_headers = n,
		.dst = &dst,
		.dst_cap = len,
		.dst_skip = off,
	};
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0) {
		if (r.status == 416) {
			/* The range starts at or past the end of the object. */
			rc = 0;
		} else if (r.status != 200 && r.status != 206) {
			rc = s3_fail(s, what, &r);
		} else if ((rc = check_range_reply(s, what, &r, off, len)) == 0) {
			uint64_t expect = r.got;
			if (r.status == 206 && r.content_length >= 0)
				expect = (uint64_t)r.content_length;
			if (r.got != expect) {
				tfs_err(s->log,
					"s3: %s: short body (%" PRIu64 " of %" PRIu64 " bytes)",
					what, r.got, expect);
				rc = EIO;
			} else {
				*got = (size_t)r.got;
				memcpy(etag_out, r.etag, TFS_ETAG_MAX);
			}
		}
	}
	tfs_http_resp_clear(&r);
	free(fk);
	return rc;
}

/* One PUT request; `if_absent`: with If-None-Match: * (412: ESTALE). */
static int s3_put_single(struct s3 *s, const char *fk, struct tfs_io src, uint64_t len,
			 const struct tfs_obj_meta *meta, bool if_absent,
			 char etag_out[TFS_ETAG_MAX])
{
	struct tfs_http_resp r;
	struct tfs_kv *h = NULL;
	size_t nh = 0, extra = if_absent ? 1 : 0;
	char what[512];
	int rc = s3_meta_headers(meta, extra, &h, &nh);
	if (rc)
		return rc;
	if (if_absent)
		h[0] = (struct tfs_kv){ "if-none-match", "*" };
	s3_describe_op(what, sizeof(what), "PUT", s, fk);
	struct tfs_http_body body = { .src = src, .len = len };
	tfs_http_resp_init(&r);
	struct s3_call c = {
		.method = "PUT", .key = fk, .headers = h, .n_headers = nh, .body = &body
	};
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && (r.status < 200 || r.status > 299))
		rc = s3_fail(s, what, &r);
	if (rc == 0)
		memcpy(etag_out, r.etag, TFS_ETAG_MAX);
	tfs_http_resp_clear(&r);
	s3_meta_headers_free(h, extra, nh);
	return rc;
}

/* Whether a PUT of `len` bytes goes up as a multipart upload. */
static bool s3_wants_multipart(void *priv, uint64_t len)
{
	const struct s3 *s = priv;
	return len >= s->cfg.multipart_threshold && len > s->cfg.part_size;
}

static int s3_put(void *priv, const char *key, struct tfs_io src, uint64_t len,
		  const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct s3 *s = priv;
	if (s3_wants_multipart(s, len))
		return s3_put_multipart(s, key, src, len, meta, etag_out);
	char *fk = s3_full_key(s, key);
	if (fk == NULL)
		return ENOMEM;
	int rc = s3_put_single(s, fk, src, len, meta, false, etag_out);
	free(fk);
	return rc;
}

static int s3_put_new(void *priv, const char *key, struct tfs_io src, uint64_t len,
		      const struct tfs_obj_meta *meta)
{
	struct s3 *s = priv;
	char etag[TFS_ETAG_MAX];
	if (s3_wants_multipart(s, len))
		return ENOTSUP; /* one request only */
	char *fk = s3_full_key(s, key);
	if (fk == NULL)
		return ENOMEM;
	int rc = s3_put_single(s, fk, src, len, meta, true, etag);
	free(fk);
	return rc;
}

static int s3_delete(void *priv, const char *key)
{
	struct s3 *s = priv;
	struct tfs_http_resp r;
	char what[512];
	char *fk = s3_full_key(s, key);
	if (fk == NULL)
		return ENOMEM;
	s3_describe_op(what, sizeof(what), "DELETE", s, fk);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "DELETE", .key = fk };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && (r.status < 200 || r.status > 299) && r.status != 404)
		rc = s3_fail(s, what, &r);
	tfs_http_resp_clear(&r);
	free(fk);
	return rc;
}

/* CopyObject of full key `fs` (x-amz-copy-source `source`) to full key
 * `fd`, keeping the source's metadata (meta NULL) or replacing it. */
static int copy_once(struct s3 *s, const char *source, const char *fs, const char *fd,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct tfs_http_resp r;
	struct tfs_kv *h = NULL;
	size_t nh = 0;
	char what[1024];

	int rc = s3_meta_headers(meta, 2, &h, &nh);
	if (rc)
		return rc == ENOMEM ? ENOMEM : EINVAL;
	h[0] = (struct tfs_kv){ "x-amz-copy-source", source };
	h[1] = (struct tfs_kv){ "x-amz-metadata-directive", meta ? "REPLACE" : "COPY" };
	snprintf(what, sizeof(what), "COPY s3://%s/%s to %s", s->cfg.bucket, fs, fd);
	tfs_http_resp_init(&r);
	/* The server copies the bytes before it answers. */
	struct s3_call c = {
		.method = "PUT", .key = fd, .headers = h, .n_headers = nh, .slow_reply = true
	};
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		/* A 200 reply to a copy can still carry an <Error>. */
		char code[128] = "", msg[512] = "";
		rc = tfs_s3_xml_parse_etag(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), etag_out,
					   code, sizeof(code), msg, sizeof(msg));
		if (rc)
			tfs_err(s->log, "s3: %s: failed: %s %s", what,
				code[0] ? code : "malformed reply", msg);
	}
	tfs_http_resp_clear(&r);
	s3_meta_headers_free(h, 2, nh);
	return rc;
}

/* One CopyObject when the caller's size says it fits, else a HEAD and a
 * copy in parts when the object is larger than copy_part_size.  S3 refuses
 * one copy of more than 5 GiB with 400 (EINVAL): when the size was wrong
 * (the object grew), the HEAD tells and the copy is made in parts. */
static int s3_copy(void *priv, const char *src, const char *dst, uint64_t size,
		   const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct s3 *s = priv;
	struct tfs_dbuf source;
	struct tfs_obj_meta hm = { 0 };
	char *fs = s3_full_key(s, src);
	char *fd = s3_full_key(s, dst);
	int rc = (fs && fd) ? 0 : ENOMEM;

	tfs_dbuf_init(&source, 8192);
	if (rc == 0)
		rc = tfs_dbuf_adds(&source, s->copy_base);
	if (rc == 0)
		rc = tfs_uri_encode(&source, fs, true);
	if (rc) {
		rc = rc == ENOMEM ? ENOMEM : EINVAL;
		goto out;
	}
	bool fits = size <= s->cfg.copy_part_size; /* TFS_SIZE_UNKNOWN does not */
	if (fits) {
		rc = copy_once(s, tfs_dbuf_str(&source), fs, fd, meta, etag_out);
		if (rc != EINVAL)
			goto out;
	}
	int hrc = s3_head_full(s, fs, &hm);
	if (hrc == 0 && hm.size > s->cfg.copy_part_size)
		rc = s3_copy_multipart(s, tfs_dbuf_str(&source), fs, fd, hm.size, hm.etag,
				       meta ? meta : &hm, etag_out);
	else if (!fits)
		rc = hrc ? hrc : copy_once(s, tfs_dbuf_str(&source), fs, fd, meta, etag_out);
out:
	tfs_obj_meta_clear(&hm);
	tfs_dbuf_free(&source);
	free(fs);
	free(fd);
	return rc;
}

/* ---- lifecycle ---- */

static void s3_destroy(void *priv)
{
	struct s3 *s = priv;
	if (s == NULL)
		return;
	tfs_http_pool_destroy(s->pool);
	tfs_s3_creds_clear(&s->creds);
	free(s->cfg.endpoint);
	free(s->cfg.region);
	free(s->cfg.bucket);
	free(s->cfg.prefix);
	free(s->cfg.ca_file);
	free(s->cfg.credentials_file);
	free(s->cfg.profile);
	s3_addr_free(atomic_load(&s->addr));
	pthread_mutex_destroy(&s->switch_lock);
	free(s->identity);
	free(s->path_base);
	free(s->copy_base);
	free(s);
}

static const char *s3_cache_identity(void *priv)
{
	const struct s3 *s = priv;
	return s->identity;
}

/* Fill s->identity from the credentials.  The access key ID names them but
 * is no secret: anyone may learn it.  The HMAC of a fixed message under the
 * secret key ties the identity to the secret as well, without revealing
 * it, so a mount given the right key ID with a wrong secret (for example
 * while the server cannot be asked) gets a cache of its own.  Returns 0,
 * ENOMEM or EIO (OpenSSL failed; logged). */
static int make_identity(struct s3 *s)
{
	static const char msg[] = "tierfs cache identity";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	const char *secret = s->creds.secret_key;

	if (HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg,
		 sizeof(msg) - 1, md, &mdlen) == NULL ||
	    mdlen < 16) {
		tfs_err(s->log, "s3: cannot derive the cache identity (HMAC-SHA256 failed)");
		return EIO;
	}
	struct tfs_dbuf d;
	int rc;
	tfs_dbuf_init(&d, strlen(s->creds.access_key) + 64);
	rc = tfs_dbuf_addf(&d, "%s ", s->creds.access_key);
	for (int i = 0; rc == 0 && i < 16; i++)
		rc = tfs_dbuf_addf(&d, "%02x", md[i]);
	OPENSSL_cleanse(md, sizeof(md));
	s->identity = rc == 0 ? tfs_dbuf_steal(&d) : NULL;
	tfs_dbuf_free(&d);
	return s->identity ? 0 : ENOMEM;
}

/* S3 refuses keys longer than 1,024 bytes (UTF-8), the prefix included. */
static int s3_check_key(void *priv, const char *key)
{
	const struct s3 *s = priv;
	size_t plen = s->cfg.prefix ? strlen(s->cfg.prefix) : 0;
	return plen + strlen(key) > 1024 ? ENAMETOOLONG : 0;
}

static const struct tfs_backend_ops s3_ops = {
	.name = "s3",
	.head = s3_head,
	.head_check = s3_head_check,
	.list = s3_list,
	.get_range = s3_get_range,
	.put = s3_put,
	.put_new = s3_put_new,
	.del = s3_delete,
	.copy = s3_copy,
	.wants_multipart = s3_wants_multipart,
	.put_resumable = s3_put_resumable,
	.abort_upload = s3_abort_upload,
	.upload_begin = s3_upload_begin,
	.upload_part = s3_upload_part,
	.multipart_geometry = s3_multipart_geometry,
	.count_uploads = s3_count_uploads,
	.cache_identity = s3_cache_identity,
	.check_key = s3_check_key,
	.destroy = s3_destroy,
};

static char *dup_or_null(const char *s, bool *nomem)
{
	if (s == NULL)
		return NULL;
	char *d = strdup(s);
	if (d == NULL)
		*nomem = true;
	return d;
}

/* The request paths' fixed parts, from the bucket and the addressing
 * style. */
static int make_bases(struct s3 *s)
{
	struct tfs_dbuf d;
	bool nomem = false;

	tfs_dbuf_init(&d, 4096);
	if (s->path_style)
		nomem |= tfs_dbuf_addf(&d, "/%s", s->cfg.bucket) != 0;
	s->path_base = tfs_dbuf_steal(&d);
	tfs_dbuf_init(&d, 4096);
	nomem |= tfs_dbuf_addf(&d, "/%s/", s->cfg.bucket) != 0;
	s->copy_base = tfs_dbuf_steal(&d);
	return nomem || !s->path_base || !s->copy_base ? ENOMEM : 0;
}

static bool bucket_name_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63)
		return false;
	for (const char *p = b; *p; p++) {
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		      c == '_' || (c >= 'A' && c <= 'Z')))
			return false;
	}
	return true;
}

int tfs_s3_create(const struct tfs_s3_config *cfg, const struct tfs_log *log,
		  struct tfs_backend **out)
{
	struct s3 *s = calloc(1, sizeof(*s));
	bool nomem = false;
	int rc;

	if (s == NULL)
		return ENOMEM;
	s->log = log;
	s->cfg = *cfg;
	pthread_mutex_init(&s->switch_lock, NULL);
	s->cfg.endpoint = dup_or_null(cfg->endpoint, &nomem);
	s->cfg.region = dup_or_null(cfg->region && *cfg->region ? cfg->region : NULL, &nomem);
	s->cfg.bucket = dup_or_null(cfg->bucket, &nomem);
	s->cfg.prefix = dup_or_null(cfg->prefix ? cfg->prefix : "", &nomem);
	s->cfg.ca_file = dup_or_null(cfg->ca_file && *cfg->ca_file ? cfg->ca_file : NULL, &nomem);
	s->cfg.credentials_file = dup_or_null(cfg->credentials_file, &nomem);
	s->cfg.profile = dup_or_null(cfg->profile, &nomem);
	if (nomem) {
		s3_destroy(s);
		return ENOMEM;
	}
	if (s->cfg.bucket == NULL || !bucket_name_ok(s->cfg.bucket)) {
		tfs_err(log, "s3: invalid bucket name '%s'", s->cfg.bucket ? s->cfg.bucket : "");
		s3_destroy(s);
		return EINVAL;
	}
	size_t plen = strlen(s->cfg.prefix);
	if (plen && s->cfg.prefix[plen - 1] != '/') {
		tfs_err(log, "s3: prefix '%s' must end in '/'", s->cfg.prefix);
		s3_destroy(s);
		return EINVAL;
	}
	if (s->cfg.part_size < 5u * 1024 * 1024) {
		tfs_err(log, "s3: part_size must be at least 5 MiB");
		s3_destroy(s);
		return EINVAL;
	}
	if (s->cfg.copy_part_size == 0)
		s->cfg.copy_part_size = S3_MAX_COPY;
	if (s->cfg.copy_part_size < 5u * 1024 * 1024 || s->cfg.copy_part_size > S3_MAX_COPY) {
		tfs_err(log, "s3: copy_part_size must be 5 MiB to 5 GiB");
		s3_destroy(s);
		return EINVAL;
	}
	if (s->cfg.upload_parallel == 0)
		s->cfg.upload_parallel = 1;
	s->path_style =
		tfs_s3_path_style_effective(cfg->path_style, s->cfg.endpoint, s->cfg.bucket);
	struct s3_addr *addr = NULL;
	rc = s3_addr_make(s, s->cfg.region ? s->cfg.region : "us-east-1", &addr);
	atomic_init(&s->addr, addr);
	if (rc == 0)
		rc = make_bases(s);
	if (rc == 0)
		rc = tfs_s3_creds_load(s->cfg.credentials_file, s->cfg.profile, log, &s->creds);
	if (rc == 0)
		rc = make_identity(s);
	if (rc == 0) {
		struct tfs_http_config hc = {
			.max_connections = cfg->max_connections,
			.connect_timeout_ms = cfg->connect_timeout_ms,
			.low_speed_time_s = cfg->low_speed_time_s,
			.low_speed_limit = cfg->low_speed_limit,
			.ca_file = s->cfg.ca_file,
		};
		rc = tfs_http_pool_create(&hc, log, &s->pool);
	}
	if (rc == 0) {
		struct tfs_dbuf d;
		tfs_dbuf_init(&d, 4096);
		rc = tfs_dbuf_addf(&d, "s3://%s/%s", s->cfg.bucket, s->cfg.prefix);
		if (rc == 0)
			rc = tfs_backend_new(&s3_ops, s, tfs_dbuf_str(&d), out);
		tfs_dbuf_free(&d);
	}
	if (rc) {
		s3_destroy(s);
		return rc;
	}
	tfs_info(log, "s3: %s via %s (%s addressing, region %s), credentials from %s",
		 tfs_backend_describe(*out), addr->origin,
		 s->path_style ? "path-style" : "virtual-hosted", addr->region, s->creds.source);
	return 0;
}
