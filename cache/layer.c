/* layer.c - layer dispatch, object identity, and the backend adapter
 * (the bottom layer, which reads blocks with If-Match). */
#include "config.h"

#include "layer.h"
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

void tfs_obj_init(struct tfs_obj *obj, const char *key, const char *etag, uint64_t size)
{
	unsigned int len = 0;
	obj->key = key;
	snprintf(obj->etag, sizeof(obj->etag), "%s", etag ? etag : "");
	obj->size = size;
	EVP_Digest(key, strlen(key), obj->id, &len, EVP_sha256(), NULL);
}

uint64_t tfs_obj_blocks(const struct tfs_obj *obj, uint64_t bs)
{
	return (obj->size + bs - 1) / bs;
}

size_t tfs_obj_block_len(const struct tfs_obj *obj, uint64_t idx, uint64_t bs)
{
	uint64_t off = idx * bs;
	if (off >= obj->size)
		return 0;
	return (size_t)(obj->size - off < bs ? obj->size - off : bs);
}

int tfs_layer_read_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf)
{
	if (idx >= tfs_obj_blocks(obj, l->block_size))
		return EINVAL;
	return l->ops->read_block(l, obj, idx, buf);
}

int tfs_layer_read_blocks(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first,
			  unsigned n, void *const bufs[], struct tfs_io_progress *progress)
{
	if (n == 0 || first + n > tfs_obj_blocks(obj, l->block_size))
		return EINVAL;
	/* One block goes to read_block, but a background one to read_blocks,
	 * which is where a layer sees the progress and its flag. */
	if (l->ops->read_blocks && (n > 1 || (progress && progress->background)))
		return l->ops->read_blocks(l, obj, first, n, bufs, progress);
	for (unsigned i = 0; i < n; i++) {
		int rc = l->ops->read_block(l, obj, first + i, bufs[i]);
		if (rc)
			return rc;
		tfs_layer_block_done(progress, i, tfs_obj_block_len(obj, first + i, l->block_size));
	}
	return 0;
}

void tfs_layer_block_done(struct tfs_io_progress *progress, unsigned i, size_t len)
{
	if (progress == NULL || (unsigned)progress->ndone != i)
		return;
	progress->ndone++;
	progress->done_bytes += len;
	progress->done(progress->ctx, (int)i);
}

void tfs_layer_invalidate(struct tfs_layer *l, const uint8_t id[TFS_OBJ_ID_LEN])
{
	if (l)
		l->ops->invalidate(l, id);
}

void tfs_layer_put_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx,
			 const void *buf)
{
	for (; l; l = l->inner) {
		if (l->ops->put_block) {
			l->ops->put_block(l, obj, idx, buf);
			return;
		}
	}
}

void tfs_layer_stats(struct tfs_layer *l, struct json_object *out)
{
	if (l)
		l->ops->stats(l, out);
}

void tfs_layer_destroy(struct tfs_layer *l)
{
	if (l)
		l->ops->destroy(l);
}

/* ---- backend adapter ---- */

struct be_layer {
	struct tfs_backend *be;
	const struct tfs_log *log;
};

static int be_read_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf)
{
	struct be_layer *b = l->priv;
	size_t want = tfs_obj_block_len(obj, idx, l->block_size);
	size_t got = 0;
	int rc = tfs_backend_get_range(b->be, obj->key, idx * l->block_size, want,
				       obj->etag[0] ? obj->etag : NULL, tfs_io_buf(buf), &got,
				       NULL);
	if (rc == 0 && got != want) {
		/* Shorter than the size we know: the object was replaced by a
		 * smaller one that kept the ETag we asked for (a server without
		 * If-Match support).  Never hand out a short block. */
		tfs_warn(b->log, "cache: '%s' block %" PRIu64 ": %zu of %zu bytes: object changed",
			 obj->key, idx, got, want);
		rc = ESTALE;
	}
	return rc;
}

static int be_read_blocks(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first,
			  unsigned n, void *const bufs[], struct tfs_io_progress *progress)
{
	struct be_layer *b = l->priv;
	struct iovec iov[TFS_MAX_RUN];
	size_t want = 0, got = 0;

	if (n > TFS_MAX_RUN)
		return EINVAL;
	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = tfs_obj_block_len(obj, first + i, l->block_size);
		want += iov[i].iov_len;
	}
	struct tfs_io dst = tfs_io_iov(iov, (int)n);
	/* Blocks are handed out as they arrive only when If-Match pins the
	 * version they belong to. */
	dst.progress = obj->etag[0] ? progress : NULL; /* one buffer per block */
	int rc = tfs_backend_get_range(b->be, obj->key, first * l->block_size, want,
				       obj->etag[0] ? obj->etag : NULL, dst, &got, NULL);
	if (rc == 0 && got != want) {
		tfs_warn(b->log,
			 "cache: '%s' blocks %" PRIu64 "+%u: %zu of %zu bytes: object changed",
			 obj->key, first, n, got, want);
		rc = ESTALE;
	}
	return rc;
}

static void be_invalidate(struct tfs_layer *l, const uint8_t id[TFS_OBJ_ID_LEN])
{
	(void)l;
	(void)id;
}

static void be_stats(struct tfs_layer *l, struct json_object *out)
{
	struct be_layer *b = l->priv;
	struct json_object *bo = tfs_backend_stats_json(b->be);
	if (bo)
		json_object_object_add(out, "backend", bo);
}

static void be_destroy(struct tfs_layer *l)
{
	free(l->priv);
	free(l);
}

static const struct tfs_layer_ops be_layer_ops = {
	.name = "backend",
	.read_block = be_read_block,
	.read_blocks = be_read_blocks,
	.invalidate = be_invalidate,
	.stats = be_stats,
	.destroy = be_destroy,
};

int tfs_backend_layer_create(struct tfs_backend *be, uint64_t block_size, const struct tfs_log *log,
			     struct tfs_layer **out)
{
	struct tfs_layer *l = calloc(1, sizeof(*l));
	struct be_layer *b = calloc(1, sizeof(*b));
	if (l == NULL || b == NULL) {
		free(l);
		free(b);
		return ENOMEM;
	}
	b->be = be;
	b->log = log;
	l->ops = &be_layer_ops;
	l->priv = b;
	l->block_size = block_size;
	*out = l;
	return 0;
}
