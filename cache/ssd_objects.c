/* ssd_objects.c - the SSD tier's object table: ids, pins, marks, touches,
 * drop, trash and the eviction candidate.
 *
 * The in-memory id table holds, per object id, the readers that pin it,
 * its EVICTING mark, a deferred invalidation ("doomed") and its pending
 * touch.  This file owns that table, the object's data file and trash/,
 * dropping a whole object (its records and file in one write transaction),
 * flushing the touches into the atime order, and the eviction candidate,
 * which both admission (ssd_fill.c) and the evictor (ssd_evict.c) consult.
 * It is the shared bottom of the tier: ssd.c (the layer), ssd_fill.c and
 * ssd_evict.c call it, and it calls only ssd_index.c (the LMDB format).
 * The STATES and INVARIANTS it keeps (I1, I2, the removal half of I3, I5)
 * are described at the top of ssd.c; the LOCKING in ssd_internal.h.
 */
#include "config.h"

#include "ssd_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lmdb_env.h"
#include "policy.h"

/* ---- LMDB failures ---- */

/* An LMDB failure at run time: log (rate-limited) and, if the index is
 * damaged, disable the tier until a restart.  Returns the errno. */
int ssd_lmdb_trouble(struct ssd *s, int rc, const char *what)
{
	uint64_t sup = 0;

	if (tfs_lmdb_is_corruption(rc)) {
		if (!atomic_exchange(&s->broken, true))
			tfs_err(s->log,
				"ssd: %s: %s: the cache index is damaged; the SSD tier "
				"passes reads through until tierfs restarts, which rebuilds it",
				what, mdb_strerror(rc));
	} else if (rc == MDB_MAP_FULL || rc == MDB_TXN_FULL) {
		count(&s->write_errors, 1);
		if (rl_allow(&s->rl_full, &sup))
			tfs_warn(s->log,
				 "ssd: %s: %s: the LMDB map is full; not caching "
				 "(raise the map size)",
				 what, mdb_strerror(rc));
	} else if (rl_allow(&s->rl_err, &sup)) {
		tfs_err(s->log, "ssd: %s: %s (%" PRIu64 " similar errors suppressed)", what,
			mdb_strerror(rc), sup);
	}
	return tfs_lmdb_errno(rc);
}

/* ssd_lmdb_trouble() for an operation on one object: the message names its
 * key. */
int ssd_lmdb_trouble_key(struct ssd *s, int rc, const char *what, const char *key)
{
	char w[160];

	snprintf(w, sizeof(w), "%s '%.100s'", what, key);
	return ssd_lmdb_trouble(s, rc, w);
}

/* ---- the id table (caller holds s->lock) ---- */

static size_t tab_home(const uint8_t id[ID_LEN])
{
	return (size_t)get_le64(id) & TAB_MASK;
}

static struct ent *tab_find(struct ssd *s, const uint8_t id[ID_LEN])
{
	for (size_t i = tab_home(id);; i = (i + 1) & TAB_MASK) {
		struct ent *e = &s->tab[i];
		if (!e->used)
			return NULL;
		if (memcmp(e->id, id, ID_LEN) == 0)
			return e;
	}
}

/* NULL when the table is full (one slot always stays free, so probes end). */
static struct ent *tab_insert(struct ssd *s, const uint8_t id[ID_LEN])
{
	size_t i;

	if (s->tab_count >= TAB_SLOTS - 1)
		return NULL;
	for (i = tab_home(id); s->tab[i].used; i = (i + 1) & TAB_MASK)
		;
	memset(&s->tab[i], 0, sizeof(s->tab[i]));
	memcpy(s->tab[i].id, id, ID_LEN);
	s->tab[i].used = true;
	s->tab_count++;
	return &s->tab[i];
}

/* Backward-shift deletion (Knuth 6.4 algorithm R): no tombstones.  Moves
 * other entries, so pointers into the table are stale afterwards. */
static void tab_delete(struct ssd *s, struct ent *e)
{
	size_t i = (size_t)(e - s->tab), j = i;

	for (;;) {
		j = (j + 1) & TAB_MASK;
		if (!s->tab[j].used)
			break;
		size_t k = tab_home(s->tab[j].id);
		bool move = i <= j ? (k <= i || k > j) : (k <= i && k > j);
		if (move) {
			s->tab[i] = s->tab[j];
			i = j;
		}
	}
	s->tab[i].used = false;
	s->tab_count--;
}

static void tab_release(struct ssd *s, struct ent *e)
{
	if (e->pins == 0 && e->touch == 0 && !e->evicting && !e->doomed)
		tab_delete(s, e);
}

static bool ent_busy(const struct ent *e)
{
	return e != NULL && (e->pins > 0 || e->touch != 0 || e->evicting || e->doomed);
}

/* ---- marks ---- */

/* Mark id EVICTING: e is its entry or NULL (caller holds s->lock).
 * Returns false, unmarked, when the table is full. */
static bool mark_locked(struct ssd *s, struct ent *e, const uint8_t id[ID_LEN])
{
	if (e == NULL)
		e = tab_insert(s, id);
	if (e == NULL)
		return false;
	e->evicting = true;
	return true;
}

/* Mark `id` EVICTING if nobody reads or touched it.  Returns true if marked. */
bool ssd_mark(struct ssd *s, const uint8_t id[ID_LEN])
{
	struct ent *e;
	bool ok = false;

	pthread_mutex_lock(&s->lock);
	e = tab_find(s, id);
	if (!ent_busy(e))
		ok = mark_locked(s, e, id);
	pthread_mutex_unlock(&s->lock);
	return ok;
}

void ssd_unmark(struct ssd *s, const uint8_t id[ID_LEN])
{
	struct ent *e;

	pthread_mutex_lock(&s->lock);
	e = tab_find(s, id);
	if (e != NULL) {
		e->evicting = false;
		tab_release(s, e);
	}
	pthread_cond_broadcast(&s->unmarked);
	pthread_mutex_unlock(&s->lock);
}

static bool is_busy(struct ssd *s, const uint8_t id[ID_LEN])
{
	bool busy;

	pthread_mutex_lock(&s->lock);
	busy = ent_busy(tab_find(s, id));
	pthread_mutex_unlock(&s->lock);
	return busy;
}

/* ---- data files ---- */

/* Open id's data file: the fd, or -1 with errno set (ssd_internal.h). */
int ssd_open_data(struct ssd *s, const uint8_t id[ID_LEN], int flags)
{
	char rel[REL_LEN];

	rel_path(id, rel);
	return openat(s->datafd, rel, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* Inside a write txn: rename id's data file into trash/.  Returns true and
 * sets `trash` if a file was moved (the caller unlinks it after commit). */
bool ssd_move_to_trash(struct ssd *s, const uint8_t id[ID_LEN], char trash[TRASH_LEN])
{
	char rel[REL_LEN], hex[2 * ID_LEN + 1];

	rel_path(id, rel);
	hex_id(id, hex);
	snprintf(trash, TRASH_LEN, "trash/%s.%" PRIu64, hex, atomic_fetch_add(&s->trash_seq, 1));
	if (renameat(s->datafd, rel, s->datafd, trash) == 0)
		return true;
	if (errno != ENOENT) {
		uint64_t sup;
		if (rl_allow(&s->rl_err, &sup))
			tfs_err(s->log, "ssd: cannot move '%s/data/%s' to trash: %s", s->dir, rel,
				strerror(errno));
	}
	return false;
}

void ssd_unlink_trash(struct ssd *s, const char *trash)
{
	if (unlinkat(s->datafd, trash, 0) != 0 && errno != ENOENT)
		tfs_warn(s->log, "ssd: cannot remove '%s/data/%s': %s", s->dir, trash,
			 strerror(errno));
}

/* ---- dropping objects ---- */

/* Delete every record of `id` and move its file to trash, in one write
 * txn.  With expect_tick != ANY_TICK (the evictor) the object must still
 * have that last_tick and not be PINNED, else EAGAIN.  The caller holds
 * the EVICTING mark or a pin.  Returns 0 (*freed = bytes), ENOENT (no
 * record), EAGAIN, or an errno (logged). */
int ssd_drop_object(struct ssd *s, const uint8_t id[ID_LEN], uint64_t expect_tick, uint64_t *freed)
{
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	MDB_val k = mval(id, ID_LEN), v;
	struct obj_rec r;
	uint8_t bk[BLK_KEY_LEN], ak[ATIME_KEY_LEN];
	char trash[TRASH_LEN];
	bool moved, valid;
	int rc;

	*freed = 0;
	rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc)
		return ssd_lmdb_trouble(s, rc, "drop: begin");
	rc = mdb_get(txn, s->objs, &k, &v);
	if (rc) {
		mdb_txn_abort(txn);
		return rc == MDB_NOTFOUND ? ENOENT : ssd_lmdb_trouble(s, rc, "drop: get");
	}
	valid = ssd_obj_decode(&v, &r) == 0;
	if (expect_tick != ANY_TICK &&
	    (!valid || r.last_tick != expect_tick || (r.flags & TFS_SSD_OBJ_PINNED))) {
		mdb_txn_abort(txn);
		return EAGAIN;
	}
	/* blocks: every key with the id prefix */
	rc = mdb_cursor_open(txn, s->blks, &cur);
	ssd_blk_key(bk, id, 0);
	while (rc == 0) {
		MDB_val ck = mval(bk, BLK_KEY_LEN), cv;
		rc = mdb_cursor_get(cur, &ck, &cv, MDB_SET_RANGE);
		if (rc == MDB_NOTFOUND) {
			rc = 0;
			break;
		}
		if (rc == 0 && (ck.mv_size < ID_LEN || memcmp(ck.mv_data, id, ID_LEN) != 0))
			break;
		if (rc == 0)
			rc = mdb_cursor_del(cur, 0);
	}
	if (cur)
		mdb_cursor_close(cur);
	if (rc == 0 && valid) {
		ssd_atime_key(ak, r.last_tick, id);
		MDB_val akv = mval(ak, ATIME_KEY_LEN);
		rc = mdb_del(txn, s->atime, &akv, NULL);
		if (rc == MDB_NOTFOUND)
			rc = 0;
	}
	if (rc == 0)
		rc = mdb_del(txn, s->objs, &k, NULL);
	struct ssd_usage now;
	if (rc == 0)
		rc = ssd_shared_add(s, txn, valid ? -(int64_t)r.cached : 0, -1, &now);
	if (rc) {
		mdb_txn_abort(txn);
		return ssd_lmdb_trouble(s, rc, "drop");
	}
	moved = ssd_move_to_trash(s, id, trash);
	rc = mdb_txn_commit(txn);
	if (moved)
		ssd_unlink_trash(s, trash);
	if (rc)
		return ssd_lmdb_trouble(s, rc, "drop: commit");
	ssd_usage_sync(s, &now);
	if (valid) {
		*freed = r.cached;
		if (r.flags & TFS_SSD_OBJ_PINNED) {
			atomic_fetch_sub(&s->pinned, r.size);
			tfs_info(s->log,
				 "ssd: a pinned object (%" PRIu64 " bytes) was dropped "
				 "(invalidated or replaced by a new version): no longer pinned",
				 r.size);
		}
	}
	return 0;
}

/* Drop an object the caller marked EVICTING (ssd_doom(), or the last
 * ssd_unpin() of a doomed id), then clear the mark. */
static void drop_marked(struct ssd *s, const uint8_t id[ID_LEN])
{
	uint64_t freed;

	(void)ssd_drop_object(s, id, ANY_TICK, &freed);
	ssd_unmark(s, id);
}

/* ---- pins and invalidations ---- */

/* Pin `id` for a read (or tfs_ssd_set_pinned()), waiting while it is being evicted.
 * Returns 0 or ENOMEM (table full: the caller passes through). */
int ssd_pin(struct ssd *s, const uint8_t id[ID_LEN])
{
	struct ent *e;

	pthread_mutex_lock(&s->lock);
	while ((e = tab_find(s, id)) != NULL && e->evicting)
		pthread_cond_wait(&s->unmarked, &s->lock);
	if (e == NULL)
		e = tab_insert(s, id);
	if (e != NULL)
		e->pins++;
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : ENOMEM;
}

/* Release a pin taken by ssd_pin(); the last reader of a doomed id drops
 * it. */
void ssd_unpin(struct ssd *s, const uint8_t id[ID_LEN])
{
	struct ent *e;
	bool doomed = false;

	pthread_mutex_lock(&s->lock);
	e = tab_find(s, id);
	if (--e->pins == 0 && e->doomed) {
		e->doomed = false;
		e->evicting = true;
		doomed = true;
	} else {
		tab_release(s, e);
	}
	pthread_mutex_unlock(&s->lock);
	if (doomed)
		drop_marked(s, id);
}

/* Invalidate id: drop it now, or doom it while readers pin it. */
void ssd_doom(struct ssd *s, const uint8_t id[ID_LEN])
{
	struct ent *e;
	bool now = false;

	pthread_mutex_lock(&s->lock);
	while ((e = tab_find(s, id)) != NULL && e->evicting)
		pthread_cond_wait(&s->unmarked, &s->lock);
	if (e != NULL && e->pins > 0)
		e->doomed = true; /* the last reader drops it */
	else
		now = mark_locked(s, e, id);
	pthread_mutex_unlock(&s->lock);
	if (now)
		drop_marked(s, id);
}

/* ---- touches ---- */

/* Note an access at `tick` (caller holds s->lock).  Returns false when the
 * table of pending touches is full (the caller flushes and retries). */
static bool touch_locked(struct ssd *s, struct ent *e, uint64_t tick)
{
	if (e->touch == 0) {
		if (s->touched >= TOUCH_MAX)
			return false;
		s->touched++;
	}
	if (tick > e->touch)
		e->touch = tick;
	return true;
}

/* An access by a reader that pins id: learn from a hit's gap, note the
 * touch (flushing first when the table of touches is full). */
void ssd_touch(struct ssd *s, const uint8_t id[ID_LEN], uint64_t tick, bool hit, uint64_t last_tick,
	       uint64_t gap)
{
	struct ent *e;

	pthread_mutex_lock(&s->lock);
	e = tab_find(s, id);
	if (hit) {
		uint64_t prev = e->touch ? e->touch : last_tick;
		if (tick > prev && tick - prev > gap)
			tfs_reuse_observe(&s->reuse, tick - prev);
	}
	if (!touch_locked(s, e, tick)) {
		pthread_mutex_unlock(&s->lock);
		ssd_flush_touches(s);
		pthread_mutex_lock(&s->lock);
		e = tab_find(s, id);
		(void)touch_locked(s, e, tick); /* still full: the touch is lost */
	}
	pthread_mutex_unlock(&s->lock);
}

/* Write pending touches: last_tick and atime entries, plus the clock and
 * the estimator, in one transaction. */
void ssd_flush_touches(struct ssd *s)
{
	struct tfs_reuse reuse;
	uint64_t clock, sb[2];
	uint8_t vb[OBJ_VAL_MAX], ak[ATIME_KEY_LEN], state[16];
	MDB_txn *txn = NULL;
	size_t n = 0;
	int rc;

	pthread_mutex_lock(&s->flush_lock);
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < TAB_SLOTS && n < TOUCH_MAX && s->touched > 0; i++) {
		if (s->tab[i].used && s->tab[i].touch) {
			memcpy(s->flush_buf[n].id, s->tab[i].id, ID_LEN);
			s->flush_buf[n].tick = s->tab[i].touch;
			n++;
		}
	}
	reuse = s->reuse;
	pthread_mutex_unlock(&s->lock);
	clock = atomic_load(&s->clock);
	if (n == 0 && clock == s->persisted_clock) {
		pthread_mutex_unlock(&s->flush_lock);
		return;
	}

	rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct touch *t = &s->flush_buf[i];
		MDB_val k = mval(t->id, ID_LEN), v, akv;
		struct obj_rec r;

		rc = mdb_get(txn, s->objs, &k, &v);
		if (rc == MDB_NOTFOUND) { /* dropped meanwhile */
			rc = 0;
			continue;
		}
		if (rc || ssd_obj_decode(&v, &r) != 0 || r.last_tick >= t->tick)
			continue;
		size_t vlen = v.mv_size;
		memcpy(vb, v.mv_data, vlen);
		put_le64(vb + OFF_TICK, t->tick);
		ssd_atime_key(ak, r.last_tick, t->id);
		akv = mval(ak, ATIME_KEY_LEN);
		rc = mdb_del(txn, s->atime, &akv, NULL);
		if (rc == MDB_NOTFOUND)
			rc = 0;
		ssd_atime_key(ak, t->tick, t->id);
		akv = mval(ak, ATIME_KEY_LEN);
		v = mval(NULL, 0);
		if (rc == 0)
			rc = mdb_put(txn, s->atime, &akv, &v, 0);
		v = mval(vb, vlen);
		if (rc == 0)
			rc = mdb_put(txn, s->objs, &k, &v, 0);
	}
	if (rc == 0) {
		MDB_val k = mval("clock", 5), v;
		put_le64(state, clock);
		v = mval(state, 8);
		rc = mdb_put(txn, s->state, &k, &v, 0);
	}
	if (rc == 0) {
		MDB_val k = mval("reuse", 5), v;
		memcpy(&sb[0], &reuse.mean, sizeof(double));
		sb[1] = reuse.samples;
		put_le64(state, sb[0]);
		put_le64(state + 8, sb[1]);
		v = mval(state, 16);
		rc = mdb_put(txn, s->state, &k, &v, 0);
	}
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		if (rc == 0)
			s->persisted_clock = clock;
	} else if (txn) {
		mdb_txn_abort(txn);
	}
	if (rc)
		ssd_lmdb_trouble(s, rc, "flushing access times");

	/* Clear the notes we wrote (or lost), unless a newer access came in;
	 * until now they kept the objects out of the evictor's reach. */
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct ent *e = tab_find(s, s->flush_buf[i].id);
		if (e == NULL || e->touch != s->flush_buf[i].tick)
			continue;
		e->touch = 0;
		s->touched--;
		tab_release(s, e);
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&s->flush_lock);
}

/* ---- the eviction candidate (admit() in ssd_fill.c, and the evictor) ---- */

/* The oldest object that could be evicted now (see ADMISSION).  Returns
 * 0, ENOENT (none within SCAN_LIMIT entries) or an errno. */
int ssd_oldest_candidate(struct ssd *s, struct victim *out)
{
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	MDB_cursor_op op = MDB_FIRST;
	int rc, scanned = 0;

	rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return ssd_lmdb_trouble(s, rc, "scan: begin");
	rc = mdb_cursor_open(txn, s->atime, &cur);
	while (rc == 0 && (rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
		const uint8_t *p = k.mv_data;
		struct obj_rec r;
		MDB_val ok, ov;

		op = MDB_NEXT;
		if (++scanned > SCAN_LIMIT) {
			rc = MDB_NOTFOUND;
			break;
		}
		if (k.mv_size != ATIME_KEY_LEN || is_busy(s, p + 8))
			continue;
		ok = mval(p + 8, ID_LEN);
		if (mdb_get(txn, s->objs, &ok, &ov) != 0 || ssd_obj_decode(&ov, &r) != 0 ||
		    (r.flags & TFS_SSD_OBJ_PINNED))
			continue;
		memcpy(out->id, p + 8, ID_LEN);
		out->tick = get_be64(p);
		break;
	}
	if (cur)
		mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (rc == MDB_NOTFOUND)
		return ENOENT;
	return rc ? ssd_lmdb_trouble(s, rc, "scan") : 0;
}

bool ssd_may_go(struct ssd *s, const struct victim *v)
{
	struct tfs_reuse r;
	uint64_t now = atomic_load(&s->clock);

	pthread_mutex_lock(&s->lock);
	r = s->reuse;
	pthread_mutex_unlock(&s->lock);
	return tfs_policy_may_evict(s->policy, &r, now > v->tick ? now - v->tick : 0,
				    atomic_load(&s->objects));
}

/* Wake the background thread: evict now (admit(), a reload). */
void ssd_wake_bg(struct ssd *s)
{
	pthread_mutex_lock(&s->lock);
	s->kick = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}
