/* layer.c - layer dispatch (layer.h): the checks and the fallbacks every
 * layer's ops get, and the progress of a run of blocks. */
#include "config.h"

#include "layer.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>

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
