/* fs.c - the FUSE operations table, the filesystem state's life, and the
 * handlers of the read path through the cache.
 *
 * The table also holds the handlers of fs_write.c (changes); both use
 * fs_common.c (counters, replies, entry filling); all three call the
 * file core (vfs/vfs.h).  Nothing there calls back into this file.
 *
 * lookup, open, read and readlink decode the request, call the file core
 * (vfs/: what the name is, a handle pinning the object's version, the
 * bytes from the staged copy or the RAM tier) and reply; what the kernel
 * caches stays decided here: keep_cache at open, and the kernel's
 * attributes invalidated when a handle moved to another version.
 * getattr and readdir still read the metadata cache and the inode table
 * through the core's state (vfs/vfs_state.h).
 *
 * Reply discipline: each handler replies exactly once, on every path.
 * Lock order: no lock is held across a reply, a backend call or a cache
 * fill; the inode table lock is taken only inside inode.c.
 */
#include "config.h"

#include "fs.h"
#include "clock.h"
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "fs_internal.h"
#include "statdef.h"

#define READDIR_MAX (64u * 1024u)

static const char *const op_names[OP__COUNT] = {
	"lookup",  "getattr", "readdir", "open",  "read",   "statfs", "create", "write",
	"setattr", "mkdir",   "unlink",  "rmdir", "rename", "fsync",  "flush",  "readlink",
};

struct dirh {
	struct tfs_vfs_ent ent; /* first: fs->v->fhs holds &ent */
	pthread_mutex_t lock;   /* protects last and last_off */
	char last[NAME_MAX + 1];
	off_t last_off;
};

void tfs_fs_set_ttl(struct tfs_fs *fs, uint64_t ttl_ms)
{
	tfs_vfs_set_ttl(fs->v, ttl_ms);
}

void tfs_fs_set_follow(struct tfs_fs *fs, struct tfs_follow *follow,
		       const struct tfs_manifest_scope *scope)
{
	tfs_vfs_set_follow(fs->v, follow, scope);
}

/* The attributes of inode `in` at `path`; ESTALE if its type or kind
 * changed. */
static int inode_attr(struct tfs_fs *fs, struct tfs_inode *in, const char *path, struct tfs_attr *a)
{
	int rc = tfs_vfs_attr(fs->v, path, a);
	if (rc == 0 && (a->type != in->type || a->fmt != in->fmt))
		rc = ESTALE;
	return rc;
}

void tfs_fs_set_session(struct tfs_fs *fs, struct fuse_session *se)
{
	fs->se = se;
}

void tfs_fs_set_io(struct tfs_fs *fs, void *io)
{
	fs->io = io;
}

void *tfs_fs_io(const struct tfs_fs *fs)
{
	return fs->io;
}

/* A handle of inode `in` now reads version `etag`.  The kernel may still
 * hold the attributes of another version: a lookup or getattr answered
 * from the metadata cache gives them the full attribute timeout, so they
 * can outlive the metadata here, which an open or read then revalidates.
 * The kernel clips reads to the size it holds, so a longer new version
 * would be read cut to the old size.  Then make it fetch the attributes
 * again before it uses them.  Attributes only (offset -1): that takes no
 * page lock and never blocks, so it is safe within a request, and it is
 * sent before the reply, so the reads that follow see it.  Nothing is
 * sent when every attribute reply since the last check was of this
 * version (the common case: the open of a file just looked up). */
static void kernel_attrs_of(struct tfs_fs *fs, struct tfs_inode *in, const char *etag)
{
	if (tfs_itable_swap_attr_etag(fs->v->itable, in, etag) || fs->se == NULL)
		return;
	int rc = fuse_lowlevel_notify_inval_inode(fs->se, in->ino, -1, 0);
	if (rc && rc != -ENOENT)
		tfs_warn(fs->log,
			 "inode %" PRIu64 ": cannot invalidate the kernel's attributes: %s",
			 in->ino, strerror(-rc));
	else
		tfs_debug(fs->log, "inode %" PRIu64 ": kernel attributes invalidated (now ETag %s)",
			  in->ino, etag);
}

/* ---- namespace ---- */

static void tfs_fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_attr a;
	struct tfs_inode *in;
	int rc = tfs_vfs_lookup(fs->v, parent, name, &a, &in);
	if (rc == ENOENT) {
		/* A negative entry: the kernel remembers the miss too. */
		struct fuse_entry_param e = { .ino = 0, .entry_timeout = tfs_fs_timeout(fs) };
		tfs_fs_count(fs, OP_LOOKUP, 0);
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc) {
		tfs_fs_reply_err(req, OP_LOOKUP, rc);
		return;
	}
	struct fuse_entry_param e;
	tfs_fs_fill_entry(fs, in, &a, &e);
	tfs_fs_count(fs, OP_LOOKUP, 0);
	fuse_reply_entry(req, &e);
}

static void tfs_fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	tfs_itable_forget(fs_of(req)->v->itable, ino, nlookup);
	fuse_reply_none(req);
}

static void tfs_fs_op_forget_multi(fuse_req_t req, size_t count_, struct fuse_forget_data *forgets)
{
	struct tfs_fs *fs = fs_of(req);
	for (size_t i = 0; i < count_; i++)
		tfs_itable_forget(fs->v->itable, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void tfs_fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct tfs_fs *fs = fs_of(req);
	struct tfs_inode *in;
	struct tfs_attr a;
	struct stat st;
	char path[PATH_MAX];
	int rc;
	/* fstat(): an fh of an earlier daemon is served without its handle. */
	struct tfs_vfs_handle *h = tfs_fs_handle(fs, ino, fi, false, &rc);
	if (rc == 0)
		rc = tfs_vfs_ino_path(fs->v, ino, path, &in);
	void *staged = NULL;
	bool gone = rc == 0 && tfs_itable_path_is_detached(path); /* no name: nlink 0 */
	if (rc == 0 && tfs_itable_detached(fs->v->itable, in, &a, &staged)) {
		/* fstat() of an open file whose name was unlinked or replaced. */
		uint64_t sino = a.ino;
		if (staged)
			tfs_wb_file_attr(fs->v->wb, staged, &a);
		a.ino = sino;
	} else if (rc == 0 && h && tfs_vfs_handle_staged(fs->v, h, path)) {
		/* fstat() of an open file: its staged copy, even if its name
		 * was unlinked or replaced meanwhile. */
		tfs_wb_file_attr(fs->v->wb, h->wf, &a);
		if (!tfs_itable_path_is_detached(path))
			a.ino = tfs_meta_ino(fs->v->meta, path);
	} else if (rc == 0) {
		rc = inode_attr(fs, in, path, &a);
		if (rc == ENOENT && h && h->obj.etag[0]) {
			/* An open clean file whose name is gone: its version. */
			memset(&a, 0, sizeof(a));
			a.type = TFS_FT_FILE;
			a.size = h->obj.size;
			a.mode = a.uid = a.gid = TFS_META_UNSET;
			a.mtime = fs->v->root_attr.mtime;
			rc = 0;
		}
	}
	if (rc) {
		tfs_fs_reply_err(req, OP_GETATTR, rc);
		return;
	}
	tfs_vfs_fill_stat(fs->v, ino, &a, &st);
	if (gone)
		st.st_nlink = 0;
	tfs_itable_set_attr_etag(fs->v->itable, in, a.type == TFS_FT_FILE ? a.etag : "");
	tfs_fs_count(fs, OP_GETATTR, 0);
	fuse_reply_attr(req, &st, tfs_fs_timeout(fs));
}

static struct dirh *dirh_new(struct tfs_fs *fs)
{
	struct dirh *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return NULL;
	pthread_mutex_init(&h->lock, NULL);
	h->ent.dir = true;
	tfs_vfs_fh_enter(fs->v, &h->ent);
	return h;
}

static void dirh_free(struct tfs_fs *fs, struct dirh *h)
{
	tfs_vfs_fh_remove(fs->v, &h->ent);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* The directory handle of fi->fh: this daemon's, or on a resumed daemon
 * a new one for an earlier daemon's fh (a readdir at any offset works on
 * a fresh handle: it skips to the offset), entered under the old value
 * until its RELEASEDIR.  NULL with *err EBADF or ENOMEM. */
static struct dirh *dir_handle(struct tfs_fs *fs, struct fuse_file_info *fi, int *err)
{
	struct tfs_vfs_ent *e = tfs_vfs_fh_find(fs->v, fi->fh);
	*err = 0;
	if (e && e->dir)
		return (struct dirh *)e;
	if (e || !fs->v->cfg.resumed || (uint32_t)(fi->fh >> 32) == fs->v->cfg.generation) {
		*err = EBADF;
		return NULL;
	}
	struct dirh *h = dirh_new(fs);
	if (h == NULL) {
		*err = ENOMEM;
		return NULL;
	}
	h->ent.rebuilt = true;
	e = tfs_vfs_fh_rekey(fs->v, &h->ent, fi->fh);
	if (e == NULL)
		return h;
	/* Another request rebuilt it meanwhile: use that one. */
	struct dirh *other = e->dir ? (struct dirh *)e : NULL;
	dirh_free(fs, h);
	if (other == NULL)
		*err = EBADF;
	return other;
}

static void tfs_fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_inode *in = tfs_itable_find(fs->v->itable, ino);
	if (in == NULL || in->type != TFS_FT_DIR) {
		fuse_reply_err(req, in ? ENOTDIR : ESTALE);
		return;
	}
	struct dirh *h = dirh_new(fs);
	if (h == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = h->ent.id;
	fi->cache_readdir = 0;
	fi->keep_cache = atomic_load(&fs->v->ttl_ms) == UINT64_MAX;
	if (fuse_reply_open(req, fi) == -ENOENT)
		dirh_free(fs, h); /* interrupted: no releasedir comes */
}

static void tfs_fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct tfs_fs *fs = fs_of(req);
	struct tfs_vfs_ent *e = tfs_vfs_fh_find(fs->v, fi->fh);
	/* An unknown fh (an earlier daemon's never used here) holds nothing. */
	int rc = e == NULL || e->dir ? 0 : EBADF;
	if (e && e->dir)
		dirh_free(fs, (struct dirh *)e);
	fuse_reply_err(req, rc);
}

struct rd {
	fuse_req_t req;
	struct tfs_fs *fs;
	struct tfs_inode *dir;
	const char *dirpath; /* the directory's path, copied at the start */
	bool plus;
	char *buf;
	size_t size, used;
	off_t off;     /* offset of the next entry */
	uint64_t skip; /* entries still to skip (seek to an unknown offset) */
	char last[NAME_MAX + 1];
	int err;
};

/* A non-zero inode number for a directory entry the kernel does not look
 * up ("." and "..", or entries of a plain readdir). */
static uint64_t name_ino(const struct tfs_inode *dir, const char *dirpath, const char *name)
{
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return dir->ino;
	uint64_t h = tfs_fnv1a_str(TFS_FNV1A_INIT, dirpath);
	h = tfs_fnv1a_str(tfs_fnv1a_byte(h, '/'), name);
	return h | (1ull << 63); /* apart from the counter's numbers */
}

/* Add one entry with `st` (d_ino, d_type) and, for readdirplus, inode
 * `in` with attributes `a` (`in` NULL: node id 0, no attributes, and the
 * kernel looks the name up itself).  Returns 1 when the buffer is full. */
static int rd_put(struct rd *r, const char *name, const struct stat *st, struct tfs_inode *in,
		  const struct tfs_attr *a)
{
	size_t left = r->size - r->used;
	size_t need = r->plus ? fuse_add_direntry_plus(r->req, NULL, 0, name, NULL, 0)
			      : fuse_add_direntry(r->req, NULL, 0, name, NULL, 0);
	if (need > left)
		return 1;
	if (r->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		e.attr = *st;
		if (in)
			tfs_fs_fill_entry(r->fs, in, a, &e);
		fuse_add_direntry_plus(r->req, r->buf + r->used, left, name, &e, r->off + 1);
	} else {
		fuse_add_direntry(r->req, r->buf + r->used, left, name, st, r->off + 1);
	}
	r->used += need;
	r->off++;
	return 0;
}

/* Add one entry; returns 1 when the buffer is full.  d_ino must not be 0
 * (readdir(3) skips such entries): entries without their own number get a
 * stable one derived from the name. */
static int rd_add(struct rd *r, const char *name, const struct tfs_attr *a, struct tfs_inode *in)
{
	struct stat st;
	tfs_vfs_fill_stat(r->fs->v, in ? in->ino : name_ino(r->dir, r->dirpath, name), a, &st);
	return rd_put(r, name, &st, in, a);
}

/* Add an entry that is not settled (tfs_meta_settled()): readdirplus
 * without attributes (the kernel will look it up), d_type DT_DIR for a
 * directory and DT_UNKNOWN for an object.  Returns 1 when the buffer is
 * full. */
static int rd_add_unsettled(struct rd *r, const char *name, const struct tfs_attr *a)
{
	struct stat st;
	memset(&st, 0, sizeof(st));
	st.st_ino = a->ino ? a->ino : name_ino(r->dir, r->dirpath, name);
	st.st_mode = a->type == TFS_FT_DIR ? S_IFDIR : 0;
	return rd_put(r, name, &st, NULL, a);
}

static int rd_entry(void *ctx, const char *name, const struct tfs_attr *a)
{
	struct rd *r = ctx;
	if (r->skip) {
		r->skip--;
		r->off++;
		snprintf(r->last, sizeof(r->last), "%s", name);
		return 0;
	}
	struct tfs_inode *in = NULL;
	struct tfs_attr dirty;
	char fpath[PATH_MAX];
	if (a->type == TFS_FT_FILE && r->fs->v->wb &&
	    tfs_meta_join(r->dirpath, name, fpath, sizeof(fpath)) == 0 &&
	    tfs_wb_attr(r->fs->v->wb, fpath, &dirty)) {
		dirty.ino = a->ino;
		a = &dirty; /* size as written so far */
	}
	if (!tfs_meta_settled(r->fs->v->meta, a)) {
		/* What a listing cannot tell (a symlink?  a directory's mode?):
		 * no attributes and, for a possible symlink, no type, so the
		 * kernel looks the name up, which learns them. */
		if (rd_add_unsettled(r, name, a))
			return 1;
		snprintf(r->last, sizeof(r->last), "%s", name);
		return 0;
	}
	if (r->plus) {
		/* Only entries that fit take a lookup count. */
		size_t need = fuse_add_direntry_plus(r->req, NULL, 0, name, NULL, 0);
		if (need > r->size - r->used)
			return 1;
		char path[PATH_MAX];
		int rc = tfs_meta_join(r->dirpath, name, path, sizeof(path));
		if (rc == 0)
			rc = tfs_itable_lookup_nosync(r->fs->v->itable, path, a->type, a->fmt, &in);
		if (rc) {
			r->err = rc;
			return 1;
		}
	}
	if (rd_add(r, name, a, in))
		return 1;
	snprintf(r->last, sizeof(r->last), "%s", name);
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_inode *in;
	char dirpath[PATH_MAX];
	int prc;
	struct dirh *h = dir_handle(fs, fi, &prc);
	if (h)
		prc = tfs_vfs_ino_path(fs->v, ino, dirpath, &in);
	if (prc) {
		tfs_fs_reply_err(req, OP_READDIR, prc);
		return;
	}
	/* The kernel asks for up to max_pages (1 MiB); a readdirplus reply that
	 * large would make ~6,500 inodes at once.  64 KiB is plenty per call. */
	if (size > READDIR_MAX)
		size = READDIR_MAX;
	struct rd r = { .req = req,
			.fs = fs,
			.dir = in,
			.dirpath = dirpath,
			.plus = plus,
			.size = size,
			.off = off };
	r.buf = malloc(size);
	if (r.buf == NULL) {
		tfs_fs_reply_err(req, OP_READDIR, ENOMEM);
		return;
	}
	struct tfs_attr dot = fs->v->root_attr;
	dot.ino = 0; /* "." and "..": name_ino() */
	/* Offsets: 1 ".", 2 "..", then 3.. for the entries in name order. */
	if (r.off == 0)
		rd_add(&r, ".", &dot, NULL);
	if (r.off == 1)
		rd_add(&r, "..", &dot, NULL);
	const char *after = "";
	pthread_mutex_lock(&h->lock);
	if (r.off >= 2) {
		if (r.off == 2) {
			after = "";
		} else if (r.off == h->last_off) {
			snprintf(r.last, sizeof(r.last), "%s", h->last);
			after = r.last;
		} else {
			r.skip = (uint64_t)(r.off - 2);
			r.off = 2;
		}
	}
	pthread_mutex_unlock(&h->lock);
	int rc = 0;
	if (r.off >= 2 && r.used < size) {
		char start[NAME_MAX + 1];
		snprintf(start, sizeof(start), "%s", after);
		rc = tfs_meta_readdir(fs->v->meta, dirpath, start, rd_entry, &r);
		if (rc == 1)
			rc = 0;
		if (rc == 0 && r.err)
			rc = r.err;
	}
	if (rc && r.used == 0) {
		free(r.buf);
		tfs_fs_reply_err(req, OP_READDIR, rc);
		return;
	}
	pthread_mutex_lock(&h->lock);
	snprintf(h->last, sizeof(h->last), "%s", r.last);
	h->last_off = r.off;
	pthread_mutex_unlock(&h->lock);
	if (plus) /* the reply's new node IDs, in one transaction */
		(void)tfs_itable_persist(fs->v->itable);
	tfs_fs_count(fs, OP_READDIR, 0);
	tfs_debug(fs->log, "readdir%s '%s' off %lld size %zu: %zu bytes, next off %lld, last '%s'",
		  plus ? "plus" : "", dirpath, (long long)off, size, r.used, (long long)r.off,
		  r.last);
	fuse_reply_buf(req, r.buf, r.used);
	free(r.buf);
}

static void tfs_fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			      struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void tfs_fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
				  struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

/* ---- data ---- */

static void tfs_fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_inode *in;
	char path[PATH_MAX];
	int rc = tfs_vfs_ino_path(fs->v, ino, path, &in);
	if (rc == 0 && in->type == TFS_FT_DIR)
		rc = EISDIR;
	if (rc) {
		tfs_fs_reply_err(req, OP_OPEN, rc);
		return;
	}
	if (fs->v->follow && tfs_vfs_is_order_file(path)) {
		tfs_fs_open_order(req, in, fi, NULL);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		if (fs->v->wb == NULL) {
			tfs_fs_reply_err(req, OP_OPEN, EROFS);
			return;
		}
		/* Its writes change the size the kernel holds. */
		tfs_itable_set_attr_etag(fs->v->itable, in, "");
		tfs_fs_open_write(req, in, path, fi);
		return;
	}
	struct tfs_vfs_handle *h;
	rc = tfs_vfs_open_read(fs->v, in, path, &h);
	if (rc) {
		tfs_fs_reply_err(req, OP_OPEN, rc);
		return;
	}
	if (h->kind == TFS_VFS_CLEAN) {
		if (fs->v->follow)
			tfs_follow_opened(fs->v->follow, path, fuse_req_ctx(req)->pid);
		/* The kernel may keep its pages only if they are of this version. */
		fi->keep_cache = tfs_itable_swap_kernel_etag(fs->v->itable, in, h->obj.etag);
		kernel_attrs_of(fs, in, h->obj.etag);
	} else {
		fi->keep_cache = 0;
		/* staged: not a version */
		(void)tfs_itable_swap_kernel_etag(fs->v->itable, in, "");
	}
	fi->fh = h->ent.id;
	fi->noflush = 1;
	tfs_fs_count(fs, OP_OPEN, 0);
	if (fuse_reply_open(req, fi) == -ENOENT)
		tfs_vfs_handle_free(fs->v, h); /* the open was interrupted: release will not come */
}

static void tfs_fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_vfs_ent *e = tfs_vfs_fh_find(fs->v, fi->fh);
	if (e && !e->dir) {
		tfs_vfs_handle_free(fs->v, (struct tfs_vfs_handle *)e);
	} else if (e == NULL && fs->v->cfg.resumed && (fi->flags & O_ACCMODE) != O_RDONLY) {
		/* The last close of a writer whose handle an earlier daemon
		 * gave out and nothing here rebuilt: commit its staged copy
		 * (the flush before it did, unless it never came). */
		char path[PATH_MAX];
		struct tfs_wb_file *wf = NULL;
		if (fs->v->wb && tfs_vfs_ino_path(fs->v, ino, path, NULL) == 0 &&
		    !tfs_itable_path_is_detached(path))
			wf = fs->v->wb ? tfs_wb_find(fs->v->wb, path) : NULL;
		if (wf) {
			int rc = tfs_wb_commit(fs->v->wb, wf, false);
			if (rc)
				tfs_err(fs->log, "close '%s': %s", path, strerror(rc));
			(void)tfs_wb_release(fs->v->wb, wf, false);
		}
	}
	fuse_reply_err(req, 0);
}

/* read(): the file core reads; the reply is sent from its bytes. */
static void tfs_fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	int rc;
	struct tfs_vfs_handle *h = tfs_fs_handle(fs, ino, fi, true, &rc);
	struct tfs_vfs_data d = { 0 };
	if (h)
		rc = tfs_vfs_read(fs->v, h, ino, (uint64_t)off, size, &d);
	if (d.moved[0]) /* before the reply: the reads that follow see it */
		kernel_attrs_of(fs, d.in, d.moved);
	if (rc) {
		tfs_fs_reply_err(req, OP_READ, rc);
		return;
	}
	tfs_fs_count(fs, OP_READ, 0);
	atomic_fetch_add(&fs->read_bytes, d.len);
	fuse_reply_buf(req, d.buf, d.len);
	tfs_vfs_data_release(fs->v, &d);
}

/* A symlink's target: its object's body, from the staged copy while it is
 * dirty, else through the cache stack (one block: a target is shorter
 * than PATH_MAX).  EINVAL for anything else, as readlink(2). */
static void tfs_fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct tfs_fs *fs = fs_of(req);
	char target[PATH_MAX];
	int rc = tfs_vfs_readlink(fs->v, ino, target);
	if (rc) {
		tfs_fs_reply_err(req, OP_READLINK, rc);
		return;
	}
	tfs_fs_count(fs, OP_READLINK, 0);
	fuse_reply_readlink(req, target);
}

static void tfs_fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct tfs_fs *fs = fs_of(req);
	struct statvfs sv;
	memset(&sv, 0, sizeof(sv));
	if (fs->v->cfg.statfs_dir == NULL || statvfs(fs->v->cfg.statfs_dir, &sv) != 0) {
		sv.f_bsize = sv.f_frsize = 4096;
		sv.f_blocks = sv.f_bfree = sv.f_bavail = 1u << 30;
	}
	sv.f_files = 1u << 30;
	sv.f_ffree = sv.f_favail = 1u << 30;
	sv.f_namemax = NAME_MAX;
	tfs_fs_count(fs, OP_STATFS, 0);
	fuse_reply_statfs(req, &sv);
}

static void tfs_fs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct tfs_fs *fs = userdata;
	/* Readahead parallelism: the kernel keeps up to max_background reads
	 * in flight; our own prefetch covers the rest. */
	conn->max_read = TFS_MAX_READ; /* must match the max_read mount option */
	conn->max_readahead = TFS_MAX_READ;
	/* libfuse derives the kernel's max_pages from max_write; together with
	 * the raised bdi readahead (daemon.c) reads arrive as 1 MiB. */
	conn->max_write = TFS_MAX_READ;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	/* Plus only when the kernel sees the listing followed by lookups (ls
	 * -l, a stat walk): find and os.walk then create no inodes. */
	if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
		conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* A file open for writing keeps its staged file open: take every
	 * descriptor the hard limit allows (the soft limit is often 1024;
	 * above fs.nr_open's default the raise would fail). */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < (1u << 20) ? rl.rlim_max : (1u << 20);
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			tfs_warn(fs->log, "fuse: cannot raise the open files limit: %s",
				 strerror(errno));
	}
	tfs_info(fs->log, "fuse: protocol %u.%u, max_read %u, max_readahead %u", conn->proto_major,
		 conn->proto_minor, conn->max_read, conn->max_readahead);
}

/* Latency of the counted operations: each handler below is timed from its
 * entry to its return.  Every handler replies before it returns (no reply
 * is deferred to another thread), so that is the time to the reply plus
 * the reply's write to the kernel.  `fs` is taken before the call: the
 * request is gone once replied. */
#define TIMED(op, fn, params, ...)                   \
	static void timed_##fn params                \
	{                                            \
		struct tfs_fs *tfs = fs_of(req);     \
		uint64_t t0 = tfs_mono_ns();         \
		fn(__VA_ARGS__);                     \
		tfs_hist_observe(&tfs->lat[op], t0); \
	}

TIMED(OP_LOOKUP, tfs_fs_op_lookup, (fuse_req_t req, fuse_ino_t parent, const char *name), req,
      parent, name)
TIMED(OP_GETATTR, tfs_fs_op_getattr, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
      req, ino, fi)
TIMED(OP_READDIR, tfs_fs_op_readdir,
      (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi), req, ino,
      size, off, fi)
TIMED(OP_READDIR, tfs_fs_op_readdirplus,
      (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi), req, ino,
      size, off, fi)
TIMED(OP_OPEN, tfs_fs_op_open, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), req,
      ino, fi)
TIMED(OP_READ, tfs_fs_op_read,
      (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi), req, ino,
      size, off, fi)
TIMED(OP_STATFS, tfs_fs_op_statfs, (fuse_req_t req, fuse_ino_t ino), req, ino)
TIMED(OP_SETATTR, tfs_fs_op_setattr,
      (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi),
      req, ino, attr, to_set, fi)
TIMED(OP_MKDIR, tfs_fs_op_mkdir, (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode),
      req, parent, name, mode)
TIMED(OP_CREATE, tfs_fs_op_mknod,
      (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev), req, parent,
      name, mode, rdev)
TIMED(OP_CREATE, tfs_fs_op_create,
      (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi),
      req, parent, name, mode, fi)
TIMED(OP_WRITE, tfs_fs_op_write,
      (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
       struct fuse_file_info *fi),
      req, ino, buf, size, off, fi)
TIMED(OP_FLUSH, tfs_fs_op_flush, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), req,
      ino, fi)
TIMED(OP_FSYNC, tfs_fs_op_fsync,
      (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi), req, ino, datasync,
      fi)
TIMED(OP_UNLINK, tfs_fs_op_unlink, (fuse_req_t req, fuse_ino_t parent, const char *name), req,
      parent, name)
TIMED(OP_RMDIR, tfs_fs_op_rmdir, (fuse_req_t req, fuse_ino_t parent, const char *name), req, parent,
      name)
TIMED(OP_RENAME, tfs_fs_op_rename,
      (fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
       const char *newname, unsigned int flags),
      req, parent, name, newparent, newname, flags)
TIMED(OP_CREATE, tfs_fs_op_symlink,
      (fuse_req_t req, const char *link, fuse_ino_t parent, const char *name), req, link, parent,
      name)
TIMED(OP_READLINK, tfs_fs_op_readlink, (fuse_req_t req, fuse_ino_t ino), req, ino)
TIMED(OP_CREATE, tfs_fs_op_link,
      (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname), req, ino,
      newparent, newname)

static const struct fuse_lowlevel_ops ops = {
	.init = tfs_fs_op_init,
	.lookup = timed_tfs_fs_op_lookup,
	.forget = tfs_fs_op_forget,
	.forget_multi = tfs_fs_op_forget_multi,
	.getattr = timed_tfs_fs_op_getattr,
	.opendir = tfs_fs_op_opendir,
	.readdir = timed_tfs_fs_op_readdir,
	.readdirplus = timed_tfs_fs_op_readdirplus,
	.releasedir = tfs_fs_op_releasedir,
	.open = timed_tfs_fs_op_open,
	.read = timed_tfs_fs_op_read,
	.release = tfs_fs_op_release,
	.statfs = timed_tfs_fs_op_statfs,
	.setattr = timed_tfs_fs_op_setattr,
	.mkdir = timed_tfs_fs_op_mkdir,
	.mknod = timed_tfs_fs_op_mknod,
	.create = timed_tfs_fs_op_create,
	.write = timed_tfs_fs_op_write,
	.flush = timed_tfs_fs_op_flush,
	.fsync = timed_tfs_fs_op_fsync,
	.unlink = timed_tfs_fs_op_unlink,
	.rmdir = timed_tfs_fs_op_rmdir,
	.rename = timed_tfs_fs_op_rename,
	.symlink = timed_tfs_fs_op_symlink,
	.readlink = timed_tfs_fs_op_readlink,
	.link = timed_tfs_fs_op_link,
	.setxattr = tfs_fs_op_setxattr,
	.getxattr = tfs_fs_op_getxattr,
	.listxattr = tfs_fs_op_listxattr,
	.removexattr = tfs_fs_op_removexattr,
};

const struct fuse_lowlevel_ops *tfs_fs_ops(void)
{
	return &ops;
}

/* The "fuse" stats: one object per operation, then the layer's own. */
struct fs_op_snap {
	uint64_t count, errors;
	const struct tfs_hist *latency;
};

#define OP_ROW(f, ...) TFS_STAT(struct fs_op_snap, f, __VA_ARGS__)
static const struct tfs_statdef fs_op_rows[] = {
	OP_ROW(count, TFS_COUNTER, "tierfs_fuse_requests_total", "FUSE requests, by operation."),
	OP_ROW(errors, TFS_COUNTER, "tierfs_fuse_errors_total",
	       "FUSE requests answered with an error."),
	OP_ROW(latency, TFS_HISTOGRAM, "tierfs_fuse_request_duration_seconds",
	       "FUSE request latency (handler entry to reply), by operation."),
};
#undef OP_ROW

const struct tfs_stattab tfs_fs_op_stattab = TFS_STATTAB("fuse", fs_op_rows, .each = "op");

struct fs_snap {
	uint64_t read_bytes, write_bytes, inodes, node_ids_reused, inodes_trimmed;
};

#define ROW(f, ...) TFS_STAT(struct fs_snap, f, __VA_ARGS__)
static const struct tfs_statdef fs_rows[] = {
	ROW(read_bytes, TFS_COUNTER, "tierfs_fuse_read_bytes_total", "Bytes returned by read()."),
	ROW(write_bytes, TFS_COUNTER, "tierfs_fuse_write_bytes_total",
	    "Bytes accepted by write()."),
	ROW(inodes, TFS_GAUGE, "tierfs_fuse_inodes", "Inodes the kernel holds a reference to."),
	ROW(node_ids_reused, TFS_JSON_ONLY, NULL, "a diagnostic of the inode table"),
	ROW(inodes_trimmed, TFS_COUNTER, "tierfs_fuse_inodes_trimmed_total",
	    "Names the kernel was asked to drop to keep the inodes within mount.max_inodes."),
};
#undef ROW

const struct tfs_stattab tfs_fs_stattab = TFS_STATTAB("fuse", fs_rows);

void tfs_fs_stats(struct tfs_fs *fs, struct json_object *out)
{
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return;
	for (int i = 0; i < OP__COUNT; i++) {
		struct fs_op_snap op = {
			.count = atomic_load(&fs->ops[i]),
			.errors = atomic_load(&fs->errs[i]),
			.latency = &fs->lat[i],
		};
		struct json_object *x = tfs_stat_object(&tfs_fs_op_stattab, &op);
		if (x != NULL)
			json_object_object_add(o, op_names[i], x);
	}
	struct fs_snap s = {
		.read_bytes = atomic_load(&fs->read_bytes),
		.write_bytes = atomic_load(&fs->write_bytes),
		.inodes = tfs_itable_count(fs->v->itable),
		.inodes_trimmed = tfs_itable_trim_count(fs->v->itable),
	};
	uint64_t retired = 0;
	tfs_itable_ghost_counts(fs->v->itable, &s.node_ids_reused, &retired);
	(void)tfs_stat_json(o, &tfs_fs_stattab, &s);
	json_object_object_add(out, tfs_stat_name(&tfs_fs_stattab), o);
}

int tfs_fs_create(const struct tfs_fs_config *cfg, struct tfs_meta *meta, struct tfs_layer *top,
		  struct tfs_prefetch *pf, struct tfs_wb *wb, struct tfs_backend *be,
		  const struct tfs_log *log, struct tfs_fs **out)
{
	struct tfs_fs *fs = calloc(1, sizeof(*fs));
	if (fs == NULL)
		return ENOMEM;
	int rc = tfs_vfs_create(cfg, meta, top, pf, wb, be, log, &fs->v);
	if (rc) {
		free(fs);
		return rc;
	}
	fs->log = log;
	pthread_mutex_init(&fs->trim_lock, NULL);
	pthread_cond_init(&fs->trim_cond, NULL);
	*out = fs;
	return 0;
}

void tfs_fs_destroy(struct tfs_fs *fs)
{
	if (fs == NULL)
		return;
	/* The session has ended: no RELEASE is coming for these (found by
	 * LeakSanitizer after a lazy unmount).  Release them as it would. */
	unsigned n = 0;
	struct tfs_vfs_ent *e;
	while ((e = tfs_vfs_fh_any(fs->v)) != NULL) {
		if (e->dir) {
			dirh_free(fs, (struct dirh *)e);
			continue;
		}
		/* Never committed: a file its writer did not close is no
		 * complete version (as after a crash, only what was closed or
		 * fsynced before is uploaded). */
		struct tfs_vfs_handle *h = (struct tfs_vfs_handle *)e;
		h->writer = false;
		tfs_vfs_handle_free(fs->v, h);
		n++;
	}
	if (n)
		tfs_info(fs->log,
			 "released %u file handle(s) still open when the FUSE session ended", n);
	tfs_fs_trim_stop(fs); /* normally stopped already, with the session */
	tfs_vfs_destroy(fs->v);
	pthread_mutex_destroy(&fs->trim_lock);
	pthread_cond_destroy(&fs->trim_cond);
	free(fs);
}
