/* near_spool.h - copies to near assembled from the bytes their readers
 * fetched from far (backends/near.c), so that an object read in parts
 * crosses from far once, not twice.
 *
 * Each object being assembled has an unnamed file (O_TMPFILE) in the
 * spool directory; the ranges written into it are kept as a sorted list
 * of disjoint intervals.  Once far's size is known (the caller HEADs far
 * after the first range) and the intervals cover [0, size), the object is
 * done: its file goes to the caller, which uploads it to near.
 *
 * Each range added is digested from the caller's bytes before it is
 * written (a tfs_nv_piece, near_verify.h); the pieces go with the done
 * file, so that its upload can check every range against the bytes that
 * arrived (an offset gone wrong on the way into the file is caught there).
 *
 * Bounds: at most SPOOL_OBJECTS objects at once, at most SPOOL_RANGES
 * disjoint ranges each, and `budget` bytes in all the files.  A range
 * that would break a bound is refused (the caller then copies the object
 * another way).  An object with no new range for `idle_ms` is given up
 * (its file closed) and handed to the `abandoned` callback, so a reader
 * that reads only part of a big object still gets it copied.
 *
 * Thread safety: every function may be called from any thread; one mutex
 * inside, never held while writing a file or calling the callback.
 */
#ifndef TFS_NEAR_SPOOL_H
#define TFS_NEAR_SPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "near_verify.h"

#define SPOOL_OBJECTS 32
#define SPOOL_RANGES 256
#define SPOOL_PIECES 4096 /* pieces kept per object; beyond, they are incomplete */

struct tfs_near_spools;

/* Called with the key and ETag of an object given up (idle), without any
 * lock held. */
typedef void (*tfs_spool_abandoned_fn)(void *ctx, const char *key, const char *etag);

/* An empty set spooling in `dir` (which must exist).  Returns 0, EINVAL
 * (dir NULL) or ENOMEM. */
int tfs_near_spools_create(const char *dir, uint64_t budget, unsigned idle_ms,
			   tfs_spool_abandoned_fn abandoned, void *ctx,
			   struct tfs_near_spools **out);

/* Close every file (the objects are given up without the callback) and
 * free the set.  NULL-safe. */
void tfs_near_spools_destroy(struct tfs_near_spools *s);

/* What an add or a size did. */
struct tfs_spool_result {
	bool first;    /* the object is new: the caller must learn its size
		     * (tfs_near_spool_sized()) */
	int done_fd;   /* >= 0: the object is whole; the caller owns the
			  * file (read it from offset 0, then close it) */
	uint64_t size; /* with done_fd: its size */
	/* With done_fd: the digests of the ranges written (malloc'd, the
	 * caller frees them), and whether they cover the whole object (false
	 * beyond SPOOL_PIECES ranges). */
	struct tfs_nv_piece *pieces;
	size_t npieces;
	bool pieces_complete;
};

/* Write bytes [off, off + len) of version `etag` of `key`, from `src`
 * (TFS_IO_BUF or TFS_IO_IOV).  Returns 0 (*res says what follows), EINVAL
 * (another kind of source, empty key or etag), EDQUOT (the budget),
 * ENFILE (SPOOL_OBJECTS objects already, or no file could be made),
 * ENOMEM: the range is not spooled, the object stays as it was; E2BIG
 * (too many ranges) or a write's errno: the object is given up (without
 * the callback); ESTALE: the object was given up meanwhile. */
int tfs_near_spool_add(struct tfs_near_spools *s, const char *key, const char *etag, uint64_t off,
		       struct tfs_io src, uint64_t len, struct tfs_spool_result *res);

/* Far's size of version `etag` of `key`, or UINT64_MAX when far has
 * another version (the object is then given up, without the callback).
 * *res as for an add. */
void tfs_near_spool_sized(struct tfs_near_spools *s, const char *key, const char *etag,
			  uint64_t size, struct tfs_spool_result *res);

/* Bytes in the files now. */
uint64_t tfs_near_spool_bytes(struct tfs_near_spools *s);

#endif
