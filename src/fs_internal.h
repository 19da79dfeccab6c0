/* fs_internal.h - state shared by the FUSE layer's files.  Not for use
 * outside src/fs*.c.
 *
 * Calls go one way: fs.c (the operations table, namespace and reads) ->
 * fs_write.c (modifications) -> fs_common.c (counters, replies, entry
 * filling); all of them call the file core (vfs/vfs.h).  Each section below lists what one file exports to the
 * files above it.
 *
 * Reply discipline: each handler replies exactly once, on every path; the
 * helpers below that take a fuse_req_t reply, the others do not.
 */
#ifndef TFS_FS_INTERNAL_H
#define TFS_FS_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "dbuf.h"
#include "fs.h"
#include "hist.h"
#include "vfs_state.h"

#define FOREVER_S (365.0 * 86400.0)

enum fs_op {
	OP_LOOKUP,
	OP_GETATTR,
	OP_READDIR,
	OP_OPEN,
	OP_READ,
	OP_STATFS,
	OP_CREATE,
	OP_WRITE,
	OP_SETATTR,
	OP_MKDIR,
	OP_UNLINK,
	OP_RMDIR,
	OP_RENAME,
	OP_FSYNC,
	OP_FLUSH,
	OP_READLINK,
	OP__COUNT
};

/* The FUSE adapter's state: the file core it serves (vfs/vfs_state.h,
 * whose fields the handlers not yet carved out still use), the session,
 * the counters and the inode trimmer. */
struct tfs_fs {
	struct tfs_vfs *v;
	const struct tfs_log *log;
	struct fuse_session *se; /* for notifications, or NULL (tfs_fs_set_session) */
	void *io;                /* the session's I/O hooks' state (tfs_fs_set_io) */
	atomic_uint_fast64_t ops[OP__COUNT], errs[OP__COUNT], read_bytes, write_bytes;
	struct tfs_hist lat[OP__COUNT]; /* handler entry to return (after the reply) */
	/* The inode trimmer (fs_trim.c): trim_stop under trim_lock. */
	pthread_t trim_thread;
	bool trim_started, trim_stop;
	pthread_mutex_t trim_lock;
	pthread_cond_t trim_cond;
};

static inline struct tfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ---- fs_common.c ---- */

/* The kernel's entry and attribute timeout in seconds (from the TTL). */
double tfs_fs_timeout(const struct tfs_fs *fs);

/* Count one `op` (and an error when err != 0).  Lock-free. */
void tfs_fs_count(struct tfs_fs *fs, enum fs_op op, int err);
/* Count and reply with an error (err 0: the success reply of operations
 * that return no data). */
void tfs_fs_reply_err(fuse_req_t req, enum fs_op op, int err);
/* The entry reply for inode `in` with attributes `a`; records which
 * version's attributes the kernel is sent (tfs_itable_set_attr_etag). */
void tfs_fs_fill_entry(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr *a,
		       struct fuse_entry_param *e);
/* ---- fs_write.c: the handlers that change things (EROFS without
 * write-back), and the opens that write ---- */

/* FUSE handlers, here and the static ones of fs.c alike, are named
 * tfs_fs_op_<operation> (the member of struct fuse_lowlevel_ops they
 * fill), so that none reads as a function on the fs state
 * (tfs_fs_create() builds the state; tfs_fs_op_create() is create(2)).
 * Each replies exactly once. */

void tfs_fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi);
void tfs_fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void tfs_fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void tfs_fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi);
void tfs_fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi);
void tfs_fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void tfs_fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void tfs_fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfs_fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void tfs_fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags);
void tfs_fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void tfs_fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
/* Extended attributes: none are stored (setxattr and removexattr give
 * ENOTSUP, listxattr an empty list).  getxattr answers one virtual name,
 * TFS_FS_XATTR_UPLOAD (fs.h), and ENODATA for every other. */
void tfs_fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags);
void tfs_fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void tfs_fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void tfs_fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
/* open() with write flags (O_WRONLY/O_RDWR/O_TRUNC): stage the file.
 * Replies (open or error). */
void tfs_fs_open_write(fuse_req_t req, struct tfs_inode *in, const char *path,
		       struct fuse_file_info *fi);
/* The file handle of a request on node `ino` carrying `fi` (NULL: none):
 * the handle this daemon entered under fi->fh.  An fh this daemon does
 * not hold is never dereferenced: on a daemon that is not resumed it is
 * EBADF; on a resumed one it is an earlier daemon's, and with
 * `flags_known` (read, write and release carry the open flags in
 * fi->flags) a handle is rebuilt as open would make it for those flags (a
 * writer reopens the file's staged copy, which the write-back journal
 * kept, and never truncates; a reader pins the current version), entered
 * under the old fh value until its RELEASE.  Without `flags_known`
 * (flush, fsync, getattr, setattr) nothing is rebuilt: NULL with *err 0,
 * and the caller goes on without a handle; so it does for a directory's
 * handle (setattr through an open directory).  Returns the handle, or NULL
 * with *err: 0 (see above), EBADF, ESTALE (no such node, or its name is
 * gone: an unlinked file's staged copy did not survive the daemon), EIO
 * (the control file: what was written to it is lost), or the open's
 * error. */
struct tfs_vfs_handle *tfs_fs_handle(struct tfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
				     bool flags_known, int *err);
/* Open the control file (open(), or create() when `e` is its entry): a
 * handle collecting what is written (ENOTSUP without sampler-order
 * prefetch).  Opening it for writing (or with O_TRUNC) is allowed to the
 * mount's uid and root only, checked here whatever the kernel checked
 * (without default_permissions it checks nothing): EACCES for anyone else.
 * A handle opened for writing records the process of the opener
 * (tfs_follow_owner_of(), which reads /proc): the order it sets is that
 * process's.  Replies. */
void tfs_fs_open_order(fuse_req_t req, struct tfs_inode *in, struct fuse_file_info *fi,
		       const struct fuse_entry_param *e);

#endif
