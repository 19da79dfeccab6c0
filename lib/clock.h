/* clock.h - the project's two clocks: the monotonic clock for intervals,
 * timeouts and rate limits, and the wall clock for times that outlive the
 * process (metadata fetch times and write-back due times in LMDB) or that
 * are compared with times from elsewhere.  Cannot fail; no state; thread
 * safe.
 */
#ifndef TFS_CLOCK_H
#define TFS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t tfs_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t tfs_mono_ms(void)
{
	return tfs_mono_ns() / 1000000u;
}

/* CLOCK_REALTIME in milliseconds since the epoch. */
static inline uint64_t tfs_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#endif
