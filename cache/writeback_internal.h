/* writeback_internal.h - state and helpers shared by the files of the
 * write-back layer.  Not for use outside cache/writeback*.c and
 * cache/wb_*.c: the layer's interface is writeback.h, the journal's
 * records are journal.h.
 *
 *   writeback.c       the layer (writeback.h): the file API (staging
 *                     limit, copy-on-write, commit, setattr), start-up (the
 *                     journal reloaded, staged files without a record
 *                     moved to lost+found) and shutdown
 *   wb_namespace.c    unlink, rmdir, mkdir and renames
 *   wb_upload.c       the job queue: uploaders, retries, drain, stats
 *   wb_stream_glue.c  write-back's side of upload_stream.h: which files
 *                     stream, the table of their uploads in the journal,
 *                     and the start-up sweep of the uploads a crash left
 *   wb_txn.c          journal transactions: a record with its
 *                     metadata-cache change, a closed file's record
 *   wb_due.c          when a job is due: queueing it, recent uploads,
 *                     temporary names
 *   wb_state.c        the entry table and staged files
 *   wb_attr.c         attributes as the API, a record, the metadata
 *                     cache and an upload's headers write them down
 *
 * Calls go one way: writeback.c -> wb_namespace.c, wb_upload.c,
 * wb_stream_glue.c -> wb_txn.c, wb_due.c, wb_state.c, wb_attr.c ->
 * journal.c, upload_stream.c, meta.c (wb_txn.c calls wb_attr.c; the last
 * four call nothing else of the layer's files).  writeback.c calls them
 * and journal.c too; no file calls one above it, and the three in the
 * middle never call each other.
 *
 * STATE
 *
 *   One `struct wb_ent` per path with work or open files, in a hash table:
 *     file  the dirty file of that path (NULL: none, e.g. a DELETE)
 *     job   the journal record's op and generation, its due time and state
 *   A file detached by unlink or rename-over lives on only through its
 *   handles; its staged copy is deleted at the last release.  An entry is
 *   freed (wb_ent_maybe_free()) once it has no job, no running upload and
 *   no file.
 *
 * LOCKING
 *
 *   lock   (mutex) the entry table and every entry's fields, every file's
 *          fields except its staged bytes (written with pwrite by the
 *          handles' threads), next_staging, staged, full_logged, stop, the
 *          counters, and the uploader pool (tfs_workers_set() takes it).
 *          Condition `work`: a job became due, a writer closed, the pool
 *          shrank, or stop.  Condition `done`: a job finished, or stop.
 *   Fixed from tfs_wb_create() to tfs_wb_destroy(): cfg, env, j, meta,
 *   be, top, log, stagefd, stagedir, staging_cap, streams.  orphans
 *   belongs to the sweeper thread once it runs.
 *   One job per path runs at a time (wb_ent.running).
 *   Order: lock -> the LMDB writer lock.  Journal write transactions that
 *   change a path's record are made with `lock` held, so the record and
 *   the entry change together; the uploaders' read transactions and the
 *   retirement of a record (a write transaction checking the generation)
 *   are made without it.  Nothing here takes `lock` inside a write
 *   transaction.
 *   lock -> a stream's or the stream group's lock (upload_stream.c): streams
 *   are grown, cancelled and counted with `lock` held, and call back (the
 *   registration of their uploads, which takes `lock`) holding none of
 *   their own.  `lock` is never held across a backend call, a read
 *   through the cache stack, or tfs_upload_stream_finish().
 */
#ifndef TFS_WRITEBACK_INTERNAL_H
#define TFS_WRITEBACK_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "journal.h"
#include "clock.h"
#include "meta.h"
#include "upload_stream.h"
#include "workers.h"
#include "writeback.h"

struct tfs_wb_file {
	char *path; /* NULL once detached */
	uint64_t staging_id;
	int fd; /* staged file, O_RDWR; -1 until needed */
	uint64_t size;
	struct tfs_wb_attr attr;
	uint64_t seq; /* bumped by every change */
	uint64_t committed_seq;
	int refs, writers;
	bool journaled; /* a PUT record describes it */
	bool open_rec;  /* an OPEN record names its staged copy (journal.h) */
	/* Streaming (upload_stream.h): `appending` while the file has only been
	 * appended to since it was empty, by one writer; `stream` once it is
	 * being uploaded as it is written, with the attributes its upload
	 * was created with. */
	bool appending;
	/* Changed other than by appending since it was staged: a write
	 * before or beyond its end, or a truncate to a length other than 0
	 * (which makes it new again).  Its upload waits
	 * writeback.rewrite_delay (wb_due_ms()). */
	bool edited;
	struct tfs_upload_stream *stream;
	uint32_t stream_mode, stream_uid, stream_gid;
	struct tfs_wb_file *next_unsettled;
};

struct wb_ent {
	char *path;
	struct tfs_wb_file *file;
	bool has_job, running, failed, force;
	enum tfs_jop op;
	uint64_t gen;      /* latest committed generation of the record */
	uint64_t done_gen; /* highest generation retired */
	/* Highest generation whose PUT reached the bucket, set as soon as
	 * it did: the job may still be copying it into the cache tiers
	 * before it retires the record, but the bucket has it
	 * (tfs_wb_upload_state() says "clean"). */
	uint64_t durable_gen;
	int last_err; /* result of the last attempt */
	uint64_t due_ms, next_try_ms, bytes;
	unsigned attempts;
	struct tfs_upload_stream *stream; /* handed over at close, for generation stream_gen */
	uint64_t stream_gen;
	struct wb_ent *next;
};

#define NBUCKETS 4096
#define RECENT_UPLOADS 4096 /* direct-mapped: a later upload may push one out */

struct orphan;

struct tfs_wb {
	struct tfs_writeback_config cfg;
	MDB_env *env;
	struct tfs_journal j; /* this mount's journal */
	struct tfs_meta *meta;
	struct tfs_backend *be;
	struct tfs_layer *top;
	const struct tfs_log *log;
	int stagefd; /* the staging directory */
	char *stagedir;
	pthread_mutex_t lock; /* see LOCKING above */
	pthread_cond_t work;  /* a job became due, or stop */
	pthread_cond_t done;  /* a job finished */
	struct wb_ent *tab[NBUCKETS];
	/* When uploads started lately, by a hash of their path (for
	 * writeback.rewrite_delay): slot hash % RECENT_UPLOADS. */
	struct {
		uint64_t hash, ms;
	} recent_up[RECENT_UPLOADS];
	uint64_t next_staging;
	uint64_t staged, staging_cap; /* bytes in staged files, and the limit */
	bool full_logged;             /* "staging full" was logged (until it drains) */
	bool stop;
	struct tfs_workers pool;            /* the uploaders (none when mode = off) */
	struct tfs_upload_streams *streams; /* NULL: no streaming */
	pthread_t sweeper;                  /* aborts uploads of streams a crash left */
	bool sweeper_started;
	struct orphan *orphans;        /* for the sweeper: read before any stream starts */
	struct tfs_wb_file *unsettled; /* files of OPEN records, until
					* tfs_wb_settle_open() (chained by
					* `next_unsettled`) */
	/* counters */
	uint64_t uploads, upload_bytes, deletes, mkdirs, metas, failures, reuploads, recovered;
};

/* ---- wb_state.c: entries, staged files ---- */

/* The entry of `path`, or NULL.  wb->lock held. */
struct wb_ent *wb_ent_find(struct tfs_wb *wb, const char *path);

/* The entry of `path`, added empty (no file, no job) if there is none;
 * NULL when out of memory.  The table owns it.  wb->lock held. */
struct wb_ent *wb_ent_get(struct tfs_wb *wb, const char *path);

/* Free `e`, cancelling a stream handed over to it, if it has no job, no
 * running upload and no file; else nothing.  The caller must not use `e`
 * afterwards unless it knows one of those holds.  wb->lock held. */
void wb_ent_maybe_free(struct tfs_wb *wb, struct wb_ent *e);

/* Open staged file number `id` in the staging directory with `flags`
 * (O_CLOEXEC and O_NOFOLLOW added; O_CREAT makes it 0600).  Returns the
 * descriptor (the caller's to close) or -errno (not logged).  No lock. */
int wb_open_staged(struct tfs_wb *wb, uint64_t id, int flags);

/* Free dirty file `f`: cancel its stream, take its size off wb->staged,
 * close its descriptor and, if `delete_staged`, delete its staged file (a
 * failure is logged).  Nobody may use `f` afterwards: the caller holds
 * its last reference and takes it out of its entry.  Cannot fail.
 * wb->lock held. */
void wb_free_file(struct tfs_wb *wb, struct tfs_wb_file *f, bool delete_staged);

/* `f` is no longer written by appending only: cancel its stream (its
 * upload is aborted in the background).  Cannot fail.  wb->lock held. */
void wb_file_stream_break(struct tfs_wb_file *f);

/* ---- wb_attr.c: attributes written down ---- */

/* Set in *om the s3fs-style x-amz-meta-* headers of record `r`: mode (in
 * decimal, with S_IFDIR if `dir`, else the record's S_IFMT bits or
 * S_IFREG) and rdev for a device, uid and gid when set, and mtime, atime
 * and ctime (those set) if `mtime`.  *om owns them (tfs_obj_meta_clear()); a header that
 * cannot be allocated is left out.  No lock. */
void wb_set_meta_headers(struct tfs_obj_meta *om, const struct tfs_jrec *r, bool dir, bool mtime);

/* The attributes of `f` as FUSE and the metadata cache see them: a LOCAL
 * file of the size written so far.  Cannot fail.  wb->lock held. */
void wb_file_tfs_attr(const struct tfs_wb_file *f, struct tfs_attr *a);
/* A record's attribute fields from `a`, and back.  Pure. */
void wb_jrec_set_attr(struct tfs_jrec *r, const struct tfs_wb_attr *a);
struct tfs_wb_attr wb_jrec_attr(const struct tfs_jrec *r);

/* ---- wb_txn.c: journal transactions ---- */

/* Begin a write transaction on the shared environment.  Returns 0, or
 * (logged) ENOSPC when the map is full, else EIO.  Takes no lock itself
 * (see LOCKING for when wb->lock is held around it). */
int wb_txn_begin(struct tfs_wb *wb, MDB_txn **txn);

/* Commit `txn` if `rc` is 0, else abort it; `what` and `path` name the
 * change in the log.  Returns 0, ENOSPC or EIO (the commit failed), or
 * `rc`; every failure is logged.  The transaction is gone afterwards. */
int wb_txn_end(struct tfs_wb *wb, MDB_txn *txn, int rc, const char *what, const char *path);

/* The PUT record of staged file `f` under `path` (borrowed: the record
 * points to it), generation `gen`, closed now.  Cannot fail.  No lock. */
struct tfs_jrec wb_put_rec(const struct tfs_wb_file *f, uint64_t gen, const char *path);

/* In `txn`: write record *r (under r->path), raising r->gen above the
 * previous record's and keeping what that record still owed: the DELETE
 * of the other type's key (is_dir) when a name changed type, and its
 * multipart state when *r has none, so the uploader resumes or aborts it
 * (r->mpu then owns it; the caller clears *r).  A previous record that
 * does not decode is overwritten.  Returns 0, ENOMEM, EIO or ENOSPC.
 * wb->lock held. */
int wb_put_record(struct tfs_wb *wb, MDB_txn *txn, struct tfs_jrec *r);

/* In one transaction: write record *r (wb_put_record()) and, if that
 * worked, the LOCAL metadata of r->path: `local` (tfs_meta_txn_set_local())
 * or, with NULL, a whiteout (tfs_meta_txn_whiteout()); then commit, or
 * abort on any failure (wb_txn_end(), `what` naming the change in the
 * log).  r->path is borrowed and left to the caller; everything else *r
 * owns is freed and *r cleared.  *gen is the generation written (valid on
 * 0).  Returns 0, ENOMEM, EIO or ENOSPC (logged).  wb->lock held. */
int wb_journal(struct tfs_wb *wb, struct tfs_jrec *r, const struct tfs_attr *local,
	       const char *what, uint64_t *gen);

/* ---- wb_due.c: when a job is due ---- */

/* Whether the last component of `path` names a temporary file, one
 * usually renamed into place right after its close: it ends in ".tmp" or
 * ".temp", holds ".tmp." or ".tempstate" (TensorFlow's checkpoints), or
 * starts with "tmp" (Python's tempfile), letters in either case.  Cannot
 * fail. */
bool wb_temp_name(const char *path);

/* When a job of `e` closed now may start: now plus writeback.delay for a
 * PUT of a non-empty file only ever appended to, else (any other job,
 * that file being uploaded, its last upload started less than
 * rewrite_delay ago, or a temporary name: wb_temp_name()) now plus
 * rewrite_delay if that is longer.  Lock held. */
uint64_t wb_due_ms(const struct tfs_wb *wb, const struct wb_ent *e);

/* Note that an upload of `path` starts now.  Lock held. */
void wb_note_upload(struct tfs_wb *wb, const char *path);
/* After the commit of generation `gen` of the record of `e`: queue its
 * job (`op`, `bytes` to upload), due after writeback.delay in async mode
 * or now, with no failed attempts, and wake the uploaders.  Cannot fail.
 * wb->lock held. */
void wb_schedule(struct tfs_wb *wb, struct wb_ent *e, enum tfs_jop op, uint64_t gen,
		 uint64_t bytes);

/* ---- wb_upload.c: the job queue (called by writeback.c) ---- */

/* The uploaders' thread (tfs_workers_init(); arg: a struct tfs_worker
 * whose ctx is the struct tfs_wb): runs due jobs, one per path at a time,
 * retrying failures with backoff, until wb->stop or the pool shrinks;
 * returns NULL.  Takes wb->lock, dropped while a job runs. */
void *wb_uploader_main(void *arg);

/* ---- wb_stream_glue.c: files uploaded while they are written (called by
 * writeback.c) ---- */

/* After an append up to f->size: start streaming `f` once it reaches the
 * threshold (if it cannot start, it is uploaded after close as usual; a
 * failure other than EBUSY is logged), or tell its stream how far it got.
 * Cannot fail.  wb->lock held. */
void wb_file_stream_grow(struct tfs_wb *wb, struct tfs_wb_file *f);

/* The last writer closed `f`, committed as generation `gen` of `e`: its
 * stream moves to `e` (replacing and cancelling an older one) for the
 * uploader to finish, or is cancelled if mode, uid or gid changed since
 * its upload was created.  Cannot fail.  wb->lock held. */
void wb_file_stream_hand_over(struct wb_ent *e, struct tfs_wb_file *f, uint64_t gen);

/* At start-up (mode != off), before the uploaders run and before the
 * mount serves anything: create the stream group in wb->streams when
 * writeback.stream, the mode and the backend allow it, read the uploads
 * an earlier run left registered into wb->orphans, and start the sweeper
 * thread that aborts them.  The list must be read before this run can
 * start a stream, or the sweeper would abort a live upload.  Returns 0 or
 * an errno (logged); on failure tfs_wb_destroy() (wb_streams_stop())
 * cleans up what was done.  No lock: no other thread uses wb yet. */
int wb_streams_start(struct tfs_wb *wb);

/* At shutdown, after the uploaders stopped: join the sweeper, free the
 * orphans it did not take, and cancel every stream without aborting its
 * upload (the next mount aborts it), then free the group.  Cannot fail.
 * Takes wb->lock. */
void wb_streams_stop(struct tfs_wb *wb);

#endif
