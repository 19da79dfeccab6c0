/* test_follow.c - where the sampler-order prefetch thinks each reader
 * is, which stream an open is credited to, and how the streams share the
 * budget.
 *
 * No fetch threads run (workers = 0): the fetch threads' steps are driven
 * by the tests (tfs_follow_take/sized/done), with a clock of their own. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "follow.h"
#include "log.h"

#define N 100
#define STALL 1000
#define BUDGET 1000

static struct tfs_log tlog;
static struct tfs_follow *fol;
static char keys[N][32];
static struct tfs_follow_owner self;
static uint64_t fake_now = 1000000;

static uint64_t fake_clock(void)
{
	return fake_now;
}

/* An order of keys[perm[i]] (perm NULL: keys in order), set by `owner`. */
static void set_order(const struct tfs_follow_owner *owner, const int *perm, int n)
{
	struct tfs_manifest_entry v[N];
	for (int i = 0; i < n; i++)
		v[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1,
						    .key = keys[perm ? perm[i] : i] };
	struct tfs_manifest m = { .v = v, .n = (size_t)n };
	cr_assert_eq(tfs_follow_set(fol, owner, 0, &m), 0);
}

static void setup(void)
{
	tfs_log_init_stderr(&tlog, TFS_LOG_WARN);
	struct tfs_follow_config cfg = { .workers = 0,
					 .window = 4,
					 .stall_ms = STALL,
					 .budget = BUDGET,
					 .clock_ms = fake_clock };
	cr_assert_eq(tfs_follow_create(NULL, NULL, &cfg, &tlog, &fol), 0);
	for (int i = 0; i < N; i++)
		snprintf(keys[i], sizeof(keys[i]), "d/f%03d.jpg", i);
	tfs_follow_owner_of(getpid(), &self);
	cr_assert_eq(self.pid, getpid());
	cr_assert_neq(self.start, 0);
	set_order(&self, NULL, N);
}

static void teardown(void)
{
	tfs_follow_destroy(fol);
}

/* The "follow" object of the stats (put it with json_object_put). */
static struct json_object *stats(struct json_object **follow)
{
	struct json_object *o = json_object_new_object();
	tfs_follow_stats(fol, o);
	cr_assert(json_object_object_get_ex(o, "follow", follow));
	return o;
}

static uint64_t total(const char *field)
{
	struct json_object *f, *v;
	struct json_object *o = stats(&f);
	cr_assert(json_object_object_get_ex(f, field, &v), "%s", field);
	uint64_t r = json_object_get_uint64(v);
	json_object_put(o);
	return r;
}

static uint64_t nstreams(void)
{
	struct json_object *f, *a;
	struct json_object *o = stats(&f);
	cr_assert(json_object_object_get_ex(f, "streams", &a));
	uint64_t n = json_object_array_length(a);
	json_object_put(o);
	return n;
}

/* Field `field` of the stream owned by `pid` (0: the first without an
 * owner); string fields give 1 for "active", 0 for anything else. */
static uint64_t stream_field(pid_t pid, const char *field)
{
	struct json_object *f, *a, *v;
	struct json_object *o = stats(&f);
	cr_assert(json_object_object_get_ex(f, "streams", &a));
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *s = json_object_array_get_idx(a, i);
		cr_assert(json_object_object_get_ex(s, "owner", &v));
		if (pid ? v == NULL || json_object_get_int64(v) != pid : v != NULL)
			continue;
		cr_assert(json_object_object_get_ex(s, field, &v), "%s", field);
		uint64_t r = json_object_is_type(v, json_type_string)
				     ? strcmp(json_object_get_string(v), "active") == 0
				     : json_object_get_uint64(v);
		json_object_put(o);
		return r;
	}
	json_object_put(o);
	cr_assert_fail("no stream of owner %ld", (long)pid);
	return 0;
}

static bool has_stream(pid_t pid)
{
	struct json_object *f, *a, *v;
	struct json_object *o = stats(&f);
	cr_assert(json_object_object_get_ex(f, "streams", &a));
	bool found = false;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *s = json_object_array_get_idx(a, i);
		cr_assert(json_object_object_get_ex(s, "owner", &v));
		found |= v && json_object_get_int64(v) == pid;
	}
	json_object_put(o);
	return found;
}

static uint64_t pos(void)
{
	cr_assert_eq(total("order_files"), N);
	return total("position");
}

static void open_range(int from, int to)
{
	for (int i = from; i < to; i++)
		tfs_follow_opened(fol, keys[i], getpid());
}

TestSuite(follow, .init = setup, .fini = teardown);

Test(follow, sequential_reader_reaches_the_end)
{
	cr_assert_eq(pos(), 0);
	open_range(0, 10);
	cr_assert_eq(pos(), 10);
	tfs_follow_opened(fol, "not/in/the/order", getpid());
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
	tfs_follow_opened(fol, keys[10], getpid());
	cr_assert_eq(pos(), N);
	/* Several stragglers, far apart. */
	set_order(&self, NULL, N);
	cr_assert_eq(pos(), 0);
	for (int i = 0; i < N; i++)
		if (i % 30 != 5)
			tfs_follow_opened(fol, keys[i], getpid());
	for (int i = 5; i < N; i += 30)
		tfs_follow_opened(fol, keys[i], getpid());
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
	tfs_follow_opened(fol, keys[18], getpid());
	tfs_follow_opened(fol, keys[19], getpid());
	cr_assert_eq(pos(), 20);
	open_range(20, 30);
	cr_assert_eq(pos(), 30);
}

Test(follow, skipping_forward_moves_the_reader)
{
	open_range(0, 5);
	open_range(60, 62);
	cr_assert_eq(pos(), 62);
	cr_assert_geq(total("realigned"), 1);
	cr_assert_eq(total("opened_in_order"), 7);
}

Test(follow, an_empty_order_stops_following)
{
	open_range(0, 5);
	set_order(&self, NULL, 0);
	cr_assert_eq(total("order_files"), 0);
	cr_assert_eq(total("position"), 0);
	cr_assert_eq(nstreams(), 0);
	tfs_follow_opened(fol, keys[3], getpid()); /* no order: ignored */
	cr_assert_eq(total("position"), 0);
}

/* ---- several streams ---- */

static int hold[2] = { -1, -1 }; /* children live until the test's end closes hold[1] */

static void linger(void)
{
	close(hold[1]);
	char c;
	while (read(hold[0], &c, 1) > 0)
		;
	_exit(0);
}

/* A child process that lives as long as this test. */
static pid_t spawn(void)
{
	if (hold[0] < 0)
		cr_assert_eq(pipe(hold), 0);
	pid_t p = fork();
	cr_assert_geq(p, 0);
	if (p == 0)
		linger();
	return p;
}

/* A grandchild (a child of a child) that lives as long as this test. */
static pid_t spawn_grandchild(void)
{
	int r[2];
	cr_assert_eq(pipe(r), 0);
	if (hold[0] < 0)
		cr_assert_eq(pipe(hold), 0);
	pid_t mid = fork();
	cr_assert_geq(mid, 0);
	if (mid == 0) {
		pid_t g = fork();
		if (g == 0)
			linger();
		if (write(r[1], &g, sizeof(g)) != sizeof(g))
			_exit(1);
		linger();
	}
	pid_t g = 0;
	cr_assert_eq(read(r[0], &g, sizeof(g)), (ssize_t)sizeof(g));
	close(r[0]);
	close(r[1]);
	return g;
}

static struct tfs_follow_owner owner(pid_t pid)
{
	struct tfs_follow_owner o;
	tfs_follow_owner_of(pid, &o);
	cr_assert_eq(o.pid, pid);
	return o;
}

static int reversed[N];

static void init_reversed(void)
{
	for (int i = 0; i < N; i++)
		reversed[i] = N - 1 - i;
}

/* Two processes (DistributedSampler ranks, or two jobs) read the same
 * files in different orders: each open is credited to the opener's own
 * stream, whatever the other's window says. */
Test(follow, two_writers_of_the_same_files_are_followed_apart)
{
	init_reversed();
	pid_t b = spawn();
	struct tfs_follow_owner ob = owner(b);
	set_order(&ob, reversed, N);
	cr_assert_eq(nstreams(), 2);
	cr_assert_eq(total("order_files"), 2 * N);
	open_range(0, 20); /* as in self's order */
	for (int i = 0; i < 10; i++)
		tfs_follow_opened(fol, keys[reversed[i]], b);
	cr_assert_eq(stream_field(getpid(), "position"), 20);
	cr_assert_eq(stream_field(getpid(), "opened_in_order"), 20);
	cr_assert_eq(stream_field(b, "position"), 10);
	cr_assert_eq(stream_field(b, "opened_in_order"), 10);
	cr_assert_eq(total("realigned"), 0);
	cr_assert_eq(total("position"), 30);
}

/* Data-loader workers are children (or, with forkserver, grandchildren)
 * of the process that wrote the order: their opens are its reader's,
 * even where another stream's window is closer. */
Test(follow, children_and_grandchildren_of_the_writer_are_its_reader)
{
	init_reversed();
	pid_t b = spawn();
	struct tfs_follow_owner ob = owner(b);
	set_order(&ob, reversed, N);
	pid_t c = spawn(), g = spawn_grandchild();
	/* keys 99, 98...: the start of b's window, the end of self's order. */
	for (int i = 0; i < 5; i++)
		tfs_follow_opened(fol, keys[reversed[i]], c);
	for (int i = 5; i < 10; i++)
		tfs_follow_opened(fol, keys[reversed[i]], g);
	cr_assert_eq(stream_field(getpid(), "opened_in_order"), 10);
	cr_assert_eq(stream_field(b, "opened_in_order"), 0);
	/* A child of b is b's reader. */
	tfs_follow_opened(fol, keys[50], b);
	cr_assert_eq(stream_field(b, "opened_in_order"), 1);
}

/* Disjoint orders (DistributedSampler): the key alone tells the stream,
 * whoever opens it. */
Test(follow, disjoint_orders_are_credited_by_the_key)
{
	set_order(&self, NULL, N / 2);
	struct tfs_manifest_entry v[N / 2];
	for (int i = 0; i < N / 2; i++)
		v[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1,
						    .key = keys[N / 2 + i] };
	struct tfs_manifest m = { .v = v, .n = N / 2 };
	uint64_t id, p, len, fetched;
	cr_assert_eq(tfs_follow_add(fol, &m, 0, &id), 0);
	for (int i = 0; i < 7; i++) {
		tfs_follow_opened(fol, keys[i], 0);
		tfs_follow_opened(fol, keys[N / 2 + i], 0);
	}
	cr_assert_eq(stream_field(getpid(), "position"), 7);
	tfs_follow_position(fol, id, &p, &len, &fetched);
	cr_assert_eq(p, 7);
	cr_assert_eq(len, N / 2);
	tfs_follow_remove(fol, id);
	tfs_follow_position(fol, id, &p, &len, &fetched);
	cr_assert_eq(len, 0);
	cr_assert_eq(nstreams(), 1);
}

/* No owner among the streams holding the key: the window the key is
 * closest ahead in. */
Test(follow, without_an_owner_the_closest_window_wins)
{
	init_reversed();
	set_order(&self, NULL, 0);
	struct tfs_manifest_entry v1[N], v2[N];
	for (int i = 0; i < N; i++) {
		v1[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1, .key = keys[i] };
		v2[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1,
						     .key = keys[reversed[i]] };
	}
	struct tfs_manifest m1 = { .v = v1, .n = N }, m2 = { .v = v2, .n = N };
	uint64_t id1, id2, p, len, fetched;
	cr_assert_eq(tfs_follow_add(fol, &m1, 0, &id1), 0);
	cr_assert_eq(tfs_follow_add(fol, &m2, 0, &id2), 0);
	for (int i = 0; i < 3; i++) {
		tfs_follow_opened(fol, keys[i], 0);           /* 1: ahead by 0; 2: 99 - i */
		tfs_follow_opened(fol, keys[reversed[i]], 0); /* 2: ahead by 0 */
	}
	tfs_follow_position(fol, id1, &p, &len, &fetched);
	cr_assert_eq(p, 3);
	tfs_follow_position(fol, id2, &p, &len, &fetched);
	cr_assert_eq(p, 3);
	cr_assert_eq(total("realigned"), 0);

	size_t idx[] = { 10, 3, 50 }, cur[] = { 5, 4, 49 };
	cr_assert_eq(tfs_follow_closest(idx, cur, 3), 2); /* ahead by 1 beats behind by 1 */
	size_t idx2[] = { 3, 10 }, cur2[] = { 4, 20 };
	cr_assert_eq(tfs_follow_closest(idx2, cur2, 2), 0); /* none ahead: closest behind */
	size_t idx3[] = { 7 }, cur3[] = { 0 };
	cr_assert_eq(tfs_follow_closest(idx3, cur3, 1), 0);
}

Test(follow, policy_functions)
{
	cr_assert_eq(tfs_follow_share(1000, 0), 1000);
	cr_assert_eq(tfs_follow_share(1000, 1), 1000);
	cr_assert_eq(tfs_follow_share(1000, 3), 333);
	cr_assert_not(tfs_follow_stalled(100, 1099, 1000));
	cr_assert(tfs_follow_stalled(100, 1100, 1000));
	cr_assert_not(tfs_follow_stalled(100, 1000000, 0)); /* 0: never */
	cr_assert_not(tfs_follow_stalled(100, 50, 1000));   /* a clock behind */
}

static struct tfs_follow_job take(void)
{
	struct tfs_follow_job j;
	cr_assert_eq(tfs_follow_take(fol, &j), 0);
	return j;
}

/* At most `window` files ahead of a reader, each stream. */
Test(follow, the_window_bounds_the_files_ahead)
{
	struct tfs_follow_job j[4];
	for (int i = 0; i < 4; i++) {
		j[i] = take();
		cr_assert_str_eq(j[i].key, keys[i]);
	}
	struct tfs_follow_job x;
	cr_assert_eq(tfs_follow_take(fol, &x), ENOENT);
	cr_assert_eq(stream_field(getpid(), "files_ahead"), 4);
	open_range(0, 1);
	x = take();
	cr_assert_str_eq(x.key, keys[4]);
	for (int i = 0; i < 4; i++)
		tfs_follow_done(fol, &j[i], 0);
	tfs_follow_done(fol, &x, EIO);
	cr_assert_eq(stream_field(getpid(), "prefetched_files"), 4);
	cr_assert_eq(stream_field(getpid(), "failed_files"), 1);
	cr_assert_eq(total("prefetched_files"), 4);
}

/* The streams are served in turn, and an active stream holds at most its
 * share of the budget ahead of its reader. */
Test(follow, streams_are_served_in_turn_within_their_shares)
{
	init_reversed();
	pid_t b = spawn();
	struct tfs_follow_owner ob = owner(b);
	set_order(&ob, reversed, N);
	struct tfs_follow_job j1 = take(), j2 = take();
	cr_assert_neq(j1.stream, j2.stream, "one stream served twice in a row");
	struct tfs_follow_job ja = strcmp(j1.key, keys[0]) == 0 ? j1 : j2;
	struct tfs_follow_job jb = strcmp(j1.key, keys[0]) == 0 ? j2 : j1;
	cr_assert_str_eq(ja.key, keys[0]);
	cr_assert_str_eq(jb.key, keys[N - 1]);
	/* Two active streams: 500 bytes each. */
	cr_assert_eq(total("share_bytes"), BUDGET / 2);
	cr_assert(tfs_follow_sized(fol, &ja, 600));
	cr_assert(tfs_follow_sized(fol, &jb, 499));
	cr_assert_eq(stream_field(getpid(), "bytes_ahead"), 600);
	struct tfs_follow_job x = take();
	cr_assert_str_eq(x.key, keys[N - 2], "b is below its share");
	cr_assert(tfs_follow_sized(fol, &x, 1));
	struct tfs_follow_job y;
	cr_assert_eq(tfs_follow_take(fol, &y), EAGAIN, "both shares are spent");
	/* Self's reader opens its file: nothing of its share is held. */
	open_range(0, 1);
	cr_assert_eq(stream_field(getpid(), "bytes_ahead"), 0);
	y = take();
	cr_assert_str_eq(y.key, keys[1]);
	tfs_follow_done(fol, &ja, 0);
	tfs_follow_done(fol, &jb, 0);
	tfs_follow_done(fol, &x, 0);
	tfs_follow_done(fol, &y, 0);
	cr_assert_eq(stream_field(b, "prefetched_files"), 2);
	cr_assert_eq(stream_field(getpid(), "prefetched_files"), 2);
}

/* A stream whose reader opens nothing for prefetch.stall is idle: it
 * fetches nothing, and the others' shares grow; its next open wakes it. */
Test(follow, a_stalled_reader_gives_its_share_up)
{
	init_reversed();
	pid_t b = spawn();
	struct tfs_follow_owner ob = owner(b);
	set_order(&ob, reversed, N);
	struct tfs_follow_job j = take(), k = take();
	cr_assert(tfs_follow_sized(fol, &j, 500));
	cr_assert(tfs_follow_sized(fol, &k, 500));
	struct tfs_follow_job x;
	cr_assert_eq(tfs_follow_take(fol, &x), EAGAIN);
	fake_now += STALL / 2;
	open_range(0, 1); /* self's reader moves on; b's does not */
	fake_now += STALL / 2;
	cr_assert_eq(stream_field(b, "state"), 0, "b is not idle");
	cr_assert_eq(stream_field(getpid(), "state"), 1);
	cr_assert_eq(total("active_streams"), 1);
	cr_assert_eq(total("share_bytes"), BUDGET);
	/* Only self's files now, up to its window. */
	for (int i = 1; i < 5; i++) {
		x = take();
		cr_assert_str_eq(x.key, keys[i]);
		cr_assert(tfs_follow_sized(fol, &x, 100));
		tfs_follow_done(fol, &x, 0);
	}
	cr_assert_eq(tfs_follow_take(fol, &x), ENOENT);
	/* b's reader comes back. */
	tfs_follow_opened(fol, keys[reversed[0]], b);
	cr_assert_eq(stream_field(b, "state"), 1);
	cr_assert_eq(total("active_streams"), 2);
	x = take();
	cr_assert_str_eq(x.key, keys[reversed[1]]);
	tfs_follow_done(fol, &x, 0);
	/* Everyone stalls. */
	fake_now += STALL;
	cr_assert_eq(total("active_streams"), 0);
	cr_assert_eq(tfs_follow_take(fol, &x), ENOENT);
	tfs_follow_done(fol, &j, 0);
	tfs_follow_done(fol, &k, 0);
}

/* A job of an order that was replaced is not fetched nor counted. */
Test(follow, a_new_order_makes_jobs_stale)
{
	struct tfs_follow_job j = take();
	set_order(&self, NULL, N);
	cr_assert_not(tfs_follow_sized(fol, &j, 10));
	tfs_follow_done(fol, &j, ECANCELED);
	cr_assert_eq(total("prefetched_files"), 0);
	cr_assert_eq(total("failed_files"), 0);
	cr_assert_eq(stream_field(getpid(), "bytes_ahead"), 0);
}

/* Beyond TFS_FOLLOW_MAX_STREAMS the stream quiet longest is dropped. */
Test(follow, beyond_the_most_streams_the_quietest_goes)
{
	struct tfs_manifest_entry v[1] = { { .line = 1, .key = keys[0] } };
	struct tfs_manifest m = { .v = v, .n = 1 };
	uint64_t ids[TFS_FOLLOW_MAX_STREAMS], p, len, fetched;
	for (int i = 0; i < TFS_FOLLOW_MAX_STREAMS - 1; i++) {
		fake_now++;
		cr_assert_eq(tfs_follow_add(fol, &m, 0, &ids[i]), 0);
	}
	cr_assert_eq(nstreams(), TFS_FOLLOW_MAX_STREAMS);
	fake_now++;
	open_range(1, 2); /* self's reader: the most recent */
	fake_now++;
	cr_assert_eq(tfs_follow_add(fol, &m, 0, &ids[TFS_FOLLOW_MAX_STREAMS - 1]), 0);
	cr_assert_eq(nstreams(), TFS_FOLLOW_MAX_STREAMS);
	cr_assert_eq(total("dropped_streams"), 1);
	tfs_follow_position(fol, ids[0], &p, &len, &fetched);
	cr_assert_eq(len, 0, "the quietest stream is still there");
	tfs_follow_position(fol, ids[1], &p, &len, &fetched);
	cr_assert_eq(len, 1);
	cr_assert(has_stream(getpid()));
}

/* The stream of a process that is gone (or whose pid now names another
 * process) is dropped at the next order set; a live one stays. */
Test(follow, streams_of_gone_processes_are_dropped)
{
	pid_t b = spawn(), c = spawn(), d = spawn();
	struct tfs_follow_owner ob = owner(b), oc = owner(c), od = owner(d);
	set_order(&ob, NULL, N);
	oc.start += 7; /* c's pid, but another process */
	set_order(&oc, NULL, N);
	cr_assert_eq(nstreams(), 3);
	cr_assert(has_stream(c));
	set_order(&od, NULL, N);
	cr_assert_not(has_stream(c));
	cr_assert(has_stream(b));
	kill(b, SIGKILL);
	cr_assert_eq(waitpid(b, NULL, 0), b);
	set_order(&self, NULL, N);
	cr_assert_not(has_stream(b));
	cr_assert(has_stream(d));
	cr_assert(has_stream(getpid()));
	/* An empty order removes its writer's stream only. */
	set_order(&od, NULL, 0);
	cr_assert_not(has_stream(d));
	cr_assert_eq(nstreams(), 1);
}

static int tid_pipe[2], stay_pipe[2];

static void *report_tid(void *arg)
{
	(void)arg;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	char c;
	if (write(tid_pipe[1], &tid, sizeof(tid)) == sizeof(tid))
		(void)read(stay_pipe[0], &c, 1); /* alive until the test has looked */
	return NULL;
}

/* FUSE gives the opener's thread id: the owner is its process. */
Test(follow, the_owner_of_a_thread_is_its_process)
{
	pthread_t t;
	pid_t tid = 0;
	cr_assert_eq(pipe(tid_pipe), 0);
	cr_assert_eq(pipe(stay_pipe), 0);
	cr_assert_eq(pthread_create(&t, NULL, report_tid, NULL), 0);
	cr_assert_eq(read(tid_pipe[0], &tid, sizeof(tid)), (ssize_t)sizeof(tid));
	cr_assert_neq(tid, getpid());
	struct tfs_follow_owner o, me;
	tfs_follow_owner_of(tid, &o);
	close(stay_pipe[1]);
	cr_assert_eq(pthread_join(t, NULL), 0);
	tfs_follow_owner_of(getpid(), &me);
	cr_assert_eq(o.pid, getpid());
	cr_assert_eq(o.start, me.start);
	cr_assert_neq(me.start, 0);
	tfs_follow_owner_of(0, &o);
	cr_assert_eq(o.pid, 0);
}

/* The bytes counted for the order of stream `pid` (its arrays as
 * allocated). */
static uint64_t order_bytes(pid_t pid)
{
	return stream_field(pid, "bytes");
}

/* All orders together take at most max_bytes of memory: a new order drops
 * the uid's streams quiet longest; one larger than the bound is refused. */
Test(follow, the_orders_bytes_are_bounded)
{
	uint64_t one = order_bytes(getpid()); /* an order of N keys */
	cr_assert_gt(one, N * 11, "the keys' names alone are %d bytes", N * 11);
	tfs_follow_destroy(fol);
	/* Room for one order and another being built (its arrays grow by
	 * doubling), not for two and another. */
	struct tfs_follow_config cfg = {
		.window = 4, .budget = BUDGET, .max_bytes = one * 2, .clock_ms = fake_clock
	};
	cr_assert_eq(tfs_follow_create(NULL, NULL, &cfg, &tlog, &fol), 0);
	set_order(&self, NULL, N);
	cr_assert_eq(total("order_bytes"), one);
	pid_t b = spawn();
	struct tfs_follow_owner ob = owner(b);
	fake_now++;
	set_order(&ob, NULL, N / 4);
	cr_assert_eq(nstreams(), 2);
	fake_now++;
	set_order(&ob, NULL, N); /* b's own order is replaced, self's dropped */
	cr_assert_eq(nstreams(), 1);
	cr_assert(has_stream(b));
	cr_assert_eq(total("dropped_streams"), 1);
	cr_assert_eq(total("order_bytes"), one);
	struct tfs_manifest_entry v[2 * N];
	char more[N][32];
	for (int i = 0; i < N; i++) {
		snprintf(more[i], sizeof(more[i]), "e/f%03d.jpg", i);
		v[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1, .key = keys[i] };
		v[N + i] =
			(struct tfs_manifest_entry){ .line = (uint64_t)N + i + 1, .key = more[i] };
	}
	struct tfs_manifest m = { .v = v, .n = 2 * N };
	cr_assert_eq(tfs_follow_set(fol, &self, 0, &m), EFBIG);
	/* What the refused order took is given back; streams it dropped while
	 * it grew (b's, of the same uid) stay dropped. */
	cr_assert_eq(total("order_bytes"), nstreams() ? one : 0);
	cr_assert_not(has_stream(getpid()));
}

/* An order may name a file many times (sampling with replacement): the
 * key is stored once, each occurrence keeps its position, and each open
 * of it stands for its next occurrence. */
Test(follow, repeated_keys_keep_every_position_and_cost_linear_memory)
{
	enum {
		REPS = 200000
	};
	struct tfs_manifest_entry *v = calloc(REPS + 4, sizeof(*v));
	cr_assert_not_null(v);
	for (int i = 0; i < REPS; i++)
		v[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1, .key = keys[0] };
	struct tfs_manifest m = { .v = v, .n = REPS };
	/* 200000 copies of one name: linear, where a table of positions
	 * probed by name took 2e10 comparisons. */
	cr_assert_eq(tfs_follow_set(fol, &self, 0, &m), 0);
	cr_assert_eq(stream_field(getpid(), "files"), REPS);
	/* Two 4-byte words a position, one name, a few slots. */
	cr_assert_leq(order_bytes(getpid()), (uint64_t)REPS * 8 + 4096, "%llu bytes",
		      (unsigned long long)order_bytes(getpid()));
	cr_assert_eq(total("order_bytes"), order_bytes(getpid()));
	free(v);

	/* a b a c a: each open of a is its next occurrence. */
	const char *seq[] = { keys[1], keys[2], keys[1], keys[3], keys[1] };
	struct tfs_manifest_entry w[5];
	for (int i = 0; i < 5; i++)
		w[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1,
						    .key = (char *)seq[i] };
	struct tfs_manifest m2 = { .v = w, .n = 5 };
	cr_assert_eq(tfs_follow_set(fol, &self, 0, &m2), 0);
	for (int i = 0; i < 5; i++) {
		tfs_follow_opened(fol, seq[i], getpid());
		cr_assert_eq(stream_field(getpid(), "position"), (uint64_t)i + 1, "open %d", i);
	}
	/* Read again from the start: a new pass, a's first occurrence. */
	tfs_follow_opened(fol, seq[0], getpid());
	cr_assert_eq(stream_field(getpid(), "position"), 1);
	cr_assert_eq(total("realigned"), 1);
	tfs_follow_opened(fol, seq[1], getpid());
	tfs_follow_opened(fol, seq[2], getpid());
	cr_assert_eq(stream_field(getpid(), "position"), 3);
}

/* Each uid holds at most uid_max of order memory: beyond it, its own
 * order is refused (EFBIG) or its own streams are dropped, never another
 * uid's, and another uid's order is still accepted. */
Test(follow, order_memory_is_bounded_per_uid)
{
	uint64_t one = order_bytes(getpid()); /* N keys */
	tfs_follow_destroy(fol);
	struct tfs_follow_config cfg = { .window = 4,
					 .budget = BUDGET,
					 .max_bytes = 4 * one,
					 .uid_max = one + one / 2,
					 .clock_ms = fake_clock };
	cr_assert_eq(tfs_follow_create(NULL, NULL, &cfg, &tlog, &fol), 0);
	/* uid 1000's text fills its share: its order is refused. */
	cr_assert_eq(tfs_follow_charge(fol, 1000, one), 0);
	cr_assert_eq(tfs_follow_charge(fol, 1000, one), EFBIG);
	struct tfs_manifest_entry v[N];
	for (int i = 0; i < N; i++)
		v[i] = (struct tfs_manifest_entry){ .line = (uint64_t)i + 1, .key = keys[i] };
	struct tfs_manifest m = { .v = v, .n = N };
	cr_assert_eq(tfs_follow_set(fol, &self, 1000, &m), EFBIG);
	cr_assert_eq(nstreams(), 0);
	cr_assert_eq(total("order_bytes"), one, "the refused order's memory was kept");
	/* uid 0's order is accepted beside it. */
	pid_t b = spawn();
	struct tfs_follow_owner ob = owner(b);
	cr_assert_eq(tfs_follow_set(fol, &ob, 0, &m), 0);
	cr_assert(has_stream(b));
	cr_assert_eq(total("order_bytes"), 2 * one);
	/* With its text given back, uid 1000's order fits; a second order of
	 * uid 1000 drops its first stream, not uid 0's. */
	tfs_follow_uncharge(fol, 1000, one);
	cr_assert_eq(tfs_follow_set(fol, &self, 1000, &m), 0);
	fake_now++;
	pid_t c = spawn();
	struct tfs_follow_owner oc = owner(c);
	cr_assert_eq(tfs_follow_set(fol, &oc, 1000, &m), 0);
	cr_assert(has_stream(c));
	cr_assert(has_stream(b));
	cr_assert_not(has_stream(getpid()));
	cr_assert_eq(total("order_bytes"), 2 * one);
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int rc, calls;
};

static void request_done(struct tfs_follow_request *r, int rc)
{
	struct waiter *w = r->ctx;
	pthread_mutex_lock(&w->lock);
	w->rc = rc;
	w->calls++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Submit `text` as the order of `owner` and wait for the builder. */
static int submit(const struct tfs_follow_owner *owner, const char *text)
{
	static const struct tfs_manifest_scope scope = { .mountpoint = "/mnt", .prefix = "" };
	struct waiter w = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct tfs_follow_request r = { .owner = *owner,
					.uid = 0,
					.scope = &scope,
					.text = text,
					.len = strlen(text),
					.done = request_done,
					.ctx = &w };
	cr_assert_eq(tfs_follow_submit(fol, &r), 0);
	pthread_mutex_lock(&w.lock);
	while (w.calls == 0)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	cr_assert_eq(w.calls, 1);
	return w.rc;
}

/* The builder thread parses a text and sets its order, or refuses a text
 * without one valid line (the order stays); an empty text removes it. */
Test(follow, the_builder_sets_orders_from_text)
{
	cr_assert_eq(submit(&self, "d/f001.jpg\n# a comment\nd/f002.jpg\nd/f001.jpg\n"), 0);
	cr_assert_eq(stream_field(getpid(), "files"), 3);
	cr_assert_eq(submit(&self, "../up\n/elsewhere/x\n"), EINVAL);
	cr_assert_eq(stream_field(getpid(), "files"), 3);
	cr_assert_eq(total("orders_built"), 1);
	cr_assert_eq(total("orders_refused"), 1);
	cr_assert_eq(submit(&self, ""), 0);
	cr_assert_not(has_stream(getpid()));
}
