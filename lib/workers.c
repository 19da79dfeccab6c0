/* workers.c - a resizable pool of worker threads (see workers.h). */
#include "config.h"

#include "workers.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

enum {
	SLOT_EMPTY,
	SLOT_RUNNING,
	SLOT_EXITED
};

int tfs_workers_init(struct tfs_workers *p, unsigned max, void *(*fn)(void *), void *ctx)
{
	memset(p, 0, sizeof(*p));
	if (max == 0)
		max = 1;
	p->threads = calloc(max, sizeof(*p->threads));
	p->state = calloc(max, sizeof(*p->state));
	p->args = calloc(max, sizeof(*p->args));
	if (p->threads == NULL || p->state == NULL || p->args == NULL) {
		tfs_workers_stop(p);
		return ENOMEM;
	}
	p->fn = fn;
	p->ctx = ctx;
	p->max = max;
	for (unsigned i = 0; i < max; i++)
		p->args[i] = (struct tfs_worker){ .pool = p, .idx = i, .ctx = ctx };
	return 0;
}

/* Set the target size to n (clamped to max) and start the threads it
 * needs; threads in slots >= n retire on their own.  Slots whose thread
 * has retired are joined here.  Called with the owner's lock held (the new
 * threads block on it until it is released); the caller then broadcasts
 * the owner's condition.  Returns 0, or the pthread_create() error: then
 * the target is the number of slots that do run. */
static int workers_resize(struct tfs_workers *p, unsigned n)
{
	sigset_t all, old;
	int rc = 0;

	if (n > p->max)
		n = p->max;
	p->target = n;
	/* A retired thread has unlocked and is returning: joining it does
	 * not need the owner's lock. */
	for (unsigned i = 0; i < p->max; i++) {
		if (p->state[i] == SLOT_EXITED) {
			pthread_join(p->threads[i], NULL);
			p->state[i] = SLOT_EMPTY;
		}
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i < n; i++) {
		if (p->state[i] != SLOT_EMPTY)
			continue;
		rc = pthread_create(&p->threads[i], NULL, p->fn, &p->args[i]);
		if (rc) {
			p->target = i;
			break;
		}
		p->state[i] = SLOT_RUNNING;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int tfs_workers_set(struct tfs_workers *p, pthread_mutex_t *lock, pthread_cond_t *wake, unsigned n,
		    unsigned *before, unsigned *after)
{
	pthread_mutex_lock(lock);
	if (before)
		*before = p->target;
	int rc = workers_resize(p, n);
	if (after)
		*after = p->target;
	pthread_cond_broadcast(wake);
	pthread_mutex_unlock(lock);
	return rc;
}

bool tfs_workers_retire(struct tfs_worker *w)
{
	struct tfs_workers *p = w->pool;

	if (w->idx < p->target)
		return false;
	p->state[w->idx] = SLOT_EXITED;
	return true;
}

unsigned tfs_workers_count(const struct tfs_workers *p)
{
	return p->target;
}

void tfs_workers_stop(struct tfs_workers *p)
{
	for (unsigned i = 0; p->state && i < p->max; i++) {
		if (p->state[i] != SLOT_EMPTY)
			pthread_join(p->threads[i], NULL);
	}
	free(p->threads);
	free(p->state);
	free(p->args);
	memset(p, 0, sizeof(*p));
}
