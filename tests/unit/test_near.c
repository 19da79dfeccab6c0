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
#include "near_fixture.h"
#include "near_key.h"
#include "s3_endpoint.h"

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

static struct tfs_backend *fake(void)
{
	struct tfs_backend *b = NULL;
	cr_assert_eq(tfs_backend_new(&fake_ops, NULL, "down", &b), 0);
	return b;
}

static void setup(void)
{
	near_setup();
	atomic_store(&fake_calls, 0);
	fake_has_copies = false;
}

static void compose(struct tfs_backend *near, struct tfs_backend *far, uint64_t budget)
{
	struct tfs_near_config c = near_test_cfg;
	if (budget)
		c.copy_budget = budget;
	cr_assert_eq(tfs_near_create(&c, near, far, &tlog, &be), 0);
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

TestSuite(near, .init = setup, .fini = near_teardown);

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
	copy_name("a/x.bin", etag, nk, sizeof(nk));
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
	struct tfs_near_config c = near_test_cfg;
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
	copy_name("shard", etag, nk, sizeof(nk));
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
	struct tfs_near_config c = near_test_cfg;
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
	copy_name("s", etag, nk, sizeof(nk));
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

/* A far in front of a local store that can go down (every request EIO),
 * or refuse HEAD and GET of keys under "private/" (EACCES, as a bucket
 * policy that lets a user LIST but not read would); counts its HEADs. */
static atomic_bool gate_down, gate_private;
static atomic_int gate_heads;

static int gate_says(const char *k)
{
	if (atomic_load(&gate_down))
		return EIO;
	return atomic_load(&gate_private) && strncmp(k, "private/", 8) == 0 ? EACCES : 0;
}
static int gate_head(void *p, const char *k, struct tfs_obj_meta *o)
{
	atomic_fetch_add(&gate_heads, 1);
	int rc = gate_says(k);
	return rc ? rc : tfs_backend_head(p, k, o);
}
static int gate_list(void *p, const char *a, const char *b, const char *c, size_t d,
		     struct tfs_list_page *o)
{
	return atomic_load(&gate_down) ? EIO : tfs_backend_list(p, a, b, c, d, o);
}
static int gate_get(void *p, const char *k, uint64_t off, uint64_t len, const char *m,
		    struct tfs_io dst, size_t *got, char etag[TFS_ETAG_MAX])
{
	int rc = gate_says(k);
	return rc ? rc : tfs_backend_get_range(p, k, off, len, m, dst, got, etag);
}
static int gate_put(void *p, const char *k, struct tfs_io s, uint64_t l,
		    const struct tfs_obj_meta *m, char e[TFS_ETAG_MAX])
{
	return atomic_load(&gate_down) ? EIO : tfs_backend_put(p, k, s, l, m, e);
}
static void gate_destroy(void *p)
{
	tfs_backend_destroy(p);
}
static const struct tfs_backend_ops gate_ops = {
	.name = "gate",
	.head = gate_head,
	.list = gate_list,
	.get_range = gate_get,
	.put = gate_put,
	.del = fake_del,
	.copy = fake_copy,
	.destroy = gate_destroy,
};

static struct tfs_backend *gate(void)
{
	struct tfs_backend *b = NULL;
	cr_assert_eq(tfs_backend_new(&gate_ops, local_at(far_dir), "gate", &b), 0);
	atomic_store(&gate_down, false);
	atomic_store(&gate_private, false);
	atomic_store(&gate_heads, 0);
	return b;
}

/* Read through a new composition (a new mount) over the same near. */
static void remount(struct tfs_backend *far)
{
	tfs_backend_destroy(be);
	be = NULL;
	compose(local_at(near_dir), far, 0);
}

Test(near, far_down_a_checked_version_is_read_from_near)
{
	/* Make the copy with a working far, then read it with far down. */
	compose(local_at(near_dir), gate(), 0);
	put_far("k/obj", "kept in the cluster");
	char etag[TFS_ETAG_MAX], buf[64];
	etag_of("k/obj", etag);
	cr_assert_eq(read_at("k/obj", etag, 0, sizeof(buf), buf), 19);
	wait_for("copies", 1);
	atomic_store(&gate_down, true);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(read_at("k/obj", etag, 0, 19, buf), 19);
	cr_assert(memcmp(buf, "kept in the cluster", 19) == 0);
	cr_assert_eq(stat_of("hits"), 1);
	/* An unknown version needs far, and far's error is the reader's. */
	size_t got;
	char e[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_get_range(be, "k/obj", 0, 8, NULL, tfs_io_buf(buf), &got, e), EIO);
	/* A mount that never read the version from far cannot learn whether
	 * it may: the copy is not served. */
	remount(fake());
	cr_assert_eq(tfs_backend_get_range(be, "k/obj", 0, 8, etag, tfs_io_buf(buf), &got, e), EIO);
	cr_assert_eq(stat_of("hits"), 0);
	cr_assert_eq(stat_of("far_refused"), 1);
}

Test(near, a_copy_is_served_only_to_a_mount_far_lets_read_it)
{
	compose(local_at(near_dir), gate(), 0);
	put_far("private/secret", "only for readers");
	put_far("public/open", "for everyone");
	char sec[TFS_ETAG_MAX], pub[TFS_ETAG_MAX], buf[32];
	etag_of("private/secret", sec);
	etag_of("public/open", pub);
	cr_assert_eq(read_at("private/secret", sec, 0, sizeof(buf), buf), 16);
	cr_assert_eq(read_at("public/open", pub, 0, sizeof(buf), buf), 12);
	wait_for("copies", 2);
	/* A mount whose credentials far refuses private/ (it knows the
	 * versions from a listing) gets far's error, not the copy. */
	remount(gate());
	atomic_store(&gate_private, true);
	size_t got = 0;
	char e[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_get_range(be, "private/secret", 0, sizeof(buf), sec,
					   tfs_io_buf(buf), &got, e),
		     EACCES);
	cr_assert_eq(stat_of("hits"), 0);
	cr_assert_eq(stat_of("far_refused"), 1);
	/* What it may read is served from near, after one far check that
	 * is then remembered. */
	cr_assert_eq(read_at("public/open", pub, 0, 12, buf), 12);
	cr_assert(memcmp(buf, "for everyone", 12) == 0);
	cr_assert_eq(read_at("public/open", pub, 4, 8, buf), 8);
	cr_assert_eq(stat_of("hits"), 2);
	cr_assert_eq(stat_of("far_checks"), 2);
	cr_assert_eq(atomic_load(&gate_heads), 2);
	cr_assert_eq(far_gets(), 0);
	/* A HEAD through the composition counts as the check. */
	put_far("public/two", "headed first");
	etag_of("public/two", pub);
	cr_assert_eq(read_at("public/two", pub, 0, 12, buf), 12);
	cr_assert_eq(stat_of("far_checks"), 2, "a HEAD before the near read");
}

/* A far check holds for check_ttl_ms (the metadata TTL): with 0, every
 * near read asks far first. */
Test(near, a_far_check_holds_for_the_ttl_only)
{
	compose(local_at(near_dir), gate(), 0);
	put_far("t", "twelve bytes");
	char etag[TFS_ETAG_MAX], buf[12];
	etag_of("t", etag);
	cr_assert_eq(read_at("t", etag, 0, 12, buf), 12);
	wait_for("copies", 1);
	tfs_backend_destroy(be);
	struct tfs_near_config c = near_test_cfg;
	c.check_ttl_ms = 0;
	cr_assert_eq(tfs_near_create(&c, local_at(near_dir), gate(), &tlog, &be), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(read_at("t", etag, 0, 12, buf), 12);
	cr_assert_eq(stat_of("hits"), 3);
	cr_assert_eq(stat_of("far_checks"), 3);
	cr_assert_eq(atomic_load(&gate_heads), 3);
}

/* The secret kept in near: the first mount makes it, the next reads it,
 * and both name the copies alike. */
Test(near, mounts_share_the_secret_kept_in_near)
{
	struct tfs_near_config c = near_test_cfg;
	c.key = NULL;
	cr_assert_eq(tfs_near_create(&c, local_at(near_dir), local_at(far_dir), &tlog, &be), 0);
	char path[256], first[80] = "", again[80] = "";
	snprintf(path, sizeof(path), "%s/%s", near_dir, TFS_NEAR_SECRET_OBJECT);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "no secret made");
	cr_assert_eq(fread(first, 1, sizeof(first) - 1, f), TFS_NEAR_SECRET_TEXT);
	fclose(f);
	put_far("shared", "named alike on every node");
	char etag[TFS_ETAG_MAX], buf[32];
	etag_of("shared", etag);
	cr_assert_eq(read_at("shared", etag, 0, sizeof(buf), buf), 25);
	wait_for("copies", 1);
	tfs_backend_destroy(be);
	cr_assert_eq(tfs_near_create(&c, local_at(near_dir), local_at(far_dir), &tlog, &be), 0);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fread(again, 1, sizeof(again) - 1, f), TFS_NEAR_SECRET_TEXT);
	fclose(f);
	cr_assert_str_eq(first, again, "the secret was made again");
	cr_assert_eq(read_at("shared", etag, 0, 25, buf), 25);
	cr_assert_eq(stat_of("hits"), 1, "the second mount named the copy otherwise");
	/* near.key names them otherwise. */
	remount(local_at(far_dir));
	cr_assert_eq(read_at("shared", etag, 0, 25, buf), 25);
	cr_assert_eq(stat_of("hits"), 0);
}

Test(near, a_malformed_secret_stops_near_not_the_reads)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", near_dir, TFS_NEAR_SECRET_OBJECT);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("not a secret", f);
	fclose(f);
	struct tfs_near_config c = near_test_cfg;
	c.key = NULL;
	cr_assert_eq(tfs_near_create(&c, local_at(near_dir), local_at(far_dir), &tlog, &be), 0);
	cr_assert_eq(stat_of("breaker_opens"), 1);
	put_far("m", "still read");
	char etag[TFS_ETAG_MAX], buf[16];
	etag_of("m", etag);
	cr_assert_eq(read_at("m", etag, 0, sizeof(buf), buf), 10);
	cr_assert(memcmp(buf, "still read", 10) == 0);
	cr_assert_eq(stat_of("copies_queued"), 0);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	cr_assert_eq(fread(buf, 1, sizeof(buf), f), 12, "overwritten");
	fclose(f);
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

Test(near, names_are_per_version_source_and_secret_and_bounded)
{
	uint8_t k1[TFS_NEAR_SECRET_LEN], k2[TFS_NEAR_SECRET_LEN];
	tfs_near_secret_from_text("first secret text", 17, k1);
	tfs_near_secret_from_text("other secret text", 17, k2);
	struct tfs_near_source s1 = { "http://a:80", "b", "p/" };
	struct tfs_near_source others[] = {
		{ "http://c:80", "b", "p/" },
		{ "http://a:80", "c", "p/" },
		{ "http://a:80", "b", "q/" },
		{ "http://a:80", "b", "" },
		/* the fields are length-prefixed: no shift makes the same text */
		{ "http://a:80", "bp/", "" },
	};
	char a[128], b[128];
	cr_assert_eq(tfs_near_copy_name(k1, &s1, "x", "\"e1\"", a, sizeof(a)), 0);
	cr_assert_eq(strlen(a), TFS_NEAR_NAME_HEX + 2);
	cr_assert_str_eq(a + TFS_NEAR_NAME_HEX, "/x");
	cr_assert(tfs_near_is_copy_name(a));
	cr_assert_eq(tfs_near_copy_name(k1, &s1, "x", "\"e1\"", b, sizeof(b)), 0);
	cr_assert_str_eq(a, b, "one name for one version");
	cr_assert_eq(tfs_near_copy_name(k1, &s1, "x", "\"e2\"", b, sizeof(b)), 0);
	cr_assert_str_neq(a, b, "per version");
	cr_assert_eq(tfs_near_copy_name(k2, &s1, "x", "\"e1\"", b, sizeof(b)), 0);
	cr_assert_str_neq(a, b, "per secret");
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		cr_assert_eq(tfs_near_copy_name(k1, &others[i], "x", "\"e1\"", b, sizeof(b)), 0);
		cr_assert_str_neq(a, b, "source %zu names the same copy", i);
	}
	cr_assert_eq(tfs_near_copy_name(k1, &s1, "x", "", a, sizeof(a)), EINVAL);
	cr_assert_eq(tfs_near_copy_name(k1, &s1, "", "\"e\"", a, sizeof(a)), EINVAL);
	cr_assert_eq(tfs_near_copy_name(k1, &s1, "a-key-too-long-for-the-buffer-given-here-to-fit",
					"\"e\"", a, 48),
		     ENAMETOOLONG);
}

Test(near, only_tagged_copies_are_copies)
{
	struct tfs_obj_meta m = { 0 };
	const char *n32 = "0123456789abcdef0123456789abcdef/k/x";
	const char *n16 = "0123456789abcdef/k/x";
	cr_assert(tfs_near_is_copy_name(n32) && tfs_near_is_copy_name(n16));
	cr_assert(!tfs_near_is_copy_name("0123456789abcdeg/k") && !tfs_near_is_copy_name("abc/k"));
	cr_assert(!tfs_near_is_copy_name("0123456789abcdef/") &&
		  !tfs_near_is_copy_name(TFS_NEAR_SECRET_OBJECT));
	cr_assert(!tfs_near_copy_tagged(n32, &m), "untagged");
	cr_assert_eq(tfs_obj_meta_set(&m, TFS_NEAR_COPY_TAG, "other"), 0);
	cr_assert(!tfs_near_copy_tagged(n32, &m), "another tag value");
	cr_assert_eq(tfs_obj_meta_set(&m, TFS_NEAR_COPY_TAG, TFS_NEAR_COPY_TAG_VALUE), 0);
	cr_assert(tfs_near_copy_tagged(n32, &m));
	cr_assert(!tfs_near_copy_tagged(n16, &m), "the old scheme has its own marks");
	tfs_obj_meta_clear(&m);
	/* A copy of the scheme before: its metadata names its key. */
	cr_assert_eq(tfs_obj_meta_set(&m, "tierfs-key", "k/x"), 0);
	cr_assert(!tfs_near_copy_tagged(n16, &m), "no tierfs-etag");
	cr_assert_eq(tfs_obj_meta_set(&m, "tierfs-etag", "\"e\""), 0);
	cr_assert(tfs_near_copy_tagged(n16, &m));
	cr_assert(!tfs_near_copy_tagged("0123456789abcdef/k/y", &m), "another key");
	tfs_obj_meta_clear(&m);
}

Test(near, endpoints_compare_canonical)
{
	char a[256], b[256];
	cr_assert_eq(tfs_s3_endpoint_canonical("http://HOST.example", NULL, a, sizeof(a)), 0);
	cr_assert_str_eq(a, "http://host.example:80");
	cr_assert_eq(tfs_s3_endpoint_canonical("HTTP://host.example:80/", NULL, b, sizeof(b)), 0);
	cr_assert_str_eq(a, b);
	cr_assert_eq(tfs_s3_endpoint_canonical("https://h", NULL, a, sizeof(a)), 0);
	cr_assert_str_eq(a, "https://h:443");
	cr_assert_eq(tfs_s3_endpoint_canonical("http://h:8080", NULL, a, sizeof(a)), 0);
	cr_assert_str_eq(a, "http://h:8080");
	cr_assert_eq(tfs_s3_endpoint_canonical(NULL, "eu-west-1", a, sizeof(a)), 0);
	cr_assert_str_eq(a, "https://s3.eu-west-1.amazonaws.com:443");
	cr_assert_eq(tfs_s3_endpoint_canonical("ftp://h", NULL, a, sizeof(a)), EINVAL);
	cr_assert_eq(tfs_s3_endpoint_canonical("http://h/path", NULL, a, sizeof(a)), EINVAL);
	cr_assert_eq(tfs_s3_endpoint_canonical("http://h", NULL, a, 8), ENAMETOOLONG);
}
