/* follow.h - prefetch in the sampler's order.
 *
 * A training job hands the daemon the order it will read files in this
 * epoch (a manifest: `tierfs warmup --follow`, or the control file
 * TFS_FOLLOW_FILE at the root of the mount).  Each open() of a file in
 * that order tells where the reader is; the daemon keeps the next
 * `window` files being fetched into RAM ahead of it, and realigns when the
 * reader skips forward or back.  Prefetched blocks are kept until read
 * (TFS_RAM_ONCE) and never take budget a reader is waiting for.
 *
 * Thread safety: all functions may be called from any thread; one mutex
 * protects the order and the position, never held across a fetch.
 */
#ifndef TFS_FOLLOW_H
#define TFS_FOLLOW_H

#include <stdint.h>

#include "layer.h"
#include "manifest.h"
#include "meta.h"

/* The control file: writing a manifest into <mountpoint>/.tierfs-order
 * and closing it sets the order (an empty one stops following). */
#define TFS_FOLLOW_FILE ".tierfs-order"

struct tfs_follow;
struct json_object;

/* Start `workers` fetch threads over the RAM tier `ram` and the metadata
 * cache (both borrowed).  `window` files are kept in flight ahead of the
 * reader.  Call after daemonizing.  Returns 0, ENOMEM or EAGAIN. */
int tfs_follow_create(struct tfs_layer *ram, struct tfs_meta *meta, unsigned workers,
		      unsigned window, const struct tfs_log *log, struct tfs_follow **out);
void tfs_follow_destroy(struct tfs_follow *f);

/* Replace the order by the valid entries of `m` (copied; errors are
 * skipped and counted).  An order with no entries stops following.
 * Returns 0 or ENOMEM (the old order stays). */
int tfs_follow_set(struct tfs_follow *f, const struct tfs_manifest *m);

/* The reader opened `key`: move the window.  Cheap when `key` is not in
 * the order.  Cannot fail. */
void tfs_follow_opened(struct tfs_follow *f, const char *key);

/* Position (entries opened so far in order), order length, files
 * prefetched; for progress.  */
void tfs_follow_position(struct tfs_follow *f, uint64_t *pos, uint64_t *len, uint64_t *fetched);

/* The most fetch threads. */
#define TFS_FOLLOW_MAX_WORKERS 256

/* Reload: run `workers` fetch threads (extra ones leave after their
 * current file; the window keeps its size).  Returns 0 or the
 * pthread_create() error (logged).  Thread safe. */
int tfs_follow_set_workers(struct tfs_follow *f, unsigned workers);

/* Add a "follow" object to `out`. */
void tfs_follow_stats(struct tfs_follow *f, struct json_object *out);

/* Register {"cmd":"follow","manifest":"/abs/file"} on `ctl`: load the
 * manifest (bad lines are reported in the reply's "bad_lines"), set the
 * order, and send progress (position of the reader) every half second
 * until the reader reaches the end of the order; a client that goes away
 * (Ctrl-C) stops the following.  `f` and `scope` must outlive `ctl`.
 * Returns 0 or ENOMEM. */
struct tfs_ctl;
int tfs_follow_register(struct tfs_ctl *ctl, struct tfs_follow *f,
			const struct tfs_manifest_scope *scope);

#endif
