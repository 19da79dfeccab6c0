/* backend_layer.c - the bottom layer: reads blocks from the backend with
 * If-Match, so a block is never from another version than the one asked
 * for (layer.h, tfs_backend_layer_create()). */
#include "config.h"

#include "layer.h"
#include "log.h"
#include "statdef.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <sys/uio.h>

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
		json_object_object_add(out, tfs_stat_name(&tfs_backend_stattab), bo);
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
