/* stack.h - the one place that assembles the layer stack from the config:
 *
 *     ram tier -> ssd tier -> backend adapter -> backend (s3 or local)
 *     metadata cache (LMDB) -> backend
 *     prefetch workers -> ram tier
 *     write-back (staging + journal + uploaders) -> backend, meta, ram tier
 *
 * The SSD tier's index and the metadata cache share one LMDB environment
 * in <ssd.dir>/<source id>/index; the data files live beside it.  Each
 * SOURCE (bucket + prefix + endpoint, or local directory) gets its own
 * subdirectory, so two buckets never share cache entries, while several
 * mounts of one source with the same ssd.dir (pods on one node) share one
 * SSD tier and metadata cache; each mount keeps its own write-back journal
 * and staging area, named by its mountpoint.
 */
#ifndef TFS_STACK_H
#define TFS_STACK_H

#include <lmdb.h>

#include "backend.h"
#include "conf.h"
#include "layer.h"
#include "log.h"
#include "meta.h"
#include "prefetch.h"
#include "source.h"
#include "writeback.h"

struct tfs_stack {
	struct tfs_backend *be;
	MDB_env *env;
	struct tfs_layer *top; /* the RAM tier; owns the tiers below */
	struct tfs_layer *ssd; /* the SSD tier (borrowed from top) */
	struct tfs_meta *meta;
	struct tfs_prefetch *pf;
	struct tfs_wb *wb; /* always set: with writeback.mode = off or a read-only
			   * mount it keeps the journal and starts no uploaders */
	char *cache_dir;   /* <ssd.dir>/<source id> */
};

/* Build the backend for `src` with the [backend] settings of `cfg`.  For
 * an S3 source, the bucket and prefix come from `src`; with [near] bucket
 * set, it is far behind a near copy (backends/near.h), and EINVAL (logged)
 * when near's bucket and prefix overlap the source's.  Call after
 * daemonizing (it creates curl handles).  Returns 0 and *out, or the
 * backend's errno (already logged: EINVAL, EACCES, ENOENT, ENOMEM). */
int tfs_stack_open_backend(const struct tfs_config *cfg, const struct tfs_source *src,
			   const struct tfs_log *log, struct tfs_backend **out);

/* Open the [near] store alone (its bucket and prefix, [backend]'s other
 * settings), as tfs_stack_open_backend() does for a near copy.  Returns 0
 * and *out, EINVAL without [near] bucket (logged), or as tfs_s3_create().
 * Call after daemonizing. */
int tfs_stack_open_near_store(const struct tfs_config *cfg, const struct tfs_log *log,
			      struct tfs_backend **out);

/* Build the whole stack.  Call after daemonizing: it opens LMDB, creates
 * curl handles and starts threads.  Returns 0 and *out, or an errno (the
 * cause is logged); on failure nothing is left open. */
int tfs_stack_open(const struct tfs_config *cfg, const struct tfs_source *src, bool read_only,
		   const char *mountpoint, const struct tfs_log *log, struct tfs_stack **out);

/* Tear down in reverse order.  NULL is a no-op. */
void tfs_stack_close(struct tfs_stack *s);

/* Add every layer's counters to `out`. */
void tfs_stack_stats(struct tfs_stack *s, struct json_object *out);

#endif
