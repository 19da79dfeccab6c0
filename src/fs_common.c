/* fs_common.c - what the FUSE handlers of fs.c and fs_write.c share: the
 * operation counters and error replies, stat and entry filling, a path's
 * current attributes, inode paths, and file handles.
 *
 * Below the handlers and above the control file (fs_order.c), the inode
 * table (inode.c) and the cache layers.  Only tfs_fs_reply_err() replies.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs_internal.h"
#include "path.h"

double tfs_fs_timeout(const struct tfs_fs *fs)
{
	uint64_t ttl = atomic_load(&fs->ttl_ms);

	return ttl == UINT64_MAX ? FOREVER_S : (double)ttl / 1000.0;
}

void tfs_fs_count(struct tfs_fs *fs, enum fs_op op, int err)
{
	atomic_fetch_add_explicit(&fs->ops[op], 1, memory_order_relaxed);
	if (err)
		atomic_fetch_add_explicit(&fs->errs[op], 1, memory_order_relaxed);
}

void tfs_fs_reply_err(fuse_req_t req, enum fs_op op, int err)
{
	tfs_fs_count(fs_of(req), op, err);
	fuse_reply_err(req, err);
}

mode_t tfs_fs_perm(const struct tfs_fs *fs, mode_t mode)
{
	return mode & (fs->cfg.keep_setid ? 07777 : 07777 & ~(mode_t)(S_ISUID | S_ISGID));
}

mode_t tfs_fs_type_bits(const struct tfs_attr *a)
{
	if (a->type == TFS_FT_DIR)
		return S_IFDIR;
	return a->fmt ? (mode_t)a->fmt : S_IFREG;
}

void tfs_fs_fill_stat(const struct tfs_fs *fs, uint64_t ino, const struct tfs_attr *a,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino ? a->ino : ino | TFS_FS_NODEID_INO;
	mode_t def = a->type == TFS_FT_DIR ? fs->cfg.dir_mode : fs->cfg.file_mode;
	if (a->fmt == S_IFLNK)
		def = 0777;
	st->st_mode = tfs_fs_type_bits(a) |
		      tfs_fs_perm(fs, a->mode != TFS_META_UNSET ? a->mode : def);
	if (a->type == TFS_FT_DIR) {
		st->st_nlink = 2;
	} else {
		st->st_nlink = 1;
		if (a->fmt == 0 || a->fmt == S_IFLNK) {
			st->st_size = (off_t)a->size;
			st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
		}
		if (a->fmt == S_IFCHR || a->fmt == S_IFBLK)
			st->st_rdev = (dev_t)a->rdev;
	}
	st->st_uid = a->uid != TFS_META_UNSET ? a->uid : fs->cfg.uid;
	st->st_gid = a->gid != TFS_META_UNSET ? a->gid : fs->cfg.gid;
	st->st_blksize = (blksize_t)fs->block_size;
	/* A directory without a marker has no time in S3: show the mount's. */
	if (a->type == TFS_FT_DIR && a->mtime == 0) {
		st->st_mtim.tv_sec = (time_t)fs->root_attr.mtime;
	} else {
		st->st_mtim.tv_sec = (time_t)a->mtime;
		st->st_mtim.tv_nsec = a->mtime_ns < 1000000000u ? (long)a->mtime_ns : 0;
	}
	st->st_ctim = st->st_mtim;
	st->st_atim = st->st_mtim;
	if (a->ctime) {
		st->st_ctim.tv_sec = (time_t)a->ctime;
		st->st_ctim.tv_nsec = a->ctime_ns < 1000000000u ? (long)a->ctime_ns : 0;
	}
	if (a->atime) {
		st->st_atim.tv_sec = (time_t)a->atime;
		st->st_atim.tv_nsec = a->atime_ns < 1000000000u ? (long)a->atime_ns : 0;
	}
}

int tfs_fs_attr(struct tfs_fs *fs, const char *path, struct tfs_attr *a)
{
	if (path[0] == '\0') {
		*a = fs->root_attr;
		return 0;
	}
	if (fs->follow && tfs_fs_is_order_file(path)) {
		tfs_fs_order_attr(fs, a);
		return 0;
	}
	if (fs->wb && tfs_wb_attr(fs->wb, path, a)) {
		a->ino = tfs_meta_ino(fs->meta, path);
		return 0;
	}
	char dir[PATH_MAX];
	const char *name;
	bool changed = false;
	int rc = tfs_path_split(path, dir, sizeof(dir), &name);
	if (rc == 0)
		rc = tfs_meta_lookup(fs->meta, dir, name, a, &changed);
	if (rc)
		return rc;
	if (changed) {
		struct tfs_obj obj;
		tfs_obj_init(&obj, path, "", 0);
		tfs_info(fs->log, "'%s' changed in the bucket (ETag %s): cached data dropped", path,
			 a->etag);
		tfs_layer_invalidate(fs->top, obj.id);
	}
	return 0;
}

int tfs_fs_ino_path(struct tfs_fs *fs, fuse_ino_t ino, char *buf, struct tfs_inode **out)
{
	struct tfs_inode *in = tfs_itable_find(fs->itable, ino);
	if (in == NULL)
		return ESTALE;
	if (out)
		*out = in;
	return tfs_itable_path(fs->itable, in, buf, PATH_MAX);
}

void tfs_fs_fill_entry(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr *a,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->generation = 1;
	e->attr_timeout = tfs_fs_timeout(fs);
	e->entry_timeout = tfs_fs_timeout(fs);
	tfs_fs_fill_stat(fs, in->ino, a, &e->attr);
	tfs_itable_set_attr_etag(fs->itable, in, a->type == TFS_FT_FILE ? a->etag : "");
}

static size_t fh_bucket(uint64_t id)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 40) & (TFS_FS_FH_BUCKETS - 1);
}

/* The entry of `id` (fh_lock held). */
static struct fh_ent *fh_lookup(struct tfs_fs *fs, uint64_t id)
{
	struct fh_ent *e = fs->fhs[fh_bucket(id)];
	while (e && e->id != id)
		e = e->next;
	return e;
}

static void fh_link(struct tfs_fs *fs, struct fh_ent *e)
{
	size_t b = fh_bucket(e->id);
	e->next = fs->fhs[b];
	fs->fhs[b] = e;
	fs->fh_count++;
}

static void fh_unlink(struct tfs_fs *fs, struct fh_ent *e)
{
	struct fh_ent **pp = &fs->fhs[fh_bucket(e->id)];
	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = e->next;
		fs->fh_count--;
	}
}

void tfs_fs_fh_enter(struct tfs_fs *fs, struct fh_ent *e)
{
	pthread_mutex_lock(&fs->fh_lock);
	uint64_t id;
	do {
		/* The counter wraps after 2^32 opens: skip values still held
		 * (and 0, which no handle has). */
		id = (uint64_t)fs->cfg.generation << 32 | ++fs->fh_next;
	} while ((uint32_t)id == 0 || fh_lookup(fs, id));
	e->id = id;
	fh_link(fs, e);
	pthread_mutex_unlock(&fs->fh_lock);
}

struct fh_ent *tfs_fs_fh_rekey(struct tfs_fs *fs, struct fh_ent *e, uint64_t id)
{
	pthread_mutex_lock(&fs->fh_lock);
	struct fh_ent *other = fh_lookup(fs, id);
	if (other == NULL) {
		fh_unlink(fs, e);
		e->id = id;
		fh_link(fs, e);
	}
	pthread_mutex_unlock(&fs->fh_lock);
	return other;
}

struct fh_ent *tfs_fs_fh_find(struct tfs_fs *fs, uint64_t id)
{
	pthread_mutex_lock(&fs->fh_lock);
	struct fh_ent *e = fh_lookup(fs, id);
	pthread_mutex_unlock(&fs->fh_lock);
	return e;
}

void tfs_fs_fh_remove(struct tfs_fs *fs, struct fh_ent *e)
{
	pthread_mutex_lock(&fs->fh_lock);
	fh_unlink(fs, e);
	pthread_mutex_unlock(&fs->fh_lock);
}

struct fh_ent *tfs_fs_fh_any(struct tfs_fs *fs)
{
	struct fh_ent *e = NULL;
	pthread_mutex_lock(&fs->fh_lock);
	for (size_t i = 0; e == NULL && fs->fh_count && i < TFS_FS_FH_BUCKETS; i++)
		e = fs->fhs[i];
	pthread_mutex_unlock(&fs->fh_lock);
	return e;
}

struct fh *tfs_fs_fh_new(struct tfs_fs *fs, const char *key)
{
	struct fh *h = calloc(1, sizeof(*h));
	if (h == NULL || (h->key = strdup(key)) == NULL) {
		free(h);
		return NULL;
	}
	pthread_mutex_init(&h->lock, NULL);
	tfs_fs_fh_enter(fs, &h->ent);
	return h;
}

void tfs_fs_fh_free(struct tfs_fs *fs, struct fh *h)
{
	tfs_fs_fh_remove(fs, &h->ent);
	if (h->wf)
		(void)tfs_wb_release(fs->wb, h->wf, h->writer);
	if (h->order)
		tfs_fs_order_free(fs, h);
	for (size_t i = 0; i < h->n_retired; i++)
		free(h->retired_keys[i]);
	free(h->retired_keys);
	pthread_mutex_destroy(&h->lock);
	free(h->key);
	free(h);
}
