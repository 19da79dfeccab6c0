/* prefetch.c - a bounded job queue and worker threads that pull blocks
 * into the RAM tier ahead of readers. */
#include "config.h"

#include "prefetch.h"

#include "ram.h"
#include "workers.h"

#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct job {
	char *key;
	char etag[TFS_ETAG_MAX];
	uint64_t size;
	uint64_t idx;
	unsigned n; /* blocks in the run */
	int flags;  /* for tfs_ram_fill_run() */
};

struct tfs_prefetch {
	struct tfs_layer *ram;
	const struct tfs_log *log;
	pthread_mutex_t lock; /* protects the queue, stop and the pool's size */
	struct tfs_workers pool;
	pthread_cond_t work;
	struct job *q;
	size_t cap, head, len;
	bool stop;
	uint64_t queued, done, dropped, failed;
};

static void *worker(void *arg)
{
	struct tfs_worker *self = arg;
	struct tfs_prefetch *pf = self->ctx;
	for (;;) {
		pthread_mutex_lock(&pf->lock);
		while (!pf->stop && pf->len == 0 && self->idx < tfs_workers_count(&pf->pool))
			pthread_cond_wait(&pf->work, &pf->lock);
		if (pf->stop || tfs_workers_retire(self)) {
			pthread_mutex_unlock(&pf->lock);
			return NULL;
		}
		struct job j = pf->q[pf->head];
		pf->head = (pf->head + 1) % pf->cap;
		pf->len--;
		pthread_mutex_unlock(&pf->lock);

		struct tfs_obj obj;
		tfs_obj_init(&obj, j.key, j.etag, j.size);
		int rc = tfs_ram_fill_run(pf->ram, &obj, j.idx, j.n, j.flags, NULL);
		free(j.key);
		pthread_mutex_lock(&pf->lock);
		if (rc == 0)
			pf->done++;
		else if (rc == EAGAIN)
			pf->dropped++;
		else
			pf->failed++;
		pthread_mutex_unlock(&pf->lock);
	}
}

int tfs_prefetch_run(struct tfs_prefetch *pf, const struct tfs_obj *obj, uint64_t idx, unsigned n,
		     int flags)
{
	if (pf == NULL)
		return EAGAIN;
	if (n == 0 || tfs_ram_has(pf->ram, obj, idx))
		return 0;
	char *key = strdup(obj->key);
	if (key == NULL)
		return ENOMEM;
	pthread_mutex_lock(&pf->lock);
	if (pf->len == pf->cap || pf->stop || tfs_workers_count(&pf->pool) == 0) {
		pf->dropped++;
		pthread_mutex_unlock(&pf->lock);
		free(key);
		return EAGAIN;
	}
	struct job *j = &pf->q[(pf->head + pf->len) % pf->cap];
	j->key = key;
	memcpy(j->etag, obj->etag, sizeof(j->etag));
	j->size = obj->size;
	j->idx = idx;
	j->n = n;
	j->flags = flags;
	pf->len++;
	pf->queued++;
	pthread_cond_signal(&pf->work);
	pthread_mutex_unlock(&pf->lock);
	return 0;
}

void tfs_prefetch_stats(struct tfs_prefetch *pf, struct json_object *out)
{
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return;
	pthread_mutex_lock(&pf->lock);
	json_object_object_add(o, "workers", json_object_new_uint64(tfs_workers_count(&pf->pool)));
	json_object_object_add(o, "queued", json_object_new_uint64(pf->queued));
	json_object_object_add(o, "done", json_object_new_uint64(pf->done));
	json_object_object_add(o, "dropped", json_object_new_uint64(pf->dropped));
	json_object_object_add(o, "failed", json_object_new_uint64(pf->failed));
	json_object_object_add(o, "pending", json_object_new_uint64(pf->len));
	pthread_mutex_unlock(&pf->lock);
	json_object_object_add(out, "prefetch", o);
}

void tfs_prefetch_destroy(struct tfs_prefetch *pf)
{
	if (pf == NULL)
		return;
	pthread_mutex_lock(&pf->lock);
	pf->stop = true;
	pthread_cond_broadcast(&pf->work);
	pthread_mutex_unlock(&pf->lock);
	tfs_workers_stop(&pf->pool);
	while (pf->len) {
		free(pf->q[pf->head].key);
		pf->head = (pf->head + 1) % pf->cap;
		pf->len--;
	}
	pthread_mutex_destroy(&pf->lock);
	pthread_cond_destroy(&pf->work);
	free(pf->q);
	free(pf);
}

int tfs_prefetch_set_workers(struct tfs_prefetch *pf, unsigned workers)
{
	unsigned old, now;
	int rc = tfs_workers_set(&pf->pool, &pf->lock, &pf->work, workers, &old, &now);
	if (rc)
		tfs_err(pf->log, "prefetch: cannot start worker threads: %s (%u running)",
			strerror(rc), now);
	else
		tfs_info(pf->log, "prefetch: %u -> %u workers", old, now);
	return rc;
}

int tfs_prefetch_create(const struct tfs_prefetch_config *cfg, struct tfs_layer *ram,
			const struct tfs_log *log, struct tfs_prefetch **out)
{
	struct tfs_prefetch *pf = calloc(1, sizeof(*pf));
	if (pf == NULL)
		return ENOMEM;
	pf->ram = ram;
	pf->log = log;
	pf->cap = 64 + 32 * (size_t)cfg->workers;
	pf->q = calloc(pf->cap, sizeof(*pf->q));
	pthread_mutex_init(&pf->lock, NULL);
	pthread_cond_init(&pf->work, NULL);
	if (pf->q == NULL || tfs_workers_init(&pf->pool, TFS_PREFETCH_MAX_WORKERS, worker, pf)) {
		tfs_prefetch_destroy(pf);
		return ENOMEM;
	}
	int rc = tfs_workers_set(&pf->pool, &pf->lock, &pf->work, cfg->workers, NULL, NULL);
	if (rc) {
		tfs_err(log, "prefetch: cannot start worker threads: %s", strerror(rc));
		tfs_prefetch_destroy(pf);
		return rc;
	}
	*out = pf;
	return 0;
}
