/* lmdb_env.h - the cache's LMDB environment: opening it safely, recovering
 * from a damaged one, and mapping LMDB errors to errno.
 *
 * One environment holds the index of every cache structure (the SSD tier's
 * "ssd_*" named databases, the metadata cache's, the write-back journal's).
 * The stack assembly opens it once, after daemonizing, hands the same
 * MDB_env to each user, destroys the users first and closes it last.
 *
 * Flags and why:
 *
 *   MDB_NOTLS   read transactions are not tied to a thread: FUSE and
 *               prefetch workers are pooled threads, and a read-only txn
 *               may be begun on one and aborted on another.  Each read
 *               txn takes a reader slot for its lifetime, hence 512 slots.
 *   MDB_NOSYNC  commits are not fsync'ed.  A committed transaction is in
 *               the OS page cache at once, so it survives the death of the
 *               process (kill -9, crash): only a kernel crash or power loss
 *               can lose the last second of commits, or, as LMDB documents,
 *               damage the file.  That is acceptable because the cache is
 *               re-verifiable: every cached block carries a checksum and a
 *               damaged environment is moved aside and rebuilt empty (see
 *               tfs_lmdb_open()).  The SSD tier calls mdb_env_sync() about
 *               once per second from its background thread, which bounds
 *               the loss.  A user that needs real durability (the
 *               write-back journal) must call mdb_env_sync(env, 1) itself
 *               before acknowledging.
 *
 * Limits: 16 named databases, 512 readers.  The data file is mode 0600 and
 * the directory 0700: cached object names and data are as private as the
 * mount's owner.
 *
 * The environment must be on a local filesystem: LMDB relies on mmap
 * coherence and POSIX locks that network and FUSE filesystems do not
 * provide, and a cache on a network disk defeats its purpose.
 */
#ifndef TFS_LMDB_ENV_H
#define TFS_LMDB_ENV_H

#include <stdint.h>

#include <lmdb.h>

#include "log.h"

#define TFS_LMDB_MAXDBS 16
#define TFS_LMDB_MAXREADERS 512

/* Open (creating if needed) the environment in directory `dir`.
 *
 * `dir` and any missing parents are created with mode 0700.  The
 * directory must not be on a network or FUSE filesystem (EINVAL, logged
 * as "LMDB must not live on a network filesystem").  `map_size` is the
 * largest the data file may grow (bytes; rounded by LMDB to pages; an
 * existing larger file keeps its size); 0 means LMDB's default (10 MiB).
 *
 * If the existing files are damaged (MDB_CORRUPTED, MDB_INVALID,
 * MDB_VERSION_MISMATCH when opening or when walking the list of named
 * databases), data.mdb and lock.mdb are moved to
 * dir/corrupt-<UTC timestamp>/ with a warning, and an empty environment is
 * created: the cache is only a cache.  Damage deeper inside a named
 * database is found by its user (tfs_lmdb_is_corruption()).
 *
 * Stale reader slots of dead processes are cleared (mdb_reader_check).
 *
 * Returns 0 and sets *out (the caller owns it: tfs_lmdb_close()), or a
 * positive errno with the cause logged: EINVAL (network filesystem, or
 * `dir` not a directory), EPERM (`dir` or a directory above it is one
 * another user could have planted: dirs.h), EACCES, ENOSPC, ENOMEM, EIO.
 * Not thread safe with respect to other opens of the same directory in
 * this process (LMDB forbids opening one environment twice per process). */
int tfs_lmdb_open(const char *dir, uint64_t map_size, const struct tfs_log *log, MDB_env **out);

/* Close an environment from tfs_lmdb_open().  Every user must have been
 * destroyed (no transaction may be open).  NULL is a no-op. */
void tfs_lmdb_close(MDB_env *env);

/* If statfs() f_type `f_type` is a network, cluster or FUSE filesystem,
 * return its name ("nfs", "cifs", "fuse", ...); otherwise NULL.  Pure; the
 * check tfs_lmdb_open() applies to its directory. */
const char *tfs_lmdb_network_fs(unsigned long f_type);

/* Map an LMDB return code to errno: 0 -> 0; MDB_MAP_FULL -> ENOSPC;
 * MDB_NOTFOUND -> ENOENT; MDB_CORRUPTED, MDB_PAGE_NOTFOUND and every other
 * negative LMDB code -> EIO; a positive code is already an errno and is
 * returned unchanged.  Pure. */
int tfs_lmdb_errno(int rc);

/* True for the codes that mean the environment is damaged
 * (MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID, MDB_VERSION_MISMATCH,
 * MDB_PANIC).  Pure. */
int tfs_lmdb_is_corruption(int rc);

/* Log "<what>: <mdb_strerror(rc)>" at error level and return
 * tfs_lmdb_errno(rc).  `rc` 0 returns 0 and logs nothing.  `what` is a
 * printf format.  Thread safe. */
int tfs_lmdb_fail(const struct tfs_log *log, int rc, const char *what, ...)
	__attribute__((format(printf, 3, 4)));

#endif
