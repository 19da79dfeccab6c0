/* criterion/criterion.h - a minimal stand-in for Criterion, used only by
 * the ThreadSanitizer build (configure --enable-tsan).
 *
 * Criterion runs each test in a sandbox (BoxFort) whose shared-memory
 * arena it maps at a random fixed address; ThreadSanitizer owns or
 * protects that part of the address space, and every test binary aborts
 * at start ("Could not initialize inheritable arena", Snaipe/Criterion
 * issue #274).  This header implements the subset of Criterion 2.4 the
 * tests use (Test, TestSuite with .init/.fini/.timeout, cr_assert*,
 * cr_expect*, cr_assert_fail, cr_skip_test) with the same meaning, and
 * runner.c runs each test in its own forked process, as Criterion does,
 * ending with Criterion's "Synthesis:" line.  Nothing else includes it:
 * the normal and ASan builds use the real Criterion. */
#ifndef TFS_CRITERION_SHIM_H
#define TFS_CRITERION_SHIM_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct cr_opts {
	void (*init)(void);
	void (*fini)(void);
	double timeout; /* seconds; 0: none */
};

struct cr_test {
	const char *suite;
	const char *name;
	void (*fn)(void);
	const struct cr_opts *opts;       /* the test's own */
	const struct cr_opts *suite_opts; /* TestSuite()'s, or NULL */
	struct cr_test *next;
};

void cr_shim_register(struct cr_test *t);
/* A failed check: prints FILE:LINE, the expression and the message (a
 * printf format after one leading space, which keeps an absent message
 * from being an empty format); with fatal, ends the test. */
void cr_shim_fail(const char *file, int line, bool fatal, const char *expr, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* cr_skip_test(): the message as for cr_shim_fail(). */
void cr_shim_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define CR_SHIM_CAT_(a, b) a##b
#define CR_SHIM_CAT(a, b) CR_SHIM_CAT_(a, b)

/* The suite's options are a weak symbol: a suite may have no TestSuite(),
 * and it may come after the tests. */
#define TestSuite(suite, ...) \
	const struct cr_opts cr_shim_suite_##suite __attribute__((weak)) = { NULL, __VA_ARGS__ }

#define Test(suite, name, ...)                                                              \
	extern const struct cr_opts cr_shim_suite_##suite __attribute__((weak));            \
	static void cr_shim_fn_##suite##_##name(void);                                      \
	static const struct cr_opts cr_shim_opts_##suite##_##name = { NULL, __VA_ARGS__ };  \
	static struct cr_test cr_shim_test_##suite##_##name = {                             \
		#suite, #name, cr_shim_fn_##suite##_##name, &cr_shim_opts_##suite##_##name, \
		NULL,   NULL,                                                               \
	};                                                                                  \
	__attribute__((constructor)) static void cr_shim_reg_##suite##_##name(void)         \
	{                                                                                   \
		cr_shim_test_##suite##_##name.suite_opts = &cr_shim_suite_##suite;          \
		cr_shim_register(&cr_shim_test_##suite##_##name);                           \
	}                                                                                   \
	static void cr_shim_fn_##suite##_##name(void)

/* The message is an optional printf format and its arguments: " " glues
 * itself to it, or stands for an absent one. */
#define CR_SHIM_CHECK(fatal, cond, expr, ...)                                           \
	do {                                                                            \
		if (!(cond))                                                            \
			cr_shim_fail(__FILE__, __LINE__, fatal, expr, " " __VA_ARGS__); \
	} while (0)

#define cr_assert(c, ...) CR_SHIM_CHECK(true, c, #c, __VA_ARGS__)
#define cr_expect(c, ...) CR_SHIM_CHECK(false, c, #c, __VA_ARGS__)
#define cr_assert_not(c, ...) CR_SHIM_CHECK(true, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) cr_shim_fail(__FILE__, __LINE__, true, "fail", " " __VA_ARGS__)
#define cr_skip_test(...) cr_shim_skip(" " __VA_ARGS__)

#define CR_SHIM_CMP(fatal, a, op, b, ...) \
	CR_SHIM_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) CR_SHIM_CMP(true, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) CR_SHIM_CMP(true, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) CR_SHIM_CMP(true, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) CR_SHIM_CMP(true, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CR_SHIM_CMP(true, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) CR_SHIM_CMP(true, a, >=, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) CR_SHIM_CMP(false, a, ==, b, __VA_ARGS__)
#define cr_assert_null(p, ...) CR_SHIM_CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) CR_SHIM_CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...)                                                      \
	CR_SHIM_CHECK(true, fabs((double)(a) - (double)(b)) <= (eps), #a " == " #b " +- " #eps, \
		      __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) \
	CR_SHIM_CHECK(true, strcmp((a), (b)) == 0, #a " == " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) \
	CR_SHIM_CHECK(true, strcmp((a), (b)) != 0, #a " != " #b, __VA_ARGS__)
#define cr_assert_str_empty(s, ...) CR_SHIM_CHECK(true, (s)[0] == '\0', #s " is empty", __VA_ARGS__)

#endif
