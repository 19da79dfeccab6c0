/* daemon_internal.h - what daemon.c and daemon_reload.c share: the
 * daemon's state, and the reload entry points daemon.c calls. */
#ifndef TFS_DAEMON_INTERNAL_H
#define TFS_DAEMON_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ctl.h"
#include "log.h"
#include "warmup.h"

/* The log rate limiter's interval; the reload thread flushes its counts
 * of suppressed lines as often. */
#define LOG_INTERVAL_MS 10000

struct fuse_session;
struct tfs_config;
struct tfs_keeper_link;
struct tfs_session_io;

/* The state of a running daemon, built by tfs_daemon_run() (daemon.c). */
struct daemon_ctx {
	struct tfs_stack *stack;
	struct tfs_fs *fs;
	struct tfs_warmup_ctx warm;
	struct tfs_follow *follow;
	struct tfs_metrics *metrics;
	char *prefix; /* the S3 prefix without its trailing '/' */
	uint64_t drain_timeout_ms;
	const char *mountpoint;
	const char *source;
	time_t started;
	/* Reload.  `cfg` is the configuration in force: reload() replaces it
	 * under reload_lock; nothing else reads it once the stack runs. */
	pthread_mutex_t reload_lock;
	struct tfs_config *cfg;
	const char *conf_path; /* -c (absolute), or NULL: the default file */
	char **overrides;      /* the mount's -o section.key=value */
	size_t n_overrides;
	bool debug;          /* -d: the level stays debug */
	struct tfs_log *log; /* the daemon's logger and the sink it feeds */
	struct tfs_log *sink_log;
	atomic_uint_fast64_t reloads_ok, reloads_failed;
	struct tfs_ctl *ctl;     /* the control socket; NULL until started */
	struct fuse_session *se; /* NULL until created */
	/* Under a keeper (NULL otherwise). */
	const struct tfs_keeper_link *keeper;
	struct tfs_session_io *io;
	pthread_t loop_thread;  /* runs the session loop */
	atomic_bool upgrading;  /* `tierfs upgrade` asked to hand over */
	atomic_bool loop_ended; /* the session loop returned */
};

/* The thread that turns SIGHUP into reloads, and flushes the log rate
 * limiter's counts of suppressed lines every interval. */
struct hup {
	struct daemon_ctx *d;
	int sigfd;  /* signalfd for SIGHUP */
	int stopfd; /* eventfd: stop */
	pthread_t thread;
	bool started;
};

/* {"cmd":"reload"}, a tfs_ctl_handler (ctx: the daemon_ctx): read the
 * configuration again and apply what can change while mounted (see
 * reload() in daemon_reload.c).  Replies {"config":PATH,"applied":[...],
 * "needs_remount":[...]}; an invalid configuration is EINVAL with its
 * message (FILE:LINE: ...).  Thread safe: reloads are serialised by
 * d->reload_lock. */
int daemon_reload_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			  struct json_object **resp);

/* Start the thread that turns SIGHUP into reloads (and flushes the log
 * limiter's counts every LOG_INTERVAL_MS); SIGHUP must be blocked in every
 * thread already.  `h` must be {.sigfd = -1, .stopfd = -1} before.
 * Returns 0 or an errno (logged); daemon_hup_stop() cleans up either
 * way. */
int daemon_hup_start(struct hup *h, struct daemon_ctx *d);

/* Stop and join the thread if it runs, and close its descriptors.  Safe on
 * a `h` whose start failed or never happened. */
void daemon_hup_stop(struct hup *h);

#endif
