/* hist.h - latency histograms with fixed buckets, cheap enough for every
 * backend request and every FUSE operation.
 *
 * A histogram is an array of atomic bucket counters plus an atomic sum:
 * observing is one clock read, a short scan of the bounds and two relaxed
 * atomic additions.  No lock is taken, so a reader may see a bucket and
 * the sum of slightly different moments; counts never go backwards.
 *
 * The bucket bounds are the same for every histogram (TFS_HIST_BOUNDS_US,
 * in microseconds, from 10 us to 10 s, then +Inf), so the JSON form only
 * carries counts; src/metrics.c turns it into a Prometheus histogram.
 *
 * Usage:
 *	uint64_t t0 = tfs_mono_ns();   (clock.h)
 *	...the operation...
 *	tfs_hist_observe(&h, t0);
 *
 * A zeroed struct tfs_hist is an empty histogram (static or calloc'd
 * storage needs no initialisation).
 */
#ifndef TFS_HIST_H
#define TFS_HIST_H

#include <stdatomic.h>
#include <stdint.h>

struct json_object;

/* Upper bounds (inclusive, microseconds) of every bucket but the last,
 * which is +Inf. */
#define TFS_HIST_BOUNDS_US                                                                        \
	10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, \
		1000000, 2500000, 5000000, 10000000
#define TFS_HIST_NBOUNDS 19
#define TFS_HIST_BUCKETS (TFS_HIST_NBOUNDS + 1)

struct tfs_hist {
	atomic_uint_fast64_t n[TFS_HIST_BUCKETS]; /* per bucket, not cumulative */
	atomic_uint_fast64_t sum_ns;
};

/* Count one event that started at `start_ns` (tfs_mono_ns(), clock.h) and ends
 * now.  Thread safe, lock free. */
void tfs_hist_observe(struct tfs_hist *h, uint64_t start_ns);

/* Count one event of `ns` nanoseconds.  Thread safe, lock free. */
void tfs_hist_add(struct tfs_hist *h, uint64_t ns);

/* The bound of bucket i in microseconds (i < TFS_HIST_NBOUNDS). */
uint64_t tfs_hist_bound_us(unsigned i);

/* A new JSON object {"sum_us": N, "buckets": [n0, n1, ...]}
 * (TFS_HIST_BUCKETS counts, not cumulative, the last one for +Inf; their
 * sum is the number of events), or NULL on ENOMEM. */
struct json_object *tfs_hist_json(const struct tfs_hist *h);

#endif
