/* s3_internal.h - the S3 instance's state and the request helpers
 * (s3_request.c) shared by s3.c and s3_multipart.c.  Not for use outside
 * backends/. */
#ifndef TFS_S3_INTERNAL_H
#define TFS_S3_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "s3.h"
#include "s3_creds.h"
#include "s3_http.h"
#include "s3_sigv4.h"

/* Where requests go and how they are signed: the region, and the origin
 * and Host header that follow from it (AWS's endpoint names the region).
 * Immutable once published.  A region switch (s3_switch_region())
 * publishes a new one and keeps the old ones until the instance is
 * destroyed, so the snapshot a request took (s3_addr()) stays valid. */
struct s3_addr {
	char region[64];     /* SigV4 region */
	char *origin;        /* "scheme://host[:port]" requests go to */
	char *host;          /* Host header value */
	struct s3_addr *old; /* the one this replaced, or NULL */
};

/* Region switches one instance makes at most: a bucket moves rarely, and
 * a server that names another region each time must not make tierfs
 * chase it (or grow its list of addresses). */
#define S3_MAX_REGION_SWITCHES 4

struct s3 {
	struct tfs_s3_config cfg; /* owned copy; strings owned; cfg.region is
				   * the first region (NULL: us-east-1) */
	struct tfs_s3_creds creds;
	struct tfs_http_pool *pool;
	const struct tfs_log *log;
	_Atomic(struct s3_addr *) addr; /* the current one (s3_addr()) */
	pthread_mutex_t switch_lock;    /* serialises s3_switch_region() */
	unsigned switches;              /* under switch_lock */
	char *path_base;                /* "/bucket" (path style) or "" (virtual-hosted) */
	bool path_style; /* cfg.path_style resolved (tfs_s3_path_style_effective()) */
	char *copy_base; /* "/bucket/" for x-amz-copy-source */
	/* What a shared cache is keyed by (s3_cache_identity()): the access
	 * key ID, a space, and the first 16 bytes of HMAC-SHA256(secret key,
	 * "tierfs cache identity") in hex.  Owned. */
	char *identity;
};

/* The address of `region`: the endpoint (or AWS's for the region) split
 * into origin and Host header, with the instance's addressing style
 * (s->path_style) applied.  Uses curl's URL parser.  Returns 0 and *out
 * (freed by s3_addr_free()), EINVAL for an endpoint that is not
 * http[s]://host[:port] or a region over 63 bytes (logged), ENOMEM. */
int s3_addr_make(const struct s3 *s, const char *region, struct s3_addr **out);
/* Free `a` and the addresses it replaced (a->old ...).  NULL is a no-op. */
void s3_addr_free(struct s3_addr *a);

/* The current address: valid until the instance is destroyed.  Lock-free. */
const struct s3_addr *s3_addr(struct s3 *s);

/* The bucket answered that it lives in `region`, not in `from`'s: publish
 * an address for it, unless another request did so already (then 0: the
 * current address is newer than `from`).  Logs the switch.  Returns 0;
 * EINVAL when `region` is not a region name, is from's own, or the
 * instance has switched S3_MAX_REGION_SWITCHES times (logged); ENOMEM.
 * Thread safe. */
int s3_switch_region(struct s3 *s, const struct s3_addr *from, const char *region);

/* One S3 request.  Unused fields are zero. */
struct s3_call {
	const char *method;
	const char *key;            /* full object key (prefix applied) or NULL for the bucket */
	const struct tfs_kv *query; /* raw, unencoded */
	size_t n_query;
	const struct tfs_kv *headers; /* extra headers to sign and send */
	size_t n_headers;
	const struct tfs_http_body *body;
	const struct tfs_io *dst; /* 2xx body destination, see tfs_http_req */
	uint64_t dst_cap;
	uint64_t dst_skip;
	bool slow_reply; /* see tfs_http_req */
};

/* Sign and send `c`, retrying transport failures, 5xx, 429 and
 * RequestTimeout with exponential backoff and full jitter, up to
 * cfg.retries times.  Returns 0 once a non-retryable HTTP response arrived
 * (resp->status tells which), EIO when the retries are exhausted (logged,
 * naming `what`), ENOMEM, or an errno from the body source or dst. */
int s3_call(struct s3 *s, const struct s3_call *c, const char *what, struct tfs_http_resp *resp);

/* Map a non-2xx response to an errno (404 ENOENT, 403 EACCES, 412 ESTALE,
 * 400 EINVAL, else EIO) and log the server's code and message with `what`. */
int s3_fail(struct s3 *s, const char *what, const struct tfs_http_resp *resp);

/* The full key for a backend-relative key: prefix + key.  malloc'd, or NULL
 * on ENOMEM. */
char *s3_full_key(const struct s3 *s, const char *key);

/* "OP s3://bucket/key" into buf (cut to len), naming a request in logs. */
void s3_describe_op(char *buf, size_t len, const char *op, const struct s3 *s, const char *key);

/* HEAD of a full key (prefix applied): the s3 head operation.  Returns 0
 * and fills *out (the caller clears it), or s3_fail()'s errno; EIO for a
 * reply without Content-Length. */
int s3_head_full(struct s3 *s, const char *full_key, struct tfs_obj_meta *out);

/* tfs_backend_head_check() of a full key (backend.h). */
int s3_head_check_full(struct s3 *s, const char *full_key, struct tfs_obj_check *out);

/* The most S3 copies in one CopyObject or UploadPartCopy request. */
#define S3_MAX_COPY (5ull << 30)

/* Copy of full key `fsrc` to full key `fdst` in parts (UploadPartCopy,
 * s3_multipart.c): `size` bytes and ETag `etag` as a HEAD of the source
 * just gave them, `source` the x-amz-copy-source value, meta's user
 * metadata for the new object.  Parts of cfg.copy_part_size (doubled
 * while more than 10,000 would be needed), upload_parallel at once, each
 * copied only while the source still has `etag`
 * (x-amz-copy-source-if-match), so a source replaced meanwhile fails the
 * copy with ESTALE instead of mixing two objects.  The upload is aborted
 * on any failure.  Returns 0 and the new ETag in etag_out, or the errors
 * of s3_call() and s3_fail(). */
int s3_copy_multipart(struct s3 *s, const char *source, const char *fsrc, const char *fdst,
		      uint64_t size, const char *etag, const struct tfs_obj_meta *meta,
		      char etag_out[TFS_ETAG_MAX]);

/* Multipart PUT of `len` bytes from `src` as backend-relative `key`
 * (s3_multipart.c), aborting the upload on any failure. */
int s3_put_multipart(struct s3 *s, const char *key, struct tfs_io src, uint64_t len,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX]);

/* The multipart backend operations (s3_multipart.c), with the contracts of
 * tfs_backend_put_resumable(), tfs_backend_abort_upload() and
 * tfs_backend_count_uploads(); keys and prefix relative to cfg.prefix. */
int s3_put_resumable(void *priv, const char *key, struct tfs_io src, uint64_t len,
		     const struct tfs_obj_meta *meta, struct tfs_mpu *st, tfs_mpu_fn fn, void *ctx,
		     char etag_out[TFS_ETAG_MAX]);
int s3_abort_upload(void *priv, const char *key, const char *upload_id);
/* The streaming-upload operations (s3_multipart.c), with the contracts of
 * tfs_backend_upload_begin(), tfs_backend_upload_part() and
 * tfs_backend_multipart_geometry(). */
int s3_upload_begin(void *priv, const char *key, const struct tfs_obj_meta *meta,
		    char upload_id[TFS_UPLOAD_ID_MAX]);
int s3_upload_part(void *priv, const char *key, const char *upload_id, unsigned idx,
		   struct tfs_io src, uint64_t len, char etag_out[TFS_ETAG_MAX]);
void s3_multipart_geometry(void *priv, uint64_t *threshold, uint64_t *part_size,
			   unsigned *parallel);
int s3_count_uploads(void *priv, const char *prefix, size_t *out);

/* x-amz-meta-* headers for `meta` (NULL: none).  *out is malloc'd with
 * `extra` free slots before the metadata; free the names with
 * s3_meta_headers_free().  Returns 0 or ENOMEM. */
int s3_meta_headers(const struct tfs_obj_meta *meta, size_t extra, struct tfs_kv **out,
		    size_t *n_out);
void s3_meta_headers_free(struct tfs_kv *h, size_t extra, size_t n);

#endif
