/* fs_internal.h - state shared by the FUSE layer's files.  Not for use
 * outside src/fs*.c.
 *
 * Calls go one way: fs.c (the operations table, namespace and reads) ->
 * fs_write.c (modifications) -> fs_common.c (counters, replies, stat
 * filling, attributes, inode paths, file handles) -> fs_order.c (the
 * control file).  Each section below lists what one file exports to the
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
#include "follow.h"
#include "fs.h"
#include "hist.h"
#include "writeback.h"

#define FOREVER_S (365.0 * 86400.0)
/* The largest file: S3's largest object (5 TiB).  A write or truncate
 * beyond it is EFBIG. */
#define TFS_FS_MAX_FILE (5ull << 40)

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

/* File handles.  fi->fh is never a pointer: it is a value this daemon
 * looks up in fs->fhs, (cfg.generation << 32) | a counter (never 0), so a
 * value given out by an earlier daemon of the mount (another generation)
 * is never taken for one of ours, and a value that is not in the table is
 * never dereferenced.  On a resumed daemon (cfg.resumed) a request with
 * an unknown fh gets a handle rebuilt from its node and open flags
 * (tfs_fs_handle()), entered under the old value until its RELEASE.
 * Both kinds of handle (struct fh, struct dirh in fs.c) begin with this
 * entry. */
#define TFS_FS_FH_BUCKETS 4096
struct fh_ent {
	uint64_t id;  /* the fh value the kernel holds */
	bool dir;     /* a struct dirh (opendir), else a struct fh */
	bool rebuilt; /* made for an fh of an earlier daemon */
	struct fh_ent *next;
};

/* Names busy at once: two per rename in flight (16 FUSE threads). */
#define TFS_FS_NS_BUSY 32

struct tfs_fs {
	struct tfs_fs_config cfg;
	struct tfs_itable *itable;
	struct tfs_nodes *nodes; /* the persisted node table, or NULL (no mountpoint) */
	struct tfs_meta *meta;
	struct tfs_layer *top;
	struct tfs_prefetch *pf;
	struct tfs_wb *wb;                      /* NULL: read-only */
	struct tfs_backend *be;                 /* for renames of clean objects */
	struct tfs_follow *follow;              /* sampler-order prefetch, or NULL */
	const struct tfs_manifest_scope *scope; /* for the control file */
	const struct tfs_log *log;
	struct fuse_session *se; /* for notifications, or NULL (tfs_fs_set_session) */
	void *io;                /* the session's I/O hooks' state (tfs_fs_set_io) */
	uint64_t block_size;
	_Atomic uint64_t ttl_ms;   /* cache.metadata_ttl, changed by tfs_fs_set_ttl() */
	struct tfs_attr root_attr; /* the root, and "." / ".." in listings */
	pthread_mutex_t ns_lock;   /* serializes namespace changes (create, rename, ...) */
	/* Names a rename of a clean object is copying in the bucket with
	 * ns_lock released (fs_write.c, ns_wait()); ns_lock guards them. */
	const char *ns_busy[TFS_FS_NS_BUSY];
	pthread_cond_t ns_cond;                /* broadcast when names leave ns_busy */
	pthread_mutex_t fh_lock;               /* fhs, fh_count, fh_next */
	struct fh_ent *fhs[TFS_FS_FH_BUCKETS]; /* every handle given to the kernel
						* and not released, by fh value */
	uint64_t fh_count;
	uint32_t fh_next; /* low half of the next fh value (cfg.generation is the high) */
	atomic_uint_fast64_t ops[OP__COUNT], errs[OP__COUNT], read_bytes, write_bytes;
	struct tfs_hist lat[OP__COUNT]; /* handler entry to return (after the reply) */
	/* The inode trimmer (fs_trim.c): trim_stop under trim_lock. */
	pthread_t trim_thread;
	bool trim_started, trim_stop;
	pthread_mutex_t trim_lock;
	pthread_cond_t trim_cond;
};

/* A handle of the control file TFS_FOLLOW_FILE: what was written, and
 * its commit.  `fh.lock` protects `busy`, `flush`, `set` and `done`. */
struct fh_order {
	char *buf;                     /* what was written: len bytes, cap */
	size_t len, cap;               /* allocated, counted to uid (tfs_follow_charge()) */
	uid_t uid;                     /* the opener's */
	struct tfs_follow_owner owner; /* the process that opened it */
	bool writer;                   /* opened for writing */
	bool set;                      /* a commit set its order */
	size_t done;                   /* bytes of buf the last commit set */
	bool busy;                     /* handed to the builder: no write until done */
	fuse_req_t flush;              /* the close waiting for the builder */
	struct tfs_follow_request req; /* to the builder */
	struct tfs_fs *fs;
};

/* An open file.  Clean files read through the cache stack (obj); dirty
 * ones (wf non-NULL) read and write their staged copy. */
struct fh {
	struct fh_ent ent; /* first: fs->fhs holds &ent */
	struct tfs_obj obj;
	char *key;           /* the path at open, or after the last version move */
	char **retired_keys; /* earlier keys (reads in flight may still use them) */
	size_t n_retired;
	struct tfs_wb_file *wf;        /* staged copy, or NULL */
	struct fh_order *order;        /* the control file TFS_FOLLOW_FILE (fs_order.c) */
	bool writer;                   /* opened for writing (holds a writer count) */
	pthread_mutex_t lock;          /* protects ra and order's state */
	struct tfs_prefetch_stream ra; /* read-ahead (cache/prefetch.h) */
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
/* The permission bits of `mode` the mount keeps: 07777, without S_ISUID
 * and S_ISGID unless cfg.keep_setid.  The sticky bit is always kept.  Every
 * mode shown (tfs_fs_fill_stat) or written (chmod, create, mkdir) passes
 * through here. */
mode_t tfs_fs_perm(const struct tfs_fs *fs, mode_t mode);
/* Inode numbers shown for attributes without their own (a->ino 0: the
 * control file, a version whose name is gone) are the FUSE node id with
 * this bit set, apart from the metadata cache's numbers. */
#define TFS_FS_NODEID_INO (1ull << 63)
/* The S_IFMT bits `a` shows: S_IFDIR, S_IFREG, or a->fmt.  Pure. */
mode_t tfs_fs_type_bits(const struct tfs_attr *a);
/* The struct stat of attributes `a`: defaults from cfg for what the object
 * does not say (0777 for a symlink), permission bits through
 * tfs_fs_perm(), st_ino a->ino (else `ino` | TFS_FS_NODEID_INO), times
 * unknown (0) shown as mtime. */
void tfs_fs_fill_stat(const struct tfs_fs *fs, uint64_t ino, const struct tfs_attr *a,
		      struct stat *st);
/* The entry reply for inode `in` with attributes `a`; records which
 * version's attributes the kernel is sent (tfs_itable_set_attr_etag). */
void tfs_fs_fill_entry(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr *a,
		       struct fuse_entry_param *e);
/* Current attributes of `path`: the root, the control file (when
 * sampler-order prefetch is on), dirty state, then the metadata cache
 * (revalidated after the TTL; drops cached data of a changed object).
 * Returns 0 or an errno (ENOENT, ESTALE, EIO...). */
int tfs_fs_attr(struct tfs_fs *fs, const char *path, struct tfs_attr *a);
/* The path of inode `ino` into buf (PATH_MAX).  Returns 0, ESTALE (no such
 * inode) or ENAMETOOLONG; *in (may be NULL) gets the inode.  A detached
 * inode's path starts with TFS_ITABLE_DETACHED (inode.h). */
int tfs_fs_ino_path(struct tfs_fs *fs, fuse_ino_t ino, char *buf, struct tfs_inode **in);
/* Allocate and free file handles.  The fs keeps them in a table by fh
 * value (fs->fhs, under fs->fh_lock): the kernel sends no RELEASE for
 * files still open when the connection ends (the last close after a lazy
 * unmount, or the daemon stopped), and tfs_fs_destroy() releases those.
 * tfs_fs_fh_new() enters the handle under a new fh value (h->ent.id, what
 * fi->fh gets); it returns NULL when out of memory.  tfs_fs_fh_free()
 * takes it out of the table and releases the handle's staged copy
 * (committing a writer's file only if h->writer: a writer's last close)
 * and its control-file buffer. */
struct fh *tfs_fs_fh_new(struct tfs_fs *fs, const char *key);
void tfs_fs_fh_free(struct tfs_fs *fs, struct fh *h);
/* Enter `e` (not in the table) under a new fh value, set in e->id.
 * Cannot fail. */
void tfs_fs_fh_enter(struct tfs_fs *fs, struct fh_ent *e);
/* Move `e` (in the table) to fh value `id` (an earlier daemon's), unless
 * another handle holds `id` already: then `e` stays where it was and that
 * handle is returned (the caller frees its own); else NULL. */
struct fh_ent *tfs_fs_fh_rekey(struct tfs_fs *fs, struct fh_ent *e, uint64_t id);
/* The handle entered under `id`, or NULL.  The kernel sends no RELEASE
 * while a request on the handle is in flight, so it stays valid for the
 * request. */
struct fh_ent *tfs_fs_fh_find(struct tfs_fs *fs, uint64_t id);
/* Take `e` out of the table (a missing one is fine). */
void tfs_fs_fh_remove(struct tfs_fs *fs, struct fh_ent *e);
/* Any one handle in the table, or NULL (tfs_fs_destroy() empties it). */
struct fh_ent *tfs_fs_fh_any(struct tfs_fs *fs);

/* ---- fs_order.c: the control file TFS_FOLLOW_FILE (vfs/follow.h) ---- */

/* Whether `path` is the control file's (at the root).  It exists only
 * while fs->follow is set (tfs_fs_set_follow()): callers check both. */
bool tfs_fs_is_order_file(const char *path);
/* Its attributes: a file of mode 0644 owned by the mount's uid (cfg.uid),
 * empty, with the mount's time. */
void tfs_fs_order_attr(const struct tfs_fs *fs, struct tfs_attr *a);
/* Make `h` (a new handle) a control-file handle of the uid and process
 * of `req`, opened for writing when `writer`.  Returns 0 or ENOMEM. */
int tfs_fs_order_init(struct tfs_fs *fs, struct fh *h, fuse_req_t req, bool writer);
/* Append `size` bytes written to control-file handle `h`; the memory it
 * allocates (in steps of 4 KiB) is counted against the order memory of
 * the opener's uid (vfs/follow.h) until the handle is freed.  Returns 0,
 * EFBIG (beyond prefetch.order_max or the uid's share; nothing is kept),
 * EBUSY (its close is being committed) or ENOMEM. */
int tfs_fs_order_add(struct tfs_fs *fs, struct fh *h, const char *buf, size_t size);
/* A close (flush `req`) of handle `h`: hand what it collected to the
 * order builder (tfs_follow_submit()), which sets the order of the
 * process that opened it (nothing collected removes that process's
 * order) and then calls `done` (in its thread) with 0, EINVAL (not one
 * valid entry in a non-empty file), EFBIG or ENOMEM; `done` calls
 * tfs_fs_order_committed() and replies.  Only a handle opened for
 * writing commits, and only when it has bytes the last commit did not
 * see, or has not committed yet, and is not committing now (a close of a
 * duplicate fd commits nothing new).  Returns EINPROGRESS (`done` will
 * reply to `req`), 0 (nothing to commit: reply now) or ESHUTDOWN. */
int tfs_fs_commit_order(struct tfs_fs *fs, struct fh *h, fuse_req_t req,
			void (*done)(struct tfs_follow_request *r, int rc));
/* The commit of `h` (r->ctx of `done`) ended with `rc`: writes are taken
 * again, and with rc 0 the bytes it set are remembered.  Returns the
 * flush to reply to, the last use of `h` before that reply (once
 * replied, the handle may be released). */
fuse_req_t tfs_fs_order_committed(struct fh *h, int rc);
/* Free handle `h`'s buffer (h->order, non-NULL, not committing) and give
 * its memory back; h->order becomes NULL.  Called by tfs_fs_fh_free(). */
void tfs_fs_order_free(struct tfs_fs *fs, struct fh *h);

/* ---- fs_write.c: the handlers that change things (EROFS without
 * write-back), and the opens that write ---- */

/* FUSE handlers, named tfs_fs_op_<operation> (as in struct
 * fuse_lowlevel_ops) so that none reads as a function on the fs state
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
struct fh *tfs_fs_handle(struct tfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
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
