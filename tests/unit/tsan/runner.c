/* runner.c - main() of the unit tests in the ThreadSanitizer build: the
 * stand-in for Criterion's runner (see criterion/criterion.h for why).
 *
 * Runs every registered test in a forked child, in registration order:
 * the suite's .init, the test, then .fini (after a failed cr_assert or
 * cr_skip_test too, as Criterion does); .timeout (the test's, else the
 * suite's) kills the child.  The parent never starts a thread, so each
 * child forks from a single-threaded process.  Prints one line per failed, crashed or
 * skipped test and ends with Criterion's
 *   [====] Synthesis: Tested: N | Passing: N | Failing: N | Crashing: N
 * (skipped tests are not counted, as in Criterion).  Exit status 1 if a
 * test failed or crashed.  Arguments: optional test names (SUITE/NAME or
 * NAME) to run only those. */
#include "config.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	EXIT_PASS = 0,
	EXIT_FAILED = 1,
	EXIT_SKIPPED = 77
};

static struct cr_test *tests, **tail = &tests;
static sigjmp_buf jump;
static pthread_t test_thread;
static bool failed, skipped;

void cr_shim_register(struct cr_test *t)
{
	*tail = t;
	tail = &t->next;
}

void cr_shim_fail(const char *file, int line, bool fatal, const char *expr, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: Assertion failed: %s", file, line, expr);
	if (fmt[1]) {
		fputs(":", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	fflush(stderr);
	failed = true;
	if (!fatal)
		return;
	/* A check in a thread the test started cannot unwind the test:
	 * end the process (Criterion ends it too). */
	if (!pthread_equal(pthread_self(), test_thread))
		_exit(EXIT_FAILED);
	siglongjmp(jump, 1);
}

void cr_shim_skip(const char *fmt, ...)
{
	va_list ap;

	fputs("skipped:", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	if (!pthread_equal(pthread_self(), test_thread))
		_exit(EXIT_SKIPPED);
	skipped = true;
	siglongjmp(jump, 1);
}

static double timeout_of(const struct cr_test *t)
{
	if (t->opts->timeout > 0)
		return t->opts->timeout;
	return t->suite_opts ? t->suite_opts->timeout : 0;
}

static void (*hook(const struct cr_test *t, bool init))(void)
{
	void (*own)(void) = init ? t->opts->init : t->opts->fini;
	if (own)
		return own;
	if (!t->suite_opts)
		return NULL;
	return init ? t->suite_opts->init : t->suite_opts->fini;
}

/* .init and the test; a fatal check jumps back here. */
static void run_body(const struct cr_test *t)
{
	if (sigsetjmp(jump, 0) != 0)
		return;
	void (*init)(void) = hook(t, true);
	if (init)
		init();
	t->fn();
}

static void run_child(const struct cr_test *t)
{
	void (*fini)(void) = hook(t, false);
	double limit = timeout_of(t);

	if (limit > 0) {
		struct itimerval it = {
			.it_value = { .tv_sec = (time_t)limit,
				      .tv_usec = (suseconds_t)((limit - (time_t)limit) * 1e6) }
		};
		signal(SIGALRM, SIG_DFL);
		setitimer(ITIMER_REAL, &it, NULL);
	}
	test_thread = pthread_self();
	run_body(t);
	if (fini)
		fini();
	fflush(NULL);
	/* exit(), not _exit(): the sanitizer's end-of-process checks run. */
	exit(failed ? EXIT_FAILED : skipped ? EXIT_SKIPPED : EXIT_PASS);
}

static bool selected(const struct cr_test *t, int argc, char **argv)
{
	char full[512];

	if (argc < 2)
		return true;
	snprintf(full, sizeof(full), "%s/%s", t->suite, t->name);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], full) == 0 || strcmp(argv[i], t->name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	unsigned tested = 0, passing = 0, failing = 0, crashing = 0;

	for (struct cr_test *t = tests; t; t = t->next) {
		if (!selected(t, argc, argv))
			continue;
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			run_child(t);
		int status = 0;
		while (waitpid(pid, &status, 0) < 0) {
			if (errno != EINTR) {
				perror("waitpid");
				return 1;
			}
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIPPED) {
			printf("[SKIP] %s::%s\n", t->suite, t->name);
			continue;
		}
		tested++;
		if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_PASS) {
			passing++;
		} else if (WIFEXITED(status)) {
			failing++;
			printf("[FAIL] %s::%s (exit status %d)\n", t->suite, t->name,
			       WEXITSTATUS(status));
		} else {
			crashing++;
			printf("[FAIL] %s::%s: %s%s\n", t->suite, t->name,
			       WTERMSIG(status) == SIGALRM ? "timed out: " : "crashed: ",
			       strsignal(WTERMSIG(status)));
		}
		fflush(stdout);
	}
	printf("[====] Synthesis: Tested: %u | Passing: %u | Failing: %u | Crashing: %u\n", tested,
	       passing, failing, crashing);
	return failing || crashing ? 1 : 0;
}
