/* daemon.c - the tierfs daemon's lifecycle: set-up (logger, cache stack,
 * bucket probe, control socket, metrics, reload thread), the FUSE session
 * from mount to unmount, and teardown; with what runs beside the session:
 * the `stats` and `drain` commands and the kernel readahead tuning.
 * Reloads (the `reload` command, SIGHUP) are in daemon_reload.c.
 *
 * Signals.  SIGHUP reloads the configuration (daemon_reload.c), also in
 * the foreground; SIGINT and SIGTERM unmount.  tfs_daemon_run() blocks
 * SIGHUP before it creates any thread, so every thread inherits the block,
 * and a reload thread reads it from a signalfd: nothing runs in a signal
 * handler.  libfuse's fuse_set_signal_handlers() installs a handler for
 * SIGHUP too (it would end the session), but a signal blocked in every
 * thread never reaches it.  SIGINT/SIGTERM stay with libfuse: its handler
 * only sets the session's exit flag.
 */
#include "config.h"

#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <fuse_lowlevel.h>
#include <json-c/json.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "commands.h"
#include "ctl.h"
#include "daemon_internal.h"
#include "dbuf.h"
#include "fs.h"
#include "follow.h"
#include "follow_ctl.h"
#include "keeper.h"
#include "metrics.h"
#include "session_io.h"
#include "stack.h"
#include "stats_schema.h"
#include "warmup.h"

#define FUSE_THREADS 16
/* Log rate limit: lines of one error or warning format per interval
 * (LOG_INTERVAL_MS, daemon_internal.h). */
#define LOG_BURST 5

/* ---- the commands: stats, drain, upgrade ---- */

/* The keeper's part of the statistics: restarts, their last cause, the
 * last pause (from the last daemon's end, or its hand-over, to this
 * daemon serving). */
static void keeper_stats(struct daemon_ctx *d, struct json_object *o)
{
	const struct tfs_keeper_link *k = d->keeper;
	uint64_t serving = tfs_session_io_serving_ns(d->io);
	uint64_t ns = k->stopped_ns && serving >= k->stopped_ns ? serving - k->stopped_ns : 0;
	struct tfs_stats_keeper s = {
		.pid = k->keeper_pid,
		.generation = k->generation,
		.restarts = k->restarts,
		.crashes = k->crashes,
		.upgrades = k->upgrades,
		.last_restart_cause = k->cause,
		.backoff_ms = k->backoff_ms,
		.resumed = tfs_session_io_resumed(d->io),
		.resend = tfs_session_io_resent(d->io),
		.serving_since_ns = serving,
		.last_pause_ms = (ns + 500000) / 1000000,
		.last_pause_s = (double)ns / 1e9,
	};
	(void)tfs_stat_add_section(o, &tfs_stats_keeper_tab, &s);
}

/* The statistics: `tierfs stats` and the metrics endpoint.  NULL on
 * ENOMEM. */
static struct json_object *collect(void *vctx)
{
	struct daemon_ctx *d = vctx;
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return NULL;
	struct tfs_stats_top top = {
		.mountpoint = d->mountpoint,
		.source = d->source,
		.version = PACKAGE_VERSION,
		.pid = getpid(),
		.uptime_s = (int64_t)(time(NULL) - d->started),
	};
	(void)tfs_stat_json(o, &tfs_stats_top_tab, &top);
	tfs_fs_stats(d->fs, o);
	tfs_stack_stats(d->stack, o);
	if (d->follow)
		tfs_follow_stats(d->follow, o);
	struct tfs_stats_log lg = {
		.level = tfs_log_level_name((enum tfs_log_level)atomic_load(&d->log->level)),
		.suppressed = tfs_log_suppressed(d->log),
	};
	(void)tfs_stat_add_section(o, &tfs_stats_log_tab, &lg);
	struct tfs_stats_reload rl = {
		.ok = atomic_load(&d->reloads_ok),
		.failed = atomic_load(&d->reloads_failed),
	};
	(void)tfs_stat_add_section(o, &tfs_stats_reload_tab, &rl);
	if (d->keeper)
		keeper_stats(d, o);
	if (d->metrics) {
		struct tfs_stats_metrics mt = { .listen = tfs_metrics_address(d->metrics) };
		(void)tfs_stat_add_section(o, &tfs_stats_metrics_tab, &mt);
	}
	return o;
}

static int stats_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			 struct json_object **resp)
{
	(void)conn;
	(void)req;
	*resp = collect(vctx);
	return *resp ? 0 : ENOMEM;
}

/* {"cmd":"drain"}: upload everything pending now.  Without "wait" it
 * waits up to writeback.drain_timeout, or "timeout_ms" if shorter
 * (unmount, the FlexVolume driver); with "wait": true until
 * nothing is left but uploads that gave up (flush), sending progress
 * every second.  Replies {"files":N,"bytes":N} with what is left. */
static int drain_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			 struct json_object **resp)
{
	struct daemon_ctx *d = vctx;
	struct json_object *w, *t;
	bool wait = json_object_object_get_ex(req, "wait", &w) && json_object_get_boolean(w);
	uint64_t files = 0, bytes = 0, timeout = d->drain_timeout_ms;
	if (json_object_object_get_ex(req, "timeout_ms", &t)) {
		int64_t ms = json_object_get_int64(t);
		if (ms >= 0 && (uint64_t)ms < timeout)
			timeout = (uint64_t)ms;
	}
	if (tfs_wb_writable(d->stack->wb)) {
		if (!wait) {
			(void)tfs_wb_drain(d->stack->wb, timeout, &files, &bytes);
		} else {
			while (tfs_wb_drain(d->stack->wb, 1000, &files, &bytes) == ETIMEDOUT &&
			       !tfs_ctl_conn_cancelled(conn)) {
				struct json_object *p = json_object_new_object();
				if (p) {
					json_object_object_add(p, "files",
							       json_object_new_uint64(files));
					json_object_object_add(p, "bytes",
							       json_object_new_uint64(bytes));
					(void)tfs_ctl_send_progress(conn, p);
					json_object_put(p);
				}
				struct json_object *st = json_object_new_object();
				bool stuck = false;
				if (st) {
					/* Only uploads that gave up are left: stop waiting. */
					struct json_object *wbo, *pf, *ff;
					tfs_wb_stats(d->stack->wb, st);
					stuck = json_object_object_get_ex(st, "writeback", &wbo) &&
						json_object_object_get_ex(wbo, "pending_files",
									  &pf) &&
						json_object_object_get_ex(wbo, "failed_files",
									  &ff) &&
						json_object_get_int64(pf) ==
							json_object_get_int64(ff);
					json_object_put(st);
				}
				if (stuck)
					break;
			}
		}
	}
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return ENOMEM;
	json_object_object_add(o, "files", json_object_new_uint64(files));
	json_object_object_add(o, "bytes", json_object_new_uint64(bytes));
	*resp = o;
	return 0;
}

/* Wakes the session loop's thread out of its wait (libfuse 3.14 waits on
 * a semaphore that only a signal or a worker's end interrupts). */
static void wake_handler(int sig)
{
	(void)sig;
}

/* {"cmd":"upgrade"} (under a keeper only): stop reading requests, let the
 * ones in flight finish, and exit with TFS_DAEMON_EXIT_UPGRADE so that the
 * keeper starts the binary now on disk.  Replies {"pid":N,"generation":N}
 * at once; `tierfs upgrade` then waits for the next generation. */
static int upgrade_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			   struct json_object **resp)
{
	struct daemon_ctx *d = vctx;
	(void)conn;
	(void)req;
	if (d->se == NULL || tfs_session_io_serving_ns(d->io) == 0) {
		*resp = json_object_new_string("the daemon is not serving yet");
		return EAGAIN;
	}
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return ENOMEM;
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "generation", json_object_new_uint64(d->keeper->generation));
	if (!atomic_exchange(&d->upgrading, true)) {
		tfs_info(d->log, "upgrade: handing %s over to the binary on disk", d->mountpoint);
		fuse_session_exit(d->se);
		/* The pause starts now: the keeper notes the time. */
		kill(d->keeper->keeper_pid, SIGUSR1);
		for (int i = 0; i < 500 && !atomic_load(&d->loop_ended); i++) {
			pthread_kill(d->loop_thread, SIGUSR2);
			struct timespec ts = { 0, 10 * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	*resp = o;
	return 0;
}

/* ---- beside the session: readahead, the report to the parent ---- */

/* The kernel caps a FUSE mount's readahead at 128 KiB (the bdi default,
 * fixed when INIT is answered), so sequential reads arrive as 128 KiB
 * requests one or two at a time.  Raising the bdi's read_ahead_kb after
 * INIT lets it send several 1 MiB reads in parallel.  The stat() below
 * blocks until INIT has been answered, so this runs on its own thread
 * while the session loop starts. */
struct bdi_tune {
	const char *mountpoint;
	uint64_t readahead;
	const struct tfs_log *log;
};

static void *tune_bdi(void *arg)
{
	struct bdi_tune *t = arg;
	struct stat st;
	char path[128], val[32];
	if (stat(t->mountpoint, &st) != 0)
		return NULL;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev),
		 minor(st.st_dev));
	int n = snprintf(val, sizeof(val), "%llu", (unsigned long long)(t->readahead / 1024));
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)n) != n)
		tfs_debug(t->log, "cannot raise the kernel readahead (%s): %s", path,
			  strerror(errno));
	else
		tfs_debug(t->log, "kernel readahead of %s set to %s KiB", t->mountpoint, val);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* Tell the waiting parent how it went: "ok" or the error text. */
static void report(int fd, const char *msg)
{
	if (fd < 0)
		return;
	size_t n = strlen(msg);
	while (n) {
		ssize_t w = write(fd, msg, n);
		if (w <= 0)
			break;
		msg += w;
		n -= (size_t)w;
	}
	close(fd);
}

/* A logger sink that also remembers the last error line, so a failed
 * start can report the real cause to the parent. */
struct tee {
	struct tfs_log inner;
	pthread_mutex_t lock; /* last_error: any thread may log an error */
	char last_error[512];
};

static void tee_sink(void *ctx, enum tfs_log_level level, const char *line)
{
	struct tee *t = ctx;
	if (level == TFS_LOG_ERROR) {
		pthread_mutex_lock(&t->lock);
		snprintf(t->last_error, sizeof(t->last_error), "%s", line);
		pthread_mutex_unlock(&t->lock);
	}
	if ((int)level <= atomic_load(&t->inner.level))
		t->inner.sink(t->inner.ctx, level, line);
}

/* ---- the lifecycle: set-up, session, teardown ---- */

/* Open the logger: log.file, else stderr in the foreground, else syslog;
 * behind a tee that keeps the last error line, and a rate limit.  On
 * failure the message goes to the parent (and to stderr in the
 * foreground); returns 0 or the errno. */
static int log_open(const struct tfs_daemon_opts *o, struct tee *tee, struct tfs_log *log,
		    int status_fd)
{
	const struct tfs_config *cfg = o->cfg;
	enum tfs_log_level level = o->debug ? TFS_LOG_DEBUG : cfg->log.level;
	int rc;

	if (cfg->log.file && *cfg->log.file) {
		rc = tfs_log_init_file(&tee->inner, cfg->log.file, level);
		if (rc) {
			char msg[600];
			snprintf(msg, sizeof(msg), "log.file '%s': %s", cfg->log.file,
				 strerror(rc));
			report(status_fd, msg);
			if (o->foreground)
				fprintf(stderr, "tierfs: %s\n", msg);
			return rc;
		}
	} else if (o->foreground) {
		tfs_log_init_stderr(&tee->inner, level);
	} else {
		tfs_log_init_syslog(&tee->inner, level);
	}
	tfs_log_init(log, tee_sink, tee, TFS_LOG_DEBUG);
	atomic_store(&log->level, (int)level > TFS_LOG_ERROR ? (int)level : TFS_LOG_ERROR);
	if (tfs_log_limit(log, LOG_BURST, LOG_INTERVAL_MS, NULL) != 0)
		tfs_warn(log, "out of memory: repeated errors are not rate-limited");
	return 0;
}

/* Set-up, 1: the cache stack, the bucket probe, the FUSE state.  Returns 0,
 * or an errno with *fail set. */
static int open_stack(struct daemon_ctx *d, const struct tfs_daemon_opts *o, const char **fail)
{
	const struct tfs_config *cfg = o->cfg;
	int rc;

	d->drain_timeout_ms = cfg->writeback.drain_timeout_ms;
	rc = tfs_stack_open(cfg, o->src, o->ro, o->mountpoint, d->log, &d->stack);
	if (rc) {
		*fail = "cannot set up the cache stack";
		return rc;
	}
	/* Probe the bucket now, so that a wrong name or key fails the mount
	 * with a clear message.  An unreachable backend is not fatal: a warm
	 * cache can serve without it. */
	struct tfs_list_page p = { 0 };
	rc = tfs_backend_list(d->stack->be, "", "/", NULL, 1, &p);
	tfs_list_page_clear(&p);
	if (rc == EIO) {
		tfs_warn(d->log, "%s is unreachable: serving from the cache until it answers",
			 o->source);
		rc = 0;
	} else if (rc) {
		*fail = rc == ENOENT ? "the bucket does not exist" : "the bucket cannot be listed";
		return rc;
	}
	struct tfs_fs_config fsc = *o->fsc;
	if (d->keeper) {
		fsc.resumed = tfs_session_io_resumed(d->io);
		fsc.generation = d->keeper->generation;
	}
	rc = tfs_fs_create(&fsc, d->stack->meta, d->stack->top, d->stack->pf,
			   tfs_wb_writable(d->stack->wb) ? d->stack->wb : NULL, d->stack->be,
			   d->log, &d->fs);
	if (rc) {
		*fail = "out of memory";
		return rc;
	}
	return 0;
}

/* Set-up, 2: the control socket and its commands (stats, drain, reload,
 * the warm-up commands, and follow when prefetch.workers > 0).  Returns 0,
 * or an errno with *fail set. */
static int start_ctl(struct daemon_ctx *d, const struct tfs_daemon_opts *o, const char **fail)
{
	const struct tfs_config *cfg = o->cfg;
	const struct tfs_source *src = o->src;
	char sock[PATH_MAX];
	int rc;

	rc = tfs_ctl_socket_path(o->mountpoint, sock, sizeof(sock));
	if (rc == 0)
		rc = tfs_ctl_start(sock, d->log, &d->ctl);
	if (rc == 0)
		rc = tfs_ctl_register(d->ctl, "stats", stats_handler, d);
	if (rc == 0)
		rc = tfs_ctl_register(d->ctl, "drain", drain_handler, d);
	if (rc == 0)
		rc = tfs_ctl_register(d->ctl, "reload", daemon_reload_handler, d);
	if (rc == 0 && d->keeper)
		rc = tfs_ctl_register(d->ctl, "upgrade", upgrade_handler, d);
	if (rc == 0) {
		d->prefix = strdup(src->kind == TFS_SOURCE_S3 && src->prefix ? src->prefix : "");
		if (d->prefix == NULL)
			rc = ENOMEM;
	}
	if (rc == 0) {
		size_t pl = strlen(d->prefix);
		if (pl && d->prefix[pl - 1] == '/')
			d->prefix[pl - 1] = '\0';
		d->warm = (struct tfs_warmup_ctx){
			.meta = d->stack->meta,
			.wb = tfs_wb_writable(d->stack->wb) ? d->stack->wb : NULL,
			.ram = d->stack->top,
			.ssd = d->stack->ssd,
			.log = d->log,
			.scope = { .mountpoint = o->mountpoint,
				   .bucket = src->kind == TFS_SOURCE_S3 ? src->bucket : NULL,
				   .prefix = d->prefix },
			.default_jobs = cfg->prefetch.workers,
		};
		rc = tfs_warmup_register(d->ctl, &d->warm);
	}
	if (rc == 0 && cfg->prefetch.workers > 0) {
		/* A uid's share of order memory: half of it all unless set,
		 * so the mount's uid and root (the writers) never crowd each
		 * other out. */
		uint64_t uid_max = cfg->prefetch.order_max_uid ? cfg->prefetch.order_max_uid
							       : cfg->prefetch.order_max / 2;
		struct tfs_follow_config fc = { .workers = cfg->prefetch.workers,
						.window = 4 * cfg->prefetch.workers,
						.stall_ms = cfg->prefetch.stall_ms,
						.max_bytes = cfg->prefetch.order_max,
						.uid_max = uid_max < cfg->prefetch.order_max
								   ? uid_max
								   : cfg->prefetch.order_max };
		rc = tfs_follow_create(d->stack->top, d->stack->meta, &fc, d->log, &d->follow);
		if (rc == 0)
			rc = tfs_follow_register(d->ctl, d->follow, &d->warm.scope);
		if (rc == 0)
			tfs_fs_set_follow(d->fs, d->follow, &d->warm.scope);
	}
	if (rc)
		*fail = "cannot start the control socket";
	return rc;
}

/* Set-up: everything that runs before the mount, in order; the metrics
 * endpoint and the reload thread come last.  Returns 0, or an errno with
 * *fail set; teardown() stops what was started. */
static int setup(struct daemon_ctx *d, const struct tfs_daemon_opts *o, struct hup *hup,
		 const char **fail)
{
	const struct tfs_config *cfg = o->cfg;
	int rc;

	rc = open_stack(d, o, fail);
	if (rc == 0)
		rc = start_ctl(d, o, fail);
	if (rc)
		return rc;
	if (cfg->metrics.listen) {
		rc = tfs_metrics_start(cfg->metrics.listen, o->mountpoint, collect, d, d->log,
				       &d->metrics);
		if (rc) {
			*fail = "cannot serve the metrics ([metrics] listen)";
			return rc;
		}
	}
	rc = daemon_hup_start(hup, d);
	if (rc)
		*fail = "cannot watch SIGHUP";
	return rc;
}

/* The multithreaded session loop, until the filesystem is unmounted or
 * SIGINT/SIGTERM; the kernel readahead is raised beside it. */
static int session_loop(struct daemon_ctx *d, const struct tfs_daemon_opts *o)
{
	struct bdi_tune bt = {
		.mountpoint = o->mountpoint,
		.readahead = o->cfg->prefetch.readahead,
		.log = d->log,
	};
	pthread_t bt_thread;
	/* A resumed daemon serves a bdi that was raised already.  (Its
	 * stat() would also wait on this very connection: a daemon that died
	 * while the stat waited could not finish dumping core.) */
	bool bt_started = bt.readahead >= TFS_MAX_READ &&
			  !(d->io && tfs_session_io_resumed(d->io)) &&
			  pthread_create(&bt_thread, NULL, tune_bdi, &bt) == 0;

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (lc) {
		/* Under a keeper a cloned /dev/fuse descriptor would die with
		 * this process, and the kernel would end the requests it holds
		 * with ECONNABORTED: every thread reads the keeper's. */
		fuse_loop_cfg_set_clone_fd(lc, d->keeper ? 0 : 1);
		/* Each FUSE thread holds a max_read-sized receive buffer: 16
		 * threads are 16 MiB, inside the 64 MiB beyond ram.size.
		 * Idle threads are kept: with fewer kept than started, every
		 * burst of kernel read-ahead requests made libfuse start
		 * threads and end them again (74 thread starts, each with a
		 * new stack, /dev/fuse clone and receive buffer, in one cold
		 * 512 MiB read). */
		fuse_loop_cfg_set_max_threads(lc, FUSE_THREADS);
		fuse_loop_cfg_set_idle_threads(lc, FUSE_THREADS);
	}
	d->loop_thread = pthread_self();
	(void)tfs_fs_trim_start(d->fs);
	int rc = fuse_session_loop_mt(d->se, lc);
	atomic_store(&d->loop_ended, true);
	tfs_fs_trim_stop(d->fs);
	fuse_loop_cfg_destroy(lc);
	if (bt_started)
		pthread_join(bt_thread, NULL);
	return rc;
}

/* Drain the write-back for up to writeback.drain_timeout after the end
 * of the session. */
static void drain_at_end(struct daemon_ctx *d)
{
	if (tfs_wb_writable(d->stack->wb)) {
		uint64_t files = 0, bytes = 0;
		if (tfs_wb_drain(d->stack->wb, d->drain_timeout_ms, &files, &bytes) != 0)
			tfs_warn(d->log,
				 "write-back: %" PRIu64 " file(s), %" PRIu64 " byte(s) not "
				 "uploaded "
				 "yet stay in the journal for the next mount",
				 files, bytes);
	}
}

/* Under a keeper: serve the keeper's connection (daemon.h), and set
 * *o->exit_status from how the session ended.  Returns 0, or an errno
 * with *fail set when the session could not start. */
static int serve_kept(struct daemon_ctx *d, const struct tfs_daemon_opts *o, int *status_fd,
		      const char **fail)
{
	struct sigaction sa = { .sa_handler = wake_handler };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR2, &sa, NULL) != 0 || fuse_set_signal_handlers(d->se) != 0) {
		*fail = "cannot install signal handlers";
		return EIO;
	}
	int rc = tfs_session_io_attach(d->io, d->se, d->fs);
	if (rc) {
		*fail = "cannot serve the keeper's FUSE connection";
		fuse_remove_signal_handlers(d->se);
		return rc;
	}
	if (d->keeper->generation == 0)
		tfs_info(d->log, "mounted %s on %s", o->source, o->mountpoint);
	else
		tfs_info(d->log, "serving %s on %s again (generation %" PRIu32 ", after: %s)",
			 o->source, o->mountpoint, d->keeper->generation, d->keeper->cause);
	report(*status_fd, "ok");
	*status_fd = -1;

	rc = session_loop(d, o);
	if (tfs_session_io_mismatch(d->io)) {
		*o->exit_status = TFS_DAEMON_EXIT_RESUME;
	} else if (atomic_load(&d->upgrading)) {
		tfs_info(d->log,
			 "upgrade: stopped serving %s; the keeper starts the binary on disk",
			 o->mountpoint);
		*o->exit_status = TFS_DAEMON_EXIT_UPGRADE;
	} else if (tfs_session_io_unmounted(d->io)) {
		tfs_info(d->log, "unmounted %s", o->mountpoint);
		drain_at_end(d);
		*o->exit_status = 0;
	} else if (rc < 0) {
		tfs_err(d->log, "the FUSE session of %s failed: %s", o->mountpoint, strerror(-rc));
		*o->exit_status = TFS_EXIT_FAIL;
	} else {
		/* SIGINT or SIGTERM (libfuse returns the signal's number): the
		 * keeper unmounts. */
		tfs_info(d->log, "signalled: asking the keeper to unmount %s", o->mountpoint);
		kill(d->keeper->keeper_pid, SIGTERM);
		drain_at_end(d);
		*o->exit_status = 0;
	}
	fuse_remove_signal_handlers(d->se);
	return 0;
}

/* The session: create it, mount, report "ok" to the parent (*status_fd
 * becomes -1), run the loop, unmount, and drain the write-back for up to
 * writeback.drain_timeout.  Returns 0 once unmounted, or an errno with
 * *fail set when there was no mount. */
static int serve(struct daemon_ctx *d, const struct tfs_daemon_opts *o, int *status_fd,
		 const char **fail)
{
	d->se = fuse_session_new(o->fargs, tfs_fs_ops(), sizeof(struct fuse_lowlevel_ops), d->fs);
	if (d->se == NULL) {
		*fail = "invalid FUSE options";
		return EINVAL;
	}
	tfs_fs_set_session(d->fs, d->se);
	if (d->keeper)
		return serve_kept(d, o, status_fd, fail);
	if (fuse_set_signal_handlers(d->se) != 0) {
		*fail = "cannot install signal handlers";
		return EIO;
	}
	if (fuse_session_mount(d->se, o->mountpoint) != 0) {
		*fail = "the kernel refused the mount (see above; is the mountpoint busy?)";
		fuse_remove_signal_handlers(d->se);
		return EIO;
	}
	tfs_info(d->log, "mounted %s on %s", o->source, o->mountpoint);
	report(*status_fd, "ok");
	*status_fd = -1;

	(void)session_loop(d, o);
	fuse_session_unmount(d->se);
	tfs_info(d->log, "unmounted %s", o->mountpoint);
	drain_at_end(d);
	fuse_remove_signal_handlers(d->se);
	return 0;
}

/* Tell the log and the parent why the start failed: `fail`, the errno,
 * and the last error line logged. */
static void report_failure(struct daemon_ctx *d, struct tee *tee, const char *fail, int rc,
			   int status_fd)
{
	char msg[1024], last[sizeof(tee->last_error)];

	/* A copy: the threads already started may still log errors. */
	pthread_mutex_lock(&tee->lock);
	memcpy(last, tee->last_error, sizeof(last));
	pthread_mutex_unlock(&tee->lock);
	snprintf(msg, sizeof(msg), "%s: %s%s%s", fail, strerror(rc), last[0] ? "; " : "", last);
	tfs_err(d->log, "mount of %s on %s failed: %s", d->source, d->mountpoint, msg);
	report(status_fd, msg);
}

/* Teardown, the reverse of set-up; each step skips what was not
 * started. */
static void teardown(struct daemon_ctx *d, struct hup *hup)
{
	daemon_hup_stop(hup);
	tfs_ctl_stop(d->ctl); /* its stats handler reads d->metrics */
	tfs_metrics_stop(d->metrics);
	/* First: its builder answers the closes it holds (their texts are
	 * in the handles tfs_fs_destroy() frees) while the session exists. */
	tfs_follow_destroy(d->follow);
	if (d->fs)
		tfs_fs_set_follow(d->fs, NULL, NULL);
	if (d->se)
		fuse_session_destroy(d->se);
	tfs_fs_destroy(d->fs);
	tfs_stack_close(d->stack);
	free(d->prefix);
}

int tfs_daemon_run(const struct tfs_daemon_opts *o, int status_fd)
{
	struct tee tee = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct tfs_log log;
	struct hup hup = { .sigfd = -1, .stopfd = -1 };
	sigset_t hupset, oldmask;
	const char *fail = NULL;
	int rc;

	/* Before any thread exists: SIGHUP is read from a signalfd by the
	 * reload thread, so every thread must have it blocked. */
	sigemptyset(&hupset);
	sigaddset(&hupset, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hupset, &oldmask);

	/* Block buffers are 64 KiB..64 MiB: keep them out of the heap arenas
	 * (a fixed mmap threshold returns them to the kernel on free), and
	 * bound the per-thread arenas, so RssAnon tracks ram.size.  (The S3
	 * backend's curl receive buffer stays below it: backends/s3_http.c.) */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	mallopt(M_ARENA_MAX, 4);
	rc = log_open(o, &tee, &log, status_fd);
	if (rc)
		return rc;

	struct daemon_ctx d = {
		.mountpoint = o->mountpoint,
		.source = o->source,
		.started = time(NULL),
		.cfg = o->cfg,
		.conf_path = o->conf_path,
		.overrides = o->overrides,
		.n_overrides = o->n_overrides,
		.debug = o->debug,
		.log = &log,
		.sink_log = &tee.inner,
	};
	pthread_mutex_init(&d.reload_lock, NULL);

	struct tfs_session_io io;
	if (o->keeper) {
		d.keeper = o->keeper;
		d.io = &io;
		*o->exit_status = TFS_EXIT_FAIL;
		rc = tfs_session_io_open(&io, o->keeper->fuse_fd, o->keeper->record_fd,
					 o->keeper->no_resend, &log);
		io.test_mismatch = o->keeper->test_mismatch;
		if (rc)
			fail = "cannot read the FUSE session record";
	}
	if (rc == 0)
		rc = setup(&d, o, &hup, &fail);
	if (rc == 0)
		rc = serve(&d, o, &status_fd, &fail);
	if (fail)
		report_failure(&d, &tee, fail, rc, status_fd);
	teardown(&d, &hup);
	pthread_mutex_destroy(&d.reload_lock);
	tfs_log_unlimit(&log);
	tfs_log_close(&tee.inner);
	pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
	return fail ? rc : 0;
}
