/* inode.h - the inode table: FUSE inode numbers for the paths the kernel
 * knows about, with their lookup counts.
 *
 * An inode lives while the kernel holds a lookup on it (lookup and
 * readdirplus add one, forget removes n); the root (FUSE_ROOT_ID) lives
 * forever.  Inode numbers are assigned from a counter; one is reused only
 * for the same path after the kernel forgot it (ghosts, below).  Attributes are not kept here: they live in the metadata
 * cache (LMDB), so an inode costs about 80 bytes plus its path, and a walk
 * of a million objects stays small.
 *
 * Persistence (tfs_itable_open() with a node store, cache/nodes.h): the
 * table survives the daemon process, so that a daemon that replaces a dead
 * one on the same kernel connection serves every node ID the kernel still
 * holds.  Every inode given to the kernel (lookup, create, mkdir, mknod,
 * symlink, readdirplus) is in LMDB, with its path, type and kind, before
 * the reply that gives its ID; so is every path change (rename of it or
 * of a directory above it, detach).  The counter is stored with them, and
 * a resumed table gives out IDs above every ID stored, so no ID is given
 * out twice in a mount, except this one way: the record of an inode freed
 * by its final forget stays in LMDB as a ghost (up to GHOST_MAX, 256 Ki,
 * the oldest retired first), and a later lookup of the same path, type
 * and kind takes that ID back once LMDB confirms the record, writing
 * nothing: the kernel no longer holds the ID, and the record already
 * says what the node is.  So a warm epoch whose nodes the kernel evicted
 * costs no LMDB write per file.  Retired ghosts (and records whose
 * inode was freed before its record was written) are deleted from
 * LMDB in batches (FORGET_BATCH, or with the next write): a record lost
 * in a crash only keeps an ID resolvable that the kernel no longer sends.
 * A fresh mount wipes its records.  Commits are not fsynced: a crash of
 * the process keeps them (the page cache), and after a reboot there is no
 * kernel connection to resume.
 *
 * Resurrected inodes (loaded by a resumed table) have lookup counts from
 * before that the new daemon does not know.  The kernel sends FORGET when
 * it evicts an inode, with its whole count, which for a resurrected
 * inode includes the earlier daemons' lookups, so it exceeds the lookups
 * this daemon gave: such a FORGET frees it.  A smaller one (the kernel
 * returning lookups of this daemon it could not use) only subtracts.  So
 * a resurrected inode lives until its final FORGET or the end of the
 * mount, and a FORGET of an unknown ID is a no-op.
 *
 * Locking: one mutex protects the tables and every inode's mutable fields
 * (nlookup, kernel_etag, attr_etag, attr_mixed, path); use the accessors.
 * An inode pointer obtained from tfs_itable_find() stays valid for the
 * duration of a FUSE request on that inode (the kernel sends no final
 * forget while a request is in flight).
 */
#ifndef TFS_INODE_H
#define TFS_INODE_H

#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "meta.h"
#include "nodes.h"

struct tfs_inode {
	uint64_t ino;
	struct tfs_inode *next_ino, *next_path;
	/* Under the table lock: */
	uint64_t nlookup;
	uint64_t kernel_etag;  /* hash of the version whose pages the kernel may hold; 0: none */
	uint64_t attr_etag;    /* hash of the version whose attributes (size) the
			       * kernel was last sent; 0: none yet; 2: not a
			       * clean version (staged, or being changed) */
	bool attr_mixed;       /* attributes of more than one version were sent
			       * since the last tfs_itable_swap_attr_etag() */
	bool queued;           /* its record is queued for the next persist */
	bool resurrected;      /* loaded from the persisted table (see above) */
	bool referenced;       /* looked up or used since the trim clock last
			       * passed it (tfs_itable_pick_trim()) */
	enum tfs_ftype type;   /* immutable */
	uint32_t fmt;          /* immutable: struct tfs_attr's fmt */
	struct tfs_attr *snap; /* detached by unlink/rename-over: its last attributes */
	void *staged;          /* ... and its staged copy, released with the inode */
	char *path;            /* "" for the root, else "a/b", or TFS_ITABLE_DETACHED
			       * "<ino>" once detached; changed by rename and
			       * detach under the table lock: read it with
			       * tfs_itable_path() */
};

/* Detached inodes.  When a name goes away (unlink, rmdir, or a rename over
 * it), its inode and those below it stay in the table while the kernel
 * holds lookups on them (files still open), but no name reaches them:
 * tfs_itable_detach(), tfs_itable_detach_keep() and tfs_itable_rename()
 * (inode.c's only writers of such paths) give each the path
 * TFS_ITABLE_DETACHED followed by its number ("//detached/42").  No lookup
 * makes a path with an empty segment, so that path never meets a name the
 * kernel sends, and a new file of the old name gets a new inode.
 * tfs_itable_path() returns it like any path; a caller that must know
 * whether the inode still has a name tests it with
 * tfs_itable_path_is_detached() (fs.c's read handler, which then stops
 * following the name).  What an inode kept when detached (its last
 * attributes and staged copy) is read with tfs_itable_detached(). */
#define TFS_ITABLE_DETACHED "//detached/"

struct tfs_itable;

/* Create a table holding the root, in memory only.  Returns 0 or
 * ENOMEM. */
int tfs_itable_create(struct tfs_itable **out);
/* Create a table kept in `store` (borrowed; its records must have been
 * wiped when !resumed: tfs_nodes_open()).  `resumed`: load every
 * persisted inode (resurrected, see above) and give out IDs above all of
 * them.  Returns 0, ENOMEM, or the store's error (EIO). */
int tfs_itable_open(struct tfs_nodes *store, bool resumed, const struct tfs_log *log,
		    struct tfs_itable **out);
/* Writes the changes not persisted yet (forgets), then frees. */
void tfs_itable_destroy(struct tfs_itable *t);

/* Write every queued change (inodes made, moved, freed) to the store in
 * one transaction; when it returns, every change made before the call is
 * in LMDB (the caller may reply).  No-op without a store.  Returns 0 or
 * the store's error (logged; the changes stay queued for the next
 * call). */
int tfs_itable_persist(struct tfs_itable *t);

/* Find or create the inode of `path` with type `type` and kind `fmt`
 * (struct tfs_attr's), and add one lookup.  A path whose type or kind
 * changed (a file became a directory or a symlink) gets a new inode,
 * persisted before the return (a failure to persist is logged, not
 * returned: the mount goes on, only a restart could not resolve it).
 * Returns 0 or ENOMEM. */
int tfs_itable_lookup(struct tfs_itable *t, const char *path, enum tfs_ftype type, uint32_t fmt,
		      struct tfs_inode **out);
/* The same without persisting: the caller calls tfs_itable_persist()
 * before it replies (readdirplus: one transaction for a reply's
 * entries). */
int tfs_itable_lookup_nosync(struct tfs_itable *t, const char *path, enum tfs_ftype type,
			     uint32_t fmt, struct tfs_inode **out);

/* The inode numbered `ino`, or NULL. */
struct tfs_inode *tfs_itable_find(struct tfs_itable *t, uint64_t ino);

/* Drop `n` lookups; the inode is freed at zero (never the root; a
 * resurrected inode as said above).  An unknown `ino` is a no-op. */
void tfs_itable_forget(struct tfs_itable *t, uint64_t ino, uint64_t n);

/* Record that the kernel will cache pages of version `etag`; returns true
 * when it already held that version (the page cache may be kept). */
bool tfs_itable_swap_kernel_etag(struct tfs_itable *t, struct tfs_inode *in, const char *etag);

/* Record that the kernel is sent the attributes of version `etag` ("":
 * of no clean version: a staged file, or one about to be written or
 * truncated, whose size the kernel changes itself).  Called before each
 * reply that carries the inode's attributes. */
void tfs_itable_set_attr_etag(struct tfs_itable *t, struct tfs_inode *in, const char *etag);

/* A handle of the inode now reads clean version `etag` (non-empty), and
 * the caller makes sure the kernel's attributes are that version's: returns
 * true when they are already, i.e. every attribute reply since the last
 * swap (or since the inode was made) was of `etag`.  The kernel keeps the
 * first of racing replies and drops the others, so after replies of two
 * versions it may hold either: then false.  On false the caller makes the
 * kernel fetch its attributes again.  Both cases record `etag`. */
bool tfs_itable_swap_attr_etag(struct tfs_itable *t, struct tfs_inode *in, const char *etag);

/* Copy the inode's current path into buf (a detached inode's starts with
 * TFS_ITABLE_DETACHED).  Returns 0 or ENAMETOOLONG. */
int tfs_itable_path(struct tfs_itable *t, const struct tfs_inode *in, char *buf, size_t len);

/* Whether `path`, as tfs_itable_path() returned it, is a detached inode's
 * (it starts with TFS_ITABLE_DETACHED).  Takes no lock: it only reads
 * `path`. */
bool tfs_itable_path_is_detached(const char *path);

/* After a rename: the inodes at `from` and below it now have the paths at
 * `to` and below; inodes that were at `to` or below are detached (they keep
 * their numbers for open files, but no path reaches them).  Persisted
 * before the return.  Returns 0 or ENOMEM (then some inodes may have
 * moved). */
int tfs_itable_rename(struct tfs_itable *t, const char *from, const char *to);

/* After an unlink or rmdir: detach the inodes at `path` and below, so a
 * new file of the same name gets a new inode.  Persisted before the
 * return (so is tfs_itable_detach_keep()'s).  Returns 0 or ENOMEM. */
int tfs_itable_detach(struct tfs_itable *t, const char *path);

/* Like tfs_itable_detach(), and the inode that was exactly at `path`
 * keeps `snap` (copied) and `staged` (a reference handed over, released
 * with the release function when the inode goes; may be NULL), so fstat()
 * of a file still open after its name went keeps working.  Returns 0 or
 * ENOMEM (then `staged` is released). */
int tfs_itable_detach_keep(struct tfs_itable *t, const char *path, const struct tfs_attr *snap,
			   void *staged);
/* The release function for `staged` references.  Takes the table's lock:
 * fs_write.c sets it before each detach, while other threads may be
 * freeing inodes. */
void tfs_itable_set_release(struct tfs_itable *t, void (*fn)(void *ctx, void *staged), void *ctx);
/* For a detached inode: its snapshot (copied to *a) and staged copy
 * (*staged, borrowed for the duration of a request on the inode).
 * Returns false for a live inode. */
bool tfs_itable_detached(struct tfs_itable *t, const struct tfs_inode *in, struct tfs_attr *a,
			 void **staged);

/* Bound on the live inodes (mount.max_inodes).  The kernel holds a lookup
 * on every inode whose dentry it caches, and drops them only under memory
 * pressure, so a walk of a million files would keep a million inodes here
 * (about 140 bytes each with their paths and hash buckets).  Above `max`
 * inodes, the FUSE layer asks the kernel to drop dentries
 * (fuse_lowlevel_notify_inval_entry(), src/fs_trim.c): the kernel then
 * sends FORGET for those it does not use (no open file, no cwd), and their
 * inodes are freed.  Entries in use stay, so the count may exceed `max`
 * by what is in use.  0: no bound. */
void tfs_itable_set_max(struct tfs_itable *t, uint64_t max);
/* Live inodes above the bound (0 when within it or unbounded). */
uint64_t tfs_itable_excess(struct tfs_itable *t);

/* A name to invalidate: the entry `name` of directory node `parent`. */
struct tfs_itable_victim {
	uint64_t parent;
	char name[256];
};
/* Pick up to `n` inodes for the kernel to drop, with a clock over the
 * table: an inode looked up or used since the clock last passed it is
 * spared once (its `referenced` bit is cleared); the root, detached
 * inodes and inodes whose parent directory has no inode are skipped.
 * Fills v[0..ret) and counts them in tfs_itable_trim_count().  Takes the
 * table lock; sends nothing. */
size_t tfs_itable_pick_trim(struct tfs_itable *t, struct tfs_itable_victim *v, size_t n);
/* Inodes picked by tfs_itable_pick_trim() so far. */
uint64_t tfs_itable_trim_count(struct tfs_itable *t);

/* Number of live inodes. */
uint64_t tfs_itable_count(struct tfs_itable *t);
/* Failed persists so far. */
uint64_t tfs_itable_persist_errors(struct tfs_itable *t);
/* Node IDs taken back from ghosts, and ghosts retired, so far. */
void tfs_itable_ghost_counts(struct tfs_itable *t, uint64_t *reused, uint64_t *retired);

#endif
