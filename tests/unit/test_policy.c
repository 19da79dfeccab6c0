/* test_policy.c - hit ratios of the eviction policies on simulated
 * training traces: shuffled full epochs over a dataset larger than the
 * tier.  The epoch policy must reach 0.95 x (tier / dataset) from epoch 2
 * on; LRU's figure is printed beside it. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* A toy tier of `cap` unit-size items over a dataset of `n` items, with
 * an intrusive LRU list (index n is the list head). */
struct sim {
	enum tfs_policy policy;
	size_t n, cap, resident;
	size_t *prev, *next;
	uint64_t *last;
	bool *in;
	uint64_t clock;
	struct tfs_reuse reuse;
	uint64_t hits, lookups;
};

static void sim_init(struct sim *s, enum tfs_policy p, size_t n, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->policy = p;
	s->n = n;
	s->cap = cap;
	s->prev = calloc(n + 1, sizeof(size_t));
	s->next = calloc(n + 1, sizeof(size_t));
	s->last = calloc(n, sizeof(uint64_t));
	s->in = calloc(n, sizeof(bool));
	s->prev[n] = s->next[n] = n;
}

static void sim_free(struct sim *s)
{
	free(s->prev);
	free(s->next);
	free(s->last);
	free(s->in);
}

static void unlink_item(struct sim *s, size_t i)
{
	s->next[s->prev[i]] = s->next[i];
	s->prev[s->next[i]] = s->prev[i];
}

static void push_newest(struct sim *s, size_t i)
{
	size_t h = s->n;
	s->prev[i] = s->prev[h];
	s->next[i] = h;
	s->next[s->prev[h]] = i;
	s->prev[h] = i;
}

static void sim_access(struct sim *s, size_t i)
{
	s->clock++;
	s->lookups++;
	if (s->in[i]) {
		s->hits++;
		tfs_reuse_observe(&s->reuse, s->clock - s->last[i]);
		unlink_item(s, i);
		push_newest(s, i);
		s->last[i] = s->clock;
		return;
	}
	if (s->resident >= s->cap) {
		size_t victim = s->next[s->n]; /* the oldest */
		if (!tfs_policy_may_evict(s->policy, &s->reuse, s->clock - s->last[victim],
					  s->resident))
			return; /* not admitted: served and dropped */
		unlink_item(s, victim);
		s->in[victim] = false;
		s->resident--;
	}
	s->in[i] = true;
	s->resident++;
	s->last[i] = s->clock;
	push_newest(s, i);
}

static void shuffle(size_t *a, size_t n, unsigned *seed)
{
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand_r(seed) % (i + 1);
		size_t t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

/* Hit ratio over epochs 2..epochs. */
static double run_epochs(enum tfs_policy p, size_t n, size_t cap, int epochs, unsigned seed)
{
	struct sim s;
	size_t *order = malloc(n * sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	sim_init(&s, p, n, cap);
	for (int e = 1; e <= epochs; e++) {
		shuffle(order, n, &seed);
		if (e == 2)
			s.hits = s.lookups = 0;
		for (size_t i = 0; i < n; i++)
			sim_access(&s, order[i]);
	}
	double ratio = (double)s.hits / (double)s.lookups;
	sim_free(&s);
	free(order);
	return ratio;
}

Test(policy, epoch_keeps_the_tier_fraction_where_lru_churns)
{
	size_t n = 20000, cap = 10000; /* dataset twice the tier */
	double target = 0.95 * (double)cap / (double)n;
	double epoch = run_epochs(TFS_POLICY_EPOCH, n, cap, 8, 42);
	double lru = run_epochs(TFS_POLICY_LRU, n, cap, 8, 42);
	printf("shuffled epochs, dataset = 2 x tier: epoch %.3f, lru %.3f (target >= %.3f)\n",
	       epoch, lru, target);
	cr_assert_geq(epoch, target, "epoch policy hit ratio %.3f < %.3f", epoch, target);
	cr_assert_lt(lru, epoch, "lru %.3f should trail epoch %.3f", lru, epoch);
}

Test(policy, other_ratios)
{
	static const struct {
		size_t n, cap;
	} cases[] = { { 40000, 10000 }, { 12000, 10000 }, { 5000, 10000 } };
	for (size_t c = 0; c < 3; c++) {
		double frac = (double)cases[c].cap / (double)cases[c].n;
		if (frac > 1)
			frac = 1;
		double epoch = run_epochs(TFS_POLICY_EPOCH, cases[c].n, cases[c].cap, 6, 7);
		double lru = run_epochs(TFS_POLICY_LRU, cases[c].n, cases[c].cap, 6, 7);
		printf("dataset %zu, tier %zu: epoch %.3f, lru %.3f (fraction %.3f)\n", cases[c].n,
		       cases[c].cap, epoch, lru, frac);
		cr_assert_geq(epoch, 0.95 * frac);
	}
}

Test(policy, finished_dataset_ages_out)
{
	/* Three epochs of dataset A fill the tier; then dataset B is read.
	 * Under the epoch policy A ages out within ~3.5 epochs of B (2.5x the
	 * re-access interval), after which B owns the tier. */
	size_t n = 10000, cap = 10000;
	struct sim s;
	sim_init(&s, TFS_POLICY_EPOCH, 2 * n, cap);
	size_t *order = malloc(n * sizeof(size_t));
	unsigned seed = 3;
	for (int e = 0; e < 3; e++) {
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		shuffle(order, n, &seed);
		for (size_t i = 0; i < n; i++)
			sim_access(&s, order[i]);
	}
	for (int e = 0; e < 6; e++) {
		for (size_t i = 0; i < n; i++)
			order[i] = n + i;
		shuffle(order, n, &seed);
		s.hits = s.lookups = 0;
		for (size_t i = 0; i < n; i++)
			sim_access(&s, order[i]);
	}
	double last = (double)s.hits / (double)s.lookups;
	printf("after a dataset switch, epoch 6 of B hits %.3f\n", last);
	cr_assert_geq(last, 0.95, "the old dataset was never evicted (%.3f)", last);
	sim_free(&s);
	free(order);
}

Test(policy, lru_always_evicts_and_names)
{
	struct tfs_reuse r = { 0 };
	cr_assert(tfs_policy_may_evict(TFS_POLICY_LRU, &r, 0, 1));
	cr_assert(!tfs_policy_may_evict(TFS_POLICY_EPOCH, &r, 10, 100));
	tfs_reuse_observe(&r, 100);
	cr_assert(!tfs_policy_may_evict(TFS_POLICY_EPOCH, &r, 200, 1));
	cr_assert(tfs_policy_may_evict(TFS_POLICY_EPOCH, &r, 300, 1));
	cr_assert_str_eq(tfs_policy_name(TFS_POLICY_EPOCH), "epoch");
	cr_assert_str_eq(tfs_policy_name(TFS_POLICY_LRU), "lru");
}
