/* test_log.c - the logger: levels, the per-format rate limiter with its
 * "N similar messages suppressed" counts, and the token bucket. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define MAX_LINES 256

/* A sink that keeps what it gets. */
static struct {
	pthread_mutex_t mu;
	char lines[MAX_LINES][512];
	enum tfs_log_level levels[MAX_LINES];
	unsigned n;     /* lines kept */
	unsigned total; /* lines received */
} got = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void keep(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	pthread_mutex_lock(&got.mu);
	got.total++;
	if (got.n < MAX_LINES) {
		snprintf(got.lines[got.n], sizeof(got.lines[0]), "%s", line);
		got.levels[got.n] = level;
		got.n++;
	}
	pthread_mutex_unlock(&got.mu);
}

/* A clock the tests move by hand. */
static uint64_t now;
static uint64_t fake_clock(void)
{
	return now;
}

static struct tfs_log lg;

static void setup(void)
{
	got.n = got.total = 0;
	now = 1000;
	tfs_log_init(&lg, keep, NULL, TFS_LOG_DEBUG);
	cr_assert_eq(tfs_log_limit(&lg, 3, 10000, fake_clock), 0);
}

static void teardown(void)
{
	tfs_log_unlimit(&lg);
}

static unsigned count_with(const char *needle)
{
	unsigned c = 0;
	for (unsigned i = 0; i < got.n; i++)
		c += strstr(got.lines[i], needle) != NULL;
	return c;
}

TestSuite(log, .init = setup, .fini = teardown, .timeout = 30);

Test(log, levels_filter_and_errno_is_kept)
{
	tfs_log_set_level(&lg, TFS_LOG_WARN);
	errno = EXDEV;
	tfs_info(&lg, "not shown %d", 1);
	tfs_debug(&lg, "not shown %d", 2);
	tfs_warn(&lg, "shown %d", 3);
	cr_assert_eq(errno, EXDEV);
	cr_assert_eq(got.n, 1);
	cr_assert_str_eq(got.lines[0], "shown 3");
	cr_assert_eq(got.levels[0], TFS_LOG_WARN);
	enum tfs_log_level l;
	cr_assert_eq(tfs_log_level_parse("DEBUG", &l), 0);
	cr_assert_eq(l, TFS_LOG_DEBUG);
	cr_assert_eq(tfs_log_level_parse("verbose", &l), EINVAL);
}

Test(log, repeats_of_one_error_are_limited_and_counted)
{
	for (int i = 0; i < 10; i++)
		tfs_err(&lg, "read '%s' failed: %d", i % 2 ? "a" : "b", i);
	cr_assert_eq(got.n, 3, "burst of 3 per interval, got %u", got.n);
	cr_assert_eq(tfs_log_suppressed(&lg), 7);
	cr_assert_str_eq(got.lines[0], "read 'b' failed: 0");

	/* next interval: the first line carries the count */
	now += 10000;
	tfs_err(&lg, "read '%s' failed: %d", "c", 10);
	cr_assert_eq(got.n, 4);
	cr_assert_str_eq(got.lines[3], "read 'c' failed: 10 (7 similar messages suppressed)");
	tfs_err(&lg, "read '%s' failed: %d", "d", 11);
	cr_assert_str_eq(got.lines[4], "read 'd' failed: 11", "the count is given once");
}

/* An object key or a server's message is not trusted: a newline in it
 * must not forge a line of its own, nor an escape reach a terminal. */
Test(log, control_bytes_are_escaped)
{
	tfs_info(&lg, "read '%s': %s", "a\nFAKE: root logged in\x1b[31m", "tab\there\x7f");
	cr_assert_eq(got.n, 1);
	cr_assert_str_eq(got.lines[0], "read 'a\\x0aFAKE: root logged in\\x1b[31m': "
				       "tab\\x09here\\x7f");
}

Test(log, formats_are_limited_separately)
{
	for (int i = 0; i < 5; i++) {
		tfs_err(&lg, "first kind %d", i);
		tfs_warn(&lg, "second kind %d", i);
	}
	cr_assert_eq(count_with("first kind"), 3);
	cr_assert_eq(count_with("second kind"), 3);
}

Test(log, info_and_debug_are_never_limited)
{
	for (int i = 0; i < 20; i++) {
		tfs_info(&lg, "info %d", i);
		tfs_debug(&lg, "debug %d", i);
	}
	cr_assert_eq(got.n, 40);
	cr_assert_eq(tfs_log_suppressed(&lg), 0);
}

Test(log, a_burst_that_stopped_is_flushed_after_its_interval)
{
	for (int i = 0; i < 8; i++)
		tfs_err(&lg, "upload of '%s' failed", "k");
	cr_assert_eq(got.n, 3);
	tfs_log_flush_suppressed(&lg);
	cr_assert_eq(got.n, 3, "not before the interval ends");
	now += 10000;
	tfs_log_flush_suppressed(&lg);
	cr_assert_eq(got.n, 4);
	cr_assert_str_eq(got.lines[3], "5 similar messages suppressed: upload of '%s' failed");
	tfs_log_flush_suppressed(&lg);
	cr_assert_eq(got.n, 4, "reported once");
}

Test(log, unlimit_reports_what_is_pending)
{
	for (int i = 0; i < 5; i++)
		tfs_warn(&lg, "disk full %d", i);
	tfs_log_unlimit(&lg);
	cr_assert_eq(got.n, 4);
	cr_assert_str_eq(got.lines[3], "2 similar messages suppressed: disk full %d");
	/* without a limiter nothing is dropped */
	for (int i = 0; i < 5; i++)
		tfs_warn(&lg, "disk full %d", i);
	cr_assert_eq(got.n, 9);
}

/* Many formats: the table takes over old slots, reporting their counts. */
Test(log, many_formats_do_not_lose_counts)
{
	static char fmts[600][32];
	for (int i = 0; i < 600; i++)
		snprintf(fmts[i], sizeof(fmts[i]), "format %d %%d", i);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	for (int round = 0; round < 4; round++)
		for (int i = 0; i < 600; i++)
			tfs_logf(&lg, TFS_LOG_ERROR, fmts[i], round);
#pragma GCC diagnostic pop
	/* every call is either shown or counted as suppressed (a slot taken
	 * over also reports its count) */
	cr_assert_geq(got.total + tfs_log_suppressed(&lg), 2400);
}

static void *spam(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++)
		tfs_err(&lg, "concurrent %d", i);
	return NULL;
}

Test(log, thread_safe)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, spam, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(got.n, 3);
	cr_assert_eq(tfs_log_suppressed(&lg), 3997);
}

Test(log, token_bucket)
{
	struct tfs_ratelimit rl;
	uint64_t sup = 99;
	tfs_ratelimit_init(&rl, 1000, 2);
	cr_assert(tfs_ratelimit_allow(&rl, 5000, &sup));
	cr_assert_eq(sup, 0);
	cr_assert(tfs_ratelimit_allow(&rl, 5001, &sup));
	cr_assert_not(tfs_ratelimit_allow(&rl, 5002, &sup));
	cr_assert_not(tfs_ratelimit_allow(&rl, 5999, &sup));
	cr_assert(tfs_ratelimit_allow(&rl, 6000, &sup));
	cr_assert_eq(sup, 2);
	tfs_ratelimit_destroy(&rl);
}

/* log.file is opened with O_NOFOLLOW: a symlink planted at its path (by
 * whoever can write to its directory) does not redirect the daemon's
 * writes; neither does a hard link or a FIFO. */
Test(log_file, symlink_hard_link_and_fifo_refused)
{
	char dir[] = "/tmp/tierfs-logtest-XXXXXX";
	char target[64], sym[64], hard[64], fifo[64], plain[64];
	struct tfs_log l;
	cr_assert_not_null(mkdtemp(dir));
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(sym, sizeof(sym), "%s/link.log", dir);
	snprintf(hard, sizeof(hard), "%s/hard.log", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo.log", dir);
	snprintf(plain, sizeof(plain), "%s/plain.log", dir);
	FILE *f = fopen(target, "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(symlink(target, sym), 0);
	cr_assert_eq(link(target, hard), 0);
	cr_assert_eq(mkfifo(fifo, 0600), 0);

	cr_assert_eq(tfs_log_init_file(&l, sym, TFS_LOG_INFO), ELOOP);
	cr_assert_eq(tfs_log_init_file(&l, hard, TFS_LOG_INFO), EMLINK);
	int rc = tfs_log_init_file(&l, fifo, TFS_LOG_INFO); /* ENXIO: no reader */
	cr_assert(rc == ENXIO || rc == EINVAL, "fifo: %s", strerror(rc));
	struct stat st;
	cr_assert_eq(stat(target, &st), 0);
	cr_assert_eq(st.st_size, 0, "the symlink's target was written");

	cr_assert_eq(tfs_log_init_file(&l, plain, TFS_LOG_INFO), 0);
	tfs_info(&l, "hello %d", 1);
	tfs_log_close(&l);
	cr_assert_eq(stat(plain, &st), 0);
	cr_assert_gt(st.st_size, 0);
	cr_assert_eq(st.st_mode & 0777, 0600);

	unlink(target);
	unlink(sym);
	unlink(hard);
	unlink(fifo);
	unlink(plain);
	rmdir(dir);
}
