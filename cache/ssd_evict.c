/* ssd_evict.c - the SSD tier's background thread: about once per second it
 * mirrors the shared usage, flushes the access times and syncs the LMDB
 * environment; above the high watermark it evicts whole objects, oldest
 * first (ADMISSION AND EVICTION in ssd.c); after start-up it sweeps
 * data/trash/ and the data files that have no object record (CRASH
 * BEHAVIOUR in ssd.c).  Started and joined by ssd.c; it calls the object
 * table (ssd_objects.c: the eviction candidate, marks, drops, trash, the
 * touch flush) and the index (ssd_index.c), never ssd.c or ssd_fill.c.
 * The shared state is ssd_internal.h.
 */
#include "config.h"

#include "ssd_internal.h"
#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* ---- background: eviction, sweep ---- */

static void evict(struct ssd *s)
{
	uint64_t n = 0, bytes = 0, start_used = atomic_load(&s->used);
	int misses = 0;
	bool flushed = false;

	while (atomic_load(&s->used) > atomic_load(&s->low) && !atomic_load(&s->stop) &&
	       !atomic_load(&s->broken) && misses < EVICT_MISSES) {
		struct victim v;
		uint64_t freed;
		int rc = ssd_oldest_candidate(s, &v);
		/* Above the capacity (it was lowered by a reload): evict down
		 * to it whatever the policy says. */
		bool over = atomic_load(&s->used) > atomic_load(&s->capacity);

		if (rc == ENOENT && !flushed) {
			/* Every object was read since the last flush: write the
			 * touches so the atime order covers them, and look again. */
			ssd_flush_touches(s);
			flushed = true;
			continue;
		}
		if (rc != 0 || (!over && !ssd_may_go(s, &v)))
			break;
		if (!ssd_mark(s, v.id)) {
			misses++;
			continue;
		}
		rc = ssd_drop_object(s, v.id, v.tick, &freed);
		ssd_unmark(s, v.id);
		if (rc == 0) {
			n++;
			bytes += freed;
			count(&s->evictions, 1);
			count(&s->evicted_bytes, freed);
		} else if (rc == EAGAIN || rc == ENOENT) {
			misses++;
		} else {
			break;
		}
	}
	if (n > 0)
		tfs_debug(s->log,
			  "ssd: evicted %" PRIu64 " objects (%" PRIu64 " bytes): %" PRIu64
			  " -> %" PRIu64 " bytes cached (high %" PRIu64 ", low %" PRIu64 ")",
			  n, bytes, start_used, atomic_load(&s->used), atomic_load(&s->high),
			  atomic_load(&s->low));
}

static bool has_record(struct ssd *s, const uint8_t id[ID_LEN])
{
	MDB_txn *txn = NULL;
	MDB_val k = mval(id, ID_LEN), v;
	int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return true; /* unsure: keep it */
	rc = mdb_get(txn, s->objs, &k, &v);
	mdb_txn_abort(txn);
	return rc != MDB_NOTFOUND;
}

/* Remove a data file that has no object record (left by a crash between
 * pwrite and commit, or by a wiped index), `name` in directory `dirfd`.
 * A file being filled has no record until its fill commits; this
 * daemon's fills pin the id (ssd_mark fails), and every fill, of any
 * daemon sharing the tier, holds a shared flock on the file until then,
 * so a file another daemon is filling is left alone too. */
static void remove_orphan(struct ssd *s, int dirfd, const char *name, const uint8_t id[ID_LEN])
{
	MDB_txn *txn = NULL;
	MDB_val k = mval(id, ID_LEN), v;
	char trash[TRASH_LEN];
	bool moved = false;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 || !ssd_mark(s, id)) {
		close(fd); /* being filled */
		return;
	}
	if (mdb_txn_begin(s->env, NULL, 0, &txn) == 0) {
		if (mdb_get(txn, s->objs, &k, &v) == MDB_NOTFOUND)
			moved = ssd_move_to_trash(s, id, trash);
		mdb_txn_abort(txn);
	}
	ssd_unmark(s, id);
	close(fd);
	if (moved) {
		ssd_unlink_trash(s, trash);
		s->swept++;
	}
}

static void sweep_dir(struct ssd *s, const char *name, bool trash)
{
	struct dirent *d;
	DIR *dir;
	int fd = openat(s->datafd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return;
	dir = fdopendir(fd);
	if (dir == NULL) {
		close(fd);
		return;
	}
	while ((d = readdir(dir)) != NULL) {
		uint8_t id[ID_LEN];
		bool ok = true;

		if (d->d_name[0] == '.')
			continue;
		if (trash) {
			(void)unlinkat(fd, d->d_name, 0);
			continue;
		}
		if (strlen(d->d_name) != 2 * ID_LEN || memcmp(d->d_name, name, 2) != 0)
			continue; /* not ours */
		for (int i = 0; i < ID_LEN && ok; i++) {
			int hi = unhex(d->d_name[2 * i]), lo = unhex(d->d_name[2 * i + 1]);
			ok = hi >= 0 && lo >= 0;
			id[i] = (uint8_t)(hi << 4 | lo);
		}
		if (ok && !has_record(s, id))
			remove_orphan(s, fd, d->d_name, id);
	}
	closedir(dir);
}

/* Some of the start-up sweep: trash/, then data/00 .. data/ff. */
static void sweep_step(struct ssd *s)
{
	uint64_t start = tfs_mono_ms();

	while (s->sweep_pos < SWEEP_DONE && tfs_mono_ms() - start < SWEEP_BUDGET_MS &&
	       !atomic_load(&s->stop)) {
		char name[3];
		if (s->sweep_pos == 0) {
			sweep_dir(s, "trash", true);
		} else {
			name[0] = hexdig[(s->sweep_pos - 1) >> 4];
			name[1] = hexdig[(s->sweep_pos - 1) & 15];
			name[2] = '\0';
			sweep_dir(s, name, false);
		}
		s->sweep_pos++;
	}
	if (s->sweep_pos == SWEEP_DONE && s->swept > 0)
		tfs_info(s->log, "ssd: removed %" PRIu64 " data files that had no index record",
			 s->swept);
}

void *ssd_bg_main(void *arg)
{
	struct ssd *s = arg;
	uint64_t next_flush = tfs_mono_ms() + FLUSH_MS;

	pthread_mutex_lock(&s->lock);
	while (!atomic_load(&s->stop)) {
		if (!s->kick && s->sweep_pos >= SWEEP_DONE) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t now = tfs_mono_ms(),
				 wait = next_flush > now ? next_flush - now : 0;
			ts.tv_sec += (time_t)(wait / 1000);
			ts.tv_nsec += (long)(wait % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->wake, &s->lock, &ts);
		}
		s->kick = false;
		if (atomic_load(&s->stop))
			break;
		pthread_mutex_unlock(&s->lock);

		uint64_t now = tfs_mono_ms();
		if (now >= next_flush) {
			ssd_usage_refresh(s); /* other daemons sharing the tier */
			ssd_flush_touches(s);
			int rc = mdb_env_sync(s->env, 1);
			if (rc)
				ssd_lmdb_trouble(s, rc, "sync");
			next_flush = now + FLUSH_MS;
		}
		if (atomic_load(&s->used) > atomic_load(&s->high))
			evict(s);
		if (s->sweep_pos < SWEEP_DONE)
			sweep_step(s);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}
