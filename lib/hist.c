/* hist.c - fixed-bucket latency histograms. */
#include "config.h"

#include "hist.h"
#include "clock.h"

#include <json-c/json.h>
#include <time.h>

static const uint64_t bounds_us[TFS_HIST_NBOUNDS] = { TFS_HIST_BOUNDS_US };

uint64_t tfs_hist_bound_us(unsigned i)
{
	return i < TFS_HIST_NBOUNDS ? bounds_us[i] : UINT64_MAX;
}

void tfs_hist_add(struct tfs_hist *h, uint64_t ns)
{
	uint64_t us = ns / 1000u;
	unsigned i = 0;

	while (i < TFS_HIST_NBOUNDS && us > bounds_us[i])
		i++;
	atomic_fetch_add_explicit(&h->n[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void tfs_hist_observe(struct tfs_hist *h, uint64_t start_ns)
{
	uint64_t now = tfs_mono_ns();

	tfs_hist_add(h, now > start_ns ? now - start_ns : 0);
}

struct json_object *tfs_hist_json(const struct tfs_hist *h)
{
	struct json_object *o = json_object_new_object();
	struct json_object *b = json_object_new_array_ext(TFS_HIST_BUCKETS);

	if (o == NULL || b == NULL) {
		json_object_put(o);
		json_object_put(b);
		return NULL;
	}
	for (unsigned i = 0; i < TFS_HIST_BUCKETS; i++)
		json_object_array_add(b, json_object_new_uint64(atomic_load_explicit(
						 &h->n[i], memory_order_relaxed)));
	json_object_object_add(
		o, "sum_us",
		json_object_new_uint64(atomic_load_explicit(&h->sum_ns, memory_order_relaxed) /
				       1000u));
	json_object_object_add(o, "buckets", b);
	return o;
}
