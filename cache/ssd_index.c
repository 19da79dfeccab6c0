/* ssd_index.c - the SSD tier's on-disk format: the records of its LMDB
 * index (object, block and atime keys and values, encode and decode), the
 * usage record shared by the daemons that share the tier, and opening,
 * checking and recounting the index at start-up.  It is the bottom of
 * the tier and calls none of its other files; ssd.c, ssd_fill.c (the
 * records of a fill), ssd_evict.c and ssd_objects.c (drops, touches, the
 * eviction candidate) read and write these records.  The shared state is
 * ssd_internal.h.
 *
 * ON DISK
 *
 *   <dir>/data/XX/<hex>   the cached blocks of one object: <hex> is the 64
 *                         hex digits of obj->id (SHA-256 of the key), XX its
 *                         first two.  Block idx lives at offset
 *                         idx * block_size; missing blocks are holes.  Names
 *                         come only from the hash, so no object key can name
 *                         a path outside the cache directory.  Files 0600,
 *                         directories 0700, opened with O_NOFOLLOW.
 *   <dir>/data/trash/     data files renamed here by the transaction that
 *                         deletes their records, then unlinked after it
 *                         commits (a rename is O(1); freeing a large file's
 *                         extents is not, and must not happen inside a write
 *                         transaction).  Emptied at start-up.
 *
 *   Named databases in the shared LMDB environment (integers big-endian in
 *   keys, so they sort numerically; little-endian in values):
 *
 *   ssd_objects  id[32] -> u32 record version (1), u32 flags (bit 0:
 *                PINNED, never evicted), u64 size, u64 last_tick,
 *                u64 cached_bytes, u16 etag_len, u16 key_len, etag text,
 *                key text (at most 1024 bytes; for logs and debugging).
 *   ssd_blocks   id[32] + be64 idx -> u64 XXH3-64 of the block's bytes,
 *                u32 len.
 *   ssd_atime    be64 last_tick + id[32] -> empty.  Oldest first: the
 *                eviction order.
 *   ssd_state    "format" -> u32 (1); "clock" -> u64 logical clock;
 *                "reuse" -> f64 mean + u64 samples (struct tfs_reuse), so
 *                the epoch policy's learning survives a restart.
 */
#include "config.h"

#include "ssd_internal.h"

#include <errno.h>
#include <string.h>

#include "lmdb_env.h"

#define SSD_FORMAT 1
#define REC_VERSION 1

/* ---- records ---- */

int ssd_obj_decode(const MDB_val *v, struct obj_rec *r)
{
	const uint8_t *p = v->mv_data;
	size_t el, kl;

	if (v->mv_size < OBJ_HDR || v->mv_size > OBJ_VAL_MAX ||
	    get_le32(p + OFF_VERSION) != REC_VERSION)
		return EINVAL;
	el = get_le16(p + OFF_ETAG_LEN);
	kl = get_le16(p + OFF_KEY_LEN);
	if (el >= TFS_ETAG_MAX || kl > KEY_TEXT_MAX || OBJ_HDR + el + kl != v->mv_size)
		return EINVAL;
	r->flags = get_le32(p + OFF_FLAGS);
	r->size = get_le64(p + OFF_SIZE);
	r->last_tick = get_le64(p + OFF_TICK);
	r->cached = get_le64(p + OFF_CACHED);
	memcpy(r->etag, p + OBJ_HDR, el);
	r->etag[el] = '\0';
	return 0;
}

/* A new record for obj in vb; returns its length. */
size_t ssd_obj_encode(uint8_t vb[OBJ_VAL_MAX], const struct tfs_obj *obj, uint64_t tick)
{
	size_t el = strlen(obj->etag);
	size_t kl = strlen(obj->key);

	if (kl > KEY_TEXT_MAX)
		kl = KEY_TEXT_MAX;
	put_le32(vb + OFF_VERSION, REC_VERSION);
	put_le32(vb + OFF_FLAGS, 0);
	put_le64(vb + OFF_SIZE, obj->size);
	put_le64(vb + OFF_TICK, tick);
	put_le64(vb + OFF_CACHED, 0);
	put_le16(vb + OFF_ETAG_LEN, (uint16_t)el);
	put_le16(vb + OFF_KEY_LEN, (uint16_t)kl);
	memcpy(vb + OBJ_HDR, obj->etag, el);
	memcpy(vb + OBJ_HDR + el, obj->key, kl);
	return OBJ_HDR + el + kl;
}

int ssd_blk_decode(const MDB_val *v, struct blk_rec *b)
{
	if (v->mv_size != BLK_VAL_LEN)
		return EINVAL;
	b->sum = get_le64(v->mv_data);
	b->len = get_le32((const uint8_t *)v->mv_data + 8);
	return 0;
}

void ssd_blk_key(uint8_t k[BLK_KEY_LEN], const uint8_t id[ID_LEN], uint64_t idx)
{
	memcpy(k, id, ID_LEN);
	put_be64(k + ID_LEN, idx);
}

void ssd_atime_key(uint8_t k[ATIME_KEY_LEN], uint64_t tick, const uint8_t id[ID_LEN])
{
	put_be64(k, tick);
	memcpy(k + 8, id, ID_LEN);
}

/* ---- shared usage ---- */

/* Shared usage.  Several daemons may share one tier (one cache per node,
 * docs/kubernetes.md): the tier's cached bytes and object count live in
 * ssd_state "usage" (u64 used, u64 objects) and every transaction that
 * changes records adds its delta there, so all processes agree; each
 * process mirrors the value in `used` (and `charged` = used + its own
 * fills in flight). */
int ssd_shared_add(struct ssd *s, MDB_txn *txn, int64_t used_delta, int64_t obj_delta,
		   struct ssd_usage *now)
{
	uint8_t vb[16];
	MDB_val k = mval("usage", 5), v;
	uint64_t used = 0, objs = 0;
	int rc = mdb_get(txn, s->state, &k, &v);
	if (rc == 0 && v.mv_size == 16) {
		used = get_le64(v.mv_data);
		objs = get_le64((const uint8_t *)v.mv_data + 8);
	} else if (rc && rc != MDB_NOTFOUND) {
		return rc;
	}
	used = (int64_t)used + used_delta < 0 ? 0 : (uint64_t)((int64_t)used + used_delta);
	objs = (int64_t)objs + obj_delta < 0 ? 0 : (uint64_t)((int64_t)objs + obj_delta);
	put_le64(vb, used);
	put_le64(vb + 8, objs);
	v = mval(vb, 16);
	now->used = used;
	now->objects = objs;
	now->txnid = mdb_txn_id(txn);
	return mdb_put(txn, s->state, &k, &v, 0);
}

/* Mirror the shared usage after a commit (or a refresh). */
void ssd_usage_sync(struct ssd *s, const struct ssd_usage *now)
{
	pthread_mutex_lock(&s->usage_lock);
	if (now->txnid >= s->usage_txnid) {
		s->usage_txnid = now->txnid;
		uint64_t old = atomic_exchange(&s->used, now->used);
		atomic_fetch_add(&s->charged, now->used - old); /* wraps correctly */
		atomic_store(&s->objects, now->objects);
	}
	pthread_mutex_unlock(&s->usage_lock);
}

/* Read the shared usage (the background thread does this each round). */
void ssd_usage_refresh(struct ssd *s)
{
	MDB_txn *txn;
	MDB_val k = mval("usage", 5), v;
	if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0)
		return;
	if (mdb_get(txn, s->state, &k, &v) == 0 && v.mv_size == 16) {
		struct ssd_usage now = { .used = get_le64(v.mv_data),
					 .objects = get_le64((const uint8_t *)v.mv_data + 8),
					 .txnid = mdb_txn_id(txn) };
		ssd_usage_sync(s, &now);
	}
	mdb_txn_abort(txn);
}

/* ---- opening the index ---- */

/* Open the DBIs; check the format; empty them if `wipe` or the format is
 * not ours. */
int ssd_open_dbs(struct ssd *s, bool wipe)
{
	static const char *const names[] = { "ssd_objects", "ssd_blocks", "ssd_atime",
					     "ssd_state" };
	MDB_dbi *dbis[] = { &s->objs, &s->blks, &s->atime, &s->state };
	MDB_txn *txn = NULL;
	MDB_val k = mval("format", 6), v;
	uint8_t fb[4];
	int rc = mdb_txn_begin(s->env, NULL, 0, &txn);

	for (int i = 0; i < 4 && rc == 0; i++)
		rc = mdb_dbi_open(txn, names[i], MDB_CREATE, dbis[i]);
	if (rc == 0) {
		rc = mdb_get(txn, s->state, &k, &v);
		if (rc == 0 && (v.mv_size != 4 || get_le32(v.mv_data) != SSD_FORMAT)) {
			tfs_warn(s->log, "ssd: the index in LMDB has an unknown format: "
					 "starting with an empty SSD cache");
			wipe = true;
		} else if (rc == MDB_NOTFOUND) {
			MDB_stat st;
			rc = mdb_stat(txn, s->objs, &st);
			if (rc == 0 && st.ms_entries > 0)
				wipe = true;
		}
	}
	for (int i = 0; i < 4 && rc == 0 && wipe; i++)
		rc = mdb_drop(txn, *dbis[i], 0);
	if (rc == 0) {
		put_le32(fb, SSD_FORMAT);
		v = mval(fb, 4);
		rc = mdb_put(txn, s->state, &k, &v, 0);
	}
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (rc)
		return tfs_lmdb_fail(s->log, rc, "ssd: opening the index databases");
	return 0;
}

/* Sum cached bytes, count objects, restore the clock and estimator.
 * Returns 0, EINVAL (a malformed record), or an LMDB code. */
int ssd_load_state(struct ssd *s)
{
	MDB_txn *txn = NULL;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	uint64_t used = 0, n = 0, clock = 0, pinned = 0;
	/* A write transaction: the recount and the shared "usage" it writes
	 * are atomic with respect to other daemons sharing the tier. */
	int rc = mdb_txn_begin(s->env, NULL, 0, &txn);

	if (rc)
		return rc;
	rc = mdb_cursor_open(txn, s->objs, &cur);
	while (rc == 0 && (rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
		struct obj_rec r;
		if (k.mv_size != ID_LEN || ssd_obj_decode(&v, &r) != 0) {
			rc = EINVAL;
			break;
		}
		used += r.cached;
		if (r.flags & TFS_SSD_OBJ_PINNED)
			pinned += r.size;
		n++;
	}
	if (cur)
		mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	if (rc == 0)
		rc = mdb_cursor_open(txn, s->atime, &cur);
	if (rc == 0) {
		rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
		if (rc == 0 && k.mv_size == ATIME_KEY_LEN)
			clock = get_be64(k.mv_data);
		if (rc == MDB_NOTFOUND)
			rc = 0;
		mdb_cursor_close(cur);
	}
	if (rc == 0) {
		k = mval("clock", 5);
		if (mdb_get(txn, s->state, &k, &v) == 0 && v.mv_size == 8 &&
		    get_le64(v.mv_data) > clock)
			clock = get_le64(v.mv_data);
		k = mval("reuse", 5);
		if (mdb_get(txn, s->state, &k, &v) == 0 && v.mv_size == 16) {
			uint64_t bits = get_le64(v.mv_data);
			memcpy(&s->reuse.mean, &bits, sizeof(double));
			s->reuse.samples = get_le64((const uint8_t *)v.mv_data + 8);
			if (!(s->reuse.mean >= 0.0)) /* NaN or negative: forget it */
				memset(&s->reuse, 0, sizeof(s->reuse));
		}
	}
	if (rc == 0) {
		uint8_t ub[16];
		put_le64(ub, used);
		put_le64(ub + 8, n);
		k = mval("usage", 5);
		v = mval(ub, 16);
		rc = mdb_put(txn, s->state, &k, &v, 0);
	}
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	if (rc == 0) {
		atomic_store(&s->used, used);
		atomic_store(&s->charged, used);
		atomic_store(&s->objects, n);
		atomic_store(&s->pinned, pinned);
		atomic_store(&s->clock, clock);
		s->persisted_clock = clock;
	}
	return rc;
}
