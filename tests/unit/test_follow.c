/* test_follow.c - where the sampler-order prefetch thinks the reader is.
 *
 * No fetch threads run (workers = 0), so only the position logic of
 * tfs_follow_opened() is exercised: what it reports to `tierfs warmup
 * --follow` and to `tierfs stats`. */
#include "config.h"

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "follow.h"
#include "log.h"

#define N 100

static struct tfs_log tlog;
static struct tfs_follow *fol;
static char keys[N][32];

static void setup(void)
{
	tfs_log_init_stderr(&tlog, TFS_LOG_WARN);
	cr_assert_eq(tfs_follow_create(NULL, NULL, 0, 4, &tlog, &fol), 0);
	struct tfs_manifest_entry v[N];
	for (int i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "d/f%03d.jpg", i);
		v[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1, .key = keys[i] };
	}
	struct tfs_manifest m = { .v = v, .n = N };
	cr_assert_eq(tfs_follow_set(fol, &m), 0);
}

static void teardown(void)
{
	tfs_follow_destroy(fol);
}

static uint64_t pos(void)
{
	uint64_t p, len, fetched;
	tfs_follow_position(fol, &p, &len, &fetched);
	cr_assert_eq(len, N);
	return p;
}

static void open_range(int from, int to)
{
	for (int i = from; i < to; i++)
		tfs_follow_opened(fol, keys[i]);
}

TestSuite(follow, .init = setup, .fini = teardown);

Test(follow, sequential_reader_reaches_the_end)
{
	cr_assert_eq(pos(), 0);
	open_range(0, 10);
	cr_assert_eq(pos(), 10);
	tfs_follow_opened(fol, "not/in/the/order");
	cr_assert_eq(pos(), 10);
	open_range(10, N);
	cr_assert_eq(pos(), N);
}

/* A thread stalled on one file opens it long after the others moved on:
 * the reader is still where the others are (the CI failure of
 * follow_control_file: the position fell back to the late file). */
Test(follow, a_late_first_open_does_not_move_the_reader_back)
{
	open_range(0, 10);
	open_range(11, N);
	tfs_follow_opened(fol, keys[10]);
	cr_assert_eq(pos(), N);
	/* Several stragglers, far apart. */
	struct tfs_manifest_entry v[N];
	for (int i = 0; i < N; i++)
		v[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1, .key = keys[i] };
	struct tfs_manifest m = { .v = v, .n = N };
	cr_assert_eq(tfs_follow_set(fol, &m), 0);
	cr_assert_eq(pos(), 0);
	for (int i = 0; i < N; i++)
		if (i % 30 != 5)
			tfs_follow_opened(fol, keys[i]);
	for (int i = 5; i < N; i += 30)
		tfs_follow_opened(fol, keys[i]);
	cr_assert_eq(pos(), N);
}

/* The same order read again (a new epoch without a new order file)
 * starts the pass over. */
Test(follow, reading_the_order_again_starts_a_new_pass)
{
	open_range(0, N);
	cr_assert_eq(pos(), N);
	open_range(0, 3);
	cr_assert_eq(pos(), 3);
	open_range(3, 50);
	cr_assert_eq(pos(), 50);
	/* ... also from the middle, well behind the reader. */
	open_range(10, 12);
	cr_assert_eq(pos(), 12);
}

/* Loaders that open a file twice (header, then data) reopen it while
 * the reader is still near it: that is no new pass. */
Test(follow, an_immediate_reopen_is_not_a_new_pass)
{
	open_range(0, 20);
	tfs_follow_opened(fol, keys[18]);
	tfs_follow_opened(fol, keys[19]);
	cr_assert_eq(pos(), 20);
	open_range(20, 30);
	cr_assert_eq(pos(), 30);
}

Test(follow, skipping_forward_moves_the_reader)
{
	open_range(0, 5);
	open_range(60, 62);
	cr_assert_eq(pos(), 62);
	struct json_object *o = json_object_new_object();
	tfs_follow_stats(fol, o);
	struct json_object *f, *v;
	cr_assert(json_object_object_get_ex(o, "follow", &f));
	cr_assert(json_object_object_get_ex(f, "realigned", &v));
	cr_assert_geq(json_object_get_uint64(v), 1);
	cr_assert(json_object_object_get_ex(f, "opened_in_order", &v));
	cr_assert_eq(json_object_get_uint64(v), 7);
	json_object_put(o);
}

Test(follow, an_empty_order_stops_following)
{
	open_range(0, 5);
	struct tfs_manifest none = { 0 };
	cr_assert_eq(tfs_follow_set(fol, &none), 0);
	uint64_t p, len, fetched;
	tfs_follow_position(fol, &p, &len, &fetched);
	cr_assert_eq(len, 0);
	cr_assert_eq(p, 0);
	tfs_follow_opened(fol, keys[3]); /* no order: ignored */
	tfs_follow_position(fol, &p, &len, &fetched);
	cr_assert_eq(p, 0);
}
