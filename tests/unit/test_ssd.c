/* test_ssd.c - the SSD tier and the LMDB environment: hits and misses,
 * versions, corruption, restart and crash recovery, watermark eviction
 * under lru and epoch, pinning during reads, file layout and modes, a
 * full disk, the network-filesystem check and the statistics. */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fake_layer.h"
#include "layer.h"
#include "lmdb_env.h"
#include "log.h"
#include "ssd.h"

#define BS (64 * 1024)
#define MAP_SIZE (64ull << 20)

/* ---- log capture ---- */

struct logcap {
	pthread_mutex_t mu;
	int warns, full_lines, corrupt_lines;
	atomic_int swept_lines; /* "removed N data files": the sweep ended */
	char last[1024];
};

static void cap_sink(void *ctx, enum tfs_log_level level, const char *line)
{
	struct logcap *c = ctx;
	pthread_mutex_lock(&c->mu);
	if (level <= TFS_LOG_WARN) {
		c->warns++;
		snprintf(c->last, sizeof(c->last), "%s", line);
		fprintf(stderr, "[log] %s\n", line);
	}
	if (strstr(line, "SSD tier full"))
		c->full_lines++;
	if (strstr(line, "dropped the cached copy"))
		c->corrupt_lines++;
	if (strstr(line, "data files that had no index record"))
		atomic_fetch_add(&c->swept_lines, 1);
	pthread_mutex_unlock(&c->mu);
}

/* ---- a tier in a temporary directory ---- */

struct t {
	char root[64];   /* the temporary directory */
	char dir[128];   /* cfg.dir = root/ssd */
	char index[128]; /* LMDB = root/index */
	struct tfs_ssd_config cfg;
	struct tfs_cache_config cc;
	struct tfs_log log;
	struct logcap cap;
	struct fake_layer fk;
	MDB_env *env;
	struct tfs_layer *ssd;
};

static void t_init(struct t *t, enum tfs_policy policy, uint64_t size)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->root, sizeof(t->root), "/tmp/tfs-ssd-XXXXXX");
	cr_assert_not_null(mkdtemp(t->root));
	snprintf(t->dir, sizeof(t->dir), "%s/ssd", t->root);
	snprintf(t->index, sizeof(t->index), "%s/index", t->root);
	t->cfg.dir = t->dir;
	t->cfg.size = size;
	t->cfg.high_watermark = 90;
	t->cfg.low_watermark = 50;
	t->cfg.direct_io = true; /* the default */
	t->cc.block_size = BS;
	t->cc.policy = policy;
	pthread_mutex_init(&t->cap.mu, NULL);
	tfs_log_init(&t->log, cap_sink, &t->cap, TFS_LOG_INFO);
}

static void t_open(struct t *t)
{
	struct tfs_layer *inner = fake_layer_create(&t->fk, BS);
	cr_assert_eq(tfs_lmdb_open(t->index, MAP_SIZE, &t->log, &t->env), 0);
	cr_assert_eq(tfs_ssd_create(&t->cfg, &t->cc, t->env, inner, &t->log, &t->ssd), 0);
}

static void t_close(struct t *t)
{
	tfs_layer_destroy(t->ssd);
	t->ssd = NULL;
	tfs_lmdb_close(t->env);
	t->env = NULL;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void t_fini(struct t *t)
{
	if (t->ssd)
		t_close(t);
	nftw(t->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static uint64_t obj_size(int blocks)
{
	return (uint64_t)blocks * BS;
}

/* Read block idx of (key, etag, size) and check every byte. */
static void rd(struct t *t, const char *key, const char *etag, uint64_t size, uint64_t idx)
{
	struct tfs_obj obj;
	tfs_obj_init(&obj, key, etag, size);
	size_t len = tfs_obj_block_len(&obj, idx, BS);
	unsigned char *buf = malloc(BS), *want = malloc(BS);
	fake_fill(key, etag, idx * BS, want, len);
	memset(buf, 0xEE, BS);
	cr_assert_eq(tfs_layer_read_block(t->ssd, &obj, idx, buf), 0, "%s block %lu", key,
		     (unsigned long)idx);
	cr_assert(memcmp(buf, want, len) == 0, "%s block %lu: wrong bytes", key,
		  (unsigned long)idx);
	free(buf);
	free(want);
}

static void rd_all(struct t *t, const char *key, const char *etag, uint64_t size)
{
	for (uint64_t i = 0; i * BS < size; i++)
		rd(t, key, etag, size, i);
}

static uint64_t st_get(struct t *t, const char *name)
{
	struct json_object *o = json_object_new_object(), *ssd, *v;
	tfs_layer_stats(t->ssd, o);
	cr_assert(json_object_object_get_ex(o, "ssd", &ssd));
	cr_assert(json_object_object_get_ex(ssd, name, &v), "no stat %s", name);
	uint64_t r = json_object_get_uint64(v);
	json_object_put(o);
	return r;
}

static void data_path(struct t *t, const char *key, char *out, size_t n)
{
	struct tfs_obj obj;
	char hex[65];
	tfs_obj_init(&obj, key, "x", 1);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", obj.id[i]);
	snprintf(out, n, "%s/data/%.2s/%s", t->dir, hex, hex);
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static bool file_of(struct t *t, const char *key)
{
	char p[256];
	data_path(t, key, p, sizeof(p));
	return exists(p);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Poll until stat `name` <= `max` (deadline 10 s). */
/* Poll stat `name` until it is at most max (ge false) or at least it
 * (ge true), for 10 s at most. */
static bool wait_stat(struct t *t, const char *name, uint64_t v, bool ge)
{
	uint64_t end = now_ms() + 10000;
	while (now_ms() < end) {
		uint64_t x = st_get(t, name);
		if (ge ? x >= v : x <= v)
			return true;
		usleep(2000);
	}
	return false;
}

static bool wait_le(struct t *t, const char *name, uint64_t max)
{
	return wait_stat(t, name, max, false);
}

static void key_of(char *buf, size_t n, const char *pfx, int i)
{
	snprintf(buf, n, "%s%02d", pfx, i);
}

/* ---- tests ---- */

/* One suite-wide timeout: per-test .timeout makes Criterion 2.4's parallel
 * runner leak its timeout requests, which fails the LeakSanitizer run. */
TestSuite(ssd, .timeout = 60);

Test(ssd, miss_then_hit)
{
	struct t t;
	uint64_t size = 3 * BS + 1000; /* last block short */
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, "train/a.jpg", "\"e1\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 4);
	rd_all(&t, "train/a.jpg", "\"e1\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 4, "second read must hit");
	cr_assert_eq(st_get(&t, "hits"), 4);
	cr_assert_eq(st_get(&t, "misses"), 4);
	cr_assert_eq(st_get(&t, "hit_bytes"), size);
	cr_assert_eq(st_get(&t, "fill_bytes"), size);
	cr_assert_eq(st_get(&t, "used_bytes"), size);
	cr_assert_eq(st_get(&t, "objects"), 1);
	t_fini(&t);
}

Test(ssd, cold_run_is_one_inner_request)
{
	struct t t;
	uint64_t size = 5 * BS + 77;
	unsigned char *bufs[4];
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "shard.tar", "\"r1\"", size);
	for (int i = 0; i < 4; i++)
		bufs[i] = malloc(BS);
	/* Blocks 2..5, nothing cached: one read_blocks below, all cached. */
	cr_assert_eq(tfs_layer_read_blocks(t.ssd, &obj, 2, 4, (void *const *)bufs, NULL), 0);
	cr_assert_eq(atomic_load(&t.fk.multi_calls), 1);
	cr_assert_eq(atomic_load(&t.fk.calls), 0);
	unsigned char *want = malloc(BS);
	for (int i = 0; i < 4; i++) {
		size_t len = tfs_obj_block_len(&obj, 2 + (uint64_t)i, BS);
		fake_fill("shard.tar", "\"r1\"", (2 + (uint64_t)i) * BS, want, len);
		cr_assert_eq(memcmp(bufs[i], want, len), 0, "block %d", 2 + i);
	}
	cr_assert_eq(st_get(&t, "fill_bytes"), 3 * BS + 77);
	rd(&t, "shard.tar", "\"r1\"", size, 3);
	cr_assert_eq(atomic_load(&t.fk.calls), 0, "a block of the run must hit");
	/* A run that overlaps cached blocks goes block by block: 0 and 1 are
	 * fetched singly, 2 is served from the tier. */
	cr_assert_eq(tfs_layer_read_blocks(t.ssd, &obj, 0, 3, (void *const *)bufs, NULL), 0);
	cr_assert_eq(atomic_load(&t.fk.multi_calls), 1);
	cr_assert_eq(atomic_load(&t.fk.calls), 2);
	for (int i = 0; i < 4; i++)
		free(bufs[i]);
	free(want);
	t_fini(&t);
}

/* A written full-block copy's buffer is kept for the next copy: the
 * second object's three full blocks reuse the first one's three. */
/* Holds the index's writer lock, so the fill threads wait, until told. */
struct writer_hold {
	MDB_env *env;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool holding, release;
};

static void *hold_writer(void *p)
{
	struct writer_hold *h = p;
	MDB_txn *txn;
	cr_assert_eq(mdb_txn_begin(h->env, NULL, 0, &txn), 0);
	pthread_mutex_lock(&h->mu);
	h->holding = true;
	pthread_cond_broadcast(&h->cv);
	while (!h->release)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
	mdb_txn_abort(txn);
	return NULL;
}

Test(ssd, fill_queue_reuses_written_buffers)
{
	struct t t;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t.cfg.fill_queue = 8ull << 20;
	t_open(&t);
	/* No fill may finish while q/a is queued, or its buffer would be
	 * reused at once: hold the index's writer lock meanwhile. */
	struct writer_hold h = { .env = t.env };
	pthread_t th;
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.cv, NULL);
	cr_assert_eq(pthread_create(&th, NULL, hold_writer, &h), 0);
	pthread_mutex_lock(&h.mu);
	while (!h.holding)
		pthread_cond_wait(&h.cv, &h.mu);
	pthread_mutex_unlock(&h.mu);
	rd_all(&t, "q/a", "\"q1\"", 3 * BS + 500);
	pthread_mutex_lock(&h.mu);
	h.release = true;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.mu);
	pthread_join(th, NULL);
	pthread_mutex_destroy(&h.mu);
	pthread_cond_destroy(&h.cv);
	cr_assert(wait_stat(&t, "fill_bytes", 3 * BS + 500, true));
	cr_assert(wait_le(&t, "fill_queue_bytes", 0));
	cr_assert_eq(st_get(&t, "fill_queue_reused"), 0);
	rd_all(&t, "q/b", "\"q2\"", 3 * BS);
	cr_assert(wait_stat(&t, "fill_bytes", 6 * BS + 500, true), "every fill is written");
	cr_assert_eq(st_get(&t, "fill_queue_reused"), 3);
	rd_all(&t, "q/b", "\"q2\"", 3 * BS);
	t_fini(&t);
}

Test(ssd, fill_queue_writes_after_the_reader)
{
	struct t t;
	uint64_t size = 3 * BS + 500;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t.cfg.fill_queue = 8ull << 20;
	t_open(&t);
	rd_all(&t, "q/a", "\"q1\"", size);
	cr_assert(wait_stat(&t, "fill_bytes", size, true), "the queued fills are written");
	cr_assert_eq(st_get(&t, "fill_queued"), 4);
	cr_assert(wait_le(&t, "fill_queue_bytes", 0));
	cr_assert_eq(st_get(&t, "fill_written"), 4);
	rd_all(&t, "q/a", "\"q1\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 4, "the second read hits");
	t_fini(&t);
}

Test(ssd, a_block_whose_fill_is_queued_is_served_from_the_queue)
{
	struct t t;
	struct writer_hold h = { .holding = false };
	pthread_t th;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t.cfg.fill_queue = 8ull << 20;
	t_open(&t);
	h.env = t.env;
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.cv, NULL);
	cr_assert_eq(pthread_create(&th, NULL, hold_writer, &h), 0);
	pthread_mutex_lock(&h.mu);
	while (!h.holding)
		pthread_cond_wait(&h.cv, &h.mu);
	pthread_mutex_unlock(&h.mu);
	rd(&t, "q/late", "\"l1\"", BS, 0); /* fetched; its fill waits */
	rd(&t, "q/late", "\"l1\"", BS, 0);
	cr_assert_eq(atomic_load(&t.fk.calls), 1, "never fetched twice because a fill is late");
	cr_assert_eq(st_get(&t, "fill_queue_hits"), 1);
	cr_assert_eq(st_get(&t, "fill_bytes"), 0);
	pthread_mutex_lock(&h.mu);
	h.release = true;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.mu);
	pthread_join(th, NULL);
	cr_assert(wait_stat(&t, "fill_bytes", BS, true));
	rd(&t, "q/late", "\"l1\"", BS, 0);
	cr_assert_eq(st_get(&t, "hits"), 1);
	pthread_mutex_destroy(&h.mu);
	pthread_cond_destroy(&h.cv);
	t_fini(&t);
}

/* Issue 32: a full queue is no reason to leave a block out of the tier. */
Test(ssd, fill_queue_full_the_reader_writes)
{
	struct t t;
	uint64_t size = 3 * BS;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t.cfg.fill_queue = 1; /* no block fits */
	t_open(&t);
	rd_all(&t, "q/full", "\"f1\"", size);
	cr_assert_eq(st_get(&t, "fill_queued"), 0);
	cr_assert_eq(st_get(&t, "fill_written"), 3, "written before the reads returned");
	struct json_object *o = json_object_new_object(), *ssd, *v;
	tfs_layer_stats(t.ssd, o);
	cr_assert(json_object_object_get_ex(o, "ssd", &ssd));
	/* no dropped outcome unless ssd.fill_when_full = drop */
	cr_assert(!json_object_object_get_ex(ssd, "fill_dropped", &v));
	json_object_put(o);
	t_close(&t);
	t_open(&t);
	rd_all(&t, "q/full", "\"f1\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 3, "every block was cached");
	t_fini(&t);
}

Test(ssd, fill_queue_full_drops_only_when_asked)
{
	struct t t;
	uint64_t size = 3 * BS;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t.cfg.fill_queue = 1; /* no block fits */
	t.cfg.fill_when_full = TFS_SSD_FULL_DROP;
	t_open(&t);
	rd_all(&t, "q/full", "\"f1\"", size);
	cr_assert_eq(st_get(&t, "fill_dropped"), 3);
	cr_assert_eq(st_get(&t, "fill_queued"), 0);
	cr_assert_eq(st_get(&t, "fill_written"), 0);
	cr_assert_eq(st_get(&t, "fill_failed"), 0, "a drop is not a failure");
	t_close(&t);
	t_open(&t);
	rd_all(&t, "q/full", "\"f1\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 6, "nothing was cached");
	t_fini(&t);
}

Test(ssd, fill_queue_is_written_before_destroy_returns)
{
	struct t t;
	char key[32];
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t.cfg.fill_queue = 32ull << 20;
	t_open(&t);
	for (int i = 0; i < 40; i++) {
		key_of(key, sizeof(key), "drain/", i);
		rd_all(&t, key, "\"d\"", 2 * BS);
	}
	t_close(&t); /* at once: the fills may still be queued */
	t.cfg.fill_queue = 0;
	t_open(&t);
	for (int i = 0; i < 40; i++) {
		key_of(key, sizeof(key), "drain/", i);
		rd_all(&t, key, "\"d\"", 2 * BS);
	}
	cr_assert_eq(atomic_load(&t.fk.calls), 80, "every queued fill was written");
	t_fini(&t);
}

static void count_done(void *ctx, int i)
{
	(void)i;
	(*(int *)ctx)++;
}

Test(ssd, a_warmup_run_is_written_before_it_is_reported)
{
	int reported = 0;
	struct t t;
	uint64_t size = 4 * BS, cached = 0;
	unsigned char *bufs[4];
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t.cfg.fill_queue = 1; /* a reader's fill would be dropped */
	t.cfg.fill_when_full = TFS_SSD_FULL_DROP;
	t_open(&t);
	struct tfs_obj obj;
	tfs_obj_init(&obj, "warm.tar", "\"w1\"", size);
	for (int i = 0; i < 4; i++)
		bufs[i] = malloc(BS);
	struct tfs_io_progress bg = { .done = count_done, .ctx = &reported, .background = true };
	cr_assert_eq(tfs_layer_read_blocks(t.ssd, &obj, 0, 4, (void *const *)bufs, &bg), 0);
	cr_assert_eq(reported, 4);
	cr_assert_eq(tfs_ssd_cached(t.ssd, &obj, &cached), 0);
	cr_assert_eq(cached, size, "a warm-up's blocks are cached when it returns");
	cr_assert_eq(st_get(&t, "fill_dropped"), 0);
	for (int i = 0; i < 4; i++)
		free(bufs[i]);
	t_fini(&t);
}

Test(ssd, new_etag_is_a_miss_and_replaces)
{
	struct t t;
	uint64_t size = 2 * BS;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, "k", "\"v1\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 2);
	rd_all(&t, "k", "\"v2\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 4, "another ETag must not hit");
	rd_all(&t, "k", "\"v2\"", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 4);
	cr_assert_eq(st_get(&t, "used_bytes"), size, "the old version is gone");
	cr_assert_eq(st_get(&t, "objects"), 1);
	rd(&t, "k", "\"v1\"", size, 0);
	cr_assert_eq(atomic_load(&t.fk.calls), 5);
	t_fini(&t);
}

static void mangle(struct t *t, const char *key, int how)
{
	char p[256];
	data_path(t, key, p, sizeof(p));
	if (how == 0) { /* flip a byte in block 1 */
		int fd = open(p, O_RDWR);
		unsigned char c;
		cr_assert(fd >= 0);
		cr_assert_eq(pread(fd, &c, 1, BS + 100), 1);
		c ^= 0x40;
		cr_assert_eq(pwrite(fd, &c, 1, BS + 100), 1);
		close(fd);
	} else if (how == 1) { /* cut in the middle of block 1 */
		cr_assert_eq(truncate(p, BS + BS / 2), 0);
	} else {
		cr_assert_eq(unlink(p), 0);
	}
}

Test(ssd, corruption_is_detected_and_refetched)
{
	struct t t;
	uint64_t size = 3 * BS;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, "flip", "e", size);
	rd_all(&t, "cut", "e", size);
	rd_all(&t, "gone", "e", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 9);

	mangle(&t, "flip", 0);
	rd_all(&t, "flip", "e", size); /* block 1 refetched */
	cr_assert_eq(atomic_load(&t.fk.calls), 10);
	cr_assert_eq(st_get(&t, "corrupt"), 1);

	mangle(&t, "cut", 1);
	rd_all(&t, "cut", "e", size); /* blocks 1 (short) and 2 (absent) */
	cr_assert_eq(atomic_load(&t.fk.calls), 12);
	cr_assert_eq(st_get(&t, "corrupt"), 3);

	mangle(&t, "gone", 2);
	rd_all(&t, "gone", "e", size); /* every block */
	cr_assert_eq(atomic_load(&t.fk.calls), 15);
	cr_assert_eq(st_get(&t, "corrupt"), 6);

	/* refetched copies are cached again and verified */
	rd_all(&t, "flip", "e", size);
	rd_all(&t, "cut", "e", size);
	rd_all(&t, "gone", "e", size);
	cr_assert_eq(atomic_load(&t.fk.calls), 15);
	cr_assert_eq(st_get(&t, "used_bytes"), 3 * size);
	cr_assert_eq(t.cap.corrupt_lines, 6);
	cr_assert(strstr(t.cap.last, "'gone'") != NULL, "the key is logged: %s", t.cap.last);
	t_fini(&t);
}

Test(ssd, restart_is_warm)
{
	struct t t;
	uint64_t size = 5 * BS + 7;
	t_init(&t, TFS_POLICY_EPOCH, 64ull << 20);
	t_open(&t);
	rd_all(&t, "r1", "e", size);
	rd_all(&t, "r2", "e", BS);
	rd(&t, "r1", "e", size, 0); /* a hit: exercises the touch flush */
	uint64_t used = st_get(&t, "used_bytes"), clock = st_get(&t, "clock");
	t_close(&t);

	atomic_store(&t.fk.calls, 0);
	t_open(&t);
	cr_assert_eq(st_get(&t, "used_bytes"), used, "usage recomputed from the index");
	cr_assert_eq(st_get(&t, "objects"), 2);
	cr_assert_geq(st_get(&t, "clock"), clock, "the clock survives");
	rd_all(&t, "r1", "e", size);
	rd_all(&t, "r2", "e", BS);
	cr_assert_eq(atomic_load(&t.fk.calls), 0, "served without the inner layer");
	t_fini(&t);
}

Test(ssd, kill_9_is_warm)
{
	struct t t;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* the child: fill, then die without destroy or sync */
		struct tfs_layer *inner = fake_layer_create(&t.fk, BS);
		if (tfs_lmdb_open(t.index, MAP_SIZE, &t.log, &t.env) != 0 ||
		    tfs_ssd_create(&t.cfg, &t.cc, t.env, inner, &t.log, &t.ssd) != 0)
			_exit(1);
		for (int o = 0; o < 3; o++) {
			char key[16];
			key_of(key, sizeof(key), "crash", o);
			struct tfs_obj obj;
			tfs_obj_init(&obj, key, "e", obj_size(4));
			unsigned char *buf = malloc(BS);
			for (int i = 0; i < 4; i++)
				if (tfs_layer_read_block(t.ssd, &obj, i, buf) != 0)
					_exit(2);
			free(buf);
		}
		kill(getpid(), SIGKILL);
		_exit(3);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %d", status);
	t_open(&t);
	for (int o = 0; o < 3; o++) {
		char key[16];
		key_of(key, sizeof(key), "crash", o);
		rd_all(&t, key, "e", obj_size(4));
	}
	cr_assert_eq(atomic_load(&t.fk.calls), 0, "served from the SSD after kill -9");
	cr_assert_eq(st_get(&t, "used_bytes"), 3 * obj_size(4));
	t_fini(&t);
}

Test(ssd, lru_evicts_oldest_to_low_watermark)
{
	struct t t;
	char key[16];
	t_init(&t, TFS_POLICY_LRU, 40 * BS); /* high 36 blocks, low 20 */
	t_open(&t);
	for (int o = 0; o < 10; o++) {
		key_of(key, sizeof(key), "obj", o);
		rd_all(&t, key, "e", obj_size(4));
	}
	cr_assert(wait_le(&t, "used_bytes", st_get(&t, "low_watermark_bytes")),
		  "usage %lu never reached the low watermark",
		  (unsigned long)st_get(&t, "used_bytes"));
	/* The evictor counts a drop just after the drop's commit moved the
	 * usage: the count may lag the usage by one for a moment. */
	(void)wait_stat(&t, "evictions", 5, true);
	(void)wait_stat(&t, "evicted_bytes", 5 * obj_size(4), true);
	cr_assert_eq(st_get(&t, "evictions"), 5);
	cr_assert_eq(st_get(&t, "evicted_bytes"), 5 * obj_size(4));
	for (int o = 0; o < 10; o++) {
		key_of(key, sizeof(key), "obj", o);
		cr_assert_eq(file_of(&t, key), o >= 5, "%s", key);
	}
	int calls = atomic_load(&t.fk.calls);
	for (int o = 5; o < 10; o++) {
		key_of(key, sizeof(key), "obj", o);
		rd_all(&t, key, "e", obj_size(4));
	}
	cr_assert_eq(atomic_load(&t.fk.calls), calls, "the newest objects stayed");
	t_fini(&t);
}

/* Nothing the evictor may take (the one object is pinned): a fill above the
 * high watermark is refused for capacity, not by the policy. */
Test(ssd, a_tier_full_of_pinned_data_refuses_for_capacity)
{
	struct t t;
	struct tfs_obj obj;
	t_init(&t, TFS_POLICY_EPOCH, 10 * BS);
	t.cfg.pin_max = 10 * BS;
	t_open(&t);
	rd_all(&t, "kept", "e", obj_size(8)); /* 8 of 10 blocks, under 9 */
	tfs_obj_init(&obj, "kept", "e", obj_size(8));
	cr_assert_eq(tfs_ssd_set_pinned(t.ssd, &obj, true), 0);
	rd_all(&t, "more", "e", obj_size(4)); /* the 9th block fits, 3 do not */
	cr_assert_eq(st_get(&t, "fill_written"), 9);
	cr_assert_eq(st_get(&t, "fill_refused_capacity"), 3);
	cr_assert_eq(st_get(&t, "fill_refused_policy"), 0);
	cr_assert_eq(st_get(&t, "bypassed"), 3);
	t_fini(&t);
}

Test(ssd, epoch_bypasses_when_nothing_is_idle)
{
	struct t t;
	char key[16];
	t_init(&t, TFS_POLICY_EPOCH, 40 * BS);
	t_open(&t);
	for (int o = 0; o < 9; o++) { /* 36 blocks: at the high watermark */
		key_of(key, sizeof(key), "old", o);
		rd_all(&t, key, "e", obj_size(4));
	}
	cr_assert_eq(st_get(&t, "bypassed"), 0);
	for (int round = 0; round < 2; round++) {
		for (int o = 0; o < 3; o++) {
			key_of(key, sizeof(key), "new", o);
			rd_all(&t, key, "e", obj_size(4));
		}
	}
	cr_assert_eq(atomic_load(&t.fk.calls), 36 + 24, "new data served every time");
	cr_assert_eq(st_get(&t, "bypassed"), 24);
	cr_assert_eq(st_get(&t, "fill_refused_policy"), 24, "the policy kept the old data");
	cr_assert_eq(st_get(&t, "fill_refused_capacity"), 0);
	cr_assert_eq(st_get(&t, "fill_written"), 36);
	cr_assert_eq(st_get(&t, "used_bytes"), 36 * BS);
	for (int o = 0; o < 3; o++) {
		key_of(key, sizeof(key), "new", o);
		cr_assert(!file_of(&t, key));
	}
	for (int o = 0; o < 9; o++) {
		key_of(key, sizeof(key), "old", o);
		rd_all(&t, key, "e", obj_size(4));
	}
	cr_assert_eq(atomic_load(&t.fk.calls), 60, "old data kept");
	cr_assert_eq(st_get(&t, "evictions"), 0);
	/* one re-access interval per object visit, not per block */
	uint64_t samples = st_get(&t, "reuse_samples");
	cr_assert_eq(samples, 9, "samples %lu", (unsigned long)samples);
	t_close(&t);
	t_open(&t);
	cr_assert_eq(st_get(&t, "reuse_samples"), samples, "epoch learning survives a restart");
	t_fini(&t);
}

struct reader_arg {
	struct t *t;
	int rc;
	unsigned char buf[BS];
};

static void *read_a4(void *p)
{
	struct reader_arg *a = p;
	struct tfs_obj obj;
	tfs_obj_init(&obj, "A", "e", obj_size(5));
	a->rc = tfs_layer_read_block(a->t->ssd, &obj, 4, a->buf);
	return NULL;
}

Test(ssd, block_being_read_is_not_evicted)
{
	struct t t;
	char key[16], pa[256];
	pthread_t th;
	struct reader_arg *arg = calloc(1, sizeof(*arg));
	t_init(&t, TFS_POLICY_LRU, 40 * BS);
	t_open(&t);
	for (int i = 0; i < 4; i++) /* A: 4 of 5 blocks cached, the oldest object */
		rd(&t, "A", "e", obj_size(5), i);
	for (int o = 0; o < 7; o++) {
		key_of(key, sizeof(key), "B", o);
		rd_all(&t, key, "e", obj_size(4));
	}
	cr_assert_eq(st_get(&t, "used_bytes"), 32 * BS);

	atomic_store(&t.fk.hold_key, "A");
	arg->t = &t;
	cr_assert_eq(pthread_create(&th, NULL, read_a4, arg), 0);
	while (!atomic_load(&t.fk.held))
		nanosleep(&(struct timespec){ 0, 1000000L }, NULL);

	/* pressure: fill until above the high watermark, then let it evict */
	uint64_t high = st_get(&t, "high_watermark_bytes");
	for (int o = 0; st_get(&t, "used_bytes") <= high; o++) {
		cr_assert_lt(o, 40);
		key_of(key, sizeof(key), "P", o / 4);
		rd(&t, key, "e", obj_size(4), (uint64_t)(o % 4));
	}
	cr_assert(wait_le(&t, "used_bytes", st_get(&t, "low_watermark_bytes")));
	cr_assert_geq(st_get(&t, "evictions"), 4);
	data_path(&t, "A", pa, sizeof(pa));
	cr_assert(exists(pa), "A is being read: its file must survive");
	cr_assert(!file_of(&t, "B00"), "the next oldest went instead");
	int calls = atomic_load(&t.fk.calls);
	for (int i = 0; i < 4; i++) /* A's records survived too */
		rd(&t, "A", "e", obj_size(5), i);
	cr_assert_eq(atomic_load(&t.fk.calls), calls);

	atomic_store(&t.fk.release, 1);
	pthread_join(th, NULL);
	cr_assert_eq(arg->rc, 0);
	unsigned char *want = malloc(BS);
	fake_fill("A", "e", 4 * BS, want, BS);
	cr_assert(memcmp(arg->buf, want, BS) == 0);
	rd(&t, "A", "e", obj_size(5), 4);
	cr_assert_eq(atomic_load(&t.fk.calls), calls, "the fill of A was cached");
	free(want);
	free(arg);
	t_fini(&t);
}

static int check_modes(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_D || flag == FTW_DP)
		cr_expect_eq(st->st_mode & 07777, 0700, "%s: %o", p, st->st_mode & 07777);
	else if (flag == FTW_F)
		cr_expect_eq(st->st_mode & 07777, 0600, "%s: %o", p, st->st_mode & 07777);
	if (flag == FTW_F && strstr(p, "/data/") != NULL) {
		const char *name = p + ftw->base;
		cr_expect_eq(strlen(name), 64, "%s", p);
		cr_expect_eq(strspn(name, "0123456789abcdef"), 64, "%s", p);
		cr_expect(strncmp(name, p + ftw->base - 3, 2) == 0, "%s: wrong subdirectory", p);
	}
	return 0;
}

Test(ssd, modes_and_names)
{
	struct t t;
	char p[256];
	const char *evil = "../../../../tmp/escaped-by-ssd-test";
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, evil, "e", 2 * BS);
	rd_all(&t, "a/../../b", "e", BS);
	data_path(&t, evil, p, sizeof(p));
	cr_assert(exists(p), "the file is named by the hash of the key");
	cr_assert(!exists("/tmp/escaped-by-ssd-test"));
	nftw(t.root, check_modes, 16, FTW_PHYS);
	t_fini(&t);
}

/* The tmpfs of full_disk_passes_through, unmounted by .fini even when an
 * assertion fails. */
static char tmpfs_at[160];

static void unmount_tmpfs(void)
{
	if (tmpfs_at[0])
		umount2(tmpfs_at, MNT_DETACH);
	tmpfs_at[0] = '\0';
}

Test(ssd, full_disk_passes_through, .fini = unmount_tmpfs)
{
	struct t t;
	char data[160], key[16];
	t_init(&t, TFS_POLICY_LRU, 256ull << 20);
	cr_assert_eq(mkdir(t.dir, 0700), 0);
	snprintf(data, sizeof(data), "%s/data", t.dir);
	cr_assert_eq(mkdir(data, 0700), 0);
	if (mount("tmpfs", data, "tmpfs", 0, "size=1m,mode=0700") != 0) {
		int e = errno;
		t_fini(&t);
		cr_skip_test("cannot mount a tmpfs (%s): needs root", strerror(e));
	}
	snprintf(tmpfs_at, sizeof(tmpfs_at), "%s", data);
	t_open(&t);
	for (int o = 0; o < 4; o++) { /* 40 blocks into 16 blocks of room */
		key_of(key, sizeof(key), "full", o);
		rd_all(&t, key, "e", obj_size(10));
	}
	cr_assert_eq(atomic_load(&t.fk.calls), 40);
	uint64_t errs = st_get(&t, "write_errors");
	cr_assert_gt(errs, 0);
	cr_assert_gt(st_get(&t, "fill_failed"), 0);
	cr_assert_eq(st_get(&t, "fill_written") + st_get(&t, "fill_failed") +
			     st_get(&t, "fill_refused_capacity"),
		     40, "one outcome per block");
	cr_assert_leq(st_get(&t, "used_bytes"), 1u << 20);
	cr_assert_eq(t.cap.full_lines, 1, "one log line, not %d", t.cap.full_lines);
	/* what was cached is still served, and correct */
	int calls = atomic_load(&t.fk.calls);
	key_of(key, sizeof(key), "full", 0);
	rd_all(&t, key, "e", obj_size(10));
	cr_assert_lt(atomic_load(&t.fk.calls), calls + 10);
	t_close(&t);
	cr_assert_eq(umount2(data, MNT_DETACH), 0);
	tmpfs_at[0] = '\0';
	t_fini(&t);
}

/* Pages of `path` in the page cache. */
static size_t resident_pages(const char *path)
{
	int fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	struct stat st;
	cr_assert_eq(fstat(fd, &st), 0);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = ((size_t)st.st_size + pg - 1) / pg, res = 0;
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(m, MAP_FAILED);
	unsigned char *vec = malloc(n);
	cr_assert_eq(mincore(m, (size_t)st.st_size, vec), 0);
	for (size_t i = 0; i < n; i++)
		res += vec[i] & 1;
	free(vec);
	munmap(m, (size_t)st.st_size);
	close(fd);
	return res;
}

/* Fills with direct_io leave nothing in the page cache, and the blocks,
 * the short last one too (written padded), read back right after a
 * restart; without it the bytes go through the page cache. */
Test(ssd, direct_io_fills_skip_the_page_cache)
{
	char path[256];
	uint64_t size = obj_size(3) + 1000; /* a last block of 1000 bytes */
	for (int direct = 1; direct >= 0; direct--) {
		struct t t;
		t_init(&t, TFS_POLICY_LRU, 64ull << 20);
		t.cfg.direct_io = direct;
		t_open(&t);
		rd_all(&t, "dio", "e", size);
		data_path(&t, "dio", path, sizeof(path));
		size_t res = resident_pages(path);
		if (direct)
			cr_assert_eq(res, 0, "%zu pages of a direct fill in the page cache", res);
		else
			cr_assert_gt(res, 0, "a buffered fill bypassed the page cache");
		t_close(&t);
		t_open(&t);
		int calls = atomic_load(&t.fk.calls);
		rd_all(&t, "dio", "e", size);
		cr_assert_eq(atomic_load(&t.fk.calls), calls, "refetched after a restart");
		cr_assert_eq(st_get(&t, "corrupt"), 0);
		t_close(&t);
		t_fini(&t);
	}
}

/* Read block idx of (key, etag, size) into `buf` (BS bytes, set to 0xEE
 * first) and check the block's bytes, and that nothing past them moved. */
static void rd_into(struct t *t, const char *key, const char *etag, uint64_t size, uint64_t idx,
		    unsigned char *buf)
{
	struct tfs_obj obj;
	tfs_obj_init(&obj, key, etag, size);
	size_t len = tfs_obj_block_len(&obj, idx, BS);
	unsigned char *want = malloc(BS);
	fake_fill(key, etag, idx * BS, want, len);
	memset(buf, 0xEE, BS);
	cr_assert_eq(tfs_layer_read_block(t->ssd, &obj, idx, buf), 0);
	cr_assert(memcmp(buf, want, len) == 0, "%s block %lu: wrong bytes", key,
		  (unsigned long)idx);
	for (size_t i = len; i < BS; i++)
		cr_assert_eq(buf[i], 0xEE, "byte %zu past the block's %zu written", i, len);
	free(want);
}

/* With direct_io, hits read into a page-aligned buffer (the RAM tier's)
 * come off the disk with O_DIRECT: nothing enters the page cache, the
 * short last block too (its partial page through a page of the tier's
 * own, the buffer untouched past the block), and the checksum is still
 * verified: a damaged block is dropped and fetched again, never served.
 * An unaligned buffer is read through the page cache. */
Test(ssd, direct_io_hits_skip_the_page_cache)
{
	char path[256];
	uint64_t size = obj_size(3) + 1000; /* a last block of 1000 bytes */
	unsigned char *al = NULL;
	struct t t;
	cr_assert_eq(posix_memalign((void **)&al, TFS_PAGE_ALIGN, BS + TFS_PAGE_ALIGN), 0);
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, "dio", "e", size);
	int calls = atomic_load(&t.fk.calls);
	data_path(&t, "dio", path, sizeof(path));
	cr_assert_eq(resident_pages(path), 0);

	for (uint64_t i = 0; i < 4; i++)
		rd_into(&t, "dio", "e", size, i, al);
	cr_assert_eq(atomic_load(&t.fk.calls), calls, "a hit went to the backend");
	cr_assert_eq(st_get(&t, "direct_read_bytes"), size);
	size_t res = resident_pages(path);
	cr_assert_eq(res, 0, "%zu pages of direct reads in the page cache", res);

	/* damage the short last block on disk: detected, fetched again */
	int fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	unsigned char c = 0;
	cr_assert_eq(pread(fd, &c, 1, (off_t)obj_size(3) + 999), 1);
	c ^= 0x01;
	cr_assert_eq(pwrite(fd, &c, 1, (off_t)obj_size(3) + 999), 1);
	cr_assert_eq(fsync(fd), 0);
	close(fd);
	rd_into(&t, "dio", "e", size, 3, al);
	cr_assert_eq(st_get(&t, "corrupt"), 1);
	cr_assert_eq(atomic_load(&t.fk.calls), calls + 1);

	/* an unaligned buffer: served through the page cache */
	uint64_t direct = st_get(&t, "direct_read_bytes");
	rd_into(&t, "dio", "e", size, 1, al + 512);
	cr_assert_eq(st_get(&t, "direct_read_bytes"), direct);
	cr_assert_gt(resident_pages(path), 0);
	cr_assert_eq(atomic_load(&t.fk.calls), calls + 1);
	free(al);
	t_fini(&t);
}

Test(ssd, network_fs_refused)
{
	static const unsigned long net[] = { 0x6969,     0x517B,     0xFF534D42, 0xFE534D42,
					     0x65735546, 0x00C36400, 0x01021997, 0x5346414F,
					     0x01161970, 0x7461636f, 0x0BD00BD0 };
	for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++)
		cr_assert_not_null(tfs_lmdb_network_fs(net[i]), "0x%lx", net[i]);
	/* a sign-extended CIFS magic (32-bit f_type) */
	cr_assert_str_eq(tfs_lmdb_network_fs((unsigned long)(long)(int32_t)0xFF534D42u), "cifs");
	cr_assert_str_eq(tfs_lmdb_network_fs(0x65735546), "fuse");
	/* ext4, tmpfs, xfs, btrfs, overlayfs */
	static const unsigned long local[] = { 0xEF53, 0x01021994, 0x58465342, 0x9123683E,
					       0x794c7630 };
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		cr_assert_null(tfs_lmdb_network_fs(local[i]), "0x%lx", local[i]);
}

Test(ssd, errno_mapping)
{
	cr_assert_eq(tfs_lmdb_errno(0), 0);
	cr_assert_eq(tfs_lmdb_errno(MDB_MAP_FULL), ENOSPC);
	cr_assert_eq(tfs_lmdb_errno(MDB_NOTFOUND), ENOENT);
	cr_assert_eq(tfs_lmdb_errno(MDB_CORRUPTED), EIO);
	cr_assert_eq(tfs_lmdb_errno(MDB_PAGE_NOTFOUND), EIO);
	cr_assert_eq(tfs_lmdb_errno(MDB_READERS_FULL), EIO);
	cr_assert_eq(tfs_lmdb_errno(EACCES), EACCES);
	cr_assert(tfs_lmdb_is_corruption(MDB_CORRUPTED));
	cr_assert(!tfs_lmdb_is_corruption(MDB_MAP_FULL));
}

Test(ssd, damaged_index_moved_aside)
{
	struct t t;
	char p[256];
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, "x", "e", BS);
	t_close(&t);
	snprintf(p, sizeof(p), "%s/data.mdb", t.index);
	int fd = open(p, O_WRONLY);
	cr_assert(fd >= 0);
	char junk[8192];
	memset(junk, 0x5A, sizeof(junk));
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	close(fd);

	atomic_store(&t.fk.calls, 0);
	t_open(&t);
	cr_assert_geq(t.cap.warns, 1);
	cr_assert(strstr(t.cap.last, "damaged") != NULL || t.cap.warns > 1, "%s", t.cap.last);
	DIR *d = opendir(t.index);
	struct dirent *e;
	bool found = false;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "corrupt-", 8) == 0) {
			char q[512];
			snprintf(q, sizeof(q), "%s/%s/data.mdb", t.index, e->d_name);
			found = exists(q);
		}
	closedir(d);
	cr_assert(found, "the damaged file is kept in corrupt-*/");
	rd_all(&t, "x", "e", BS); /* empty cache: a miss, correct bytes */
	cr_assert_eq(atomic_load(&t.fk.calls), 1);
	t_fini(&t);
}

Test(ssd, lmdb_refuses_a_file_as_dir)
{
	MDB_env *env = NULL;
	char root[] = "/tmp/tfs-ssd-XXXXXX", p[64];
	cr_assert_not_null(mkdtemp(root));
	snprintf(p, sizeof(p), "%s/f", root);
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	close(fd);
	cr_assert_eq(tfs_lmdb_open(p, MAP_SIZE, NULL, &env), EINVAL);
	cr_assert_null(env);
	unlink(p);
	rmdir(root);
}

Test(ssd, invalidate_drops)
{
	struct t t;
	struct tfs_obj obj;
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, "inv", "e", 3 * BS);
	cr_assert(file_of(&t, "inv"));
	tfs_obj_init(&obj, "inv", "e", 3 * BS);
	tfs_layer_invalidate(t.ssd, obj.id);
	cr_assert(!file_of(&t, "inv"));
	cr_assert_eq(st_get(&t, "used_bytes"), 0);
	cr_assert_eq(st_get(&t, "objects"), 0);
	cr_assert_eq(atomic_load(&t.fk.invalidations), 1, "passed to the inner layer");
	rd(&t, "inv", "e", 3 * BS, 0);
	cr_assert_eq(atomic_load(&t.fk.calls), 4);
	t_fini(&t);
}

Test(ssd, orphans_and_trash_swept)
{
	struct t t;
	char p[256], q[256];
	t_init(&t, TFS_POLICY_LRU, 64ull << 20);
	t_open(&t);
	rd_all(&t, "kept", "e", BS);
	t_close(&t);
	/* a data file with no record (a crash between pwrite and commit) */
	data_path(&t, "orphan", p, sizeof(p));
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
	/* and one that another daemon sharing the tier is filling: no record
	 * yet, the fill's shared lock held; it must be left alone */
	char f[256];
	data_path(&t, "filling", f, sizeof(f));
	int filling = open(f, O_CREAT | O_WRONLY, 0600);
	cr_assert(filling >= 0);
	cr_assert_eq(flock(filling, LOCK_SH), 0);
	snprintf(q, sizeof(q), "%s/data/trash/leftover.1", t.dir);
	fd = open(q, O_CREAT | O_WRONLY, 0600);
	close(fd);
	atomic_store(&t.fk.calls, 0);
	t_open(&t);
	uint64_t end = now_ms() + 10000;
	while ((exists(p) || exists(q) || atomic_load(&t.cap.swept_lines) == 0) && now_ms() < end)
		usleep(5000);
	cr_assert_eq(atomic_load(&t.cap.swept_lines), 1, "the sweep did not finish");
	cr_assert(!exists(p), "orphan removed");
	cr_assert(!exists(q), "trash emptied");
	cr_assert(exists(f), "a file being filled (no record yet) was removed");
	close(filling);
	cr_assert(file_of(&t, "kept"));
	rd_all(&t, "kept", "e", BS);
	cr_assert_eq(atomic_load(&t.fk.calls), 0);
	t_fini(&t);
}

Test(ssd, stats_fields)
{
	static const char *const fields[] = {
		"hits",
		"misses",
		"hit_bytes",
		"fill_bytes",
		"bypassed",
		"evictions",
		"evicted_bytes",
		"corrupt",
		"write_errors",
		"fill_written",
		"fill_refused_policy",
		"fill_refused_capacity",
		"fill_failed",
		"fill_superseded",
		"fill_queued",
		"fill_queue_bytes",
		"fill_queue_hits",
		"fill_queue_reused",
		"used_bytes",
		"capacity_bytes",
		"high_watermark_bytes",
		"low_watermark_bytes",
		"objects",
	};
	struct t t;
	t_init(&t, TFS_POLICY_LRU, 100 * BS);
	t_open(&t);
	rd(&t, "s", "e", BS, 0);
	rd(&t, "s", "e", BS, 0);
	struct json_object *o = json_object_new_object(), *ssd, *v;
	tfs_layer_stats(t.ssd, o);
	cr_assert(json_object_object_get_ex(o, "ssd", &ssd));
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		cr_assert(json_object_object_get_ex(ssd, fields[i], &v), "%s", fields[i]);
		cr_assert(json_object_is_type(v, json_type_int), "%s", fields[i]);
	}
	cr_assert(json_object_object_get_ex(o, "fake", &v), "the inner layer's stats follow");
	json_object_put(o);
	cr_assert_eq(st_get(&t, "hits"), 1);
	cr_assert_eq(st_get(&t, "misses"), 1);
	cr_assert_eq(st_get(&t, "capacity_bytes"), 100 * BS);
	cr_assert_eq(st_get(&t, "high_watermark_bytes"), 90 * BS);
	cr_assert_eq(st_get(&t, "low_watermark_bytes"), 50 * BS);
	t_fini(&t);
}

/* Walk the raw index (the tier must be closed) and check I1 and I2 of
 * ssd.c: this pins down the on-disk format too. */
struct index_sums {
	uint64_t block_bytes, cached_bytes, objects, atime_entries, atime_mismatch, orphan_blocks;
};

static uint64_t le64(const void *p)
{
	const unsigned char *b = p;
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static void index_scan(struct t *t, struct index_sums *out)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi objs, blks, atime;
	MDB_cursor *c;
	MDB_val k, v;
	memset(out, 0, sizeof(*out));
	cr_assert_eq(tfs_lmdb_open(t->index, MAP_SIZE, &t->log, &env), 0);
	cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	cr_assert_eq(mdb_dbi_open(txn, "ssd_objects", 0, &objs), 0);
	cr_assert_eq(mdb_dbi_open(txn, "ssd_blocks", 0, &blks), 0);
	cr_assert_eq(mdb_dbi_open(txn, "ssd_atime", 0, &atime), 0);
	cr_assert_eq(mdb_cursor_open(txn, objs, &c), 0);
	while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) {
		cr_assert_eq(k.mv_size, 32);
		cr_assert_geq(v.mv_size, 36);
		out->objects++;
		out->cached_bytes += le64((char *)v.mv_data + 24);
	}
	mdb_cursor_close(c);
	cr_assert_eq(mdb_cursor_open(txn, blks, &c), 0);
	while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) {
		MDB_val ok = { 32, k.mv_data }, ov;
		const unsigned char *b = v.mv_data;
		cr_assert_eq(k.mv_size, 40);
		cr_assert_eq(v.mv_size, 12);
		out->block_bytes += (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
				    (uint64_t)b[11] << 24;
		if (mdb_get(txn, objs, &ok, &ov) != 0)
			out->orphan_blocks++;
	}
	mdb_cursor_close(c);
	cr_assert_eq(mdb_cursor_open(txn, atime, &c), 0);
	while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) {
		const unsigned char *p = k.mv_data;
		MDB_val ok = { 32, (char *)k.mv_data + 8 }, ov;
		uint64_t tick = 0;
		cr_assert_eq(k.mv_size, 40);
		for (int i = 0; i < 8; i++)
			tick = tick << 8 | p[i];
		out->atime_entries++;
		if (mdb_get(txn, objs, &ok, &ov) != 0 || le64((char *)ov.mv_data + 16) != tick)
			out->atime_mismatch++;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	tfs_lmdb_close(env);
}

/* Many threads, a tier far smaller than the data, constant eviction:
 * every byte must be right and the usage must match the index. */
struct stress_arg {
	struct t *t;
	unsigned seed;
	int errors;
};

static void *stress(void *p)
{
	struct stress_arg *a = p;
	unsigned char *buf = malloc(BS), *want = malloc(BS);
	for (int n = 0; n < 400; n++) {
		char key[16];
		int o = (int)(rand_r(&a->seed) % 24);
		uint64_t idx = rand_r(&a->seed) % 6;
		const char *etag = rand_r(&a->seed) % 50 == 0 ? "e2" : "e1";
		struct tfs_obj obj;
		key_of(key, sizeof(key), "st", o);
		tfs_obj_init(&obj, key, etag, obj_size(6) - 100);
		size_t len = tfs_obj_block_len(&obj, idx, BS);
		if (tfs_layer_read_block(a->t->ssd, &obj, idx, buf) != 0)
			a->errors++;
		fake_fill(key, etag, idx * BS, want, len);
		if (memcmp(buf, want, len) != 0)
			a->errors++;
		if (n % 97 == 0)
			tfs_layer_invalidate(a->t->ssd, obj.id);
	}
	free(buf);
	free(want);
	return NULL;
}

Test(ssd, concurrent_readers_under_eviction)
{
	struct t t;
	pthread_t th[6];
	struct stress_arg arg[6];
	t_init(&t, TFS_POLICY_LRU, 40 * BS);
	t_open(&t);
	for (int i = 0; i < 6; i++) {
		arg[i] = (struct stress_arg){ .t = &t, .seed = 1234u + (unsigned)i };
		cr_assert_eq(pthread_create(&th[i], NULL, stress, &arg[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(arg[i].errors, 0);
	}
	cr_assert_leq(st_get(&t, "used_bytes"), st_get(&t, "capacity_bytes"));
	cr_assert_gt(st_get(&t, "hits"), 0);
	cr_assert_gt(st_get(&t, "evictions"), 0);
	/* quiescent: no eviction pass running (usage <= high and stable) */
	uint64_t used = st_get(&t, "used_bytes"), end = now_ms() + 10000, since = now_ms();
	while (now_ms() < end &&
	       (used > st_get(&t, "high_watermark_bytes") || now_ms() - since < 300)) {
		usleep(10000);
		uint64_t u = st_get(&t, "used_bytes");
		if (u != used) {
			used = u;
			since = now_ms();
		}
	}
	uint64_t objects = st_get(&t, "objects");
	t_close(&t);
	struct index_sums sums;
	index_scan(&t, &sums);
	cr_assert_eq(sums.block_bytes, sums.cached_bytes, "I2: records agree");
	cr_assert_eq(sums.cached_bytes, used, "I2: in-memory usage matches the index");
	cr_assert_eq(sums.objects, objects);
	cr_assert_eq(sums.atime_entries, sums.objects, "I1");
	cr_assert_eq(sums.atime_mismatch, 0, "I1: atime keys match last_tick");
	cr_assert_eq(sums.orphan_blocks, 0, "every block has an object");
	t_open(&t);
	cr_assert_eq(st_get(&t, "used_bytes"), used);
	t_fini(&t);
}

/* Reload: a smaller size takes effect at once and the background thread
 * evicts down to it, whatever the policy (epoch would keep everything);
 * an impossible size changes nothing. */
Test(ssd, set_limits_shrinks_in_the_background)
{
	struct t t;
	char key[16];
	t_init(&t, TFS_POLICY_EPOCH, 80 * BS);
	t_open(&t);
	for (int o = 0; o < 10; o++) { /* 40 blocks, below the high watermark */
		key_of(key, sizeof(key), "obj", o);
		rd_all(&t, key, "e", obj_size(4));
	}
	cr_assert_eq(st_get(&t, "used_bytes"), 40 * BS);
	struct tfs_ssd_config c = t.cfg;
	c.size = 2 * BS;
	cr_assert_eq(tfs_ssd_set_limits(t.ssd, &c), EINVAL, "below 4 blocks");
	cr_assert_eq(st_get(&t, "capacity_bytes"), 80 * BS);

	c.size = 20 * BS; /* high 18 blocks, low 10 */
	cr_assert_eq(tfs_ssd_set_limits(t.ssd, &c), 0);
	cr_assert_eq(st_get(&t, "capacity_bytes"), 20 * BS);
	cr_assert_eq(st_get(&t, "high_watermark_bytes"), 18 * BS);
	cr_assert(wait_le(&t, "used_bytes", 20 * BS), "usage %lu never came down to the capacity",
		  (unsigned long)st_get(&t, "used_bytes"));
	cr_assert_geq(st_get(&t, "evictions"), 5);
	/* a fill beyond the new capacity is served, not cached */
	key_of(key, sizeof(key), "new", 0);
	rd_all(&t, key, "e", obj_size(4));

	c.size = 200 * BS;
	cr_assert_eq(tfs_ssd_set_limits(t.ssd, &c), 0);
	cr_assert_eq(st_get(&t, "capacity_bytes"), 200 * BS);
	t_fini(&t);
}
