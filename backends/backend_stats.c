/* backend_stats.c - the counters of a backend instance: each operation's
 * requests, errors, payload bytes and latency histogram, the listing's
 * dropped names and loops, and their JSON for the stats command. */
#include "config.h"

#include <json-c/json.h>

#include "backend_internal.h"
#include "statdef.h"

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

#define OP_ROW(f, ...) TFS_STAT(struct tfs_backend_op_snap, f, __VA_ARGS__)
static const struct tfs_statdef op_rows[] = {
	OP_ROW(requests, TFS_COUNTER, "tierfs_backend_requests_total",
	       "Backend requests, by operation."),
	OP_ROW(errors, TFS_COUNTER, "tierfs_backend_errors_total",
	       "Backend requests that failed after retries, by operation."),
	OP_ROW(payload_bytes, TFS_COUNTER, "tierfs_backend_bytes_total",
	       "Payload bytes read (get) or written (put), by operation."),
	OP_ROW(latency, TFS_HISTOGRAM, "tierfs_backend_request_duration_seconds",
	       "Backend request latency, retries included, by operation."),
};
#undef OP_ROW

const struct tfs_stattab tfs_backend_op_stattab = TFS_STATTAB("backend", op_rows, .each = "op");

struct backend_snap {
	uint64_t list_foreign_dropped, list_loops;
	const char *source;
};

#define ROW(f, ...) TFS_STAT(struct backend_snap, f, __VA_ARGS__)
static const struct tfs_statdef backend_rows[] = {
	ROW(list_foreign_dropped, TFS_COUNTER, "tierfs_backend_list_foreign_dropped_total",
	    "Listing names dropped because they lie outside the listing asked for."),
	ROW(list_loops, TFS_COUNTER, "tierfs_backend_list_loops_total",
	    "Listings cut off with EIO because they did not end (a token came back, too many "
	    "pages)."),
	ROW(source, TFS_JSON_ONLY, NULL, "a string: the backend's description"),
};
#undef ROW

const struct tfs_stattab tfs_backend_stattab = TFS_STATTAB("backend", backend_rows);

struct json_object *tfs_backend_stats_json(const struct tfs_backend *be)
{
	const struct tfs_backend_stats *st = &be->stats;
	struct json_object *bo = json_object_new_object();
	if (bo == NULL)
		return NULL;
	for (int op = 0; op < TFS_OP__COUNT; op++) {
		const struct tfs_backend_op_stats *os = &st->op[op];
		struct tfs_backend_op_snap snap = {
			.requests = atomic_load(&os->requests),
			.errors = atomic_load(&os->errors),
			.payload_bytes = atomic_load(&os->bytes),
			.latency = &os->latency,
		};
		struct json_object *o = tfs_stat_object(&tfs_backend_op_stattab, &snap);
		if (o != NULL)
			json_object_object_add(bo, tfs_backend_op_name((enum tfs_backend_op)op), o);
	}
	struct backend_snap snap = {
		.list_foreign_dropped = atomic_load(&st->list_foreign_dropped),
		.list_loops = atomic_load(&st->list_loops),
		.source = be->describe,
	};
	(void)tfs_stat_json(bo, &tfs_backend_stattab, &snap);
	if (be->ops->stats)
		be->ops->stats(be->priv, bo);
	return bo;
}
