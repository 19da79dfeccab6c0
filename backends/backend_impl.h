/* backend_impl.h - what a backend implementation provides.
 *
 * Only backend implementations (s3.c, local*.c, near.c), the files of
 * the interface (through backend_internal.h) and the unit tests' fake
 * backends include this.
 * An implementation defines one `static const struct tfs_backend_ops` and
 * wraps its private state with tfs_backend_new().  Each op has the contract
 * of the matching tfs_backend_*() wrapper in backend.h, with `priv` the
 * implementation's state.  The wrappers count requests, errors and bytes,
 * so implementations do not.
 */
#ifndef TFS_BACKEND_IMPL_H
#define TFS_BACKEND_IMPL_H

#include "backend.h"

struct tfs_backend_ops {
	const char *name; /* "s3", "local" */
	int (*head)(void *priv, const char *key, struct tfs_obj_meta *out);
	/* optional (tfs_backend_head_check()): NULL means ENOTSUP */
	int (*head_check)(void *priv, const char *key, struct tfs_obj_check *out);
	int (*list)(void *priv, const char *prefix, const char *delimiter, const char *token,
		    size_t max_keys, struct tfs_list_page *out);
	int (*get_range)(void *priv, const char *key, uint64_t off, uint64_t len,
			 const char *if_match, struct tfs_io dst, size_t *got,
			 char etag_out[TFS_ETAG_MAX]);
	int (*put)(void *priv, const char *key, struct tfs_io src, uint64_t len,
		   const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX]);
	/* Optional (NULL: ENOTSUP): tfs_backend_put_new(). */
	int (*put_new)(void *priv, const char *key, struct tfs_io src, uint64_t len,
		       const struct tfs_obj_meta *meta);
	int (*del)(void *priv, const char *key);
	int (*copy)(void *priv, const char *src, const char *dst, uint64_t size,
		    const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX]);
	/* Multipart, optional: all NULL for a backend without it (the
	 * wrappers then fall back to put and report no uploads).
	 * wants_multipart: whether a put of `len` bytes is a multipart upload
	 * (the backend's threshold); put_resumable is only called when it is,
	 * and must call fn exactly as tfs_mpu_fn describes (the wrapper counts
	 * uploaded parts from those calls). */
	bool (*wants_multipart)(void *priv, uint64_t len);
	int (*put_resumable)(void *priv, const char *key, struct tfs_io src, uint64_t len,
			     const struct tfs_obj_meta *meta, struct tfs_mpu *st, tfs_mpu_fn fn,
			     void *ctx, char etag_out[TFS_ETAG_MAX]);
	int (*abort_upload)(void *priv, const char *key, const char *upload_id);
	int (*upload_begin)(void *priv, const char *key, const struct tfs_obj_meta *meta,
			    char upload_id[TFS_UPLOAD_ID_MAX]);
	int (*upload_part)(void *priv, const char *key, const char *upload_id, unsigned idx,
			   struct tfs_io src, uint64_t len, char etag_out[TFS_ETAG_MAX]);
	void (*multipart_geometry)(void *priv, uint64_t *threshold, uint64_t *part_size,
				   unsigned *parallel);
	int (*count_uploads)(void *priv, const char *prefix, size_t *out);
	/* Optional: who the instance reads as, for tfs_backend_cache_identity()
	 * (NULL: the description alone says what it can read). */
	const char *(*cache_identity)(void *priv);
	/* Optional (NULL: every non-empty key is accepted). */
	int (*check_key)(void *priv, const char *key);
	/* Optional: add the implementation's own counters to `out` (the
	 * object tfs_backend_stats_json() returns). */
	void (*stats)(void *priv, struct json_object *out);
	void (*destroy)(void *priv);
};

/* Wrap `priv` in a new instance.  `describe` is copied.  Returns 0 or
 * ENOMEM; on failure `priv` is NOT destroyed (the caller still owns it). */
int tfs_backend_new(const struct tfs_backend_ops *ops, void *priv, const char *describe,
		    struct tfs_backend **out);

#endif
