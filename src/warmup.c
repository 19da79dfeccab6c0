/* warmup.c - warm-up, pin, unpin and evict over the control socket.
 *
 * A warm-up run: the handler thread walks the requested paths (listings
 * read in pages of WALK_PAGE names, so a million-file tree stays small)
 * and the manifest, and feeds files into a bounded queue; `jobs` worker
 * threads fetch them; the handler sends progress every half second.
 */
#include "config.h"

#include "warmup.h"
#include "clock.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "path.h"
#include "ram.h"
#include "ssd.h"

#define QUEUE_CAP 1024
#define WALK_PAGE 1000
#define MAX_FAILURES 1000 /* listed in the reply; all are counted */
#define MAX_MANIFEST (50u * 1000u * 1000u)
#define MAX_JOBS 256

enum op {
	OP_WARM,
	OP_UNPIN,
	OP_EVICT
};

struct item {
	char *key;
	struct tfs_attr a;
};

struct run {
	struct tfs_warmup_ctx *ctx;
	enum op op;
	bool ram_tier, pin;
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t more, room, progressed;
	struct item q[QUEUE_CAP];
	size_t head, len;
	bool done_adding;
	/* Set under the lock (with the broadcasts); the walk and the workers
	 * also read it without the lock, between blocks: atomic. */
	atomic_bool stop;
	/* counters */
	uint64_t files_total, bytes_total, files_done, bytes_done;
	uint64_t fetched_files, fetched_bytes, cached_files, cached_bytes, failed_files,
		skipped_files;
	struct json_object *failures; /* array of {path, error} */
};

/* Count a failure; `queued` says whether the file was counted in
 * files_total already (a worker's item) or not (the walk). */
static void fail_q(struct run *r, const char *path, const char *why, bool queued)
{
	pthread_mutex_lock(&r->lock);
	r->failed_files++;
	r->files_done++;
	if (!queued)
		r->files_total++;
	pthread_cond_broadcast(&r->progressed);
	if (json_object_array_length(r->failures) < MAX_FAILURES) {
		struct json_object *f = json_object_new_object();
		if (f) {
			json_object_object_add(f, "path",
					       json_object_new_string(path[0] ? path : "/"));
			json_object_object_add(f, "error", json_object_new_string(why));
			json_object_array_add(r->failures, f);
		}
	}
	pthread_mutex_unlock(&r->lock);
}

static void fail(struct run *r, const char *path, const char *why)
{
	fail_q(r, path, why, false);
}

static void fail_item(struct run *r, const char *path, const char *why)
{
	fail_q(r, path, why, true);
}

/* Queue a file (takes `key`); blocks while the queue is full. */
static void push(struct run *r, char *key, const struct tfs_attr *a)
{
	pthread_mutex_lock(&r->lock);
	while (r->len == QUEUE_CAP && !r->stop)
		pthread_cond_wait(&r->room, &r->lock);
	if (r->stop) {
		pthread_mutex_unlock(&r->lock);
		free(key);
		return;
	}
	r->q[(r->head + r->len) % QUEUE_CAP] = (struct item){ key, *a };
	r->len++;
	r->files_total++;
	r->bytes_total += a->size;
	pthread_cond_signal(&r->more);
	pthread_mutex_unlock(&r->lock);
}

static bool pop(struct run *r, struct item *it)
{
	pthread_mutex_lock(&r->lock);
	while (r->len == 0 && !r->done_adding && !r->stop)
		pthread_cond_wait(&r->more, &r->lock);
	bool ok = r->len > 0 && !r->stop;
	if (ok) {
		*it = r->q[r->head];
		r->head = (r->head + 1) % QUEUE_CAP;
		r->len--;
		pthread_cond_signal(&r->room);
	}
	pthread_mutex_unlock(&r->lock);
	return ok;
}

/* ---- one file ---- */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* How long one warm-up fetch waits at most for the foreground reads that
 * are waiting for data (tfs_ram_yield()). */
#define WARM_YIELD_MS 50

/* Fill every block of obj into the chosen tier.  Returns 0 or an errno. */
static int fill(struct run *r, const struct tfs_obj *obj)
{
	struct tfs_layer *ram = r->ctx->ram;
	uint64_t n = tfs_obj_blocks(obj, ram->block_size);
	int flags = r->ram_tier ? 0 : TFS_RAM_PASS;
	for (uint64_t i = 0; i < n && !r->stop;) {
		unsigned want = n - i < TFS_MAX_RUN ? (unsigned)(n - i) : TFS_MAX_RUN, got = 0;
		/* The training job's reads first: a fetch starts once none of
		 * them waits for data (or after WARM_YIELD_MS). */
		(void)tfs_ram_yield(ram, WARM_YIELD_MS);
		int rc = tfs_ram_fill_run(ram, obj, i, want, flags, &got);
		if (rc == 0) {
			i += got;
		} else if (rc == EAGAIN) {
			if (tfs_ram_has(ram, obj, i)) {
				/* In RAM, or being filled by a reader: wait for that
				 * fill, never fetch twice.  A reader's copy into the
				 * SSD tier may still be queued, or was dropped
				 * (ssd.fill_when_full): write it from RAM now (a no-op
				 * when the tier has it). */
				struct tfs_ram_block *b;
				rc = tfs_ram_get(ram, obj, i, TFS_RAM_WAIT | TFS_RAM_BACKGROUND,
						 &b);
				if (rc)
					return rc;
				if (!r->ram_tier)
					tfs_layer_put_block(r->ctx->ssd, obj, i,
							    tfs_ram_block_data(b));
				tfs_ram_put(ram, b);
				i++;
			} else {
				sleep_ms(2); /* no free budget: readers first */
			}
		} else {
			return rc;
		}
	}
	return r->stop ? ECANCELED : 0;
}

static bool in_ram(struct run *r, const struct tfs_obj *obj)
{
	uint64_t n = tfs_obj_blocks(obj, r->ctx->ram->block_size);
	for (uint64_t i = 0; i < n; i++)
		if (!tfs_ram_has(r->ctx->ram, obj, i))
			return false;
	return true;
}

static void warm_one(struct run *r, const struct item *it)
{
	struct tfs_obj obj;
	tfs_obj_init(&obj, it->key, it->a.etag, it->a.size);
	uint64_t have = 0;
	bool cached;
	if (r->ram_tier)
		cached = in_ram(r, &obj);
	else
		cached = tfs_ssd_cached(r->ctx->ssd, &obj, &have) == 0 && have == it->a.size;
	int rc = 0;
	if (!cached) {
		rc = fill(r, &obj);
		if (rc == 0 && !r->ram_tier &&
		    !(tfs_ssd_cached(r->ctx->ssd, &obj, &have) == 0 && have == it->a.size)) {
			fail_item(r, it->key,
				  "the SSD tier did not keep it (full, or the admission policy "
				  "refused it: see tierfs stats)");
			return;
		}
	}
	if (rc) {
		if (rc != ECANCELED)
			fail_item(r, it->key, strerror(rc));
		return;
	}
	if (r->pin && it->a.size > 0) {
		rc = tfs_ssd_set_pinned(r->ctx->ssd, &obj, true);
		if (rc == EDQUOT) {
			uint64_t pinned, max;
			char why[256];
			tfs_ssd_pin_usage(r->ctx->ssd, &pinned, &max);
			snprintf(why, sizeof(why),
				 "pinning %" PRIu64 " more bytes would exceed ssd.pin_max (%" PRIu64
				 " of %" PRIu64 " bytes pinned)",
				 it->a.size, pinned, max);
			fail_item(r, it->key, why);
			return;
		}
		if (rc) {
			fail_item(r, it->key,
				  rc == ENOENT ? "not wholly in the SSD tier, cannot pin"
					       : strerror(rc));
			return;
		}
	}
	pthread_mutex_lock(&r->lock);
	r->files_done++;
	r->bytes_done += it->a.size;
	pthread_cond_broadcast(&r->progressed);
	if (cached) {
		r->cached_files++;
		r->cached_bytes += it->a.size;
	} else {
		r->fetched_files++;
		r->fetched_bytes += it->a.size;
	}
	pthread_mutex_unlock(&r->lock);
}

static void other_one(struct run *r, const struct item *it)
{
	struct tfs_obj obj;
	tfs_obj_init(&obj, it->key, it->a.etag, it->a.size);
	if (r->op == OP_UNPIN) {
		int rc = tfs_ssd_set_pinned(r->ctx->ssd, &obj, false);
		if (rc && rc != ENOENT) {
			fail_item(r, it->key, strerror(rc));
			return;
		}
	} else {
		tfs_layer_invalidate(r->ctx->ram, obj.id); /* RAM and SSD, any version */
	}
	pthread_mutex_lock(&r->lock);
	r->files_done++;
	r->bytes_done += it->a.size;
	pthread_cond_broadcast(&r->progressed);
	pthread_mutex_unlock(&r->lock);
}

static void *worker(void *arg)
{
	struct run *r = arg;
	struct item it;
	while (pop(r, &it)) {
		if (r->op == OP_WARM)
			warm_one(r, &it);
		else
			other_one(r, &it);
		free(it.key);
	}
	return NULL;
}

/* ---- walking ---- */

/* Queue a file, unless it is written locally (its data is staged). */
static void offer(struct run *r, const char *key, const struct tfs_attr *a)
{
	struct tfs_attr dirty;
	if (r->ctx->wb && tfs_wb_attr(r->ctx->wb, key, &dirty)) {
		pthread_mutex_lock(&r->lock);
		r->skipped_files++;
		pthread_mutex_unlock(&r->lock);
		return;
	}
	char *k = strdup(key);
	if (k == NULL) {
		fail(r, key, strerror(ENOMEM));
		return;
	}
	push(r, k, a);
}

struct page {
	char (*names)[NAME_MAX + 1];
	struct tfs_attr *attrs;
	size_t n;
};

static int collect(void *ctx, const char *name, const struct tfs_attr *a)
{
	struct page *p = ctx;
	snprintf(p->names[p->n], NAME_MAX + 1, "%s", name);
	p->attrs[p->n++] = *a;
	return p->n == WALK_PAGE ? 1 : 0;
}

/* Walk directory `dir` depth first. */
static void walk_dir(struct run *r, const char *dir, struct page *pg, unsigned depth)
{
	char after[NAME_MAX + 1] = "";
	if (depth > 256) {
		fail(r, dir, "directories nested too deep");
		return;
	}
	for (;;) {
		pg->n = 0;
		int rc = tfs_meta_readdir(r->ctx->meta, dir, after, collect, pg);
		if (rc != 0 && rc != 1) {
			fail(r, dir, strerror(rc));
			return;
		}
		size_t n = pg->n;
		if (n == 0)
			return;
		/* The page is reused by the recursion: copy what we need. */
		char(*names)[NAME_MAX + 1] = malloc(n * sizeof(*names));
		struct tfs_attr *attrs = malloc(n * sizeof(*attrs));
		if (names == NULL || attrs == NULL) {
			free(names);
			free(attrs);
			fail(r, dir, strerror(ENOMEM));
			return;
		}
		memcpy(names, pg->names, n * sizeof(*names));
		memcpy(attrs, pg->attrs, n * sizeof(*attrs));
		for (size_t i = 0; i < n && !r->stop; i++) {
			char path[PATH_MAX];
			if (tfs_meta_join(dir, names[i], path, sizeof(path)) != 0) {
				fail(r, names[i], "path too long");
				continue;
			}
			if (attrs[i].type == TFS_FT_DIR)
				walk_dir(r, path, pg, depth + 1);
			else
				offer(r, path, &attrs[i]);
		}
		snprintf(after, sizeof(after), "%s", names[n - 1]);
		free(names);
		free(attrs);
		if (n < WALK_PAGE || r->stop)
			return;
	}
}

static void walk(struct run *r, const char *key, struct page *pg)
{
	struct tfs_attr a;
	if (key[0] == '\0') {
		walk_dir(r, "", pg, 0);
		return;
	}
	char dir[PATH_MAX];
	const char *name;
	int rc = tfs_path_split(key, dir, sizeof(dir), &name);
	if (rc == 0)
		rc = tfs_meta_lookup(r->ctx->meta, dir, name, &a, NULL);
	if (rc) {
		fail(r, key, rc == ENOENT ? "no such file or directory" : strerror(rc));
		return;
	}
	if (a.type == TFS_FT_DIR)
		walk_dir(r, key, pg, 0);
	else
		offer(r, key, &a);
}

/* ---- the handler ---- */

static struct json_object *progress(struct run *r, uint64_t t0)
{
	struct json_object *p = json_object_new_object();
	if (p == NULL)
		return NULL;
	pthread_mutex_lock(&r->lock);
	double secs = (double)(tfs_mono_ns() - t0) / 1e9;
	json_object_object_add(p, "files_done", json_object_new_uint64(r->files_done));
	json_object_object_add(p, "files_total", json_object_new_uint64(r->files_total));
	json_object_object_add(p, "bytes_done", json_object_new_uint64(r->bytes_done));
	json_object_object_add(p, "bytes_total", json_object_new_uint64(r->bytes_total));
	json_object_object_add(p, "fetched_files", json_object_new_uint64(r->fetched_files));
	json_object_object_add(p, "fetched_bytes", json_object_new_uint64(r->fetched_bytes));
	json_object_object_add(p, "cached_files", json_object_new_uint64(r->cached_files));
	json_object_object_add(p, "cached_bytes", json_object_new_uint64(r->cached_bytes));
	json_object_object_add(p, "failed_files", json_object_new_uint64(r->failed_files));
	json_object_object_add(p, "skipped_files", json_object_new_uint64(r->skipped_files));
	json_object_object_add(p, "listing_done", json_object_new_boolean(r->done_adding));
	json_object_object_add(p, "seconds", json_object_new_double(secs));
	pthread_mutex_unlock(&r->lock);
	return p;
}

struct feeder {
	struct run *r;
	struct json_object *req;
	struct tfs_manifest man;
	bool have_man;
};

static void *feed(void *arg)
{
	struct feeder *f = arg;
	struct run *r = f->r;
	struct page pg = { 0 };
	pg.names = malloc(WALK_PAGE * sizeof(*pg.names));
	pg.attrs = malloc(WALK_PAGE * sizeof(*pg.attrs));
	if (pg.names && pg.attrs) {
		struct json_object *paths;
		if (json_object_object_get_ex(f->req, "paths", &paths) &&
		    json_object_is_type(paths, json_type_array)) {
			for (size_t i = 0; i < json_object_array_length(paths) && !r->stop; i++) {
				const char *k =
					json_object_get_string(json_object_array_get_idx(paths, i));
				walk(r, k ? k : "", &pg);
			}
		}
		for (size_t i = 0; f->have_man && i < f->man.n && !r->stop; i++) {
			const struct tfs_manifest_entry *e = &f->man.v[i];
			if (e->error) {
				char where[64];
				snprintf(where, sizeof(where), "manifest line %" PRIu64, e->line);
				fail(r, where, e->error);
			} else {
				walk(r, e->key, &pg);
			}
		}
	}
	free(pg.names);
	free(pg.attrs);
	pthread_mutex_lock(&r->lock);
	r->done_adding = true;
	pthread_cond_broadcast(&r->more);
	pthread_cond_broadcast(&r->progressed);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static int run_cmd(struct tfs_warmup_ctx *ctx, enum op op, bool pin, struct tfs_ctl_conn *conn,
		   struct json_object *req, struct json_object **resp)
{
	struct run *r = calloc(1, sizeof(*r));
	struct feeder fd = { .r = r, .req = req };
	struct json_object *v;
	if (r == NULL)
		return ENOMEM;
	r->ctx = ctx;
	r->op = op;
	r->pin = pin;
	if (json_object_object_get_ex(req, "tier", &v)) {
		const char *t = json_object_get_string(v);
		if (t && strcmp(t, "ram") == 0) {
			r->ram_tier = true;
		} else if (!t || strcmp(t, "ssd") != 0) {
			free(r);
			return tfs_ctl_fail(resp, EINVAL, "--tier must be ssd or ram, not '%s'",
					    t ? t : "");
		}
	}
	if (r->ram_tier && pin) {
		free(r);
		return tfs_ctl_fail(resp, EINVAL, "pinning is for the SSD tier (--tier ssd)");
	}
	unsigned jobs = atomic_load(&ctx->default_jobs);
	if (jobs == 0)
		jobs = 8;
	if (json_object_object_get_ex(req, "jobs", &v)) {
		int64_t j = json_object_get_int64(v);
		if (j < 1 || j > MAX_JOBS) {
			free(r);
			return tfs_ctl_fail(resp, EINVAL, "-j must be 1 to %d", MAX_JOBS);
		}
		jobs = (unsigned)j;
	}
	if (op != OP_WARM)
		jobs = 1;
	if (json_object_object_get_ex(req, "manifest", &v)) {
		const char *path = json_object_get_string(v);
		int rc = tfs_manifest_load(path ? path : "", &ctx->scope, MAX_MANIFEST, &fd.man);
		if (rc) {
			free(r);
			return tfs_ctl_fail(resp, rc, "manifest '%s': %s", path ? path : "",
					    rc == EFBIG ? "more than 50 million entries"
							: strerror(rc));
		}
		fd.have_man = true;
	}
	r->failures = json_object_new_array();
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->more, NULL);
	pthread_cond_init(&r->room, NULL);
	pthread_cond_init(&r->progressed, NULL);
	pthread_t feeder, *threads = calloc(jobs, sizeof(*threads));
	unsigned started = 0;
	int rc = threads && r->failures ? pthread_create(&feeder, NULL, feed, &fd) : ENOMEM;
	for (unsigned i = 0; rc == 0 && i < jobs; i++) {
		if (pthread_create(&threads[i], NULL, worker, r) != 0)
			break;
		started++;
	}
	if (rc == 0 && started == 0) {
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_broadcast(&r->room);
		pthread_mutex_unlock(&r->lock);
		rc = EAGAIN;
	}
	uint64_t t0 = tfs_mono_ns();
	if (rc == 0) {
		const char *what = op == OP_WARM    ? (pin ? "pin" : "warm-up")
				   : op == OP_UNPIN ? "unpin"
						    : "evict";
		tfs_info(ctx->log, "%s started (%u parallel fetches, %s tier)", what, jobs,
			 r->ram_tier ? "RAM" : "SSD");
		for (;;) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 500000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_mutex_lock(&r->lock);
			bool finished = r->done_adding && r->len == 0 &&
					r->files_done == r->files_total;
			if (!finished)
				pthread_cond_timedwait(&r->progressed, &r->lock, &ts);
			finished = r->done_adding && r->len == 0 && r->files_done == r->files_total;
			pthread_mutex_unlock(&r->lock);
			/* The last report is the finished state, so a progress
			 * bar ends full. */
			struct json_object *p = progress(r, t0);
			if (p) {
				(void)tfs_ctl_send_progress(conn, p);
				json_object_put(p);
			}
			if (finished)
				break;
			if (tfs_ctl_conn_cancelled(conn)) {
				pthread_mutex_lock(&r->lock);
				r->stop = true;
				pthread_cond_broadcast(&r->more);
				pthread_cond_broadcast(&r->room);
				pthread_mutex_unlock(&r->lock);
				tfs_info(ctx->log, "%s interrupted by the client", what);
				break;
			}
		}
		pthread_join(feeder, NULL);
		pthread_mutex_lock(&r->lock);
		r->done_adding = true;
		pthread_cond_broadcast(&r->more);
		pthread_mutex_unlock(&r->lock);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	if (rc == 0) {
		struct json_object *o = progress(r, t0);
		if (o) {
			json_object_object_add(o, "failures", json_object_get(r->failures));
			*resp = o;
		}
		tfs_info(ctx->log,
			 "warm-up done: %" PRIu64 " fetched, %" PRIu64 " already cached, %" PRIu64
			 " failed, in %.1f s",
			 r->fetched_files, r->cached_files, r->failed_files,
			 (double)(tfs_mono_ns() - t0) / 1e9);
		rc = o ? 0 : ENOMEM;
	}
	/* Items left in the queue after a stop. */
	while (r->len) {
		free(r->q[r->head].key);
		r->head = (r->head + 1) % QUEUE_CAP;
		r->len--;
	}
	json_object_put(r->failures);
	if (fd.have_man)
		tfs_manifest_free(&fd.man);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->more);
	pthread_cond_destroy(&r->room);
	pthread_cond_destroy(&r->progressed);
	free(r);
	return rc;
}

static int warmup_handler(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
			  struct json_object **resp)
{
	struct json_object *v;
	bool pin = json_object_object_get_ex(req, "pin", &v) && json_object_get_boolean(v);
	return run_cmd(ctx, OP_WARM, pin, conn, req, resp);
}

static int pin_handler(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
		       struct json_object **resp)
{
	return run_cmd(ctx, OP_WARM, true, conn, req, resp);
}

static int unpin_handler(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
			 struct json_object **resp)
{
	return run_cmd(ctx, OP_UNPIN, false, conn, req, resp);
}

static int evict_handler(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
			 struct json_object **resp)
{
	return run_cmd(ctx, OP_EVICT, false, conn, req, resp);
}

int tfs_warmup_register(struct tfs_ctl *ctl, struct tfs_warmup_ctx *ctx)
{
	int rc = tfs_ctl_register(ctl, "warmup", warmup_handler, ctx);
	if (rc == 0)
		rc = tfs_ctl_register(ctl, "pin", pin_handler, ctx);
	if (rc == 0)
		rc = tfs_ctl_register(ctl, "unpin", unpin_handler, ctx);
	if (rc == 0)
		rc = tfs_ctl_register(ctl, "evict", evict_handler, ctx);
	return rc;
}
