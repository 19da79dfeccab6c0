/* prefetch.c - a bounded job queue and worker threads that pull blocks
 * into the RAM tier ahead of readers, and the read-ahead decision for
 * sequential readers that feeds it. */
#include "config.h"

#include "prefetch.h"

#include "ram.h"
#include "statdef.h"
#include "workers.h"

#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct job {
	struct tfs_ram_claim *claim; /* blocks claimed in the RAM tier */
};

struct tfs_prefetch {
	struct tfs_layer *ram;
	const struct tfs_log *log;
	uint64_t ra_blocks;   /* cfg.readahead in blocks */
	unsigned ra_gets;     /* cfg.stream_gets (0: 4) */
	pthread_mutex_t lock; /* protects the queue, stop and the pool's size */
	struct tfs_workers pool;
	pthread_cond_t work;
	struct job *q;
	size_t cap, head, len;
	bool stop;
	uint64_t queued, done, dropped, failed;
	unsigned active, active_max; /* jobs being filled now, and the most at once */
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
		if (++pf->active > pf->active_max)
			pf->active_max = pf->active;
		pthread_mutex_unlock(&pf->lock);

		int rc = tfs_ram_fill_claim(pf->ram, j.claim);
		pthread_mutex_lock(&pf->lock);
		pf->active--;
		if (rc == 0)
			pf->done++;
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
	uint64_t end = idx + n;
	while (idx < end) {
		struct tfs_ram_claim *c;
		unsigned want = end - idx > TFS_MAX_RUN ? TFS_MAX_RUN : (unsigned)(end - idx);
		pthread_mutex_lock(&pf->lock);
		bool open = !pf->stop && pf->len < pf->cap && tfs_workers_count(&pf->pool) > 0;
		if (!open)
			pf->dropped++;
		pthread_mutex_unlock(&pf->lock);
		if (!open)
			return EAGAIN;
		int rc = tfs_ram_claim_run(pf->ram, obj, idx, want, flags | TFS_RAM_SKIP, &c);
		if (rc == EAGAIN) {
			pthread_mutex_lock(&pf->lock);
			pf->dropped++; /* no budget */
			pthread_mutex_unlock(&pf->lock);
		}
		if (rc || c == NULL)
			return rc; /* or every block is present: 0 */
		idx = tfs_ram_claim_first(c) + tfs_ram_claim_len(c);
		pthread_mutex_lock(&pf->lock);
		if (pf->len == pf->cap || pf->stop || tfs_workers_count(&pf->pool) == 0) {
			/* Filled up, stopped or left without workers (a reload)
			 * meanwhile: its readers fetch it. */
			pf->dropped++;
			pthread_mutex_unlock(&pf->lock);
			tfs_ram_cancel_claim(pf->ram, c);
			return EAGAIN;
		}
		pf->q[(pf->head + pf->len) % pf->cap].claim = c;
		pf->len++;
		pf->queued++;
		pthread_cond_signal(&pf->work);
		pthread_mutex_unlock(&pf->lock);
	}
	return 0;
}

void tfs_prefetch_sequential(struct tfs_prefetch *pf, struct tfs_prefetch_stream *s,
			     const struct tfs_obj *obj, uint64_t off, uint64_t end)
{
	if (pf == NULL || pf->ra_blocks == 0)
		return;
	uint64_t bs = pf->ram->block_size, nblocks = tfs_obj_blocks(obj, bs);
	uint64_t run = pf->ra_blocks / 2 ? pf->ra_blocks / 2 : 1;
	if (run > TFS_MAX_RUN)
		run = TFS_MAX_RUN;
	/* At least the kernel's window twice, and ra_gets runs. */
	uint64_t window = 2 * pf->ra_blocks;
	if (window < pf->ra_gets * run)
		window = pf->ra_gets * run;
	uint64_t slack = window * bs;
	bool sequential = off == 0 || (off + slack >= s->next_off && off <= s->next_off + bs);
	if (end > s->next_off || !sequential)
		s->next_off = end;
	if (!sequential)
		return;
	uint64_t cur = off / bs;
	uint64_t from = s->ra_next > cur ? s->ra_next : cur;
	uint64_t to = cur + 1 + window;
	if (to > nblocks)
		to = nblocks;
	/* Wait until a whole run is free, except at the end. */
	if (from < to && (to - from >= run || to == nblocks || from == cur))
		s->ra_next = to;
	else
		from = to;
	for (uint64_t i = from; i < to;) {
		bool own = i == cur;
		unsigned n = own ? 1 : (unsigned)(to - i < run ? to - i : run);
		if (tfs_prefetch_run(pf, obj, i, n, own ? 0 : TFS_RAM_ONCE) == EAGAIN) {
			s->ra_next = i; /* retried by the next read */
			break;
		}
		i += n;
	}
}

struct pf_snap {
	uint64_t workers, queued, done, dropped, failed, pending, active, active_max;
};

#define ROW(f, ...) TFS_STAT(struct pf_snap, f, __VA_ARGS__)
static const struct tfs_statdef pf_rows[] = {
	ROW(workers, TFS_GAUGE, "tierfs_prefetch_workers",
	    "Read-ahead threads (prefetch.workers)."),
	ROW(queued, TFS_COUNTER, "tierfs_prefetch_queued_total", "Read-ahead runs queued."),
	ROW(done, TFS_COUNTER, "tierfs_prefetch_done_total", "Read-ahead runs fetched."),
	ROW(dropped, TFS_COUNTER, "tierfs_prefetch_dropped_total",
	    "Read-ahead runs dropped (queue full, no free RAM budget)."),
	ROW(failed, TFS_COUNTER, "tierfs_prefetch_failed_total", "Read-ahead runs that failed."),
	ROW(pending, TFS_GAUGE, "tierfs_prefetch_pending", "Read-ahead runs waiting in the queue."),
	ROW(active, TFS_GAUGE, "tierfs_prefetch_active", "Read-ahead runs being fetched now."),
	ROW(active_max, TFS_GAUGE, "tierfs_prefetch_active_max",
	    "Most read-ahead runs fetched at once since the start."),
};
#undef ROW

const struct tfs_stattab tfs_prefetch_stattab = TFS_STATTAB("prefetch", pf_rows);

void tfs_prefetch_stats(struct tfs_prefetch *pf, struct json_object *out)
{
	pthread_mutex_lock(&pf->lock);
	struct pf_snap s = {
		.workers = tfs_workers_count(&pf->pool),
		.queued = pf->queued,
		.done = pf->done,
		.dropped = pf->dropped,
		.failed = pf->failed,
		.pending = pf->len,
		.active = pf->active,
		.active_max = pf->active_max,
	};
	pthread_mutex_unlock(&pf->lock);
	(void)tfs_stat_add_section(out, &tfs_prefetch_stattab, &s);
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
		tfs_ram_cancel_claim(pf->ram, pf->q[pf->head].claim);
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
	/* With no worker left, nothing would fill the queued claims: give
	 * them back to their readers. */
	pthread_mutex_lock(&pf->lock);
	while (tfs_workers_count(&pf->pool) == 0 && pf->len) {
		struct tfs_ram_claim *c = pf->q[pf->head].claim;
		pf->head = (pf->head + 1) % pf->cap;
		pf->len--;
		pf->dropped++;
		pthread_mutex_unlock(&pf->lock);
		tfs_ram_cancel_claim(pf->ram, c);
		pthread_mutex_lock(&pf->lock);
	}
	pthread_mutex_unlock(&pf->lock);
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
	pf->ra_blocks = (cfg->readahead + ram->block_size - 1) / ram->block_size;
	pf->ra_gets = cfg->stream_gets ? cfg->stream_gets : 4;
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
