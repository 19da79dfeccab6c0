/* fs_write.c - FUSE handlers that change the namespace or file data, and
 * the opens that write (a file, or the control file of vfs/order_file.c).
 *
 * Called by fs.c (its operations table); calls fs_common.c and vfs/.
 * Data goes to the write-back layer's staged copies; namespace changes are
 * journalled there and become visible at once (LOCAL metadata entries).
 * Namespace changes are serialized by fs->v->ns_lock, so checks such as
 * "the target does not exist" or "the directory is empty" hold until the
 * change is journalled.  The one change that waits for the bucket, the
 * rename of a clean file (a server-side copy and a delete), runs with
 * ns_lock released and its two names marked busy: a change of either
 * name, of an ancestor or of a descendant waits for it (ns_wait()), a
 * change elsewhere does not.  No lock is held across a reply.
 *
 * Symlinks are objects whose body is the target, and FIFOs, sockets and
 * device nodes are empty objects, each with its kind in the type bits of
 * x-amz-meta-mode (and a device's number in x-amz-meta-rdev), as s3fs
 * stores them; they are staged, journalled and uploaded like any file.
 * The kernel opens FIFOs, sockets and devices itself (never through the
 * daemon), and only root may make a device node (the kernel checks
 * CAP_MKNOD; an untrusted mount is nodev anyway).
 *
 * Not supported: hard links (EPERM), extended attributes (ENOTSUP), rename flags other than RENAME_NOREPLACE
 * (RENAME_EXCHANGE, RENAME_WHITEOUT: EINVAL), and renames of
 * directories holding more than RENAME_DIR_MAX entries (EXDEV, so mv(1)
 * falls back to copying).  A name the backend cannot store
 * (tfs_backend_check_key(): too long for S3's 1,024-byte keys, or reserved
 * by the local backend) is refused at create, mknod, mkdir and rename
 * with ENAMETOOLONG or EINVAL, so its upload never fails for it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs_internal.h"
#include "path.h"

#define RENAME_DIR_MAX 1000 /* entries (files and directories, recursively) */

/* Reply EROFS and return false when the mount takes no writes. */
static bool writable(fuse_req_t req, enum fs_op op)
{
	if (fs_of(req)->v->wb != NULL)
		return true;
	tfs_fs_reply_err(req, op, EROFS);
	return false;
}

/* "<parent's path>/<name>" for a parent that must be a directory. */
static int child_path(struct tfs_fs *fs, fuse_ino_t parent, const char *name, char path[PATH_MAX])
{
	char dir[PATH_MAX];
	struct tfs_inode *p;
	int rc = tfs_vfs_ino_path(fs->v, parent, dir, &p);
	if (rc)
		return rc;
	if (p->type != TFS_FT_DIR)
		return ENOTDIR;
	if (strlen(name) > NAME_MAX)
		return ENAMETOOLONG;
	return tfs_meta_join(dir, name, path, PATH_MAX);
}

/* Whether `a` and `b` are the same name or one is an ancestor of the
 * other ("" is the root, the ancestor of every name). */
static bool ns_overlap(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > lb) {
		const char *t = a;
		a = b;
		b = t;
		size_t tl = la;
		la = lb;
		lb = tl;
	}
	if (la == 0)
		return true;
	return strncmp(a, b, la) == 0 && (b[la] == '\0' || b[la] == '/');
}

static bool ns_is_busy(const struct tfs_fs *fs, const char *path)
{
	for (size_t i = 0; i < TFS_VFS_NS_BUSY; i++)
		if (fs->v->ns_busy[i] && ns_overlap(fs->v->ns_busy[i], path))
			return true;
	return false;
}

/* ns_lock held: wait until no rename copying a clean object outside
 * ns_lock (rename_clean()) holds `a` or `b` (NULL: none), one of their
 * ancestors or descendants.  Every namespace change calls it right after
 * taking ns_lock, so its checks see the rename either not begun or done. */
static void ns_wait(struct tfs_fs *fs, const char *a, const char *b)
{
	while (ns_is_busy(fs, a) || (b && ns_is_busy(fs, b)))
		pthread_cond_wait(&fs->v->ns_cond, &fs->v->ns_lock);
}

/* ns_lock held: mark `from` and `to` busy (the pointers are kept, not
 * copied: the caller keeps both alive until ns_unmark()).  Returns false,
 * marking nothing, when every slot is taken. */
static bool ns_mark(struct tfs_fs *fs, const char *from, const char *to)
{
	size_t slot[2], n = 0;
	for (size_t i = 0; i < TFS_VFS_NS_BUSY && n < 2; i++)
		if (fs->v->ns_busy[i] == NULL)
			slot[n++] = i;
	if (n < 2)
		return false;
	fs->v->ns_busy[slot[0]] = from;
	fs->v->ns_busy[slot[1]] = to;
	return true;
}

/* ns_lock held: undo ns_mark() and wake the waiters of ns_wait(). */
static void ns_unmark(struct tfs_fs *fs, const char *from, const char *to)
{
	for (size_t i = 0; i < TFS_VFS_NS_BUSY; i++)
		if (fs->v->ns_busy[i] == from || fs->v->ns_busy[i] == to)
			fs->v->ns_busy[i] = NULL;
	pthread_cond_broadcast(&fs->v->ns_cond);
}

/* Whether the backend can store `path` (as a directory marker "path/"
 * when `dir`), so that a name it would refuse is refused here, before
 * anything is staged, rather than by an upload that retries forever.
 * Returns 0, ENAMETOOLONG or EINVAL (tfs_backend_check_key()). */
static int name_ok(struct tfs_fs *fs, const char *path, bool dir)
{
	char key[PATH_MAX + 1];
	if (fs->v->be == NULL)
		return 0;
	if (!dir)
		return tfs_backend_check_key(fs->v->be, path);
	int n = snprintf(key, sizeof(key), "%s/", path);
	if (n < 0 || (size_t)n >= sizeof(key))
		return ENAMETOOLONG;
	return tfs_backend_check_key(fs->v->be, key);
}

static struct tfs_wb_attr new_attr(fuse_req_t req, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct tfs_wb_attr a = {
		.mode = (uint32_t)tfs_vfs_perm(fs_of(req)->v, mode & ~ctx->umask),
		.uid = ctx->uid,
		.gid = ctx->gid,
		.mtime = now.tv_sec,
		.atime = now.tv_sec,
		.ctime = now.tv_sec,
		.mtime_ns = (uint32_t)now.tv_nsec,
		.atime_ns = (uint32_t)now.tv_nsec,
		.ctime_ns = (uint32_t)now.tv_nsec,
	};
	return a;
}

/* An entry of the directory holding `path` was made or removed now: its
 * mtime and ctime move (in the cache, tfs_meta_touch_dir()).  Best
 * effort: logged. */
static void touch_parent(struct tfs_fs *fs, const char *path)
{
	char dir[PATH_MAX];
	const char *name;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (tfs_path_split(path, dir, sizeof(dir), &name) != 0)
		return;
	int rc = tfs_meta_touch_dir(fs->v->meta, dir, (int64_t)now.tv_sec, (uint32_t)now.tv_nsec);
	if (rc)
		tfs_warn(fs->log, "'%s': cannot update its times: %s", dir, strerror(rc));
}

/* The group a new entry in directory `parent` gets: the directory's when
 * it is set-group-ID (as the kernel does for local filesystems), else the
 * caller's.  `*a` is the new entry's attributes. */
static void inherit_gid(struct tfs_fs *fs, fuse_ino_t parent, struct tfs_wb_attr *a)
{
	char dir[PATH_MAX];
	struct tfs_attr pa;
	if (tfs_vfs_ino_path(fs->v, parent, dir, NULL) == 0 && tfs_vfs_attr(fs->v, dir, &pa) == 0 &&
	    pa.mode != TFS_META_UNSET && (pa.mode & S_ISGID) && pa.gid != TFS_META_UNSET)
		a->gid = pa.gid;
}

static void reply_entry(fuse_req_t req, enum fs_op op, const char *path, const struct tfs_attr *a)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_inode *in;
	int rc = tfs_itable_lookup(fs->v->itable, path, a->type, a->fmt, &in);
	if (rc) {
		tfs_fs_reply_err(req, op, rc);
		return;
	}
	struct fuse_entry_param e;
	tfs_fs_fill_entry(fs, in, a, &e);
	tfs_fs_count(fs, op, 0);
	fuse_reply_entry(req, &e);
}

/* Hand `h` to the kernel as an open file; frees it if the open was
 * interrupted. */
static void reply_open(fuse_req_t req, enum fs_op op, struct tfs_vfs_handle *h,
		       struct fuse_file_info *fi, const struct fuse_entry_param *e)
{
	struct tfs_fs *fs = fs_of(req);
	fi->fh = h->ent.id;
	fi->keep_cache = 0;
	fi->noflush = 0;
	/* A write-only handle bypasses the kernel's page cache: its writes
	 * reach the daemon straight from the writer's pages, one copy fewer
	 * than copying them into the page cache first (which nobody reads
	 * back: the next open drops the pages of a changed file anyway).  A
	 * handle that can read keeps the page cache, so mmap works on it. */
	fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
	tfs_fs_count(fs, op, 0);
	int rc = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
	if (rc == -ENOENT)
		tfs_vfs_handle_free(fs->v, h);
}

/* ---- files ---- */

/* Whether the caller of `req` may write the control file: the mount's uid
 * or root. */
static bool order_writer_ok(struct tfs_fs *fs, fuse_req_t req)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	return uid == 0 || uid == fs->v->cfg.uid;
}

void tfs_fs_open_order(fuse_req_t req, struct tfs_inode *in, struct fuse_file_info *fi,
		       const struct fuse_entry_param *e)
{
	struct tfs_fs *fs = fs_of(req);
	(void)in;
	if (((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) &&
	    !order_writer_ok(fs, req)) {
		tfs_fs_reply_err(req, e ? OP_CREATE : OP_OPEN, EACCES);
		return;
	}
	struct tfs_vfs_handle *h = fs->v->follow ? tfs_vfs_handle_new(fs->v, TFS_FOLLOW_FILE)
						 : NULL;
	if (h == NULL ||
	    tfs_vfs_order_init(fs->v, h, fuse_req_ctx(req)->uid, fuse_req_ctx(req)->pid,
			       (fi->flags & O_ACCMODE) != O_RDONLY)) {
		if (h)
			tfs_vfs_handle_free(fs->v, h);
		tfs_fs_reply_err(req, OP_OPEN, fs->v->follow ? ENOMEM : ENOTSUP);
		return;
	}
	fi->fh = h->ent.id;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fi->noflush = 0;
	tfs_fs_count(fs, OP_OPEN, 0);
	int rc = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
	if (rc == -ENOENT)
		tfs_vfs_handle_free(fs->v, h);
}

/* A handle of `path` (inode `in`) open for writing: its staged copy,
 * truncated with `trunc`.  Returns 0 and *out, or an errno. */
static int writer_handle(struct tfs_fs *fs, struct tfs_inode *in, const char *path, bool trunc,
			 struct tfs_vfs_handle **out)
{
	struct tfs_attr a;
	struct tfs_vfs_handle *h = NULL;
	int rc = tfs_vfs_attr(fs->v, path, &a);
	if (rc == 0 && a.type != in->type)
		rc = ESTALE;
	if (rc == 0 && (h = tfs_vfs_handle_new(fs->v, path)) == NULL)
		rc = ENOMEM;
	if (rc == 0)
		rc = tfs_vfs_stage(fs->v, path, &a, trunc, &h->wf);
	if (rc == 0)
		tfs_vfs_handle_stage(h, h->wf);
	if (rc) {
		if (h)
			tfs_vfs_handle_free(fs->v, h);
		return rc;
	}
	h->writer = true;
	(void)tfs_itable_swap_kernel_etag(fs->v->itable, in, "");
	*out = h;
	return 0;
}

/* Rebuild the handle an earlier daemon gave out as `id`, for node `ino`
 * opened with `flags`.  Returns 0 and *out (entered under `id`), or an
 * errno. */
static int rebuild_handle(struct tfs_fs *fs, fuse_ino_t ino, int flags, uint64_t id,
			  struct tfs_vfs_handle **out)
{
	struct tfs_inode *in;
	char path[PATH_MAX];
	struct tfs_vfs_handle *h = NULL;
	int rc = tfs_vfs_ino_path(fs->v, ino, path, &in);
	if (rc == 0 && (in->type == TFS_FT_DIR || tfs_itable_path_is_detached(path)))
		rc = ESTALE;
	else if (rc == 0 && fs->v->follow && tfs_vfs_is_order_file(path))
		rc = EIO;
	bool write = (flags & O_ACCMODE) != O_RDONLY;
	if (rc == 0 && write && fs->v->wb == NULL)
		rc = EROFS;
	if (rc == 0)
		rc = write ? writer_handle(fs, in, path, false, &h)
			   : tfs_vfs_open_read(fs->v, in, path, &h);
	if (rc) {
		tfs_warn(fs->log,
			 "node %" PRIu64 ": cannot rebuild file handle %#" PRIx64 " of an earlier "
			 "daemon: %s",
			 (uint64_t)ino, id, strerror(rc));
		return rc;
	}
	h->ent.rebuilt = true;
	struct tfs_vfs_ent *other = tfs_vfs_fh_rekey(fs->v, &h->ent, id);
	if (other) {
		/* Another request rebuilt it meanwhile: use that one (the
		 * release of this one's writer count commits nothing, as the
		 * other still holds one). */
		tfs_vfs_handle_free(fs->v, h);
		if (other->dir)
			return EBADF;
		h = (struct tfs_vfs_handle *)other;
	} else {
		tfs_info(fs->log,
			 "'%s': file handle %#" PRIx64 " of an earlier daemon rebuilt (%s)", path,
			 id, write ? "writer" : "reader");
	}
	*out = h;
	return 0;
}

struct tfs_vfs_handle *tfs_fs_handle(struct tfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi,
				     bool flags_known, int *err)
{
	*err = 0;
	if (fi == NULL)
		return NULL;
	struct tfs_vfs_ent *e = tfs_vfs_fh_find(fs->v, fi->fh);
	if (e && !e->dir)
		return (struct tfs_vfs_handle *)e;
	if (e && !flags_known)
		return NULL; /* futimens() on a directory: no file handle */
	if (e || !fs->v->cfg.resumed || (uint32_t)(fi->fh >> 32) == fs->v->cfg.generation) {
		*err = EBADF; /* never ours, or ours and released */
		return NULL;
	}
	if (!flags_known)
		return NULL;
	struct tfs_vfs_handle *h;
	*err = rebuild_handle(fs, ino, fi->flags, fi->fh, &h);
	return *err ? NULL : h;
}

void tfs_fs_open_write(fuse_req_t req, struct tfs_inode *in, const char *path,
		       struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_vfs_handle *h;
	int rc = writer_handle(fs, in, path, (fi->flags & O_TRUNC) != 0, &h);
	if (rc) {
		tfs_fs_reply_err(req, OP_OPEN, rc);
		return;
	}
	reply_open(req, OP_OPEN, h, fi, NULL);
}

void tfs_fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	char path[PATH_MAX];
	struct tfs_attr a;
	struct tfs_vfs_handle *h = NULL;
	int rc = child_path(fs, parent, name, path);
	if (rc == 0 && fs->v->follow && tfs_vfs_is_order_file(path)) {
		struct tfs_inode *oin;
		tfs_vfs_order_attr(fs->v, &a);
		rc = tfs_itable_lookup(fs->v->itable, path, TFS_FT_FILE, 0, &oin);
		if (rc == 0) {
			struct fuse_entry_param e;
			tfs_fs_fill_entry(fs, oin, &a, &e);
			tfs_fs_open_order(req, oin, fi, &e);
			return;
		}
	}
	if (rc) {
		tfs_fs_reply_err(req, OP_CREATE, rc);
		return;
	}
	if (!writable(req, OP_CREATE))
		return;
	rc = name_ok(fs, path, false);
	if (rc) {
		tfs_fs_reply_err(req, OP_CREATE, rc);
		return;
	}
	pthread_mutex_lock(&fs->v->ns_lock);
	ns_wait(fs, path, NULL);
	int ex = tfs_vfs_attr(fs->v, path, &a);
	if (ex == 0 && (fi->flags & O_EXCL))
		rc = EEXIST;
	else if (ex == 0 && a.type == TFS_FT_DIR)
		rc = EISDIR;
	else if (ex != 0 && ex != ENOENT)
		rc = ex;
	if (rc == 0 && (h = tfs_vfs_handle_new(fs->v, path)) == NULL)
		rc = ENOMEM;
	if (rc == 0) {
		if (ex == 0) {
			rc = tfs_vfs_stage(fs->v, path, &a, (fi->flags & O_TRUNC) != 0, &h->wf);
		} else {
			struct tfs_wb_attr na = new_attr(req, mode);
			inherit_gid(fs, parent, &na);
			rc = tfs_wb_create_file(fs->v->wb, path, &na, &h->wf);
			if (rc == 0)
				touch_parent(fs, path);
		}
	}
	if (rc == 0)
		tfs_vfs_handle_stage(h, h->wf);
	if (rc == 0 && !tfs_wb_attr(fs->v->wb, path, &a))
		rc = EIO;
	pthread_mutex_unlock(&fs->v->ns_lock);
	struct tfs_inode *in = NULL;
	if (rc == 0)
		rc = tfs_itable_lookup(fs->v->itable, path, TFS_FT_FILE, 0, &in);
	if (rc) {
		if (h)
			tfs_vfs_handle_free(fs->v, h);
		tfs_fs_reply_err(req, OP_CREATE, rc);
		return;
	}
	h->writer = true;
	(void)tfs_itable_swap_kernel_etag(fs->v->itable, in, "");
	struct fuse_entry_param e;
	tfs_fs_fill_entry(fs, in, &a, &e);
	reply_open(req, OP_CREATE, h, fi, &e);
}

/* Make `name` in `parent` a new file of attributes `na` holding `body`
 * (`len` bytes: a symlink's target), committed at once, and reply its
 * entry. */
static void make_file(fuse_req_t req, fuse_ino_t parent, const char *name, struct tfs_wb_attr *na,
		      const char *body, size_t len)
{
	struct tfs_fs *fs = fs_of(req);
	char path[PATH_MAX];
	struct tfs_attr a;
	if (!writable(req, OP_CREATE))
		return;
	int rc = child_path(fs, parent, name, path);
	struct tfs_wb_file *wf = NULL;
	if (rc == 0)
		rc = name_ok(fs, path, false);
	if (rc == 0) {
		inherit_gid(fs, parent, na);
		pthread_mutex_lock(&fs->v->ns_lock);
		ns_wait(fs, path, NULL);
		int ex = tfs_vfs_attr(fs->v, path, &a);
		rc = ex == 0 ? EEXIST : ex == ENOENT ? 0 : ex;
		if (rc == 0)
			rc = tfs_wb_create_file(fs->v->wb, path, na, &wf);
		if (rc == 0 && len)
			rc = tfs_wb_write(fs->v->wb, wf, body, len, 0);
		if (rc == 0 && !tfs_wb_attr(fs->v->wb, path, &a))
			rc = EIO;
		pthread_mutex_unlock(&fs->v->ns_lock);
		if (wf) {
			int crc = tfs_wb_release(fs->v->wb, wf, true);
			if (rc == 0)
				rc = crc;
		}
		if (rc && wf)
			(void)tfs_wb_remove(fs->v->wb, path, false);
	}
	if (rc == 0) {
		a.ino = tfs_meta_ino(fs->v->meta, path);
		touch_parent(fs, path);
	}
	if (rc) {
		tfs_fs_reply_err(req, OP_CREATE, rc);
		return;
	}
	reply_entry(req, OP_CREATE, path, &a);
}

void tfs_fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct tfs_wb_attr na = new_attr(req, mode);
	switch (mode & S_IFMT) {
	case S_IFREG:
	case 0:
		break;
	case S_IFCHR:
	case S_IFBLK:
		na.rdev = (uint64_t)rdev;
		/* fall through */
	case S_IFIFO:
	case S_IFSOCK:
		na.mode |= (uint32_t)(mode & S_IFMT);
		break;
	default:
		tfs_fs_reply_err(req, OP_CREATE, EINVAL);
		return;
	}
	make_file(req, parent, name, &na, NULL, 0);
}

void tfs_fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	int rc;
	struct tfs_vfs_handle *h = tfs_fs_handle(fs, ino, fi, true, &rc);
	if (h)
		rc = tfs_vfs_write(fs->v, h, buf, size, (uint64_t)off, fuse_req_ctx(req)->uid);
	if (h == NULL || rc) {
		tfs_fs_reply_err(req, OP_WRITE, rc);
		return;
	}
	if (h->kind != TFS_VFS_ORDER)
		atomic_fetch_add(&fs->write_bytes, size);
	tfs_fs_count(fs, OP_WRITE, 0);
	fuse_reply_write(req, size);
}

/* The order builder's thread: the order of a control-file close is set
 * or refused. */
static void order_flushed(struct tfs_follow_request *r, int rc)
{
	struct tfs_vfs_handle *h = r->ctx;
	const struct tfs_log *log = h->order->v->log;
	fuse_req_t req = tfs_vfs_order_committed(h, rc);
	if (rc)
		tfs_err(log, "close '%s': %s", TFS_FOLLOW_FILE, strerror(rc));
	tfs_fs_reply_err(req, OP_FLUSH, rc);
}

void tfs_fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	int rc;
	struct tfs_vfs_handle *h = tfs_fs_handle(fs, ino, fi, false, &rc);
	if (h == NULL && rc == 0)
		rc = tfs_vfs_commit_node(fs->v, ino, false);
	else if (h && (rc = tfs_vfs_flush(fs->v, h, req, order_flushed)) == EINPROGRESS)
		return; /* the order builder replies */
	tfs_fs_reply_err(req, OP_FLUSH, rc);
}

void tfs_fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	struct tfs_fs *fs = fs_of(req);
	int rc;
	struct tfs_vfs_handle *h = tfs_fs_handle(fs, ino, fi, false, &rc);
	if (h == NULL && rc == 0)
		rc = tfs_vfs_commit_node(fs->v, ino, true);
	else if (h)
		rc = tfs_vfs_fsync(fs->v, h);
	tfs_fs_reply_err(req, OP_FSYNC, rc);
}

/* The TFS_WB_SET_* mask and values of a setattr's `to_set` (FUSE_SET_ATTR_*)
 * from `attr`, into *na.  Any change also sets ctime to now; a truncate
 * alone changes the times through the write-back layer.  Pure but for the
 * clock. */
static unsigned setattr_mask(const struct tfs_fs *fs, const struct stat *attr, int to_set,
			     struct tfs_wb_attr *na)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	unsigned mask = 0;
	if (to_set & FUSE_SET_ATTR_MODE) {
		mask |= TFS_WB_SET_MODE;
		na->mode = (uint32_t)tfs_vfs_perm(fs->v, attr->st_mode);
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		mask |= TFS_WB_SET_UID;
		na->uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		mask |= TFS_WB_SET_GID;
		na->gid = attr->st_gid;
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		const struct timespec *t = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? &now
									      : &attr->st_mtim;
		mask |= TFS_WB_SET_MTIME;
		na->mtime = (int64_t)t->tv_sec;
		na->mtime_ns = (uint32_t)t->tv_nsec;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		const struct timespec *t = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? &now
									      : &attr->st_atim;
		mask |= TFS_WB_SET_ATIME;
		na->atime = (int64_t)t->tv_sec;
		na->atime_ns = (uint32_t)t->tv_nsec;
	}
	if (mask || (to_set & FUSE_SET_ATTR_CTIME)) {
		const struct timespec *t = (to_set & FUSE_SET_ATTR_CTIME) ? &attr->st_ctim : &now;
		mask |= TFS_WB_SET_CTIME;
		na->ctime = (int64_t)t->tv_sec;
		na->ctime_ns = (uint32_t)t->tv_nsec;
	}
	return mask;
}

void tfs_fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_inode *in = tfs_itable_find(fs->v->itable, ino);
	struct tfs_attr a;
	char path[PATH_MAX];
	int rc;
	if (in) /* a setattr (truncate) changes the size the kernel holds */
		tfs_itable_set_attr_etag(fs->v->itable, in, "");
	struct tfs_vfs_handle *h = tfs_fs_handle(fs, ino, fi, false, &rc);
	if (rc == 0)
		rc = tfs_vfs_ino_path(fs->v, ino, path, &in);
	if (rc == 0 && fs->v->follow && tfs_vfs_is_order_file(path)) {
		struct stat st;
		tfs_vfs_order_attr(fs->v, &a); /* O_TRUNC, utimes...: nothing to keep */
		tfs_vfs_fill_stat(fs->v, ino, &a, &st);
		tfs_fs_count(fs, OP_SETATTR, 0);
		fuse_reply_attr(req, &st, tfs_fs_timeout(fs));
		return;
	}
	if (rc == 0 && fs->v->wb == NULL)
		rc = EROFS;
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size > TFS_VFS_MAX_FILE)
		rc = EFBIG;
	if (rc) {
		tfs_fs_reply_err(req, OP_SETATTR, rc);
		return;
	}
	struct tfs_wb_file *dwf = NULL;
	void *dstaged = NULL;
	struct tfs_attr dsnap;
	if (rc == 0 && h && h->wf && tfs_wb_file_detached(fs->v->wb, h->wf))
		dwf = h->wf;
	else if (rc == 0 && tfs_itable_detached(fs->v->itable, in, &dsnap, &dstaged) && dstaged)
		dwf = dstaged;
	if (dwf) {
		/* ftruncate/fchmod/futimens on a file whose name is gone: its
		 * staged copy changes, and is never uploaded. */
		struct tfs_wb_attr na = { 0 };
		unsigned mask = setattr_mask(fs, attr, to_set, &na);
		if (to_set & FUSE_SET_ATTR_SIZE)
			rc = tfs_wb_truncate(fs->v->wb, dwf, (uint64_t)attr->st_size);
		if (rc == 0 && mask)
			tfs_wb_file_setattr(fs->v->wb, dwf, mask, &na);
		if (rc) {
			tfs_fs_reply_err(req, OP_SETATTR, rc);
			return;
		}
		struct stat st;
		uint64_t sino = dstaged ? dsnap.ino : 0;
		tfs_wb_file_attr(fs->v->wb, dwf, &a);
		if (a.ino == 0)
			a.ino = sino;
		tfs_vfs_fill_stat(fs->v, ino, &a, &st);
		tfs_fs_count(fs, OP_SETATTR, 0);
		fuse_reply_attr(req, &st, tfs_fs_timeout(fs));
		return;
	}
	if (rc == 0 && path[0] == '\0')
		rc = EPERM; /* the root has no object to hold attributes */
	if (rc == 0)
		rc = tfs_vfs_attr(fs->v, path, &a);
	if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (a.type == TFS_FT_DIR)
			rc = EISDIR;
		else
			rc = tfs_vfs_truncate(fs->v, path, &a, h, (uint64_t)attr->st_size);
		if (rc == 0)
			rc = tfs_vfs_attr(fs->v, path, &a);
	}
	struct tfs_wb_attr na = { 0 };
	unsigned mask = setattr_mask(fs, attr, to_set, &na);
	if (rc == 0 && mask) {
		rc = tfs_wb_setattr(fs->v->wb, path,
				    a.type == TFS_FT_DIR ? &a : tfs_vfs_in_bucket(&a), mask, &na);
		if (rc == 0)
			rc = tfs_vfs_attr(fs->v, path, &a);
	}
	if (rc) {
		tfs_fs_reply_err(req, OP_SETATTR, rc);
		return;
	}
	struct stat st;
	tfs_vfs_fill_stat(fs->v, ino, &a, &st);
	tfs_fs_count(fs, OP_SETATTR, 0);
	fuse_reply_attr(req, &st, tfs_fs_timeout(fs));
}

/* ---- directories and names ---- */

void tfs_fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct tfs_fs *fs = fs_of(req);
	char path[PATH_MAX];
	struct tfs_attr a;
	if (!writable(req, OP_MKDIR))
		return;
	int rc = child_path(fs, parent, name, path);
	if (rc == 0)
		rc = name_ok(fs, path, true);
	if (rc == 0) {
		pthread_mutex_lock(&fs->v->ns_lock);
		ns_wait(fs, path, NULL);
		int ex = tfs_vfs_attr(fs->v, path, &a);
		rc = ex == 0 ? EEXIST : ex == ENOENT ? 0 : ex;
		if (rc == 0) {
			struct tfs_wb_attr na = new_attr(req, mode);
			inherit_gid(fs, parent, &na);
			rc = tfs_wb_mkdir(fs->v->wb, path, &na);
		}
		if (rc == 0)
			touch_parent(fs, path);
		if (rc == 0)
			rc = tfs_vfs_attr(fs->v, path, &a);
		pthread_mutex_unlock(&fs->v->ns_lock);
	}
	if (rc) {
		tfs_fs_reply_err(req, OP_MKDIR, rc);
		return;
	}
	reply_entry(req, OP_MKDIR, path, &a);
}

static int any_entry(void *ctx, const char *name, const struct tfs_attr *a)
{
	(void)ctx;
	(void)name;
	(void)a;
	return 1;
}

/* 0 if directory `path` is empty, ENOTEMPTY, or the listing's error. */
static int dir_empty(struct tfs_fs *fs, const char *path)
{
	int rc = tfs_meta_readdir(fs->v->meta, path, "", any_entry, NULL);
	return rc == 1 ? ENOTEMPTY : rc == ENOENT ? 0 : rc;
}

/* Forget cached data of `path`'s object (any version). */
static void drop_cached(struct tfs_fs *fs, const char *path)
{
	struct tfs_obj obj;
	tfs_obj_init(&obj, path, "", 0);
	tfs_layer_invalidate(fs->v->top, obj.id);
}

static void release_staged(void *ctx, void *staged)
{
	(void)tfs_wb_release(ctx, staged, false);
}

/* Detach the inode at `path`, keeping what fstat() of its open handles
 * needs (`staged`: a reference, handed over). */
static int keep_detached(struct tfs_fs *fs, const char *path, const struct tfs_attr *a,
			 void *staged)
{
	tfs_itable_set_release(fs->v->itable, release_staged, fs->v->wb);
	if (tfs_itable_detach_keep(fs->v->itable, path, a, staged) != 0)
		tfs_warn(fs->log, "'%s': out of memory detaching its inode", path);
	return 0;
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct tfs_fs *fs = fs_of(req);
	enum fs_op op = dir ? OP_RMDIR : OP_UNLINK;
	char path[PATH_MAX];
	struct tfs_attr a;
	if (!writable(req, op))
		return;
	int rc = child_path(fs, parent, name, path);
	if (rc == 0) {
		pthread_mutex_lock(&fs->v->ns_lock);
		ns_wait(fs, path, NULL);
		rc = tfs_vfs_attr(fs->v, path, &a);
		if (rc == 0 && dir && a.type != TFS_FT_DIR)
			rc = ENOTDIR;
		else if (rc == 0 && !dir && a.type == TFS_FT_DIR)
			rc = EISDIR;
		if (rc == 0 && dir)
			rc = dir_empty(fs, path);
		struct tfs_wb_file *staged = rc == 0 && !dir ? tfs_wb_find(fs->v->wb, path) : NULL;
		if (rc == 0)
			rc = tfs_wb_remove(fs->v->wb, path, dir);
		pthread_mutex_unlock(&fs->v->ns_lock);
		if (rc && staged)
			(void)tfs_wb_release(fs->v->wb, staged, false);
		else if (rc == 0)
			rc = keep_detached(fs, path, &a, staged);
	}
	if (rc == 0) {
		touch_parent(fs, path);
		if (tfs_itable_detach(fs->v->itable, path) != 0)
			tfs_warn(fs->log, "%s '%s': out of memory detaching its inode",
				 dir ? "rmdir" : "unlink", path);
		if (!dir)
			drop_cached(fs, path);
	}
	tfs_fs_reply_err(req, op, rc);
}

void tfs_fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, false);
}

void tfs_fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, true);
}

/* After a rename: the entry at `path` keeps the inode number `ino` its
 * name had (best effort: logged). */
static void keep_ino(struct tfs_fs *fs, const char *path, uint64_t ino)
{
	int rc = tfs_meta_set_ino(fs->v->meta, path, ino);
	if (rc)
		tfs_warn(fs->log, "rename '%s': its inode number changes: %s", path, strerror(rc));
}

/* Copy the clean object `from` to `to` in the bucket and delete `from`
 * (not atomic: a crash in between leaves both), then record it.  No lock
 * needed: the caller holds ns_lock or has both names marked busy. */
static int copy_clean(struct tfs_fs *fs, const char *from, const char *to, const struct tfs_attr *a)
{
	char etag[TFS_ETAG_MAX] = "";
	int rc = tfs_backend_copy(fs->v->be, from, to, a->size, NULL, etag);
	if (rc == 0)
		rc = tfs_backend_delete(fs->v->be, from);
	if (rc == 0) {
		struct tfs_attr na = *a;
		snprintf(na.etag, sizeof(na.etag), "%s", etag);
		rc = tfs_wb_renamed_clean(fs->v->wb, from, to, &na);
	}
	drop_cached(fs, from);
	return rc;
}

/* Rename one file `from` -> `to` (ns_lock held; `a` = from's attributes):
 * a staged file moves in the journal; a clean object is copied in the
 * bucket and the original deleted (copy_clean()), unless it has pending
 * changes, in which case it is staged first.  With `unlock` (a rename of
 * one file, not of a directory's entries) the wait for a job on `to` and
 * the copy run with ns_lock released and both names marked busy
 * (ns_mark()), so that namespace changes elsewhere do not wait for the
 * bucket; *marked then says the caller must ns_unmark() them before it
 * releases ns_lock. */
static int rename_file(struct tfs_fs *fs, const char *from, const char *to,
		       const struct tfs_attr *a, bool unlock, bool *marked)
{
	int rc = tfs_wb_rename_dirty(fs->v->wb, from, to);
	if (rc != ENOENT)
		return rc;
	bool busy = false;
	bool src_busy = a->local;
	if (!src_busy && unlock && ns_mark(fs, from, to)) {
		*marked = true;
		pthread_mutex_unlock(&fs->v->ns_lock);
		rc = tfs_wb_claim(fs->v->wb, to, &busy);
		if (rc == 0 && !busy)
			rc = copy_clean(fs, from, to, a);
		pthread_mutex_lock(&fs->v->ns_lock);
		if (rc || !busy)
			return rc;
	} else {
		rc = tfs_wb_claim(fs->v->wb, to, &busy);
		if (rc)
			return rc;
		if (!busy && !src_busy)
			return copy_clean(fs, from, to, a);
	}
	/* Stage a copy and move that. */
	struct tfs_wb_file *wf;
	rc = tfs_wb_open_write(fs->v->wb, from, tfs_vfs_in_bucket(a), false, &wf);
	if (rc)
		return rc;
	rc = tfs_wb_truncate(fs->v->wb, wf, a->size); /* a change, so it is journalled */
	int crc = tfs_wb_commit_record(fs->v->wb, wf);
	if (rc == 0)
		rc = crc;
	if (rc == 0)
		rc = tfs_wb_rename_dirty(fs->v->wb, from, to);
	(void)tfs_wb_release(fs->v->wb, wf, true);
	return rc;
}

struct collect {
	char **names;
	enum tfs_ftype *types;
	size_t n, cap;
	int err;
};

static int collect_entry(void *ctx, const char *name, const struct tfs_attr *a)
{
	struct collect *c = ctx;
	if (c->n == RENAME_DIR_MAX) {
		c->err = EXDEV;
		return 1;
	}
	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 32;
		char **nn = realloc(c->names, nc * sizeof(*nn));
		if (nn)
			c->names = nn;
		enum tfs_ftype *nt = realloc(c->types, nc * sizeof(*nt));
		if (nt)
			c->types = nt;
		if (nn == NULL || nt == NULL) {
			c->err = ENOMEM;
			return 1;
		}
		c->cap = nc;
	}
	if ((c->names[c->n] = strdup(name)) == NULL) {
		c->err = ENOMEM;
		return 1;
	}
	c->types[c->n++] = a->type;
	return 0;
}

/* Rename directory `from` -> `to` entry by entry, depth first.  `budget`
 * counts the entries still allowed. */
static int rename_dir(struct tfs_fs *fs, const char *from, const char *to,
		      const struct tfs_attr *da, size_t *budget)
{
	struct collect c = { 0 };
	int rc = tfs_meta_readdir(fs->v->meta, from, "", collect_entry, &c);
	if (rc == 1 || rc == 0)
		rc = c.err;
	if (rc == 0 && c.n > *budget)
		rc = EXDEV;
	if (rc == 0) {
		*budget -= c.n;
		struct tfs_wb_attr na = tfs_wb_attr_of(da);
		if (na.mtime == 0)
			na.mtime = (int64_t)time(NULL);
		rc = tfs_wb_mkdir(fs->v->wb, to, &na);
		if (rc == 0)
			keep_ino(fs, to, da->ino);
	}
	for (size_t i = 0; rc == 0 && i < c.n; i++) {
		char f[PATH_MAX], t[PATH_MAX];
		struct tfs_attr a;
		rc = tfs_meta_join(from, c.names[i], f, sizeof(f));
		if (rc == 0)
			rc = tfs_meta_join(to, c.names[i], t, sizeof(t));
		if (rc == 0)
			rc = tfs_vfs_attr(fs->v, f, &a);
		if (rc == 0 && a.type == TFS_FT_DIR) {
			rc = rename_dir(fs, f, t, &a, budget);
		} else if (rc == 0) {
			bool marked = false;
			rc = rename_file(fs, f, t, &a, false, &marked);
			if (rc == 0)
				keep_ino(fs, t, a.ino);
		}
	}
	if (rc == 0)
		rc = tfs_wb_remove(fs->v->wb, from, true);
	for (size_t i = 0; i < c.n; i++)
		free(c.names[i]);
	free(c.names);
	free(c.types);
	return rc;
}

/* Count the entries below `dir`, up to the rename bound, checking that
 * each one's name after the rename of `from` to `to` (an ancestor of
 * `dir`, or `dir` itself) can be stored (name_ok()). */
static int count_tree(struct tfs_fs *fs, const char *dir, size_t *n, const char *from,
		      const char *to)
{
	struct collect c = { 0 };
	int rc = tfs_meta_readdir(fs->v->meta, dir, "", collect_entry, &c);
	if (rc == 1 || rc == 0)
		rc = c.err;
	*n += c.n;
	if (rc == 0 && *n > RENAME_DIR_MAX)
		rc = EXDEV;
	for (size_t i = 0; rc == 0 && i < c.n; i++) {
		char sub[PATH_MAX], moved[PATH_MAX];
		bool is_dir = c.types[i] == TFS_FT_DIR;
		rc = tfs_meta_join(dir, c.names[i], sub, sizeof(sub));
		if (rc == 0 && snprintf(moved, sizeof(moved), "%s%s", to, sub + strlen(from)) >=
				       (int)sizeof(moved))
			rc = ENAMETOOLONG;
		if (rc == 0)
			rc = name_ok(fs, moved, is_dir);
		if (rc == 0 && is_dir)
			rc = count_tree(fs, sub, n, from, to);
	}
	for (size_t i = 0; i < c.n; i++)
		free(c.names[i]);
	free(c.names);
	free(c.types);
	return rc;
}

void tfs_fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct tfs_fs *fs = fs_of(req);
	char from[PATH_MAX], to[PATH_MAX];
	struct tfs_attr sa, da;
	if (!writable(req, OP_RENAME))
		return;
	if (flags & ~(unsigned int)RENAME_NOREPLACE) {
		/* RENAME_EXCHANGE cannot be done without an atomic swap, and
		 * RENAME_WHITEOUT (overlayfs) needs a device node the bucket
		 * cannot hold: refused rather than done as a plain rename. */
		tfs_fs_reply_err(req, OP_RENAME, EINVAL);
		return;
	}
	int rc = child_path(fs, parent, name, from);
	if (rc == 0)
		rc = child_path(fs, newparent, newname, to);
	if (rc) {
		tfs_fs_reply_err(req, OP_RENAME, rc);
		return;
	}
	pthread_mutex_lock(&fs->v->ns_lock);
	ns_wait(fs, from, to);
	rc = tfs_vfs_attr(fs->v, from, &sa);
	int dex = rc == 0 ? tfs_vfs_attr(fs->v, to, &da) : ENOENT;
	size_t len = strlen(from);
	if (rc == 0 && strcmp(from, to) == 0) {
		pthread_mutex_unlock(&fs->v->ns_lock);
		tfs_fs_reply_err(req, OP_RENAME, 0);
		return;
	}
	if (rc == 0 && dex != 0 && dex != ENOENT)
		rc = dex;
	else if (rc == 0 && dex == 0 && (flags & RENAME_NOREPLACE))
		rc = EEXIST;
	else if (rc == 0 && sa.type == TFS_FT_DIR && strncmp(to, from, len) == 0 && to[len] == '/')
		rc = EINVAL; /* into itself */
	else if (rc == 0 && dex == 0 && sa.type == TFS_FT_DIR && da.type != TFS_FT_DIR)
		rc = ENOTDIR;
	else if (rc == 0 && dex == 0 && sa.type != TFS_FT_DIR && da.type == TFS_FT_DIR)
		rc = EISDIR;
	if (rc == 0 && dex == 0 && da.type == TFS_FT_DIR)
		rc = dir_empty(fs, to);
	if (rc == 0)
		rc = name_ok(fs, to, sa.type == TFS_FT_DIR);
	if (rc == 0 && sa.type == TFS_FT_DIR) {
		size_t n = 0, budget = RENAME_DIR_MAX;
		rc = count_tree(fs, from, &n, from, to);
		if (rc == EXDEV)
			tfs_info(fs->log,
				 "rename '%s': more than %d entries; EXDEV (mv copies instead)",
				 from, RENAME_DIR_MAX);
		if (rc == 0)
			rc = rename_dir(fs, from, to, &sa, &budget);
	} else if (rc == 0) {
		struct tfs_wb_file *staged = dex == 0 ? tfs_wb_find(fs->v->wb, to) : NULL;
		bool marked = false;
		rc = rename_file(fs, from, to, &sa, true, &marked);
		if (rc == 0)
			keep_ino(fs, to, sa.ino);
		if (rc == 0 && dex == 0)
			keep_detached(fs, to, &da, staged);
		else if (staged)
			(void)tfs_wb_release(fs->v->wb, staged, false);
		if (marked)
			ns_unmark(fs, from, to);
	}
	pthread_mutex_unlock(&fs->v->ns_lock);
	if (rc == 0) {
		touch_parent(fs, from);
		touch_parent(fs, to);
	}
	if (rc == 0 && tfs_itable_rename(fs->v->itable, from, to) != 0)
		tfs_warn(fs->log, "rename '%s': out of memory renaming its inodes", from);
	if (rc && rc != EXDEV && rc != EEXIST && rc != ENOENT && rc != ENOTEMPTY &&
	    rc != ENAMETOOLONG)
		tfs_err(fs->log, "rename '%s' -> '%s': %s", from, to, strerror(rc));
	tfs_fs_reply_err(req, OP_RENAME, rc);
}

void tfs_fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	size_t len = strlen(link);
	if (len == 0 || len >= PATH_MAX) {
		tfs_fs_reply_err(req, OP_CREATE, len ? ENAMETOOLONG : ENOENT);
		return;
	}
	struct tfs_wb_attr na = new_attr(req, 0);
	na.mode = S_IFLNK | 0777; /* the umask does not apply to symlinks */
	make_file(req, parent, name, &na, link, len);
}

/* ---- not supported ---- */

void tfs_fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino;
	(void)newparent;
	(void)newname;
	tfs_fs_reply_err(req, OP_CREATE, fs_of(req)->v->wb ? EPERM : EROFS);
}

void tfs_fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, ENOTSUP);
}

/* The value of TFS_FS_XATTR_UPLOAD for inode `ino` into buf[0..len):
 * "clean", "pending", "pending: <last error>" or "failed: <last error>".
 * Returns 0, ENODATA (the control file, a detached file) or the errors of
 * tfs_vfs_ino_path(). */
static int upload_xattr(struct tfs_fs *fs, fuse_ino_t ino, char *buf, size_t len)
{
	char path[PATH_MAX];
	int rc = tfs_vfs_ino_path(fs->v, ino, path, NULL);
	if (rc)
		return rc;
	if (tfs_itable_path_is_detached(path) || tfs_vfs_is_order_file(path))
		return ENODATA;
	int err = 0;
	enum tfs_wb_upload_state st = fs->v->wb ? tfs_wb_upload_state(fs->v->wb, path, &err)
						: TFS_WB_CLEAN;
	const char *word = st == TFS_WB_CLEAN     ? "clean"
			   : st == TFS_WB_PENDING ? "pending"
						  : "failed";
	if (st == TFS_WB_FAILED && err == 0)
		err = EIO;
	if (err)
		snprintf(buf, len, "%s: %s", word, strerror(err));
	else
		snprintf(buf, len, "%s", word);
	return 0;
}

void tfs_fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct tfs_fs *fs = fs_of(req);
	if (strcmp(name, TFS_FS_XATTR_UPLOAD) != 0) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	char v[128];
	int rc = upload_xattr(fs, ino, v, sizeof(v));
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	size_t n = strlen(v);
	if (size == 0)
		fuse_reply_xattr(req, n);
	else if (size < n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, n);
}

void tfs_fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	(void)ino;
	/* TFS_FS_XATTR_UPLOAD is not listed: cp -a and rsync -X would copy it. */
	if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

void tfs_fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fuse_reply_err(req, ENOTSUP);
}
