/* cmd_mount.c - `tierfs mount`: option parsing with
 * fuse_opt, daemonizing only once the mount is live, the FUSE session
 * loop, and a clean teardown.
 *
 * Start-up order (nothing before the fork creates threads, curl handles
 * or LMDB environments):
 *   parent: parse options, load and validate the config, check the
 *           mountpoint, fork; then wait on a pipe for the child's verdict
 *           and exit 0 ("mounted") or 1 (the child's error message).
 *   child:  setsid, stdio to /dev/null, logger to syslog or log.file,
 *           build the stack, probe the bucket, start the control socket,
 *           mount, report "ok", run the multithreaded loop.
 * With -f everything runs in the foreground process, logging to stderr.
 *
 * Signals.  SIGHUP reloads the configuration (see reload() below), also in
 * the foreground; SIGINT and SIGTERM unmount.  run_daemon() blocks SIGHUP
 * before it creates any thread, so every thread inherits the block, and a
 * reload thread reads it from a signalfd: nothing runs in a signal
 * handler.  libfuse's fuse_set_signal_handlers() installs a handler for
 * SIGHUP too (it would end the session), but a signal blocked in every
 * thread never reaches it.  SIGINT/SIGTERM stay with libfuse: its handler
 * only sets the session's exit flag.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <fuse_lowlevel.h>
#include <json-c/json.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "ctl.h"
#include "dbuf.h"
#include "fs.h"
#include "follow.h"
#include "metrics.h"
#include "ram.h"
#include "ssd.h"
#include "stack.h"
#include "warmup.h"

struct mount_opts {
	char *conf;
	int foreground;
	int debug;
	int help;
	int allow_other;
	int ro;
	int suid, dev; /* FLAG_*: the last of -o suid/nosuid, -o dev/nodev */
	char *uid, *gid, *file_mode, *dir_mode;
	char **overrides; /* "section.key=value" from -o */
	size_t n_overrides;
	char *source, *mountpoint;
	int bad;
};

enum { KEY_HELP, KEY_FG, KEY_DEBUG };
enum { FLAG_UNSET, FLAG_ON, FLAG_OFF };

#define FUSE_THREADS 16
/* Log rate limit: lines of one error or warning format per interval. */
#define LOG_BURST 5
#define LOG_INTERVAL_MS 10000

#define MOPT(t, f, v) { t, offsetof(struct mount_opts, f), v }
static const struct fuse_opt mount_opt_spec[] = {
	MOPT("-c %s", conf, 0),
	MOPT("--config=%s", conf, 0),
	MOPT("uid=%s", uid, 0),
	MOPT("gid=%s", gid, 0),
	MOPT("file_mode=%s", file_mode, 0),
	MOPT("dir_mode=%s", dir_mode, 0),
	MOPT("allow_other", allow_other, 1),
	MOPT("ro", ro, 1),
	/* Kept here, not passed on: mount_flags() decides them. */
	MOPT("suid", suid, FLAG_ON),
	MOPT("nosuid", suid, FLAG_OFF),
	MOPT("dev", dev, FLAG_ON),
	MOPT("nodev", dev, FLAG_OFF),
	FUSE_OPT_KEY("ro", FUSE_OPT_KEY_KEEP),
	FUSE_OPT_KEY("-f", KEY_FG),
	FUSE_OPT_KEY("--foreground", KEY_FG),
	FUSE_OPT_KEY("-d", KEY_DEBUG),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	/* Options mount(8) and fstab pass along that mean nothing here. */
	FUSE_OPT_KEY("rw", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

static void mount_usage(FILE *f)
{
	fprintf(f,
		"usage: tierfs mount [-c CONF] [-o OPTION[,OPTION...]] [-f] [-d] SOURCE MOUNTPOINT\n"
		"\n"
		"SOURCE is s3://bucket[/prefix] or a local directory.\n"
		"options:\n"
		"  -c CONF                configuration file (default %s)\n"
		"  -f                     stay in the foreground, log to stderr\n"
		"  -d                     debug: foreground, debug logging\n"
		"  -o allow_other         let other users read the mount (adds default_permissions)\n"
		"  -o uid=N,gid=N         owner of objects without x-amz-meta-uid/gid (default: you)\n"
		"  -o file_mode=0644,dir_mode=0755   modes of objects without x-amz-meta-mode\n"
		"  -o ro                  read-only mount\n"
		"  -o suid,dev            only with [mount] trusted = true (otherwise nosuid,nodev)\n"
		"  -o SECTION.KEY=VALUE   override a configuration key (see tierfs.conf(5))\n",
		tfs_config_default_path());
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct mount_opts *o = data;
	switch (key) {
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_FG:
		o->foreground = 1;
		return 0;
	case KEY_DEBUG:
		o->debug = 1;
		o->foreground = 1;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (o->source == NULL) {
			o->source = strdup(arg);
			return 0;
		}
		if (o->mountpoint == NULL) {
			o->mountpoint = strdup(arg);
			return 0;
		}
		fprintf(stderr, "tierfs mount: unexpected argument '%s'\n", arg);
		o->bad = 1;
		return -1;
	case FUSE_OPT_KEY_OPT: {
		const char *eq = strchr(arg, '=');
		const char *dot = strchr(arg, '.');
		if (eq && dot && dot < eq) {
			char **n = realloc(o->overrides, (o->n_overrides + 1) * sizeof(*n));
			if (n == NULL)
				return -1;
			o->overrides = n;
			o->overrides[o->n_overrides] = strdup(arg);
			if (o->overrides[o->n_overrides] == NULL)
				return -1;
			o->n_overrides++;
			return 0;
		}
		if (arg[0] == '-') {
			fprintf(stderr, "tierfs mount: unknown option '%s'\n", arg);
			o->bad = 1;
			return -1;
		}
		return 1; /* a FUSE mount option: pass it on */
	}
	default:
		return 1;
	}
}

/* The suid and dev flags of the kernel mount.  A mount that the
 * configuration does not trust ([mount] trusted = false, the default) is
 * nosuid,nodev, and -o suid or -o dev is refused with a message on stderr
 * (EINVAL).  A trusted mount is suid,dev unless -o nosuid or -o nodev.
 * libfuse would make a mount nosuid,nodev by itself, but any option that
 * reached it could turn that off; here only the configuration can. */
static int mount_flags(const struct mount_opts *o, bool trusted, bool *suid, bool *dev)
{
	if (!trusted && (o->suid == FLAG_ON || o->dev == FLAG_ON)) {
		fprintf(stderr, "tierfs mount: -o %s: the mount is not trusted; set [mount] "
				"trusted = true in tierfs.conf to honour setuid bits and devices "
				"(see tierfs.conf(5))\n", o->suid == FLAG_ON ? "suid" : "dev");
		return EINVAL;
	}
	*suid = trusted && o->suid != FLAG_OFF;
	*dev = trusted && o->dev != FLAG_OFF;
	return 0;
}

/* Append the options the kernel sees to `args`: fuse.tierfs named SOURCE in
 * /proc/mounts, large reads, the suid and dev flags, and allow_other (with
 * default_permissions).  SOURCE goes through fuse_opt_add_opt_escaped(): a
 * ',' or '\' in it gets a backslash, which fuse_opt takes off again when
 * it splits the options, so mount(2) (or fusermount3, which unescapes
 * fsname= the same way) gets SOURCE whole as the name and no part of it
 * becomes an option.  Returns 0 or ENOMEM. */
static int add_kernel_opts(struct fuse_args *args, const char *source, bool suid, bool dev,
			   bool allow_other)
{
	size_t n = strlen(source) + sizeof("fsname=");
	char *fsname = malloc(n);
	char *opts = NULL;
	char flags[128];
	int rc = ENOMEM;

	if (fsname == NULL)
		return ENOMEM;
	snprintf(fsname, n, "fsname=%s", source);
	snprintf(flags, sizeof(flags), "subtype=tierfs,max_read=%u,%s,%s%s", TFS_MAX_READ,
		 suid ? "suid" : "nosuid", dev ? "dev" : "nodev",
		 allow_other ? ",allow_other,default_permissions" : "");
	if (fuse_opt_add_opt_escaped(&opts, fsname) == 0 && fuse_opt_add_opt(&opts, flags) == 0 &&
	    fuse_opt_add_arg(args, "-o") == 0 && fuse_opt_add_arg(args, opts) == 0)
		rc = 0;
	free(opts);
	free(fsname);
	return rc;
}

static int parse_mode(const char *s, const char *what, mode_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 8);
	if (errno || *end != '\0' || end == s || v > 07777) {
		fprintf(stderr, "tierfs mount: %s=%s: expected an octal mode such as 0644\n", what, s);
		return EINVAL;
	}
	*out = (mode_t)v;
	return 0;
}

static int parse_id(const char *s, const char *what, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end != '\0' || end == s || v >= UINT32_MAX) {
		fprintf(stderr, "tierfs mount: %s=%s: expected a number\n", what, s);
		return EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* ---- the daemon ---- */

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
	bool debug;            /* -d: the level stays debug */
	struct tfs_log *log;   /* the daemon's logger and the sink it feeds */
	struct tfs_log *sink_log;
	atomic_uint_fast64_t reloads_ok, reloads_failed;
};

/* The statistics: `tierfs stats` and the metrics endpoint.  NULL on
 * ENOMEM. */
static struct json_object *collect(void *vctx)
{
	struct daemon_ctx *d = vctx;
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return NULL;
	json_object_object_add(o, "mountpoint", json_object_new_string(d->mountpoint));
	json_object_object_add(o, "source", json_object_new_string(d->source));
	json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	json_object_object_add(o, "uptime_s", json_object_new_int64((int64_t)(time(NULL) - d->started)));
	tfs_fs_stats(d->fs, o);
	tfs_stack_stats(d->stack, o);
	if (d->follow)
		tfs_follow_stats(d->follow, o);
	struct json_object *lo = json_object_new_object(), *ro = json_object_new_object();
	if (lo) {
		enum tfs_log_level level = (enum tfs_log_level)atomic_load(&d->log->level);
		uint64_t suppressed = tfs_log_suppressed(d->log);
		json_object_object_add(lo, "level", json_object_new_string(tfs_log_level_name(level)));
		json_object_object_add(lo, "suppressed", json_object_new_uint64(suppressed));
		json_object_object_add(o, "log", lo);
	}
	if (ro) {
		uint64_t ok = atomic_load(&d->reloads_ok), failed = atomic_load(&d->reloads_failed);
		json_object_object_add(ro, "ok", json_object_new_uint64(ok));
		json_object_object_add(ro, "failed", json_object_new_uint64(failed));
		json_object_object_add(o, "reload", ro);
	}
	if (d->metrics) {
		struct json_object *mo = json_object_new_object();
		if (mo) {
			json_object_object_add(mo, "listen",
					       json_object_new_string(tfs_metrics_address(d->metrics)));
			json_object_object_add(o, "metrics", mo);
		}
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

/* ---- reload ---- */

struct changes {
	struct json_object *applied; /* "section.key=value" */
	struct json_object *remount; /* "section.key" */
};

static void on_change(void *ctx, const char *section, const char *key, const char *value,
		      bool reloadable)
{
	struct changes *c = ctx;
	char buf[512];
	snprintf(buf, sizeof(buf), reloadable ? "%s.%s=%s" : "%s.%s", section, key, value);
	json_object_array_add(reloadable ? c->applied : c->remount, json_object_new_string(buf));
}

/* Hand the reloadable values of `next` that differ from `cur` to the
 * layers.  The SSD limits go first: they are the only ones that can be
 * refused (a relative size resolved too small), and then nothing has
 * changed (*applied false).  Later failures (ENOMEM, threads) do not stop
 * the others (*applied true).  Returns 0 or the first error, with the
 * messages in err. */
static int apply(struct daemon_ctx *d, const struct tfs_config *cur, const struct tfs_config *next,
		 struct tfs_dbuf *err, bool *applied)
{
	const struct tfs_ssd_config *a = &cur->ssd, *b = &next->ssd;
	int rc = 0, r;
	*applied = false;
	if (a->size != b->size || a->size_pct != b->size_pct || a->pin_max != b->pin_max ||
	    a->pin_max_pct != b->pin_max_pct || a->high_watermark != b->high_watermark ||
	    a->low_watermark != b->low_watermark) {
		rc = tfs_ssd_set_limits(d->stack->ssd, b);
		if (rc) {
			tfs_dbuf_addf(err, "[ssd]: the new limits cannot be applied: %s%s", strerror(rc),
				      rc == EINVAL ? " (capacity below 4 blocks)" : "");
			return rc;
		}
	}
	*applied = true;
	if (cur->ram.size != next->ram.size) {
		r = tfs_ram_set_size(d->stack->top, next->ram.size);
		if (r) {
			tfs_dbuf_addf(err, "[ram] size: %s", strerror(r));
			rc = r;
		}
	}
	if (cur->cache.metadata_ttl_ms != next->cache.metadata_ttl_ms) {
		tfs_meta_set_ttl(d->stack->meta, next->cache.metadata_ttl_ms);
		tfs_fs_set_ttl(d->fs, next->cache.metadata_ttl_ms);
	}
	if (cur->writeback.uploaders != next->writeback.uploaders &&
	    (r = tfs_wb_set_uploaders(d->stack->wb, next->writeback.uploaders))) {
		tfs_dbuf_addf(err, "%s[writeback] uploaders: %s", rc ? "; " : "", strerror(r));
		rc = rc ? rc : r;
	}
	if (cur->prefetch.workers != next->prefetch.workers) {
		atomic_store(&d->warm.default_jobs, next->prefetch.workers);
		r = tfs_prefetch_set_workers(d->stack->pf, next->prefetch.workers);
		if (r == 0 && d->follow)
			r = tfs_follow_set_workers(d->follow, next->prefetch.workers);
		if (r) {
			tfs_dbuf_addf(err, "%s[prefetch] workers: %s", rc ? "; " : "", strerror(r));
			rc = rc ? rc : r;
		}
	}
	if (cur->log.level != next->log.level && !d->debug) {
		tfs_log_set_level(d->sink_log, next->log.level);
		tfs_log_set_level(d->log, next->log.level);
	}
	return rc;
}

/* Join a JSON array of strings with ", " into buf. */
static const char *joined(struct json_object *arr, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; arr && i < json_object_array_length(arr) && n < cap; i++) {
		int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "",
				 json_object_get_string(json_object_array_get_idx(arr, i)));
		if (w < 0)
			break;
		n += (size_t)w;
	}
	return buf;
}

/* Read the configuration again (the mount's file, then its -o), check
 * it, and apply what can change while mounted (tierfs.conf(5) RELOAD).
 * An invalid configuration changes nothing.  `why` names the trigger in
 * the log.  Returns 0 with *result {"applied":[...],"needs_remount":[...]}
 * (a new reference), or an errno with the message (for an invalid file:
 * "FILE:LINE: ...") in err.  Serialised by reload_lock. */
static int reload(struct daemon_ctx *d, const char *why, struct tfs_dbuf *err,
		  struct json_object **result)
{
	struct tfs_config next;
	struct changes ch = { json_object_new_array(), json_object_new_array() };
	char list[2048];
	bool applied = false;
	int rc;

	*result = NULL;
	pthread_mutex_lock(&d->reload_lock);
	tfs_dbuf_reset(err);
	rc = ch.applied && ch.remount ? tfs_config_defaults(&next) : ENOMEM;
	if (rc) {
		pthread_mutex_unlock(&d->reload_lock);
		json_object_put(ch.applied);
		json_object_put(ch.remount);
		return rc;
	}
	rc = tfs_config_load(&next, d->conf_path, d->conf_path != NULL, err);
	for (size_t i = 0; rc == 0 && i < d->n_overrides; i++)
		rc = tfs_config_set(&next, d->overrides[i], NULL, err);
	if (rc == 0)
		rc = tfs_config_validate(&next, err);
	if (rc && rc != ENOMEM)
		rc = EINVAL; /* a missing or unreadable file is a configuration error too */
	if (rc == 0)
		rc = tfs_config_merge_reload(&next, d->cfg, on_change, &ch);
	/* a new value may not fit a key that keeps its old value */
	if (rc == 0)
		rc = tfs_config_validate(&next, err);
	if (rc == 0)
		rc = apply(d, d->cfg, &next, err, &applied);
	if (applied) {
		/* `next` is in force now (in part, if a setter failed) */
		tfs_config_clear(d->cfg);
		*d->cfg = next;
		memset(&next, 0, sizeof(next));
	}
	tfs_config_clear(&next);
	if (rc && tfs_dbuf_len(err) == 0)
		tfs_dbuf_addf(err, "%s", strerror(rc));
	if (rc) {
		atomic_fetch_add(&d->reloads_failed, 1);
		tfs_err(d->log, "reload (%s) failed: %s; %s", why, tfs_dbuf_str(err),
			applied ? "the other new values were applied"
				: "the configuration in force is unchanged");
	} else {
		atomic_fetch_add(&d->reloads_ok, 1);
		if (json_object_array_length(ch.applied))
			tfs_info(d->log, "reload (%s): applied %s", why,
				 joined(ch.applied, list, sizeof(list)));
		else
			tfs_info(d->log, "reload (%s): nothing to apply", why);
		if (json_object_array_length(ch.remount))
			tfs_warn(d->log, "reload (%s): needs a remount, not applied: %s", why,
				 joined(ch.remount, list, sizeof(list)));
	}
	pthread_mutex_unlock(&d->reload_lock);
	if (rc) {
		json_object_put(ch.applied);
		json_object_put(ch.remount);
		return rc;
	}
	struct json_object *o = json_object_new_object();
	if (o == NULL) {
		json_object_put(ch.applied);
		json_object_put(ch.remount);
		return ENOMEM;
	}
	json_object_object_add(o, "config", json_object_new_string(
		d->conf_path ? d->conf_path : tfs_config_default_path()));
	json_object_object_add(o, "applied", ch.applied);
	json_object_object_add(o, "needs_remount", ch.remount);
	*result = o;
	return 0;
}

/* {"cmd":"reload"}: see reload().  An invalid configuration is EINVAL with
 * its message. */
static int reload_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			  struct json_object **resp)
{
	(void)conn;
	(void)req;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	int rc = reload(vctx, "tierfs reload", &err, resp);
	if (rc)
		rc = tfs_ctl_fail(resp, rc, "%s", tfs_dbuf_str(&err));
	tfs_dbuf_free(&err);
	return rc;
}

/* The thread that turns SIGHUP into reloads, and flushes the log rate
 * limiter's counts of suppressed lines every interval. */
struct hup {
	struct daemon_ctx *d;
	int sigfd;  /* signalfd for SIGHUP */
	int stopfd; /* eventfd: stop */
	pthread_t thread;
	bool started;
};

static void *hup_main(void *arg)
{
	struct hup *h = arg;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	for (;;) {
		struct pollfd p[2] = { { .fd = h->sigfd, .events = POLLIN },
				       { .fd = h->stopfd, .events = POLLIN } };
		int n = poll(p, 2, LOG_INTERVAL_MS);
		tfs_log_flush_suppressed(h->d->log);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && p[1].revents)
			break;
		if (n <= 0 || !(p[0].revents & POLLIN))
			continue;
		struct signalfd_siginfo si;
		bool hup = false;
		/* several SIGHUPs before we got here are one reload */
		while (read(h->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			hup = true;
		if (hup) {
			struct json_object *res = NULL;
			(void)reload(h->d, "SIGHUP", &err, &res);
			json_object_put(res);
		}
	}
	tfs_dbuf_free(&err);
	return NULL;
}

/* Start the SIGHUP thread; SIGHUP must be blocked already.  Returns 0 or
 * an errno (logged). */
static int hup_start(struct hup *h, struct daemon_ctx *d)
{
	sigset_t set;
	int rc;
	h->d = d;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	h->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	h->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (h->sigfd < 0 || h->stopfd < 0) {
		rc = errno;
		tfs_err(d->log, "cannot watch SIGHUP: %s", strerror(rc));
		return rc;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&h->thread, NULL, hup_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		tfs_err(d->log, "cannot start the reload thread: %s", strerror(rc));
		return rc;
	}
	h->started = true;
	return 0;
}

static void hup_stop(struct hup *h)
{
	if (h->started) {
		uint64_t one = 1;
		if (write(h->stopfd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			tfs_warn(h->d->log, "reload thread: cannot stop it: %s", strerror(errno));
		pthread_join(h->thread, NULL);
		h->started = false;
	}
	if (h->sigfd >= 0)
		close(h->sigfd);
	if (h->stopfd >= 0)
		close(h->stopfd);
	h->sigfd = h->stopfd = -1;
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
					json_object_object_add(p, "files", json_object_new_uint64(files));
					json_object_object_add(p, "bytes", json_object_new_uint64(bytes));
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
						json_object_object_get_ex(wbo, "pending_files", &pf) &&
						json_object_object_get_ex(wbo, "failed_files", &ff) &&
						json_object_get_int64(pf) == json_object_get_int64(ff);
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
		tfs_debug(t->log, "cannot raise the kernel readahead (%s): %s", path, strerror(errno));
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

static int run_daemon(struct tfs_config *cfg, const struct tfs_source *src, struct mount_opts *o,
		      struct fuse_args *fargs, const struct tfs_fs_config *fsc, int status_fd)
{
	struct tee tee = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct tfs_log log;
	struct hup hup = { .sigfd = -1, .stopfd = -1 };
	sigset_t hupset, oldmask;

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
	enum tfs_log_level level = o->debug ? TFS_LOG_DEBUG : cfg->log.level;
	int rc;

	if (cfg->log.file && *cfg->log.file) {
		rc = tfs_log_init_file(&tee.inner, cfg->log.file, level);
		if (rc) {
			char msg[600];
			snprintf(msg, sizeof(msg), "log.file '%s': %s", cfg->log.file, strerror(rc));
			report(status_fd, msg);
			if (o->foreground)
				fprintf(stderr, "tierfs: %s\n", msg);
			return TFS_EXIT_FAIL;
		}
	} else if (o->foreground) {
		tfs_log_init_stderr(&tee.inner, level);
	} else {
		tfs_log_init_syslog(&tee.inner, level);
	}
	tfs_log_init(&log, tee_sink, &tee, TFS_LOG_DEBUG);
	atomic_store(&log.level, (int)level > TFS_LOG_ERROR ? (int)level : TFS_LOG_ERROR);
	if (tfs_log_limit(&log, LOG_BURST, LOG_INTERVAL_MS, NULL) != 0)
		tfs_warn(&log, "out of memory: repeated errors are not rate-limited");

	struct daemon_ctx d = {
		.mountpoint = o->mountpoint, .source = o->source, .started = time(NULL),
		.cfg = cfg, .conf_path = o->conf, .overrides = o->overrides,
		.n_overrides = o->n_overrides, .debug = o->debug != 0, .log = &log,
		.sink_log = &tee.inner,
	};
	pthread_mutex_init(&d.reload_lock, NULL);
	struct tfs_ctl *ctl = NULL;
	struct fuse_session *se = NULL;
	char sock[PATH_MAX];
	const char *fail = NULL;

	d.drain_timeout_ms = cfg->writeback.drain_timeout_ms;
	rc = tfs_stack_open(cfg, src, o->ro != 0, o->mountpoint, &log, &d.stack);
	if (rc) {
		fail = "cannot set up the cache stack";
		goto out;
	}
	/* Probe the bucket now, so that a wrong name or key fails the mount
	 * with a clear message.  An unreachable backend is not fatal: a warm
	 * cache can serve without it. */
	struct tfs_list_page p = { 0 };
	rc = tfs_backend_list(d.stack->be, "", "/", NULL, 1, &p);
	tfs_list_page_clear(&p);
	if (rc == EIO) {
		tfs_warn(&log, "%s is unreachable: serving from the cache until it answers", o->source);
		rc = 0;
	} else if (rc) {
		fail = rc == ENOENT ? "the bucket does not exist" : "the bucket cannot be listed";
		goto out;
	}
	rc = tfs_fs_create(fsc, d.stack->meta, d.stack->top, d.stack->pf,
			   tfs_wb_writable(d.stack->wb) ? d.stack->wb : NULL, d.stack->be, &log, &d.fs);
	if (rc) {
		fail = "out of memory";
		goto out;
	}
	rc = tfs_ctl_socket_path(o->mountpoint, sock, sizeof(sock));
	if (rc == 0)
		rc = tfs_ctl_start(sock, &log, &ctl);
	if (rc == 0)
		rc = tfs_ctl_register(ctl, "stats", stats_handler, &d);
	if (rc == 0)
		rc = tfs_ctl_register(ctl, "drain", drain_handler, &d);
	if (rc == 0)
		rc = tfs_ctl_register(ctl, "reload", reload_handler, &d);
	if (rc == 0) {
		d.prefix = strdup(src->kind == TFS_SOURCE_S3 && src->prefix ? src->prefix : "");
		if (d.prefix == NULL)
			rc = ENOMEM;
	}
	if (rc == 0) {
		size_t pl = strlen(d.prefix);
		if (pl && d.prefix[pl - 1] == '/')
			d.prefix[pl - 1] = '\0';
		d.warm = (struct tfs_warmup_ctx){
			.meta = d.stack->meta,
			.wb = tfs_wb_writable(d.stack->wb) ? d.stack->wb : NULL,
			.ram = d.stack->top,
			.ssd = d.stack->ssd,
			.log = &log,
			.scope = { .mountpoint = o->mountpoint,
				   .bucket = src->kind == TFS_SOURCE_S3 ? src->bucket : NULL,
				   .prefix = d.prefix },
			.default_jobs = cfg->prefetch.workers,
		};
		rc = tfs_warmup_register(ctl, &d.warm);
	}
	if (rc == 0 && cfg->prefetch.workers > 0) {
		rc = tfs_follow_create(d.stack->top, d.stack->meta, cfg->prefetch.workers,
				       4 * cfg->prefetch.workers, &log, &d.follow);
		if (rc == 0)
			rc = tfs_follow_register(ctl, d.follow, &d.warm.scope);
		if (rc == 0)
			tfs_fs_set_follow(d.fs, d.follow, &d.warm.scope);
	}
	if (rc) {
		fail = "cannot start the control socket";
		goto out;
	}
	if (cfg->metrics.listen) {
		rc = tfs_metrics_start(cfg->metrics.listen, o->mountpoint, collect, &d, &log,
				       &d.metrics);
		if (rc) {
			fail = "cannot serve the metrics ([metrics] listen)";
			goto out;
		}
	}
	rc = hup_start(&hup, &d);
	if (rc) {
		fail = "cannot watch SIGHUP";
		goto out;
	}
	se = fuse_session_new(fargs, tfs_fs_ops(), sizeof(struct fuse_lowlevel_ops), d.fs);
	if (se == NULL) {
		rc = EINVAL;
		fail = "invalid FUSE options";
		goto out;
	}
	tfs_fs_set_session(d.fs, se);
	if (fuse_set_signal_handlers(se) != 0) {
		rc = EIO;
		fail = "cannot install signal handlers";
		goto out;
	}
	if (fuse_session_mount(se, o->mountpoint) != 0) {
		rc = EIO;
		fail = "the kernel refused the mount (see above; is the mountpoint busy?)";
		goto out_signals;
	}
	tfs_info(&log, "mounted %s on %s", o->source, o->mountpoint);
	report(status_fd, "ok");
	status_fd = -1;

	struct bdi_tune bt = { .mountpoint = o->mountpoint, .readahead = cfg->prefetch.readahead, .log = &log };
	pthread_t bt_thread;
	bool bt_started = bt.readahead >= TFS_MAX_READ &&
			  pthread_create(&bt_thread, NULL, tune_bdi, &bt) == 0;

	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (lc) {
		fuse_loop_cfg_set_clone_fd(lc, 1);
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
	rc = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	if (bt_started)
		pthread_join(bt_thread, NULL);
	fuse_session_unmount(se);
	tfs_info(&log, "unmounted %s", o->mountpoint);
	if (tfs_wb_writable(d.stack->wb)) {
		uint64_t files = 0, bytes = 0;
		if (tfs_wb_drain(d.stack->wb, d.drain_timeout_ms, &files, &bytes) != 0)
			tfs_warn(&log, "write-back: %" PRIu64 " file(s), %" PRIu64 " byte(s) not uploaded yet "
				 "stay in the journal for the next mount", files, bytes);
	}
	rc = 0;
out_signals:
	fuse_remove_signal_handlers(se);
out:
	if (fail) {
		char msg[1024], last[sizeof(tee.last_error)];
		/* A copy: the threads already started may still log errors. */
		pthread_mutex_lock(&tee.lock);
		memcpy(last, tee.last_error, sizeof(last));
		pthread_mutex_unlock(&tee.lock);
		snprintf(msg, sizeof(msg), "%s: %s%s%s", fail, strerror(rc), last[0] ? "; " : "", last);
		tfs_err(&log, "mount of %s on %s failed: %s", o->source, o->mountpoint, msg);
		report(status_fd, msg);
	}
	hup_stop(&hup);
	tfs_ctl_stop(ctl); /* its stats handler reads d.metrics */
	tfs_metrics_stop(d.metrics);
	if (se)
		fuse_session_destroy(se);
	tfs_fs_destroy(d.fs);
	tfs_follow_destroy(d.follow);
	tfs_stack_close(d.stack);
	free(d.prefix);
	pthread_mutex_destroy(&d.reload_lock);
	tfs_log_unlimit(&log);
	tfs_log_close(&tee.inner);
	pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
	return fail ? TFS_EXIT_FAIL : TFS_EXIT_OK;
}

static int wait_for_child(int fd, pid_t pid)
{
	char msg[1100];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, msg + len, sizeof(msg) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(msg) - 1)
			break;
	}
	msg[len] = '\0';
	close(fd);
	if (strcmp(msg, "ok") == 0)
		return TFS_EXIT_OK;
	int status = 0;
	waitpid(pid, &status, 0);
	if (len)
		fprintf(stderr, "tierfs: mount failed: %s\n", msg);
	else if (WIFSIGNALED(status))
		fprintf(stderr, "tierfs: mount failed: the daemon died of signal %d\n", WTERMSIG(status));
	else
		fprintf(stderr, "tierfs: mount failed: the daemon exited with status %d\n",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return TFS_EXIT_FAIL;
}

static void free_opts(struct mount_opts *o)
{
	free(o->conf);
	free(o->uid);
	free(o->gid);
	free(o->file_mode);
	free(o->dir_mode);
	for (size_t i = 0; i < o->n_overrides; i++)
		free(o->overrides[i]);
	free(o->overrides);
	free(o->source);
	free(o->mountpoint);
}

int tfs_cmd_mount(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct mount_opts o = { 0 };
	struct tfs_config cfg;
	struct tfs_source src;
	int rc = TFS_EXIT_CONFIG;
	char err[512];

	if (fuse_opt_parse(&args, &o, mount_opt_spec, opt_proc) != 0 || o.bad) {
		mount_usage(stderr);
		goto out_args;
	}
	if (o.help) {
		mount_usage(stdout);
		rc = TFS_EXIT_OK;
		goto out_args;
	}
	if (o.source == NULL || o.mountpoint == NULL) {
		mount_usage(stderr);
		goto out_args;
	}
	if (strlen(o.source) >= PATH_MAX) {
		/* mount(2) takes a name of at most PATH_MAX - 1 bytes. */
		fprintf(stderr, "tierfs mount: SOURCE is longer than %d bytes\n", PATH_MAX - 1);
		goto out_args;
	}
	struct tfs_fs_config fsc = {
		.uid = getuid(), .gid = getgid(), .file_mode = 0644, .dir_mode = 0755,
	};
	unsigned id;
	if (o.uid && parse_id(o.uid, "uid", &id) == 0)
		fsc.uid = id;
	else if (o.uid)
		goto out_args;
	if (o.gid && parse_id(o.gid, "gid", &id) == 0)
		fsc.gid = id;
	else if (o.gid)
		goto out_args;
	if ((o.file_mode && parse_mode(o.file_mode, "file_mode", &fsc.file_mode)) ||
	    (o.dir_mode && parse_mode(o.dir_mode, "dir_mode", &fsc.dir_mode)))
		goto out_args;

	rc = tfs_cli_load_config(&cfg, o.conf, o.overrides, o.n_overrides);
	if (rc)
		goto out_args;
	if (o.conf) {
		/* A reload reads it again after the daemon's chdir("/"). */
		char *abs = realpath(o.conf, NULL);
		if (abs) {
			free(o.conf);
			o.conf = abs;
		}
	}
	rc = tfs_source_parse(o.source, &src, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tierfs: %s\n", rc == EINVAL ? err : strerror(rc));
		rc = TFS_EXIT_CONFIG;
		goto out_cfg;
	}
	struct stat st;
	char *mp = realpath(o.mountpoint, NULL);
	if (mp == NULL || stat(mp, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "tierfs: mountpoint '%s': %s\n", o.mountpoint,
			mp == NULL ? strerror(errno) : "not a directory");
		free(mp);
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}
	free(o.mountpoint);
	o.mountpoint = mp;
	bool suid, dev;
	if (mount_flags(&o, cfg.mount.trusted, &suid, &dev) != 0) {
		rc = TFS_EXIT_CONFIG;
		goto out_src;
	}
	fsc.keep_setid = cfg.mount.trusted;
	fsc.ttl_ms = cfg.cache.metadata_ttl_ms;
	fsc.readahead = cfg.prefetch.readahead;
	fsc.order_max = cfg.prefetch.order_max;
	fsc.statfs_dir = cfg.ssd.dir;

	if (add_kernel_opts(&args, o.source, suid, dev, o.allow_other) != 0) {
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}

	if (o.foreground) {
		rc = run_daemon(&cfg, &src, &o, &args, &fsc, -1);
		goto out_src;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		perror("tierfs: pipe");
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("tierfs: fork");
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}
	if (pid > 0) {
		close(pfd[1]);
		rc = wait_for_child(pfd[0], pid);
		goto out_src;
	}
	/* The daemon. */
	close(pfd[0]);
	setsid();
	if (chdir("/") != 0)
		_exit(TFS_EXIT_FAIL);
	int nul = open("/dev/null", O_RDWR);
	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		dup2(nul, STDERR_FILENO);
		if (nul > STDERR_FILENO)
			close(nul);
	}
	rc = run_daemon(&cfg, &src, &o, &args, &fsc, pfd[1]);
out_src:
	tfs_source_clear(&src);
out_cfg:
	tfs_config_clear(&cfg);
out_args:
	fuse_opt_free_args(&args);
	free_opts(&o);
	return rc;
}
