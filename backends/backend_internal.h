/* backend_internal.h - the backend instance as the files of the backend
 * interface share it (backend.c: life cycle and dispatch, backend_stats.c:
 * counting, backend_list.c: listings).  Nothing outside them includes it;
 * backend implementations use backend_impl.h.
 */
#ifndef TFS_BACKEND_INTERNAL_H
#define TFS_BACKEND_INTERNAL_H

#include "backend_impl.h"

struct tfs_backend {
	const struct tfs_backend_ops *ops;
	void *priv;
	char *describe;
	struct tfs_backend_stats stats;
};

/* Count one request of `op` that ended with `rc` (0 or an errno) and
 * moved `bytes` of payload (counted only when rc is 0), started at t0
 * (tfs_mono_ns(); 0: not timed, a part of a multipart upload).  Lock-free
 * (atomics).  Returns rc, so that a wrapper can end with it. */
int tfs_backend_account(struct tfs_backend *be, enum tfs_backend_op op, int rc, uint64_t bytes,
			uint64_t t0);

#endif
