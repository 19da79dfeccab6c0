/* ssd_internal.h - state and helpers shared by the files of the SSD tier.
 * Calls go one way, top to bottom:
 *
 *   ssd.c          the layer: lookup, read_block, put_block, invalidate,
 *                  stats, pinning objects, create/destroy
 *   ssd_fillq.c    the fills of blocks readers fetched: queued for its
 *                  threads (off the reader's path) or written at once
 *   ssd_fill.c     writing blocks into the tier: admission, the data
 *   ssd_evict.c    write, the block record; the background thread:
 *                  eviction and the sweep (siblings: neither calls the other)
 *   ssd_objects.c  the shared state: the id table (pins, EVICTING marks,
 *                  deferred invalidations, touches), data files and trash,
 *                  dropping an object, the eviction candidate
 *   ssd_index.c    the on-disk format: LMDB records, shared usage, opening
 *                  and recounting the index
 *
 * Each file calls only files below it.  Not for use outside cache/ssd*.c;
 * the tier's interface is ssd.h.  The STATES and INVARIANTS (I1-I5) these
 * files keep are described at the top of ssd.c.
 *
 * LOCKING
 *
 *   lock        (mutex) the id table (pins, EVICTING marks, deferred
 *               invalidations, touches), the reuse estimator, `kick`.  It
 *               is a leaf: never held across LMDB, file I/O or the inner
 *               layer.  Condition `unmarked`: an EVICTING mark was
 *               cleared.  Condition `wake`: the background thread.
 *   flush_lock  (mutex) serialises touch flushes; protects flush_buf and
 *               persisted_clock.  Held across the flush write transaction.
 *   LMDB's writer lock is taken by every write transaction; transactions
 *   are short and never wait for anything but the disk.
 *   Order: flush_lock -> lock, and flush_lock -> LMDB writer.  Nothing
 *   takes flush_lock or lock while in a write transaction, and no thread
 *   waits on `unmarked` while it holds a transaction.
 *   Atomics: clock, used, charged, objects, counters, broken, stop, and the
 *   limits (capacity, high, low, pin_max, gap_floor).
 */
#ifndef TFS_SSD_INTERNAL_H
#define TFS_SSD_INTERNAL_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "log.h"
#include "clock.h"
#include "policy.h"
#include "ssd.h"

#define ID_LEN TFS_OBJ_ID_LEN

/* object record layout */
#define OFF_VERSION 0
#define OFF_FLAGS 4
#define OFF_SIZE 8
#define OFF_TICK 16
#define OFF_CACHED 24
#define OFF_ETAG_LEN 32
#define OFF_KEY_LEN 34
#define OBJ_HDR 36
#define KEY_TEXT_MAX 1024
#define OBJ_VAL_MAX (OBJ_HDR + TFS_ETAG_MAX + KEY_TEXT_MAX)

#define BLK_KEY_LEN (ID_LEN + 8)
#define BLK_VAL_LEN 12
#define ATIME_KEY_LEN (8 + ID_LEN)

/* "XX/" + 64 hex + NUL */
#define REL_LEN (3 + 2 * ID_LEN + 1)
/* "trash/" + 64 hex + "." + 20 digits + NUL */
#define TRASH_LEN (6 + 2 * ID_LEN + 1 + 20 + 1)

/* id table: open addressing, linear probing, power of two */
#define TAB_SLOTS 16384u
#define TAB_MASK (TAB_SLOTS - 1)
#define TOUCH_MAX 4096u

#define FLUSH_MS 1000
#define SCAN_LIMIT 4096     /* atime entries examined to find a candidate */
#define EVICT_MISSES 1000   /* candidates lost to races before a pass gives up */
#define SWEEP_BUDGET_MS 200 /* sweep work per background iteration */
#define SWEEP_DONE 257      /* sweep_pos: 0 trash, 1..256 data/XX, then done */
#define GAP_FLOOR_DIV 16    /* visit gap floor = capacity blocks / 16 */
#define MIN_CAP_BLOCKS 4

/* ssd_drop_object(): any last_tick will do (not the evictor) */
#define ANY_TICK UINT64_MAX

/* An id table entry (ssd_objects.c only; the table is allocated and freed
 * by ssd.c). */
struct ent {
	uint8_t id[ID_LEN];
	uint64_t touch; /* tick of the latest unflushed access, 0: none */
	uint32_t pins;  /* readers inside read_block for this id */
	bool used;
	bool evicting; /* records and file being deleted */
	bool doomed;   /* invalidated while pinned: drop at the last unpin */
};

struct touch {
	uint8_t id[ID_LEN];
	uint64_t tick;
};

struct obj_rec {
	uint32_t flags;
	uint64_t size;
	uint64_t last_tick;
	uint64_t cached;
	char etag[TFS_ETAG_MAX];
};

struct blk_rec {
	uint64_t sum;
	uint32_t len;
};

/* The fill queue (ssd_fillq.c).  `lock` protects everything but the
 * threads, which only start and stop change. */
#define SSD_FILLQ_THREADS 2
/* Written full-block copies kept for the next ones, at most: a fresh
 * buffer per block costs page faults, zeroing and an munmap (more CPU
 * than the copy itself on a cold sequential read). */
#define SSD_FILLQ_SPARE 8
struct fillq_item;
struct ssd_fillq {
	pthread_mutex_t lock;
	pthread_cond_t work; /* an item was queued, or stop */
	struct fillq_item *head, *tail;
	uint64_t cap;   /* most bytes of copies queued; 0: fills on the reader's thread */
	bool drop;      /* ssd.fill_when_full = drop: a block that does not fit is
			 * not cached; else its reader writes it */
	uint64_t bytes; /* bytes of copies queued or being written */
	/* buffers of block size kept for reuse; bytes + nspare x block size
	 * stays within cap */
	void *spare[SSD_FILLQ_SPARE];
	unsigned nspare;
	bool stop;
	pthread_t threads[SSD_FILLQ_THREADS];
	unsigned nthreads;
};

struct ssd {
	struct tfs_layer *inner;
	const struct tfs_log *log;
	MDB_env *env; /* borrowed */
	MDB_dbi objs, blks, atime, state;
	enum tfs_policy policy;
	uint64_t bs;
	char *dir;
	int datafd; /* <dir>/data */
	/* Limits: set at creation and by tfs_ssd_set_limits() (reload), so
	 * atomics; readers may combine values of two generations briefly. */
	_Atomic uint64_t capacity, high, low;
	_Atomic uint64_t gap_floor;

	_Atomic uint64_t clock;
	_Atomic uint64_t used;    /* sum of cached block lengths (I2) */
	_Atomic uint64_t charged; /* used + bytes reserved by fills in flight */
	_Atomic uint64_t objects;
	_Atomic uint64_t pinned;  /* sum of the sizes of PINNED objects */
	_Atomic uint64_t pin_max; /* most bytes pinned at once */
	_Atomic uint64_t trash_seq;
	pthread_mutex_t usage_lock; /* orders the mirrors of the shared usage */
	size_t usage_txnid;         /* the transaction they mirror (usage_lock) */
	atomic_bool broken;         /* index damaged at run time: pass through */
	atomic_bool direct;         /* fills open their data file O_DIRECT (ssd.direct_io,
			     * and the filesystem takes it), and hits are read with
			     * it; only ever cleared */
	atomic_bool stop;

	pthread_mutex_t lock;
	pthread_cond_t unmarked;
	pthread_cond_t wake;
	struct ent *tab;  /* TAB_SLOTS entries */
	size_t tab_count; /* used slots */
	size_t touched;   /* entries with touch != 0 */
	struct tfs_reuse reuse;
	bool kick;

	pthread_mutex_t flush_lock;
	struct touch *flush_buf; /* TOUCH_MAX */
	uint64_t persisted_clock;

	pthread_t thread;
	unsigned sweep_pos; /* background thread only */
	uint64_t swept;     /* background thread only */

	struct tfs_ratelimit rl_full, rl_corrupt, rl_err;

	_Atomic uint64_t hits, misses, hit_bytes, fill_bytes, bypassed, evictions, evicted_bytes,
		corrupt, write_errors, fill_queued, fill_queue_hits, fill_queue_reused,
		direct_read_bytes;
	/* Fills by outcome (one per block; ssd_fill() and ssd_fill_read()):
	 * indexed; refused by the admission policy; refused by the capacity
	 * (nothing can be evicted in time); failed (memory, I/O, the index);
	 * superseded (another version of the object took its place first);
	 * dropped (the queue was full and ssd.fill_when_full = drop). */
	_Atomic uint64_t fill_written, fill_refused_policy, fill_refused_capacity, fill_failed,
		fill_superseded, fill_dropped;

	struct ssd_fillq fillq;
};

/* an eviction candidate: ssd_oldest_candidate() */
struct victim {
	uint8_t id[ID_LEN];
	uint64_t tick;
};

/* ---- small helpers (byte order, clock, counters) ---- */

static inline void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static inline uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static const char hexdig[] = "0123456789abcdef";

static inline void count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline MDB_val mval(const void *p, size_t n)
{
	MDB_val v = { .mv_size = n, .mv_data = (void *)p };
	return v;
}

/* The 64 hex digits of id, NUL-terminated. */
static inline void hex_id(const uint8_t id[ID_LEN], char out[2 * ID_LEN + 1])
{
	for (int i = 0; i < ID_LEN; i++) {
		out[2 * i] = hexdig[id[i] >> 4];
		out[2 * i + 1] = hexdig[id[i] & 15];
	}
	out[2 * ID_LEN] = '\0';
}

/* "XX/<hex>", relative to datafd */
static inline void rel_path(const uint8_t id[ID_LEN], char out[REL_LEN])
{
	out[0] = hexdig[id[0] >> 4];
	out[1] = hexdig[id[0] & 15];
	out[2] = '/';
	hex_id(id, out + 3);
}

/* May a line of this kind be logged now?  (lib/log.h; the limiter locks
 * itself.) */
static inline bool rl_allow(struct tfs_ratelimit *rl, uint64_t *suppressed)
{
	return tfs_ratelimit_allow(rl, tfs_mono_ms(), suppressed);
}

/* ---- ssd_index.c: records, shared usage, opening the index ---- */

/* Decode an object record: 0, or EINVAL (malformed or another version).  No lock. */
int ssd_obj_decode(const MDB_val *v, struct obj_rec *r);

/* Encode a new object record (flags 0, cached 0) into vb; returns its length.  No lock. */
size_t ssd_obj_encode(uint8_t vb[OBJ_VAL_MAX], const struct tfs_obj *obj, uint64_t tick);

/* Decode a block record: 0, or EINVAL (wrong size).  No lock. */
int ssd_blk_decode(const MDB_val *v, struct blk_rec *b);

/* The ssd_blocks key of block idx of id.  Cannot fail.  No lock. */
void ssd_blk_key(uint8_t k[BLK_KEY_LEN], const uint8_t id[ID_LEN], uint64_t idx);

/* The ssd_atime key of id accessed at tick.  Cannot fail.  No lock. */
void ssd_atime_key(uint8_t k[ATIME_KEY_LEN], uint64_t tick, const uint8_t id[ID_LEN]);

/* The shared usage as one transaction saw it. */
struct ssd_usage {
	uint64_t used, objects;
	size_t txnid; /* mdb_txn_id(): the state is that of this transaction */
};

/* In the caller's write txn: add the deltas to the shared usage, set *now.
 * Returns 0 or an LMDB code (not logged; the caller aborts).  No lock. */
int ssd_shared_add(struct ssd *s, MDB_txn *txn, int64_t used_delta, int64_t obj_delta,
		   struct ssd_usage *now);

/* After the commit (or a read): mirror the shared usage in `used`,
 * `charged` and `objects`, unless a newer transaction's state is already
 * mirrored (a refresh that read an older snapshot never undoes a commit).
 * Takes usage_lock. */
void ssd_usage_sync(struct ssd *s, const struct ssd_usage *now);

/* Reread the shared usage (read txn); on any error the old values stay.  No lock. */
void ssd_usage_refresh(struct ssd *s);

/* Open the DBIs, check the format, empty them if `wipe` or foreign: 0 or an errno
 * (logged).  Creation only. */
int ssd_open_dbs(struct ssd *s, bool wipe);

/* Recount usage and pins, restore the clock and estimator: 0, EINVAL (a malformed
 * record) or an LMDB code (not logged).  Creation only. */
int ssd_load_state(struct ssd *s);

/* ---- ssd_objects.c: the id table, data files, drops, the eviction candidate ---- */

/* Log an LMDB failure (rate-limited), disable the tier if the index is damaged;
 * returns the errno.  Takes none of the tier's locks. */
int ssd_lmdb_trouble(struct ssd *s, int rc, const char *what);

/* ssd_lmdb_trouble() for an operation on one object: the message names `key`
 * (cut to 100 bytes).  Returns the errno.  Takes none of the tier's locks. */
int ssd_lmdb_trouble_key(struct ssd *s, int rc, const char *what, const char *key);

/* Pin id for a read (I5: it cannot be marked EVICTING while pinned),
 * waiting while it is EVICTING.  Returns 0, or ENOMEM when the id table is
 * full (the caller passes through, and must not ssd_unpin()).  Takes
 * s->lock and waits on `unmarked`: the caller holds no transaction. */
int ssd_pin(struct ssd *s, const uint8_t id[ID_LEN]);

/* Release a pin of ssd_pin().  The last pin of an id invalidated meanwhile
 * (ssd_doom()) drops the object (ssd_drop_object(), failure logged).
 * Cannot fail.  Takes s->lock; the caller holds no lock nor a transaction. */
void ssd_unpin(struct ssd *s, const uint8_t id[ID_LEN]);

/* Invalidate id: wait while it is EVICTING; if readers pin it, mark it so
 * that the last ssd_unpin() drops it, else mark it EVICTING and drop it now
 * (failure logged; with the id table full nothing is dropped).  Cannot fail.
 * Takes s->lock and waits on `unmarked`: the caller holds no pin of id, no
 * lock and no transaction. */
void ssd_doom(struct ssd *s, const uint8_t id[ID_LEN]);

/* Note an access to id at `tick` by a reader that pins it: with `hit`, the
 * gap since the object's previous access (its pending touch, else
 * `last_tick` from its record) feeds the epoch estimator if it exceeds
 * `gap` (the object's visit gap, ACCESS ORDER in ssd.c).  Then tick is
 * noted as id's touch, written to the index by the next
 * ssd_flush_touches(); when TOUCH_MAX ids wait it flushes first, and if
 * still full the touch is lost.  Cannot fail.  Takes s->lock, and to flush
 * flush_lock then s->lock: the caller holds neither, nor a transaction. */
void ssd_touch(struct ssd *s, const uint8_t id[ID_LEN], uint64_t tick, bool hit, uint64_t last_tick,
	       uint64_t gap);

/* Open id's data file (data/XX/<hex>, relative to datafd) with `flags` plus
 * O_CLOEXEC | O_NOFOLLOW, mode 0600 if created.  Returns the fd, which the
 * caller owns and closes, or -1 with errno set (not logged).  No lock. */
int ssd_open_data(struct ssd *s, const uint8_t id[ID_LEN], int flags);

/* Wake the background thread (sets `kick`: evict now).  Cannot fail.  Takes
 * s->lock. */
void ssd_wake_bg(struct ssd *s);

/* Mark id EVICTING unless it is busy (or the id table is full); true if marked.
 * Takes s->lock. */
bool ssd_mark(struct ssd *s, const uint8_t id[ID_LEN]);

/* Clear id's EVICTING mark and wake the readers waiting on it.  Takes s->lock. */
void ssd_unmark(struct ssd *s, const uint8_t id[ID_LEN]);

/* In a write txn: rename id's data file into trash/; true (and `trash` set) if
 * moved, false if absent or failed (logged).  No lock. */
bool ssd_move_to_trash(struct ssd *s, const uint8_t id[ID_LEN], char trash[TRASH_LEN]);

/* After the commit: unlink a file ssd_move_to_trash() moved (failure logged).  No lock. */
void ssd_unlink_trash(struct ssd *s, const char *trash);

/* Delete id's records and file in one write txn; the caller holds its EVICTING
 * mark or a pin, not s->lock.  Returns 0 (*freed), ENOENT, EAGAIN (expect_tick
 * given and not matched, or PINNED) or an errno (logged). */
int ssd_drop_object(struct ssd *s, const uint8_t id[ID_LEN], uint64_t expect_tick, uint64_t *freed);

/* Write pending touches, clock and estimator in one txn (failure logged, touches
 * lost).  Takes flush_lock then s->lock: the caller holds neither, nor a txn. */
void ssd_flush_touches(struct ssd *s);

/* The oldest evictable object: 0, ENOENT (none in SCAN_LIMIT entries) or an
 * errno (logged).  Read txn; takes s->lock per entry. */
int ssd_oldest_candidate(struct ssd *s, struct victim *out);

/* Does the policy let v go now?  Takes s->lock. */
bool ssd_may_go(struct ssd *s, const struct victim *v);

/* ---- ssd_fill.c: writing blocks into the tier ---- */

/* Cache block idx of obj, `len` bytes of buf that the inner layer or
 * write-back just returned, accessed at `tick`: admit it (the policy, and a
 * compare-and-swap reservation in `charged` against the capacity, released
 * on return), write it into the data file and commit its block record
 * (I1-I3).  padded: buf is a read buffer as struct tfs_layer_ops
 * describes (zeros up to tfs_obj_block_room(len)), which an O_DIRECT write
 * can take as it is; otherwise an unaligned one is copied first.
 * have_obj: the caller saw an object record; if not, a failed
 * write removes the data file again (if it still has no record) so that it
 * holds no space.  Returns true if
 * the block is now indexed.  Never fails the read.  Each call counts one
 * outcome: fill_written, fill_refused_policy or fill_refused_capacity
 * (a refusal also counts in `bypassed`), fill_failed (an I/O or LMDB
 * failure, also counted in `write_errors` and logged, rate-limited), or
 * fill_superseded (lost a race to another version or a replaced file:
 * EBUSY inside).  buf stays the caller's.  The fill opens
 * its own fd on the data file (O_DIRECT with s->direct; a filesystem that
 * refuses it clears s->direct for good, logged once) and closes it before
 * return; readers open theirs.  The caller pins obj->id (I5) and
 * holds none of the tier's locks nor a transaction: admission takes s->lock
 * (ssd_oldest_candidate(), ssd_may_go(), ssd_wake_bg()), the commit LMDB's
 * writer lock, then usage_lock (ssd_usage_sync()). */
bool ssd_fill(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, const void *buf, size_t len,
	      bool padded, uint64_t tick, bool have_obj);

/* A cold run of ssd_read_blocks() being filled: set up on the caller's stack
 * as the ctx of the struct tfs_io_progress it hands the inner layer, so each
 * block is written to the tier as it arrives and only then handed up.
 * Nothing in it is owned: obj, bufs and up are the caller's and outlive the
 * inner read.  Used by one thread (the one reading the run); no lock. */
struct run_fill {
	struct ssd *s;
	const struct tfs_obj *obj;
	uint64_t first, tick;       /* the run's first block; its access tick */
	void *const *bufs;          /* one buffer per block of the run */
	bool have_obj, filled;      /* an object record was seen; a block was indexed */
	bool sync;                  /* up->background: write fills before reporting */
	struct tfs_io_progress *up; /* the caller's; may be NULL */
};

/* ---- ssd_fillq.c: fills written off the reader's thread ---- */

/* Give the queue `cap` bytes (`drop`: ssd.fill_when_full = drop) and, if
 * cap > 0, start its threads; its
 * locks were initialised by tfs_ssd_create() (ssd_fillq_free() destroys
 * them).  Returns 0 or the pthread_create() error (logged; the queue is
 * stopped). */
int ssd_fillq_start(struct ssd *s, uint64_t cap, bool drop);
/* Finish every queued fill, then stop the threads.  Call once, when no
 * reader uses the layer any more.  Cannot fail. */
void ssd_fillq_stop(struct ssd *s);
void ssd_fillq_free(struct ssd *s);
/* Queue the fill of block `idx` of `obj` (the arguments of ssd_fill(); buf
 * is copied, obj->key too): the object is pinned until the fill is done.
 * Returns FILLQ_QUEUED (counted in fill_queued); FILLQ_FULL when the copy
 * does not fit in the queue's bytes (or the queue is stopping): nothing is
 * counted, the caller writes the block or drops it; FILLQ_FAILED (counted
 * in fill_failed) when the copy's memory or the pin cannot be had: the
 * block is not cached.  Never waits for the queue.  Call with
 * s->fillq.cap > 0 and the object pinned by the caller.  Takes
 * s->fillq.lock and s->lock. */
enum fillq_push {
	FILLQ_QUEUED,
	FILLQ_FULL,
	FILLQ_FAILED,
};
enum fillq_push ssd_fillq_push(struct ssd *s, const struct tfs_obj *obj, uint64_t idx,
			       const void *buf, size_t len, uint64_t tick, bool have_obj);
/* A reader missed block idx of obj's version in the index: if its fill is
 * still queued, copy its `len` bytes into buf and return true (counted as
 * fill_queue_hits), so a block is never fetched twice because its fill
 * is late.  Returns false otherwise.  Takes s->fillq.lock. */
bool ssd_fillq_copy(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, void *buf, size_t len);
/* Whether any of blocks first..first+n-1 of obj's version waits in the
 * queue.  Takes s->fillq.lock. */
bool ssd_fillq_has(struct ssd *s, const struct tfs_obj *obj, uint64_t first, unsigned n);
/* Bytes of copies queued or being written now. */
uint64_t ssd_fillq_bytes(struct ssd *s);

/* A block a reader just got from the inner layer: queue its fill
 * (ssd_fillq_push()); with no queue (cap 0), or with the queue full
 * (unless s->fillq.drop), ssd_fill() it on this thread, so the reader
 * waits for the SSD only when the queue cannot absorb its blocks.  With
 * s->fillq.drop a block that does not fit is counted in fill_dropped and
 * not cached.  Returns true if the block was queued or is now indexed.
 * The caller pins obj->id.  Cannot fail. */
bool ssd_fill_read(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, const void *buf,
		   size_t len, uint64_t tick, bool have_obj);

/* The progress callback of a run (ctx: a struct run_fill): ssd_fill_read()
 * block i of the run (ssd_fill() when f->sync), then report it to `up`
 * (tfs_layer_block_done()).
 * Cannot fail: a block not cached is still handed up.  Locks: those of
 * ssd_fill_read(), with the run's pin held. */
void ssd_run_block_done(void *ctx, int i);

/* ---- ssd_evict.c ---- */

/* The background thread's start routine (arg: the struct ssd): flush, sync,
 * evict, sweep until s->stop; returns NULL.  Joined by ssd_destroy(). */
void *ssd_bg_main(void *arg);

#endif
