/* follow_ctl.h - the `follow` control command (tierfs warmup --follow):
 * sampler-order prefetch (vfs/follow.h) of a manifest, served on the
 * control socket (ctl.h). */
#ifndef TFS_FOLLOW_CTL_H
#define TFS_FOLLOW_CTL_H

#include "follow.h"

/* Register {"cmd":"follow","manifest":"/abs/file"} on `ctl`: load the
 * manifest (bad lines are reported in the reply's "bad_lines"), follow it
 * in a stream of its own, and send progress (position of the reader)
 * every half second until the reader reaches the end of the order; the
 * stream ends with the command, also when the client goes away (Ctrl-C).
 * `f` and `scope` must outlive `ctl`.  Returns 0 or ENOMEM. */
struct tfs_ctl;
int tfs_follow_register(struct tfs_ctl *ctl, struct tfs_follow *f,
			const struct tfs_manifest_scope *scope);

#endif
