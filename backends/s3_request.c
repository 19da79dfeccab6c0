/* s3_request.c - one S3 request: the URL (path-style or virtual-hosted),
 * the SigV4 signature (the payload hash is always sent: Ceph RGW requires
 * x-amz-content-sha256), the retries of what is worth retrying, the mapping
 * of an error reply to an errno, and the HEAD that s3.c and
 * s3_multipart.c share.  Contracts: s3_internal.h.
 */
#include "config.h"

#include "s3_internal.h"
#include "s3_xml.h"

#include "backoff.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
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

/* The request's path (raw, for signing) and its URL less the origin
 * (encoded path and query): the origin depends on the region, which a
 * redirect may change between attempts. */
static int build_url(struct s3 *s, const struct s3_call *c, struct tfs_dbuf *path,
		     struct tfs_dbuf *url)
{
	int rc = tfs_dbuf_adds(path, s->path_base);
	if (rc == 0)
		rc = tfs_dbuf_addc(path, '/');
	if (rc == 0 && c->key)
		rc = tfs_dbuf_adds(path, c->key);
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

/* Sign `c` now for `a` and build the curl header list.  *out is owned by
 * the caller (curl_slist_free_all). */
static int sign(struct s3 *s, const struct s3_addr *a, const struct s3_call *c,
		const char *raw_path, const char *payload_hash, struct curl_slist **out)
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
	hdr[n++] = (struct tfs_kv){ "host", a->host };
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
	rc = tfs_sigv4_sign(&creds, a->region, "s3", amz_date, &req, &auth);
	/* curl_slist_append copies; "Name:" with no value removes a curl
	 * default header (Expect: 100-continue costs a round trip). */
	for (size_t i = 0; rc == 0 && i <= n + 2; i++) {
		tfs_dbuf_reset(&line);
		if (i < n)
			rc = tfs_dbuf_addf(&line, "%s: %s", hdr[i].name,
					   hdr[i].value ? hdr[i].value : "");
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
			return strcmp(code, "RequestTimeout") == 0 || strcmp(code, "RequestTimeTooS"
										   "kewed") == 0;
	}
	return false;
}

/* The region a reply says the bucket lives in, into region (cap bytes):
 * x-amz-bucket-region, or the <Region> of an error (AWS's 400
 * AuthorizationHeaderMalformed names it there; its 301 PermanentRedirect
 * sends the header).  Only for a 301, or a 400 of that code.  Returns
 * whether it found one. */
static bool redirect_region(const struct tfs_http_resp *r, char *region, size_t cap)
{
	char code[64] = "";

	if (r->status != 301 && r->status != 400)
		return false;
	int xrc = tfs_s3_xml_parse_error_region(tfs_dbuf_str(&r->body), tfs_dbuf_len(&r->body),
						code, sizeof(code), region, cap);
	if (r->status == 400 && (xrc != 0 || strcmp(code, "AuthorizationHeaderMalformed") != 0))
		return false;
	if (r->bucket_region[0])
		snprintf(region, cap, "%s", r->bucket_region);
	return region[0] != '\0';
}

static void backoff(const struct s3 *s, unsigned attempt)
{
	uint64_t ms = tfs_backoff_ms(s->cfg.retry_base_ms, s->cfg.retry_max_ms, attempt);
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
			       .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int s3_call(struct s3 *s, const struct s3_call *c, const char *what, struct tfs_http_resp *resp)
{
	struct tfs_dbuf path, rest, url;
	char payload_hash[65];
	bool switched = false;
	int rc;

	tfs_dbuf_init(&path, 8192);
	tfs_dbuf_init(&rest, 32768);
	tfs_dbuf_init(&url, 32768);
	rc = build_url(s, c, &path, &rest);
	if (rc) {
		tfs_dbuf_free(&path);
		tfs_dbuf_free(&rest);
		tfs_dbuf_free(&url);
		tfs_err(s->log, "s3: %s: request too large", what);
		return rc == ENOMEM ? ENOMEM : EINVAL;
	}
	rc = hash_body(c->body, payload_hash);
	if (rc) {
		tfs_err(s->log, "s3: %s: reading the upload source: %s", what, strerror(rc));
		goto out;
	}

	for (unsigned attempt = 0;;) {
		struct curl_slist *headers = NULL;
		const struct s3_addr *a = s3_addr(s);
		tfs_dbuf_reset(&url);
		if (tfs_dbuf_adds(&url, a->origin) || tfs_dbuf_adds(&url, tfs_dbuf_str(&rest))) {
			rc = ENOMEM;
			break;
		}
		rc = sign(s, a, c, tfs_dbuf_str(&path), payload_hash, &headers);
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
			tfs_err(s->log, "s3: %s: the reply is larger than the client accepts",
				what);
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
		/* A bucket in another region: sign for it and go again, once
		 * per call and without counting an attempt; a second redirect
		 * is an error like any other. */
		char region[64] = "";
		if (!switched && redirect_region(resp, region, sizeof(region)) &&
		    s3_switch_region(s, a, region) == 0) {
			switched = true;
			continue;
		}
		char code[64] = "";
		if (!retryable(resp, code, sizeof(code))) {
			rc = 0;
			break;
		}
		if (attempt >= s->cfg.retries) {
			if (resp->transport_error)
				tfs_err(s->log, "s3: %s: %s (gave up after %u attempts)", what,
					resp->error, attempt + 1);
			else
				s3_fail(s, what, resp);
			rc = EIO;
			break;
		}
		if (resp->transport_error)
			tfs_warn(s->log, "s3: %s: %s; retrying (%u/%u)", what, resp->error,
				 attempt + 1, s->cfg.retries);
		else
			tfs_warn(s->log, "s3: %s: HTTP %ld %s; retrying (%u/%u)", what,
				 resp->status, code, attempt + 1, s->cfg.retries);
		backoff(s, attempt);
		attempt++;
	}
out:
	tfs_dbuf_free(&path);
	tfs_dbuf_free(&rest);
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
	tfs_logf(s->log, lvl, "s3: %s: HTTP %ld%s%s%s%s%s%s%s%s", what, resp->status,
		 code[0] ? " " : "", code, msg[0] ? ": " : "", msg,
		 resp->bucket_region[0] ? "; the store says the bucket is in region " : "",
		 resp->bucket_region, resp->request_id[0] ? " request-id " : "", resp->request_id);
	return err;
}

void s3_describe_op(char *buf, size_t len, const char *op, const struct s3 *s, const char *key)
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

/* One HEAD of fk (with ?partNumber=part when part > 0, asking for its
 * checksum with `checksum`) into *r. */
static int head_one(struct s3 *s, const char *fk, unsigned part, bool checksum,
		    struct tfs_http_resp *r)
{
	char what[512], num[16];
	s3_describe_op(what, sizeof(what), "HEAD", s, fk);
	snprintf(num, sizeof(num), "%u", part);
	struct tfs_kv q = { "partNumber", num };
	struct tfs_kv h = { "x-amz-checksum-mode", "ENABLED" };
	struct s3_call c = { .method = "HEAD",
			     .key = fk,
			     .query = &q,
			     .n_query = part ? 1 : 0,
			     .headers = &h,
			     .n_headers = checksum ? 1 : 0 };
	int rc = s3_call(s, &c, what, r);
	if (rc == 0 && (r->status < 200 || r->status > 299))
		rc = s3_fail(s, what, r);
	if (rc == 0 && r->content_length < 0) {
		tfs_err(s->log, "s3: %s: reply has no Content-Length", what);
		rc = EIO;
	}
	return rc;
}

int s3_head_check_full(struct s3 *s, const char *fk, struct tfs_obj_check *out)
{
	struct tfs_http_resp r;
	tfs_http_resp_init(&r);
	int rc = head_one(s, fk, 0, true, &r);
	if (rc == 0) {
		memcpy(out->etag, r.etag, sizeof(out->etag));
		out->size = (uint64_t)r.content_length;
		out->encrypted = r.encrypted;
		/* A full-object checksum: so typed, or untyped without the
		 * "-N" of a composite one. */
		bool full = strcasecmp(r.checksum_type, "FULL_OBJECT") == 0 ||
			    (r.checksum_type[0] == '\0' && strchr(r.checksum, '-') == NULL);
		if (r.checksum_alg[0] && full) {
			memcpy(out->checksum_alg, r.checksum_alg, sizeof(out->checksum_alg));
			memcpy(out->checksum, r.checksum, sizeof(out->checksum));
		}
	}
	const char *e = out->etag[0] == '"' ? out->etag + 1 : out->etag;
	if (rc == 0 && strlen(e) > 33 && e[32] == '-') {
		/* A multipart ETag: part 1's size, where the server tells it
		 * (AWS, MinIO, moto, Ceph RGW from Reef on) with the count of
		 * parts the ETag names.  Its ETag may be the part's own (moto).
		 * Another answer (a server that ignores partNumber) leaves it
		 * unknown; a wrong size only fails the check of the copy. */
		unsigned long want = strtoul(e + 33, NULL, 10);
		int prc = head_one(s, fk, 1, false, &r);
		if (prc == 0 && r.parts_count >= 1 && (unsigned long)r.parts_count == want &&
		    (uint64_t)r.content_length <= out->size)
			out->part_size = (uint64_t)r.content_length;
	}
	tfs_http_resp_clear(&r);
	return rc;
}

int s3_head_full(struct s3 *s, const char *fk, struct tfs_obj_meta *out)
{
	struct tfs_http_resp r;
	tfs_http_resp_init(&r);
	int rc = head_one(s, fk, 0, false, &r);
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
