/* ram.c - the RAM tier: budgeted block cache with shared fills.
 *
 * States of a block:
 *   FILLING  allocated, one thread is reading it from the inner layer;
 *            others wait on `filled` (the slot of its bucket).
 *   READY    holds data.  `admitted` blocks are in the cache (on the LRU
 *            list, evictable once unreferenced); the others are transient:
 *            freed when the last reference goes.
 *   (failed fills are unlinked at once and freed with the last reference)
 *
 * Invariants, all under `lock`:
 *   used   == sum of cost(len) over every allocated block (any state) <= cap
 *   cached == sum of cost(len) over admitted blocks <= cap - reserve
 *   a block is in the table iff it is FILLING or READY and not stale
 *   a block on the LRU list is admitted, READY and in the table
 *   pooled == bytes of free full-size buffers kept for reuse; used + pooled <= cap
 * Reusing buffers avoids a fresh mmap, page faults and zeroing for every
 * block; the pool gives its memory back before anyone waits for budget.
 * A reader never holds more than one reference while waiting for budget
 * (see the FUSE read path), so waiting cannot deadlock: budget held by
 * references is always released by readers that are not waiting.
 */
#include "config.h"

#include "ram.h"

#include "bufarena.h"
#include "policy.h"
#include "statdef.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum state {
	FILLING,
	READY
};

#define FILL_SLOTS 64 /* condition variables for fills (a power of two) */

struct tfs_ram_block {
	uint8_t id[TFS_OBJ_ID_LEN];
	uint64_t idx;
	char etag[TFS_ETAG_MAX];
	char *data;
	size_t len;
	int refs;
	enum state state;
	int err;       /* fill result, read by waiters */
	bool admitted; /* part of the cache (LRU list) */
	bool once;     /* streamed read-ahead: dropped once a reader consumed it */
	bool linger;   /* ...unless the cache has room to spare (TFS_RAM_LINGER) */
	bool pass;     /* warm-up of a lower tier: never admitted */
	bool linked;   /* in the hash table */
	uint64_t tick; /* last access */
	struct tfs_ram_block *hnext;
	struct tfs_ram_block *prev, *next; /* LRU list, oldest first */
};

struct ram {
	struct tfs_layer *inner;
	const struct tfs_log *log;
	enum tfs_policy policy;
	uint64_t cap, reserve;
	pthread_mutex_t lock; /* protects everything below */
	/* A fill finished: waiters for a block wait on the slot of its hash
	 * bucket, so a fill wakes only the readers of that block (and of a
	 * few others), not every reader waiting for any block. */
	pthread_cond_t filled[FILL_SLOTS];
	pthread_cond_t budget;  /* bytes were released */
	pthread_cond_t fg_idle; /* fg_busy dropped to 0 */
	unsigned fg_busy;       /* foreground gets waiting for data (fill or fetch) */
	struct tfs_ram_block **table;
	size_t nbuckets;          /* power of two */
	struct tfs_ram_block lru; /* sentinel */
	uint64_t used, cached, nblocks_cached, clock;
	struct tfs_bufarena arena; /* where buffers of block_size bytes come from */
	char **pool;               /* free buffers of block_size bytes, memory kept */
	size_t npool, pool_cap;
	uint64_t pooled, block_size;
	struct tfs_reuse reuse;
	/* counters */
	uint64_t hits, misses, hit_bytes, fill_bytes, evictions, not_admitted, waits, fill_errors;
	uint64_t consumed; /* streamed blocks dropped after their read */
	uint64_t kept;     /* streamed blocks kept after their read (LINGER) */
	uint64_t yields;   /* background fetches held back for foreground reads */
};

const void *tfs_ram_block_data(const struct tfs_ram_block *b)
{
	return b->data;
}

size_t tfs_ram_block_len(const struct tfs_ram_block *b)
{
	return b->len;
}

/* What a block of `len` bytes takes from the heap, as the budget counts
 * it: a full block its buffer; a shorter one (an object's last block, a
 * whole small file) its page-rounded room plus the page posix_memalign()
 * may spend aligning it.  Counting only `len` let an epoch over 4 KiB
 * files hold twice ram.size (8 KiB of heap per 4 KiB block). */
static size_t cost(const struct ram *r, size_t len)
{
	return len == r->block_size ? len : tfs_obj_block_room(len) + TFS_PAGE_ALIGN;
}

static size_t bucket_of(const struct ram *r, const uint8_t id[TFS_OBJ_ID_LEN], uint64_t idx)
{
	uint64_t h;
	memcpy(&h, id, sizeof(h));
	h ^= idx * 0x9E3779B97F4A7C15ull;
	h ^= h >> 29;
	return (size_t)(h & (r->nbuckets - 1));
}

static pthread_cond_t *fill_cond(struct ram *r, const struct tfs_ram_block *b)
{
	return &r->filled[bucket_of(r, b->id, b->idx) & (FILL_SLOTS - 1)];
}

static struct tfs_ram_block *find(struct ram *r, const uint8_t id[TFS_OBJ_ID_LEN], uint64_t idx)
{
	for (struct tfs_ram_block *b = r->table[bucket_of(r, id, idx)]; b; b = b->hnext)
		if (b->idx == idx && memcmp(b->id, id, TFS_OBJ_ID_LEN) == 0)
			return b;
	return NULL;
}

static void lru_unlink(struct tfs_ram_block *b)
{
	b->prev->next = b->next;
	b->next->prev = b->prev;
	b->prev = b->next = NULL;
}

static void lru_push(struct ram *r, struct tfs_ram_block *b)
{
	b->prev = r->lru.prev;
	b->next = &r->lru;
	r->lru.prev->next = b;
	r->lru.prev = b;
}

static void table_unlink(struct ram *r, struct tfs_ram_block *b)
{
	struct tfs_ram_block **pp = &r->table[bucket_of(r, b->id, b->idx)];
	while (*pp && *pp != b)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = b->hnext;
	b->hnext = NULL;
	b->linked = false;
}

/* Give a buffer's memory back (a full block's to the arena). */
static void release_buffer(struct ram *r, char *data, size_t len)
{
	if (len == r->block_size)
		tfs_bufarena_put(&r->arena, data);
	else
		free(data);
}

/* Take `b` out of the cache; it is freed now if unreferenced. */
static void drop(struct ram *r, struct tfs_ram_block *b)
{
	if (b->admitted) {
		lru_unlink(b);
		b->admitted = false;
		r->cached -= cost(r, b->len);
		r->nblocks_cached--;
	}
	if (b->linked)
		table_unlink(r, b);
	if (b->refs == 0) {
		r->used -= cost(r, b->len);
		if (b->len == r->block_size && r->npool < r->pool_cap) {
			r->pool[r->npool++] = b->data;
			r->pooled += b->len;
		} else {
			release_buffer(r, b->data, b->len);
		}
		free(b);
		pthread_cond_broadcast(&r->budget);
	}
}

/* A buffer of `len` bytes: from the pool when it fits, else a new one.
 * Frees pooled buffers first if the budget needs their room.  Buffers are
 * page-aligned and padded with zeros to a whole page, so the SSD tier can
 * write a block with O_DIRECT straight from it (struct tfs_layer_ops);
 * full blocks come from the arena (huge pages). */
static char *buffer(struct ram *r, size_t len)
{
	if (len == r->block_size && r->npool) {
		r->pooled -= len;
		return r->pool[--r->npool];
	}
	while (r->npool && r->used + r->pooled + cost(r, len) > r->cap) {
		release_buffer(r, r->pool[--r->npool], r->block_size);
		r->pooled -= r->block_size;
	}
	if (len == r->block_size)
		return tfs_bufarena_get(&r->arena);
	/* An object's last block: zeroed up to its page-rounded room, as
	 * struct tfs_layer_ops promises the layers below. */
	size_t room = tfs_obj_block_room(len);
	void *p = NULL;
	if (posix_memalign(&p, TFS_PAGE_ALIGN, room) != 0)
		return NULL;
	memset((char *)p + len, 0, room - len);
	return p;
}

/* The oldest admitted, unreferenced block, or NULL. */
static struct tfs_ram_block *oldest_idle(struct ram *r)
{
	for (struct tfs_ram_block *b = r->lru.next; b != &r->lru; b = b->next)
		if (b->refs == 0)
			return b;
	return NULL;
}

/* Make `need` bytes of room in the cached share, as the policy allows. */
static bool make_cache_room(struct ram *r, uint64_t need)
{
	while (r->cached + need > r->cap - r->reserve) {
		struct tfs_ram_block *v = oldest_idle(r);
		if (v == NULL || !tfs_policy_may_evict(r->policy, &r->reuse, r->clock - v->tick,
						       r->nblocks_cached))
			return false;
		r->evictions++;
		drop(r, v);
	}
	return true;
}

/* Allocate block `idx` in state FILLING with one reference, linked in the
 * table; the budget has been checked.  Called with the lock held.
 * Returns NULL on ENOMEM. */
static struct tfs_ram_block *start_fill(struct ram *r, const struct tfs_obj *obj, uint64_t idx,
					size_t len)
{
	struct tfs_ram_block *b = calloc(1, sizeof(*b));
	char *data = b ? buffer(r, len) : NULL;
	if (data == NULL) {
		free(b);
		return NULL;
	}
	memcpy(b->id, obj->id, TFS_OBJ_ID_LEN);
	b->idx = idx;
	snprintf(b->etag, sizeof(b->etag), "%s", obj->etag);
	b->data = data;
	b->len = len;
	b->refs = 1;
	b->state = FILLING;
	b->tick = r->clock;
	size_t bk = bucket_of(r, obj->id, idx);
	b->hnext = r->table[bk];
	r->table[bk] = b;
	b->linked = true;
	r->used += cost(r, len);
	r->misses++;
	return b;
}

/* A fill finished with `rc`: wake the waiters, then admit the block to
 * the cache or make it transient.  The filler's reference stays.  Called
 * with the lock held. */
static void end_fill(struct ram *r, struct tfs_ram_block *b, int rc)
{
	b->state = READY;
	b->err = rc;
	pthread_cond_broadcast(fill_cond(r, b));
	if (rc) {
		if (rc != ECANCELED)
			r->fill_errors++;
		if (b->linked)
			table_unlink(r, b);
		return;
	}
	r->fill_bytes += b->len;
	if (b->linked && !b->pass && make_cache_room(r, cost(r, b->len))) {
		b->admitted = true;
		r->cached += cost(r, b->len);
		r->nblocks_cached++;
		lru_push(r, b);
	} else {
		if (!b->pass)
			r->not_admitted++;
		if (b->linked)
			table_unlink(r, b); /* transient: freed at the last put */
	}
}

/* A foreground get starts or stops waiting for data.  Lock held. */
static void fg_enter(struct ram *r, int flags)
{
	if (!(flags & TFS_RAM_BACKGROUND))
		r->fg_busy++;
}

static void fg_leave(struct ram *r, int flags)
{
	if (!(flags & TFS_RAM_BACKGROUND) && --r->fg_busy == 0)
		pthread_cond_broadcast(&r->fg_idle);
}

bool tfs_ram_yield(struct tfs_layer *l, unsigned max_ms)
{
	struct ram *r = l->priv;
	bool waited = false;
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += max_ms / 1000;
	until.tv_nsec += (long)(max_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->lock);
	if (r->fg_busy > 0) {
		r->yields++;
		waited = true;
	}
	while (r->fg_busy > 0 && pthread_cond_timedwait(&r->fg_idle, &r->lock, &until) == 0)
		;
	pthread_mutex_unlock(&r->lock);
	return waited;
}

int tfs_ram_get(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, int flags,
		struct tfs_ram_block **out)
{
	struct ram *r = l->priv;
	size_t len = tfs_obj_block_len(obj, idx, l->block_size);
	struct tfs_ram_block *b;
	int rc;

	if (len == 0)
		return EINVAL;
	pthread_mutex_lock(&r->lock);
	r->clock++;
	b = find(r, obj->id, idx);
	if (b && strcmp(b->etag, obj->etag) != 0) {
		drop(r, b); /* another version: never served */
		b = NULL;
	}
	if (b) {
		b->refs++;
		if (b->state == FILLING) {
			fg_enter(r, flags);
			while (b->state == FILLING)
				pthread_cond_wait(fill_cond(r, b), &r->lock);
			fg_leave(r, flags);
		}
		if (b->err) {
			rc = b->err;
			b->refs--;
			if (b->refs == 0)
				drop(r, b);
			pthread_mutex_unlock(&r->lock);
			/* A claimed read-ahead that was dropped: fill it here. */
			if (rc == ECANCELED)
				return tfs_ram_get(l, obj, idx, flags, out);
			return rc;
		}
		r->hits++;
		r->hit_bytes += b->len;
		if (b->admitted) {
			tfs_reuse_observe(&r->reuse, r->clock - b->tick);
			lru_unlink(b);
			lru_push(r, b);
		}
		b->tick = r->clock;
		pthread_mutex_unlock(&r->lock);
		*out = b;
		return 0;
	}

	/* Miss: find budget for a new buffer. */
	while (r->used + cost(r, len) > r->cap) {
		/* Cached blocks beyond their share cannot exist, so only
		 * references and fills hold the rest: wait for them. */
		if (flags & TFS_RAM_NOWAIT) {
			pthread_mutex_unlock(&r->lock);
			return EAGAIN;
		}
		r->waits++;
		pthread_cond_wait(&r->budget, &r->lock);
		b = find(r, obj->id, idx);
		if (b && strcmp(b->etag, obj->etag) == 0) {
			/* Someone else started this block meanwhile. */
			pthread_mutex_unlock(&r->lock);
			return tfs_ram_get(l, obj, idx, flags, out);
		}
	}
	b = start_fill(r, obj, idx, len);
	if (b)
		fg_enter(r, flags);
	pthread_mutex_unlock(&r->lock);
	if (b == NULL)
		return ENOMEM;

	rc = tfs_layer_read_block(r->inner, obj, idx, b->data);

	pthread_mutex_lock(&r->lock);
	fg_leave(r, flags);
	end_fill(r, b, rc);
	if (rc) {
		b->refs--;
		if (b->refs == 0)
			drop(r, b);
		pthread_mutex_unlock(&r->lock);
		return rc;
	}
	pthread_mutex_unlock(&r->lock);
	*out = b;
	return 0;
}

struct tfs_ram_claim {
	struct ram *r;
	struct tfs_obj obj; /* obj.key points to key */
	char *key;
	uint64_t first;
	unsigned n;
	bool pass; /* TFS_RAM_PASS: a warm-up of the tiers below */
	struct tfs_ram_block *blocks[TFS_MAX_RUN];
};

static void claim_free(struct tfs_ram_claim *c)
{
	free(c->key);
	free(c);
}

/* Is block idx of obj's version cached or being filled?  Lock held. */
static bool present(struct ram *r, const struct tfs_obj *obj, uint64_t idx)
{
	struct tfs_ram_block *b = find(r, obj->id, idx);
	return b && strcmp(b->etag, obj->etag) == 0;
}

int tfs_ram_claim_run(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first, unsigned n,
		      int flags, struct tfs_ram_claim **out)
{
	struct ram *r = l->priv;
	struct tfs_ram_claim *c;
	uint64_t nblocks = tfs_obj_blocks(obj, l->block_size);
	unsigned k = 0;

	*out = NULL;
	if (n > TFS_MAX_RUN)
		n = TFS_MAX_RUN;
	if (n == 0 || first + n > nblocks)
		return EINVAL;
	c = malloc(sizeof(*c));
	if (c == NULL || (c->key = strdup(obj->key)) == NULL) {
		free(c);
		return ENOMEM;
	}
	c->r = r;
	c->obj = *obj;
	c->obj.key = c->key;
	c->pass = (flags & TFS_RAM_PASS) != 0;
	pthread_mutex_lock(&r->lock);
	if (flags & TFS_RAM_SKIP) {
		/* Start at the first block neither cached nor being filled. */
		for (; n > 0 && present(r, obj, first); first++, n--)
			;
	}
	/* Claim the leading blocks that are neither cached nor being filled,
	 * as far as the budget allows without waiting. */
	for (; k < n; k++) {
		uint64_t idx = first + k;
		size_t len = tfs_obj_block_len(obj, idx, l->block_size);
		struct tfs_ram_block *b = find(r, obj->id, idx);
		if (b && strcmp(b->etag, obj->etag) == 0)
			break;
		if (b)
			drop(r, b);
		if (r->used + cost(r, len) > r->cap)
			break;
		r->clock++;
		c->blocks[k] = start_fill(r, obj, idx, len);
		if (c->blocks[k] == NULL)
			break;
		c->blocks[k]->once = (flags & TFS_RAM_ONCE) != 0;
		c->blocks[k]->linger = (flags & TFS_RAM_LINGER) != 0;
		c->blocks[k]->pass = (flags & TFS_RAM_PASS) != 0;
	}
	pthread_mutex_unlock(&r->lock);
	if (k == 0) {
		claim_free(c);
		/* Nothing left to claim is not an error; no budget is. */
		return n == 0 ? 0 : EAGAIN;
	}
	c->first = first;
	c->n = k;
	*out = c;
	return 0;
}

uint64_t tfs_ram_claim_first(const struct tfs_ram_claim *c)
{
	return c->first;
}

unsigned tfs_ram_claim_len(const struct tfs_ram_claim *c)
{
	return c->n;
}

/* A block of a claim arrived whole: readers may have it before the rest,
 * and the claim lets go of it (the inner layer is done with its buffer). */
static void claim_block_done(void *ctx, int i)
{
	struct tfs_ram_claim *c = ctx;
	struct ram *r = c->r;
	struct tfs_ram_block *b = c->blocks[i];
	pthread_mutex_lock(&r->lock);
	end_fill(r, b, 0);
	if (--b->refs == 0 && !b->admitted)
		drop(r, b);
	pthread_mutex_unlock(&r->lock);
}

int tfs_ram_fill_claim(struct tfs_layer *l, struct tfs_ram_claim *c)
{
	struct ram *r = l->priv;
	void *bufs[TFS_MAX_RUN];
	for (unsigned i = 0; i < c->n; i++)
		bufs[i] = c->blocks[i]->data;
	/* Blocks become READY as they arrive (claim_block_done), which also
	 * releases them; the rest are settled here. */
	struct tfs_io_progress progress = { .done = claim_block_done,
					    .ctx = c,
					    .background = c->pass };
	int rc = tfs_layer_read_blocks(r->inner, &c->obj, c->first, c->n, bufs, &progress);

	pthread_mutex_lock(&r->lock);
	for (unsigned i = (unsigned)progress.ndone; i < c->n; i++) {
		struct tfs_ram_block *b = c->blocks[i];
		end_fill(r, b, rc);
		if (--b->refs == 0 && (rc || !b->admitted))
			drop(r, b);
	}
	pthread_mutex_unlock(&r->lock);
	claim_free(c);
	return rc;
}

void tfs_ram_cancel_claim(struct tfs_layer *l, struct tfs_ram_claim *c)
{
	struct ram *r = l->priv;
	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < c->n; i++) {
		struct tfs_ram_block *b = c->blocks[i];
		end_fill(r, b, ECANCELED); /* waiters fill it themselves */
		if (--b->refs == 0)
			drop(r, b);
	}
	pthread_mutex_unlock(&r->lock);
	claim_free(c);
}

int tfs_ram_fill_run(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first, unsigned n,
		     int flags, unsigned *filled)
{
	struct tfs_ram_claim *c;
	if (filled)
		*filled = 0;
	int rc = tfs_ram_claim_run(l, obj, first, n, flags & ~TFS_RAM_SKIP, &c);
	if (rc)
		return rc;
	if (filled)
		*filled = c->n;
	return tfs_ram_fill_claim(l, c);
}

void tfs_ram_release(struct tfs_layer *l, struct tfs_ram_block *b, bool consumed)
{
	struct ram *r = l->priv;
	pthread_mutex_lock(&r->lock);
	b->refs--;
	if (consumed && b->once && b->linger && b->admitted &&
	    r->cached <= (r->cap - r->reserve) / 2) {
		/* Read as a reader's own block would be: cached from now on. */
		b->once = false;
		r->kept++;
		lru_unlink(b);
		lru_push(r, b);
	} else if (consumed && b->once) {
		r->consumed++;
		drop(r, b); /* freed now, or by the last reference */
	} else if (b->refs == 0 && !b->admitted) {
		drop(r, b);
	}
	pthread_mutex_unlock(&r->lock);
}

void tfs_ram_put(struct tfs_layer *l, struct tfs_ram_block *b)
{
	tfs_ram_release(l, b, false);
}

bool tfs_ram_has(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx)
{
	struct ram *r = l->priv;
	pthread_mutex_lock(&r->lock);
	bool has = present(r, obj, idx);
	pthread_mutex_unlock(&r->lock);
	return has;
}

static int ram_read_block(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf)
{
	struct tfs_ram_block *b;
	int rc = tfs_ram_get(l, obj, idx, TFS_RAM_WAIT, &b);
	if (rc)
		return rc;
	memcpy(buf, b->data, b->len);
	tfs_ram_put(l, b);
	return 0;
}

static void ram_invalidate(struct tfs_layer *l, const uint8_t id[TFS_OBJ_ID_LEN])
{
	struct ram *r = l->priv;
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->nbuckets; i++) {
		struct tfs_ram_block *b = r->table[i];
		while (b) {
			struct tfs_ram_block *n = b->hnext;
			if (memcmp(b->id, id, TFS_OBJ_ID_LEN) == 0 && b->state == READY)
				drop(r, b);
			b = n;
		}
	}
	pthread_mutex_unlock(&r->lock);
	tfs_layer_invalidate(r->inner, id);
}

/* reserve for blocks in flight: a quarter of the budget, at least 8
 * blocks, at most half of it */
static uint64_t reserve_for(uint64_t size, uint64_t bs)
{
	uint64_t reserve = size / 4 > 8 * bs ? size / 4 : 8 * bs;
	return reserve > size / 2 ? size / 2 : reserve;
}

uint64_t tfs_ram_size(struct tfs_layer *l)
{
	struct ram *r = l->priv;
	pthread_mutex_lock(&r->lock);
	uint64_t cap = r->cap;
	pthread_mutex_unlock(&r->lock);
	return cap;
}

int tfs_ram_set_size(struct tfs_layer *l, uint64_t size)
{
	struct ram *r = l->priv;
	uint64_t bs = r->block_size;

	if (size < 4 * bs)
		return EINVAL;
	uint64_t reserve = reserve_for(size, bs);
	size_t pool_cap = (size_t)(reserve / bs);
	pthread_mutex_lock(&r->lock);
	if (pool_cap > r->pool_cap) {
		char **np = realloc(r->pool, pool_cap * sizeof(*np));
		if (np == NULL) {
			pthread_mutex_unlock(&r->lock);
			return ENOMEM;
		}
		r->pool = np;
	}
	uint64_t old = r->cap;
	r->cap = size;
	r->reserve = reserve;
	r->pool_cap = pool_cap ? pool_cap : 1;
	/* Shrink: cached blocks, oldest first and whatever the policy, then
	 * pooled buffers beyond the budget.  Blocks with references (readers, fills) stay
	 * until released; until then `used` may exceed the new cap and
	 * misses wait for budget as usual. */
	struct tfs_ram_block *v;
	while (r->cached > r->cap - r->reserve && (v = oldest_idle(r)) != NULL) {
		r->evictions++;
		drop(r, v);
	}
	while (r->npool > r->pool_cap || (r->npool && r->used + r->pooled > r->cap)) {
		release_buffer(r, r->pool[--r->npool], r->block_size);
		r->pooled -= r->block_size;
	}
	pthread_cond_broadcast(&r->budget); /* a grow frees waiters */
	pthread_mutex_unlock(&r->lock);
	tfs_info(r->log, "ram: size %" PRIu64 " -> %" PRIu64 " bytes", old, size);
	return 0;
}

/* The RAM tier's part of the stats ("ram"): also the head of the metric
 * families every tier feeds (tier="ram"; the SSD tier adds tier="ssd"). */
struct ram_snap {
	uint64_t hits, misses, hit_bytes, fill_bytes, evictions, not_admitted, budget_waits,
		fill_errors, used_bytes, cached_bytes, capacity_bytes, blocks, pooled_bytes,
		stream_consumed, background_yields, stream_kept;
	const char *policy;
};

#define ROW(f, ...) TFS_STAT(struct ram_snap, f, __VA_ARGS__)
#define TIER TFS_LABEL("tier", "ram")
static const struct tfs_statdef ram_rows[] = {
	ROW(hits, TFS_COUNTER, "tierfs_cache_hits_total", "Block reads served by the tier.", TIER),
	ROW(misses, TFS_COUNTER, "tierfs_cache_misses_total",
	    "Block reads the tier passed to the tier below.", TIER),
	ROW(hit_bytes, TFS_COUNTER, "tierfs_cache_hit_bytes_total", "Bytes served by the tier.",
	    TIER),
	ROW(fill_bytes, TFS_COUNTER, "tierfs_cache_fill_bytes_total",
	    "Bytes filled into the tier from below.", TIER),
	ROW(evictions, TFS_COUNTER, "tierfs_cache_evictions_total",
	    "Evictions (RAM: blocks; SSD: objects) to make room or to shrink the tier.", TIER),
	ROW(not_admitted, TFS_COUNTER, "tierfs_cache_not_admitted_total",
	    "Blocks served without being kept (admission policy, full tier).", TIER),
	ROW(budget_waits, TFS_COUNTER, "tierfs_ram_budget_waits_total",
	    "Reads that waited for RAM budget."),
	ROW(fill_errors, TFS_COUNTER, "tierfs_ram_fill_errors_total",
	    "RAM fills that failed (the read got the error)."),
	ROW(used_bytes, TFS_GAUGE, "tierfs_cache_used_bytes", "Bytes held by the tier.", TIER),
	ROW(cached_bytes, TFS_GAUGE, "tierfs_ram_cached_bytes",
	    "Bytes of cached (admitted) blocks in RAM."),
	ROW(capacity_bytes, TFS_GAUGE, "tierfs_cache_capacity_bytes",
	    "The tier's size (ram.size, ssd.size).", TIER),
	ROW(blocks, TFS_JSON_ONLY, NULL,
	    "cached blocks; tierfs_ram_cached_bytes counts their bytes"),
	ROW(pooled_bytes, TFS_JSON_ONLY, NULL, "a diagnostic of the buffer pool"),
	ROW(stream_consumed, TFS_JSON_ONLY, NULL, "a diagnostic of the streaming policy"),
	ROW(background_yields, TFS_COUNTER, "tierfs_ram_background_yields_total",
	    "Warm-up fetches held back while training reads waited for data."),
	ROW(stream_kept, TFS_JSON_ONLY, NULL, "a diagnostic of the streaming policy"),
	ROW(policy, TFS_JSON_ONLY, NULL, "a string: the policy (cache.policy)"),
};
#undef TIER
#undef ROW

const struct tfs_stattab tfs_ram_stattab = TFS_STATTAB("ram", ram_rows);

static void ram_stats(struct tfs_layer *l, struct json_object *out)
{
	struct ram *r = l->priv;
	struct ram_snap s;

	pthread_mutex_lock(&r->lock);
	s = (struct ram_snap){
		.hits = r->hits,
		.misses = r->misses,
		.hit_bytes = r->hit_bytes,
		.fill_bytes = r->fill_bytes,
		.evictions = r->evictions,
		.not_admitted = r->not_admitted,
		.budget_waits = r->waits,
		.fill_errors = r->fill_errors,
		.used_bytes = r->used,
		.cached_bytes = r->cached,
		.capacity_bytes = r->cap,
		.blocks = r->nblocks_cached,
		.pooled_bytes = r->pooled,
		.stream_consumed = r->consumed,
		.background_yields = r->yields,
		.stream_kept = r->kept,
		.policy = tfs_policy_name(r->policy),
	};
	pthread_mutex_unlock(&r->lock);
	(void)tfs_stat_add_section(out, &tfs_ram_stattab, &s);
	tfs_layer_stats(r->inner, out);
}

static void ram_destroy(struct tfs_layer *l)
{
	struct ram *r = l->priv;
	for (size_t i = 0; i < r->nbuckets; i++) {
		struct tfs_ram_block *b = r->table[i];
		while (b) {
			struct tfs_ram_block *n = b->hnext;
			if (b->len != r->block_size)
				free(b->data);
			free(b);
			b = n;
		}
	}
	free(r->pool); /* pooled buffers are the arena's */
	tfs_bufarena_destroy(&r->arena);
	tfs_layer_destroy(r->inner);
	pthread_mutex_destroy(&r->lock);
	for (size_t i = 0; i < FILL_SLOTS; i++)
		pthread_cond_destroy(&r->filled[i]);
	pthread_cond_destroy(&r->budget);
	pthread_cond_destroy(&r->fg_idle);
	free(r->table);
	free(r);
	free(l);
}

static const struct tfs_layer_ops ram_ops = {
	.name = "ram",
	.read_block = ram_read_block,
	.invalidate = ram_invalidate,
	.stats = ram_stats,
	.destroy = ram_destroy,
};

int tfs_ram_create(const struct tfs_ram_config *cfg, const struct tfs_cache_config *cc,
		   struct tfs_layer *inner, const struct tfs_log *log, struct tfs_layer **out)
{
	uint64_t bs = cc->block_size;
	if (cfg->size < 4 * bs) {
		tfs_err(log, "ram: ram.size must hold at least 4 blocks of cache.block_size");
		return EINVAL;
	}
	struct tfs_layer *l = calloc(1, sizeof(*l));
	struct ram *r = calloc(1, sizeof(*r));
	if (l == NULL || r == NULL) {
		free(l);
		free(r);
		return ENOMEM;
	}
	r->inner = inner;
	r->log = log;
	r->policy = cc->policy;
	r->cap = cfg->size;
	r->reserve = reserve_for(cfg->size, bs);
	uint64_t nblocks = cfg->size / bs;
	r->nbuckets = 64;
	while (r->nbuckets < 2 * nblocks)
		r->nbuckets *= 2;
	r->table = calloc(r->nbuckets, sizeof(*r->table));
	if (r->table == NULL) {
		free(r);
		free(l);
		return ENOMEM;
	}
	r->block_size = bs;
	tfs_bufarena_init(&r->arena, (size_t)bs);
	r->pool_cap = (size_t)(r->reserve / bs);
	r->pool = calloc(r->pool_cap ? r->pool_cap : 1, sizeof(*r->pool));
	if (r->pool == NULL) {
		free(r->table);
		free(r);
		free(l);
		return ENOMEM;
	}
	r->lru.next = r->lru.prev = &r->lru;
	pthread_mutex_init(&r->lock, NULL);
	for (size_t i = 0; i < FILL_SLOTS; i++)
		pthread_cond_init(&r->filled[i], NULL);
	pthread_cond_init(&r->budget, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->fg_idle, &ca);
	pthread_condattr_destroy(&ca);
	l->ops = &ram_ops;
	l->priv = r;
	l->inner = inner;
	l->block_size = bs;
	*out = l;
	return 0;
}
