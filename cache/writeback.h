/* writeback.h - files written through the mount: staged on local disk,
 * journalled in LMDB, uploaded to the backend in the background.
 *
 * Staging: every dirty file is a file <cache dir>/staging/<owner>/<16 hex>
 * (0600), written with pwrite; nothing dirty is held in RAM.  A dirty file
 * is a struct tfs_wb_file, found by path while it has unfinished work or
 * open handles.
 *
 * Journal (cache/journal.h): a commit (close, fsync, setattr, namespace
 * change) writes the record of the path and its LOCAL metadata entry in one
 * LMDB transaction.  Uploaders take records whose delay has passed and
 * that no handle has open for writing, upload them, and retire each one
 * only if its generation did not change meanwhile; a file rewritten during
 * its upload is uploaded again, and an older version never lands after a
 * newer one (one job per path at a time).  After a PUT the staged bytes
 * become clean SSD-tier blocks of the new ETag, so they are not downloaded
 * again.  Failures are retried with exponential backoff (retry_base ..
 * retry_max), forever or up to max_retries attempts, after which the
 * record is kept, counted as failed and retried at the next mount.
 *
 * Durability: a kill -9 loses nothing committed: LMDB commits and staged
 * bytes are in the OS page cache.  tfs_wb_commit(.., durable) also
 * fdatasyncs the staged file and syncs the environment (fsync in async
 * mode).  At start-up every record is queued again: an interrupted
 * multipart upload resumes from its recorded parts, or is aborted when
 * its data changed.
 *
 * Locking: wb->lock protects the file table, the job table and every
 * file's fields except its staged bytes, which are written with pwrite by
 * the handles' threads; one job per path runs at a time.  No lock is held
 * across a backend call.
 */
#ifndef TFS_WRITEBACK_H
#define TFS_WRITEBACK_H

#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "layer.h"
#include "log.h"
#include "meta.h"

enum tfs_wb_mode {
	TFS_WB_ASYNC, /* close() returns at once; upload after delay_ms */
	TFS_WB_SYNC,  /* close() and fsync() return after the upload */
	TFS_WB_OFF,   /* no writes: the mount is read-only */
};

/* The most uploaders (the range of writeback.uploaders). */
#define TFS_WB_MAX_UPLOADERS 256

/* Filled and validated by src/conf.c ([writeback]); the layer keeps a
 * copy.  Only `uploaders` changes afterwards (tfs_wb_set_uploaders()). */
struct tfs_writeback_config {
	enum tfs_wb_mode mode;
	/* async: a non-empty file only ever appended to (a checkpoint, a
	 * log) is uploaded this long after its last close() */
	uint64_t delay_ms;
	/* async: every other change (a file changed in place or left empty,
	 * a directory, a delete, new attributes), and a file closed again
	 * within this long of its last upload's start, waits at least this
	 * long after its last change, so that a burst of changes is one
	 * request per name; 0: off */
	uint64_t rewrite_delay_ms;
	unsigned uploaders;        /* concurrent uploads (1 .. 256) */
	unsigned max_retries;      /* failed attempts before giving up for this mount; 0: forever */
	uint64_t retry_base_ms;    /* first backoff between attempts */
	uint64_t retry_max_ms;     /* longest backoff */
	uint64_t drain_timeout_ms; /* unmount waits this long for the queue */
	/* Upload a file written sequentially while it is written (see
	 * upload_stream.h); only when uploads start at close (mode sync, or
	 * async with delay_ms 0) and the backend has multipart uploads. */
	bool stream;
	/* Most bytes staged at once: absolute (staging_size > 0) or percent of
	 * the filesystem holding the cache (staging_size 0, 0 < pct <= 100).
	 * Writes beyond it fail with ENOSPC; clean reads go on. */
	uint64_t staging_size;
	double staging_size_pct;
};

struct tfs_wb;
struct tfs_wb_file;
struct json_object;

/* Open this mount's journal in `env` and its staging area
 * <cache_dir>/staging/<owner hash> (several daemons may share one cache
 * directory; `owner` names this one: the mountpoint), load every record of
 * this owner (their files become visible dirty files again), move staged
 * files no record refers to into <cache_dir>/lost+found, and start the
 * uploaders.  The metadata cache, backend and cache stack `top` are
 * borrowed.  Call after daemonizing.  Returns 0, EIO (LMDB, staging
 * directory: logged), ENOMEM, or a pthread error. */
int tfs_wb_create(const struct tfs_writeback_config *cfg, const char *cache_dir, const char *owner,
		  MDB_env *env, struct tfs_meta *meta, struct tfs_backend *be,
		  struct tfs_layer *top, const struct tfs_log *log, struct tfs_wb **out);
/* The staged copies of files an earlier daemon had open for writing and
 * never committed (OPEN records, journal.h).  `resumed` (this daemon
 * serves the same kernel connection, whose writers may go on): they
 * become dirty files again, found by path, that a writer's next open
 * (tfs_wb_open_write()) takes up and its close commits; nothing is
 * uploaded before.  Else (a fresh mount): they move to
 * <cache_dir>/lost+found, as an unclosed file always did, and their
 * records go.  Call once, before the mount serves; later calls do
 * nothing.  Cannot fail (failures are logged). */
void tfs_wb_settle_open(struct tfs_wb *wb, bool resumed);

/* Stop the uploaders (an upload in flight finishes first) and free.
 * Pending work stays in the journal.  NULL is a no-op. */
void tfs_wb_destroy(struct tfs_wb *wb);

/* Make all pending work due now and wait until none is left or
 * `timeout_ms` passed.  Reports what is left (files, bytes) in *files and
 * *bytes (may be NULL).  Returns 0 (all done) or ETIMEDOUT. */
int tfs_wb_drain(struct tfs_wb *wb, uint64_t timeout_ms, uint64_t *files, uint64_t *bytes);

/* Whether what was closed under `path` is in the backend:
 *   TFS_WB_CLEAN    nothing of it is pending (or it was never written here),
 *                   or the bucket has its last version and its job only
 *                   copies it into the cache tiers and retires its record;
 *   TFS_WB_PENDING  a change waits for its upload, is being uploaded, is
 *                   being retried, or a writer still has the file open;
 *   TFS_WB_FAILED   its upload gave up (writeback.max_retries); it is
 *                   retried at the next mount.
 * *err (may be NULL) gets the errno of the last failed attempt, or 0.
 * Cannot fail.  Thread safe (wb->lock). */
enum tfs_wb_upload_state {
	TFS_WB_CLEAN,
	TFS_WB_PENDING,
	TFS_WB_FAILED
};
enum tfs_wb_upload_state tfs_wb_upload_state(struct tfs_wb *wb, const char *path, int *err);

/* Attributes a new file or directory gets.  `mode` holds the permission
 * bits, and for a symlink or special file its S_IFMT bits too (struct
 * tfs_attr's fmt); a regular file or directory has none. */
struct tfs_wb_attr {
	uint32_t mode, uid, gid; /* TFS_META_UNSET: the mount's defaults */
	int64_t mtime;
	int64_t atime, ctime; /* 0: as mtime */
	uint32_t mtime_ns, atime_ns, ctime_ns;
	uint64_t rdev; /* devices */
};

/* Between the two forms of attributes (mode and fmt joined in one, or
 * apart).  Pure. */
struct tfs_wb_attr tfs_wb_attr_of(const struct tfs_attr *a);
void tfs_wb_attr_apply(const struct tfs_wb_attr *w, struct tfs_attr *a);

/* ---- files ---- */

/* Create `path` as a new, empty dirty file open for writing (one reference,
 * one writer).  Returns 0, ENOMEM, EIO, ENOSPC. */
int tfs_wb_create_file(struct tfs_wb *wb, const char *path, const struct tfs_wb_attr *a,
		       struct tfs_wb_file **out);

/* Open `path` for writing.  If it is dirty already the same file is
 * returned; otherwise `clean` (its attributes in the bucket; may be NULL
 * for "no such object", or when the caller saw it dirty: if its upload
 * retired it since, the uploaded version is found in the metadata cache)
 * is copied into staging through the cache stack, unless `trunc`.  One
 * reference and one writer are taken.  Returns 0,
 * ENOMEM, EIO/ENOSPC (staging full), or the cache's error (ESTALE: the
 * object changed; ENOENT). */
int tfs_wb_open_write(struct tfs_wb *wb, const char *path, const struct tfs_attr *clean, bool trunc,
		      struct tfs_wb_file **out);

/* A reference to the dirty (or still open) file at `path`, or NULL. */
struct tfs_wb_file *tfs_wb_find(struct tfs_wb *wb, const char *path);
/* The attributes of the dirty file at `path` (size as written so far).
 * Returns true and fills *a if there is one. */
bool tfs_wb_attr(struct tfs_wb *wb, const char *path, struct tfs_attr *a);

/* The current attributes of `f` (size as written so far), even when it
 * was detached by unlink or rename.  Cannot fail. */
void tfs_wb_file_attr(struct tfs_wb *wb, struct tfs_wb_file *f, struct tfs_attr *a);
/* Change mode/uid/gid/times of `f` (TFS_WB_SET_* in `mask`) in memory:
 * for a detached file, which is never uploaded, or a file open for
 * writing whose next commit (its close) records them.  Cannot fail. */
void tfs_wb_file_setattr(struct tfs_wb *wb, struct tfs_wb_file *f, unsigned mask,
			 const struct tfs_wb_attr *a);
/* True when `f` was detached (unlinked or replaced by a rename). */
bool tfs_wb_file_detached(struct tfs_wb *wb, struct tfs_wb_file *f);

/* Drop a reference (`writer`: one taken by create/open_write).  A writer's
 * last close commits the file (tfs_wb_commit) first; the return value is
 * that commit's (sync mode: the upload's) result.  A writer's reference
 * dropped with `writer` false (the daemon stopping with the file open)
 * commits nothing, and an uncommitted staged copy is left for the next
 * mount's lost+found. */
int tfs_wb_release(struct tfs_wb *wb, struct tfs_wb_file *f, bool writer);

/* Data.  Return 0, ENOSPC (writeback.staging_size reached, or the disk is
 * full), or the errno of pread/pwrite/ftruncate. */
int tfs_wb_read(struct tfs_wb_file *f, void *buf, size_t len, uint64_t off, size_t *got);
int tfs_wb_write(struct tfs_wb *wb, struct tfs_wb_file *f, const void *buf, size_t len,
		 uint64_t off);
int tfs_wb_truncate(struct tfs_wb *wb, struct tfs_wb_file *f, uint64_t size);

/* Persist the file's current state in the journal (if it changed since
 * the last commit).  `durable`: also fdatasync the staged bytes and sync
 * the journal.  In sync mode, also upload now and return the upload's
 * error.  Returns 0, EIO, ENOSPC, or (sync) the backend's error. */
int tfs_wb_commit(struct tfs_wb *wb, struct tfs_wb_file *f, bool durable);

/* Persist the file's current state in the journal (if it changed since
 * the last commit) and return, in every mode: for a rename, which moves
 * the record next (in sync mode tfs_wb_commit() would upload the old name
 * and retire the record first).  Returns 0, EIO, ENOSPC. */
int tfs_wb_commit_record(struct tfs_wb *wb, struct tfs_wb_file *f);

/* Change mode/uid/gid/times (fields set in `mask`, TFS_WB_SET_*) of `path`:
 * a dirty file's attributes change in place; a clean object (`clean`, its
 * attributes; NULL as for tfs_wb_open_write()) gets a META record.
 * Returns 0, ENOENT, EIO, ENOSPC. */
enum {
	TFS_WB_SET_MODE = 1,
	TFS_WB_SET_UID = 2,
	TFS_WB_SET_GID = 4,
	TFS_WB_SET_MTIME = 8,
	TFS_WB_SET_ATIME = 16,
	TFS_WB_SET_CTIME = 32
};
int tfs_wb_setattr(struct tfs_wb *wb, const char *path, const struct tfs_attr *clean, unsigned mask,
		   const struct tfs_wb_attr *a);

/* ---- namespace ---- */

/* Remove `path` (a file, or with `is_dir` an empty directory): any dirty
 * state is dropped (open handles keep working on their staged copy, which
 * is never uploaded), a DELETE is journalled and the name is hidden.
 * Returns 0, EIO, ENOSPC. */
int tfs_wb_remove(struct tfs_wb *wb, const char *path, bool is_dir);

/* Create directory `path` (a MKDIR record for its marker object).
 * Returns 0, EIO, ENOSPC. */
int tfs_wb_mkdir(struct tfs_wb *wb, const char *path, const struct tfs_wb_attr *a);

/* Rename the dirty file `from` to `to`: its staged copy becomes the PUT of
 * `to` (replacing any dirty state of `to`), and `from` gets a DELETE.
 * Returns 0, ENOENT (not dirty: the caller copies in the bucket), EIO,
 * ENOSPC. */
int tfs_wb_rename_dirty(struct tfs_wb *wb, const char *from, const char *to);

/* Before replacing `path` in the bucket directly (a rename of a clean
 * object onto it): wait for a job running on it, then drop its record and
 * dirty state.  *busy is set (and nothing dropped) when `path` has work
 * the caller must not bypass (pending changes of its own): then the caller
 * stages instead.  Returns 0, EIO, ENOSPC. */
int tfs_wb_claim(struct tfs_wb *wb, const char *path, bool *busy);
/* After a direct rename in the bucket: `from` is gone, `to` is clean with
 * attributes `a`.  Returns 0, EIO, ENOSPC. */
int tfs_wb_renamed_clean(struct tfs_wb *wb, const char *from, const char *to,
			 const struct tfs_attr *a);

/* Whether the mount takes writes (mode != off). */
bool tfs_wb_writable(const struct tfs_wb *wb);

/* Reload: run `n` uploaders (1 .. TFS_WB_MAX_UPLOADERS).  Extra ones leave
 * after the upload they are doing.  No-op (0) when mode = off.  Returns 0
 * or the pthread_create() error (logged; fewer uploaders run).  Thread
 * safe (wb->lock). */
int tfs_wb_set_uploaders(struct tfs_wb *wb, unsigned n);

struct tfs_stattab;

/* The rows of the "writeback" stats (statdef.h): what tfs_wb_stats()
 * adds, and the metrics over them. */
extern const struct tfs_stattab tfs_wb_stattab;

/* Add a "writeback" object (queue, dirty bytes, uploads, failures). */
void tfs_wb_stats(struct tfs_wb *wb, struct json_object *out);

#endif
