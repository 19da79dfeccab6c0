/* s3.c - the S3 backend: requests, signing, retries and error mapping.
 *
 * Every operation goes through s3_call(), which builds the URL (path-style
 * or virtual-hosted), signs with SigV4 (the payload hash is always sent:
 * Ceph RGW requires x-amz-content-sha256), and retries what is worth
 * retrying.  Response bodies are parsed by s3_xml.c; HTTP transport and
 * pooling live in s3_http.c; multipart uploads (also the resumable ones,
 * their abort and ListMultipartUploads) in s3_multipart.c.
 */
#include "config.h"

#include "backend_impl.h"
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

#define HASH_CHUNK (1u << 20)
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

char *s3_full_key(const struct s3 *s, const char *key)
{
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 4096);
	if (tfs_dbuf_adds(&d, s->cfg.prefix ? s->cfg.prefix : "") || tfs_dbuf_adds(&d, key)) {
		tfs_dbuf_free(&d);
		return NULL;
	}
	return tfs_dbuf_steal(&d);
}

/* ---- payload hashing ---- */

static int hash_body(const struct tfs_http_body *b, char out[65])
{
	if (b == NULL || b->len == 0) {
		memcpy(out, EMPTY_SHA256, 65);
		return 0;
	}
	if (b->src.kind == TFS_IO_BUF) {
		tfs_sha256_hex(b->src.cbuf, b->len, out);
		return 0;
	}
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	char *buf = malloc(HASH_CHUNK);
	int rc = 0;
	if (ctx == NULL || buf == NULL || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		rc = ENOMEM;
		goto out;
	}
	for (uint64_t done = 0; done < b->len;) {
		size_t want = b->len - done < HASH_CHUNK ? (size_t)(b->len - done) : HASH_CHUNK;
		ssize_t n = pread(b->src.fd, buf, want, b->src.off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? errno : EIO;
			goto out;
		}
		EVP_DigestUpdate(ctx, buf, (size_t)n);
		done += (uint64_t)n;
	}
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
out:
	EVP_MD_CTX_free(ctx);
	free(buf);
	return rc;
}

/* ---- request building ---- */

static int build_url(struct s3 *s, const struct s3_call *c, struct tfs_dbuf *path,
		     struct tfs_dbuf *url)
{
	int rc = tfs_dbuf_adds(path, s->path_base);
	if (rc == 0)
		rc = tfs_dbuf_addc(path, '/');
	if (rc == 0 && c->key)
		rc = tfs_dbuf_adds(path, c->key);
	if (rc == 0)
		rc = tfs_dbuf_adds(url, s->origin);
	if (rc == 0)
		rc = tfs_uri_encode(url, tfs_dbuf_str(path), true);
	for (size_t i = 0; rc == 0 && i < c->n_query; i++) {
		rc = tfs_dbuf_addc(url, i == 0 ? '?' : '&');
		if (rc == 0)
			rc = tfs_uri_encode(url, c->query[i].name, false);
		if (rc == 0 && c->query[i].value) {
			rc = tfs_dbuf_addc(url, '=');
			if (rc == 0)
				rc = tfs_uri_encode(url, c->query[i].value, false);
		}
	}
	return rc;
}

/* Sign `c` now and build the curl header list.  *out is owned by the caller
 * (curl_slist_free_all). */
static int sign(struct s3 *s, const struct s3_call *c, const char *raw_path, const char *payload_hash,
		struct curl_slist **out)
{
	struct tfs_kv hdr[40];
	size_t n = 0;
	char amz_date[17];
	struct tfs_dbuf auth, line;
	struct curl_slist *list = NULL;
	int rc;

	if (c->n_headers > 32)
		return EINVAL;
	tfs_sigv4_amz_date(time(NULL), amz_date);
	hdr[n++] = (struct tfs_kv){ "host", s->host };
	hdr[n++] = (struct tfs_kv){ "x-amz-date", amz_date };
	hdr[n++] = (struct tfs_kv){ "x-amz-content-sha256", payload_hash };
	if (s->creds.session_token)
		hdr[n++] = (struct tfs_kv){ "x-amz-security-token", s->creds.session_token };
	for (size_t i = 0; i < c->n_headers; i++)
		hdr[n++] = c->headers[i];

	struct tfs_sigv4_request req = {
		.method = c->method,
		.path = raw_path,
		.query = c->query,
		.n_query = c->n_query,
		.headers = hdr,
		.n_headers = n,
		.payload_hash = payload_hash,
	};
	struct tfs_sigv4_creds creds = {
		.access_key = s->creds.access_key,
		.secret_key = s->creds.secret_key,
		.session_token = s->creds.session_token,
	};
	tfs_dbuf_init(&auth, 4096);
	tfs_dbuf_init(&line, 16384);
	rc = tfs_sigv4_sign(&creds, s->cfg.region, "s3", amz_date, &req, &auth);
	/* curl_slist_append copies; "Name:" with no value removes a curl
	 * default header (Expect: 100-continue costs a round trip). */
	for (size_t i = 0; rc == 0 && i <= n + 2; i++) {
		tfs_dbuf_reset(&line);
		if (i < n)
			rc = tfs_dbuf_addf(&line, "%s: %s", hdr[i].name, hdr[i].value ? hdr[i].value : "");
		else if (i == n)
			rc = tfs_dbuf_addf(&line, "Authorization: %s", tfs_dbuf_str(&auth));
		else if (i == n + 1)
			rc = tfs_dbuf_adds(&line, "Expect:");
		else
			rc = tfs_dbuf_adds(&line, "Accept:");
		if (rc)
			break;
		struct curl_slist *nl = curl_slist_append(list, tfs_dbuf_str(&line));
		if (nl == NULL) {
			rc = ENOMEM;
			break;
		}
		list = nl;
	}
	if (line.buf)
		explicit_bzero(line.buf, line.cap); /* may hold the session token */
	tfs_dbuf_free(&line);
	tfs_dbuf_free(&auth);
	if (rc) {
		curl_slist_free_all(list);
		return rc == EOVERFLOW ? EINVAL : rc;
	}
	*out = list;
	return 0;
}

/* ---- retries ---- */

static bool retryable(const struct tfs_http_resp *r, char *code, size_t code_len)
{
	if (r->transport_error)
		return true;
	if (r->status >= 500 || r->status == 429)
		return true;
	if (r->status == 400 || r->status == 403) {
		/* RequestTimeout (400) and RequestTimeTooSkewed (403) are transient. */
		char msg[8];
		if (tfs_s3_xml_parse_error(tfs_dbuf_str(&r->body), tfs_dbuf_len(&r->body), code,
					   code_len, msg, sizeof(msg)) == 0)
			return strcmp(code, "RequestTimeout") == 0 || strcmp(code, "RequestTimeTooSkewed") == 0;
	}
	return false;
}

static void backoff(const struct s3 *s, unsigned attempt)
{
	uint64_t ms = tfs_backoff_ms(s->cfg.retry_base_ms, s->cfg.retry_max_ms, attempt);
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int s3_call(struct s3 *s, const struct s3_call *c, const char *what, struct tfs_http_resp *resp)
{
	struct tfs_dbuf path, url;
	char payload_hash[65];
	int rc;

	tfs_dbuf_init(&path, 8192);
	tfs_dbuf_init(&url, 32768);
	rc = build_url(s, c, &path, &url);
	if (rc) {
		tfs_dbuf_free(&path);
		tfs_dbuf_free(&url);
		tfs_err(s->log, "s3: %s: request too large", what);
		return rc == ENOMEM ? ENOMEM : EINVAL;
	}
	rc = hash_body(c->body, payload_hash);
	if (rc) {
		tfs_err(s->log, "s3: %s: reading the upload source: %s", what, strerror(rc));
		goto out;
	}

	for (unsigned attempt = 0;; attempt++) {
		struct curl_slist *headers = NULL;
		rc = sign(s, c, tfs_dbuf_str(&path), payload_hash, &headers);
		if (rc) {
			tfs_err(s->log, "s3: %s: cannot sign the request: %s", what, strerror(rc));
			break;
		}
		struct tfs_http_req req = {
			.method = c->method,
			.url = tfs_dbuf_str(&url),
			.headers = headers,
			.body = c->body,
			.dst = c->dst,
			.dst_cap = c->dst_cap,
			.dst_skip = c->dst_skip,
			.slow_reply = c->slow_reply,
		};
		rc = tfs_http_perform(s->pool, &req, resp);
		curl_slist_free_all(headers);
		if (rc == EOVERFLOW) {
			tfs_err(s->log, "s3: %s: the reply is larger than the client accepts", what);
			rc = EIO;
			break;
		}
		if (rc == EPROTO) {
			tfs_err(s->log, "s3: %s: %s", what, resp->error);
			rc = EIO;
			break;
		}
		if (rc && !resp->transport_error)
			break; /* local failure (ENOMEM, dst write): not the server's */
		char code[64] = "";
		if (!retryable(resp, code, sizeof(code))) {
			rc = 0;
			break;
		}
		if (attempt >= s->cfg.retries) {
			if (resp->transport_error)
				tfs_err(s->log, "s3: %s: %s (gave up after %u attempts)", what, resp->error,
					attempt + 1);
			else
				s3_fail(s, what, resp);
			rc = EIO;
			break;
		}
		if (resp->transport_error)
			tfs_warn(s->log, "s3: %s: %s; retrying (%u/%u)", what, resp->error, attempt + 1,
				 s->cfg.retries);
		else
			tfs_warn(s->log, "s3: %s: HTTP %ld %s; retrying (%u/%u)", what, resp->status, code,
				 attempt + 1, s->cfg.retries);
		backoff(s, attempt);
	}
out:
	tfs_dbuf_free(&path);
	tfs_dbuf_free(&url);
	return rc;
}

int s3_fail(struct s3 *s, const char *what, const struct tfs_http_resp *resp)
{
	char code[128] = "", msg[512] = "";
	tfs_s3_xml_parse_error(tfs_dbuf_str(&resp->body), tfs_dbuf_len(&resp->body), code,
			       sizeof(code), msg, sizeof(msg));
	int err;
	switch (resp->status) {
	case 404:
		err = ENOENT;
		break;
	case 403:
		err = EACCES;
		break;
	case 412:
		err = ESTALE;
		break;
	case 400:
		err = EINVAL;
		break;
	default:
		err = EIO;
		break;
	}
	enum tfs_log_level lvl = err == ENOENT || err == ESTALE ? TFS_LOG_DEBUG : TFS_LOG_ERROR;
	if (strcmp(code, "NoSuchBucket") == 0)
		lvl = TFS_LOG_ERROR;
	tfs_logf(s->log, lvl, "s3: %s: HTTP %ld%s%s%s%s%s%s", what, resp->status, code[0] ? " " : "",
		 code, msg[0] ? ": " : "", msg, resp->request_id[0] ? " request-id " : "",
		 resp->request_id);
	return err;
}

static void describe_op(char *buf, size_t len, const char *op, const struct s3 *s, const char *key)
{
	snprintf(buf, len, "%s s3://%s/%s", op, s->cfg.bucket, key);
}

/* ---- metadata headers ---- */

int s3_meta_headers(const struct tfs_obj_meta *meta, size_t extra, struct tfs_kv **out,
		    size_t *n_out)
{
	size_t n = meta ? meta->n_user : 0;
	struct tfs_kv *h = calloc(extra + n + 1, sizeof(*h));
	if (h == NULL)
		return ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct tfs_dbuf d;
		tfs_dbuf_init(&d, 512);
		if (tfs_dbuf_addf(&d, "x-amz-meta-%s", meta->user[i].name)) {
			tfs_dbuf_free(&d);
			s3_meta_headers_free(h, extra, i);
			return ENOMEM;
		}
		h[extra + i].name = tfs_dbuf_steal(&d);
		h[extra + i].value = meta->user[i].value;
	}
	*out = h;
	*n_out = extra + n;
	return 0;
}

void s3_meta_headers_free(struct tfs_kv *h, size_t extra, size_t n)
{
	if (h == NULL)
		return;
	for (size_t i = extra; i < n; i++)
		free((char *)h[i].name);
	free(h);
}

/* ---- operations ---- */

int s3_head_full(struct s3 *s, const char *fk, struct tfs_obj_meta *out)
{
	struct tfs_http_resp r;
	char what[512];
	describe_op(what, sizeof(what), "HEAD", s, fk);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "HEAD", .key = fk };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && (r.status < 200 || r.status > 299))
		rc = s3_fail(s, what, &r);
	if (rc == 0 && r.content_length < 0) {
		tfs_err(s->log, "s3: %s: reply has no Content-Length", what);
		rc = EIO;
	}
	if (rc == 0) {
		out->size = (uint64_t)r.content_length;
		memcpy(out->etag, r.etag, sizeof(out->etag));
		out->mtime = 0;
		tfs_s3_parse_time(r.last_modified, &out->mtime);
		/* Hand the x-amz-meta-* pairs over instead of copying them. */
		out->user = r.meta.user;
		out->n_user = r.meta.n_user;
		r.meta.user = NULL;
		r.meta.n_user = 0;
	}
	tfs_http_resp_clear(&r);
	return rc;
}

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
	describe_op(what, sizeof(what), "LIST", s, fp);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "GET", .query = q, .n_query = n };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		rc = tfs_s3_xml_parse_list(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body),
					   s->cfg.prefix, out);
		if (rc)
			tfs_err(s->log, "s3: %s: malformed or refused ListObjectsV2 reply "
				"(bad XML, a size above 2^63-1, or truncated without a token)", what);
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
		tfs_err(s->log, "s3: %s: whole-object reply of %" PRIu64 " bytes gave %" PRIu64
			" bytes of the range", what, size, r->got);
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
	tfs_err(s->log, "s3: %s: reply for bytes %" PRId64 "-%" PRId64 "/%" PRId64
		", not the range asked for", what, r->range_first, r->range_last, r->range_total);
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
		.method = "GET", .key = fk, .headers = h, .n_headers = n,
		.dst = &dst, .dst_cap = len, .dst_skip = off,
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
				tfs_err(s->log, "s3: %s: short body (%" PRIu64 " of %" PRIu64 " bytes)",
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

int s3_put_single(struct s3 *s, const char *fk, struct tfs_io src, uint64_t len,
		  const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct tfs_http_resp r;
	struct tfs_kv *h = NULL;
	size_t nh = 0;
	char what[512];
	int rc = s3_meta_headers(meta, 0, &h, &nh);
	if (rc)
		return rc;
	describe_op(what, sizeof(what), "PUT", s, fk);
	struct tfs_http_body body = { .src = src, .len = len };
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "PUT", .key = fk, .headers = h, .n_headers = nh, .body = &body };
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && (r.status < 200 || r.status > 299))
		rc = s3_fail(s, what, &r);
	if (rc == 0)
		memcpy(etag_out, r.etag, TFS_ETAG_MAX);
	tfs_http_resp_clear(&r);
	s3_meta_headers_free(h, 0, nh);
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
	int rc = s3_put_single(s, fk, src, len, meta, etag_out);
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
	describe_op(what, sizeof(what), "DELETE", s, fk);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "DELETE", .key = fk };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && (r.status < 200 || r.status > 299) && r.status != 404)
		rc = s3_fail(s, what, &r);
	tfs_http_resp_clear(&r);
	free(fk);
	return rc;
}

static int s3_copy(void *priv, const char *src, const char *dst, const struct tfs_obj_meta *meta,
		   char etag_out[TFS_ETAG_MAX])
{
	struct s3 *s = priv;
	struct tfs_http_resp r;
	struct tfs_kv *h = NULL;
	size_t nh = 0;
	char what[1024];
	struct tfs_dbuf source;
	char *fs = s3_full_key(s, src);
	char *fd = s3_full_key(s, dst);
	int rc = (fs && fd) ? 0 : ENOMEM;

	tfs_dbuf_init(&source, 8192);
	if (rc == 0)
		rc = tfs_dbuf_adds(&source, s->copy_base);
	if (rc == 0)
		rc = tfs_uri_encode(&source, fs, true);
	if (rc == 0)
		rc = s3_meta_headers(meta, 2, &h, &nh);
	if (rc) {
		free(fs);
		free(fd);
		tfs_dbuf_free(&source);
		return rc == ENOMEM ? ENOMEM : EINVAL;
	}
	h[0] = (struct tfs_kv){ "x-amz-copy-source", tfs_dbuf_str(&source) };
	h[1] = (struct tfs_kv){ "x-amz-metadata-directive", meta ? "REPLACE" : "COPY" };
	snprintf(what, sizeof(what), "COPY s3://%s/%s to %s", s->cfg.bucket, fs, fd);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "PUT", .key = fd, .headers = h, .n_headers = nh };
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		/* A 200 reply to a copy can still carry an <Error>. */
		char code[128] = "", msg[512] = "";
		rc = tfs_s3_xml_parse_etag(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), etag_out,
					   code, sizeof(code), msg, sizeof(msg));
		if (rc)
			tfs_err(s->log, "s3: %s: failed: %s %s", what, code[0] ? code : "malformed reply", msg);
	}
	tfs_http_resp_clear(&r);
	s3_meta_headers_free(h, 2, nh);
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
	free(s->origin);
	free(s->host);
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
 * EINVAL (a key ID over 128 bytes, AWS's maximum) or EIO (OpenSSL
 * failed); the cause is logged. */
static int make_identity(struct s3 *s)
{
	static const char msg[] = "tierfs cache identity";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	const char *secret = s->creds.secret_key;

	if (HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg,
		 sizeof(msg) - 1, md, &mdlen) == NULL || mdlen < 16) {
		tfs_err(s->log, "s3: cannot derive the cache identity (HMAC-SHA256 failed)");
		return EIO;
	}
	int n = snprintf(s->identity, sizeof(s->identity), "%s ", s->creds.access_key);
	if (n < 0 || (size_t)n + 33 > sizeof(s->identity)) {
		tfs_err(s->log, "s3: the access key ID from %s is longer than 128 bytes",
			s->creds.source);
		return EINVAL;
	}
	for (int i = 0; i < 16; i++)
		snprintf(s->identity + n + 2 * i, 3, "%02x", md[i]);
	OPENSSL_cleanse(md, sizeof(md));
	return 0;
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
	.list = s3_list,
	.get_range = s3_get_range,
	.put = s3_put,
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

/* Split the endpoint into origin and Host header, applying the addressing
 * style.  Uses curl's URL parser. */
static int resolve_endpoint(struct s3 *s)
{
	struct tfs_dbuf ep;
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	int rc = 0;

	tfs_dbuf_init(&ep, 4096);
	if (s->cfg.endpoint && *s->cfg.endpoint)
		rc = tfs_dbuf_adds(&ep, s->cfg.endpoint);
	else
		rc = tfs_dbuf_addf(&ep, "https://s3.%s.amazonaws.com", s->cfg.region);
	if (rc) {
		tfs_dbuf_free(&ep);
		return ENOMEM;
	}
	CURLU *u = curl_url();
	if (u == NULL || curl_url_set(u, CURLUPART_URL, tfs_dbuf_str(&ep), 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		tfs_err(s->log, "s3: endpoint '%s' is not a URL (expected http[s]://host[:port])",
			tfs_dbuf_str(&ep));
		rc = EINVAL;
		goto out;
	}
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
		tfs_err(s->log, "s3: endpoint '%s': scheme must be http or https", tfs_dbuf_str(&ep));
		rc = EINVAL;
		goto out;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	if (path && strcmp(path, "/") != 0 && strcmp(path, "") != 0) {
		tfs_err(s->log, "s3: endpoint '%s' must not contain a path", tfs_dbuf_str(&ep));
		rc = EINVAL;
		goto out;
	}
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 4096);
	bool nomem = false;
	if (!s->cfg.path_style)
		nomem |= tfs_dbuf_addf(&d, "%s.", s->cfg.bucket) != 0;
	nomem |= tfs_dbuf_adds(&d, host) != 0;
	if (port)
		nomem |= tfs_dbuf_addf(&d, ":%s", port) != 0;
	s->host = tfs_dbuf_steal(&d);
	tfs_dbuf_init(&d, 4096);
	nomem |= tfs_dbuf_addf(&d, "%s://%s", scheme, s->host ? s->host : "") != 0;
	s->origin = tfs_dbuf_steal(&d);
	tfs_dbuf_init(&d, 4096);
	if (s->cfg.path_style)
		nomem |= tfs_dbuf_addf(&d, "/%s", s->cfg.bucket) != 0;
	s->path_base = tfs_dbuf_steal(&d);
	tfs_dbuf_init(&d, 4096);
	nomem |= tfs_dbuf_addf(&d, "/%s/", s->cfg.bucket) != 0;
	s->copy_base = tfs_dbuf_steal(&d);
	if (nomem || !s->host || !s->origin || !s->path_base || !s->copy_base)
		rc = ENOMEM;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(u);
	tfs_dbuf_free(&ep);
	return rc;
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
	s->cfg.endpoint = dup_or_null(cfg->endpoint, &nomem);
	s->cfg.region = dup_or_null(cfg->region && *cfg->region ? cfg->region : "us-east-1", &nomem);
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
	if (s->cfg.upload_parallel == 0)
		s->cfg.upload_parallel = 1;
	rc = resolve_endpoint(s);
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
		 tfs_backend_describe(*out), s->origin, s->cfg.path_style ? "path-style" : "virtual-hosted",
		 s->cfg.region, s->creds.source);
	return 0;
}
