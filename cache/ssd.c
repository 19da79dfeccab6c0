/* ssd.c - the SSD tier: an on-disk block cache (one sparse file per
 * object) indexed in LMDB, with checksums, access-order eviction and
 * crash recovery.
 *
 * This file is the layer: lookup, read_block, read_blocks, put_block,
 * verifying a cached block, pinning objects, invalidate, stats, limits,
 * create/destroy.  A block a reader fetched from the inner layer is
 * copied into the fill queue (ssd_fillq.c: ssd.fill_queue bytes; a block
 * that does not fit is written by its reader, or with ssd.fill_when_full
 * = drop not cached) and written by its threads, off the
 * reader's path; a read of a block whose fill is queued is served from
 * the copy; a warm-up's blocks (tfs_io_progress.background) and
 * write-back's (put_block) are written before the call returns.  Writing
 * blocks into the tier (admission, the data
 * write, the block record: ssd_fill()) is ssd_fill.c; the background
 * thread (eviction, sweep) is ssd_evict.c; the in-memory id table (pins,
 * EVICTING marks, touches), dropping an object, the data files and trash,
 * and the eviction candidate are ssd_objects.c, which all three call; ON
 * DISK (the cache directory and the LMDB records) is described in
 * ssd_index.c, which implements the format.  Calls go one way: ssd.c ->
 * ssd_fill.c, ssd_evict.c -> ssd_objects.c -> ssd_index.c.  The state they
 * share and its LOCKING are in ssd_internal.h.
 *
 * STATES
 *
 *   A block is ABSENT (no block record), WRITTEN (bytes pwrite'n into the
 *   data file, record not yet committed: invisible to readers), or CACHED
 *   (record committed).  A CACHED block whose bytes no longer match (torn
 *   write, lost page, truncated or deleted file, bit flip) is found by the
 *   next reader, its record is deleted, and it is read again from the
 *   inner layer.
 *
 *   An object is ABSENT, CACHED (object record, atime entry, data file), or
 *   EVICTING: marked in the in-memory id table while a thread deletes its
 *   records and file.  Readers of an EVICTING object wait for the mark to
 *   go, then see it ABSENT.
 *
 * INVARIANTS
 *
 *   I1  Every object record has exactly one atime entry, keyed by its
 *       last_tick, and every atime entry has an object record: both are
 *       changed in the same write transaction.
 *   I2  An object record's cached_bytes is the sum of the len of its block
 *       records.  `used` (in memory) is the sum of cached_bytes: it is
 *       computed by scanning ssd_objects at start-up and then moved by the
 *       delta of each committed transaction, so it never drifts.
 *   I3  A block record is only committed by a transaction that checked
 *       that the file now at the data path is the inode the bytes were
 *       written to, and that the object record (if any) has the same ETag
 *       (record_block() in ssd_fill.c).
 *       A data file is only removed (renamed into trash/) inside the write
 *       transaction that deletes all of its records.  LMDB serialises the
 *       two, so a block record always describes bytes written to the
 *       current file, barring crashes and tampering, which I4 catches.
 *   I4  Bytes are returned only if the pread got exactly the recorded
 *       length and their XXH3-64 equals the recorded checksum.  A copy
 *       tagged with another ETag is never read: the object is dropped.
 *   I5  An object is evicted, invalidated or swept only while it is marked
 *       EVICTING, and the mark is only set when no reader pins the id.  A
 *       reader pins the id for the whole read_block, fill included, and a
 *       queued fill holds a pin of its own until it is written.  So a
 *       block being read or filled is never evicted.
 *
 * CRASH BEHAVIOUR
 *
 *   kill -9 or a crash of the daemon: every committed transaction and
 *   every pwrite is in the OS page cache (MDB_NOSYNC skips the fsync, not
 *   the write), so a restart with the same directory is warm.  A fill
 *   interrupted between pwrite and commit leaves bytes no record points
 *   to; a drop interrupted between rename and commit leaves records whose
 *   file is gone (found by I4).  Kernel crash or power loss: about the
 *   last second of index commits may be lost (the background thread calls
 *   mdb_env_sync() every second) and data pages may be torn or missing;
 *   I4 finds the latter.  If LMDB itself is damaged, tfs_lmdb_open() moves
 *   it aside; damage found later inside our databases disables the tier
 *   (reads pass through) until a restart, which empties them.  A
 *   background sweep after start removes trash/ and data files that have
 *   no object record and no fill in progress (a fill holds a shared flock
 *   on its file until it commits, so another daemon sharing the tier is
 *   protected too).  The data files are never fsync'ed: any loss is
 *   detected and costs a refetch, never a wrong byte.
 *
 * ACCESS ORDER AND EPOCH LEARNING
 *
 *   Each read_block ticks a logical clock.  A fill writes the object's new
 *   last_tick in its own transaction; a hit only notes the tick in the
 *   in-memory id table ("touched"), and the background thread writes all
 *   notes in one transaction about once per second (or a reader does, when
 *   TOUCH_MAX objects are waiting), moving their atime entries.  So a hit
 *   costs a read-only transaction, a pread and no write.
 *
 *   On a hit the gap since the object's previous access is a re-access
 *   interval for the epoch estimator, but only when it exceeds the
 *   object's visit gap, max(object blocks, capacity blocks / 16).  Reading
 *   one object touches it once per block, R concurrent readers apart, and
 *   a random reader inside a large object touches it every few ticks;
 *   neither says how long an epoch is.  The epoch interval is at least the
 *   number of blocks that pass through the tier per epoch, which exceeds
 *   its capacity in blocks whenever eviction matters at all (a dataset that
 *   fits never needs the policy), so gaps below capacity/16 are intra-visit
 *   and are ignored, at a bias of at most ~3% of the intervals.
 *
 * ADMISSION AND EVICTION (policy.h)
 *
 *   Only the oldest candidate is ever considered: the first atime entry
 *   whose object is not pinned by a reader, not touched since the last
 *   flush, not being evicted and not PINNED.  A fill that would take usage
 *   above the high watermark is admitted if the policy lets that candidate
 *   go (LRU: always) and wakes the evictor; otherwise it is bypassed
 *   (served, not cached).  Usage never exceeds the capacity: a fill
 *   reserves its bytes in `charged` (usage + fills in flight) with a
 *   compare-and-swap against the capacity before writing, and is bypassed
 *   if they do not fit, until the evictor has made room.  The evictor runs
 *   while usage > high watermark and deletes whole objects, oldest first,
 *   until usage <= low watermark or the policy refuses the oldest.
 *
 *   A reload may lower the capacity and the watermarks
 *   (tfs_ssd_set_limits()): usage is then above the capacity until the
 *   evictor, woken at once, has deleted objects down to it, ignoring the
 *   policy while usage exceeds the capacity; meanwhile every fill is
 *   bypassed.  Readers are never blocked by this.
 */
#include "config.h"

#include "ssd.h"
#include "ssd_internal.h"

#include "blocksum.h"
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dbuf.h"
#include "lmdb_env.h"
#include "policy.h"
#include "statdef.h"
#include "units.h"

/* ---- small helpers ---- */

/* ---- dropping a block ---- */

/* A cached block failed verification: delete its record if it is still
 * the one we read (same ETag, same checksum and length).  Returns true if
 * this call dropped it (so it counts as corruption once). */
static bool drop_block(struct ssd *s, const struct tfs_obj *obj, uint64_t idx,
		       const struct blk_rec *seen)
{
	MDB_txn *txn = NULL;
	MDB_val k = mval(obj->id, ID_LEN), v;
	uint8_t bk[BLK_KEY_LEN], vb[OBJ_VAL_MAX];
	struct obj_rec r;
	struct blk_rec b;
	bool dropped = false;
	int rc;

	ssd_blk_key(bk, obj->id, idx);
	MDB_val bkv = mval(bk, BLK_KEY_LEN), bv;
	rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc) {
		ssd_lmdb_trouble(s, rc, "drop block: begin");
		return true;
	}
	rc = mdb_get(txn, s->objs, &k, &v);
	if (rc == 0 && ssd_obj_decode(&v, &r) == 0 && strcmp(r.etag, obj->etag) == 0) {
		size_t vlen = v.mv_size;
		memcpy(vb, v.mv_data, vlen);
		rc = mdb_get(txn, s->blks, &bkv, &bv);
		if (rc == 0 && ssd_blk_decode(&bv, &b) == 0 && b.sum == seen->sum &&
		    b.len == seen->len) {
			put_le64(vb + OFF_CACHED, r.cached >= b.len ? r.cached - b.len : 0);
			v = mval(vb, vlen);
			struct ssd_usage now;
			rc = mdb_del(txn, s->blks, &bkv, NULL);
			if (rc == 0)
				rc = mdb_put(txn, s->objs, &k, &v, 0);
			if (rc == 0)
				rc = ssd_shared_add(
					s, txn, -(int64_t)(r.cached >= b.len ? b.len : r.cached), 0,
					&now);
			if (rc == 0)
				rc = mdb_txn_commit(txn);
			else
				mdb_txn_abort(txn);
			txn = NULL;
			if (rc == 0)
				ssd_usage_sync(s, &now);
			dropped = true;
		}
	}
	if (txn)
		mdb_txn_abort(txn);
	if (rc && rc != MDB_NOTFOUND)
		ssd_lmdb_trouble(s, rc, "drop block");
	return dropped;
}

/* ---- lookup ---- */

struct lookup {
	bool have_obj, bad_obj, have_blk;
	struct obj_rec rec;
	struct blk_rec blk;
};

static int lookup(struct ssd *s, const uint8_t id[ID_LEN], uint64_t idx, struct lookup *lk)
{
	MDB_txn *txn = NULL;
	MDB_val k = mval(id, ID_LEN), v;
	uint8_t bk[BLK_KEY_LEN];
	int rc;

	memset(lk, 0, sizeof(*lk));
	rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return ssd_lmdb_trouble(s, rc, "lookup: begin");
	rc = mdb_get(txn, s->objs, &k, &v);
	if (rc == 0) {
		lk->have_obj = true;
		lk->bad_obj = ssd_obj_decode(&v, &lk->rec) != 0;
		ssd_blk_key(bk, id, idx);
		k = mval(bk, BLK_KEY_LEN);
		rc = mdb_get(txn, s->blks, &k, &v);
		if (rc == 0)
			lk->have_blk = ssd_blk_decode(&v, &lk->blk) == 0;
	}
	mdb_txn_abort(txn);
	if (rc && rc != MDB_NOTFOUND)
		return ssd_lmdb_trouble(s, rc, "lookup");
	return 0;
}

/* lookup(), and if id holds another version of obj (or an unreadable
 * record), drop it: the read then sees it ABSENT.  The caller pins obj->id.
 * A failed lookup (logged) is a miss.  Never fails. */
static void lookup_version(struct ssd *s, const struct tfs_obj *obj, uint64_t idx,
			   struct lookup *lk)
{
	uint64_t freed;

	if (lookup(s, obj->id, idx, lk) != 0)
		memset(lk, 0, sizeof(*lk)); /* logged; treat as a miss */
	if (lk->have_obj && (lk->bad_obj || strcmp(lk->rec.etag, obj->etag) != 0)) {
		tfs_debug(s->log, "ssd: '%s': cached version %s replaced by %s", obj->key,
			  lk->bad_obj ? "(unreadable)" : lk->rec.etag, obj->etag);
		(void)ssd_drop_object(s, obj->id, ANY_TICK, &freed);
		memset(lk, 0, sizeof(*lk));
	}
}

/* ---- the end of a read ---- */

static uint64_t visit_gap(const struct ssd *s, const struct tfs_obj *obj)
{
	uint64_t n = tfs_obj_blocks(obj, s->bs);
	uint64_t floor = atomic_load(&s->gap_floor);
	return n > floor ? n : floor;
}

/* End of a read_block: learn, touch, unpin (which runs a deferred
 * invalidation). */
static void finish(struct ssd *s, const struct tfs_obj *obj, uint64_t tick, const struct lookup *lk,
		   bool hit, bool touch)
{
	if (hit || touch)
		ssd_touch(s, obj->id, tick, hit, lk->rec.last_tick, visit_gap(s, obj));
	ssd_unpin(s, obj->id);
}

/* ---- read_block ---- */

static int pass_through(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, void *buf)
{
	count(&s->misses, 1);
	count(&s->bypassed, 1);
	return tfs_layer_read_block(s->inner, obj, idx, buf);
}

/* Read `len` bytes of block idx from the data file `fd`, opened O_DIRECT,
 * into buf (page-aligned): the disk writes straight into buf, with no copy
 * out of the page cache and no page cache spent on a second copy of what
 * the kernel caches for the mount.  The whole pages of the block go into
 * buf and a partial last page (the object's last block) into a page of our
 * own, whose bytes up to len are copied after them, so buf is written only
 * up to len.  Returns the byte count (short at the end of the file) or
 * -errno. */
static ssize_t read_direct(struct ssd *s, int fd, uint64_t idx, void *buf, size_t len)
{
	_Alignas(TFS_PAGE_ALIGN) char tail[TFS_PAGE_ALIGN];
	size_t whole = len / TFS_PAGE_ALIGN * TFS_PAGE_ALIGN;
	struct iovec iov[2] = { { buf, whole }, { tail, sizeof(tail) } };
	int n = whole == len ? 1 : 2;
	ssize_t got;

	do
		got = preadv(fd, whole ? iov : iov + 1, whole ? n : 1, (off_t)(idx * s->bs));
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	if ((size_t)got > whole) {
		size_t more = (size_t)got - whole < len - whole ? (size_t)got - whole : len - whole;
		memcpy((char *)buf + whole, tail, more);
		got = (ssize_t)(whole + more);
	}
	return got;
}

/* Read block idx of obj's data file into buf: O_DIRECT (read_direct())
 * while the tier writes with it (s->direct) and buf is page-aligned (the
 * RAM tier's buffers are, layer.h), else through the page cache.  A direct
 * read that the filesystem refuses (EINVAL) or that comes back short is
 * read again through the page cache, so only the file's real contents
 * decide a miss.  Returns the byte count or -errno. */
static ssize_t read_data(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, void *buf,
			 size_t len)
{
	ssize_t got = -EINVAL;
	int fd;

	if (atomic_load(&s->direct) && (uintptr_t)buf % TFS_PAGE_ALIGN == 0) {
		fd = ssd_open_data(s, obj->id, O_RDONLY | O_DIRECT);
		if (fd < 0 && errno != EINVAL)
			return -errno;
		if (fd >= 0) {
			got = read_direct(s, fd, idx, buf, len);
			close(fd);
			if (got == (ssize_t)len) {
				count(&s->direct_read_bytes, len);
				return got;
			}
		}
	}
	fd = ssd_open_data(s, obj->id, O_RDONLY);
	if (fd < 0)
		return -errno;
	got = tfs_pread_full(fd, buf, len, (off_t)(idx * s->bs));
	close(fd);
	return got;
}

/* Verify and serve a cached block.  Returns true on a hit; on a mismatch
 * the record is dropped (and counted) and buf holds garbage. */
static bool read_cached(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, void *buf,
			size_t len, const struct blk_rec *b)
{
	const char *why = NULL;
	ssize_t got = -ENOENT;

	if (b->len != len) {
		why = "wrong length in the index";
	} else {
		got = read_data(s, obj, idx, buf, len);
		if (got < 0)
			why = got == -ENOENT ? "data file missing" : "read error";
		else if ((size_t)got != len)
			why = "short data file";
		else if (tfs_block_sum(buf, len) != b->sum)
			why = "checksum mismatch";
	}
	if (why == NULL)
		return true;
	if (drop_block(s, obj, idx, b)) {
		uint64_t sup = 0;
		count(&s->corrupt, 1);
		if (rl_allow(&s->rl_corrupt, &sup))
			tfs_warn(s->log,
				 "ssd: '%s' block %" PRIu64 ": %s%s%s: dropped the cached "
				 "copy, reading it again (%" PRIu64 " similar suppressed)",
				 obj->key, idx, why, got < 0 && got != -ENOENT ? ": " : "",
				 got < 0 && got != -ENOENT ? strerror((int)-got) : "", sup);
	}
	return false;
}

/* Read one block; `sync`: a warm-up's, whose fill is written before the
 * return, never queued. */
static int read_one(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf,
		    bool sync)
{
	struct ssd *s = l->priv;
	size_t len = tfs_obj_block_len(obj, idx, s->bs);
	struct lookup lk;
	uint64_t tick;
	bool filled = false;
	int rc;

	/* No ETag: no way to tell versions apart, so nothing is cached. */
	if (obj->etag[0] == '\0' || atomic_load(&s->broken))
		return pass_through(s, obj, idx, buf);
	tick = atomic_fetch_add(&s->clock, 1) + 1;
	if (ssd_pin(s, obj->id) != 0)
		return pass_through(s, obj, idx, buf);

	lookup_version(s, obj, idx, &lk);
	if (lk.have_blk && read_cached(s, obj, idx, buf, len, &lk.blk)) {
		count(&s->hits, 1);
		count(&s->hit_bytes, len);
		finish(s, obj, tick, &lk, true, true);
		return 0;
	}

	if (ssd_fillq_copy(s, obj, idx, buf, len)) {
		/* Its fill is late: served from the queued copy (a warm-up
		 * writes it now). */
		if (sync)
			filled = ssd_fill(s, obj, idx, buf, len, true, tick, lk.have_obj);
		finish(s, obj, tick, &lk, false, lk.have_obj && !filled);
		return 0;
	}
	count(&s->misses, 1);
	rc = tfs_layer_read_block(s->inner, obj, idx, buf);
	if (rc == 0 && sync)
		filled = ssd_fill(s, obj, idx, buf, len, true, tick, lk.have_obj);
	else if (rc == 0)
		filled = ssd_fill_read(s, obj, idx, buf, len, tick, lk.have_obj);
	finish(s, obj, tick, &lk, false, lk.have_obj && !filled);
	return rc;
}

static int ssd_read_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf)
{
	return read_one(l, obj, idx, buf, false);
}

/* Write-back: cache a block of a version just uploaded. */
static void ssd_put_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx,
			  const void *buf)
{
	struct ssd *s = l->priv;
	size_t len = tfs_obj_block_len(obj, idx, s->bs);
	struct lookup lk;
	uint64_t tick;

	if (len == 0 || obj->etag[0] == '\0' || atomic_load(&s->broken) || ssd_pin(s, obj->id) != 0)
		return;
	tick = atomic_fetch_add(&s->clock, 1) + 1;
	lookup_version(s, obj, idx, &lk);
	bool filled = lk.have_blk || ssd_fill(s, obj, idx, buf, len, false, tick, lk.have_obj);
	finish(s, obj, tick, &lk, false, lk.have_obj && !filled);
}

/* A run of blocks: if none of them is cached, one request to the inner
 * layer fills them all (one GET instead of n), each written as it arrives;
 * otherwise block by block, so cached blocks are still served locally. */
static int ssd_read_blocks(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first,
			   unsigned n, void *const bufs[], struct tfs_io_progress *progress)
{
	struct ssd *s = l->priv;
	struct lookup lk, lk0;
	uint64_t tick;
	bool any_cached = false, filled = false;
	int rc;

	if (obj->etag[0] == '\0' || atomic_load(&s->broken) || ssd_pin(s, obj->id) != 0)
		goto one_by_one;
	tick = atomic_fetch_add(&s->clock, 1) + 1;
	lookup_version(s, obj, first, &lk0);
	any_cached = lk0.have_blk;
	for (unsigned i = 1; !any_cached && lk0.have_obj && i < n; i++)
		any_cached = lookup(s, obj->id, first + i, &lk) == 0 && lk.have_blk;
	if (!any_cached)
		any_cached = ssd_fillq_has(s, obj, first, n); /* served from the queue */
	if (any_cached) {
		finish(s, obj, tick, &lk0, false, false);
		goto one_by_one;
	}
	count(&s->misses, n);
	/* Each block is written as it arrives and only then handed to the
	 * caller, which may then reuse its buffer; a run cut short keeps the
	 * blocks that came whole.  An inner layer that reports nothing (or
	 * not all) has its blocks written at the end. */
	struct run_fill rf = { .s = s,
			       .obj = obj,
			       .first = first,
			       .tick = tick,
			       .bufs = bufs,
			       .have_obj = lk0.have_obj,
			       .sync = progress && progress->background,
			       .up = progress };
	struct tfs_io_progress mine = { .done = ssd_run_block_done, .ctx = &rf };
	rc = tfs_layer_read_blocks(s->inner, obj, first, n, bufs, &mine);
	for (unsigned i = (unsigned)mine.ndone; rc == 0 && i < n; i++)
		tfs_layer_block_done(&mine, i, tfs_obj_block_len(obj, first + i, s->bs));
	filled = rf.filled;
	finish(s, obj, tick, &lk0, false, lk0.have_obj && !filled);
	return rc;

one_by_one:
	for (unsigned i = 0; i < n; i++) {
		rc = read_one(l, obj, first + i, bufs[i], progress && progress->background);
		if (rc)
			return rc;
		tfs_layer_block_done(progress, i, tfs_obj_block_len(obj, first + i, s->bs));
	}
	return 0;
}

/* ---- cached bytes and pins ---- */

int tfs_ssd_cached(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t *bytes)
{
	struct ssd *s = l->priv;
	struct lookup lk;
	*bytes = 0;
	if (atomic_load(&s->broken))
		return 0;
	int rc = lookup(s, obj->id, 0, &lk);
	if (rc)
		return rc;
	if (lk.have_obj && !lk.bad_obj && strcmp(lk.rec.etag, obj->etag) == 0)
		*bytes = lk.rec.cached;
	return 0;
}

int tfs_ssd_set_pinned(struct tfs_layer *l, const struct tfs_obj *obj, bool pinned)
{
	struct ssd *s = l->priv;
	MDB_txn *txn = NULL;
	MDB_val k = mval(obj->id, ID_LEN), v;
	struct obj_rec r;
	uint8_t vb[OBJ_VAL_MAX];

	if (atomic_load(&s->broken))
		return EIO;
	if (ssd_pin(s, obj->id) != 0)
		return ENOMEM;
	int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc) {
		rc = ssd_lmdb_trouble_key(s, rc, "pin: begin", obj->key);
		goto out;
	}
	rc = mdb_get(txn, s->objs, &k, &v);
	if (rc == 0 && (ssd_obj_decode(&v, &r) != 0 || strcmp(r.etag, obj->etag) != 0))
		rc = MDB_NOTFOUND;
	if (rc == 0 && pinned && r.cached < r.size)
		rc = MDB_NOTFOUND; /* pin only what is wholly cached */
	if (rc) {
		mdb_txn_abort(txn);
		rc = rc == MDB_NOTFOUND ? ENOENT
					: ssd_lmdb_trouble_key(s, rc, "pin: get", obj->key);
		goto out;
	}
	bool was = (r.flags & TFS_SSD_OBJ_PINNED) != 0;
	if (was == pinned) {
		mdb_txn_abort(txn);
		goto out;
	}
	if (pinned && atomic_load(&s->pinned) + r.size > atomic_load(&s->pin_max)) {
		mdb_txn_abort(txn);
		rc = EDQUOT;
		goto out;
	}
	memcpy(vb, v.mv_data, v.mv_size);
	put_le32(vb + OFF_FLAGS,
		 pinned ? (r.flags | TFS_SSD_OBJ_PINNED) : (r.flags & ~TFS_SSD_OBJ_PINNED));
	MDB_val nv = mval(vb, v.mv_size);
	rc = mdb_put(txn, s->objs, &k, &nv, 0);
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	if (rc) {
		rc = ssd_lmdb_trouble_key(s, rc, "pin", obj->key);
		goto out;
	}
	if (pinned)
		atomic_fetch_add(&s->pinned, r.size);
	else
		atomic_fetch_sub(&s->pinned, r.size);
out:
	ssd_unpin(s, obj->id);
	return rc;
}

void tfs_ssd_pin_usage(struct tfs_layer *l, uint64_t *pinned, uint64_t *max)
{
	struct ssd *s = l->priv;
	*pinned = atomic_load(&s->pinned);
	*max = atomic_load(&s->pin_max);
}

/* ---- invalidate, stats ---- */

static void ssd_invalidate(struct tfs_layer *l, const uint8_t id[TFS_OBJ_ID_LEN])
{
	struct ssd *s = l->priv;

	ssd_doom(s, id);
	tfs_layer_invalidate(s->inner, id);
}

/* The SSD tier's part of the stats ("ssd"); the tier families' help is
 * in the RAM tier's rows (ram.c). */
struct ssd_snap {
	uint64_t hits, misses, hit_bytes, fill_bytes, bypassed, evictions, evicted_bytes, corrupt,
		write_errors, fill_written, fill_refused_policy, fill_refused_capacity, fill_failed,
		fill_superseded;
	struct tfs_stat_opt fill_dropped;
	uint64_t fill_queued, fill_queue_bytes, fill_queue_hits, fill_queue_reused,
		direct_read_bytes, used_bytes, capacity_bytes, high_watermark_bytes,
		low_watermark_bytes, objects, pinned_bytes, pin_max_bytes, clock, reuse_samples;
	double reuse_interval;
	const char *policy;
	bool disabled;
};

#define ROW(f, ...) TFS_STAT(struct ssd_snap, f, __VA_ARGS__)
#define TIER(kind, name) kind, name, NULL, TFS_LABEL("tier", "ssd")
#define FILLS(v) TFS_COUNTER, "tierfs_ssd_fills_total", NULL, TFS_LABEL("outcome", v)
static const struct tfs_statdef ssd_rows[] = {
	ROW(hits, TIER(TFS_COUNTER, "tierfs_cache_hits_total")),
	ROW(misses, TIER(TFS_COUNTER, "tierfs_cache_misses_total")),
	ROW(hit_bytes, TIER(TFS_COUNTER, "tierfs_cache_hit_bytes_total")),
	ROW(fill_bytes, TIER(TFS_COUNTER, "tierfs_cache_fill_bytes_total")),
	ROW(bypassed, TIER(TFS_COUNTER, "tierfs_cache_not_admitted_total")),
	ROW(evictions, TIER(TFS_COUNTER, "tierfs_cache_evictions_total")),
	ROW(evicted_bytes, TFS_COUNTER, "tierfs_ssd_evicted_bytes_total",
	    "Bytes evicted from the SSD tier."),
	ROW(corrupt, TFS_COUNTER, "tierfs_ssd_corrupt_blocks_total",
	    "Cached blocks found damaged (checksum, short read) and fetched again."),
	ROW(write_errors, TFS_COUNTER, "tierfs_ssd_write_errors_total",
	    "Failed writes into the SSD tier."),
	ROW(fill_written, TFS_COUNTER, "tierfs_ssd_fills_total",
	    "Blocks offered to the SSD tier, by outcome (written; refused_policy, "
	    "refused_capacity: not admitted; failed: memory, I/O or index error; superseded: a "
	    "newer version took its place; dropped: the fill queue was full, only with "
	    "ssd.fill_when_full = drop).",
	    TFS_LABEL("outcome", "written")),
	ROW(fill_refused_policy, FILLS("refused_policy")),
	ROW(fill_refused_capacity, FILLS("refused_capacity")),
	ROW(fill_failed, FILLS("failed")),
	ROW(fill_superseded, FILLS("superseded")),
	/* an outcome only ssd.fill_when_full = drop has */
	ROW(fill_dropped, FILLS("dropped")),
	ROW(fill_queued, TFS_COUNTER, "tierfs_ssd_fill_queued_total",
	    "Blocks queued to be written into the SSD tier after a reader got them."),
	ROW(fill_queue_bytes, TFS_GAUGE, "tierfs_ssd_fill_queue_bytes",
	    "Bytes of blocks in the SSD tier's fill queue."),
	ROW(fill_queue_hits, TFS_JSON_ONLY, NULL, "a diagnostic of the fill queue"),
	ROW(fill_queue_reused, TFS_JSON_ONLY, NULL, "a diagnostic of the fill queue"),
	ROW(direct_read_bytes, TFS_JSON_ONLY, NULL, "a diagnostic of the O_DIRECT reads"),
	ROW(used_bytes, TIER(TFS_GAUGE, "tierfs_cache_used_bytes")),
	ROW(capacity_bytes, TIER(TFS_GAUGE, "tierfs_cache_capacity_bytes")),
	ROW(high_watermark_bytes, TFS_GAUGE, "tierfs_ssd_high_watermark_bytes",
	    "SSD usage above which eviction starts."),
	ROW(low_watermark_bytes, TFS_GAUGE, "tierfs_ssd_low_watermark_bytes",
	    "SSD usage eviction goes down to."),
	ROW(objects, TFS_GAUGE, "tierfs_ssd_objects", "Objects with data in the SSD tier."),
	ROW(pinned_bytes, TFS_GAUGE, "tierfs_ssd_pinned_bytes",
	    "Bytes of pinned objects (tierfs pin)."),
	ROW(pin_max_bytes, TFS_GAUGE, "tierfs_ssd_pin_max_bytes",
	    "The most bytes that may be pinned (ssd.pin_max)."),
	ROW(clock, TFS_JSON_ONLY, NULL, "the policy's clock, a diagnostic"),
	ROW(reuse_samples, TFS_JSON_ONLY, NULL, "a diagnostic of the reuse policy"),
	ROW(reuse_interval, TFS_JSON_ONLY, NULL, "a diagnostic of the reuse policy"),
	ROW(policy, TFS_JSON_ONLY, NULL, "a string: the policy (cache.policy)"),
	ROW(disabled, TFS_GAUGE, "tierfs_ssd_disabled",
	    "1 when a damaged index disabled the SSD tier until restart."),
};
#undef FILLS
#undef TIER
#undef ROW

const struct tfs_stattab tfs_ssd_stattab = TFS_STATTAB("ssd", ssd_rows);

static void ssd_stats(struct tfs_layer *l, struct json_object *out)
{
	struct ssd *s = l->priv;
	struct tfs_reuse r;

	pthread_mutex_lock(&s->lock);
	r = s->reuse;
	pthread_mutex_unlock(&s->lock);
	struct ssd_snap v = {
		.hits = atomic_load(&s->hits),
		.misses = atomic_load(&s->misses),
		.hit_bytes = atomic_load(&s->hit_bytes),
		.fill_bytes = atomic_load(&s->fill_bytes),
		.bypassed = atomic_load(&s->bypassed),
		.evictions = atomic_load(&s->evictions),
		.evicted_bytes = atomic_load(&s->evicted_bytes),
		.corrupt = atomic_load(&s->corrupt),
		.write_errors = atomic_load(&s->write_errors),
		.fill_written = atomic_load(&s->fill_written),
		.fill_refused_policy = atomic_load(&s->fill_refused_policy),
		.fill_refused_capacity = atomic_load(&s->fill_refused_capacity),
		.fill_failed = atomic_load(&s->fill_failed),
		.fill_superseded = atomic_load(&s->fill_superseded),
		.fill_dropped = { atomic_load(&s->fill_dropped), s->fillq.drop },
		.fill_queued = atomic_load(&s->fill_queued),
		.fill_queue_bytes = ssd_fillq_bytes(s),
		.fill_queue_hits = atomic_load(&s->fill_queue_hits),
		.fill_queue_reused = atomic_load(&s->fill_queue_reused),
		.direct_read_bytes = atomic_load(&s->direct_read_bytes),
		.used_bytes = atomic_load(&s->used),
		.capacity_bytes = atomic_load(&s->capacity),
		.high_watermark_bytes = atomic_load(&s->high),
		.low_watermark_bytes = atomic_load(&s->low),
		.objects = atomic_load(&s->objects),
		.pinned_bytes = atomic_load(&s->pinned),
		.pin_max_bytes = atomic_load(&s->pin_max),
		.clock = atomic_load(&s->clock),
		.reuse_samples = r.samples,
		.reuse_interval = r.mean,
		.policy = tfs_policy_name(s->policy),
		.disabled = atomic_load(&s->broken),
	};
	(void)tfs_stat_add_section(out, &tfs_ssd_stattab, &v);
	tfs_layer_stats(s->inner, out);
}

/* ---- create / destroy ---- */

static void ssd_free(struct ssd *s)
{
	if (s->datafd >= 0)
		close(s->datafd);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->usage_lock);
	pthread_mutex_destroy(&s->flush_lock);
	pthread_cond_destroy(&s->unmarked);
	pthread_cond_destroy(&s->wake);
	ssd_fillq_free(s);
	tfs_ratelimit_destroy(&s->rl_full);
	tfs_ratelimit_destroy(&s->rl_corrupt);
	tfs_ratelimit_destroy(&s->rl_err);
	free(s->tab);
	free(s->flush_buf);
	free(s->dir);
	free(s);
}

static void ssd_destroy(struct tfs_layer *l)
{
	struct ssd *s = l->priv;
	int rc;

	ssd_fillq_stop(s); /* every queued fill is written first */
	pthread_mutex_lock(&s->lock);
	atomic_store(&s->stop, true);
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	if (!atomic_load(&s->broken)) {
		ssd_flush_touches(s);
		rc = mdb_env_sync(s->env, 1);
		if (rc)
			ssd_lmdb_trouble(s, rc, "sync");
	}
	tfs_layer_destroy(s->inner);
	ssd_free(s);
	free(l);
}

static const struct tfs_layer_ops ssd_ops = {
	.name = "ssd",
	.read_block = ssd_read_block,
	.read_blocks = ssd_read_blocks,
	.put_block = ssd_put_block,
	.invalidate = ssd_invalidate,
	.stats = ssd_stats,
	.destroy = ssd_destroy,
};

/* mkdir if missing; an existing directory is fine. */
static int ensure_dir(int dirfd, const char *name, const char *shown, const struct tfs_log *log)
{
	struct stat st;

	if (mkdirat(dirfd, name, 0700) == 0)
		return 0;
	if (errno != EEXIST) {
		int e = errno;
		tfs_err(log, "ssd: cannot create directory '%s': %s", shown, strerror(e));
		return e;
	}
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
		tfs_err(log, "ssd: '%s' exists and is not a directory", shown);
		return EINVAL;
	}
	return 0;
}

static int make_layout(struct ssd *s)
{
	struct tfs_dbuf p;
	int rc;

	tfs_dbuf_init(&p, 4096);
	rc = ensure_dir(AT_FDCWD, s->dir, s->dir, s->log);
	if (rc == 0)
		rc = tfs_dbuf_addf(&p, "%s/data", s->dir);
	if (rc == 0)
		rc = ensure_dir(AT_FDCWD, tfs_dbuf_str(&p), tfs_dbuf_str(&p), s->log);
	if (rc == 0) {
		s->datafd = open(tfs_dbuf_str(&p), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s->datafd < 0) {
			rc = errno;
			tfs_err(s->log, "ssd: cannot open '%s': %s", tfs_dbuf_str(&p),
				strerror(rc));
		}
	}
	for (int i = 0; i < 256 && rc == 0; i++) {
		char name[3] = { hexdig[i >> 4], hexdig[i & 15], '\0' };
		rc = ensure_dir(s->datafd, name, name, s->log);
	}
	if (rc == 0)
		rc = ensure_dir(s->datafd, "trash", "data/trash", s->log);
	tfs_dbuf_free(&p);
	return rc;
}

/* Resolve cfg's capacity (a size, or a percentage of statvfs(s->dir)),
 * watermarks and pin limit, check them, and store them.  Returns 0,
 * EINVAL (too small, or low >= high: logged) or the errno of statvfs. */
static int resolve_capacity(struct ssd *s, const struct tfs_ssd_config *cfg)
{
	char a[TFS_UNITS_BUFLEN], b[TFS_UNITS_BUFLEN];
	uint64_t cap, high, low, pin_max, floor;

	if (cfg->size > 0) {
		cap = cfg->size;
	} else {
		struct statvfs sv;
		if (statvfs(s->dir, &sv) != 0) {
			int e = errno;
			tfs_err(s->log, "ssd: statvfs '%s': %s", s->dir, strerror(e));
			return e;
		}
		cap = (uint64_t)((double)sv.f_blocks * (double)sv.f_frsize * cfg->size_pct / 100.0);
	}
	high = (uint64_t)((double)cap * cfg->high_watermark / 100.0);
	pin_max = cfg->pin_max ? cfg->pin_max : (uint64_t)((double)cap * cfg->pin_max_pct / 100.0);
	low = (uint64_t)((double)cap * cfg->low_watermark / 100.0);
	if (cap / s->bs < MIN_CAP_BLOCKS || low >= high) {
		tfs_format_size(cap, a, sizeof(a));
		tfs_format_size(s->bs, b, sizeof(b));
		tfs_err(s->log,
			"ssd: capacity %s is too small for %d blocks of %s, or the "
			"watermarks (%.15g%%, %.15g%%) are not low < high",
			a, MIN_CAP_BLOCKS, b, cfg->low_watermark, cfg->high_watermark);
		return EINVAL;
	}
	floor = cap / s->bs / GAP_FLOOR_DIV;
	atomic_store(&s->capacity, cap);
	atomic_store(&s->high, high);
	atomic_store(&s->low, low);
	atomic_store(&s->pin_max, pin_max);
	atomic_store(&s->gap_floor, floor ? floor : 1);
	return 0;
}

int tfs_ssd_set_limits(struct tfs_layer *l, const struct tfs_ssd_config *cfg)
{
	struct ssd *s = l->priv;
	uint64_t old = atomic_load(&s->capacity);
	int rc = resolve_capacity(s, cfg);

	if (rc)
		return rc;
	char a[TFS_UNITS_BUFLEN], b[TFS_UNITS_BUFLEN];
	tfs_format_size(old, a, sizeof(a));
	tfs_format_size(atomic_load(&s->capacity), b, sizeof(b));
	tfs_info(s->log, "ssd: capacity %s -> %s (evict above %.15g%%, down to %.15g%%)", a, b,
		 cfg->high_watermark, cfg->low_watermark);
	/* A fill beyond the new capacity is refused at once (admit() in
	 * ssd_fill.c); the background thread evicts what is above the
	 * watermarks. */
	ssd_wake_bg(s);
	return 0;
}

int tfs_ssd_create(const struct tfs_ssd_config *cfg, const struct tfs_cache_config *cc,
		   MDB_env *env, struct tfs_layer *inner, const struct tfs_log *log,
		   struct tfs_layer **out)
{
	struct tfs_layer *l = NULL;
	struct ssd *s = NULL;
	pthread_condattr_t ca;
	char a[TFS_UNITS_BUFLEN], b[TFS_UNITS_BUFLEN];
	int rc;

	*out = NULL;
	if (cfg == NULL || cfg->dir == NULL || cfg->dir[0] == '\0' || cc == NULL || env == NULL ||
	    inner == NULL || cc->block_size == 0 || inner->block_size != cc->block_size) {
		tfs_err(log, "ssd: invalid arguments (directory, environment, inner layer, or a "
			     "block size that differs from the inner layer's)");
		return EINVAL;
	}
	s = calloc(1, sizeof(*s));
	l = calloc(1, sizeof(*l));
	if (s == NULL || l == NULL) {
		free(s);
		free(l);
		return ENOMEM;
	}
	s->datafd = -1;
	s->inner = inner;
	s->log = log;
	s->env = env;
	s->policy = cc->policy;
	s->bs = cc->block_size;
	atomic_store(&s->direct, cfg->direct_io);
	s->fillq.cap = 0; /* ssd_fillq_start() sets it; ssd_free() needs its locks */
	pthread_mutex_init(&s->fillq.lock, NULL);
	pthread_cond_init(&s->fillq.work, NULL);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->usage_lock, NULL);
	pthread_mutex_init(&s->flush_lock, NULL);
	pthread_cond_init(&s->unmarked, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);
	tfs_ratelimit_init(&s->rl_full, 60000, 1);
	tfs_ratelimit_init(&s->rl_corrupt, 10000, 10);
	tfs_ratelimit_init(&s->rl_err, 10000, 5);
	s->dir = strdup(cfg->dir);
	s->tab = calloc(TAB_SLOTS, sizeof(*s->tab));
	s->flush_buf = calloc(TOUCH_MAX, sizeof(*s->flush_buf));
	if (s->dir == NULL || s->tab == NULL || s->flush_buf == NULL) {
		rc = ENOMEM;
		goto fail;
	}
	rc = make_layout(s);
	if (rc == 0)
		rc = resolve_capacity(s, cfg);
	if (rc == 0)
		rc = ssd_open_dbs(s, false);
	if (rc)
		goto fail;
	rc = ssd_load_state(s);
	if (rc) {
		/* A damaged or foreign index is only a cache: empty it, and the
		 * sweep removes the data files it described. */
		tfs_warn(s->log, "ssd: the cache index is unreadable (%s): starting empty",
			 rc == EINVAL ? "malformed record" : mdb_strerror(rc));
		rc = ssd_open_dbs(s, true);
		if (rc == 0)
			rc = ssd_load_state(s);
		if (rc) {
			rc = tfs_lmdb_fail(s->log, rc, "ssd: cannot rebuild the cache index");
			goto fail;
		}
	}
	rc = pthread_create(&s->thread, NULL, ssd_bg_main, s);
	if (rc) {
		tfs_err(log, "ssd: cannot start the background thread: %s", strerror(rc));
		goto fail;
	}
	rc = ssd_fillq_start(s, cfg->fill_queue, cfg->fill_when_full == TFS_SSD_FULL_DROP);
	if (rc) {
		pthread_mutex_lock(&s->lock);
		atomic_store(&s->stop, true);
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
		goto fail;
	}

	l->ops = &ssd_ops;
	l->priv = s;
	l->inner = inner;
	l->block_size = s->bs;
	tfs_format_size(atomic_load(&s->capacity), a, sizeof(a));
	tfs_format_size(atomic_load(&s->used), b, sizeof(b));
	tfs_info(log,
		 "ssd: '%s': capacity %s (evict above %.15g%%, down to %.15g%%), "
		 "policy %s, %" PRIu64 " objects / %s cached",
		 s->dir, a, cfg->high_watermark, cfg->low_watermark, tfs_policy_name(s->policy),
		 atomic_load(&s->objects), b);
	*out = l;
	return 0;
fail:
	ssd_free(s);
	free(l);
	return rc;
}
