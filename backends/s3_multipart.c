/* s3_multipart.c - multipart uploads: create, parts in parallel, complete;
 * resumable (the caller keeps the upload id and the parts' ETags in a
 * struct tfs_mpu and hands it back after a crash), abort, and counting the
 * uploads in progress.  A copy of an object too large for one CopyObject
 * is a multipart upload whose parts are copied from the source
 * (UploadPartCopy) by the same workers.
 *
 * tfs_backend_put() uploads through the same code with a throwaway state
 * and aborts the upload on any failure, so that no orphan is left behind.
 */
#include "config.h"

#include "s3_internal.h"
#include "s3_xml.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 10000u
#define MIN_PART_SIZE (5ull << 20) /* S3's minimum for all parts but the last */
#define MAX_PART_SIZE (5ull << 30)
#define MAX_THREADS 64u

/* One run of part uploads into st->upload_id. */
struct mpu {
	struct s3 *s;
	const char *key;
	struct tfs_io src; /* unused when copying */
	uint64_t len;
	const char *copy_source;   /* non-NULL: parts are copied from this x-amz-copy-source */
	const char *copy_if_match; /* the source's ETag, or "" */
	struct tfs_mpu *st;        /* part_size, nparts; etags written under `report` */
	tfs_mpu_fn fn;             /* may be NULL */
	void *ctx;
	pthread_mutex_t lock;   /* protects next and err */
	unsigned next;          /* next part index to look at */
	int err;                /* first failure; stops taking new parts */
	pthread_mutex_t report; /* serializes st->etags updates and fn */
	int fn_err;             /* fn said stop: record nothing more */
};

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

/* `ps`, doubled until the object needs at most 10,000 parts. */
static uint64_t choose_part_size(uint64_t ps, uint64_t len)
{
	while (div_up(len, ps) > MAX_PARTS)
		ps *= 2;
	return ps;
}

/* Whether a saved state can serve an upload of `len` bytes: NUL-terminated
 * strings, ETags that are safe in the Complete XML, and a geometry S3
 * accepts that covers exactly `len` bytes. */
static bool state_fits(const struct tfs_mpu *st, uint64_t len)
{
	if (memchr(st->upload_id, '\0', sizeof(st->upload_id)) == NULL || st->etags == NULL)
		return false;
	if (st->part_size < MIN_PART_SIZE || st->part_size > MAX_PART_SIZE || st->nparts == 0 ||
	    st->nparts > MAX_PARTS || div_up(len, st->part_size) != st->nparts)
		return false;
	for (unsigned i = 0; i < st->nparts; i++) {
		const char *e = st->etags[i];
		if (memchr(e, '\0', TFS_ETAG_MAX) == NULL || strpbrk(e, "<>&") != NULL)
			return false;
	}
	return true;
}

/* Send a request without a body (key NULL: the bucket); 0 when the status
 * is 200 or `ok2`, else s3_fail()'s errno (404: ENOENT, which for an
 * upload is NoSuchUpload; RGW says NoSuchKey to ListParts).  The caller
 * clears *r. */
static int send_simple(struct s3 *s, const char *method, const char *key, const struct tfs_kv *q,
		       size_t nq, const char *what, long ok2, struct tfs_http_resp *r)
{
	tfs_http_resp_init(r);
	struct s3_call c = { .method = method, .key = key, .query = q, .n_query = nq };
	int rc = s3_call(s, &c, what, r);
	if (rc == 0 && r->status != 200 && r->status != ok2)
		rc = s3_fail(s, what, r);
	return rc;
}

/* A request about upload `upload_id` of `key` whose reply body is not
 * needed; see send_simple(). */
static int upload_request(struct s3 *s, const char *method, const char *key, const char *upload_id,
			  const char *what_op, const struct tfs_kv *extra, long ok2)
{
	struct tfs_http_resp r;
	char what[1200];
	struct tfs_kv q[2] = { { "uploadId", upload_id } };
	size_t nq = 1;
	if (extra)
		q[nq++] = *extra;
	snprintf(what, sizeof(what), "%s s3://%s/%s upload %s", what_op, s->cfg.bucket, key,
		 upload_id);
	int rc = send_simple(s, method, key, q, nq, what, ok2, &r);
	tfs_http_resp_clear(&r);
	return rc;
}

/* Does the server still know the upload?  0 or ENOENT.  ListParts, because
 * moto answers a part upload or completion for an unknown upload with 500
 * (retried, then EIO) instead of 404 NoSuchUpload. */
static int upload_exists(struct s3 *s, const char *key, const char *upload_id)
{
	const struct tfs_kv max_parts = { "max-parts", "1" };
	return upload_request(s, "GET", key, upload_id, "ListParts", &max_parts, 200);
}

/* AbortMultipartUpload; an upload the server does not know is aborted. */
static int abort_upload(struct s3 *s, const char *key, const char *upload_id)
{
	int rc = upload_request(s, "DELETE", key, upload_id, "AbortMultipartUpload", NULL, 204);
	if (rc == 0)
		tfs_info(s->log, "s3: aborted multipart upload of s3://%s/%s", s->cfg.bucket, key);
	return rc == ENOENT ? 0 : rc;
}

/* UploadPart: part `idx` (0-based) of upload `upload_id` of full key `fk`,
 * `len` bytes from `src` (its offset already at the part).  `nparts` only
 * names the part in logs (0: not known yet). */
static int put_part(struct s3 *s, const char *fk, const char *upload_id, unsigned idx,
		    unsigned nparts, struct tfs_io src, uint64_t len, char etag[TFS_ETAG_MAX])
{
	struct tfs_http_resp r;
	char num[16], total[16] = "?", what[600];

	snprintf(num, sizeof(num), "%u", idx + 1);
	if (nparts)
		snprintf(total, sizeof(total), "%u", nparts);
	struct tfs_kv q[2] = { { "partNumber", num }, { "uploadId", upload_id } };
	struct tfs_http_body body = { .src = src, .len = len };
	snprintf(what, sizeof(what), "PUT s3://%s/%s part %u/%s", s->cfg.bucket, fk, idx + 1,
		 total);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "PUT", .key = fk, .query = q, .n_query = 2, .body = &body };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0 && (r.etag[0] == '\0' || strpbrk(r.etag, "<>&") != NULL)) {
		tfs_err(s->log, "s3: %s: reply has no usable ETag", what);
		rc = EIO;
	}
	if (rc == 0)
		memcpy(etag, r.etag, TFS_ETAG_MAX);
	tfs_http_resp_clear(&r);
	return rc;
}

/* UploadPartCopy: part `idx` of upload `upload_id` of full key `fk` is
 * bytes off .. off + len - 1 of `source`, while it has ETag `if_match`
 * (412, ESTALE, once it has another).  The server copies before it
 * answers, and a 200 may still carry an <Error>. */
static int copy_part(struct s3 *s, const char *fk, const char *upload_id, unsigned idx,
		     unsigned nparts, const char *source, const char *if_match, uint64_t off,
		     uint64_t len, char etag[TFS_ETAG_MAX])
{
	struct tfs_http_resp r;
	char num[16], range[64], what[600];

	snprintf(num, sizeof(num), "%u", idx + 1);
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
	struct tfs_kv q[2] = { { "partNumber", num }, { "uploadId", upload_id } };
	struct tfs_kv h[3] = { { "x-amz-copy-source", source },
			       { "x-amz-copy-source-range", range },
			       { "x-amz-copy-source-if-match", if_match } };
	snprintf(what, sizeof(what), "UploadPartCopy s3://%s/%s part %u/%u", s->cfg.bucket, fk,
		 idx + 1, nparts);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "PUT",
			     .key = fk,
			     .query = q,
			     .n_query = 2,
			     .headers = h,
			     .n_headers = if_match[0] ? 3 : 2,
			     .slow_reply = true };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		char code[128] = "", msg[512] = "";
		rc = tfs_s3_xml_parse_etag(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), etag, code,
					   sizeof(code), msg, sizeof(msg));
		if (rc)
			tfs_err(s->log, "s3: %s: %s %s", what, code[0] ? code : "malformed reply",
				msg);
	}
	if (rc == 0 && (etag[0] == '\0' || strpbrk(etag, "<>&") != NULL)) {
		tfs_err(s->log, "s3: %s: reply has no usable ETag", what);
		rc = EIO;
	}
	tfs_http_resp_clear(&r);
	return rc;
}

static int upload_part(struct mpu *m, unsigned idx, char etag[TFS_ETAG_MAX])
{
	uint64_t off = (uint64_t)idx * m->st->part_size;
	uint64_t len = m->len - off < m->st->part_size ? m->len - off : m->st->part_size;
	if (m->copy_source)
		return copy_part(m->s, m->key, m->st->upload_id, idx, m->st->nparts, m->copy_source,
				 m->copy_if_match, off, len, etag);
	struct tfs_io src = m->src;
	if (src.kind == TFS_IO_BUF)
		src.cbuf = (const char *)src.cbuf + off;
	else
		src.off += (off_t)off;
	return put_part(m->s, m->key, m->st->upload_id, idx, m->st->nparts, src, len, etag);
}

/* Record a finished part in the state and tell fn, unless fn already
 * stopped the run. */
static int record_part(struct mpu *m, unsigned idx, const char etag[TFS_ETAG_MAX])
{
	int rc = 0;
	pthread_mutex_lock(&m->report);
	if (m->fn_err == 0) {
		memcpy(m->st->etags[idx], etag, TFS_ETAG_MAX);
		if (m->fn)
			rc = m->fn(m->ctx, m->st, idx);
		m->fn_err = rc;
	}
	pthread_mutex_unlock(&m->report);
	return rc;
}

static void *worker(void *arg)
{
	struct mpu *m = arg;
	for (;;) {
		/* Only the worker that takes a part writes its ETag, so reading
		 * the ETags of parts not yet taken is safe. */
		pthread_mutex_lock(&m->lock);
		while (m->next < m->st->nparts && m->st->etags[m->next][0] != '\0')
			m->next++;
		unsigned idx = m->next;
		bool stop = m->err != 0 || idx >= m->st->nparts;
		if (!stop)
			m->next++;
		pthread_mutex_unlock(&m->lock);
		if (stop)
			return NULL;
		char etag[TFS_ETAG_MAX];
		int rc = upload_part(m, idx, etag);
		if (rc == 0)
			rc = record_part(m, idx, etag);
		if (rc) {
			pthread_mutex_lock(&m->lock);
			if (m->err == 0)
				m->err = rc;
			pthread_mutex_unlock(&m->lock);
		}
	}
}

/* Upload (or copy) the parts of m->st that have no ETag yet,
 * upload_parallel at once; m's fields up to copy_if_match are set by the
 * caller.  Returns fn's error if it stopped the run (*by_fn set), else the
 * first part's failure. */
static int run_parts(struct mpu *m, bool *by_fn)
{
	struct s3 *s = m->s;
	const struct tfs_mpu *st = m->st;
	pthread_t tids[MAX_THREADS];
	unsigned todo = 0, started = 0;

	for (unsigned i = 0; i < st->nparts; i++)
		todo += st->etags[i][0] == '\0';
	unsigned nthreads = s->cfg.upload_parallel;
	if (nthreads > todo)
		nthreads = todo;
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->report, NULL);
	/* The calling thread works too; helpers take the other parts. */
	for (unsigned i = 1; i < nthreads; i++) {
		if (pthread_create(&tids[started], NULL, worker, m) != 0)
			break;
		started++;
	}
	worker(m);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pthread_mutex_destroy(&m->report);
	pthread_mutex_destroy(&m->lock);
	*by_fn = m->fn_err != 0;
	return m->fn_err ? m->fn_err : m->err;
}

static int upload_parts(struct s3 *s, const char *key, struct tfs_io src, uint64_t len,
			struct tfs_mpu *st, tfs_mpu_fn fn, void *ctx, bool *by_fn)
{
	struct mpu m = {
		.s = s, .key = key, .src = src, .len = len, .st = st, .fn = fn, .ctx = ctx
	};
	return run_parts(&m, by_fn);
}

/* CreateMultipartUpload of full key `fk` with meta's headers; the new
 * upload's id goes to upload_id. */
static int create_upload(struct s3 *s, const char *fk, const struct tfs_obj_meta *meta,
			 char upload_id[TFS_UPLOAD_ID_MAX])
{
	struct tfs_http_resp r;
	struct tfs_kv *h = NULL;
	size_t nh = 0;
	char what[512];
	char *id = NULL;

	int rc = s3_meta_headers(meta, 0, &h, &nh);
	if (rc)
		return rc;
	snprintf(what, sizeof(what), "CreateMultipartUpload s3://%s/%s", s->cfg.bucket, fk);
	struct tfs_kv q[1] = { { "uploads", NULL } };
	tfs_http_resp_init(&r);
	struct s3_call c = {
		.method = "POST", .key = fk, .query = q, .n_query = 1, .headers = h, .n_headers = nh
	};
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		rc = tfs_s3_xml_parse_upload_id(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), &id);
		if (rc)
			tfs_err(s->log, "s3: %s: malformed reply", what);
	}
	tfs_http_resp_clear(&r);
	s3_meta_headers_free(h, 0, nh);
	if (rc == 0 && strlen(id) >= TFS_UPLOAD_ID_MAX) {
		tfs_err(s->log, "s3: %s: upload id of %zu bytes is too long", what, strlen(id));
		abort_upload(s, fk, id);
		rc = EIO;
	}
	if (rc == 0)
		memcpy(upload_id, id, strlen(id) + 1);
	free(id);
	return rc;
}

/* CreateMultipartUpload into a reset state (old upload id dropped: the
 * caller made sure it is gone), then tell fn. */
static int start_upload(struct s3 *s, const char *key, uint64_t len,
			const struct tfs_obj_meta *meta, struct tfs_mpu *st, tfs_mpu_fn fn,
			void *ctx)
{
	uint64_t part_size = choose_part_size(s->cfg.part_size, len);

	st->upload_id[0] = '\0';
	int rc = tfs_mpu_alloc(st, (unsigned)div_up(len, part_size));
	if (rc)
		return rc;
	st->part_size = part_size;
	rc = create_upload(s, key, meta, st->upload_id);
	if (rc == 0 && fn)
		rc = fn(ctx, st, UINT_MAX);
	return rc;
}

static int complete_upload(struct s3 *s, const char *key, const struct tfs_mpu *st,
			   char etag_out[TFS_ETAG_MAX])
{
	struct tfs_http_resp r;
	struct tfs_dbuf xml;
	char what[1200];
	int rc = 0;

	tfs_dbuf_init(&xml, (size_t)st->nparts * 256 + 256);
	rc = tfs_dbuf_adds(&xml, "<CompleteMultipartUpload "
				 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (unsigned i = 0; rc == 0 && i < st->nparts; i++) {
		/* ETags are quotes and hex; '<', '>' and '&' are refused
		 * (state_fits, upload_part) and '"' is legal content. */
		rc = tfs_dbuf_addf(&xml, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
				   i + 1, st->etags[i]);
	}
	if (rc == 0)
		rc = tfs_dbuf_adds(&xml, "</CompleteMultipartUpload>");
	if (rc) {
		tfs_dbuf_free(&xml);
		return ENOMEM;
	}
	snprintf(what, sizeof(what), "CompleteMultipartUpload s3://%s/%s upload %s", s->cfg.bucket,
		 key, st->upload_id);
	struct tfs_kv q[1] = { { "uploadId", st->upload_id } };
	struct tfs_http_body body = { .src = tfs_io_cbuf(tfs_dbuf_str(&xml)),
				      .len = tfs_dbuf_len(&xml) };
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "POST",
			     .key = key,
			     .query = q,
			     .n_query = 1,
			     .body = &body,
			     .slow_reply = true };
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		char code[128] = "", msg[512] = "";
		rc = tfs_s3_xml_parse_etag(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), etag_out,
					   code, sizeof(code), msg, sizeof(msg));
		if (rc) {
			/* code and message only: a raw reply body may echo the
			 * signed request (headers, session token) */
			tfs_err(s->log, "s3: %s: %s %s", what, code[0] ? code : "malformed reply",
				msg);
		}
	}
	tfs_http_resp_clear(&r);
	tfs_dbuf_free(&xml);
	if (rc == 0 && etag_out[0] == '\0') {
		/* Ceph RGW 16 completes with an empty ETag: HEAD has the real one. */
		struct tfs_obj_meta hm = { 0 };
		if (s3_head_full(s, key, &hm) == 0)
			memcpy(etag_out, hm.etag, TFS_ETAG_MAX);
		tfs_obj_meta_clear(&hm);
	}
	return rc;
}

/* ---- backend operations (keys relative to the prefix) ---- */

struct sweep_ctx {
	struct s3 *s;
	const char *fk, *keep;
	unsigned aborted;
};

static int sweep_one(void *ctx, const char *key, const char *upload_id)
{
	struct sweep_ctx *c = ctx;
	if (strcmp(key, c->fk) == 0 && strcmp(upload_id, c->keep) != 0 &&
	    abort_upload(c->s, c->fk, upload_id) == 0)
		c->aborted++;
	return 0;
}

/* After `keep` completed `fk`: abort the other uploads of exactly that
 * key.  A CreateMultipartUpload whose reply was lost and was retried
 * leaves an upload nobody knows; the key's newest object is ours now, so
 * uploads of it still open are stale.  Best effort: errors are logged by
 * the calls, never returned. */
static void sweep_stale_uploads(struct s3 *s, const char *fk, const char *keep)
{
	struct tfs_http_resp r;
	char what[600];
	snprintf(what, sizeof(what), "ListMultipartUploads s3://%s/%s", s->cfg.bucket, fk);
	struct tfs_kv q[3] = { { "uploads", NULL }, { "prefix", fk }, { "max-uploads", "1000" } };
	if (send_simple(s, "GET", NULL, q, 3, what, 200, &r) == 0) {
		struct sweep_ctx c = { s, fk, keep, 0 };
		(void)tfs_s3_xml_each_upload(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body),
					     sweep_one, &c, NULL);
		if (c.aborted)
			tfs_info(s->log, "s3: %s: aborted %u stale multipart upload(s) of the key",
				 what, c.aborted);
	}
	tfs_http_resp_clear(&r);
}

/* The ETag S3 gives an object completed from the parts of st: the MD5 of
 * the parts' binary MD5s, "-" and the number of parts.  False when a part
 * ETag is not a quoted MD5 (then nothing can be told). */
static bool multipart_etag(const struct tfs_mpu *st, char out[TFS_ETAG_MAX])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	bool ok = md && EVP_DigestInit_ex(md, EVP_md5(), NULL) == 1;
	for (unsigned i = 0; ok && i < st->nparts; i++) {
		const char *e = st->etags[i];
		unsigned char bin[16];
		ok = strlen(e) == 34 && e[0] == '"' && e[33] == '"';
		for (int j = 0; ok && j < 16; j++) {
			unsigned v;
			ok = sscanf(e + 1 + 2 * j, "%2x", &v) == 1;
			bin[j] = (unsigned char)v;
		}
		ok = ok && EVP_DigestUpdate(md, bin, sizeof(bin)) == 1;
	}
	unsigned char sum[16];
	unsigned n = 0;
	ok = ok && EVP_DigestFinal_ex(md, sum, &n) == 1 && n == 16;
	EVP_MD_CTX_free(md);
	if (!ok)
		return false;
	char *p = out;
	*p++ = '"';
	for (int j = 0; j < 16; j++, p += 2)
		snprintf(p, 3, "%02x", sum[j]);
	snprintf(p, TFS_ETAG_MAX - 33, "-%u\"", st->nparts);
	return true;
}

/* The upload of st is gone: was it completed by an earlier attempt whose
 * reply was lost (a timeout while the server assembled the object)?  Then
 * the object carries the ETag its parts make, and nothing is left to do. */
static bool completed_already(struct s3 *s, const char *fk, const struct tfs_mpu *st,
			      char etag_out[TFS_ETAG_MAX])
{
	char want[TFS_ETAG_MAX];
	if (st->etags == NULL || !multipart_etag(st, want))
		return false;
	for (unsigned i = 0; i < st->nparts; i++)
		if (st->etags[i][0] == '\0')
			return false;
	struct tfs_obj_meta hm = { 0 };
	bool done = s3_head_full(s, fk, &hm) == 0 && strcmp(hm.etag, want) == 0;
	tfs_obj_meta_clear(&hm);
	if (done) {
		memcpy(etag_out, want, TFS_ETAG_MAX);
		tfs_info(s->log, "s3: s3://%s/%s: upload %s was completed by an earlier attempt",
			 s->cfg.bucket, fk, st->upload_id);
	}
	return done;
}

int s3_put_resumable(void *priv, const char *key, struct tfs_io src, uint64_t len,
		     const struct tfs_obj_meta *meta, struct tfs_mpu *st, tfs_mpu_fn fn, void *ctx,
		     char etag_out[TFS_ETAG_MAX])
{
	struct s3 *s = priv;
	bool resume = st->upload_id[0] != '\0';
	bool by_fn = false;
	char *fk = s3_full_key(s, key);
	int rc = fk ? 0 : ENOMEM;

	if (rc == 0 && resume && !state_fits(st, len)) {
		tfs_info(s->log,
			 "s3: s3://%s/%s: the saved upload does not fit %" PRIu64 " bytes; "
			 "aborting it and "
			 "starting over",
			 s->cfg.bucket, fk, len);
		st->upload_id[sizeof(st->upload_id) - 1] = '\0';
		rc = abort_upload(s, fk, st->upload_id);
		resume = false;
	} else if (rc == 0 && resume) {
		rc = upload_exists(s, fk, st->upload_id); /* ENOENT: restarted below */
	}
	while (rc == 0 || (rc == ENOENT && resume && !by_fn)) {
		if (rc == ENOENT && completed_already(s, fk, st, etag_out)) {
			/* As after a completion here: an upload whose create
			 * was retried after a lost reply may be open still. */
			sweep_stale_uploads(s, fk, st->upload_id);
			st->upload_id[0] = '\0';
			rc = 0;
			break;
		}
		if (rc == ENOENT) {
			/* NoSuchUpload: the saved upload is gone (aborted,
			 * expired, or never existed): start a new one. */
			tfs_info(s->log,
				 "s3: s3://%s/%s: upload %s no longer exists; starting over",
				 s->cfg.bucket, fk, st->upload_id);
			resume = false;
		}
		if (!resume) {
			rc = start_upload(s, fk, len, meta, st, fn, ctx);
			if (rc)
				break;
		}
		rc = upload_parts(s, fk, src, len, st, fn, ctx, &by_fn);
		if (rc == 0)
			rc = complete_upload(s, fk, st, etag_out);
		if (rc == 0) {
			sweep_stale_uploads(s, fk, st->upload_id);
			st->upload_id[0] = '\0';
			break;
		}
	}
	free(fk);
	return rc;
}

int s3_put_multipart(struct s3 *s, const char *key, struct tfs_io src, uint64_t len,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct tfs_mpu st = { .upload_id = "" };
	int rc = s3_put_resumable(s, key, src, len, meta, &st, NULL, NULL, etag_out);
	if (rc && st.upload_id[0])
		s3_abort_upload(s, key, st.upload_id);
	tfs_mpu_clear(&st);
	return rc;
}

int s3_copy_multipart(struct s3 *s, const char *source, const char *fsrc, const char *fdst,
		      uint64_t size, const char *etag, const struct tfs_obj_meta *meta,
		      char etag_out[TFS_ETAG_MAX])
{
	struct tfs_mpu st = { .upload_id = "" };
	uint64_t part_size = choose_part_size(s->cfg.copy_part_size, size);
	bool by_fn = false;

	if (size == 0 || strpbrk(etag, "\r\n") != NULL)
		return EINVAL;
	int rc = tfs_mpu_alloc(&st, (unsigned)div_up(size, part_size));
	if (rc)
		return rc;
	st.part_size = part_size;
	tfs_info(s->log, "s3: copying s3://%s/%s (%" PRIu64 " bytes) to %s in %u parts",
		 s->cfg.bucket, fsrc, size, fdst, st.nparts);
	rc = create_upload(s, fdst, meta, st.upload_id);
	if (rc == 0) {
		struct mpu m = { .s = s,
				 .key = fdst,
				 .len = size,
				 .st = &st,
				 .copy_source = source,
				 .copy_if_match = etag };
		rc = run_parts(&m, &by_fn);
	}
	if (rc == 0)
		rc = complete_upload(s, fdst, &st, etag_out);
	if (rc && st.upload_id[0])
		(void)abort_upload(s, fdst, st.upload_id);
	tfs_mpu_clear(&st);
	return rc;
}

int s3_upload_begin(void *priv, const char *key, const struct tfs_obj_meta *meta,
		    char upload_id[TFS_UPLOAD_ID_MAX])
{
	struct s3 *s = priv;
	char *fk = s3_full_key(s, key);
	int rc = fk ? create_upload(s, fk, meta, upload_id) : ENOMEM;
	free(fk);
	return rc;
}

int s3_upload_part(void *priv, const char *key, const char *upload_id, unsigned idx,
		   struct tfs_io src, uint64_t len, char etag_out[TFS_ETAG_MAX])
{
	struct s3 *s = priv;
	if (idx >= MAX_PARTS || len > MAX_PART_SIZE)
		return EINVAL;
	char *fk = s3_full_key(s, key);
	int rc = fk ? put_part(s, fk, upload_id, idx, 0, src, len, etag_out) : ENOMEM;
	free(fk);
	return rc;
}

void s3_multipart_geometry(void *priv, uint64_t *threshold, uint64_t *part_size, unsigned *parallel)
{
	const struct s3 *s = priv;
	*threshold = s->cfg.multipart_threshold > s->cfg.part_size ? s->cfg.multipart_threshold
								   : s->cfg.part_size + 1;
	*part_size = s->cfg.part_size;
	*parallel = s->cfg.upload_parallel ? s->cfg.upload_parallel : 1;
}

int s3_abort_upload(void *priv, const char *key, const char *upload_id)
{
	struct s3 *s = priv;
	char *fk = s3_full_key(s, key);
	int rc = fk ? abort_upload(s, fk, upload_id) : ENOMEM;
	free(fk);
	return rc;
}

int s3_count_uploads(void *priv, const char *prefix, size_t *out)
{
	struct s3 *s = priv;
	char *fp = s3_full_key(s, prefix);
	struct tfs_http_resp r;
	char what[600];

	if (fp == NULL)
		return ENOMEM;
	snprintf(what, sizeof(what), "ListMultipartUploads s3://%s/%s", s->cfg.bucket, fp);
	struct tfs_kv q[3] = { { "uploads", NULL }, { "prefix", fp }, { "max-uploads", "1000" } };
	int rc = send_simple(s, "GET", NULL, q, 3, what, 200, &r);
	if (rc == 0) {
		rc = tfs_s3_xml_parse_uploads(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), out);
		if (rc)
			tfs_err(s->log, "s3: %s: malformed reply", what);
	}
	tfs_http_resp_clear(&r);
	free(fp);
	return rc;
}
