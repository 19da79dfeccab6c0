/* daemon_reload.c - reloading a running daemon's configuration: re-read
 * the file and -o options, keep what needs a remount, hand the changed
 * tunables to the layers; and the thread that turns SIGHUP into a
 * reload. */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "daemon_internal.h"
#include "dbuf.h"
#include "fs.h"
#include "follow.h"
#include "ram.h"
#include "ssd.h"
#include "stack.h"

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
			tfs_dbuf_addf(err, "[ssd]: the new limits cannot be applied: %s%s",
				      strerror(rc),
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
	json_object_object_add(o, "config",
			       json_object_new_string(d->conf_path ? d->conf_path
								   : tfs_config_default_path()));
	json_object_object_add(o, "applied", ch.applied);
	json_object_object_add(o, "needs_remount", ch.remount);
	*result = o;
	return 0;
}

/* {"cmd":"reload"}: see reload().  An invalid configuration is EINVAL with
 * its message. */
int daemon_reload_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
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
int daemon_hup_start(struct hup *h, struct daemon_ctx *d)
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

void daemon_hup_stop(struct hup *h)
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
