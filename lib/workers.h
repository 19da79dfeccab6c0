/* workers.h - a pool of worker threads whose size can change while it
 * runs (prefetch workers, write-back uploaders, follow fetchers; a config
 * reload resizes them).
 *
 * The pool does not own a lock: it is protected by the lock of the layer
 * that uses it (the one its workers wait on), called "the owner's lock"
 * below.  Slots 0 .. max-1 each hold at most one thread.  The pool has a
 * target size; a worker in slot i >= target retires: at the top of its
 * loop, with the owner's lock held, it asks tfs_workers_retire() and, if
 * told so, unlocks and returns.  So a shrink never interrupts a job: a
 * worker finishes the job it has, then leaves.  A grow starts threads in
 * the empty slots below the new target (a worker that was retiring but
 * has not left yet simply stays).
 *
 * Worker loop:
 *
 *	static void *worker(void *arg)
 *	{
 *		struct tfs_worker *w = arg;
 *		struct owner *o = w->ctx;
 *		pthread_mutex_lock(&o->lock);
 *		while (!o->stop && !tfs_workers_retire(w)) {
 *			...wait on a condition of o->lock, or take a job...
 *		}
 *		pthread_mutex_unlock(&o->lock);
 *		return NULL;
 *	}
 *
 * tfs_workers_set() changes the number of threads and wakes the owner's
 * condition, so that retiring workers notice.
 *
 * Threads are created with every signal blocked (signals go to the
 * daemon's own threads: SIGHUP to the reload thread, SIGTERM to FUSE).
 */
#ifndef TFS_WORKERS_H
#define TFS_WORKERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct tfs_workers;

/* What a worker thread receives: its slot, its pool and the owner's
 * context. */
struct tfs_worker {
	struct tfs_workers *pool;
	unsigned idx;
	void *ctx;
};

struct tfs_workers {
	void *(*fn)(void *); /* called with a struct tfs_worker * */
	void *ctx;
	unsigned max;    /* slots */
	unsigned target; /* slots [0, target) should run */
	pthread_t *threads;
	atomic_uchar *state; /* per slot: empty, running, exited (atomic: read
			      * by tfs_workers_stop() without the lock) */
	struct tfs_worker *args;
};

/* Prepare an empty pool of `max` slots (>= 1) whose threads run fn(arg)
 * with arg a struct tfs_worker * whose ctx is `ctx`.  Starts nothing.
 * Returns 0 or ENOMEM.  A pool zeroed with memset is safe to pass to
 * tfs_workers_free(). */
int tfs_workers_init(struct tfs_workers *p, unsigned max, void *(*fn)(void *), void *ctx);

/* Set the target size to n (clamped to max), under the owner's `lock`:
 * start the threads it needs (they block on the lock until it is
 * released); threads in slots >= n retire on their own once `wake` is
 * broadcast, which this does; slots whose thread has retired are joined.
 * The whole of a layer's "set the number of threads".  *before (may be
 * NULL) gets the old target and *after (may be NULL) the new one.  Call
 * WITHOUT the lock.  Returns 0, or the pthread_create() error: then the
 * target is the number of slots that do run. */
int tfs_workers_set(struct tfs_workers *p, pthread_mutex_t *lock, pthread_cond_t *wake, unsigned n,
		    unsigned *before, unsigned *after);

/* For a worker, with the owner's lock held: true when its slot is at or
 * beyond the target; the slot is then marked as exited and the worker
 * must unlock and return without touching the pool again. */
bool tfs_workers_retire(struct tfs_worker *w);

/* The target size.  Owner's lock held. */
unsigned tfs_workers_count(const struct tfs_workers *p);

/* Join every thread.  Call WITHOUT the owner's lock, after telling the
 * workers to stop (and waking them).  Then frees the pool's memory.  Safe
 * on a zeroed pool. */
void tfs_workers_stop(struct tfs_workers *p);

#endif
