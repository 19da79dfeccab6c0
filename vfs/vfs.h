/* vfs.h - the file core: what files, handles and names mean over the
 * cache layers, with no FUSE (issue 33).  src/fs*.c adapts it to libfuse:
 * it decodes a request, calls in here, replies once and counts.
 *
 * Every function returns 0 or a positive errno and logs the cause of an
 * unexpected failure; none replies to anything.  The parts:
 * - vfs.c: the state's life, attributes (a path's current attributes, the
 *   struct stat they show), inode paths;
 * - read.c: the read path (a staged copy, or a version through the cache
 *   stack, with read-ahead and version moves);
 * - write.c: writes, closes and fsyncs over write-back (vfs_state.h);
 * - namespace.c: what a name is (lookup);
 * - handle.c: open files as a tagged type (struct tfs_vfs_handle in
 *   vfs_state.h: a clean version, a staged copy, or the control file)
 *   and the table of fh values the kernel holds;
 * - order_file.c: the control file TFS_FOLLOW_FILE's handles (follow.h);
 * - inode.c, follow.c, manifest.c: the inode table, sampler-order
 *   prefetch and its manifests.
 *
 * Lock order: no lock is held across a backend call or a cache fill; the
 * inode table's lock is taken only inside inode.c.
 */
#ifndef TFS_VFS_H
#define TFS_VFS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "inode.h"
#include "layer.h"
#include "meta.h"
#include "prefetch.h"

/* The file core's settings (the FUSE adapter's too: it has none of its
 * own), filled by `tierfs mount` and the daemon. */
struct tfs_fs_config {
	uid_t uid; /* owner of files without x-amz-meta-uid */
	gid_t gid;
	mode_t file_mode; /* permission bits of files without x-amz-meta-mode */
	mode_t dir_mode;
	bool keep_setid;        /* [mount] trusted: keep S_ISUID and S_ISGID; false
			   * drops them from every mode shown (object metadata,
			   * cached entries) and from modes written (chmod,
			   * create, mkdir) */
	uint64_t ttl_ms;        /* cache.metadata_ttl; UINT64_MAX: forever */
	uint64_t order_max;     /* prefetch.order_max: the most bytes one handle of the
			     * control file TFS_FOLLOW_FILE collects (the order
			     * memory of all is counted by follow.c) */
	const char *statfs_dir; /* statfs reports this directory's filesystem (copied) */
	uint64_t max_inodes;    /* mount.max_inodes (inode.h); 0: no bound */
	/* This daemon serves a kernel connection that an earlier daemon of the
	 * same mount served (a restart under the keeper, or an upgrade): node
	 * IDs and file handles from before may arrive.  Node IDs resolve from
	 * the table the earlier daemons kept in LMDB (inode.h); an fh of
	 * theirs gets a handle rebuilt from its node and open flags.  false:
	 * a fresh mount, which wipes the persisted node table of its
	 * mountpoint.  Set by the daemon (src/daemon.c) under a keeper
	 * (src/keeper.h). */
	bool resumed;
	/* 0 for the first daemon of a mount, +1 for each restart or upgrade:
	 * the high 32 bits of every fh value this daemon gives out, so values
	 * of different daemons never meet. */
	uint32_t generation;
};

/* The largest file: S3's largest object (5 TiB).  A write or truncate
 * beyond it is EFBIG. */
#define TFS_VFS_MAX_FILE (5ull << 40)

/* Inode numbers shown for attributes without their own (a->ino 0: the
 * control file, a version whose name is gone) are the FUSE node id with
 * this bit set, apart from the metadata cache's numbers. */
#define TFS_VFS_NODEID_INO (1ull << 63)

struct tfs_vfs;
struct tfs_wb;
struct tfs_backend;
struct tfs_follow;
struct tfs_manifest_scope;

/* ---- vfs.c ---- */

/* Create the file core over the given parts (none owned; `wb` NULL makes
 * it read-only; `be` is used for renames in the bucket).  Opens the inode
 * table (persisted in the metadata cache's environment when it has a
 * mountpoint) and settles write-back's files left open by an earlier
 * daemon.  Returns 0, ENOMEM or the inode table's error. */
int tfs_vfs_create(const struct tfs_fs_config *cfg, struct tfs_meta *meta, struct tfs_layer *top,
		   struct tfs_prefetch *pf, struct tfs_wb *wb, struct tfs_backend *be,
		   const struct tfs_log *log, struct tfs_vfs **out);
/* Free it; every handle must have been freed (tfs_vfs_fh_any() NULL). */
void tfs_vfs_destroy(struct tfs_vfs *v);

/* Enable sampler-order prefetch and its control file (both borrowed; NULL
 * disables them; set before requests arrive, or at the end). */
void tfs_vfs_set_follow(struct tfs_vfs *v, struct tfs_follow *follow,
			const struct tfs_manifest_scope *scope);
/* Reload: a new cache.metadata_ttl (an atomic). */
void tfs_vfs_set_ttl(struct tfs_vfs *v, uint64_t ttl_ms);
uint64_t tfs_vfs_ttl_ms(const struct tfs_vfs *v);

/* The permission bits of `mode` the mount keeps: 07777, without S_ISUID
 * and S_ISGID unless cfg.keep_setid.  The sticky bit is always kept.  Every
 * mode shown (tfs_vfs_fill_stat) or written (chmod, create, mkdir) passes
 * through here. */
mode_t tfs_vfs_perm(const struct tfs_vfs *v, mode_t mode);
/* The S_IFMT bits `a` shows: S_IFDIR, S_IFREG, or a->fmt.  Pure. */
mode_t tfs_vfs_type_bits(const struct tfs_attr *a);
/* The struct stat of attributes `a`: defaults from cfg for what the object
 * does not say (0777 for a symlink), permission bits through
 * tfs_vfs_perm(), st_ino a->ino (else `ino` | TFS_VFS_NODEID_INO), times
 * unknown (0) shown as mtime. */
void tfs_vfs_fill_stat(const struct tfs_vfs *v, uint64_t ino, const struct tfs_attr *a,
		       struct stat *st);
/* Current attributes of `path`: the root, the control file (when
 * sampler-order prefetch is on), dirty state, then the metadata cache
 * (revalidated after the TTL; drops cached data of a changed object).
 * Returns 0 or an errno (ENOENT, ESTALE, EIO...). */
int tfs_vfs_attr(struct tfs_vfs *v, const char *path, struct tfs_attr *a);
/* The path of inode `ino` into buf (PATH_MAX).  Returns 0, ESTALE (no such
 * inode) or ENAMETOOLONG; *in (may be NULL) gets the inode.  A detached
 * inode's path starts with TFS_ITABLE_DETACHED (inode.h). */
int tfs_vfs_ino_path(struct tfs_vfs *v, uint64_t ino, char *buf, struct tfs_inode **in);

/* ---- namespace.c ---- */

/* The entry `name` of directory node `parent`: its attributes (the
 * control file's when sampler-order prefetch is on; a staged or locally
 * changed entry's from write-back; else the metadata cache's, revalidated
 * after the TTL, a changed object's cached data dropped) and its inode,
 * which takes one lookup (tfs_itable_lookup(), persisted).  Returns 0,
 * ENOENT (no such entry: the adapter's negative entry), ENOTDIR (the
 * parent is not a directory), ENAMETOOLONG (also: a key the backend
 * cannot hold), ESTALE (no such parent), ENOMEM or the metadata cache's
 * error. */
int tfs_vfs_lookup(struct tfs_vfs *v, uint64_t parent, const char *name, struct tfs_attr *a,
		   struct tfs_inode **out);

/* ---- read.c ---- */

struct tfs_vfs_handle;
struct tfs_ram_block;

/* The bytes of one read: buf[0..len), valid until tfs_vfs_data_release().
 * They live in a RAM-tier block (one block read) or in memory of their
 * own (a read spanning blocks, or a staged copy's). */
struct tfs_vfs_data {
	const char *buf;
	size_t len;
	struct tfs_inode *in;        /* the handle's inode, or NULL */
	char moved[TFS_ETAG_MAX];    /* non-empty: the handle moved to this
				       * version; the kernel's attributes of
				       * `in` may be another version's */
	struct tfs_ram_block *block; /* private: the block buf points into */
	bool block_done;             /* private: buf reaches the block's end */
	char *mem;                   /* private: buf's own memory */
};

/* Open `path` (inode `in`) for reading: a handle of its staged copy if it
 * is dirty, else of its current version (pinned: key, ETag, size).
 * Returns 0 and *out (tfs_vfs_handle_free() it), ESTALE (the name now
 * holds another type or kind than `in`), ENOMEM or tfs_vfs_attr()'s
 * error. */
int tfs_vfs_open_read(struct tfs_vfs *v, struct tfs_inode *in, const char *path,
		      struct tfs_vfs_handle **out);
/* Read `size` bytes at `off` through handle `h` of inode `ino`: from its
 * staged copy (the writer's bytes at once; a clean handle switches to the
 * staged copy once the file is written through this mount, and a handle
 * whose name is gone reads the staged copy its inode kept), else the
 * version it pins, through the cache stack, deciding read-ahead
 * (tfs_prefetch_sequential()).  The control file reads as empty.  A read
 * never mixes two versions; the handle moves to the current version (at
 * most once per read; out->moved says so) when the read starts at or past
 * the end of its version and a newer one exists, or when its version is
 * gone from the bucket.  Short at the end of the file; 0 bytes past it.
 * Returns 0 and *out (release it), or an errno (ESTALE: the version is
 * gone and the name leads to no other; ENOMEM; EIO...), logged. */
int tfs_vfs_read(struct tfs_vfs *v, struct tfs_vfs_handle *h, uint64_t ino, uint64_t off,
		 size_t size, struct tfs_vfs_data *out);
/* A symlink's target (node `ino`): its object's body, from the staged
 * copy while it is dirty, else through the cache stack (one block: a
 * target is shorter than PATH_MAX), NUL-terminated into target[].
 * Returns 0, EINVAL (not a symlink, as readlink(2)), ESTALE (no such
 * node, or its name now holds another type or kind), EIO (the body is
 * not the size its attributes say) or the read's error. */
int tfs_vfs_readlink(struct tfs_vfs *v, uint64_t ino, char target[PATH_MAX]);
/* Give back what a read's bytes hold (a zeroed or released *d is fine). */
void tfs_vfs_data_release(struct tfs_vfs *v, struct tfs_vfs_data *d);

#endif
