/* follow.c - a sliding window of prefetches ahead of a reader that
 * follows a known order. */
#include "config.h"

#include "follow.h"

#include <errno.h>
#include <stdio.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "path.h"
#include "ram.h"
#include "workers.h"

struct tfs_follow {
	struct tfs_layer *ram;
	struct tfs_meta *meta;
	const struct tfs_log *log;
	const struct tfs_manifest_scope *scope; /* for the ctl command */
	unsigned window;
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t work;
	char **order; /* keys, in reading order */
	size_t n;
	uint32_t *slots; /* open addressing: index + 1, 0 empty */
	size_t nslots;   /* power of two, >= 2n */
	uint64_t *seen;  /* bit per index: opened in this pass */
	uint64_t gen;    /* bumped by every set: stale jobs are dropped */
	size_t pos;      /* highest index opened in this pass (+1); 0 none */
	size_t cur;      /* where the reader is (+1): the window starts here */
	size_t back;     /* last open far behind the window (+1); 0 none */
	size_t next;     /* next index to fetch */
	size_t *jobs;    /* queue of indexes to fetch */
	size_t jhead, jlen, jcap;
	bool stop;
	struct tfs_workers pool;
	uint64_t fetched, failed, opened_in_order, realigned, skipped_errors;
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Index of key in the order, or SIZE_MAX.  Lock held. */
static size_t find(struct tfs_follow *f, const char *key)
{
	if (f->nslots == 0)
		return SIZE_MAX;
	for (size_t i = hash(key) & (f->nslots - 1);; i = (i + 1) & (f->nslots - 1)) {
		uint32_t s = f->slots[i];
		if (s == 0)
			return SIZE_MAX;
		if (strcmp(f->order[s - 1], key) == 0)
			return s - 1;
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static int fetch(struct tfs_follow *f, const char *key, uint64_t gen)
{
	char dir[PATH_MAX];
	const char *name;
	if (tfs_path_split(key, dir, sizeof(dir), &name) != 0)
		return ENAMETOOLONG;
	struct tfs_attr a;
	int rc = tfs_meta_lookup(f->meta, dir, name, &a, NULL);
	if (rc)
		return rc;
	if (a.type != TFS_FT_FILE || a.size == 0)
		return 0;
	struct tfs_obj obj;
	tfs_obj_init(&obj, key, a.etag, a.size);
	uint64_t nb = tfs_obj_blocks(&obj, f->ram->block_size);
	for (uint64_t i = 0; i < nb;) {
		pthread_mutex_lock(&f->lock);
		bool stale = f->stop || f->gen != gen;
		pthread_mutex_unlock(&f->lock);
		if (stale)
			return 0;
		unsigned want = nb - i < TFS_MAX_RUN ? (unsigned)(nb - i) : TFS_MAX_RUN, got = 0;
		rc = tfs_ram_fill_run(f->ram, &obj, i, want, TFS_RAM_ONCE, &got);
		if (rc == 0)
			i += got;
		else if (rc == EAGAIN && tfs_ram_has(f->ram, &obj, i))
			i++;
		else if (rc == EAGAIN)
			sleep_ms(2); /* no free budget: the reader comes first */
		else
			return rc;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct tfs_worker *self = arg;
	struct tfs_follow *f = self->ctx;
	pthread_mutex_lock(&f->lock);
	while (!f->stop && !tfs_workers_retire(self)) {
		if (f->jlen == 0) {
			pthread_cond_wait(&f->work, &f->lock);
			continue;
		}
		size_t idx = f->jobs[f->jhead];
		f->jhead = (f->jhead + 1) % f->jcap;
		f->jlen--;
		if (idx >= f->n)
			continue;
		char *key = strdup(f->order[idx]);
		uint64_t gen = f->gen;
		pthread_mutex_unlock(&f->lock);
		int rc = key ? fetch(f, key, gen) : ENOMEM;
		free(key);
		pthread_mutex_lock(&f->lock);
		if (rc)
			f->failed++;
		else
			f->fetched++;
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* Queue indexes up to cur + window.  Lock held. */
static void refill(struct tfs_follow *f)
{
	size_t end = f->cur + f->window;
	if (end > f->n)
		end = f->n;
	while (f->next < end && f->jlen < f->jcap) {
		f->jobs[(f->jhead + f->jlen) % f->jcap] = f->next++;
		f->jlen++;
		pthread_cond_signal(&f->work);
	}
}

void tfs_follow_opened(struct tfs_follow *f, const char *key)
{
	pthread_mutex_lock(&f->lock);
	size_t idx = find(f, key);
	if (idx == SIZE_MAX) {
		pthread_mutex_unlock(&f->lock);
		return;
	}
	f->opened_in_order++;
	/* Readers in several threads open slightly out of order, and a
	 * stalled thread may open its file long after the others moved on.
	 * So a jump beyond the window realigns forward at once, but going
	 * back needs more than one late open:
	 * - a file well behind the reader opened again in this pass is a new
	 *   epoch in the same order, and the pass starts over (loaders that
	 *   open a file twice reopen it at once, not a window later);
	 * - two first opens in a row far behind the window, close together,
	 *   mean the reader went back to files it skipped. */
	bool again = (f->seen[idx / 64] >> (idx % 64)) & 1;
	bool behind = idx + 1 + 2 * (size_t)f->window < f->next;
	if (again && (idx == 0 || idx + 1 + f->window < f->cur)) {
		memset(f->seen, 0, (f->n + 63) / 64 * sizeof(*f->seen));
		f->realigned++;
		f->pos = f->cur = f->next = idx + 1;
		f->jlen = 0;
	} else if (idx + 1 > f->next ||
		   (behind && f->back && idx + 1 > f->back && idx + 1 <= f->back + f->window)) {
		f->realigned++;
		f->cur = f->next = idx + 1;
		f->jlen = 0; /* what was queued is behind or far ahead */
	} else if (idx + 1 > f->cur) {
		f->cur = idx + 1;
	}
	f->back = behind ? idx + 1 : 0;
	f->seen[idx / 64] |= 1ull << (idx % 64);
	if (idx + 1 > f->pos)
		f->pos = idx + 1;
	refill(f);
	pthread_mutex_unlock(&f->lock);
}

static void clear_order(struct tfs_follow *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->order[i]);
	free(f->order);
	free(f->slots);
	free(f->seen);
	f->order = NULL;
	f->slots = NULL;
	f->seen = NULL;
	f->n = f->nslots = 0;
}

int tfs_follow_set(struct tfs_follow *f, const struct tfs_manifest *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->n; i++)
		n += m->v[i].key != NULL;
	if (n > UINT32_MAX - 1)
		return EFBIG;
	char **order = calloc(n ? n : 1, sizeof(*order));
	size_t nslots = 16;
	while (nslots < 2 * n)
		nslots *= 2;
	uint32_t *slots = calloc(nslots, sizeof(*slots));
	uint64_t *seen = calloc((n + 63) / 64 + 1, sizeof(*seen));
	if (order == NULL || slots == NULL || seen == NULL) {
		free(order);
		free(slots);
		free(seen);
		return ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].key == NULL)
			continue;
		order[k] = strdup(m->v[i].key);
		if (order[k] == NULL) {
			while (k)
				free(order[--k]);
			free(order);
			free(slots);
			free(seen);
			return ENOMEM;
		}
		size_t j = hash(order[k]) & (nslots - 1);
		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = (uint32_t)(k + 1);
		k++;
	}
	pthread_mutex_lock(&f->lock);
	clear_order(f);
	f->order = order;
	f->slots = slots;
	f->seen = seen;
	f->n = n;
	f->nslots = nslots;
	f->gen++;
	f->pos = f->cur = f->back = f->next = 0;
	f->jlen = 0;
	f->skipped_errors += m->errors;
	refill(f); /* the reader's first files, before it opens any */
	pthread_mutex_unlock(&f->lock);
	tfs_info(f->log, "follow: order of %zu files set (%zu bad lines skipped)", n, m->errors);
	return 0;
}

void tfs_follow_position(struct tfs_follow *f, uint64_t *pos, uint64_t *len, uint64_t *fetched)
{
	pthread_mutex_lock(&f->lock);
	*pos = f->pos;
	*len = f->n;
	*fetched = f->fetched;
	pthread_mutex_unlock(&f->lock);
}

void tfs_follow_stats(struct tfs_follow *f, struct json_object *out)
{
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	json_object_object_add(o, "order_files", json_object_new_uint64(f->n));
	json_object_object_add(o, "position", json_object_new_uint64(f->pos));
	json_object_object_add(o, "window", json_object_new_uint64(f->window));
	json_object_object_add(o, "workers", json_object_new_uint64(tfs_workers_count(&f->pool)));
	json_object_object_add(o, "prefetched_files", json_object_new_uint64(f->fetched));
	json_object_object_add(o, "failed_files", json_object_new_uint64(f->failed));
	json_object_object_add(o, "opened_in_order", json_object_new_uint64(f->opened_in_order));
	json_object_object_add(o, "realigned", json_object_new_uint64(f->realigned));
	json_object_object_add(o, "bad_lines", json_object_new_uint64(f->skipped_errors));
	pthread_mutex_unlock(&f->lock);
	json_object_object_add(out, "follow", o);
}

int tfs_follow_create(struct tfs_layer *ram, struct tfs_meta *meta, unsigned workers,
		      unsigned window, const struct tfs_log *log, struct tfs_follow **out)
{
	struct tfs_follow *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return ENOMEM;
	f->ram = ram;
	f->meta = meta;
	f->log = log;
	f->window = window ? window : 1;
	f->jcap = (size_t)f->window * 2 + 16;
	f->jobs = calloc(f->jcap, sizeof(*f->jobs));
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->work, NULL);
	if (f->jobs == NULL || tfs_workers_init(&f->pool, TFS_FOLLOW_MAX_WORKERS, worker, f)) {
		tfs_follow_destroy(f);
		return ENOMEM;
	}
	int rc = tfs_workers_set(&f->pool, &f->lock, &f->work, workers, NULL, NULL);
	if (rc) {
		tfs_follow_destroy(f);
		return rc;
	}
	*out = f;
	return 0;
}

int tfs_follow_set_workers(struct tfs_follow *f, unsigned workers)
{
	int rc = tfs_workers_set(&f->pool, &f->lock, &f->work, workers, NULL, NULL);
	if (rc)
		tfs_err(f->log, "follow: cannot start workers: %s", strerror(rc));
	return rc;
}

void tfs_follow_destroy(struct tfs_follow *f)
{
	if (f == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	tfs_workers_stop(&f->pool);
	clear_order(f);
	free(f->jobs);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->work);
	free(f);
}

static int follow_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			  struct json_object **resp)
{
	struct tfs_follow *f = vctx;
	struct json_object *v;
	const char *path =
		json_object_object_get_ex(req, "manifest", &v) ? json_object_get_string(v) : NULL;
	if (path == NULL)
		return tfs_ctl_fail(resp, EINVAL, "follow needs a manifest");
	struct tfs_manifest m;
	int rc = tfs_manifest_load(path, f->scope, 50u * 1000u * 1000u, &m);
	if (rc)
		return tfs_ctl_fail(resp, rc, "manifest '%s': %s", path, strerror(rc));
	struct json_object *bad = json_object_new_array();
	for (size_t i = 0; bad && i < m.n && json_object_array_length(bad) < 1000; i++) {
		if (m.v[i].error == NULL)
			continue;
		struct json_object *b = json_object_new_object();
		if (b == NULL)
			break;
		char where[64];
		snprintf(where, sizeof(where), "manifest line %llu",
			 (unsigned long long)m.v[i].line);
		json_object_object_add(b, "path", json_object_new_string(where));
		json_object_object_add(b, "error", json_object_new_string(m.v[i].error));
		json_object_array_add(bad, b);
	}
	rc = tfs_follow_set(f, &m);
	size_t errors = m.errors;
	tfs_manifest_free(&m);
	if (rc) {
		json_object_put(bad);
		return tfs_ctl_fail(resp, rc, "cannot set the order: %s", strerror(rc));
	}
	uint64_t pos = 0, len = 0, fetched = 0;
	for (;;) {
		tfs_follow_position(f, &pos, &len, &fetched);
		if (len == 0 || pos >= len)
			break;
		struct json_object *p = json_object_new_object();
		if (p) {
			json_object_object_add(p, "files_done", json_object_new_uint64(pos));
			json_object_object_add(p, "files_total", json_object_new_uint64(len));
			json_object_object_add(p, "fetched_files", json_object_new_uint64(fetched));
			json_object_object_add(p, "listing_done", json_object_new_boolean(1));
			(void)tfs_ctl_send_progress(conn, p);
			json_object_put(p);
		}
		if (tfs_ctl_conn_cancelled(conn)) {
			struct tfs_manifest none = { 0 };
			(void)tfs_follow_set(f, &none); /* Ctrl-C: stop following */
			break;
		}
		sleep_ms(500);
	}
	struct json_object *o = json_object_new_object();
	if (o == NULL) {
		json_object_put(bad);
		return ENOMEM;
	}
	json_object_object_add(o, "files_done", json_object_new_uint64(pos));
	json_object_object_add(o, "fetched_files", json_object_new_uint64(fetched));
	json_object_object_add(o, "failed_files", json_object_new_uint64(errors));
	json_object_object_add(o, "failures", bad);
	*resp = o;
	return 0;
}

int tfs_follow_register(struct tfs_ctl *ctl, struct tfs_follow *f,
			const struct tfs_manifest_scope *scope)
{
	f->scope = scope;
	return tfs_ctl_register(ctl, "follow", follow_handler, f);
}
