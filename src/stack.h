/* stack.h - the one place that assembles the layer stack from the config.
 *
 * Today the stack is the backend alone; the RAM and SSD tiers will wrap it
 * here (ram -> ssd -> backend), so no other code decides the layering.
 */
#ifndef TFS_STACK_H
#define TFS_STACK_H

#include "backend.h"
#include "conf.h"
#include "log.h"
#include "source.h"

/* Build the backend for `src` with the [backend] settings of `cfg`.  For
 * an S3 source, the bucket and prefix come from `src`.  Call after
 * daemonizing (it creates curl handles).  Returns 0 and *out, or the
 * backend's errno (already logged: EINVAL, EACCES, ENOENT, ENOMEM). */
int tfs_stack_open_backend(const struct tfs_config *cfg, const struct tfs_source *src,
			   const struct tfs_log *log, struct tfs_backend **out);

#endif
