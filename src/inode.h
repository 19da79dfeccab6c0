/* inode.h - the inode table: FUSE inode numbers for the paths the kernel
 * knows about, with their lookup counts and cached attributes.
 *
 * An inode lives while the kernel holds a lookup on it (lookup and
 * readdirplus add one, forget removes n); the root (FUSE_ROOT_ID) lives
 * forever.  Inode numbers are assigned from a counter and not reused
 * during a mount.  Memory is proportional to what the kernel caches, not
 * to the size of the bucket.
 *
 * Locking: one mutex protects the tables and every inode's mutable fields
 * (nlookup, attr, attr_ms, kernel_etag); use the accessors.  An inode
 * pointer obtained from tfs_itable_find() stays valid for the duration of
 * a FUSE request on that inode (the kernel sends no final forget while a
 * request is in flight).
 */
#ifndef TFS_INODE_H
#define TFS_INODE_H

#include <stdbool.h>
#include <stdint.h>

#include "meta.h"

struct tfs_inode {
	uint64_t ino;
	char *path;          /* "" for the root, else "a/b" (immutable) */
	enum tfs_ftype type; /* immutable */
	/* Under the table lock: */
	uint64_t nlookup;
	struct tfs_attr attr;
	uint64_t attr_ms;               /* CLOCK_REALTIME ms when attr was fetched */
	char kernel_etag[TFS_ETAG_MAX]; /* version whose pages the kernel may hold */
	struct tfs_inode *next_ino, *next_path;
};

struct tfs_itable;

/* Create a table holding the root.  Returns 0 or ENOMEM. */
int tfs_itable_create(struct tfs_itable **out);
void tfs_itable_destroy(struct tfs_itable *t);

/* Find or create the inode of `path` with attributes `a` (which replace the
 * cached ones), and add one lookup.  A path whose type changed (a file
 * became a directory) gets a new inode.  Returns 0 or ENOMEM. */
int tfs_itable_lookup(struct tfs_itable *t, const char *path, const struct tfs_attr *a,
		      struct tfs_inode **out);

/* The inode numbered `ino`, or NULL. */
struct tfs_inode *tfs_itable_find(struct tfs_itable *t, uint64_t ino);

/* Drop `n` lookups; the inode is freed at zero (never the root). */
void tfs_itable_forget(struct tfs_itable *t, uint64_t ino, uint64_t n);

/* Copy out / replace the cached attributes, under the lock. */
void tfs_itable_get_attr(struct tfs_itable *t, const struct tfs_inode *in, struct tfs_attr *a,
			 uint64_t *attr_ms);
void tfs_itable_set_attr(struct tfs_itable *t, struct tfs_inode *in, const struct tfs_attr *a);

/* Record that the kernel will cache pages of version `etag`; returns true
 * when it already held that version (the page cache may be kept). */
bool tfs_itable_swap_kernel_etag(struct tfs_itable *t, struct tfs_inode *in, const char *etag);

/* Number of live inodes. */
uint64_t tfs_itable_count(struct tfs_itable *t);

#endif
