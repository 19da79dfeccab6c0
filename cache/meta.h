/* meta.h - the metadata cache: directory listings and object attributes
 * from the backend, persisted in LMDB so a remount starts warm.
 *
 * Paths: a directory is named by its path without a trailing '/' ("" is
 * the root, "a/b" a subdirectory); the object key of a file is
 * "<dir>/<name>" (or "<name>" at the root) and the listing prefix of a
 * directory "<dir>/".  Directories exist when a key has their prefix,
 * including "dir/" marker objects.  A name that is both a file and a
 * prefix is shown as the file.
 *
 * Freshness: an entry or a listing fetched less than `ttl_ms` ago is
 * trusted; UINT64_MAX trusts it forever (immutable datasets: no backend
 * call once cached, even when the backend is down).  A stale entry is
 * revalidated with HEAD; a stale listing is listed again.  A complete,
 * fresh listing made for a readdir also answers "no such name" without a
 * backend call; one made ahead of lookups (list_ahead) does not.
 *
 * Thread safety: all functions may be called concurrently.  Listings of
 * the same directory are single-flight (striped mutexes); LMDB write
 * transactions are short and never span a backend call.
 */
#ifndef TFS_META_H
#define TFS_META_H

#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "cache.h"
#include "log.h"

#define TFS_META_UNSET UINT32_MAX

enum tfs_ftype {
	TFS_FT_FILE = 1,
	TFS_FT_DIR = 2
};

/* Attributes of one name.  A TFS_FT_FILE is an object; `fmt` says which
 * kind of file it shows as: 0 a regular file, or S_IFLNK (its body is the
 * link's target), S_IFIFO, S_IFSOCK, S_IFCHR or S_IFBLK (metadata only),
 * from the type bits of x-amz-meta-mode as s3fs writes them.  A directory's
 * mode, owner and times come from its "dir/" marker object when it has one.
 * Times of 0 are unknown: shown as mtime. */
struct tfs_attr {
	enum tfs_ftype type;
	uint64_t size;
	int64_t mtime;                         /* x-amz-meta-mtime if set, else Last-Modified */
	int64_t atime, ctime;                  /* x-amz-meta-atime/ctime, or 0 */
	uint32_t mtime_ns, atime_ns, ctime_ns; /* their nanoseconds (s3fs's "sec.nsec") */
	char etag[TFS_ETAG_MAX];               /* files only */
	uint32_t mode;     /* permission bits from x-amz-meta-mode, or TFS_META_UNSET */
	uint32_t fmt;      /* files: 0 or the S_IFMT bits above */
	uint32_t uid, gid; /* from x-amz-meta-uid/gid, or TFS_META_UNSET */
	uint64_t rdev;     /* devices: x-amz-meta-rdev */
	/* The inode number shown (st_ino), kept in the cache with the entry:
	 * the same for a name across remounts while the cache is kept, moved
	 * with the name by a rename (tfs_meta_set_ino()), never given to
	 * another entry.  0: not known (an entry not stored yet). */
	uint64_t ino;
	bool headers; /* a HEAD of this ETag (of the marker, for a directory)
		       * was seen: mode/fmt/uid/gid/times final */
	bool local;   /* written through this mount and not yet in the bucket */
};

/* Objects smaller than this that a listing shows without their headers
 * may be symlinks or special files (a symlink's body is its target, at
 * most PATH_MAX - 1 bytes): with cache.fetch_headers = small,
 * tfs_meta_lookup() HEADs them before it answers. */
#define TFS_META_PROBE_SIZE 4096

struct tfs_meta;

/* Open the cache's named DBs in `env` (shared, not owned).  `be` and `log`
 * must outlive it.  From `cc`: metadata_ttl_ms; fetch_headers (ALL: a
 * listing also HEADs each object it finds, once per ETag, for its
 * x-amz-meta-* attributes; SMALL: a lookup HEADs a listed object under
 * TFS_META_PROBE_SIZE first; NONE: they are known only for objects some
 * lookup HEADed); list_ahead (a lookup that misses in a directory without a fresh
 * listing queues the directory for a listing by a background thread, which
 * goes on to the next page only while lookups in that directory keep
 * coming, see meta.c; the threads start here, so open only after
 * daemonizing).
 * Returns 0, ENOMEM, or tfs_lmdb_errno() of an LMDB failure (logged:
 * ENOSPC for a full map, else EIO); a lister thread that cannot start
 * turns listing ahead off (logged). */
int tfs_meta_open(MDB_env *env, struct tfs_backend *be, const struct tfs_cache_config *cc,
		  const struct tfs_log *log, struct tfs_meta **out);
/* Stop the background listers (a listing in progress stops at its next
 * page, unfinished) and free everything.  NULL is fine. */
void tfs_meta_close(struct tfs_meta *m);

/* The mount this cache serves (the mountpoint, copied; stack.c sets it
 * after opening): what the FUSE layer keys its persisted node table by
 * (cache/nodes.h), in the same environment.  Set once, before the mount
 * serves.  Returns 0 or ENOMEM. */
int tfs_meta_set_mount(struct tfs_meta *m, const char *mountpoint);
/* The mountpoint set, or NULL; and the environment.  Pure. */
const char *tfs_meta_mount(const struct tfs_meta *m);
MDB_env *tfs_meta_env(const struct tfs_meta *m);

/* Whether `a` is known for sure, or a lookup would still HEAD the object:
 * unless fetch_headers = false, a directory listed without a HEAD of its
 * marker, or (fetch_headers = small) an object under TFS_META_PROBE_SIZE
 * listed without its headers.
 * Readdir shows an entry that is not settled without attributes, so the
 * kernel looks it up.  Pure. */
bool tfs_meta_settled(const struct tfs_meta *m, const struct tfs_attr *a);

/* Reload: trust entries and listings for `ttl_ms` from now on (UINT64_MAX:
 * forever).  Applies to what is cached already (freshness is computed at
 * each lookup).  Thread safe (an atomic). */
void tfs_meta_set_ttl(struct tfs_meta *m, uint64_t ttl_ms);

/* Attributes of `name` in directory `dir`.  An entry that is not settled
 * (tfs_meta_settled()) is HEADed first (its marker "name/" for a
 * directory), once: the answer is kept.  Returns 0, ENOENT, ENAMETOOLONG,
 * or the backend's error (EIO, EACCES).  *changed (may be NULL) is set
 * when a revalidation found a different ETag than the cached one. */
int tfs_meta_lookup(struct tfs_meta *m, const char *dir, const char *name, struct tfs_attr *out,
		    bool *changed);

/* Callback for each entry; return non-zero to stop (that value is then
 * returned by tfs_meta_readdir). */
typedef int (*tfs_meta_entry_fn)(void *ctx, const char *name, const struct tfs_attr *a);

/* Call `fn` for the entries of `dir` in name order, starting after `after`
 * ("" = from the first), listing the backend first if the cached listing
 * is missing or stale.  Returns 0, fn's non-zero value, ENOENT (the
 * directory does not exist), or the backend's error. */
int tfs_meta_readdir(struct tfs_meta *m, const char *dir, const char *after, tfs_meta_entry_fn fn,
		     void *ctx);

/* ---- local changes (write-back) ----
 * Entries written through the mount are LOCAL until write-back has put
 * them in the bucket: listings keep them and never revalidate them, and a
 * LOCAL whiteout hides a name the bucket still has until its DELETE is
 * done.  These functions work inside the caller's write transaction on the
 * shared environment, so a journal record and the namespace change commit
 * together.  `path` is the object key ("dir/name").  All return 0, ENOENT
 * (forget: nothing there is fine too, 0), ENAMETOOLONG, or an LMDB errno
 * (EIO/ENOSPC, logged). */

/* Make `path` a LOCAL entry with attributes `a` (a->type FILE or DIR).
 * A new directory is also marked as completely listed (it is empty). */
int tfs_meta_txn_set_local(struct tfs_meta *m, MDB_txn *txn, const char *path,
			   const struct tfs_attr *a);
/* Hide `path` (a LOCAL whiteout) until tfs_meta_txn_forget(). */
int tfs_meta_txn_whiteout(struct tfs_meta *m, MDB_txn *txn, const char *path);
/* `path` is now in the bucket with attributes `a` (clean, fresh now).  A
 * directory keeps mtime and ctime later than a's (tfs_meta_touch_dir()). */
int tfs_meta_txn_set_clean(struct tfs_meta *m, MDB_txn *txn, const char *path,
			   const struct tfs_attr *a);
/* `path` is gone from the bucket: its entry, LOCAL or not, becomes a
 * tombstone that answers nothing but keeps a listing begun before now
 * from bringing the name back (pruned by the next complete listing). */
int tfs_meta_txn_forget(struct tfs_meta *m, MDB_txn *txn, const char *path);

/* An entry of directory `path` was made or removed through this mount at
 * `ts`: the directory's mtime and ctime become `ts` in the cache (not in
 * the bucket: a marker PUT for each file made would double a checkpoint's
 * requests), unless they are later already; an upload of its marker keeps
 * them (tfs_meta_txn_set_clean()).  The root ("") and a path with no
 * directory entry are left alone.  Returns 0, ENAMETOOLONG or an LMDB
 * errno (logged). */
int tfs_meta_touch_dir(struct tfs_meta *m, const char *path, int64_t sec, uint32_t ns);

/* The inode number of the entry at `path` (0 when there is none or it has
 * none).  Cannot fail: an LMDB error reads as 0. */
uint64_t tfs_meta_ino(struct tfs_meta *m, const char *path);
/* Give the entry at `path` inode number `ino` (after a rename: the number
 * the name had before).  0 is a no-op.  Returns 0, ENOENT (no entry),
 * ENAMETOOLONG or an LMDB errno (logged). */
int tfs_meta_set_ino(struct tfs_meta *m, const char *path, uint64_t ino);

struct json_object;
struct tfs_stattab;

/* The rows of the "metadata" stats (statdef.h): what tfs_meta_stats()
 * adds, and the metrics over them. */
extern const struct tfs_stattab tfs_meta_stattab;

/* Add a "metadata" object to `out` (a json-c object).  Cannot fail. */
void tfs_meta_stats(struct tfs_meta *m, struct json_object *out);

/* Build "<dir>/<name>" (or "<name>" at the root) into buf.  Returns 0 or
 * ENAMETOOLONG. */
int tfs_meta_join(const char *dir, const char *name, char *buf, size_t len);

#endif
