/* ssd.h - the SSD tier: blocks cached as files in a local directory,
 * indexed in LMDB, between the RAM tier and the backend.
 *
 * struct tfs_ssd_config is filled and validated by src/conf.c ([ssd]
 * section).  The tier copies what it needs; a reload hands it new limits
 * with tfs_ssd_set_limits().
 *
 * The tier is a struct tfs_layer (layer.h): read_block() serves a block
 * from disk when a copy of obj->etag's version is cached and its checksum
 * matches, and otherwise reads it from the inner layer and caches it when
 * the admission rule allows.  A cache failure (disk full, I/O error,
 * damaged index) never fails a read: the tier then passes reads through.
 *
 * On disk (see ssd_index.c for the full format, ssd.c for the crash behaviour):
 *   <dir>/data/XX/<64 hex of obj->id>   one sparse file per object, block
 *                                       idx at offset idx * block_size
 *   <dir>/data/trash/                   files being deleted
 *   named DBs ssd_objects, ssd_blocks, ssd_atime, ssd_state in the shared
 *   LMDB environment (lmdb_env.h), which the caller owns.
 * Directories are created 0700 and files 0600.
 *
 * Threads: one background thread (flushes access times, syncs the
 * environment about once per second, evicts above the high watermark,
 * and removes files left over by a crash).  It is started by
 * tfs_ssd_create(), so create the tier after daemonizing.
 */
#ifndef TFS_SSD_H
#define TFS_SSD_H

#include <stdbool.h>
#include <stdint.h>

#include <lmdb.h>

#include "cache.h"
#include "layer.h"
#include "log.h"

/* ssd.fill_when_full: a block that does not fit in the full fill queue is
 * written by its reader before the read returns (back-pressure at the
 * SSD's write speed: every block read is cached), or, only if an admin
 * asks for it, dropped (served, not cached, counted as fill_dropped). */
enum tfs_ssd_when_full {
	TFS_SSD_FULL_WRITE = 0,
	TFS_SSD_FULL_DROP = 1,
};

struct tfs_stattab;

/* The rows of the tier's "ssd" stats (statdef.h): what its layer stats
 * add, and the metrics over them. */
extern const struct tfs_stattab tfs_ssd_stattab;

struct tfs_ssd_config {
	char *dir; /* absolute path of the cache directory */
	/* Capacity: either absolute (size > 0, size_pct == 0) or relative
	 * (size == 0, 0 < size_pct <= 100: percent of the filesystem holding
	 * dir, resolved by the tier at start-up with statvfs()). */
	uint64_t size;
	double size_pct;
	/* Eviction starts when usage exceeds high_watermark percent of the
	 * capacity and stops below low_watermark percent (low < high). */
	double high_watermark;
	double low_watermark;
	/* Most bytes pinned at once: absolute (pin_max > 0) or percent of the
	 * capacity (pin_max 0, 0 <= pin_max_pct <= 100). */
	uint64_t pin_max;
	double pin_max_pct;
	/* Write data files with O_DIRECT (when the filesystem takes it):
	 * fills skip the page cache, which the kernel already spends on the
	 * mount's own copy of the data. */
	bool direct_io;
	/* Most bytes of blocks waiting to be written into the tier by its fill
	 * threads after a reader got them (ssd_fillq.c); a block beyond it is
	 * written by its reader (fill_when_full).  0: each reader writes its
	 * blocks itself before it gets them. */
	uint64_t fill_queue;
	/* What a reader does with a block that does not fit in the full fill
	 * queue. */
	enum tfs_ssd_when_full fill_when_full;
};

/* Object record flag: never evicted by the watermarks or the policy. */
#define TFS_SSD_OBJ_PINNED 0x1u

/* Bytes of version obj->etag in the tier (0: none, or another version).
 * A fully cached object has obj->size bytes.  Returns 0 or EIO. */
int tfs_ssd_cached(struct tfs_layer *ssd, const struct tfs_obj *obj, uint64_t *bytes);

/* Pin (never evict) or unpin the cached object of version obj->etag.
 * Pinning needs the whole object cached.  Returns 0 (also when already in
 * that state), ENOENT (not wholly cached in this version), EDQUOT (pinning
 * it would exceed pin_max), ENOMEM, EIO.  A pinned object that is
 * invalidated or replaced by a new version is dropped and unpinned. */
int tfs_ssd_set_pinned(struct tfs_layer *ssd, const struct tfs_obj *obj, bool pinned);

/* Pinned bytes now and the limit. */
void tfs_ssd_pin_usage(struct tfs_layer *ssd, uint64_t *pinned, uint64_t *max);

/* Reload: new capacity (cfg->size or cfg->size_pct of the cache
 * filesystem), watermarks and pin_max (cfg->dir is ignored).  Takes effect
 * at once for new fills; when usage is above the new high watermark the
 * background thread evicts down to the low watermark (down to the
 * capacity whatever the policy), so the call does not wait for eviction.
 * Returns 0, or EINVAL (capacity below 4 blocks, low >= high) or the
 * errno of statvfs(), logged, with the old limits in force.  Thread safe
 * (atomics): any thread, while others read and fill. */
int tfs_ssd_set_limits(struct tfs_layer *ssd, const struct tfs_ssd_config *cfg);

/* Create the tier on top of `inner`.
 *
 * `cfg` and `cc` are read during the call only (the tier copies what it
 * needs).  `env` is an open environment from tfs_lmdb_open(), shared with
 * other users and NOT owned: the caller closes it after destroying the
 * tier.  The tier opens its named DBs (ssd_*) in it with a write txn, so
 * this call must not run concurrently with another mdb_dbi_open() on
 * `env` (the stack assembly is single-threaded).  `log` must outlive the
 * tier.  cc->block_size must equal inner->block_size.
 *
 * Creates cfg->dir, data/, data/00..ff and data/trash (0700) if needed,
 * resolves the capacity (size, or size_pct of statvfs(cfg->dir)), counts
 * the cached bytes from the index, restores the logical clock and the
 * epoch estimator, and starts the background thread.
 *
 * Returns 0 and sets *out, or EINVAL (bad arguments), ENOMEM, EACCES,
 * ENOSPC, EIO (cause logged).  On success the tier owns `inner`
 * (destroying the tier destroys it); on failure the caller still does.
 *
 * Thread safety of the layer: read_block, invalidate and stats may be
 * called from any number of threads; destroy only once nothing else
 * calls the layer. */
int tfs_ssd_create(const struct tfs_ssd_config *cfg, const struct tfs_cache_config *cc,
		   MDB_env *env, struct tfs_layer *inner, const struct tfs_log *log,
		   struct tfs_layer **out);

#endif
