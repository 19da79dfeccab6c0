/* fuzz_common.h - helpers shared by the libFuzzer harnesses in tests/fuzz/.
 *
 * CHECK(name, cond, fmt, ...) is an invariant: when it does not hold the
 * harness prints "INVARIANT name failed at file:line: cond: message" and
 * aborts, so libFuzzer saves the input as a crash.  The name lets a run
 * skip an invariant whose violation is already known (to look for other
 * bugs past it):
 *
 *	TFS_FUZZ_IGNORE=conf_dump_reloads,conf_validate_stable ./fuzz_conf ...
 *
 * Never set TFS_FUZZ_IGNORE in check.sh: a known violation is an open bug.
 * Everything here is header-only so each harness is one .c file.
 */
#ifndef TFS_FUZZ_COMMON_H
#define TFS_FUZZ_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbuf.h"

static inline bool fuzz_ignored(const char *name)
{
	const char *list = getenv("TFS_FUZZ_IGNORE");
	size_t n = strlen(name);

	while (list && *list) {
		const char *end = strchr(list, ',');
		size_t len = end ? (size_t)(end - list) : strlen(list);

		if (len == n && strncmp(list, name, n) == 0)
			return true;
		list = end ? end + 1 : NULL;
	}
	return false;
}

__attribute__((format(printf, 5, 6))) static inline void
fuzz_fail(const char *name, const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	if (fuzz_ignored(name))
		return;
	fprintf(stderr, "\nINVARIANT %s failed at %s:%d: %s: ", name, file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

#define CHECK(name, cond, ...)                                                     \
	do {                                                                       \
		if (!(cond))                                                       \
			fuzz_fail((name), __FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)

/* A NUL-terminated copy of data[0..len) (malloc; abort on ENOMEM). */
static inline char *fuzz_strndup(const uint8_t *data, size_t len)
{
	char *s = malloc(len + 1);

	if (s == NULL)
		abort();
	memcpy(s, data, len);
	s[len] = '\0';
	return s;
}

/* A message for the user: one line, no control characters (UTF-8 bytes
 * >= 0x80 are allowed).  Returns NULL or a description of the problem. */
static inline const char *fuzz_bad_message(const char *m)
{
	if (*m == '\0')
		return "empty";
	for (const unsigned char *p = (const unsigned char *)m; *p; p++) {
		if (*p == '\n')
			return "a newline";
		if (*p < 0x20 || *p == 0x7f)
			return "a control character";
	}
	return NULL;
}

/* Make a dbuf hold exactly the bytes s (for "unchanged on failure"
 * checks: the same content and length afterwards). */
static inline void fuzz_dbuf_set(struct tfs_dbuf *d, const char *s)
{
	tfs_dbuf_reset(d);
	if (tfs_dbuf_adds(d, s) != 0)
		abort();
}

static inline bool fuzz_dbuf_is(const struct tfs_dbuf *d, const char *s)
{
	return tfs_dbuf_len(d) == strlen(s) && memcmp(tfs_dbuf_str(d), s, strlen(s)) == 0;
}

#endif
