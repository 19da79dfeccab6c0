/* vfs.c - the file core's state and life, and attributes: a path's
 * current attributes (the control file, dirty state, the metadata
 * cache), the struct stat they show, and inode paths.
 *
 * Calls order_file.c (the control file's attributes) and nothing else of
 * vfs/ but the inode table.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "path.h"
#include "vfs_state.h"

/* The root's node ID (FUSE_ROOT_ID). */
#define ROOT_ID 1

mode_t tfs_vfs_perm(const struct tfs_vfs *v, mode_t mode)
{
	return mode & (v->cfg.keep_setid ? 07777 : 07777 & ~(mode_t)(S_ISUID | S_ISGID));
}

mode_t tfs_vfs_type_bits(const struct tfs_attr *a)
{
	if (a->type == TFS_FT_DIR)
		return S_IFDIR;
	return a->fmt ? (mode_t)a->fmt : S_IFREG;
}

void tfs_vfs_fill_stat(const struct tfs_vfs *v, uint64_t ino, const struct tfs_attr *a,
		       struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino ? a->ino : ino | TFS_VFS_NODEID_INO;
	mode_t def = a->type == TFS_FT_DIR ? v->cfg.dir_mode : v->cfg.file_mode;
	if (a->fmt == S_IFLNK)
		def = 0777;
	st->st_mode = tfs_vfs_type_bits(a) |
		      tfs_vfs_perm(v, a->mode != TFS_META_UNSET ? a->mode : def);
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
	st->st_uid = a->uid != TFS_META_UNSET ? a->uid : v->cfg.uid;
	st->st_gid = a->gid != TFS_META_UNSET ? a->gid : v->cfg.gid;
	st->st_blksize = (blksize_t)v->block_size;
	/* A directory without a marker has no time in S3: show the mount's. */
	if (a->type == TFS_FT_DIR && a->mtime == 0) {
		st->st_mtim.tv_sec = (time_t)v->root_attr.mtime;
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

int tfs_vfs_attr(struct tfs_vfs *v, const char *path, struct tfs_attr *a)
{
	if (path[0] == '\0') {
		*a = v->root_attr;
		return 0;
	}
	if (v->follow && tfs_vfs_is_order_file(path)) {
		tfs_vfs_order_attr(v, a);
		return 0;
	}
	if (v->wb && tfs_wb_attr(v->wb, path, a)) {
		a->ino = tfs_meta_ino(v->meta, path);
		return 0;
	}
	char dir[PATH_MAX];
	const char *name;
	bool changed = false;
	int rc = tfs_path_split(path, dir, sizeof(dir), &name);
	if (rc == 0)
		rc = tfs_meta_lookup(v->meta, dir, name, a, &changed);
	if (rc)
		return rc;
	if (changed) {
		struct tfs_obj obj;
		tfs_obj_init(&obj, path, "", 0);
		tfs_info(v->log, "'%s' changed in the bucket (ETag %s): cached data dropped", path,
			 a->etag);
		tfs_layer_invalidate(v->top, obj.id);
	}
	return 0;
}

int tfs_vfs_ino_path(struct tfs_vfs *v, uint64_t ino, char *buf, struct tfs_inode **out)
{
	struct tfs_inode *in = tfs_itable_find(v->itable, ino);
	if (in == NULL)
		return ESTALE;
	if (out)
		*out = in;
	return tfs_itable_path(v->itable, in, buf, PATH_MAX);
}

int tfs_vfs_create(const struct tfs_fs_config *cfg, struct tfs_meta *meta, struct tfs_layer *top,
		   struct tfs_prefetch *pf, struct tfs_wb *wb, struct tfs_backend *be,
		   const struct tfs_log *log, struct tfs_vfs **out)
{
	struct tfs_vfs *v = calloc(1, sizeof(*v));
	if (v == NULL)
		return ENOMEM;
	/* Node IDs persist in the metadata cache's environment, keyed by the
	 * mountpoint (vfs.h: resumed). */
	const char *mount = tfs_meta_mount(meta);
	int rc = 0;
	if (mount && tfs_nodes_open(tfs_meta_env(meta), mount, !cfg->resumed, log, &v->nodes))
		tfs_warn(log, "fuse: node IDs are not persisted: a restarted daemon cannot "
			      "resolve them");
	if (v->nodes)
		rc = tfs_itable_open(v->nodes, cfg->resumed, log, &v->itable);
	else if (rc == 0)
		rc = tfs_itable_create(&v->itable);
	if (rc) {
		tfs_nodes_close(v->nodes);
		free(v);
		return rc;
	}
	v->cfg = *cfg;
	/* a copy: a reload frees the configuration's strings */
	v->cfg.statfs_dir = cfg->statfs_dir ? strdup(cfg->statfs_dir) : NULL;
	if (cfg->statfs_dir && v->cfg.statfs_dir == NULL) {
		tfs_itable_destroy(v->itable);
		tfs_nodes_close(v->nodes);
		free(v);
		return ENOMEM;
	}
	v->meta = meta;
	v->top = top;
	v->pf = pf;
	v->wb = wb;
	if (wb) /* an earlier daemon's unclosed files: for their writers, or lost+found */
		tfs_wb_settle_open(wb, cfg->resumed);
	v->be = be;
	v->log = log;
	pthread_mutex_init(&v->ns_lock, NULL);
	pthread_cond_init(&v->ns_cond, NULL);
	pthread_mutex_init(&v->fh_lock, NULL);
	v->block_size = top->block_size;
	atomic_init(&v->ttl_ms, cfg->ttl_ms);
	v->root_attr.type = TFS_FT_DIR;
	v->root_attr.mtime = (int64_t)time(NULL);
	v->root_attr.mode = v->root_attr.uid = v->root_attr.gid = TFS_META_UNSET;
	v->root_attr.ino = ROOT_ID; /* below the metadata cache's numbers */
	*out = v;
	return 0;
}

void tfs_vfs_destroy(struct tfs_vfs *v)
{
	if (v == NULL)
		return;
	tfs_itable_destroy(v->itable);
	tfs_nodes_close(v->nodes);
	pthread_cond_destroy(&v->ns_cond);
	pthread_mutex_destroy(&v->ns_lock);
	pthread_mutex_destroy(&v->fh_lock);
	free((char *)v->cfg.statfs_dir);
	free(v);
}

void tfs_vfs_set_follow(struct tfs_vfs *v, struct tfs_follow *follow,
			const struct tfs_manifest_scope *scope)
{
	v->follow = follow;
	v->scope = scope;
}

void tfs_vfs_set_ttl(struct tfs_vfs *v, uint64_t ttl_ms)
{
	atomic_store(&v->ttl_ms, ttl_ms);
}

uint64_t tfs_vfs_ttl_ms(const struct tfs_vfs *v)
{
	return atomic_load(&v->ttl_ms);
}
