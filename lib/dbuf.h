/* dbuf.h - a growable byte buffer with a hard maximum size.
 *
 * Used instead of sprintf/strcat for building strings (URLs, canonical
 * requests, headers) and for collecting response bodies.  The buffer is
 * always NUL-terminated after a successful append, so `tfs_dbuf_str()` can be
 * used as a C string.
 *
 * Ownership: the dbuf owns its memory; tfs_dbuf_free() releases it.
 * tfs_dbuf_steal() hands the memory to the caller (free() it).
 * Not thread safe: one owner at a time.
 */
#ifndef TFS_DBUF_H
#define TFS_DBUF_H

#include <stddef.h>

struct tfs_dbuf {
	char *buf;
	size_t len;
	size_t cap;
	size_t max; /* appends that would exceed this fail with EOVERFLOW */
};

/* Initialise an empty buffer that may grow to `max` bytes (excluding the
 * terminating NUL).  Allocates nothing.  Cannot fail. */
void tfs_dbuf_init(struct tfs_dbuf *d, size_t max);
void tfs_dbuf_free(struct tfs_dbuf *d);
/* Forget the contents but keep the allocation. */
void tfs_dbuf_reset(struct tfs_dbuf *d);

/* Append bytes.  Return 0, ENOMEM, or EOVERFLOW when `max` would be
 * exceeded; on failure the buffer is unchanged. */
int tfs_dbuf_add(struct tfs_dbuf *d, const void *mem, size_t len);
int tfs_dbuf_adds(struct tfs_dbuf *d, const char *s);
int tfs_dbuf_addc(struct tfs_dbuf *d, char c);
int tfs_dbuf_addf(struct tfs_dbuf *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The contents as a NUL-terminated string ("" when empty). */
const char *tfs_dbuf_str(const struct tfs_dbuf *d);
size_t tfs_dbuf_len(const struct tfs_dbuf *d);
/* Return the malloc'd string (never NULL: "" is allocated when empty, or
 * NULL only on ENOMEM) and reset `d` to empty. */
char *tfs_dbuf_steal(struct tfs_dbuf *d);

#endif
