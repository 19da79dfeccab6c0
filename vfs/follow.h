/* follow.h - prefetch in the samplers' orders.
 *
 * Model.  An ORDER is the list of files a reader will open, in order.  A
 * STREAM is one order being followed: its reader's position in it (the
 * index after the last file it opened), and its WINDOW, the next
 * cfg->window files of the order after that position, which the fetch
 * threads read into RAM ahead of the reader.  An OPEN of a file in some
 * order is CREDITED to one stream (below), which moves that stream's
 * position and with it the window.  Everything is BOUNDED: streams
 * (TFS_FOLLOW_MAX_STREAMS), files ahead of each reader (cfg->window),
 * bytes ahead of all readers (cfg->budget, shared by the active streams),
 * order memory (cfg->max_bytes, cfg->uid_max), the ancestry searched for
 * an opener's stream (TFS_FOLLOW_ANCESTRY) and the fetch threads
 * (TFS_FOLLOW_MAX_WORKERS).  This is prefetch by order; read-ahead of a
 * sequential reader within one file is cache/prefetch.h's.
 *
 * A training job hands the daemon the order it will read files in this
 * epoch (a manifest: the control file TFS_FOLLOW_FILE at the root of the
 * mount, or `tierfs warmup --follow`).  Several orders are followed at
 * once, one per stream:
 * - a stream per process that wrote the control file (its thread group
 *   id, checked with its start time so that a reused pid is another
 *   process): a new order from the same process replaces that stream's
 *   order, an empty one removes the stream, and a stream whose process is
 *   gone is dropped at the next order set;
 * - a stream per `follow` control command, ended with the command.
 * At most TFS_FOLLOW_MAX_STREAMS streams exist: a new one beyond them
 * drops the stream whose reader opened nothing for the longest time.
 *
 * Each open() of a file in an order is credited to one stream: the only
 * stream whose order holds the file; else the stream of the opener's
 * process or of its nearest ancestor (up to TFS_FOLLOW_ANCESTRY levels:
 * data-loader workers are children of the process that wrote the order);
 * else the stream in whose window the file is closest ahead.  That
 * stream's reader is then there: the daemon keeps up to `window` files of
 * its order fetched into RAM ahead of it, and realigns when the reader
 * skips forward or back.
 *
 * Windows.  An open at or inside the window moves the window's start to
 * the file after it (what the reader passed is no longer ahead).  An open
 * beyond the window starts the window over there at once.  Going back
 * takes more than one late open (loaders in several threads open out of
 * order): a file well behind the reader opened again in this pass starts
 * a new pass over the order (a new epoch), and two first opens in a row
 * far behind the window, close together, start the window over there.
 *
 * One pool of fetch threads serves the streams in turn.  The streams
 * share one budget of prefetched bytes not yet opened (half the RAM
 * tier's size): an active stream may hold at most budget / active
 * streams.  A stream whose reader has opened nothing of its order for
 * `stall_ms` is idle: it fetches nothing and has no share until its
 * reader opens a file of its order again.  Prefetched blocks are kept
 * until read (TFS_RAM_ONCE) and never take budget a reader is waiting
 * for.
 *
 * An order may name a file several times (sampling with replacement):
 * each occurrence keeps its position, and the key is stored once with the
 * chain of its positions, so an order costs time and memory linear in its
 * size whatever its repeats.  An open of such a file stands for its next
 * occurrence not yet opened in this pass.
 *
 * Order memory: the bytes written into open handles of the control file
 * (counted by their holder, tfs_follow_charge()) and every order's arrays
 * as allocated (positions, keys, their names, the hash table; counted as
 * they grow while an order is built) are counted per uid, within
 * cfg->max_bytes in all and cfg->uid_max per uid.
 *
 * Orders written into the control file are built by one builder thread,
 * in turn (tfs_follow_submit()): the FUSE threads only hand them over.
 *
 * Thread safety: all functions may be called from any thread; one mutex
 * protects the streams and the counts, never held across a fetch, a read
 * of /proc or the parse of an order.
 */
#ifndef TFS_FOLLOW_H
#define TFS_FOLLOW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "layer.h"
#include "manifest.h"
#include "meta.h"

/* The control file: writing a manifest into <mountpoint>/.tierfs-order
 * and closing it sets the writing process's order (an empty one removes
 * it). */
#define TFS_FOLLOW_FILE ".tierfs-order"

/* The most streams followed at once. */
#define TFS_FOLLOW_MAX_STREAMS 64
/* How many parent processes an opener's ancestry is searched for a
 * stream's owner. */
#define TFS_FOLLOW_ANCESTRY 8
/* The most fetch threads. */
#define TFS_FOLLOW_MAX_WORKERS 256

struct tfs_follow;
struct json_object;

struct tfs_follow_config {
	unsigned workers;           /* fetch threads */
	unsigned window;            /* files fetched at most ahead of each reader (0: 1) */
	uint64_t stall_ms;          /* prefetch.stall: a reader that opened nothing of
			    * its order for this long is idle (0: never) */
	uint64_t budget;            /* prefetched bytes not yet opened, all active streams
			    * together; 0: half of the RAM tier's size, read
			    * when used (so a reload of ram.size applies) */
	uint64_t max_bytes;         /* order memory of all uids together (0: no
			     * bound; prefetch.order_max) */
	uint64_t uid_max;           /* order memory of one uid (0: no bound;
			     * prefetch.order_max_uid): a new order beyond
			     * either bound drops that uid's streams quiet
			     * longest, never another uid's, else fails with
			     * EFBIG */
	uint64_t (*clock_ms)(void); /* milliseconds of a monotonic clock; NULL:
				     * CLOCK_MONOTONIC (tests pass their own) */
};

/* The process that wrote an order. */
struct tfs_follow_owner {
	pid_t pid;      /* thread group id; 0: unknown (the writer is not
			 * visible in the daemon's pid namespace) */
	uint64_t start; /* its start time in clock ticks (/proc/PID/stat),
			 * 0: unknown (then the pid alone identifies it) */
};

/* The owner of the process of thread `tid` (fuse_req_ctx()->pid, a thread
 * id): its thread group id and start time, read from /proc.  tid 0 gives
 * pid 0; a /proc that cannot be read gives pid tid and start 0.  Cannot
 * fail. */
void tfs_follow_owner_of(pid_t tid, struct tfs_follow_owner *out);

/* Start cfg->workers fetch threads over the RAM tier `ram` and the
 * metadata cache (both borrowed; both may be NULL when cfg->workers is 0
 * and cfg->budget is set, as in unit tests), and the order builder thread.
 * Call after daemonizing.  Returns 0, ENOMEM or EAGAIN.
 * tfs_follow_destroy() first lets the builder answer every request queued
 * (call it before the FUSE session and the handles that hold the texts
 * are gone). */
int tfs_follow_create(struct tfs_layer *ram, struct tfs_meta *meta,
		      const struct tfs_follow_config *cfg, const struct tfs_log *log,
		      struct tfs_follow **out);
void tfs_follow_destroy(struct tfs_follow *f);

/* Set the order of `owner`'s stream to the valid entries of `m` (copied;
 * errors are skipped and counted), its memory counted to `uid`, creating
 * the stream, or replacing its order and starting its reader over.  An
 * order with no entries removes the stream.  First drops the streams
 * whose owner process is gone; while the order being built does not fit
 * in the bounds (see cfg->uid_max), drops uid's streams quiet longest.
 * Returns 0, EFBIG (more than UINT32_MAX - 1 entries, or beyond a bound
 * alone or beside other uids' orders) or ENOMEM; on failure the old order
 * stays, unless it was dropped to make room. */
int tfs_follow_set(struct tfs_follow *f, const struct tfs_follow_owner *owner, uid_t uid,
		   const struct tfs_manifest *m);

/* A stream with no owner process (the follow command) following `m`,
 * counted to `uid` (bounded as by tfs_follow_set()): 0 and *id, ENOMEM or
 * EFBIG.  It lives until tfs_follow_remove() (or it is the one dropped
 * for a new stream beyond TFS_FOLLOW_MAX_STREAMS or to make room). */
int tfs_follow_add(struct tfs_follow *f, const struct tfs_manifest *m, uid_t uid, uint64_t *id);

/* An order written into the control file, handed to the builder. */
struct tfs_follow_request {
	struct tfs_follow_owner owner;          /* whose order it sets */
	uid_t uid;                              /* whose share its memory takes */
	const struct tfs_manifest_scope *scope; /* to resolve its lines */
	const char *text;                       /* the manifest text, `len` bytes, */
	size_t len;                             /* unchanged until done() */
	/* Called once by the builder thread when the order is set (rc 0) or
	 * refused (EINVAL: not one valid entry in a non-empty text; EFBIG;
	 * ENOMEM).  It may free the request. */
	void (*done)(struct tfs_follow_request *r, int rc);
	void *ctx;                       /* the caller's */
	struct tfs_follow_request *next; /* the builder's queue */
};

/* Queue `r` for the builder thread, which parses its text and sets the
 * order as tfs_follow_set() does, one request at a time in the order
 * they came, then calls r->done.  Never blocks (the text's memory is
 * already counted, by its holder).  Returns 0, or ESHUTDOWN (the builder
 * stopped: done() is not called). */
int tfs_follow_submit(struct tfs_follow *f, struct tfs_follow_request *r);

/* Count `bytes` more order memory of `uid` (the text of a control-file
 * handle), within both bounds; drops no stream.  Returns 0 or EFBIG
 * (nothing counted).  tfs_follow_uncharge() gives them back (cannot
 * fail). */
int tfs_follow_charge(struct tfs_follow *f, uid_t uid, uint64_t bytes);
void tfs_follow_uncharge(struct tfs_follow *f, uid_t uid, uint64_t bytes);
/* Remove stream `id` (a no-op when it is gone).  Cannot fail. */
void tfs_follow_remove(struct tfs_follow *f, uint64_t id);

/* Thread `tid` (fuse_req_ctx()->pid; 0 unknown) opened `key`: credit it
 * to one stream (see the top of this file) and move that stream's
 * window.  Cheap when `key` is in no order, or in one; else reads the
 * opener's ancestry from /proc once per thread until the streams change.
 * Cannot fail. */
void tfs_follow_opened(struct tfs_follow *f, const char *key, pid_t tid);

/* Stream `id`'s position (entries opened so far in order), order length
 * and files prefetched; all 0 when the stream is gone.  For progress. */
void tfs_follow_position(struct tfs_follow *f, uint64_t id, uint64_t *pos, uint64_t *len,
			 uint64_t *fetched);

/* Reload: run `workers` fetch threads (extra ones leave after their
 * current file; the window keeps its size).  Returns 0 or the
 * pthread_create() error (logged).  Thread safe. */
int tfs_follow_set_workers(struct tfs_follow *f, unsigned workers);

struct tfs_stattab;

/* The rows of the "follow" stats (statdef.h): what tfs_follow_stats()
 * adds, and the metrics over them. */
extern const struct tfs_stattab tfs_follow_stattab;

/* Add a "follow" object to `out`: totals over all streams (order_files
 * and position are sums over the streams), the order memory counted
 * (order_bytes, uid_bytes per uid, and the bounds), the builder's
 * orders_queued (waiting or being built), orders_built and
 * orders_refused, and "streams", an array with one object per stream
 * (with its uid and the bytes of its order). */
void tfs_follow_stats(struct tfs_follow *f, struct json_object *out);

/* ---- the fetch threads' steps (exposed for tests) ---- */

/* One file to prefetch. */
struct tfs_follow_job {
	uint64_t stream; /* stream id */
	uint64_t gen;    /* its order's generation */
	uint64_t wgen;   /* its window's generation (bumped by a realign) */
	size_t idx;      /* index in its order */
	char *key;       /* owned by the job until tfs_follow_done() */
};

/* The next file a fetch thread fetches: from the streams in turn, skipping the idle ones, those whose window is
 * full and those that hold their share of the budget.  Returns 0 and
 * *job; ENOENT when no active stream has a file left in its window;
 * EAGAIN when some have but their shares are spent (shares grow when a
 * stream goes idle); ENOMEM. */
int tfs_follow_take(struct tfs_follow *f, struct tfs_follow_job *job);
/* The file of `job` has `size` bytes: count them in its stream's bytes
 * ahead of the reader until the reader passes it.  Returns false when the
 * job is stale (its stream is gone or has a new order): do not fetch. */
bool tfs_follow_sized(struct tfs_follow *f, const struct tfs_follow_job *job, uint64_t size);
/* The fetch of `job` ended with `rc` (ECANCELED: dropped as stale, not
 * counted): count it and free job->key.  Cannot fail. */
void tfs_follow_done(struct tfs_follow *f, struct tfs_follow_job *job, int rc);

/* ---- the policy, as pure functions (exposed for tests) ---- */

/* The bytes each of `active` streams may hold ahead of its reader. */
uint64_t tfs_follow_share(uint64_t budget, size_t active);
/* Whether a reader last seen at `last_ms` has stalled at `now_ms`. */
bool tfs_follow_stalled(uint64_t last_ms, uint64_t now_ms, uint64_t stall_ms);
/* Of `n` (>= 1) streams holding a file at index idx[i] of their order,
 * whose readers are at cur[i] (the index after the last file they
 * opened): the one whose window it is closest ahead in (smallest
 * idx - cur with idx >= cur), else the one it is closest behind. */
size_t tfs_follow_closest(const size_t *idx, const size_t *cur, size_t n);

/* The scope the manifests of the `follow` control command are resolved
 * in (src/follow_ctl.c; borrowed, it must outlive `f`), and reading it
 * back.  Not locked: set once, before the command is registered. */
void tfs_follow_set_scope(struct tfs_follow *f, const struct tfs_manifest_scope *scope);
const struct tfs_manifest_scope *tfs_follow_scope(const struct tfs_follow *f);

#endif
