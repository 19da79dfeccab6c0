/* warmup.h - the daemon's side of `tierfs warmup`, `pin`, `unpin` and
 * `evict`: control-socket commands that walk files of the mount and fill,
 * pin or drop their cached data.
 *
 * Commands (JSON requests on the control socket, see ctl.h):
 *   {"cmd":"warmup", "paths":[KEY...], "manifest":"/abs/file", "tier":
 *    "ssd"|"ram", "jobs":N, "pin":bool}
 *       Fill the named files and directories (recursively) and the files a
 *       manifest lists (in its order), with N parallel fetches.  Files
 *       already cached are skipped.  Progress lines every half second;
 *       the reply sums up fetched, already cached and failed files, each
 *       failure with its reason.  A client that disconnects (Ctrl-C)
 *       stops the run.
 *   {"cmd":"pin", "paths":[...]}     warm into the SSD tier and pin
 *   {"cmd":"unpin", "paths":[...]}   unpin
 *   {"cmd":"evict", "paths":[...]}   drop clean cached data (RAM and SSD);
 *                                     staged writes are never touched
 * KEYs are relative to the mount's root ("" is the root).
 *
 * Warm-up never waits for RAM: it takes budget only when free (so
 * foreground reads keep priority) and backs off otherwise; a reader of a
 * block being warmed waits for that fetch (the RAM tier's shared fills),
 * so nothing is fetched twice.
 */
#ifndef TFS_WARMUP_H
#define TFS_WARMUP_H

#include <stdatomic.h>

#include "ctl.h"
#include "layer.h"
#include "manifest.h"
#include "meta.h"
#include "writeback.h"

struct tfs_warmup_ctx {
	struct tfs_meta *meta;
	struct tfs_wb *wb;     /* dirty files are skipped; may be NULL */
	struct tfs_layer *ram; /* the RAM tier (top of the stack) */
	struct tfs_layer *ssd; /* the SSD tier below it */
	const struct tfs_log *log;
	struct tfs_manifest_scope scope;
	_Atomic unsigned default_jobs; /* prefetch.workers (a reload changes it) */
};

/* Register the commands above on `ctl`; `ctx` must outlive it.  Returns 0
 * or ENOMEM. */
int tfs_warmup_register(struct tfs_ctl *ctl, struct tfs_warmup_ctx *ctx);

#endif
