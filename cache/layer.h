/* layer.h - the block interface every cache tier implements and wraps.
 *
 * The stack is ram -> ssd -> backend adapter.  Each layer is a const ops
 * table plus private state, and holds a pointer to its inner layer: a miss
 * in one layer is a read_block() on the next.  Destroying a layer destroys
 * its inner layer too (s3backer style), so the stack is torn down from the
 * top.
 *
 * Objects are addressed by a struct tfs_obj: the key, the ETag the caller
 * believes current and the size.  Blocks are cache.block_size bytes; the
 * last block of an object is shorter.  A layer never returns bytes of a
 * version other than obj->etag: a cached copy with another ETag is a miss,
 * and the backend adapter reads with If-Match.
 *
 * Errors: 0, or ESTALE (the object no longer has obj->etag: the caller
 * must revalidate), ENOENT (the object is gone), EIO (the backend failed
 * after retries), ENOMEM.  Layers log causes themselves.
 *
 * Thread safety: every op may be called from any number of threads.
 */
#ifndef TFS_LAYER_H
#define TFS_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "log.h"

#define TFS_OBJ_ID_LEN 32    /* SHA-256 of the key */
#define TFS_MAX_RUN 64       /* most blocks in one read_blocks() */
#define TFS_PAGE_ALIGN 4096u /* RAM tier buffers start at this alignment (O_DIRECT) */

struct json_object;

struct tfs_obj {
	const char *key;            /* backend key */
	char etag[TFS_ETAG_MAX];    /* the version to read */
	uint64_t size;              /* its size */
	uint8_t id[TFS_OBJ_ID_LEN]; /* tfs_obj_init() computes it from key */
};

/* Fill obj: key is borrowed (must outlive obj), etag copied, id computed.
 * Cannot fail. */
void tfs_obj_init(struct tfs_obj *obj, const char *key, const char *etag, uint64_t size);

/* Number of blocks and the length of block `idx` for `obj`. */
uint64_t tfs_obj_blocks(const struct tfs_obj *obj, uint64_t block_size);
size_t tfs_obj_block_len(const struct tfs_obj *obj, uint64_t idx, uint64_t block_size);
/* `len` rounded up to TFS_PAGE_ALIGN: what a read buffer for a block of
 * len bytes spans (see struct tfs_layer_ops). */
static inline size_t tfs_obj_block_room(size_t len)
{
	return (len + TFS_PAGE_ALIGN - 1) / TFS_PAGE_ALIGN * TFS_PAGE_ALIGN;
}

struct tfs_layer;

/* Buffers handed to read_block and read_blocks (those of the RAM tier,
 * the only caller in the daemon) start at TFS_PAGE_ALIGN and reach, zero
 * past the block's length, to that length rounded up to TFS_PAGE_ALIGN
 * (tfs_obj_block_room()): the SSD tier writes an object's last block into
 * its data file with O_DIRECT straight from such a buffer.  A layer must
 * not rely on it beyond that (test buffers need not comply: the SSD tier
 * then copies). */
struct tfs_layer_ops {
	const char *name;
	/* Fill buf with block `idx` of obj (tfs_obj_block_len() bytes). */
	int (*read_block)(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf);
	/* Optional: fill bufs[0..n) with blocks first..first+n-1 of obj (all
	 * within the object), as read_block would, but in one request where
	 * the layer can (one ranged GET instead of n).  NULL: the dispatcher
	 * calls read_block n times.  `progress` (may be NULL) is told of each
	 * block, in order, as soon as it is complete: from then on the layer
	 * neither changes nor reads that buffer, so the caller may hand it
	 * out and reuse it (struct tfs_io_progress in backend.h, one buffer
	 * per block); on error the reported blocks are good and no other
	 * buffer is meaningful.  A layer may report fewer blocks than it
	 * filled (none): on success every block is good.  The dispatcher
	 * calls it for n > 1, and for one block too when
	 * progress->background (a warm-up: a cache layer writes its copy
	 * before reporting the block, where a reader's copy may be deferred
	 * or dropped). */
	int (*read_blocks)(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first,
			   unsigned n, void *const bufs[], struct tfs_io_progress *progress);
	/* Optional: store `buf` as block `idx` of obj, a version the caller
	 * knows to be current (write-back: the bytes it just uploaded), so it
	 * is not downloaded again.  Best effort: failures are logged, not
	 * returned.  NULL: the layer keeps nothing and forwards nothing. */
	void (*put_block)(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx,
			  const void *buf);
	/* Drop everything cached for the object with this id, any version.
	 * Cannot fail; data being read right now is dropped after the read. */
	void (*invalidate)(struct tfs_layer *l, const uint8_t id[TFS_OBJ_ID_LEN]);
	/* Add this layer's counters to `out` (a JSON object), then the inner
	 * layer's.  Cannot fail (a missing counter is skipped on ENOMEM). */
	void (*stats)(struct tfs_layer *l, struct json_object *out);
	/* Stop threads, free everything, destroy the inner layer. */
	void (*destroy)(struct tfs_layer *l);
};

struct tfs_layer {
	const struct tfs_layer_ops *ops;
	void *priv;
	struct tfs_layer *inner; /* NULL for the bottom layer */
	uint64_t block_size;     /* the same in every layer of a stack */
};

/* Dispatch helpers; `l` NULL is a no-op for invalidate/stats/destroy. */
int tfs_layer_read_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf);
int tfs_layer_read_blocks(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first,
			  unsigned n, void *const bufs[], struct tfs_io_progress *progress);
/* For read_blocks implementations: report block i of the run (`len`
 * bytes) to `progress` if it is the next one due; NULL is a no-op.
 * Cannot fail. */
void tfs_layer_block_done(struct tfs_io_progress *progress, unsigned i, size_t len);
void tfs_layer_invalidate(struct tfs_layer *l, const uint8_t id[TFS_OBJ_ID_LEN]);
/* Offer a clean block to the first layer below `l` (inclusive) that keeps
 * data written back (the SSD tier).  Cannot fail. */
void tfs_layer_put_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx,
			 const void *buf);
void tfs_layer_stats(struct tfs_layer *l, struct json_object *out);
void tfs_layer_destroy(struct tfs_layer *l);

/* The bottom layer: reads blocks from `be` with If-Match.  It does not own
 * `be` (the stack assembly destroys the backend after the layers).
 * Returns 0 or ENOMEM. */
int tfs_backend_layer_create(struct tfs_backend *be, uint64_t block_size, const struct tfs_log *log,
			     struct tfs_layer **out);

#endif
