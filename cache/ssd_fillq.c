/* ssd_fillq.c - the SSD tier's fill queue: blocks a reader fetched from
 * the inner layer are written into the tier by background threads, so the
 * reader does not wait for the data write and the index commit.
 *
 * A queued fill owns a copy of the block (page-aligned, zero-padded to its
 * room) and a pin of its object (I5 in ssd.c: the object cannot be
 * evicted or dropped before the fill is done; an invalidation meanwhile
 * dooms it, and the fill's unpin drops it).  The queue holds at most
 * `cap` bytes of copies.  A block that does not fit is written by its
 * reader, as with no queue: the reader then waits for the SSD, which is
 * the back-pressure that keeps every block a reader fetched cached however
 * fast the backend is (issue 32: dropping it left most of a fast
 * sequential read out of the tier).  Only ssd.fill_when_full = drop makes
 * such a block go uncached (counted as fill_dropped).  A reader never
 * waits for the queue itself.  ssd_fillq_stop() lets the threads finish
 * every queued fill first.
 *
 * With no queue (ssd.fill_queue = 0) the reader writes every block itself.
 *
 * Calls: ssd.c -> ssd_fillq.c -> ssd_fill.c (ssd_fill()) and
 * ssd_objects.c (ssd_pin(), ssd_unpin()).
 */
#include "config.h"

#include "ssd_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fillq_item {
	struct tfs_obj obj; /* obj.key points to `key` */
	char *key;
	uint64_t idx, tick;
	void *buf;
	size_t len, room;
	bool have_obj;
	bool running; /* a fill thread is writing it */
	struct fillq_item *next;
};

static void item_free(struct fillq_item *it)
{
	free(it->buf);
	free(it->key);
	free(it);
}

static void unlink_item(struct ssd_fillq *q, struct fillq_item *it)
{
	struct fillq_item **pp = &q->head, *prev = NULL;
	while (*pp != it) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	*pp = it->next;
	if (q->tail == it)
		q->tail = prev;
}

/* Keep a written item's buffer for the next copy if it is a whole block
 * and the queue's bytes with its spares stay within the cap; free the
 * item.  Called with the lock held. */
static void item_retire(struct ssd *s, struct fillq_item *it)
{
	struct ssd_fillq *q = &s->fillq;
	if (it->room == s->bs && q->nspare < SSD_FILLQ_SPARE &&
	    q->bytes + (q->nspare + 1) * s->bs <= q->cap) {
		q->spare[q->nspare++] = it->buf;
		it->buf = NULL;
	}
	item_free(it);
}

static void *fillq_main(void *arg)
{
	struct ssd *s = arg;
	struct ssd_fillq *q = &s->fillq;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		/* Items stay listed until written, so readers find their bytes
		 * (ssd_fillq_copy()); the oldest one no thread writes is next. */
		struct fillq_item *it = q->head;
		while (it && it->running)
			it = it->next;
		if (it == NULL) {
			if (q->stop && q->head == NULL)
				break;
			pthread_cond_wait(&q->work, &q->lock);
			continue;
		}
		it->running = true;
		pthread_mutex_unlock(&q->lock);
		(void)ssd_fill(s, &it->obj, it->idx, it->buf, it->len, true, it->tick,
			       it->have_obj);
		ssd_unpin(s, it->obj.id);
		pthread_mutex_lock(&q->lock);
		unlink_item(q, it);
		q->bytes -= it->room;
		pthread_cond_broadcast(&q->work); /* a thread waiting to stop */
		item_retire(s, it);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int ssd_fillq_start(struct ssd *s, uint64_t cap, bool drop)
{
	struct ssd_fillq *q = &s->fillq;

	q->cap = cap;
	q->drop = drop;
	if (cap == 0)
		return 0;
	for (unsigned i = 0; i < SSD_FILLQ_THREADS; i++) {
		int rc = pthread_create(&q->threads[i], NULL, fillq_main, s);
		if (rc) {
			tfs_err(s->log, "ssd: cannot start a fill thread: %s", strerror(rc));
			ssd_fillq_stop(s);
			return rc;
		}
		q->nthreads++;
	}
	return 0;
}

void ssd_fillq_stop(struct ssd *s)
{
	struct ssd_fillq *q = &s->fillq;

	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_broadcast(&q->work);
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	q->nthreads = 0;
	/* Left only if no thread ever ran (tfs_ssd_create() failed): the
	 * layer is destroyed alone, so no push races this. */
	while (q->head) {
		struct fillq_item *it = q->head;
		q->head = it->next;
		ssd_unpin(s, it->obj.id);
		item_free(it);
	}
	q->tail = NULL;
	q->bytes = 0;
	while (q->nspare)
		free(q->spare[--q->nspare]);
}

void ssd_fillq_free(struct ssd *s)
{
	pthread_mutex_destroy(&s->fillq.lock);
	pthread_cond_destroy(&s->fillq.work);
}

/* A copy of the block: `len` bytes, zeroed up to its page-rounded room,
 * in `spare` (a buffer of `room` bytes, taken over) or a new buffer.  On
 * failure `spare` is freed. */
static struct fillq_item *item_new(const struct tfs_obj *obj, uint64_t idx, const void *buf,
				   size_t len, size_t room, uint64_t tick, bool have_obj,
				   void *spare)
{
	struct fillq_item *it = calloc(1, sizeof(*it));
	if (it == NULL) {
		free(spare);
		return NULL;
	}
	it->buf = spare;
	it->key = strdup(obj->key);
	if (it->key == NULL ||
	    (it->buf == NULL && posix_memalign(&it->buf, TFS_PAGE_ALIGN, room) != 0)) {
		if (it->key == NULL)
			free(it->buf);
		it->buf = NULL;
		item_free(it);
		return NULL;
	}
	memcpy(it->buf, buf, len);
	memset((char *)it->buf + len, 0, room - len);
	it->obj = *obj;
	it->obj.key = it->key;
	it->idx = idx;
	it->tick = tick;
	it->len = len;
	it->room = room;
	it->have_obj = have_obj;
	return it;
}

enum fillq_push ssd_fillq_push(struct ssd *s, const struct tfs_obj *obj, uint64_t idx,
			       const void *buf, size_t len, uint64_t tick, bool have_obj)
{
	struct ssd_fillq *q = &s->fillq;
	size_t room = tfs_obj_block_room(len);

	void *spare = NULL;
	pthread_mutex_lock(&q->lock);
	bool fits = !q->stop && q->bytes + room <= q->cap;
	if (fits) {
		q->bytes += room; /* reserved before the copy, so the cap holds */
		if (room == s->bs && q->nspare)
			spare = q->spare[--q->nspare];
		/* spares beyond the cap now (a spare is a block's room) */
		while (q->nspare && q->bytes + q->nspare * s->bs > q->cap)
			free(q->spare[--q->nspare]);
	}
	pthread_mutex_unlock(&q->lock);
	if (!fits)
		return FILLQ_FULL;
	if (spare)
		count(&s->fill_queue_reused, 1);
	struct fillq_item *it = item_new(obj, idx, buf, len, room, tick, have_obj, spare);
	if (it == NULL || ssd_pin(s, obj->id) != 0) {
		if (it)
			item_free(it);
		pthread_mutex_lock(&q->lock);
		q->bytes -= room;
		pthread_mutex_unlock(&q->lock);
		count(&s->fill_failed, 1);
		return FILLQ_FAILED;
	}
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
	count(&s->fill_queued, 1);
	return FILLQ_QUEUED;
}

/* The queued copy of block idx of obj's version, or NULL.  q->lock held. */
static struct fillq_item *find_item(struct ssd_fillq *q, const struct tfs_obj *obj, uint64_t idx)
{
	for (struct fillq_item *it = q->head; it; it = it->next)
		if (it->idx == idx && memcmp(it->obj.id, obj->id, TFS_OBJ_ID_LEN) == 0 &&
		    strcmp(it->obj.etag, obj->etag) == 0)
			return it;
	return NULL;
}

bool ssd_fillq_copy(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, void *buf, size_t len)
{
	struct ssd_fillq *q = &s->fillq;
	if (q->cap == 0)
		return false;
	pthread_mutex_lock(&q->lock);
	struct fillq_item *it = find_item(q, obj, idx);
	bool found = it && it->len == len;
	if (found)
		memcpy(buf, it->buf, len);
	pthread_mutex_unlock(&q->lock);
	if (found)
		count(&s->fill_queue_hits, 1);
	return found;
}

bool ssd_fillq_has(struct ssd *s, const struct tfs_obj *obj, uint64_t first, unsigned n)
{
	struct ssd_fillq *q = &s->fillq;
	bool found = false;
	if (q->cap == 0)
		return false;
	pthread_mutex_lock(&q->lock);
	for (unsigned i = 0; i < n && !found; i++)
		found = find_item(q, obj, first + i) != NULL;
	pthread_mutex_unlock(&q->lock);
	return found;
}

uint64_t ssd_fillq_bytes(struct ssd *s)
{
	pthread_mutex_lock(&s->fillq.lock);
	uint64_t b = s->fillq.bytes;
	pthread_mutex_unlock(&s->fillq.lock);
	return b;
}

bool ssd_fill_read(struct ssd *s, const struct tfs_obj *obj, uint64_t idx, const void *buf,
		   size_t len, uint64_t tick, bool have_obj)
{
	if (s->fillq.cap) {
		switch (ssd_fillq_push(s, obj, idx, buf, len, tick, have_obj)) {
		case FILLQ_QUEUED:
			return true;
		case FILLQ_FAILED:
			return false;
		case FILLQ_FULL:
			if (s->fillq.drop) {
				count(&s->fill_dropped, 1);
				return false;
			}
			break; /* back-pressure: this reader writes it */
		}
	}
	return ssd_fill(s, obj, idx, buf, len, true, tick, have_obj);
}

/* ---- a cold run (ssd_read_blocks()) ---- */

/* Each block of the run is queued (or written) as it arrives, then handed
 * up (struct run_fill in ssd_internal.h).  A warm-up's blocks (f->sync)
 * are always written here: nobody waits for them, and they are never
 * dropped, whatever ssd.fill_when_full says. */
void ssd_run_block_done(void *ctx, int i)
{
	struct run_fill *f = ctx;
	size_t len = tfs_obj_block_len(f->obj, f->first + (uint64_t)i, f->s->bs);
	const void *buf = f->bufs[i];
	uint64_t idx = f->first + (uint64_t)i;
	bool have_obj = f->have_obj || f->filled;
	if (f->sync)
		f->filled |= ssd_fill(f->s, f->obj, idx, buf, len, true, f->tick, have_obj);
	else
		f->filled |= ssd_fill_read(f->s, f->obj, idx, buf, len, f->tick, have_obj);
	tfs_layer_block_done(f->up, (unsigned)i, len);
}
