/* backend.c - a backend instance's life cycle and the dispatch of the
 * backend interface: each tfs_backend_*() wrapper checks its arguments,
 * calls the backend's op and counts the request (backend_stats.c).
 * Listings are in backend_list.c, the value types in backend_value.c. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "clock.h"

int tfs_backend_new(const struct tfs_backend_ops *ops, void *priv, const char *describe,
		    struct tfs_backend **out)
{
	struct tfs_backend *be = calloc(1, sizeof(*be));
	if (be == NULL)
		return ENOMEM;
	be->describe = strdup(describe);
	if (be->describe == NULL) {
		free(be);
		return ENOMEM;
	}
	be->ops = ops;
	be->priv = priv;
	*out = be;
	return 0;
}

void tfs_backend_destroy(struct tfs_backend *be)
{
	if (be == NULL)
		return;
	be->ops->destroy(be->priv);
	free(be->describe);
	free(be);
}

const char *tfs_backend_describe(const struct tfs_backend *be)
{
	return be->describe;
}

const char *tfs_backend_cache_identity(const struct tfs_backend *be)
{
	const char *id = be->ops->cache_identity ? be->ops->cache_identity(be->priv) : NULL;
	return id ? id : "";
}

/* Keys are non-empty C strings; a NUL inside cannot be expressed anyway. */
static bool key_ok(const char *key)
{
	return key != NULL && key[0] != '\0';
}

int tfs_backend_check_key(const struct tfs_backend *be, const char *key)
{
	if (!key_ok(key))
		return EINVAL;
	return be->ops->check_key ? be->ops->check_key(be->priv, key) : 0;
}

int tfs_backend_head(struct tfs_backend *be, const char *key, struct tfs_obj_meta *out)
{
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key))
		return EINVAL;
	return tfs_backend_account(be, TFS_OP_HEAD, be->ops->head(be->priv, key, out), 0, t0);
}

int tfs_backend_head_check(struct tfs_backend *be, const char *key, struct tfs_obj_check *out)
{
	uint64_t t0 = tfs_mono_ns();

	memset(out, 0, sizeof(*out));
	if (!key_ok(key))
		return EINVAL;
	if (be->ops->head_check == NULL)
		return ENOTSUP;
	return tfs_backend_account(be, TFS_OP_HEAD, be->ops->head_check(be->priv, key, out), 0, t0);
}

int tfs_backend_get_range(struct tfs_backend *be, const char *key, uint64_t off, uint64_t len,
			  const char *if_match, struct tfs_io dst, size_t *got,
			  char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";
	size_t n = 0;
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key))
		return EINVAL;
	if (len > SIZE_MAX)
		return EINVAL;
	int rc = be->ops->get_range(be->priv, key, off, len, if_match, dst, &n, etag);
	if (rc == 0 && n > len)
		rc = EIO; /* a backend bug: never hand out more than asked */
	*got = rc ? 0 : n;
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	return tfs_backend_account(be, TFS_OP_GET, rc, n, t0);
}

int tfs_backend_put(struct tfs_backend *be, const char *key, struct tfs_io src, uint64_t len,
		    const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key) || src.kind == TFS_IO_IOV)
		return EINVAL;
	int rc = be->ops->put(be->priv, key, src, len, meta, etag);
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	return tfs_backend_account(be, TFS_OP_PUT, rc, len, t0);
}

int tfs_backend_put_new(struct tfs_backend *be, const char *key, struct tfs_io src, uint64_t len,
			const struct tfs_obj_meta *meta)
{
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key) || src.kind == TFS_IO_IOV)
		return EINVAL;
	if (be->ops->put_new == NULL)
		return ENOTSUP;
	int rc = be->ops->put_new(be->priv, key, src, len, meta);
	return tfs_backend_account(be, TFS_OP_PUT, rc, len, t0);
}

/* Counts each part a resumable put uploads, then calls the caller's fn. */
struct part_counter {
	struct tfs_backend *be;
	uint64_t len;
	tfs_mpu_fn fn;
	void *ctx;
};

static int count_part(void *arg, const struct tfs_mpu *st, unsigned part)
{
	struct part_counter *pc = arg;
	if (part != UINT_MAX) {
		uint64_t off = (uint64_t)part * st->part_size;
		uint64_t n = pc->len - off < st->part_size ? pc->len - off : st->part_size;
		tfs_backend_account(pc->be, TFS_OP_PUT, 0, n, 0);
	}
	return pc->fn ? pc->fn(pc->ctx, st, part) : 0;
}

int tfs_backend_put_resumable(struct tfs_backend *be, const char *key, struct tfs_io src,
			      uint64_t len, const struct tfs_obj_meta *meta, struct tfs_mpu *st,
			      tfs_mpu_fn fn, void *ctx, char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";

	if (st == NULL)
		return EINVAL;
	if (be->ops->put_resumable == NULL || !be->ops->wants_multipart(be->priv, len))
		return tfs_backend_put(be, key, src, len, meta, etag_out);
	if (!key_ok(key) || src.kind == TFS_IO_IOV)
		return EINVAL;
	struct part_counter pc = { .be = be, .len = len, .fn = fn, .ctx = ctx };
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->put_resumable(be->priv, key, src, len, meta, st, count_part, &pc, etag);
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	if (rc)
		tfs_backend_account(be, TFS_OP_PUT, rc, 0, t0);
	else
		tfs_hist_observe(&be->stats.op[TFS_OP_PUT].latency, t0);
	return rc;
}

int tfs_backend_abort_upload(struct tfs_backend *be, const char *key, const char *upload_id)
{
	if (!key_ok(key))
		return EINVAL;
	if (be->ops->abort_upload == NULL || upload_id == NULL || upload_id[0] == '\0')
		return 0;
	uint64_t t0 = tfs_mono_ns();
	return tfs_backend_account(be, TFS_OP_DELETE,
				   be->ops->abort_upload(be->priv, key, upload_id), 0, t0);
}

bool tfs_backend_multipart_geometry(const struct tfs_backend *be, uint64_t *threshold,
				    uint64_t *part_size, unsigned *parallel)
{
	*threshold = UINT64_MAX;
	*part_size = 0;
	*parallel = 1;
	if (be->ops->multipart_geometry == NULL || be->ops->upload_begin == NULL ||
	    be->ops->upload_part == NULL)
		return false;
	be->ops->multipart_geometry(be->priv, threshold, part_size, parallel);
	return true;
}

int tfs_backend_upload_begin(struct tfs_backend *be, const char *key,
			     const struct tfs_obj_meta *meta, char upload_id[TFS_UPLOAD_ID_MAX])
{
	upload_id[0] = '\0';
	if (!key_ok(key))
		return EINVAL;
	if (be->ops->upload_begin == NULL)
		return ENOTSUP;
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->upload_begin(be->priv, key, meta, upload_id);
	if (rc)
		upload_id[0] = '\0';
	return tfs_backend_account(be, TFS_OP_PUT, rc, 0, t0);
}

int tfs_backend_upload_part(struct tfs_backend *be, const char *key, const char *upload_id,
			    unsigned idx, struct tfs_io src, uint64_t len,
			    char etag_out[TFS_ETAG_MAX])
{
	if (!key_ok(key) || upload_id == NULL || upload_id[0] == '\0' || src.kind == TFS_IO_IOV ||
	    idx >= 10000)
		return EINVAL;
	if (be->ops->upload_part == NULL)
		return ENOTSUP;
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->upload_part(be->priv, key, upload_id, idx, src, len, etag_out);
	return tfs_backend_account(be, TFS_OP_PUT, rc, len, t0);
}

int tfs_backend_count_uploads(struct tfs_backend *be, const char *prefix, size_t *out)
{
	*out = 0;
	if (be->ops->count_uploads == NULL)
		return 0;
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->count_uploads(be->priv, prefix ? prefix : "", out);
	if (rc)
		*out = 0;
	return tfs_backend_account(be, TFS_OP_LIST, rc, 0, t0);
}

int tfs_backend_delete(struct tfs_backend *be, const char *key)
{
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key))
		return EINVAL;
	return tfs_backend_account(be, TFS_OP_DELETE, be->ops->del(be->priv, key), 0, t0);
}

int tfs_backend_copy(struct tfs_backend *be, const char *src, const char *dst, uint64_t size,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(src) || !key_ok(dst))
		return EINVAL;
	int rc = be->ops->copy(be->priv, src, dst, size, meta, etag);
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	return tfs_backend_account(be, TFS_OP_COPY, rc, 0, t0);
}
