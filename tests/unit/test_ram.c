/* test_ram.c - the RAM tier: hits, shared fills, the byte budget, version
 * checks and errors, over a fake inner layer. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_layer.h"
#include "ram.h"

#define BS (64u * 1024u)

static struct fake_layer fake;
static struct tfs_layer *ram;
static struct tfs_log tlog;

static void make_ram(uint64_t blocks, enum tfs_policy policy)
{
	memset(&fake, 0, sizeof(fake));
	tfs_log_init_stderr(&tlog, TFS_LOG_WARN);
	struct tfs_ram_config rc = { .size = blocks * BS };
	struct tfs_cache_config cc = { .block_size = BS, .policy = policy };
	cr_assert_eq(tfs_ram_create(&rc, &cc, fake_layer_create(&fake, BS), &tlog, &ram), 0);
}

static void teardown(void)
{
	tfs_layer_destroy(ram);
	ram = NULL;
}

static uint64_t stat_of(const char *name)
{
	struct json_object *o = json_object_new_object(), *r, *v;
	tfs_layer_stats(ram, o);
	cr_assert(json_object_object_get_ex(o, "ram", &r));
	cr_assert(json_object_object_get_ex(r, name, &v), "no stat %s", name);
	uint64_t x = json_object_get_uint64(v);
	json_object_put(o);
	return x;
}

static void check_block(const struct tfs_obj *obj, uint64_t idx, struct tfs_ram_block *b)
{
	const unsigned char *p = tfs_ram_block_data(b);
	size_t len = tfs_ram_block_len(b);
	cr_assert_eq(len, tfs_obj_block_len(obj, idx, BS));
	for (size_t i = 0; i < len; i += 997)
		cr_assert_eq(p[i], fake_byte(obj->key, obj->etag, idx * BS + i), "byte %zu", i);
}

TestSuite(ram, .fini = teardown, .timeout = 30);

Test(ram, miss_then_hit)
{
	make_ram(64, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "a/b.jpg", "\"e1\"", 3 * BS + 100);
	struct tfs_ram_block *b;
	for (int round = 0; round < 2; round++) {
		for (uint64_t i = 0; i < 4; i++) {
			cr_assert_eq(tfs_ram_get(ram, &obj, i, TFS_RAM_WAIT, &b), 0);
			check_block(&obj, i, b);
			tfs_ram_put(ram, b);
		}
	}
	cr_assert_eq(atomic_load(&fake.calls), 4);
	cr_assert_eq(stat_of("hits"), 4);
	cr_assert_eq(stat_of("misses"), 4);
	cr_assert_eq(tfs_ram_get(ram, &obj, 4, TFS_RAM_WAIT, &b), EINVAL, "a block past the end");
}

static struct tfs_obj shared_obj;

static void *reader(void *arg)
{
	struct tfs_ram_block *b;
	(void)arg;
	if (tfs_ram_get(ram, &shared_obj, 0, TFS_RAM_WAIT, &b) != 0)
		return (void *)1;
	tfs_ram_put(ram, b);
	return NULL;
}

Test(ram, concurrent_readers_share_one_fill)
{
	make_ram(64, TFS_POLICY_LRU);
	atomic_store(&fake.delay_ms, 200);
	tfs_obj_init(&shared_obj, "shared", "\"x\"", BS);
	pthread_t t[16];
	for (int i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, reader, NULL);
	for (int i = 0; i < 16; i++) {
		void *res;
		pthread_join(t[i], &res);
		cr_assert_null(res);
	}
	cr_assert_eq(atomic_load(&fake.calls), 1, "%d fills for one block",
		     atomic_load(&fake.calls));
}

struct walker {
	int id;
	int err;
};

static void *walk(void *arg)
{
	struct walker *w = arg;
	char key[32];
	snprintf(key, sizeof(key), "file-%d", w->id);
	struct tfs_obj obj;
	tfs_obj_init(&obj, key, "\"e\"", 20 * BS);
	for (uint64_t i = 0; i < 20; i++) {
		struct tfs_ram_block *b;
		int rc = tfs_ram_get(ram, &obj, i, TFS_RAM_WAIT, &b);
		if (rc) {
			w->err = rc;
			return NULL;
		}
		if (((const unsigned char *)tfs_ram_block_data(b))[5] !=
		    fake_byte(key, "\"e\"", i * BS + 5))
			w->err = EIO;
		tfs_ram_put(ram, b);
	}
	return NULL;
}

Test(ram, budget_holds_under_many_readers)
{
	make_ram(16, TFS_POLICY_LRU);
	atomic_store(&fake.delay_ms, 2);
	pthread_t t[32];
	struct walker w[32];
	for (int i = 0; i < 32; i++) {
		w[i] = (struct walker){ .id = i };
		pthread_create(&t[i], NULL, walk, &w[i]);
	}
	for (int i = 0; i < 32; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(w[i].err, 0);
	}
	/* Every buffer in flight is one fill in the fake layer. */
	cr_assert_leq(atomic_load(&fake.max_in_flight), 16,
		      "%d buffers in flight for a budget of 16", atomic_load(&fake.max_in_flight));
	cr_assert_leq(stat_of("used_bytes"), 16 * BS);
	cr_assert_leq(stat_of("cached_bytes"), 12 * BS, "cached beyond its share");
}

Test(ram, nowait_gives_eagain_when_the_budget_is_held)
{
	make_ram(8, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "big", "\"e\"", 16 * BS);
	struct tfs_ram_block *held[8];
	for (int i = 0; i < 8; i++)
		cr_assert_eq(tfs_ram_get(ram, &obj, (uint64_t)i, TFS_RAM_WAIT, &held[i]), 0);
	struct tfs_ram_block *b;
	cr_assert_eq(tfs_ram_get(ram, &obj, 9, TFS_RAM_NOWAIT, &b), EAGAIN);
	for (int i = 0; i < 8; i++)
		tfs_ram_put(ram, held[i]);
	cr_assert_eq(tfs_ram_get(ram, &obj, 9, TFS_RAM_NOWAIT, &b), 0);
	tfs_ram_put(ram, b);
}

Test(ram, prefetch_run_is_one_inner_request)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "shard", "\"e\"", 10 * BS + 5);
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 2, 4, 0, NULL), 0);
	cr_assert_eq(atomic_load(&fake.multi_calls), 1);
	struct tfs_ram_block *b;
	for (uint64_t i = 2; i < 6; i++) {
		cr_assert_eq(tfs_ram_get(ram, &obj, i, TFS_RAM_WAIT, &b), 0);
		check_block(&obj, i, b);
		tfs_ram_put(ram, b);
	}
	cr_assert_eq(atomic_load(&fake.calls), 0, "the run's blocks must hit");
	/* A run whose first block is present does nothing. */
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 3, 4, 0, NULL), EAGAIN);
	/* A run stops at the first present block: 0..1 only. */
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 0, 8, 0, NULL), 0);
	cr_assert(tfs_ram_has(ram, &obj, 0) && tfs_ram_has(ram, &obj, 1));
	cr_assert_eq(atomic_load(&fake.multi_calls), 2);
	/* Errors cache nothing. */
	atomic_store(&fake.fail_with, EIO);
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 7, 3, 0, NULL), EIO);
	cr_assert(!tfs_ram_has(ram, &obj, 7));
	atomic_store(&fake.fail_with, 0);
}

static void *run_0_4(void *arg)
{
	const struct tfs_obj *obj = arg;
	return (void *)(intptr_t)tfs_ram_fill_run(ram, obj, 0, 4, TFS_RAM_ONCE, NULL);
}

Test(ram, run_blocks_are_served_as_they_arrive)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "stream", "\"e\"", 8 * BS);
	/* The inner layer reports block 0, then stalls: a reader of block 0
	 * gets it without waiting for the rest of the run. */
	atomic_store(&fake.gate, 1);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, run_0_4, &obj), 0);
	while (!atomic_load(&fake.at_gate))
		sched_yield();
	struct tfs_ram_block *b;
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
	check_block(&obj, 0, b);
	cr_assert_eq(atomic_load(&fake.at_gate), 1, "the run must still be in progress");
	tfs_ram_release(ram, b, true);
	atomic_store(&fake.gate, 0);
	void *rc;
	pthread_join(t, &rc);
	cr_assert_eq((intptr_t)rc, 0);
	for (uint64_t i = 1; i < 4; i++) {
		cr_assert_eq(tfs_ram_get(ram, &obj, i, TFS_RAM_WAIT, &b), 0);
		check_block(&obj, i, b);
		tfs_ram_release(ram, b, true);
	}
	cr_assert_eq(atomic_load(&fake.calls), 0, "served from the run, not refetched");
	cr_assert_eq(stat_of("used_bytes"), 0, "every streamed block freed once read");
}

Test(ram, a_run_cut_short_keeps_the_blocks_that_came_whole)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "cut", "\"e\"", 8 * BS);
	atomic_store(&fake.fail_with, EIO);
	atomic_store(&fake.fail_after, 2);
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 0, 5, 0, NULL), EIO);
	atomic_store(&fake.fail_with, 0);
	cr_assert(tfs_ram_has(ram, &obj, 0) && tfs_ram_has(ram, &obj, 1));
	for (uint64_t i = 2; i < 5; i++)
		cr_assert(!tfs_ram_has(ram, &obj, i), "block %d of a failed run is cached", (int)i);
	struct tfs_ram_block *b;
	for (uint64_t i = 0; i < 2; i++) {
		cr_assert_eq(tfs_ram_get(ram, &obj, i, TFS_RAM_WAIT, &b), 0);
		check_block(&obj, i, b);
		tfs_ram_put(ram, b);
	}
	cr_assert_eq(atomic_load(&fake.calls), 0, "the whole blocks are not fetched again");
	cr_assert_eq(stat_of("used_bytes"), 2 * BS);
}

/* A reader on its own thread: gets block idx (with flags) and checks it. */
struct get_arg {
	const struct tfs_obj *obj;
	uint64_t idx;
	int flags;
	int rc;
	bool ok;
};

static void *get_one(void *arg)
{
	struct get_arg *a = arg;
	struct tfs_ram_block *b;
	a->rc = tfs_ram_get(ram, a->obj, a->idx, a->flags, &b);
	if (a->rc == 0) {
		const unsigned char *d = tfs_ram_block_data(b);
		a->ok = true;
		for (size_t i = 0; i < tfs_ram_block_len(b); i++)
			a->ok &= d[i] == fake_byte(a->obj->key, a->obj->etag, a->idx * BS + i);
		tfs_ram_put(ram, b);
	}
	return NULL;
}

Test(ram, claimed_blocks_are_waited_for_not_fetched_again)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "claim", "\"e\"", 8 * BS);
	struct tfs_ram_claim *c;
	cr_assert_eq(tfs_ram_claim_run(ram, &obj, 0, 4, TFS_RAM_ONCE, &c), 0);
	cr_assert_not_null(c);
	cr_assert_eq(tfs_ram_claim_first(c), 0);
	cr_assert_eq(tfs_ram_claim_len(c), 4);
	/* A reader of a claimed block waits for the claim's fill. */
	struct get_arg a = { .obj = &obj, .idx = 2 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, get_one, &a), 0);
	cr_assert_eq(tfs_ram_fill_claim(ram, c), 0);
	pthread_join(t, NULL);
	cr_assert_eq(a.rc, 0);
	cr_assert(a.ok);
	cr_assert_eq(atomic_load(&fake.calls), 0, "a claimed block was fetched twice");
	cr_assert_eq(atomic_load(&fake.multi_calls), 1);
	/* SKIP starts after the blocks present (0..3) and stops at the next
	 * present one (6). */
	struct tfs_ram_block *b;
	cr_assert_eq(tfs_ram_get(ram, &obj, 6, TFS_RAM_WAIT, &b), 0);
	tfs_ram_put(ram, b);
	cr_assert_eq(tfs_ram_claim_run(ram, &obj, 0, 8, TFS_RAM_SKIP, &c), 0);
	cr_assert_not_null(c);
	cr_assert_eq(tfs_ram_claim_first(c), 4);
	cr_assert_eq(tfs_ram_claim_len(c), 2, "a claim stops at the next present block");
	tfs_ram_cancel_claim(ram, c);
	/* Without SKIP a present first block claims nothing. */
	cr_assert_eq(tfs_ram_claim_run(ram, &obj, 0, 4, 0, &c), EAGAIN);
	cr_assert_null(c);
	/* Every block present: nothing to do, and no error. */
	cr_assert_eq(tfs_ram_claim_run(ram, &obj, 0, 4, TFS_RAM_SKIP, &c), 0);
	cr_assert_null(c);
}

Test(ram, a_cancelled_claim_is_fetched_by_its_reader)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "cancel", "\"e\"", 8 * BS);
	struct tfs_ram_claim *c;
	cr_assert_eq(tfs_ram_claim_run(ram, &obj, 4, 3, 0, &c), 0);
	struct get_arg a = { .obj = &obj, .idx = 5 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, get_one, &a), 0);
	tfs_ram_cancel_claim(ram, c);
	pthread_join(t, NULL);
	cr_assert_eq(a.rc, 0, "a cancelled claim must not fail its reader");
	cr_assert(a.ok);
	cr_assert_eq(atomic_load(&fake.calls), 1, "the reader fetched block 5 itself");
	cr_assert_eq(stat_of("fill_errors"), 0);
	cr_assert(!tfs_ram_has(ram, &obj, 4) && !tfs_ram_has(ram, &obj, 6));
	cr_assert_eq(stat_of("used_bytes"), 1 * BS, "only block 5 is held");
}

/* Start a reader of block idx whose fetch takes delay_ms; returns once
 * the fetch is under way. */
static pthread_t slow_reader(struct get_arg *a, int delay_ms)
{
	pthread_t t;
	atomic_store(&fake.delay_ms, delay_ms);
	cr_assert_eq(pthread_create(&t, NULL, get_one, a), 0);
	while (atomic_load(&fake.in_flight) == 0)
		sched_yield();
	return t;
}

Test(ram, background_fetches_yield_to_readers_waiting_for_data)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "yield", "\"e\"", 8 * BS);
	cr_assert(!tfs_ram_yield(ram, 1000), "nothing to yield to");
	/* A reader's miss takes 300 ms: a yield waits for it to finish. */
	struct get_arg a = { .obj = &obj, .idx = 0, .flags = TFS_RAM_WAIT };
	pthread_t t = slow_reader(&a, 300);
	cr_assert(tfs_ram_yield(ram, 10000));
	cr_assert_eq(atomic_load(&fake.in_flight), 0, "returned while the reader still waited");
	pthread_join(t, NULL);
	/* ... but no longer than max_ms. */
	a.idx = 1;
	t = slow_reader(&a, 2000);
	cr_assert(tfs_ram_yield(ram, 50));
	cr_assert_eq(atomic_load(&fake.in_flight), 1, "the yield outlasted max_ms");
	pthread_join(t, NULL);
	/* A background get is not a reader to yield to. */
	struct get_arg bg = { .obj = &obj, .idx = 2, .flags = TFS_RAM_WAIT | TFS_RAM_BACKGROUND };
	t = slow_reader(&bg, 300);
	cr_assert(!tfs_ram_yield(ram, 10000));
	pthread_join(t, NULL);
	cr_assert_eq(stat_of("background_yields"), 2);
}

/* The sampler's prefetch: a block read as prefetched stays cached, as the
 * reader's own fetch would have, while the cache has room to spare. */
Test(ram, lingering_readahead_is_kept_while_there_is_room)
{
	make_ram(32, TFS_POLICY_LRU); /* cached share 24 blocks: keep up to 12 */
	struct tfs_obj obj;
	tfs_obj_init(&obj, "sampled", "\"e\"", 16 * BS);
	int flags = TFS_RAM_ONCE | TFS_RAM_LINGER;
	struct tfs_ram_block *b;
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 0, 8, flags, NULL), 0);
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
	tfs_ram_release(ram, b, true);
	cr_assert(tfs_ram_has(ram, &obj, 0), "kept: 8 blocks cached of 24");
	cr_assert_eq(stat_of("stream_kept"), 1);
	/* Kept for good: a second consuming read does not drop it. */
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
	check_block(&obj, 0, b);
	tfs_ram_release(ram, b, true);
	cr_assert(tfs_ram_has(ram, &obj, 0));
	/* Past half the share, a consumed block makes room again. */
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 8, 8, flags, NULL), 0);
	cr_assert_eq(tfs_ram_get(ram, &obj, 8, TFS_RAM_WAIT, &b), 0);
	tfs_ram_release(ram, b, true);
	cr_assert(!tfs_ram_has(ram, &obj, 8), "16 blocks cached: dropped");
	cr_assert_eq(stat_of("stream_kept"), 1);
	cr_assert_eq(stat_of("stream_consumed"), 1);
	cr_assert_eq(atomic_load(&fake.calls), 0, "served from the runs, not refetched");
}

Test(ram, prefetch_run_never_waits_for_budget)
{
	make_ram(8, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "big", "\"e\"", 16 * BS);
	struct tfs_ram_block *held[8];
	for (int i = 0; i < 8; i++)
		cr_assert_eq(tfs_ram_get(ram, &obj, (uint64_t)i, TFS_RAM_WAIT, &held[i]), 0);
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 8, 4, 0, NULL), EAGAIN);
	for (int i = 0; i < 8; i++)
		tfs_ram_put(ram, held[i]);
}

Test(ram, streamed_readahead_is_dropped_once_consumed)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "stream", "\"e\"", 8 * BS);
	cr_assert_eq(tfs_ram_fill_run(ram, &obj, 0, 4, TFS_RAM_ONCE, NULL), 0);
	struct tfs_ram_block *b, *b2;
	/* A read that stops inside the block keeps it. */
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
	check_block(&obj, 0, b);
	tfs_ram_release(ram, b, false);
	cr_assert(tfs_ram_has(ram, &obj, 0));
	/* Reading to its end drops it, but a second holder's data stays valid. */
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b2), 0);
	tfs_ram_release(ram, b, true);
	cr_assert(!tfs_ram_has(ram, &obj, 0));
	check_block(&obj, 0, b2);
	tfs_ram_put(ram, b2);
	cr_assert_eq(stat_of("stream_consumed"), 1);
	cr_assert_eq(atomic_load(&fake.calls), 0, "served from the run, not refetched");
	/* Ordinary blocks stay cached after a consuming read. */
	cr_assert_eq(tfs_ram_get(ram, &obj, 6, TFS_RAM_WAIT, &b), 0);
	tfs_ram_release(ram, b, true);
	cr_assert(tfs_ram_has(ram, &obj, 6));
	/* Everything dropped went back to the budget. */
	cr_assert_eq(stat_of("used_bytes"), 4 * BS);
}

Test(ram, another_etag_is_never_served)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj v1, v2;
	tfs_obj_init(&v1, "k", "\"v1\"", BS);
	tfs_obj_init(&v2, "k", "\"v2\"", BS);
	struct tfs_ram_block *b;
	cr_assert_eq(tfs_ram_get(ram, &v1, 0, TFS_RAM_WAIT, &b), 0);
	tfs_ram_put(ram, b);
	cr_assert_eq(tfs_ram_get(ram, &v2, 0, TFS_RAM_WAIT, &b), 0);
	check_block(&v2, 0, b);
	tfs_ram_put(ram, b);
	cr_assert_eq(atomic_load(&fake.calls), 2);
	cr_assert(!tfs_ram_has(ram, &v1, 0));
}

Test(ram, invalidate_drops_and_passes_down)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "k", "\"v1\"", BS);
	struct tfs_ram_block *b;
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
	tfs_ram_put(ram, b);
	cr_assert(tfs_ram_has(ram, &obj, 0));
	tfs_layer_invalidate(ram, obj.id);
	cr_assert(!tfs_ram_has(ram, &obj, 0));
	cr_assert_eq(atomic_load(&fake.invalidations), 1);
}

Test(ram, errors_are_returned_and_not_cached)
{
	make_ram(16, TFS_POLICY_LRU);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "k", "\"v1\"", BS);
	struct tfs_ram_block *b;
	atomic_store(&fake.fail_with, EIO);
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), EIO);
	atomic_store(&fake.fail_with, 0);
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
	tfs_ram_put(ram, b);
	cr_assert_eq(atomic_load(&fake.calls), 2);
	cr_assert_eq(stat_of("fill_errors"), 1);
	cr_assert_eq(stat_of("used_bytes"), BS);
}

Test(ram, epoch_policy_keeps_a_stable_set)
{
	/* 12 cached blocks' worth (16 minus the in-flight reserve of 4... at
	 * least 8 blocks: 8 here), 24 distinct blocks read in shuffled epochs. */
	make_ram(16, TFS_POLICY_EPOCH);
	struct tfs_obj objs[24];
	char keys[24][16];
	for (int i = 0; i < 24; i++) {
		snprintf(keys[i], sizeof(keys[i]), "img%d", i);
		tfs_obj_init(&objs[i], keys[i], "\"e\"", BS);
	}
	unsigned seed = 1;
	int order[24];
	for (int i = 0; i < 24; i++)
		order[i] = i;
	uint64_t hits_before = 0;
	for (int e = 0; e < 6; e++) {
		for (int i = 23; i > 0; i--) {
			int j = rand_r(&seed) % (i + 1), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		if (e == 1)
			hits_before = stat_of("hits");
		for (int i = 0; i < 24; i++) {
			struct tfs_ram_block *b;
			cr_assert_eq(tfs_ram_get(ram, &objs[order[i]], 0, TFS_RAM_WAIT, &b), 0);
			tfs_ram_put(ram, b);
		}
	}
	uint64_t hits = stat_of("hits") - hits_before;
	uint64_t cached = stat_of("blocks");
	/* From epoch 2 on every cached block hits once per epoch. */
	cr_assert_geq(hits, (uint64_t)(0.95 * 5 * (double)cached), "hits %lu, cached %lu",
		      (unsigned long)hits, (unsigned long)cached);
	cr_assert_eq(stat_of("evictions"), 0);
}

/* Reload: a smaller budget evicts cached blocks at once (whatever the
 * policy), a larger one is used; blocks held stay valid. */
Test(ram, set_size_shrinks_and_grows)
{
	make_ram(64, TFS_POLICY_EPOCH);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "resize", "\"e1\"", 40 * BS);
	struct tfs_ram_block *b, *held;
	cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &held), 0);
	for (uint64_t i = 1; i < 40; i++) {
		cr_assert_eq(tfs_ram_get(ram, &obj, i, TFS_RAM_WAIT, &b), 0);
		tfs_ram_put(ram, b);
	}
	cr_assert_geq(stat_of("cached_bytes"), 30 * BS);
	cr_assert_eq(tfs_ram_set_size(ram, 3 * BS), EINVAL, "below 4 blocks");
	cr_assert_eq(stat_of("capacity_bytes"), 64 * BS, "a refused size changes nothing");

	cr_assert_eq(tfs_ram_set_size(ram, 16 * BS), 0);
	cr_assert_eq(stat_of("capacity_bytes"), 16 * BS);
	/* cached <= cap - reserve (8 blocks), pool and cache within the cap */
	cr_assert_leq(stat_of("cached_bytes"), 8 * BS);
	cr_assert_leq(stat_of("used_bytes") + stat_of("pooled_bytes"), 16 * BS);
	cr_assert_gt(stat_of("evictions"), 0);
	check_block(&obj, 0, held); /* a held block survives the shrink */
	tfs_ram_put(ram, held);

	cr_assert_eq(tfs_ram_set_size(ram, 128 * BS), 0);
	for (uint64_t i = 0; i < 40; i++) {
		cr_assert_eq(tfs_ram_get(ram, &obj, i, TFS_RAM_WAIT, &b), 0);
		check_block(&obj, i, b);
		tfs_ram_put(ram, b);
	}
	cr_assert_geq(stat_of("cached_bytes"), 40 * BS, "the larger budget holds all");
}

Test(ram, a_short_block_counts_its_heap_footprint)
{
	/* A 4 KiB file takes a page-aligned buffer: its page plus up to a
	 * page posix_memalign() spends aligning it.  The budget counts both,
	 * so many small files cannot hold twice ram.size. */
	make_ram(4, TFS_POLICY_LRU);
	struct tfs_obj obj;
	char key[32];
	struct tfs_ram_block *b;
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "small/%d", i);
		tfs_obj_init(&obj, key, "\"e1\"", 4096);
		cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
		cr_assert_eq(tfs_ram_block_len(b), 4096);
		tfs_ram_put(ram, b);
	}
	cr_assert_eq(stat_of("used_bytes"), 3 * 2 * 4096);
	cr_assert_eq(stat_of("cached_bytes"), 3 * 2 * 4096);
	/* 4 blocks of 64 KiB hold at most 32 such files, not 64. */
	for (int i = 3; i < 100; i++) {
		snprintf(key, sizeof(key), "small/%d", i);
		tfs_obj_init(&obj, key, "\"e1\"", 4096);
		cr_assert_eq(tfs_ram_get(ram, &obj, 0, TFS_RAM_WAIT, &b), 0);
		tfs_ram_put(ram, b);
	}
	cr_assert_leq(stat_of("used_bytes"), 4 * BS);
	cr_assert_leq(stat_of("blocks"), 4 * BS / (2 * 4096));
}
