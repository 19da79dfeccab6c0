/* stats_schema.h - every table of rows (lib/statdef.h) of the daemon's
 * statistics, and the rows of the members the daemon itself reports.
 *
 * `tierfs stats --json` is one object, built by the daemon's collect
 * callback (daemon.c): the members below (top level, "log", "reload",
 * "keeper", "metrics"), then each part's own object, built from its
 * table: "fuse" (fs.c), "ram" (cache/ram.c), "ssd" (cache/ssd.c),
 * "backend" and "backend.near" (backends/backend.c, near.c), "metadata",
 * "prefetch", "writeback" (cache/) and "follow" (follow.c).
 *
 * tfs_stats_schema lists all those tables, in the order of the families
 * of the Prometheus exposition (src/metrics.c renders it from them).
 * A part that adds a section adds its table here.
 */
#ifndef TFS_STATS_SCHEMA_H
#define TFS_STATS_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "statdef.h"

/* The top level of the stats. */
struct tfs_stats_top {
	const char *mountpoint, *source, *version;
	int64_t pid, uptime_s;
};

/* "log" */
struct tfs_stats_log {
	const char *level;
	uint64_t suppressed;
};

/* "reload": reloads by result */
struct tfs_stats_reload {
	uint64_t ok, failed;
};

/* "keeper" (under a keeper only, keeper.h) */
struct tfs_stats_keeper {
	int64_t pid;
	uint64_t generation, restarts, crashes, upgrades;
	const char *last_restart_cause;
	uint64_t backoff_ms;
	bool resumed, resend;
	uint64_t serving_since_ns, last_pause_ms;
	double last_pause_s;
};

/* "metrics" (with [metrics] listen only) */
struct tfs_stats_metrics {
	const char *listen;
};

extern const struct tfs_stattab tfs_stats_top_tab;
extern const struct tfs_stattab tfs_stats_log_tab;
extern const struct tfs_stattab tfs_stats_reload_tab;
extern const struct tfs_stattab tfs_stats_keeper_tab;
extern const struct tfs_stattab tfs_stats_metrics_tab;

/* Every table, in the exposition's order. */
extern const struct tfs_stattab *const tfs_stats_schema[];
extern const size_t tfs_stats_schema_len;

#endif
