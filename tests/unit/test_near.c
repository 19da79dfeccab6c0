/* test_near.c - a near copy in front of far (backends/near.h), with two
 * local backends as the stores and a fake one that fails for the faults:
 * a miss reads far and copies in the background, the next read is served
 * by near, a rewritten object is never served from the old copy, a
 * failing near is skipped and then left alone by the breaker, and with
 * far down a known version is still read from near. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_impl.h"
#include "local.h"
#include "log.h"
#include "near.h"

static char base[64], near_dir[128], far_dir[128];
static struct tfs_backend *be; /* the composition */
static struct tfs_log tlog;

/* A store that is down: every request fails with EIO, and is counted. */
static atomic_int fake_calls;
static bool fake_has_copies; /* HEAD answers as if a copy were there */

static int fake_head(void *p, const char *k, struct tfs_obj_meta *o)
{
	(void)p, (void)k, (void)o;
	atomic_fetch_add(&fake_calls, 1);
	return EIO;
}
static int fake_list(void *p, const char *a, const char *b, const char *c, size_t d,
		     struct tfs_list_page *o)
{
	(void)p, (void)a, (void)b, (void)c, (void)d, (void)o;
	atomic_fetch_add(&fake_calls, 1);
	return EIO;
}
static int fake_get(void *p, const char *k, uint64_t off, uint64_t len, const char *m,
		    struct tfs_io dst, size_t *got, char etag[TFS_ETAG_MAX])
{
	(void)p, (void)k, (void)off, (void)len, (void)m, (void)dst, (void)got, (void)etag;
	atomic_fetch_add(&fake_calls, 1);
	return EIO;
}
static int fake_put(void *p, const char *k, struct tfs_io s, uint64_t l,
		    const struct tfs_obj_meta *m, char e[TFS_ETAG_MAX])
{
	(void)p, (void)k, (void)s, (void)l, (void)m, (void)e;
	atomic_fetch_add(&fake_calls, 1);
	return EIO;
}
static int fake_del(void *p, const char *k)
{
	(void)p, (void)k;
	return EIO;
}
static int fake_copy(void *p, const char *s, const char *d, uint64_t size,
		     const struct tfs_obj_meta *m, char e[TFS_ETAG_MAX])
{
	(void)p, (void)s, (void)d, (void)size, (void)m, (void)e;
	return EIO;
}
static void fake_destroy(void *p)
{
	(void)p;
}
static const struct tfs_backend_ops fake_ops = {
	.name = "down",
	.head = fake_head,
	.list = fake_list,
	.get_range = fake_get,
	.put = fake_put,
	.del = fake_del,
	.copy = fake_copy,
	.destroy = fake_destroy,
};

/* A near whose GETs fail (too slow, say) while its HEADs answer "there",
 * each HEAD held until held_heads is cleared. */
static atomic_bool held_heads;
static atomic_int heads_waiting;

static pthread_t reader; /* the test's thread: its HEADs (a read's) fail */

static int held_head(void *p, const char *k, struct tfs_obj_meta *o)
{
	(void)p, (void)k;
	if (pthread_equal(pthread_self(), reader)) {
		atomic_fetch_add(&fake_calls, 1);
		return EIO; /* a near read fetches the copy's digests first */
	}
	atomic_fetch_add(&heads_waiting, 1);
	while (atomic_load(&held_heads))
		usleep(1000);
	return tfs_obj_meta_set(o, "tierfs-sums", "sidecar"); /* a copy with digests */
}
static const struct tfs_backend_ops slow_get_ops = {
	.name = "slow-get",
	.head = held_head,
	.list = fake_list,
	.get_range = fake_get,
	.put = fake_put,
	.del = fake_del,
	.copy = fake_copy,
	.destroy = fake_destroy,
};

static struct tfs_backend *local_at(const char *dir)
{
	struct tfs_local_config lc = { .root = (char *)dir };
	struct tfs_backend *b = NULL;
	cr_assert_eq(tfs_local_create(&lc, &tlog, &b), 0);
	return b;
}

static struct tfs_backend *fake(void)
{
	struct tfs_backend *b = NULL;
	cr_assert_eq(tfs_backend_new(&fake_ops, NULL, "down", &b), 0);
	return b;
}

static const struct tfs_near_config cfg = {
	.copiers = 2,
	.copy_budget = 4 << 20,
	.breaker_errors = 3,
	.breaker_ms = 60000,
};

static void setup(void)
{
	tfs_log_init_stderr(&tlog, TFS_LOG_ERROR);
	snprintf(base, sizeof(base), "/tmp/test_near.XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(near_dir, sizeof(near_dir), "%s/near", base);
	snprintf(far_dir, sizeof(far_dir), "%s/far", base);
	cr_assert_eq(mkdir(near_dir, 0755), 0);
	cr_assert_eq(mkdir(far_dir, 0755), 0);
	atomic_store(&fake_calls, 0);
	fake_has_copies = false;
}

static void teardown(void)
{
	tfs_backend_destroy(be);
	be = NULL;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

static void compose(struct tfs_backend *near, struct tfs_backend *far, uint64_t budget)
{
	struct tfs_near_config c = cfg;
	if (budget)
		c.copy_budget = budget;
	cr_assert_eq(tfs_near_create(&c, near, far, &tlog, &be), 0);
}

static uint64_t stat_of(const char *name)
{
	struct json_object *o = tfs_backend_stats_json(be), *near, *v;
	cr_assert_not_null(o);
	cr_assert(json_object_object_get_ex(o, "near", &near));
	uint64_t r = json_object_object_get_ex(near, name, &v) ? json_object_get_uint64(v) : 0;
	json_object_put(o);
	return r;
}

/* GETs far's own instance answered. */
static uint64_t far_gets(void)
{
	struct json_object *o = tfs_backend_stats_json(be), *near, *far, *get, *v;
	cr_assert(json_object_object_get_ex(o, "near", &near));
	cr_assert(json_object_object_get_ex(near, "far", &far));
	cr_assert(json_object_object_get_ex(far, "get", &get));
	cr_assert(json_object_object_get_ex(get, "requests", &v));
	uint64_t r = json_object_get_uint64(v);
	json_object_put(o);
	return r;
}

static void wait_for(const char *name, uint64_t want)
{
	for (int i = 0; i < 500 && stat_of(name) < want; i++)
		usleep(10000);
	cr_assert_geq(stat_of(name), want, "%s stayed at %lu", name, (unsigned long)stat_of(name));
}

static void put_far(const char *key, const char *data)
{
	struct tfs_backend *f = local_at(far_dir);
	cr_assert_eq(tfs_backend_put(f, key, tfs_io_buf((void *)data), strlen(data), NULL, NULL),
		     0);
	tfs_backend_destroy(f);
}

static void etag_of(const char *key, char etag[TFS_ETAG_MAX])
{
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, key, &m), 0);
	memcpy(etag, m.etag, TFS_ETAG_MAX);
	tfs_obj_meta_clear(&m);
}

/* Read `len` bytes at `off` of version `etag`; returns the bytes read. */
static size_t read_at(const char *key, const char *etag, uint64_t off, size_t len, char *buf)
{
	size_t got = 0;
	char e[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_get_range(be, key, off, len, etag, tfs_io_buf(buf), &got, e), 0);
	cr_assert_str_eq(e, etag);
	return got;
}

TestSuite(near, .init = setup, .fini = teardown);

Test(near, a_miss_is_copied_and_the_next_read_is_near)
{
	compose(local_at(near_dir), local_at(far_dir), 0);
	put_far("a/x.bin", "hello from far");
	char etag[TFS_ETAG_MAX], buf[64] = "";
	etag_of("a/x.bin", etag);
	cr_assert_eq(read_at("a/x.bin", etag, 0, sizeof(buf), buf), 14);
	cr_assert(memcmp(buf, "hello from far", 14) == 0);
	cr_assert_eq(stat_of("misses"), 1);
	wait_for("copies", 1);
	cr_assert_eq(stat_of("copy_far_rereads"), 0, "copied from the reader's bytes");
	/* The copy sits under its version's key. */
	char nk[512], path[700];
	cr_assert_eq(tfs_near_key("a/x.bin", etag, nk, sizeof(nk)), 0);
	snprintf(path, sizeof(path), "%s/%s", near_dir, nk);
	cr_assert_eq(access(path, F_OK), 0, "%s", path);
	uint64_t gets = far_gets();
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(read_at("a/x.bin", etag, 6, 4, buf), 4);
	cr_assert(memcmp(buf, "from", 4) == 0);
	cr_assert_eq(stat_of("hits"), 1);
	cr_assert_eq(far_gets(), gets, "the second read went to far");
}

Test(near, a_read_of_exactly_the_object_is_copied_without_a_second_get)
{
	compose(local_at(near_dir), local_at(far_dir), 0);
	put_far("one-block", "exactly these bytes");
	char etag[TFS_ETAG_MAX], buf[19];
	etag_of("one-block", etag);
	cr_assert_eq(read_at("one-block", etag, 0, sizeof(buf), buf), 19);
	wait_for("copies", 1);
	cr_assert_eq(stat_of("copy_far_rereads"), 0);
	cr_assert_eq(stat_of("copy_bytes"), 19);
	/* The start of a longer object is not taken for the whole of it. */
	put_far("longer", "the first part, and then more");
	etag_of("longer", etag);
	cr_assert_eq(read_at("longer", etag, 0, 8, buf), 8);
	wait_for("copies", 2);
	cr_assert_eq(stat_of("copy_far_rereads"), 1);
	cr_assert_eq(stat_of("copy_bytes"), 19 + 29);
}

/* With a spool, an object read in parts is copied from the reader's own
 * bytes once they cover it, whatever their order: no second far read. */
static void compose_spool(unsigned idle_ms)
{
	char spool[160];
	snprintf(spool, sizeof(spool), "%s/spool", base);
	cr_assert_eq(mkdir(spool, 0700), 0);
	struct tfs_near_config c = cfg;
	c.spool_dir = spool;
	c.spool_size = 1 << 20;
	c.spool_idle_ms = idle_ms;
	cr_assert_eq(tfs_near_create(&c, local_at(near_dir), local_at(far_dir), &tlog, &be), 0);
}

Test(near, a_part_read_object_is_copied_from_the_readers_bytes)
{
	compose_spool(0);
	put_far("shard", "0123456789abcdefghij");
	char etag[TFS_ETAG_MAX], buf[8], nk[512], path[700], got[32] = "";
	etag_of("shard", etag);
	cr_assert_eq(read_at("shard", etag, 8, 8, buf), 8);
	cr_assert_eq(read_at("shard", etag, 16, 4, buf), 4);
	cr_assert_eq(stat_of("copies"), 0, "copied before the reader read it all");
	cr_assert_eq(read_at("shard", etag, 0, 8, buf), 8);
	wait_for("copies", 1);
	cr_assert_eq(stat_of("copies_spooled"), 1);
	cr_assert_eq(stat_of("copy_far_rereads"), 0);
	cr_assert_eq(far_gets(), 3, "far read more than the reader's three parts");
	cr_assert_eq(tfs_near_key("shard", etag, nk, sizeof(nk)), 0);
	snprintf(path, sizeof(path), "%s/%s", near_dir, nk);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fread(got, 1, sizeof(got), f), 20);
	fclose(f);
	cr_assert_str_eq(got, "0123456789abcdefghij");
	cr_assert_eq(stat_of("spool_bytes"), 0);
}

Test(near, an_idle_spooled_object_is_read_from_far_again)
{
	compose_spool(50);
	put_far("partial", "0123456789abcdefghij");
	put_far("other", "another object, read later");
	char etag[TFS_ETAG_MAX], etag2[TFS_ETAG_MAX], buf[8];
	etag_of("partial", etag);
	etag_of("other", etag2);
	cr_assert_eq(read_at("partial", etag, 4, 4, buf), 4); /* and nothing more */
	usleep(100 * 1000);
	/* The next far read gives the idle object up, to a copy from far. */
	cr_assert_eq(read_at("other", etag2, 0, 8, buf), 8);
	wait_for("spool_given_up", 1);
	wait_for("copy_far_rereads", 1);
	wait_for("copies", 1);
}

Test(near, a_part_read_copies_the_whole_object_from_far)
{
	compose(local_at(near_dir), local_at(far_dir), 0);
	put_far("big", "0123456789abcdefghij");
	char etag[TFS_ETAG_MAX], buf[8];
	etag_of("big", etag);
	cr_assert_eq(read_at("big", etag, 4, 4, buf), 4);
	wait_for("copies", 1);
	cr_assert_eq(stat_of("copy_far_rereads"), 1);
	cr_assert_eq(stat_of("copy_bytes"), 20);
	/* The same version is queued once. */
	cr_assert_eq(read_at("big", etag, 0, 4, buf), 4);
	cr_assert_eq(stat_of("hits"), 1);
	cr_assert_eq(stat_of("copies_queued"), 1);
}

Test(near, a_rewritten_object_is_never_served_from_the_old_copy)
{
	compose(local_at(near_dir), local_at(far_dir), 0);
	put_far("m", "version one");
	char old[TFS_ETAG_MAX], cur[TFS_ETAG_MAX], buf[64];
	etag_of("m", old);
	cr_assert_eq(read_at("m", old, 0, sizeof(buf), buf), 11);
	wait_for("copies", 1);
	sleep(1); /* the local backend's ETag has whole seconds of mtime */
	put_far("m", "version two!");
	etag_of("m", cur);
	cr_assert_str_neq(cur, old);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(read_at("m", cur, 0, sizeof(buf), buf), 12);
	cr_assert(memcmp(buf, "version two!", 12) == 0);
	cr_assert_eq(stat_of("hits"), 0);
	cr_assert_eq(stat_of("misses"), 2);
	/* The new version gets a copy of its own beside the old one. */
	wait_for("copies", 2);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(read_at("m", cur, 0, 12, buf), 12);
	cr_assert(memcmp(buf, "version two!", 12) == 0);
	cr_assert_eq(stat_of("hits"), 1);
}

Test(near, a_failing_near_is_skipped_then_left_alone)
{
	compose(fake(), local_at(far_dir), 0);
	put_far("f", "far bytes");
	char etag[TFS_ETAG_MAX], buf[32];
	etag_of("f", etag);
	for (int i = 0; i < 5; i++) {
		memset(buf, 0, sizeof(buf));
		cr_assert_eq(read_at("f", etag, 0, sizeof(buf), buf), 9);
		cr_assert(memcmp(buf, "far bytes", 9) == 0);
	}
	/* Three failures in a row open the breaker: the reads', and the
	 * HEAD of the copy the first read queued if it came first. */
	cr_assert_eq(stat_of("breaker_opens"), 1);
	cr_assert_geq(stat_of("errors"), 2);
	cr_assert_geq(stat_of("skipped_breaker_open"), 2);
	int calls = atomic_load(&fake_calls);
	cr_assert_leq(calls, 4);
	/* Nothing asks near while the breaker is open. */
	cr_assert_eq(read_at("f", etag, 0, sizeof(buf), buf), 9);
	cr_assert_eq(atomic_load(&fake_calls), calls);
}

Test(near, after_its_time_the_breaker_lets_one_read_try)
{
	struct tfs_near_config c = cfg;
	c.breaker_ms = 100;
	cr_assert_eq(tfs_near_create(&c, fake(), local_at(far_dir), &tlog, &be), 0);
	put_far("p", "probe me");
	char etag[TFS_ETAG_MAX], buf[8];
	etag_of("p", etag);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(read_at("p", etag, 0, 8, buf), 8);
	cr_assert_eq(stat_of("breaker_opens"), 1);
	int calls = atomic_load(&fake_calls);
	usleep(150 * 1000);
	/* One read probes near, fails, and opens the breaker again. */
	cr_assert_eq(read_at("p", etag, 0, 8, buf), 8);
	cr_assert_eq(atomic_load(&fake_calls), calls + 1);
	cr_assert_eq(stat_of("breaker_opens"), 2);
	cr_assert_eq(read_at("p", etag, 0, 8, buf), 8);
	cr_assert_eq(atomic_load(&fake_calls), calls + 1, "asked near while open");
}

Test(near, a_short_copy_is_not_served)
{
	compose(local_at(near_dir), local_at(far_dir), 0);
	put_far("s", "the whole object");
	char etag[TFS_ETAG_MAX], nk[512], path[700], buf[16];
	etag_of("s", etag);
	/* A copy cut short, as a broken store might hold. */
	cr_assert_eq(tfs_near_key("s", etag, nk, sizeof(nk)), 0);
	struct tfs_backend *nb = local_at(near_dir);
	cr_assert_eq(tfs_backend_put(nb, nk, tfs_io_buf("the whole"), 9, NULL, NULL), 0);
	tfs_backend_destroy(nb);
	snprintf(path, sizeof(path), "%s/%s", near_dir, nk);
	cr_assert_eq(access(path, F_OK), 0);
	cr_assert_eq(read_at("s", etag, 0, 16, buf), 16);
	cr_assert(memcmp(buf, "the whole object", 16) == 0);
	cr_assert_eq(stat_of("hits"), 0);
}

/* A request that began before the breaker opened and answered after
 * (here a copier's HEAD) must not close it: only the read tried once
 * breaker_ms has passed does. */
Test(near, an_answer_to_an_older_request_does_not_close_the_breaker)
{
	struct tfs_backend *nb = NULL;
	cr_assert_eq(tfs_backend_new(&slow_get_ops, NULL, "slow-get", &nb), 0);
	atomic_store(&held_heads, true);
	atomic_store(&heads_waiting, 0);
	reader = pthread_self();
	compose(nb, local_at(far_dir), 0);
	char etag[4][TFS_ETAG_MAX], buf[32];
	const char *keys[4] = { "k0", "k1", "k2", "k3" };
	for (int i = 0; i < 4; i++) {
		put_far(keys[i], "far bytes");
		etag_of(keys[i], etag[i]);
	}
	/* The first read fails on near, reads far and queues a copy, whose
	 * HEAD of near is held. */
	cr_assert_eq(read_at("k0", etag[0], 0, sizeof(buf), buf), 9);
	for (int i = 0; i < 500 && atomic_load(&heads_waiting) < 1; i++)
		usleep(10000);
	cr_assert_eq(atomic_load(&heads_waiting), 1);
	/* Two more failed reads open the breaker. */
	cr_assert_eq(read_at("k1", etag[1], 0, sizeof(buf), buf), 9);
	cr_assert_eq(read_at("k2", etag[2], 0, sizeof(buf), buf), 9);
	cr_assert_eq(stat_of("breaker_opens"), 1);
	cr_assert_eq(stat_of("errors"), 3);
	/* The held HEADs answer now: the copies exist. */
	atomic_store(&held_heads, false);
	wait_for("copies_existing", 1);
	for (int i = 0; i < 200 && stat_of("copy_budget_used") > 0; i++)
		usleep(10000);
	int calls = atomic_load(&fake_calls);
	cr_assert_eq(read_at("k3", etag[3], 0, sizeof(buf), buf), 9);
	cr_assert_eq(atomic_load(&fake_calls), calls, "near was read with the breaker open");
	cr_assert_eq(stat_of("errors"), 3);
	cr_assert_geq(stat_of("skipped_breaker_open"), 1);
}

Test(near, far_down_a_known_version_is_read_from_near)
{
	/* Make the copy with a working far, then read it with far down. */
	compose(local_at(near_dir), local_at(far_dir), 0);
	put_far("k/obj", "kept in the cluster");
	char etag[TFS_ETAG_MAX], buf[64];
	etag_of("k/obj", etag);
	cr_assert_eq(read_at("k/obj", etag, 0, sizeof(buf), buf), 19);
	wait_for("copies", 1);
	tfs_backend_destroy(be);
	be = NULL;
	compose(local_at(near_dir), fake(), 0);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(read_at("k/obj", etag, 0, 19, buf), 19);
	cr_assert(memcmp(buf, "kept in the cluster", 19) == 0);
	cr_assert_eq(atomic_load(&fake_calls), 0, "far was asked");
	/* An unknown version needs far, and far's error is the reader's. */
	size_t got;
	char e[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_get_range(be, "k/obj", 0, 8, NULL, tfs_io_buf(buf), &got, e), EIO);
}

Test(near, an_object_above_the_budget_is_not_copied)
{
	compose(local_at(near_dir), local_at(far_dir), 1 << 20);
	size_t size = (1 << 20) + 1;
	char *data = malloc(size + 1), *buf = malloc(size + 16);
	memset(data, 'z', size);
	data[size] = '\0';
	put_far("huge", data);
	char etag[TFS_ETAG_MAX];
	etag_of("huge", etag);
	cr_assert_eq(read_at("huge", etag, 0, size + 16, buf), size);
	/* Too big to hold: the copier learns its size from far and drops it. */
	wait_for("copies_dropped", 1);
	cr_assert_eq(stat_of("copies"), 0);
	cr_assert_eq(stat_of("copy_far_rereads"), 0);
	free(data);
	free(buf);
}

Test(near, keys_are_per_version_and_bounded)
{
	char a[64], b[64];
	cr_assert_eq(tfs_near_key("x", "\"e1\"", a, sizeof(a)), 0);
	cr_assert_eq(tfs_near_key("x", "\"e2\"", b, sizeof(b)), 0);
	cr_assert_str_neq(a, b);
	cr_assert_eq(strlen(a), 18);
	cr_assert_eq(tfs_near_key("x", "", a, sizeof(a)), EINVAL);
	cr_assert_eq(tfs_near_key("a-key-too-long-for-the-buffer-given-here-to-fit-at-all-really",
				  "\"e\"", a, sizeof(a)),
		     ENAMETOOLONG);
}
