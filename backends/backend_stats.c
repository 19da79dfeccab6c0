/* backend_stats.c - the counters of a backend instance: each operation's
 * requests, errors, payload bytes and latency histogram, the listing's
 * dropped names and loops, and their JSON for the stats command. */
#include "config.h"

#include <json-c/json.h>

#include "backend_internal.h"

static const char *const op_names[TFS_OP__COUNT] = {
	[TFS_OP_HEAD] = "head", [TFS_OP_LIST] = "list",     [TFS_OP_GET] = "get",
	[TFS_OP_PUT] = "put",   [TFS_OP_DELETE] = "delete", [TFS_OP_COPY] = "copy",
};

const char *tfs_backend_op_name(enum tfs_backend_op op)
{
	return (unsigned)op < TFS_OP__COUNT ? op_names[op] : "?";
}

int tfs_backend_account(struct tfs_backend *be, enum tfs_backend_op op, int rc, uint64_t bytes,
			uint64_t t0)
{
	struct tfs_backend_op_stats *s = &be->stats.op[op];

	if (t0)
		tfs_hist_observe(&s->latency, t0);
	atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
	if (rc)
		atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
	else if (bytes)
		atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
	return rc;
}

const struct tfs_backend_stats *tfs_backend_stats(const struct tfs_backend *be)
{
	return &be->stats;
}

static void add_u64(struct json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

struct json_object *tfs_backend_stats_json(const struct tfs_backend *be)
{
	const struct tfs_backend_stats *st = &be->stats;
	struct json_object *bo = json_object_new_object();
	if (bo == NULL)
		return NULL;
	for (int op = 0; op < TFS_OP__COUNT; op++) {
		struct json_object *o = json_object_new_object();
		if (o == NULL)
			continue;
		add_u64(o, "requests", atomic_load(&st->op[op].requests));
		add_u64(o, "errors", atomic_load(&st->op[op].errors));
		add_u64(o, "payload_bytes", atomic_load(&st->op[op].bytes));
		struct json_object *lat = tfs_hist_json(&st->op[op].latency);
		if (lat)
			json_object_object_add(o, "latency", lat);
		json_object_object_add(bo, tfs_backend_op_name((enum tfs_backend_op)op), o);
	}
	add_u64(bo, "list_foreign_dropped", atomic_load(&st->list_foreign_dropped));
	add_u64(bo, "list_loops", atomic_load(&st->list_loops));
	json_object_object_add(bo, "source", json_object_new_string(be->describe));
	if (be->ops->stats)
		be->ops->stats(be->priv, bo);
	return bo;
}
