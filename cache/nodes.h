/* nodes.h - the persisted node table of a mount: every FUSE node ID the
 * kernel may hold, with what a new daemon needs to serve it (path, type,
 * kind), and the node ID counter, so that a daemon that replaces a dead
 * one on the same kernel connection (src/fs.h: resumed) resolves the IDs
 * the kernel still holds and never gives out one of them again.
 *
 * Storage: the named database "nodes" of the cache's LMDB environment
 * (lmdb_env.h), shared by every mount of the source, so records are keyed
 * by the first 8 bytes of SHA-256(owner) (owner: the mountpoint) and the
 * node ID (8 bytes, big-endian); node ID 0 holds the counter (the next ID
 * to give out).  A record's value is the type (1 byte), the kind (struct
 * tfs_attr's fmt, 4 bytes) and the path (the rest, no terminator).
 * Commits are not fsynced (MDB_NOSYNC): a committed write is in the page
 * cache and survives the death of the process, which is what a resumed
 * daemon needs (after a reboot there is no kernel connection to resume).
 *
 * Functions return 0 or a positive errno and log the cause.  Thread safe
 * as LMDB is: the caller serializes writes that must land in order.
 */
#ifndef TFS_NODES_H
#define TFS_NODES_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "meta.h"

struct tfs_nodes;

/* One node: `path` NULL in a write means "delete the record of `ino`". */
struct tfs_node_rec {
	uint64_t ino;
	enum tfs_ftype type;
	uint32_t fmt;
	const char *path;
};

/* Open (create) the table of `owner` in `env` (borrowed; `log` too).
 * `wipe`: delete every record of this owner first (a fresh mount).
 * Returns 0, ENOMEM, EIO or ENOSPC. */
int tfs_nodes_open(MDB_env *env, const char *owner, bool wipe, const struct tfs_log *log,
		   struct tfs_nodes **out);
/* NULL is a no-op. */
void tfs_nodes_close(struct tfs_nodes *n);

/* In one transaction: write (or delete) the `count` records and set the
 * counter to `next_ino`.  Returns 0, ENOMEM, EIO or ENOSPC (logged). */
int tfs_nodes_write(struct tfs_nodes *n, const struct tfs_node_rec *recs, size_t count,
		    uint64_t next_ino);

/* Whether the record of `ino` holds exactly (type, fmt, path).  Returns 0
 * (it does), ENOENT (no such record, or another one) or EIO (logged).  A
 * read transaction: thread safe, never waits for a writer. */
int tfs_nodes_match(struct tfs_nodes *n, uint64_t ino, enum tfs_ftype type, uint32_t fmt,
		    const char *path);

/* Call `fn` for every record of this owner (in node ID order; `path`
 * borrowed for the call), stopping at its first non-zero return, which is
 * returned; *next_ino gets the counter (0 when none was stored).  A record
 * that does not decode is skipped (logged).  Returns 0, fn's value or
 * EIO. */
typedef int (*tfs_nodes_fn)(void *ctx, const struct tfs_node_rec *r);
int tfs_nodes_load(struct tfs_nodes *n, tfs_nodes_fn fn, void *ctx, uint64_t *next_ino);

#endif
