/* test_workers.c - the resizable worker pool (lib/workers.h): growing,
 * shrinking while workers wait, slots reused, and stop. */
#include "config.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <time.h>

#include "workers.h"

struct owner {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	unsigned live; /* workers inside their loop */
	struct tfs_workers pool;
};

static void *worker(void *arg)
{
	struct tfs_worker *w = arg;
	struct owner *o = w->ctx;

	pthread_mutex_lock(&o->lock);
	o->live++;
	while (!o->stop && !tfs_workers_retire(w))
		pthread_cond_wait(&o->cond, &o->lock);
	o->live--;
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

static void resize(struct owner *o, unsigned n)
{
	unsigned after;
	cr_assert_eq(tfs_workers_set(&o->pool, &o->lock, &o->cond, n, NULL, &after), 0);
	cr_assert_eq(after, n > 8 ? 8 : n);
	pthread_mutex_lock(&o->lock);
	cr_assert_eq(tfs_workers_count(&o->pool), after);
	pthread_mutex_unlock(&o->lock);
}

/* Wait until `n` workers are in their loop. */
static void live_is(struct owner *o, unsigned n)
{
	for (int i = 0; i < 2000; i++) {
		pthread_mutex_lock(&o->lock);
		unsigned live = o->live;
		pthread_mutex_unlock(&o->lock);
		if (live == n)
			return;
		struct timespec ts = { 0, 5 * 1000000L };
		nanosleep(&ts, NULL);
	}
	cr_assert_fail("never %u live workers (%u)", n, o->live);
}

Test(workers, grow_shrink_reuse_stop, .timeout = 30)
{
	static struct owner o = { .lock = PTHREAD_MUTEX_INITIALIZER,
				  .cond = PTHREAD_COND_INITIALIZER };

	cr_assert_eq(tfs_workers_init(&o.pool, 8, worker, &o), 0);
	resize(&o, 4);
	live_is(&o, 4);
	resize(&o, 1);
	live_is(&o, 1);
	resize(&o, 6); /* slots 1..3 joined and started again */
	live_is(&o, 6);
	resize(&o, 100); /* clamped to the 8 slots */
	live_is(&o, 8);
	resize(&o, 0);
	live_is(&o, 0);
	resize(&o, 3);
	live_is(&o, 3);
	pthread_mutex_lock(&o.lock);
	o.stop = true;
	pthread_cond_broadcast(&o.cond);
	pthread_mutex_unlock(&o.lock);
	tfs_workers_stop(&o.pool);
	cr_assert_eq(o.live, 0);
	tfs_workers_stop(&o.pool); /* a stopped (zeroed) pool is safe */
}
