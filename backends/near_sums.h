/* near_sums.h - near copies with their block digests: written together,
 * and every block read from near checked against them (backends/near.c;
 * the digests are near_verify.h's).
 *
 * A copy's digests are in its user metadata (x-amz-meta-tierfs-sums:
 * "<block>:<hex>") when the text is at most TFS_NV_INLINE_MAX bytes;
 * otherwise that entry says "sidecar" and the text is the object
 * <copy key>.tierfs-sums, written before the copy (so a copy is never
 * seen without its digests) with the copy's own tags plus
 * x-amz-meta-tierfs-sums-of: 1.  A copy without digests (made before
 * they existed, or whose sidecar is gone) is never served: it reads as
 * missing, and the next copier replaces it.
 *
 * A reader fetches the digests of a copy once (a HEAD, and a GET of the
 * sidecar) and keeps them, with the copy's near ETag, in a bounded cache
 * (1024 copies, 16 MiB of digests: the least recently used go); reads of
 * the copy are conditional on that ETag, so a copy replaced meanwhile is
 * fetched again rather than checked against old digests.
 *
 * Thread safety: every function may be called from any thread; one mutex
 * guards the cache, never held during a request.
 */
#ifndef TFS_NEAR_SUMS_H
#define TFS_NEAR_SUMS_H

#include <stdint.h>

#include "backend.h"
#include "log.h"
#include "near_verify.h"

#define TFS_NEAR_SIDECAR ".tierfs-sums" /* suffix of a copy's sidecar key */

struct tfs_near_sums;

/* A cache of digests for copies in `near` (borrowed: must outlive it).
 * Returns 0 or ENOMEM. */
int tfs_near_sums_create(struct tfs_backend *near, const struct tfs_log *log,
			 struct tfs_near_sums **out);

/* Free the cache.  NULL-safe. */
void tfs_near_sums_destroy(struct tfs_near_sums *s);

/* Whether near holds copy `nk` with digests (a HEAD, and one of its
 * sidecar): 0 yes, ENOENT (no copy, one without digests, or one whose
 * sidecar is gone), or near's errno. */
int tfs_near_sums_has(struct tfs_near_sums *s, const char *nk);

/* Upload copy `nk`: `len` bytes of src, with the user metadata of `tags`
 * (borrowed; not changed) and the digests `sums` (inline, or first a
 * sidecar).  Returns 0 or near's errno (ENOMEM). */
int tfs_near_sums_put(struct tfs_near_sums *s, const char *nk, const struct tfs_obj_meta *tags,
		      struct tfs_io src, uint64_t len, const struct tfs_nv_sums *sums);

/* Read bytes [off, off + len) of copy `nk` into dst (as
 * tfs_backend_get_range(), progress reported at the end), after checking
 * every block they touch against the copy's digests.  Returns 0 (all
 * `len` bytes delivered), ENOENT (no copy, no digests, or the copy
 * changed since they were fetched), ERANGE (the range goes past the
 * copy's end), EBADMSG (a block differs from its digest: nothing
 * delivered; the copy and its sidecar are deleted from near), ENOMEM, or
 * near's errno.  Nothing is delivered unless it returns 0. */
int tfs_near_sums_read(struct tfs_near_sums *s, const char *nk, uint64_t off, uint64_t len,
		       struct tfs_io dst);

#endif
