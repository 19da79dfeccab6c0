/* upload_stream.c - uploading a file while it is still being written; see
 * upload_stream.h. */
#include "config.h"

#include "upload_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_PARTS 10000u
#define STREAM_NICE 10 /* the stream threads' nice value */

struct tfs_upload_streams {
	struct tfs_upload_streams_config cfg;
	pthread_mutex_t lock; /* live and the counters */
	pthread_cond_t gone;  /* a stream ended */
	unsigned live;
	bool closing; /* shutdown: cancelled streams do not abort */
	struct tfs_upload_streams_stats stats;
};

struct tfs_upload_stream {
	struct tfs_upload_streams *g;
	char *key;
	int fd;
	struct tfs_obj_meta meta;
	pthread_mutex_t lock;              /* everything below */
	pthread_cond_t cond;               /* size, state or a thread changed */
	uint64_t size;                     /* bytes written so far */
	char upload_id[TFS_UPLOAD_ID_MAX]; /* "" until created */
	bool creating, created;
	bool stop;     /* finish: take no more parts */
	bool cancel;   /* cancel: abort when the threads are out */
	int err;       /* first failure: the stream is dead */
	unsigned next; /* next part to take */
	unsigned inflight;
	unsigned threads; /* threads still running */
	unsigned cap;     /* etags slots */
	char (*etags)[TFS_ETAG_MAX];
	unsigned parts; /* parts uploaded */
};

int tfs_upload_streams_create(const struct tfs_upload_streams_config *cfg,
			      struct tfs_upload_streams **out)
{
	if (cfg->parallel == 0 || cfg->max_streams == 0 || cfg->part_size < (5u << 20) ||
	    cfg->threshold < cfg->part_size)
		return EINVAL;
	struct tfs_upload_streams *g = calloc(1, sizeof(*g));
	if (g == NULL)
		return ENOMEM;
	g->cfg = *cfg;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->gone, NULL);
	*out = g;
	return 0;
}

void tfs_upload_streams_shutdown(struct tfs_upload_streams *g)
{
	pthread_mutex_lock(&g->lock);
	g->closing = true;
	pthread_mutex_unlock(&g->lock);
}

void tfs_upload_streams_destroy(struct tfs_upload_streams *g)
{
	if (g == NULL)
		return;
	pthread_mutex_lock(&g->lock);
	while (g->live)
		pthread_cond_wait(&g->gone, &g->lock);
	pthread_mutex_unlock(&g->lock);
	pthread_cond_destroy(&g->gone);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

uint64_t tfs_upload_streams_threshold(const struct tfs_upload_streams *g)
{
	return g->cfg.threshold;
}

void tfs_upload_streams_stats(struct tfs_upload_streams *g, struct tfs_upload_streams_stats *out)
{
	pthread_mutex_lock(&g->lock);
	*out = g->stats;
	pthread_mutex_unlock(&g->lock);
}

static void stream_free(struct tfs_upload_stream *s)
{
	struct tfs_upload_streams *g = s->g;
	unsigned parts = s->parts;
	if (s->fd >= 0)
		close(s->fd);
	tfs_obj_meta_clear(&s->meta);
	free(s->etags);
	free(s->key);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	pthread_mutex_lock(&g->lock);
	g->stats.parts += parts;
	g->live--;
	pthread_cond_broadcast(&g->gone);
	pthread_mutex_unlock(&g->lock);
}

/* Abort and unregister the upload of a cancelled or failed stream. */
static void abort_stream(struct tfs_upload_stream *s)
{
	struct tfs_upload_streams *g = s->g;
	if (s->upload_id[0] == '\0')
		return;
	pthread_mutex_lock(&g->lock);
	bool closing = g->closing;
	pthread_mutex_unlock(&g->lock);
	if (closing)
		return; /* left registered: the next mount aborts it */
	if (tfs_backend_abort_upload(g->cfg.be, s->key, s->upload_id) == 0)
		(void)g->cfg.reg(g->cfg.reg_ctx, s->key, s->upload_id, false);
	/* else: it stays registered, and the next mount aborts it */
}

/* Record part idx's ETag, growing the array.  Stream lock held. */
static int record(struct tfs_upload_stream *s, unsigned idx, const char etag[TFS_ETAG_MAX])
{
	if (idx >= s->cap) {
		unsigned cap = s->cap ? s->cap * 2 : 64;
		while (cap <= idx)
			cap *= 2;
		char(*e)[TFS_ETAG_MAX] = realloc(s->etags, (size_t)cap * sizeof(*e));
		if (e == NULL)
			return ENOMEM;
		memset(e + s->cap, 0, (size_t)(cap - s->cap) * sizeof(*e));
		s->etags = e;
		s->cap = cap;
	}
	memcpy(s->etags[idx], etag, TFS_ETAG_MAX);
	s->parts++;
	return 0;
}

/* Create the upload (one thread does it; the others wait).  Lock held;
 * dropped around the requests. */
static void create(struct tfs_upload_stream *s)
{
	struct tfs_upload_streams *g = s->g;
	char id[TFS_UPLOAD_ID_MAX];
	s->creating = true;
	pthread_mutex_unlock(&s->lock);
	int rc = tfs_backend_upload_begin(g->cfg.be, s->key, &s->meta, id);
	if (rc == 0) {
		rc = g->cfg.reg(g->cfg.reg_ctx, s->key, id, true);
		if (rc)
			(void)tfs_backend_abort_upload(g->cfg.be, s->key, id);
	}
	pthread_mutex_lock(&s->lock);
	s->creating = false;
	if (rc == 0) {
		memcpy(s->upload_id, id, sizeof(id));
		s->created = true;
	} else if (s->err == 0) {
		s->err = rc;
	}
	pthread_cond_broadcast(&s->cond);
}

static void *worker(void *arg)
{
	struct tfs_upload_stream *s = arg;
	struct tfs_upload_streams *g = s->g;
	uint64_t ps = g->cfg.part_size;
	/* The writer comes first: a stream only saves time if it does not
	 * slow the write it overlaps.  Linux nice values are per thread. */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), STREAM_NICE);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (s->cancel || s->stop)
			break;
		if (s->err == 0 && !s->created && !s->creating) {
			create(s);
			continue;
		}
		unsigned idx = s->next;
		if (s->err == 0 && s->created && idx < MAX_PARTS &&
		    (uint64_t)(idx + 1) * ps <= s->size) {
			s->next++;
			s->inflight++;
			pthread_mutex_unlock(&s->lock);
			char etag[TFS_ETAG_MAX] = "";
			int rc = tfs_backend_upload_part(
				g->cfg.be, s->key, s->upload_id, idx,
				tfs_io_fd(s->fd, (off_t)((uint64_t)idx * ps)), ps, etag);
			pthread_mutex_lock(&s->lock);
			s->inflight--;
			if (rc == 0)
				rc = record(s, idx, etag);
			if (rc && s->err == 0) {
				s->err = rc;
				tfs_warn(g->cfg.log,
					 "writeback: '%s': uploading while it is written "
					 "failed (%s); it is uploaded after close instead",
					 s->key, strerror(rc));
			}
			pthread_cond_broadcast(&s->cond);
			continue;
		}
		pthread_cond_wait(&s->cond, &s->lock);
	}
	bool last = --s->threads == 0;
	bool cancel = s->cancel;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (last && cancel) {
		abort_stream(s);
		stream_free(s);
	}
	return NULL;
}

int tfs_upload_stream_start(struct tfs_upload_streams *g, const char *key, int fd, uint64_t size,
			    struct tfs_obj_meta *meta, struct tfs_upload_stream **out)
{
	pthread_mutex_lock(&g->lock);
	bool busy = g->live >= g->cfg.max_streams;
	if (!busy)
		g->live++;
	pthread_mutex_unlock(&g->lock);
	if (busy) {
		tfs_obj_meta_clear(meta);
		return EBUSY;
	}
	int rc = 0;
	struct tfs_upload_stream *s = calloc(1, sizeof(*s));
	if (s == NULL || (s->key = strdup(key)) == NULL)
		rc = ENOMEM;
	if (rc == 0 && (s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		rc = errno;
	if (rc) {
		if (s) {
			free(s->key);
			free(s);
		}
		tfs_obj_meta_clear(meta);
		pthread_mutex_lock(&g->lock);
		g->live--;
		pthread_cond_broadcast(&g->gone);
		pthread_mutex_unlock(&g->lock);
		return rc;
	}
	s->g = g;
	s->size = size;
	s->meta = *meta;
	memset(meta, 0, sizeof(*meta));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < g->cfg.parallel; i++) {
		pthread_t t;
		int e = pthread_create(&t, &attr, worker, s);
		if (e) {
			rc = e;
			break;
		}
		s->threads++;
	}
	pthread_attr_destroy(&attr);
	if (s->threads == 0) {
		pthread_mutex_unlock(&s->lock);
		stream_free(s);
		return rc;
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_lock(&g->lock);
	g->stats.started++;
	pthread_mutex_unlock(&g->lock);
	*out = s;
	return 0;
}

void tfs_upload_stream_grow(struct tfs_upload_stream *s, uint64_t size)
{
	pthread_mutex_lock(&s->lock);
	uint64_t ps = s->g->cfg.part_size;
	bool more = size / ps > s->size / ps;
	if (size > s->size)
		s->size = size;
	if (more)
		pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

int tfs_upload_stream_finish(struct tfs_upload_stream *s, uint64_t size, struct tfs_mpu *st)
{
	struct tfs_upload_streams *g = s->g;
	uint64_t ps = g->cfg.part_size;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	while (s->threads > 0)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	uint64_t nparts = size / ps + (size % ps != 0);
	int rc = s->err;
	if (rc == 0 && !s->created)
		rc = ECANCELED; /* stopped before the upload existed */
	if (rc == 0 && (nparts == 0 || nparts > MAX_PARTS || s->next > nparts))
		rc = EINVAL;
	if (rc == 0)
		rc = tfs_mpu_alloc(st, (unsigned)nparts);
	if (rc == 0) {
		memcpy(st->upload_id, s->upload_id, sizeof(st->upload_id));
		st->part_size = ps;
		for (unsigned i = 0; i < s->cap && i < nparts; i++)
			memcpy(st->etags[i], s->etags[i], TFS_ETAG_MAX);
	}
	if (rc) {
		tfs_mpu_clear(st);
		abort_stream(s);
	}
	pthread_mutex_lock(&g->lock);
	if (rc == 0)
		g->stats.finished++;
	else
		g->stats.cancelled++;
	pthread_mutex_unlock(&g->lock);
	stream_free(s);
	return rc;
}

void tfs_upload_stream_cancel(struct tfs_upload_stream *s)
{
	if (s == NULL)
		return;
	struct tfs_upload_streams *g = s->g;
	pthread_mutex_lock(&s->lock);
	s->cancel = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	/* The last thread out aborts and frees (threads > 0 always holds
	 * here: they leave only after stop or cancel). */
	pthread_mutex_lock(&g->lock);
	g->stats.cancelled++;
	pthread_mutex_unlock(&g->lock);
}

int tfs_upload_stream_forget(struct tfs_upload_streams *g, const char *key, const char *upload_id)
{
	return g->cfg.reg(g->cfg.reg_ctx, key, upload_id, false);
}
