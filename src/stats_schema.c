/* stats_schema.c - the rows of the daemon's own stats members, and the
 * list of every table (stats_schema.h). */
#include "config.h"

#include "stats_schema.h"

#include "backend.h"
#include "follow.h"
#include "fs.h"
#include "meta.h"
#include "near.h"
#include "prefetch.h"
#include "ram.h"
#include "ssd.h"
#include "writeback.h"

#define ROW(f, ...) TFS_STAT(struct tfs_stats_top, f, __VA_ARGS__)
static const struct tfs_statdef top_rows[] = {
	ROW(mountpoint, TFS_JSON_ONLY, NULL, "a string: every sample's mount label"),
	ROW(source, TFS_JSON_ONLY, NULL, "a string: a label of tierfs_info"),
	ROW(version, TFS_INFO, "tierfs_info",
	    "Always 1; the labels give the tierfs version and the mount source.",
	    TFS_LABEL("version", "source")),
	ROW(pid, TFS_JSON_ONLY, NULL, "the daemon's pid"),
	ROW(uptime_s, TFS_GAUGE, "tierfs_uptime_seconds", "Seconds since the daemon started."),
};
#undef ROW

#define ROW(f, ...) TFS_STAT(struct tfs_stats_log, f, __VA_ARGS__)
static const struct tfs_statdef log_rows[] = {
	ROW(level, TFS_JSON_ONLY, NULL, "a string: log.level"),
	ROW(suppressed, TFS_COUNTER, "tierfs_log_suppressed_total",
	    "Error and warning lines dropped by the log rate limiter."),
};
#undef ROW

#define ROW(f, ...) TFS_STAT(struct tfs_stats_reload, f, __VA_ARGS__)
static const struct tfs_statdef reload_rows[] = {
	ROW(ok, TFS_COUNTER, "tierfs_config_reloads_total",
	    "Configuration reloads (SIGHUP or tierfs reload), by result (ok, failed).",
	    TFS_LABEL("result", "ok")),
	ROW(failed, TFS_COUNTER, "tierfs_config_reloads_total", NULL,
	    TFS_LABEL("result", "failed")),
};
#undef ROW

#define ROW(f, ...) TFS_STAT(struct tfs_stats_keeper, f, __VA_ARGS__)
static const struct tfs_statdef keeper_rows[] = {
	ROW(pid, TFS_JSON_ONLY, NULL, "the keeper's pid"),
	ROW(generation, TFS_GAUGE, "tierfs_daemon_generation",
	    "The daemon's generation: 0 for the first of the mount, +1 at each restart or "
	    "upgrade."),
	ROW(restarts, TFS_JSON_ONLY, NULL,
	    "crashes + upgrades: tierfs_daemon_restarts_total by cause"),
	ROW(crashes, TFS_COUNTER, "tierfs_daemon_restarts_total",
	    "Daemons the keeper started after the first, by cause (crash: a signal or a failure; "
	    "upgrade: tierfs upgrade).",
	    TFS_LABEL("cause", "crash")),
	ROW(upgrades, TFS_COUNTER, "tierfs_daemon_restarts_total", NULL,
	    TFS_LABEL("cause", "upgrade")),
	ROW(last_restart_cause, TFS_JSON_ONLY, NULL, "a string: the last restart's cause"),
	ROW(backoff_ms, TFS_JSON_ONLY, NULL, "the keeper's wait before the next restart"),
	ROW(resumed, TFS_JSON_ONLY, NULL, "whether this daemon took over the session"),
	ROW(resend, TFS_JSON_ONLY, NULL, "whether this daemon asked the kernel to resend"),
	ROW(serving_since_ns, TFS_JSON_ONLY, NULL, "a timestamp"),
	ROW(last_pause_ms, TFS_JSON_ONLY, NULL, "tierfs_daemon_last_pause_seconds, in ms"),
	ROW(last_pause_s, TFS_GAUGE, "tierfs_daemon_last_pause_seconds",
	    "Seconds the mount went unserved before this daemon served (0 for the first daemon)."),
};
#undef ROW

#define ROW(f, ...) TFS_STAT(struct tfs_stats_metrics, f, __VA_ARGS__)
static const struct tfs_statdef metrics_rows[] = {
	ROW(listen, TFS_JSON_ONLY, NULL, "a string: where the metrics are served"),
};
#undef ROW

const struct tfs_stattab tfs_stats_top_tab = TFS_STATTAB("", top_rows);
const struct tfs_stattab tfs_stats_log_tab = TFS_STATTAB("log", log_rows);
const struct tfs_stattab tfs_stats_reload_tab = TFS_STATTAB("reload", reload_rows);
const struct tfs_stattab tfs_stats_keeper_tab = TFS_STATTAB("keeper", keeper_rows);
const struct tfs_stattab tfs_stats_metrics_tab = TFS_STATTAB("metrics", metrics_rows);

const struct tfs_stattab *const tfs_stats_schema[] = {
	&tfs_stats_top_tab,    &tfs_stats_reload_tab,   &tfs_stats_log_tab,
	&tfs_stats_keeper_tab, &tfs_ram_stattab,        &tfs_ssd_stattab,
	&tfs_meta_stattab,     &tfs_backend_op_stattab, &tfs_backend_stattab,
	&tfs_near_stattab,     &tfs_near_far_stattab,   &tfs_wb_stattab,
	&tfs_prefetch_stattab, &tfs_follow_stattab,     &tfs_fs_op_stattab,
	&tfs_fs_stattab,       &tfs_stats_metrics_tab,
};

const size_t tfs_stats_schema_len = sizeof(tfs_stats_schema) / sizeof(tfs_stats_schema[0]);
