/* s3_multipart.c - multipart upload: create, parts in parallel, complete,
 * and abort on any failure so that no orphaned upload is left behind. */
#include "config.h"

#include "s3_internal.h"
#include "s3_xml.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 10000u

struct mpu {
	struct s3 *s;
	const char *key;
	const char *upload_id;
	struct tfs_io src;
	uint64_t len;
	uint64_t part_size;
	unsigned n_parts;
	char (*etags)[TFS_ETAG_MAX]; /* per part, filled by the workers */
	pthread_mutex_t lock;        /* protects next and err */
	unsigned next;               /* next part index to upload */
	int err;                     /* first failure; stops the others */
};

static int upload_part(struct mpu *m, unsigned idx)
{
	struct s3 *s = m->s;
	struct tfs_http_resp r;
	char num[16], what[600];
	uint64_t off = (uint64_t)idx * m->part_size;
	uint64_t len = m->len - off < m->part_size ? m->len - off : m->part_size;

	snprintf(num, sizeof(num), "%u", idx + 1);
	struct tfs_kv q[2] = { { "partNumber", num }, { "uploadId", m->upload_id } };
	struct tfs_http_body body = { .src = m->src, .len = len };
	if (m->src.kind == TFS_IO_BUF)
		body.src.cbuf = (const char *)m->src.cbuf + off;
	else
		body.src.off = m->src.off + (off_t)off;
	snprintf(what, sizeof(what), "PUT s3://%s/%s part %u/%u", s->cfg.bucket, m->key, idx + 1,
		 m->n_parts);
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "PUT", .key = m->key, .query = q, .n_query = 2, .body = &body };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0 && r.etag[0] == '\0') {
		tfs_err(s->log, "s3: %s: reply has no ETag", what);
		rc = EIO;
	}
	if (rc == 0)
		memcpy(m->etags[idx], r.etag, TFS_ETAG_MAX);
	tfs_http_resp_clear(&r);
	return rc;
}

static void *worker(void *arg)
{
	struct mpu *m = arg;
	for (;;) {
		pthread_mutex_lock(&m->lock);
		unsigned idx = m->next;
		bool stop = m->err != 0 || idx >= m->n_parts;
		if (!stop)
			m->next++;
		pthread_mutex_unlock(&m->lock);
		if (stop)
			return NULL;
		int rc = upload_part(m, idx);
		if (rc) {
			pthread_mutex_lock(&m->lock);
			if (m->err == 0)
				m->err = rc;
			pthread_mutex_unlock(&m->lock);
		}
	}
}

static int create_upload(struct s3 *s, const char *key, const struct tfs_obj_meta *meta,
			 char **upload_id)
{
	struct tfs_http_resp r;
	struct tfs_kv *h = NULL;
	size_t nh = 0;
	char what[512];
	int rc = s3_meta_headers(meta, 0, &h, &nh);
	if (rc)
		return rc;
	snprintf(what, sizeof(what), "CreateMultipartUpload s3://%s/%s", s->cfg.bucket, key);
	struct tfs_kv q[1] = { { "uploads", NULL } };
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "POST", .key = key, .query = q, .n_query = 1, .headers = h,
			     .n_headers = nh };
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		rc = tfs_s3_xml_parse_upload_id(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), upload_id);
		if (rc)
			tfs_err(s->log, "s3: %s: malformed reply", what);
	}
	tfs_http_resp_clear(&r);
	s3_meta_headers_free(h, 0, nh);
	return rc;
}

static void abort_upload(struct s3 *s, const char *key, const char *upload_id)
{
	struct tfs_http_resp r;
	char what[600];
	snprintf(what, sizeof(what), "AbortMultipartUpload s3://%s/%s", s->cfg.bucket, key);
	struct tfs_kv q[1] = { { "uploadId", upload_id } };
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "DELETE", .key = key, .query = q, .n_query = 1 };
	int rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 204 && r.status != 200 && r.status != 404)
		s3_fail(s, what, &r);
	else if (rc == 0)
		tfs_info(s->log, "s3: aborted multipart upload of s3://%s/%s", s->cfg.bucket, key);
	tfs_http_resp_clear(&r);
}

static int complete_upload(struct mpu *m, char etag_out[TFS_ETAG_MAX])
{
	struct s3 *s = m->s;
	struct tfs_http_resp r;
	struct tfs_dbuf xml;
	char what[512];
	int rc = 0;

	tfs_dbuf_init(&xml, (size_t)m->n_parts * 256 + 256);
	rc = tfs_dbuf_adds(&xml, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (unsigned i = 0; rc == 0 && i < m->n_parts; i++) {
		/* ETags hold only quotes and hex: nothing to escape but '"',
		 * which is legal in element content. */
		rc = tfs_dbuf_addf(&xml, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>", i + 1,
				   m->etags[i]);
	}
	if (rc == 0)
		rc = tfs_dbuf_adds(&xml, "</CompleteMultipartUpload>");
	if (rc) {
		tfs_dbuf_free(&xml);
		return ENOMEM;
	}
	snprintf(what, sizeof(what), "CompleteMultipartUpload s3://%s/%s", s->cfg.bucket, m->key);
	struct tfs_kv q[1] = { { "uploadId", m->upload_id } };
	struct tfs_http_body body = { .src = tfs_io_cbuf(tfs_dbuf_str(&xml)), .len = tfs_dbuf_len(&xml) };
	tfs_http_resp_init(&r);
	struct s3_call c = { .method = "POST", .key = m->key, .query = q, .n_query = 1, .body = &body };
	rc = s3_call(s, &c, what, &r);
	if (rc == 0 && r.status != 200)
		rc = s3_fail(s, what, &r);
	if (rc == 0) {
		char code[128] = "", msg[512] = "";
		rc = tfs_s3_xml_parse_etag(tfs_dbuf_str(&r.body), tfs_dbuf_len(&r.body), etag_out, code,
					   sizeof(code), msg, sizeof(msg));
		if (rc) {
			tfs_err(s->log, "s3: %s: %s %s", what, code[0] ? code : "malformed reply", msg);
			tfs_debug(s->log, "s3: %s: reply body: %.512s", what, tfs_dbuf_str(&r.body));
		}
	}
	tfs_http_resp_clear(&r);
	tfs_dbuf_free(&xml);
	return rc;
}

int s3_put_multipart(struct s3 *s, const char *key, struct tfs_io src, uint64_t len,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct mpu m = { .s = s, .key = key, .src = src, .len = len, .part_size = s->cfg.part_size };
	char *upload_id = NULL;
	pthread_t tids[64];
	unsigned nthreads;
	int rc;

	/* Grow the part size if the object would need more than 10,000 parts. */
	while ((len + m.part_size - 1) / m.part_size > MAX_PARTS)
		m.part_size *= 2;
	m.n_parts = (unsigned)((len + m.part_size - 1) / m.part_size);
	m.etags = calloc(m.n_parts, sizeof(*m.etags));
	if (m.etags == NULL)
		return ENOMEM;
	rc = create_upload(s, key, meta, &upload_id);
	if (rc) {
		free(m.etags);
		return rc;
	}
	m.upload_id = upload_id;
	pthread_mutex_init(&m.lock, NULL);

	nthreads = s->cfg.upload_parallel;
	if (nthreads > m.n_parts)
		nthreads = m.n_parts;
	if (nthreads > 64)
		nthreads = 64;
	unsigned started = 0;
	/* The calling thread works too; helpers take the other parts. */
	for (unsigned i = 1; i < nthreads; i++) {
		if (pthread_create(&tids[started], NULL, worker, &m) != 0)
			break;
		started++;
	}
	worker(&m);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	rc = m.err;
	if (rc == 0)
		rc = complete_upload(&m, etag_out);
	if (rc == 0 && etag_out[0] == '\0') {
		/* Ceph RGW 16 completes with an empty ETag: HEAD has the real one. */
		struct tfs_obj_meta hm = { 0 };
		if (s3_head_full(s, key, &hm) == 0)
			memcpy(etag_out, hm.etag, TFS_ETAG_MAX);
		tfs_obj_meta_clear(&hm);
	}
	if (rc)
		abort_upload(s, key, upload_id);
	pthread_mutex_destroy(&m.lock);
	free(m.etags);
	free(upload_id);
	return rc;
}
