/* meta_internal.h - state and helpers shared by the files of the metadata
 * cache.  Not for use outside cache/meta*.c: the cache's interface is
 * meta.h.
 *
 *   meta.c          lookups (revalidation, HEADs of unsettled entries),
 *                   local changes from write-back, inode numbers, stats,
 *                   open/close
 *   meta_list.c     listings (refresh, prune, readdir) and listing ahead
 *                   of lookups (the lister threads)
 *   meta_store.c    the LMDB records: their encoding, entry and directory
 *                   reads and writes, tombstones, inode numbers given out
 *   meta_headers.c  what s3fs's x-amz-meta-* headers say (pure)
 *
 * Calls go one way: meta.c -> meta_list.c -> meta_store.c; meta.c calls
 * meta_store.c too, and meta.c and meta_list.c both call meta_headers.c.
 * No file calls one above it.
 *
 * LOCKING
 *
 *   stripes    (mutexes) single-flight listing: ensure_listed() holds
 *              stripes[h[0] % STRIPES] while it checks the cached listing
 *              again and lists the directory, backend calls included.
 *   list_lock  (mutex) the queue of listing ahead, `running` and
 *              `list_failed_ms`.  Condition `list_work`: a directory was
 *              queued, or stop.  A leaf: never held across LMDB or a
 *              backend call, nor together with a stripe.
 *   LMDB's writer lock: every write transaction is short and never spans
 *   a backend call.  Order: stripe -> LMDB writer.
 *   Atomics: ttl_ms, stop, the counters, and each lister's tag and demand.
 */
#ifndef TFS_META_INTERNAL_H
#define TFS_META_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta.h"

#define HLEN 16 /* bytes of H(dir) (meta_dir_hash()) */
#define STRIPES 64
#define LISTER_THREADS 2 /* background listings at a time */
#define LIST_QUEUE 64    /* directories waiting for one; more are not queued */
#define TYPE_WHITEOUT 0  /* a LOCAL entry hiding a name being deleted */

/* The record of a directory in meta_dirs (key H(dir)): its last listing. */
struct dirrec {
	uint64_t listed_ms; /* start of the last listing (complete unless
			     * DIR_PARTIAL); 0: never */
	uint64_t flags;     /* DIR_AHEAD, DIR_PARTIAL */
};

/* Listed ahead of lookups, not for a readdir: its entries answer lookups,
 * but a name it lacks is still asked for (HEAD).  An object created after
 * such a listing is thus found at once; only a listing the user saw
 * (readdir) answers "no such name" for the TTL. */
#define DIR_AHEAD 0x1
/* With DIR_AHEAD: the listing stopped early for lack of lookups, so it
 * holds only the first names of the directory.  Its entries answer
 * lookups; a readdir lists the directory afresh; and until it expires it
 * stops lookups from queueing the directory again (a name beyond it is
 * HEADed, as without listing ahead). */
#define DIR_PARTIAL 0x2

struct tfs_meta {
	MDB_env *env;
	char *mount; /* tfs_meta_set_mount(), or NULL */
	MDB_dbi entries, dirs;
	struct tfs_backend *be;
	_Atomic uint64_t ttl_ms; /* changed by tfs_meta_set_ttl() */
	enum tfs_fetch_headers fetch_headers;
	const struct tfs_log *log;
	pthread_mutex_t stripes[STRIPES]; /* single-flight listing per directory */
	atomic_bool stop;                 /* closing: refresh() gives up between pages */
	/* Listing ahead of lookups (see the top of meta_list.c).
	 * `list_lock` protects the queue, `running` and `list_failed_ms`;
	 * `list_work` is signalled when a directory is queued or on stop. */
	bool list_ahead;
	pthread_mutex_t list_lock;
	pthread_cond_t list_work;
	char *queue[LIST_QUEUE]; /* directories to list, oldest at qhead (owned) */
	size_t qhead, qlen;
	char *running[LISTER_THREADS]; /* being listed (owned by the lister) */
	uint64_t list_failed_ms;       /* when the last background listing failed */
	struct lister {
		struct tfs_meta *m;
		int slot; /* its index in running[] */
		pthread_t thread;
		/* While it lists a directory: dir_tag() of it (0: none), and
		 * the lookups in that directory since the listing began. */
		_Atomic uint64_t tag;
		atomic_uint_fast64_t demand;
	} listers[LISTER_THREADS];
	int nlisters;
	atomic_uint_fast64_t hits, neg_hits, backend_lookups, listings, list_pages, stale_served,
		errors, listed_ahead, listed_partial;
};

/* ---- meta_store.c: records, entries, directories ----
 * Where they take them, `h` is H(dir) (HLEN bytes) and `name` a name of
 * at most NAME_MAX bytes (the callers check).  None of these takes a lock
 * of struct tfs_meta; those that open a transaction say so. */

/* Was something fetched at `fetched` (wall ms) still fresh at `now` under
 * the TTL?  UINT64_MAX trusts it forever; a time after `now` counts as
 * fresh.  Pure but for an atomic load. */
bool meta_fresh(struct tfs_meta *m, uint64_t fetched, uint64_t now);

/* H(dir): the first HLEN bytes of SHA-256(dir).  Cannot fail. */
void meta_dir_hash(const char *dir, uint8_t h[HLEN]);

/* An LMDB result as an errno (tfs_lmdb_errno()), logged ("meta: <what>")
 * unless it is 0 or MDB_NOTFOUND (ENOENT: an answer, not a failure). */
int meta_errno(const struct tfs_meta *m, int rc, const char *what);

/* Whether `v` is a record this code reads (version 2 or 3, its length
 * matching its ETag's).  Pure. */
bool meta_valid_rec(const MDB_val *v);

/* Decode record `v` (meta_valid_rec() true) into *a (every field set) and
 * the time it was fetched into *fetched.  Cannot fail. */
void meta_decode(const MDB_val *v, struct tfs_attr *a, uint64_t *fetched);

/* Whether two attributes are of the same kind of file (a name that keeps
 * its kind keeps its inode number).  Pure. */
bool meta_same_kind(const struct tfs_attr *a, const struct tfs_attr *b);

/* Write the entry `name` of directory h with attributes `a` and fetch time
 * `fetched` inside the caller's write transaction.  An entry without an
 * inode number keeps the one stored under its name while its kind stays
 * (meta_same_kind()), else gets a new one from the counter in meta_dirs
 * (a whiteout gets none); *ino_out (may be NULL) receives the number
 * written.  Returns 0 or an LMDB code (not logged: the caller aborts the
 * transaction and maps it with meta_errno()). */
int meta_put_entry(MDB_txn *txn, struct tfs_meta *m, const uint8_t h[HLEN], const char *name,
		   const struct tfs_attr *a, uint64_t fetched, uint64_t *ino_out);

/* Read entry `name` of directory h in a read transaction of its own.
 * Returns 0 (*a, *fetched set), ENOENT (none, or a record that does not
 * decode) or an LMDB errno (EIO, logged). */
int meta_get_entry(struct tfs_meta *m, const uint8_t h[HLEN], const char *name, struct tfs_attr *a,
		   uint64_t *fetched);

/* Read entry `name` of directory h inside `txn`.  Returns 0 (*a, *fetched
 * set), MDB_NOTFOUND (also for a record that does not decode) or another
 * LMDB code (not logged). */
int meta_txn_get(struct tfs_meta *m, MDB_txn *txn, const uint8_t h[HLEN], const char *name,
		 struct tfs_attr *a, uint64_t *fetched);

/* Read the listing record of directory h in a read transaction of its
 * own.  Returns 0 (*d set; an 8-byte record from before flags existed
 * reads with flags 0), ENOENT (*d zeroed: none, or a record of another
 * size) or an LMDB errno (EIO, logged). */
int meta_get_dir(struct tfs_meta *m, const uint8_t h[HLEN], struct dirrec *d);

/* Store entry `name` of directory h in a write transaction of its own;
 * a->ino gets the number stored (meta_put_entry()) once it is committed.
 * Returns 0 or an LMDB errno (logged). */
int meta_store_entry(struct tfs_meta *m, const uint8_t h[HLEN], const char *name,
		     struct tfs_attr *a, uint64_t fetched);

/* A tombstone: the entry of a name known to be gone since now.  It
 * answers nothing (a lookup asks the backend, readdir skips it), but a
 * listing that began before it cannot bring the name back (store_page()
 * in meta_list.c keeps entries newer than the listing), and the next
 * complete listing prunes it.  Inside the caller's write transaction.
 * Returns 0 or an LMDB code (not logged). */
int meta_put_tombstone(MDB_txn *txn, struct tfs_meta *m, const uint8_t h[HLEN], const char *name);

/* Is `a` a tombstone (meta_put_tombstone())?  Pure. */
bool meta_tombstone(const struct tfs_attr *a);

/* Forget the cached entry `name` of `dir` (the object is gone): a
 * tombstone, in a write transaction of its own.  A name over NAME_MAX is
 * ignored.  Cannot fail: a failure is logged as a warning. */
void meta_forget(struct tfs_meta *m, const char *dir, const char *name);

/* Split "a/b/c" into "a/b" and "c" (dir "" at the root; *name points into
 * `path`): tfs_path_split().  Returns 0, or ENAMETOOLONG when the
 * directory does not fit in `dlen` bytes or the last component is over
 * NAME_MAX. */
int meta_split_path(const char *path, char *dir, size_t dlen, const char **name);

/* The hash of the directory of `path` and its last name (*name points
 * into `path`).  Returns 0 or ENAMETOOLONG. */
int meta_path_entry(const char *path, uint8_t h[HLEN], const char **name);

/* Change the entry at `path` in a write transaction of its own: `fn` edits
 * its attributes (not a whiteout), which are written back with the time
 * they were fetched.  Returns 0, ENOENT (no such entry), ENAMETOOLONG or
 * an LMDB errno (logged with `what`). */
int meta_edit_entry(struct tfs_meta *m, const char *path, void (*fn)(struct tfs_attr *a, void *ctx),
		    void *ctx, const char *what);

/* ---- meta_list.c: listings and listing ahead ---- */

/* Count a lookup in the directory with hash h for a lister listing it
 * (the demand that keeps a listing ahead going).  Atomics only; cannot
 * fail. */
void meta_note_lookup(struct tfs_meta *m, const uint8_t h[HLEN]);

/* Queue `dir` for a background listing, unless listing ahead is off, the
 * TTL is 0 (a listing would never be trusted), the cache is closing, a
 * listing failed less than LIST_RETRY_MS (meta_list.c) ago, or it is
 * queued or being listed already.  A full queue (or no memory for the
 * copy) drops the request: the lookups still work, by HEAD.  Takes
 * list_lock.  Cannot fail. */
void meta_list_ahead(struct tfs_meta *m, const char *dir);

/* Start the lister threads when m->list_ahead is set (once, from
 * tfs_meta_open(), after list_lock and list_work are initialised).  A
 * thread that cannot start is logged and no more are started; with none
 * started, m->list_ahead is turned off.  Cannot fail. */
void meta_listers_start(struct tfs_meta *m);

/* Set `stop`, wake and join the lister threads (a listing in progress
 * stops at its next page) and free the queue (once, from
 * tfs_meta_close(), before list_lock is destroyed).  Takes list_lock. */
void meta_listers_stop(struct tfs_meta *m);

/* The directories queued for listing ahead or being listed.  Takes
 * list_lock.  Cannot fail. */
size_t meta_list_pending(struct tfs_meta *m);

#endif
