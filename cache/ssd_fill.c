/* ssd_fill.c - the SSD tier's fill path: writing blocks into the tier.
 * A block the inner layer just returned (a miss of ssd_read_block(), each
 * block of a cold run of ssd_read_blocks() as it arrives) or write-back
 * just uploaded (ssd_put_block()) is admitted (the policy, and a
 * reservation of its bytes against the capacity: ADMISSION AND EVICTION in
 * ssd.c), written into its object's data file and indexed in one short
 * write transaction (I1-I3 in ssd.c).  A fill never fails the read: a
 * refused or failed fill only leaves the block uncached.  The layer that
 * calls it is ssd.c; it calls the object table (ssd_objects.c: the
 * eviction candidate, the data file) and the index (ssd_index.c), never
 * ssd.c or ssd_evict.c; the shared state is ssd_internal.h.
 */
#include "config.h"

#include "ssd_internal.h"

#include "blocksum.h"
#include "fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- admission ---- */

/* Decide whether to cache a block of `len` bytes and, if so, reserve them
 * in `charged` (the caller releases them with the fill's outcome).  The
 * reservation is a compare-and-swap against the capacity, so concurrent
 * fills never take usage above it.  Returns the counter of the refusal
 * (fill_refused_policy: the policy keeps the oldest candidate;
 * fill_refused_capacity: no candidate can go, or the bytes do not fit
 * until the evictor has made room), or NULL if admitted. */
static _Atomic uint64_t *admit(struct ssd *s, size_t len)
{
	uint64_t c = atomic_load(&s->charged);
	struct victim v;

	if (c + len > atomic_load(&s->high)) {
		if (s->policy != TFS_POLICY_LRU && ssd_oldest_candidate(s, &v) != 0)
			return &s->fill_refused_capacity;
		if (s->policy != TFS_POLICY_LRU && !ssd_may_go(s, &v))
			return &s->fill_refused_policy;
		ssd_wake_bg(s);
	}
	do {
		if (c + len > atomic_load(&s->capacity))
			return &s->fill_refused_capacity;
	} while (!atomic_compare_exchange_weak(&s->charged, &c, c + len));
	return NULL;
}

/* ---- fill ---- */

/* Inside a write txn: is the file at id's path the inode open as fd?  (I3) */
static bool same_file(struct ssd *s, const uint8_t id[ID_LEN], int fd)
{
	char rel[REL_LEN];
	struct stat a, b;

	rel_path(id, rel);
	if (fstat(fd, &a) != 0 || fstatat(s->datafd, rel, &b, AT_SYMLINK_NOFOLLOW) != 0)
		return false;
	return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static void write_failed(struct ssd *s, const struct tfs_obj *obj, int err, const char *what)
{
	uint64_t sup = 0;

	count(&s->write_errors, 1);
	count(&s->fill_failed, 1);
	if (err == ENOSPC || err == EDQUOT) {
		if (rl_allow(&s->rl_full, &sup))
			tfs_warn(s->log,
				 "ssd: SSD tier full: %s '%s/data': %s; serving reads "
				 "without caching them (%" PRIu64 " bytes cached, capacity %" PRIu64
				 "; %" PRIu64 " similar errors suppressed)",
				 what, s->dir, strerror(err), atomic_load(&s->used),
				 atomic_load(&s->capacity), sup);
	} else if (rl_allow(&s->rl_err, &sup)) {
		tfs_err(s->log,
			"ssd: %s for '%s': %s; serving it without caching (%" PRIu64 " similar "
			"errors "
			"suppressed)",
			what, obj->key, strerror(err), sup);
	}
}

/* A write into a file with no record failed: unlink the file (if it is
 * still ours and still has no record) so it does not hold space. */
static void discard_new_file(struct ssd *s, const uint8_t id[ID_LEN], int fd)
{
	MDB_txn *txn = NULL;
	MDB_val k = mval(id, ID_LEN), v;
	char rel[REL_LEN];

	if (mdb_txn_begin(s->env, NULL, 0, &txn) != 0)
		return;
	if (mdb_get(txn, s->objs, &k, &v) == MDB_NOTFOUND && same_file(s, id, fd)) {
		rel_path(id, rel);
		(void)unlinkat(s->datafd, rel, 0);
	}
	mdb_txn_abort(txn);
}

/* Index a block written to fd (see I1-I3).  Returns 0, EBUSY (lost a race:
 * another version owns the file, or it was replaced), or an errno. */
static int record_block(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, size_t len,
			uint64_t sum, uint64_t tick, int fd)
{
	MDB_txn *txn = NULL;
	MDB_val k = mval(obj->id, ID_LEN), v;
	uint8_t vb[OBJ_VAL_MAX], bk[BLK_KEY_LEN], bvb[BLK_VAL_LEN], ak[ATIME_KEY_LEN];
	size_t vlen;
	uint64_t old_tick = 0, new_tick, cached = 0;
	int64_t delta = (int64_t)len;
	bool existed;
	struct obj_rec r;
	struct blk_rec b;
	int rc;

	rc = mdb_txn_begin(s->env, NULL, 0, &txn);
	if (rc)
		return ssd_lmdb_trouble_key(s, rc, "fill: begin", obj->key);
	rc = mdb_get(txn, s->objs, &k, &v);
	existed = rc == 0;
	if (rc && rc != MDB_NOTFOUND)
		goto fail;
	if (existed) {
		if (ssd_obj_decode(&v, &r) != 0 || strcmp(r.etag, obj->etag) != 0) {
			mdb_txn_abort(txn);
			return EBUSY;
		}
		vlen = v.mv_size;
		memcpy(vb, v.mv_data, vlen);
		old_tick = r.last_tick;
		cached = r.cached;
	} else {
		vlen = ssd_obj_encode(vb, obj, tick);
	}
	if (!same_file(s, obj->id, fd)) {
		mdb_txn_abort(txn);
		return EBUSY;
	}

	ssd_blk_key(bk, obj->id, idx);
	MDB_val bkv = mval(bk, BLK_KEY_LEN), bv;
	rc = mdb_get(txn, s->blks, &bkv, &bv);
	if (rc == 0 && ssd_blk_decode(&bv, &b) == 0)
		delta -= (int64_t)b.len; /* a concurrent fill of the same block won */
	else if (rc && rc != MDB_NOTFOUND)
		goto fail;
	put_le64(bvb, sum);
	put_le32(bvb + 8, (uint32_t)len);
	bv = mval(bvb, BLK_VAL_LEN);
	rc = mdb_put(txn, s->blks, &bkv, &bv, 0);
	if (rc)
		goto fail;

	new_tick = existed && old_tick > tick ? old_tick : tick;
	if (!existed || new_tick != old_tick) {
		MDB_val akv;
		if (existed) {
			ssd_atime_key(ak, old_tick, obj->id);
			akv = mval(ak, ATIME_KEY_LEN);
			rc = mdb_del(txn, s->atime, &akv, NULL);
			if (rc && rc != MDB_NOTFOUND)
				goto fail;
		}
		ssd_atime_key(ak, new_tick, obj->id);
		akv = mval(ak, ATIME_KEY_LEN);
		v = mval(NULL, 0);
		rc = mdb_put(txn, s->atime, &akv, &v, 0);
		if (rc)
			goto fail;
	}
	put_le64(vb + OFF_TICK, new_tick);
	put_le64(vb + OFF_CACHED, (uint64_t)((int64_t)cached + delta));
	v = mval(vb, vlen);
	rc = mdb_put(txn, s->objs, &k, &v, 0);
	if (rc)
		goto fail;
	struct ssd_usage now;
	rc = ssd_shared_add(s, txn, delta, existed ? 0 : 1, &now);
	if (rc)
		goto fail;
	rc = mdb_txn_commit(txn);
	if (rc)
		return ssd_lmdb_trouble_key(s, rc, "fill: commit", obj->key);
	ssd_usage_sync(s, &now);
	return 0;
fail:
	mdb_txn_abort(txn);
	return ssd_lmdb_trouble_key(s, rc, "fill", obj->key);
}

/* The filesystem refused O_DIRECT (the open or a write, with EINVAL): fill
 * through the page cache from now on.  Logged once, by the thread that
 * turns it off. */
static void direct_refused(struct ssd *s)
{
	if (atomic_exchange(&s->direct, false))
		tfs_info(s->log,
			 "ssd: '%s' does not take O_DIRECT writes; writing through the page cache",
			 s->dir);
}

/* Open id's data file for a fill, creating it.  With s->direct it is opened
 * O_DIRECT (and *direct set): the fd is the fill's own, so no reader's page
 * cache I/O is affected.  A filesystem that refuses O_DIRECT at open
 * (EINVAL) turns it off for good and the file is opened without it (an
 * empty file the refused open created is reused, or swept if no fill
 * records it).  Returns the fd or -1 with errno set. */
static int open_fill_file(struct ssd *s, const uint8_t id[ID_LEN], bool *direct)
{
	int fd;

	*direct = atomic_load(&s->direct);
	if (*direct) {
		fd = ssd_open_data(s, id, O_RDWR | O_CREAT | O_DIRECT);
		if (fd >= 0 || errno != EINVAL)
			return fd;
		direct_refused(s);
		*direct = false;
	}
	return ssd_open_data(s, id, O_RDWR | O_CREAT);
}

/* Write block bytes at `off` of the data file `fd`.  If fd was opened
 * O_DIRECT (`direct`, open_fill_file()) the write bypasses the page cache:
 * no copy into it, no second copy of data the kernel already caches for the
 * mount itself, and no write-back later.  O_DIRECT wants the buffer, offset
 * and length aligned: offsets are (block_size is a multiple of
 * TFS_PAGE_ALIGN); the length is rounded up to a page, the bytes past the
 * object's end being zeros that are never read.  A `padded` buffer (see
 * ssd_fill()) already holds them; any other whose address or length is
 * not aligned goes through an aligned, zero-padded copy.  A filesystem that
 * refuses the O_DIRECT write (EINVAL) turns it off for good (logged once)
 * and the block goes through the page cache.  Returns 0 or an errno. */
static int write_data(struct ssd *s, int fd, bool direct, const void *buf, size_t len, bool padded,
		      off_t off)
{
	if (!direct)
		return tfs_pwrite_all(fd, buf, len, off);
	size_t up = tfs_obj_block_room(len);
	void *bounce = NULL;
	const void *src = buf;
	if ((uintptr_t)buf % TFS_PAGE_ALIGN != 0 || (up != len && !padded)) {
		if (posix_memalign(&bounce, TFS_PAGE_ALIGN, up) != 0)
			return ENOMEM;
		memcpy(bounce, buf, len);
		memset((char *)bounce + len, 0, up - len);
		src = bounce;
	}
	int rc = tfs_pwrite_all(fd, src, up, off);
	free(bounce);
	if (rc != EINVAL)
		return rc;
	direct_refused(s);
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFL, fl & ~O_DIRECT);
	return tfs_pwrite_all(fd, buf, len, off);
}

/* Cache a block the inner layer just returned.  Never fails the read.
 * Returns true if the block is now indexed. */
bool ssd_fill(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, const void *buf, size_t len,
	      bool padded, uint64_t tick, bool have_obj)
{
	bool direct;
	int fd, rc;
	_Atomic uint64_t *refused = admit(s, len);

	if (refused) {
		count(refused, 1);
		count(&s->bypassed, 1);
		return false;
	}
	fd = open_fill_file(s, obj->id, &direct);
	if (fd < 0) {
		write_failed(s, obj, errno, "cannot create a data file in");
		atomic_fetch_sub(&s->charged, len);
		return false;
	}
	/* Until the commit the file may have no record: the shared lock keeps
	 * the start-up sweep of every daemon sharing the tier off it. */
	(void)flock(fd, LOCK_SH);
	rc = write_data(s, fd, direct, buf, len, padded, (off_t)(idx * s->bs));
	if (rc) {
		write_failed(s, obj, rc, "cannot write to");
		if (!have_obj)
			discard_new_file(s, obj->id, fd);
		close(fd);
		atomic_fetch_sub(&s->charged, len);
		return false;
	}
	rc = record_block(s, obj, idx, len, tfs_block_sum(buf, len), tick, fd);
	close(fd);
	atomic_fetch_sub(&s->charged, len); /* record_block charged the real delta */
	if (rc == 0) {
		count(&s->fill_written, 1);
		count(&s->fill_bytes, len);
	} else if (rc == EBUSY) {
		count(&s->fill_superseded, 1);
	} else {
		count(&s->write_errors, 1);
		count(&s->fill_failed, 1);
	}
	return rc == 0;
}
