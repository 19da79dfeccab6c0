/* fs.h - the FUSE low-level operations: namespace from the metadata cache,
 * data from the top cache layer.
 *
 * Every operation replies exactly once.  Functions below this layer return
 * 0 or a positive errno; the handlers turn that into fuse_reply_err().
 * Writes go to the write-back layer (cache/writeback.h); without one, or
 * with writeback.mode = off, modifying operations reply EROFS.
 */
#ifndef TFS_FS_H
#define TFS_FS_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vfs.h"

/* Largest read the kernel sends (max_read and max_pages): 1 MiB. */
#define TFS_MAX_READ (1u << 20)

/* The extended attribute that tells whether a file is in the bucket:
 * getxattr() gives "clean" (what was closed is uploaded), "pending" (not
 * yet, or a writer has it open; "pending: <error>" while failed attempts
 * are retried) or "failed: <error>" (the upload gave up; retried at the
 * next mount).  ENODATA on the control file and on unlinked files. */
#define TFS_FS_XATTR_UPLOAD "user.tierfs.upload"

struct tfs_fs;
struct json_object;

struct tfs_wb;

/* Create the filesystem state over the given parts (none owned; `wb` NULL
 * makes the mount read-only; `be` is used for renames in the bucket).
 * Returns 0 or ENOMEM. */
int tfs_fs_create(const struct tfs_fs_config *cfg, struct tfs_meta *meta, struct tfs_layer *top,
		  struct tfs_prefetch *pf, struct tfs_wb *wb, struct tfs_backend *be,
		  const struct tfs_log *log, struct tfs_fs **out);
void tfs_fs_destroy(struct tfs_fs *fs);

struct tfs_follow;
struct tfs_manifest_scope;
/* Enable sampler-order prefetch and its control file (both borrowed; call
 * before the session starts). */
void tfs_fs_set_follow(struct tfs_fs *fs, struct tfs_follow *follow,
		       const struct tfs_manifest_scope *scope);

/* The session the operations run in, for the notifications some of them
 * send (before the session starts; without one none is sent). */
void tfs_fs_set_session(struct tfs_fs *fs, struct fuse_session *se);

/* Start the thread that keeps the inode table within cfg.max_inodes
 * (src/fs_trim.c), after tfs_fs_set_session(); no-op without a bound or a
 * session.  Returns 0 or pthread_create()'s error (logged: the mount goes
 * on without the bound). */
int tfs_fs_trim_start(struct tfs_fs *fs);
/* Stop it (before the session is destroyed); no-op when not started. */
void tfs_fs_trim_stop(struct tfs_fs *fs);

/* The state of the session's I/O hooks (session_io.h), which libfuse
 * passes only the session's userdata, this fs: set before the session
 * loop starts, read by the hooks (NULL: none).  Not locked: set once,
 * before any request. */
void tfs_fs_set_io(struct tfs_fs *fs, void *io);
void *tfs_fs_io(const struct tfs_fs *fs);

/* The operations table; pass the fs as userdata to fuse_session_new(). */
const struct fuse_lowlevel_ops *tfs_fs_ops(void);

/* Reload: new cache.metadata_ttl for the kernel's entry and attribute
 * timeouts (replies from now on) and directory page caching (opens from
 * now on).  Thread safe (an atomic). */
void tfs_fs_set_ttl(struct tfs_fs *fs, uint64_t ttl_ms);

struct tfs_stattab;

/* The rows of the "fuse" stats (statdef.h): one object per operation
 * (tfs_fs_op_stattab), then the layer's own members (tfs_fs_stattab). */
extern const struct tfs_stattab tfs_fs_op_stattab;
extern const struct tfs_stattab tfs_fs_stattab;

/* Add "fuse" counters (operations, errors, latency histograms, inodes) to
 * `out`. */
void tfs_fs_stats(struct tfs_fs *fs, struct json_object *out);

#endif
