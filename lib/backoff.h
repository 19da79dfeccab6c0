/* backoff.h - the delay before a retry: exponential, capped, jittered.
 * Shared by the S3 backend (retries of one request) and write-back
 * (retries of one upload job). */
#ifndef TFS_BACKOFF_H
#define TFS_BACKOFF_H

#include <stdint.h>

/* The delay before retry number `n` (0 for the first retry), in ms: the
 * cap is base_ms doubled n times, at most max_ms, and the delay is uniform
 * in [cap/2, cap] ("full jitter" that keeps some spacing).  Draws from
 * getrandom(2) (a weaker seed if that fails).  Thread safe; no lock.
 * Cannot fail; base_ms 0 gives 0. */
uint64_t tfs_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned n);

#endif
