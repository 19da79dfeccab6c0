/* policy.c - eviction rules: lru, and epoch (idle beyond the learned
 * re-access interval).  See policy.h for the reasoning. */
#include "config.h"

#include "policy.h"

#define EPOCH_IDLE_FACTOR 2.5
#define EPOCH_NO_SAMPLE_FACTOR 8
/* Weight of a new sample: slow enough to ignore a few outliers, fast
 * enough to follow a change of dataset or sampler within an epoch. */
#define REUSE_ALPHA (1.0 / 256.0)

void tfs_reuse_observe(struct tfs_reuse *r, uint64_t interval)
{
	if (r->samples == 0)
		r->mean = (double)interval;
	else if (r->samples < 256)
		r->mean += ((double)interval - r->mean) / (double)(r->samples + 1);
	else
		r->mean += ((double)interval - r->mean) * REUSE_ALPHA;
	r->samples++;
}

bool tfs_policy_may_evict(enum tfs_policy p, const struct tfs_reuse *r, uint64_t idle,
			  uint64_t resident)
{
	if (p == TFS_POLICY_LRU)
		return true;
	if (r->samples == 0)
		return idle > EPOCH_NO_SAMPLE_FACTOR * resident;
	return (double)idle > EPOCH_IDLE_FACTOR * r->mean;
}

const char *tfs_policy_name(enum tfs_policy p)
{
	return p == TFS_POLICY_LRU ? "lru" : "epoch";
}
