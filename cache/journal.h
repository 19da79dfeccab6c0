/* journal.h - the write-back journal: one LMDB record per path with work
 * for the bucket, in the environment the SSD index and metadata cache
 * share, so a record and its namespace change commit in one transaction.
 *
 * A record says what the bucket must end up with for one key:
 *   PUT     the staged file <staging>/<staging_id> as the object, with
 *           mode/uid/gid/times/rdev as s3fs-style x-amz-meta-* headers
 *   MKDIR   a "key/" directory marker object
 *   DELETE  no object (DELETE key, and of "key/" for directories)
 *   META    new x-amz-meta-* headers on the object as it is in the bucket
 *           (a server-side copy onto itself)
 *   OPEN    the staged file <staging>/<staging_id> holds changes of a file
 *           still open for writing, never committed (no close or fsync
 *           yet): nothing is uploaded.  It keeps the staged copy for a
 *           daemon that resumes the mount (its writer goes on and the
 *           close commits a PUT); a fresh mount moves it to lost+found.
 * `gen` grows with every change to the record; an upload of generation g
 * may retire the record only if it still has generation g, so an older
 * version never overwrites a newer one and a file rewritten during its
 * upload is uploaded again.  A multipart upload in flight is recorded
 * (upload id, part size, the ETags of completed parts, the generation it
 * belongs to) so that it resumes after a crash or is aborted.
 *
 * Several daemons may share one cache directory (one cache per node), each
 * with its own journal: records are keyed by the owner (8 bytes naming
 * the mount) and SHA-256(path) (S3 keys may exceed LMDB's key limit); the
 * path is stored in the value.  Functions take the caller's transaction
 * and return 0, ENOENT (no record), ENOMEM, EINVAL (a value that does not
 * decode: logged by the caller), or an LMDB error mapped to EIO/ENOSPC.
 */
#ifndef TFS_JOURNAL_H
#define TFS_JOURNAL_H

#include <lmdb.h>
#include <stdint.h>

#include "backend.h"

enum tfs_jop {
	TFS_J_PUT = 1,
	TFS_J_MKDIR = 2,
	TFS_J_DELETE = 3,
	TFS_J_META = 4,
	TFS_J_OPEN = 5
};

struct tfs_jrec {
	enum tfs_jop op;
	uint64_t gen;
	uint64_t staging_id;     /* PUT: the staged file's number */
	uint64_t size;           /* PUT: bytes to upload */
	uint32_t mode, uid, gid; /* TFS_META_UNSET when unknown; mode may hold
				  * the S_IFMT bits of a symlink or special
				  * file (struct tfs_wb_attr) */
	int64_t mtime;
	int64_t atime, ctime; /* 0 when unknown */
	uint32_t mtime_ns, atime_ns, ctime_ns;
	uint64_t rdev;
	uint64_t closed_ms; /* wall time of the last close or commit */
	uint32_t attempts;  /* failed upload attempts so far */
	uint32_t is_dir;    /* DELETE: also the "key/" marker.  PUT: also delete
			      * the marker "key/" (a directory removed and made a
			      * file before write-back); MKDIR: also delete the
			      * object "key" (a file replaced by a directory) */
	uint64_t mpu_gen;   /* generation the multipart state belongs to */
	struct tfs_mpu mpu; /* upload_id "" when none; etags owned */
	char *path;         /* owned */
};

/* Free what *r owns and zero it.  NULL-safe. */
void tfs_jrec_clear(struct tfs_jrec *r);

#define TFS_JOURNAL_OWNER_LEN 8

/* One mount's journal in the shared DB. */
struct tfs_journal {
	MDB_dbi dbi;
	MDB_dbi streams; /* open uploads of files being written (upload_stream.h) */
	uint8_t owner[TFS_JOURNAL_OWNER_LEN];
};

/* Open (create) the journal DB for `owner` (any string; hashed).
 * Returns 0 or EIO. */
int tfs_journal_open(MDB_txn *txn, const char *owner, struct tfs_journal *out);

/* Read the record of `path` into *out, which is zeroed first (so the
 * caller may clear it whatever the result).  Returns 0, ENOENT, EINVAL
 * (undecodable), ENOMEM or EIO. */
int tfs_journal_get(MDB_txn *txn, const struct tfs_journal *j, const char *path,
		    struct tfs_jrec *out);
/* Write *r under r->path.  Returns 0, ENOMEM, EIO or ENOSPC. */
int tfs_journal_put(MDB_txn *txn, const struct tfs_journal *j, const struct tfs_jrec *r);
/* Delete the record of `path`; a missing one is fine.  Returns 0 or EIO. */
int tfs_journal_del(MDB_txn *txn, const struct tfs_journal *j, const char *path);

/* Call fn for every record of this owner (in hash order), stopping at its
 * first non-zero return, which is returned.  Undecodable records are
 * passed with r->path NULL so the caller can report them.  Returns 0,
 * fn's value or EIO. */
typedef int (*tfs_journal_fn)(void *ctx, const struct tfs_jrec *r);
int tfs_journal_each(MDB_txn *txn, const struct tfs_journal *j, tfs_journal_fn fn, void *ctx);

/* The table of streams: multipart uploads begun for files still being
 * written (cache/upload_stream.h), so that the next mount can abort those a
 * crash left behind.  Keyed by owner and SHA-256(upload_id); the value is
 * the key and the upload id. */
int tfs_journal_stream_add(MDB_txn *txn, const struct tfs_journal *j, const char *key,
			   const char *upload_id);
/* A missing entry is fine.  Returns 0 or EIO. */
int tfs_journal_stream_del(MDB_txn *txn, const struct tfs_journal *j, const char *upload_id);
/* Call fn for every stream of this owner, stopping at its first non-zero
 * return (returned).  Entries that do not decode are skipped.  Returns 0,
 * fn's value or EIO.  fn must not change the table. */
typedef int (*tfs_journal_stream_fn)(void *ctx, const char *key, const char *upload_id);
int tfs_journal_stream_each(MDB_txn *txn, const struct tfs_journal *j, tfs_journal_stream_fn fn,
			    void *ctx);

/* Encode/decode, exposed for unit tests.  encode: *out malloc'd. */
int tfs_jrec_encode(const struct tfs_jrec *r, void **out, size_t *len);
int tfs_jrec_decode(const void *buf, size_t len, struct tfs_jrec *out);

#endif
