/* policy.h - the eviction and admission rules shared by the RAM and SSD
 * tiers.
 *
 * Both tiers keep their items (RAM: blocks, SSD: objects) in order of last
 * access on a logical clock that ticks once per access to the tier, and
 * consider only the oldest item as a victim.  The policy decides whether
 * that item may go:
 *
 *   lru    always.  Classic least-recently-used.
 *   epoch  only when it has been idle longer than any item that the
 *          current workload will read again.  Training reads every sample
 *          once per epoch in a new random order, so an item re-read in the
 *          next epoch is idle for at most two epochs.  The tier learns the
 *          re-access interval (the epoch length, in ticks) from its hits
 *          and lets an item go after 2.5x that; before the first re-access
 *          it uses 8x the number of resident items.  When the oldest item
 *          may not go and the tier is full, new data is NOT admitted: it is
 *          served and dropped.  The tier then keeps a stable subset and hits
 *          about tier/dataset of each epoch, where LRU hits far less.  Data
 *          no longer read (a finished dataset) ages out by the same rule.
 *
 * The functions are pure: the caller keeps the estimator under its own
 * lock.  None can fail.
 */
#ifndef TFS_POLICY_H
#define TFS_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"

/* Learns the typical re-access interval from hits. */
struct tfs_reuse {
	double mean;      /* moving average of re-access intervals, in ticks */
	uint64_t samples; /* how many were seen (0: mean is meaningless) */
};

/* Record that an item last accessed `interval` ticks ago was hit again. */
void tfs_reuse_observe(struct tfs_reuse *r, uint64_t interval);

/* May an item idle for `idle` ticks be evicted, with `resident` items in
 * the tier?  Always true for lru. */
bool tfs_policy_may_evict(enum tfs_policy p, const struct tfs_reuse *r, uint64_t idle,
			  uint64_t resident);

/* The policy's name as in the config file ("lru", "epoch"). */
const char *tfs_policy_name(enum tfs_policy p);

#endif
