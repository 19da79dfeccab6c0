/* node_mount.c - mount and unmount of one volume: per-volume state,
 * starting and stopping the tierfs daemon, and cleaning up after it. */
#include "config.h"

#include "node_mount.h"
#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "conf.h"
#include "ctl_client.h"
#include "ctl_path.h"
#include "node_cgroup.h"
#include "node_sys.h"
#include "node_volume.h"
#include "units.h"

#define FSTYPE "fuse.tierfs"
#define PHASE_MOUNTING "mounting"
#define PHASE_MOUNTED "mounted"
#define PHASE_UNMOUNTED "unmounted" /* clean; waiting for the daemon to exit */
#define PHASE_KEPT "kept"           /* the cache may hold writes not uploaded */
#define MAX_OUTPUT (64 * 1024)      /* of `tierfs mount`, kept for the message */
#define MAX_MESSAGE 1500            /* of the daemon's message in a reply */
#define KILL_GRACE_MS 3000
#define LAZY_WAIT_MS 2000          /* for a daemon after a lazy unmount */
#define KEY_FILE "fingerprint.key" /* in node.state_dir: the fingerprints' HMAC key */
#define KEY_LEN 32
#define CGROUP_WAIT_MS 2000     /* for the last process to leave a daemon's cgroup */
#define LOCK_FILE "limits.lock" /* in node.state_dir: admission, one at a time */

/* Where one volume's things are. */
struct vol {
	char target[PATH_MAX]; /* canonical */
	char hash[TFS_NODE_HASH_LEN + 1];
	char state[PATH_MAX];
	char info[PATH_MAX];
	char conf[PATH_MAX];
	char creds[PATH_MAX];
	char cache[PATH_MAX];
	/* What volume.json records of the daemon's budget (tfs_node_limits). */
	uint64_t ram, ssd;     /* its ram.size and ssd.size in bytes */
	char cgroup[PATH_MAX]; /* its own memory cgroup, "" when none */
};

/* What volume.json says. */
struct info {
	char phase[16];
	char source[4096];
	char cache[PATH_MAX];
	char target[PATH_MAX];
	char fingerprint[TFS_NODE_HASH_LEN + 1]; /* tfs_node_volume_fingerprint(); "" when unknown */
	long pid;                                /* the daemon, 0: unknown */
	bool writable;                           /* the daemon took writes (true when unknown) */
	time_t mtime;                            /* of the file */
	bool has_sizes;                          /* ram_bytes and ssd_bytes were there */
	uint64_t ram, ssd;
	char cgroup[PATH_MAX];
};

__attribute__((format(printf, 2, 3))) static int say(struct tfs_dbuf *msg, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	tfs_dbuf_reset(msg);
	tfs_dbuf_adds(msg, buf);
	return 0;
}

static bool fits(int n, size_t cap)
{
	return n >= 0 && (size_t)n < cap;
}

static int vol_paths(const struct tfs_node_conf *node, const char *target, struct vol *v,
		     struct tfs_dbuf *msg)
{
	int rc = tfs_ctl_canonical_path(target, v->target, sizeof(v->target));

	if (rc) {
		say(msg, "target '%s': %s", target, strerror(rc));
		return rc;
	}
	rc = tfs_node_hash(v->target, v->hash, sizeof(v->hash));
	if (rc) {
		say(msg, "cannot hash the target path: %s", strerror(rc));
		return rc;
	}
	if (!fits(snprintf(v->state, sizeof(v->state), "%s/%s", node->state_dir, v->hash),
		  sizeof(v->state)) ||
	    !fits(snprintf(v->info, sizeof(v->info), "%s/volume.json", v->state),
		  sizeof(v->info)) ||
	    !fits(snprintf(v->conf, sizeof(v->conf), "%s/tierfs.conf", v->state),
		  sizeof(v->conf)) ||
	    !fits(snprintf(v->creds, sizeof(v->creds), "%s/credentials", v->state),
		  sizeof(v->creds)) ||
	    /* One cache per node, shared by every volume: tierfs keeps each
	     * source apart (<cache_root>/<source id>/) and each mount's
	     * write-back journal apart (by its mountpoint). */
	    !fits(snprintf(v->cache, sizeof(v->cache), "%s", node->cache_root), sizeof(v->cache))) {
		say(msg, "state_dir or cache_root is too long");
		return ENAMETOOLONG;
	}
	return 0;
}

/* ---- volume.json ---- */

static int write_info(const struct vol *v, const char *phase, const char *source,
		      const char *fingerprint, long pid, bool writable)
{
	struct json_object *o = json_object_new_object();
	int rc;

	if (o == NULL)
		return ENOMEM;
	json_object_object_add(o, "target", json_object_new_string(v->target));
	json_object_object_add(o, "source", json_object_new_string(source ? source : ""));
	json_object_object_add(o, "cache_dir", json_object_new_string(v->cache));
	json_object_object_add(o, "phase", json_object_new_string(phase));
	/* "settings_hmac": the keyed fingerprint.  The unkeyed "fingerprint"
	 * of older drivers is not read: such a volume's settings count as
	 * unknown. */
	if (fingerprint && *fingerprint)
		json_object_object_add(o, "settings_hmac", json_object_new_string(fingerprint));
	json_object_object_add(o, "pid", json_object_new_int64(pid));
	json_object_object_add(o, "writable", json_object_new_boolean(writable));
	json_object_object_add(o, "ram_bytes", json_object_new_int64((int64_t)v->ram));
	json_object_object_add(o, "ssd_bytes", json_object_new_int64((int64_t)v->ssd));
	if (v->cgroup[0])
		json_object_object_add(o, "cgroup", json_object_new_string(v->cgroup));
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
								  JSON_C_TO_STRING_NOSLASHESCAPE);
	rc = s ? tfs_node_write_file(v->info, s, strlen(s), 0600) : ENOMEM;
	json_object_put(o);
	return rc;
}

static void copy_str(struct json_object *o, const char *key, char *dst, size_t cap)
{
	struct json_object *f;

	dst[0] = '\0';
	if (json_object_object_get_ex(o, key, &f) && json_object_is_type(f, json_type_string))
		snprintf(dst, cap, "%s", json_object_get_string(f));
}

/* Read STATE/volume.json (`path`).  Returns 0, errno, or EINVAL when it is
 * not what write_info() writes. */
static int read_info(const char *path, struct info *in)
{
	struct tfs_dbuf d;
	struct stat st;
	int rc;

	memset(in, 0, sizeof(*in));
	tfs_dbuf_init(&d, 64 * 1024);
	rc = tfs_node_read_file(path, &d);
	if (rc == 0 && stat(path, &st) == 0)
		in->mtime = st.st_mtime;
	if (rc == 0) {
		struct json_object *o = json_tokener_parse(tfs_dbuf_str(&d));
		struct json_object *f;

		if (o && json_object_is_type(o, json_type_object)) {
			copy_str(o, "phase", in->phase, sizeof(in->phase));
			copy_str(o, "source", in->source, sizeof(in->source));
			copy_str(o, "cache_dir", in->cache, sizeof(in->cache));
			copy_str(o, "target", in->target, sizeof(in->target));
			copy_str(o, "settings_hmac", in->fingerprint, sizeof(in->fingerprint));
			copy_str(o, "cgroup", in->cgroup, sizeof(in->cgroup));
			if (json_object_object_get_ex(o, "pid", &f))
				in->pid = (long)json_object_get_int64(f);
			struct json_object *r, *sd;
			if (json_object_object_get_ex(o, "ram_bytes", &r) &&
			    json_object_object_get_ex(o, "ssd_bytes", &sd)) {
				in->has_sizes = true;
				in->ram = (uint64_t)json_object_get_int64(r);
				in->ssd = (uint64_t)json_object_get_int64(sd);
			}
			in->writable = !json_object_object_get_ex(o, "writable", &f) ||
				       json_object_get_boolean(f);
		}
		if (in->phase[0] == '\0' || in->target[0] == '\0')
			rc = EINVAL;
		json_object_put(o);
	}
	tfs_dbuf_free(&d);
	return rc;
}

/* What the state records of the daemon's budget, into v. */
static void take_budget(struct vol *v, const struct info *in)
{
	v->ram = in->ram;
	v->ssd = in->ssd;
	snprintf(v->cgroup, sizeof(v->cgroup), "%s", in->cgroup);
}

/* The daemon's own cgroup, once it has exited: rmdir. */
static void remove_cgroup(const struct tfs_log *log, const char *cgroup)
{
	int rc = cgroup[0] ? tfs_node_cgroup_remove(cgroup, CGROUP_WAIT_MS) : 0;

	if (rc)
		tfs_warn(log, "cannot remove the cgroup %s: %s", cgroup, strerror(rc));
}

/* ---- the daemon ---- */

/* The pid of the daemon answering on the target's control socket, 0 when
 * none answers, -1 when one is there but does not answer (hung). */
static long daemon_pid(const char *target)
{
	char sock[TFS_CTL_SOCK_PATH_MAX];
	struct json_object *req, *res = NULL, *pid;
	long out = 0;

	if (tfs_ctl_socket_path(target, sock, sizeof(sock)) != 0)
		return 0;
	req = json_object_new_object();
	if (req == NULL)
		return 0;
	json_object_object_add(req, "cmd", json_object_new_string("stats"));
	int rc = tfs_ctl_call_ex(sock, req, 2000, NULL, NULL, &res, NULL);
	json_object_put(req);
	if (rc == 0 && json_object_object_get_ex(res, "pid", &pid))
		out = (long)json_object_get_int64(pid);
	else if (rc != 0 && rc != ENOENT && rc != ECONNREFUSED)
		out = -1;
	json_object_put(res);
	return out;
}

/* The environment of what we start: a fixed PATH and the node's proxy
 * settings; nothing else of the kubelet's.  The sanitizer options too: they
 * mean nothing to a normal build, and with a sanitized one
 * (tests/harness/sanitize.sh) they send the daemon's reports to files. */
static void child_env(char **env, size_t cap)
{
	static const char *const pass[] = {
		"http_proxy=", "https_proxy=",  "no_proxy=",      "HTTP_PROXY=",   "HTTPS_PROXY=",
		"NO_PROXY=",   "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS=", "TSAN_OPTIONS=",
	};
	size_t n = 0;

	env[n++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (char **e = environ; e && *e && n + 1 < cap; e++) {
		for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++) {
			if (strncmp(*e, pass[i], strlen(pass[i])) == 0) {
				env[n++] = *e;
				break;
			}
		}
	}
	env[n] = NULL;
}

static bool use_systemd(const struct tfs_node_conf *node)
{
	if (node->systemd == TFS_NODE_SYSTEMD_AUTO)
		return access("/run/systemd/system", F_OK) == 0;
	return node->systemd == TFS_NODE_SYSTEMD_YES;
}

/* The output of a failed `tierfs mount` as one line for the reply. */
static void one_line(const struct tfs_dbuf *out, char *buf, size_t cap)
{
	const char *s = tfs_dbuf_str(out);
	size_t o = 0;
	bool gap = false;

	for (; *s && o + 4 < cap && o < MAX_MESSAGE; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\n' || c == '\r') {
			gap = o > 0;
			continue;
		}
		if (gap) {
			buf[o++] = ';';
			buf[o++] = ' ';
			gap = false;
		}
		buf[o++] = c < 0x20 ? ' ' : (char)c;
	}
	while (o && buf[o - 1] == ' ')
		o--;
	buf[o] = '\0';
}

/* Stop whatever a failed mount left: the daemon (found by the volume's
 * config path on its command line), the mount, and the state.  The node's
 * shared cache stays; when an earlier mount of the target left its state, it is kept
 * as "kept" too (a dead mount's journal may hold writes not uploaded). */
static void undo_mount(const struct vol *v, const struct tfs_log *log, bool had_state,
		       const char *source)
{
	struct tfs_node_mount_entry me;
	unsigned killed = 0;
	int rc;

	tfs_node_kill_by_arg(v->conf, KILL_GRACE_MS, &killed);
	if (killed)
		tfs_warn(log, "%s: stopped %u leftover daemon process(es)", v->target, killed);
	if (tfs_node_mount_lookup(v->target, &me) == 0 && me.mounted &&
	    strcmp(me.fstype, FSTYPE) == 0) {
		if (umount2(v->target, MNT_DETACH) != 0) {
			tfs_err(log, "%s: cannot detach the failed mount: %s", v->target,
				strerror(errno));
			return; /* keep the state: unmount will find it */
		}
	}
	(void)unlink(v->creds);
	remove_cgroup(log, v->cgroup);
	if (had_state) {
		tfs_warn(log, "%s: keeping the state of an earlier mount (its writes may be in %s)",
			 v->target, v->cache);
		(void)write_info(v, PHASE_KEPT, source, NULL, 0, true);
		return;
	}
	/* The node's cache is shared by every volume: never removed here. */
	rc = tfs_node_rmtree(v->state);
	if (rc)
		tfs_warn(log, "%s: cannot remove the state %s: %s", v->target, v->state,
			 strerror(rc));
}

/* Remove the state of a volume whose mount and daemon are gone (and its
 * cache directory only if it is a per-volume CACHE/<hash> recorded by an
 * older driver; the shared node cache is never removed). */
static void remove_volume(const struct tfs_log *log, const char *state, const char *cache,
			  const char *hash, const char *cgroup)
{
	const char *base = strrchr(cache, '/');
	int rc;

	remove_cgroup(log, cgroup);
	if (cache[0] && base && strcmp(base + 1, hash) == 0) {
		rc = tfs_node_rmtree(cache);
		if (rc) {
			tfs_warn(log, "cannot remove the cache %s: %s", cache, strerror(rc));
			return;
		}
	}
	rc = tfs_node_rmtree(state);
	if (rc)
		tfs_warn(log, "cannot remove the state %s: %s", state, strerror(rc));
}

/* Keep a writable volume's cache, whose journal may hold writes that are
 * not uploaded: they are uploaded by the next mount of the same target, or
 * by hand (docs/kubernetes.md). */
static void keep_volume(const struct tfs_log *log, const struct vol *v, const struct info *in)
{
	(void)write_info(v, PHASE_KEPT, in->source, in->fingerprint, 0, true);
	tfs_warn(log,
		 "%s: kept the cache %s: it may hold writes to %s that are not uploaded yet "
		 "(mount %s with ssd.dir=%s to upload them)",
		 v->target, in->cache, in->source, in->source, in->cache);
}

static bool is_hash(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++) {
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return false;
	}
	return n == TFS_NODE_HASH_LEN;
}

/* Call fn(state, in, arg) for each volume of state_dir whose volume.json
 * reads (`state` its directory), but the one named `skip` (a hash, may
 * be NULL), until fn returns false. */
static void each_volume(const struct tfs_node_conf *node, const char *skip,
			bool (*fn)(const char *state, const struct info *in, void *arg), void *arg)
{
	DIR *d = opendir(node->state_dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char state[PATH_MAX], info[PATH_MAX];
		struct info in;

		if (!is_hash(e->d_name) || (skip && strcmp(e->d_name, skip) == 0) ||
		    !fits(snprintf(state, sizeof(state), "%s/%s", node->state_dir, e->d_name),
			  sizeof(state)) ||
		    !fits(snprintf(info, sizeof(info), "%s/volume.json", state), sizeof(info)) ||
		    read_info(info, &in) != 0)
			continue;
		if (!fn(state, &in, arg))
			break;
	}
	closedir(d);
}

/* Clean up after volumes that are gone: not mounted and without a daemon.
 * A read-only volume, or one unmounted cleanly, goes entirely; a writable
 * one that went without a clean drain is kept (PHASE_KEPT).  `skip` is the
 * volume of this call. */
static void sweep(const struct tfs_node_conf *node, const struct tfs_log *log, const char *skip)
{
	if (skip == NULL)
		skip = "";
	DIR *d = opendir(node->state_dir);
	struct dirent *e;
	time_t now = time(NULL);
	time_t stale = (time_t)((2 * node->mount_timeout_ms + node->unmount_timeout_ms) / 1000);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		struct vol v;
		struct info in;
		struct tfs_node_mount_entry me;
		struct tfs_dbuf ignored;

		if (!is_hash(e->d_name) || strcmp(e->d_name, skip) == 0)
			continue;
		if (!fits(snprintf(v.state, sizeof(v.state), "%s/%s", node->state_dir, e->d_name),
			  sizeof(v.state)))
			continue;
		if (!fits(snprintf(v.info, sizeof(v.info), "%s/volume.json", v.state),
			  sizeof(v.info)))
			continue;
		if (read_info(v.info, &in) != 0 || strcmp(in.phase, PHASE_KEPT) == 0)
			continue; /* not ours to judge, or kept on purpose */
		if (tfs_node_mount_lookup(in.target, &me) != 0 || me.mounted)
			continue;
		if (strcmp(in.phase, PHASE_MOUNTING) == 0 && now - in.mtime <= stale)
			continue; /* a mount in progress */
		if (in.pid > 0 && !tfs_node_pid_gone((pid_t)in.pid))
			continue;
		if (daemon_pid(in.target) != 0)
			continue;
		tfs_dbuf_init(&ignored, 4096);
		int rc = vol_paths(node, in.target, &v, &ignored);
		tfs_dbuf_free(&ignored);
		if (rc || strcmp(v.hash, e->d_name) != 0)
			continue;
		take_budget(&v, &in);
		if (strcmp(in.phase, PHASE_MOUNTING) == 0)
			tfs_node_kill_by_arg(v.conf, KILL_GRACE_MS, NULL);
		(void)unlink(v.creds);
		if (in.writable && strcmp(in.phase, PHASE_UNMOUNTED) != 0) {
			keep_volume(log, &v, &in);
			continue;
		}
		tfs_info(log, "sweep: removing the state of %s (%s, not mounted)", in.target,
			 in.phase);
		remove_volume(log, v.state, in.cache, e->d_name, in.cgroup);
	}
	closedir(d);
}

void tfs_node_sweep(const struct tfs_node_conf *node, const struct tfs_log *log)
{
	sweep(node, log, NULL);
}

struct devno_search {
	const char *devno;
	bool found;
};

static bool has_devno(const char *state, const struct info *in, void *arg)
{
	struct devno_search *ds = arg;
	struct tfs_node_mount_entry me;

	(void)state;
	ds->found = tfs_node_mount_lookup(in->target, &me) == 0 && me.mounted &&
		    strcmp(me.fstype, FSTYPE) == 0 && strcmp(me.devno, ds->devno) == 0;
	return !ds->found;
}

int tfs_node_recorded_devno(const struct tfs_node_conf *node, const char *devno, bool *found)
{
	struct devno_search ds = { .devno = devno };

	each_volume(node, NULL, has_devno, &ds);
	*found = ds.found;
	return 0;
}

struct report {
	const struct tfs_log *log;
	unsigned live, dead;
};

static bool report_one(const char *state, const struct info *in, void *arg)
{
	struct report *r = arg;
	struct tfs_node_mount_entry me;

	(void)state;
	if (tfs_node_mount_lookup(in->target, &me) != 0 || !me.mounted)
		return true;
	int rc = tfs_node_mount_probe(in->target);
	if (rc == 0) {
		r->live++;
		return true;
	}
	r->dead++;
	tfs_warn(r->log, "%s (%s) is mounted but its daemon does not answer: %s", in->target,
		 me.source, strerror(rc));
	return true;
}

void tfs_node_report(const struct tfs_node_conf *node, const struct tfs_log *log)
{
	struct report r = { .log = log };

	each_volume(node, NULL, report_one, &r);
	tfs_info(log, "found %u live mount(s) of ours%s", r.live, r.dead ? ", and dead ones" : "");
}

/* ---- the node-wide budget ---- */

/* The ram.size and ssd.size (a relative one resolved against the
 * filesystem of `cache_root`) of the daemon configured by `conf`. */
static int conf_sizes(const char *conf, const char *cache_root, uint64_t *ram, uint64_t *ssd)
{
	struct tfs_config cfg;
	struct statvfs sv;
	int rc = tfs_config_defaults(&cfg);

	if (rc == 0)
		rc = tfs_config_load(&cfg, conf, true, NULL);
	if (rc == 0) {
		*ram = cfg.ram.size;
		*ssd = cfg.ssd.size;
		if (cfg.ssd.size_pct > 0 && statvfs(cache_root, &sv) == 0)
			*ssd = (uint64_t)((double)sv.f_blocks * (double)sv.f_frsize *
					  cfg.ssd.size_pct / 100.0);
	}
	tfs_config_clear(&cfg);
	return rc;
}

/* Whether the volume of `in` has a daemon (or is starting one): a mount
 * in progress or live, or an unmounted one whose daemon has not exited. */
static bool holds_daemon(const struct info *in)
{
	if (strcmp(in->phase, PHASE_MOUNTING) == 0 || strcmp(in->phase, PHASE_MOUNTED) == 0)
		return true;
	return strcmp(in->phase, PHASE_UNMOUNTED) == 0 && in->pid > 0 &&
	       !tfs_node_pid_gone((pid_t)in->pid);
}

struct budget {
	unsigned daemons;
	uint64_t ram, ssd;
};

struct budget_ctx {
	const struct tfs_node_conf *node;
	struct budget *b;
};

static bool add_budget(const char *state, const struct info *in, void *arg)
{
	struct budget_ctx *c = arg;
	char conf[PATH_MAX];
	uint64_t ram = in->ram, ssd = in->ssd;

	if (!holds_daemon(in))
		return true;
	/* A volume mounted by an older driver: its sizes from its config
	 * (none when unreadable). */
	if (!in->has_sizes &&
	    (!fits(snprintf(conf, sizeof(conf), "%s/tierfs.conf", state), sizeof(conf)) ||
	     conf_sizes(conf, c->node->cache_root, &ram, &ssd) != 0))
		ram = ssd = 0;
	c->b->daemons++;
	c->b->ram += ram;
	c->b->ssd += ssd;
	return true;
}

/* What the node's daemons hold now, but the volume `skip` (a hash). */
static void node_budget(const struct tfs_node_conf *node, const char *skip, struct budget *b)
{
	struct budget_ctx c = { .node = node, .b = b };

	memset(b, 0, sizeof(*b));
	each_volume(node, skip, add_budget, &c);
}

/* The refusal of a bound, in msg. */
static int over(struct tfs_dbuf *msg, const struct tfs_node_conf *node, const char *key,
		uint64_t have, uint64_t want, uint64_t bound)
{
	char h[TFS_UNITS_BUFLEN], w[TFS_UNITS_BUFLEN], b[TFS_UNITS_BUFLEN];

	tfs_format_size(have, h, sizeof(h));
	tfs_format_size(want, w, sizeof(w));
	tfs_format_size(bound, b, sizeof(b));
	say(msg,
	    "node limit reached: this volume's daemon needs %s more, the node's daemons hold %s, "
	    "and [node] %s = %s (%s)",
	    w, h, key, b, node->path ? node->path : "built-in");
	return EDQUOT;
}

/* Admit the volume `v` (its sizes set) under the node-wide limits, and
 * record it as mounting: one call at a time (a lock in state_dir), so the
 * mounts in progress count too.  Returns 0, EDQUOT with the reason in msg,
 * or the errno of the lock or the state. */
static int admit(const struct tfs_node_conf *node, const struct vol *v, const char *source,
		 const char *fp, bool writable, struct tfs_dbuf *msg)
{
	char lock[PATH_MAX];
	struct budget b;
	int fd, rc = 0;

	if (!fits(snprintf(lock, sizeof(lock), "%s/%s", node->state_dir, LOCK_FILE), sizeof(lock)))
		return ENAMETOOLONG;
	fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {
		rc = errno;
		say(msg, "cannot lock %s: %s", lock, strerror(rc));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	node_budget(node, v->hash, &b);
	if (b.daemons + 1 > node->max_daemons) {
		say(msg,
		    "node limit reached: the node runs %u tierfs daemon(s) and [node] max_daemons "
		    "= %u (%s)",
		    b.daemons, node->max_daemons, node->path ? node->path : "built-in");
		rc = EDQUOT;
	} else if (node->max_total_ram && b.ram + v->ram > node->max_total_ram) {
		rc = over(msg, node, "max_total_ram", b.ram, v->ram, node->max_total_ram);
	} else if (node->max_total_ssd && b.ssd + v->ssd > node->max_total_ssd) {
		rc = over(msg, node, "max_total_ssd", b.ssd, v->ssd, node->max_total_ssd);
	} else {
		rc = write_info(v, PHASE_MOUNTING, source, fp, 0, writable);
		if (rc)
			say(msg, "cannot write %s: %s", v->info, strerror(rc));
	}
	close(fd); /* and the lock with it */
	return rc;
}

/* ---- mount ---- */

/* Run `tierfs mount` under a memory limit of ram.size + memory_margin:
 * its systemd scope's MemoryMax=, else a cgroup of its own (v->cgroup).
 * Returns 0 when it reported a live mount; else an errno with the reason
 * in msg. */
static int start_daemon(const struct tfs_node_conf *node, const struct tfs_log *log, struct vol *v,
			const struct tfs_node_volume *vol, struct tfs_dbuf *msg)
{
	char unit[128], desc[PATH_MAX + 64], line[MAX_MESSAGE + 8], mem[64];
	char *argv[24], *env[16];
	size_t n = 0;
	struct tfs_dbuf out, opts;
	int status = 0, rc, cgroup_fd = -1;
	uint64_t limit = v->ram + node->memory_margin;

	if (use_systemd(node)) {
		/* A scope outside the kubelet's cgroup: restarting the
		 * kubelet does not kill the daemon. */
		snprintf(unit, sizeof(unit), "--unit=tierfs-%s-%.16s-%ld",
			 node->driver == TFS_NODE_DRIVER_CSI ? "csi" : "fv", v->hash,
			 (long)getpid());
		snprintf(desc, sizeof(desc), "--description=tierfs %s volume %s",
			 node->driver == TFS_NODE_DRIVER_CSI ? "CSI" : "FlexVolume", v->target);
		argv[n++] = node->systemd_run;
		argv[n++] = "--scope";
		argv[n++] = "--quiet";
		argv[n++] = "--collect";
		snprintf(mem, sizeof(mem), "--property=MemoryMax=%llu", (unsigned long long)limit);
		argv[n++] = unit;
		argv[n++] = desc;
		argv[n++] = mem;
		argv[n++] = "--";
	} else {
		char name[64];

		snprintf(name, sizeof(name), "%s-%s",
			 node->driver == TFS_NODE_DRIVER_CSI ? "csi" : "fv", v->hash);
		rc = tfs_node_cgroup_create(node, name, limit, v->cgroup, sizeof(v->cgroup),
					    &cgroup_fd, msg);
		if (rc) {
			if (tfs_dbuf_len(msg) == 0)
				say(msg, "the daemon's memory cgroup: %s", strerror(rc));
			v->cgroup[0] = '\0';
			return rc;
		}
		tfs_debug(log, "%s: memory limit %llu bytes in %s", v->target,
			  (unsigned long long)limit, v->cgroup);
	}
	argv[n++] = node->tierfs;
	argv[n++] = "mount";
	argv[n++] = "-c";
	argv[n++] = (char *)v->conf;
	tfs_dbuf_init(&opts, 4096);
	rc = tfs_node_volume_mount_opts(vol, node, &opts);
	if (rc) {
		say(msg, "the mount options: %s", strerror(rc));
		tfs_dbuf_free(&opts);
		if (cgroup_fd >= 0)
			close(cgroup_fd);
		return rc;
	}
	argv[n++] = "-o";
	argv[n++] = (char *)tfs_dbuf_str(&opts);
	argv[n++] = vol->source;
	argv[n++] = (char *)v->target;
	argv[n] = NULL;
	child_env(env, sizeof(env) / sizeof(env[0]));

	tfs_dbuf_init(&out, MAX_OUTPUT);
	uint64_t t0 = tfs_mono_ms();
	rc = tfs_node_run_in(argv, env, cgroup_fd, node->mount_timeout_ms, &out, &status);
	if (cgroup_fd >= 0)
		close(cgroup_fd);
	one_line(&out, line, sizeof(line));
	if (rc == ETIMEDOUT) {
		say(msg, "the mount did not become live within %llu s%s%s",
		    (unsigned long long)(node->mount_timeout_ms / 1000), line[0] ? ": " : "", line);
	} else if (rc) {
		say(msg, "cannot run %s: %s", argv[0], strerror(rc));
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		rc = EIO;
		if (line[0])
			say(msg, "%s", line);
		else if (WIFSIGNALED(status))
			say(msg, "%s died of signal %d", argv[0], WTERMSIG(status));
		else
			say(msg, "%s exited with status %d", argv[0], WEXITSTATUS(status));
	}
	if (rc == 0)
		tfs_debug(log, "%s: tierfs mount took %llu ms", v->target,
			  (unsigned long long)(tfs_mono_ms() - t0));
	tfs_dbuf_free(&out);
	tfs_dbuf_free(&opts);
	return rc;
}

static int mount_new(const struct tfs_node_conf *node, const struct tfs_log *log, struct vol *v,
		     const struct tfs_node_volume *vol, const char *fp, struct tfs_dbuf *msg)
{
	struct tfs_dbuf conf, err;
	struct stat st;
	bool writable = true, had_state;
	int rc;

	if (stat(v->target, &st) != 0) {
		rc = errno;
		say(msg, "target %s: %s", v->target, strerror(rc));
		return rc;
	}
	if (!S_ISDIR(st.st_mode)) {
		say(msg, "target %s is not a directory", v->target);
		return ENOTDIR;
	}
	/* An earlier mount of this target may have left writes in the
	 * node's cache (its journal, under the mountpoint's name): then a
	 * failure keeps the state as "kept". */
	struct info old;
	had_state = read_info(v->info, &old) == 0;
	rc = tfs_node_mkdirs(node->state_dir, 0700);
	if (rc == 0)
		rc = tfs_node_rmtree(v->state); /* an earlier call's: nothing is mounted */
	if (rc == 0 && mkdir(v->state, 0700) != 0)
		rc = errno;
	if (rc) {
		say(msg, "cannot create the state directory %s: %s", v->state, strerror(rc));
		return rc;
	}
	rc = write_info(v, PHASE_MOUNTING, vol->source, fp, 0, true);
	if (rc) {
		say(msg, "cannot write %s: %s", v->info, strerror(rc));
		goto undo;
	}
	tfs_dbuf_init(&err, 4096);
	const char *creds = node->credentials_file;
	if (vol->creds.access_key) {
		rc = tfs_node_creds_write(v->creds, &vol->creds, &err);
		creds = v->creds;
	}
	tfs_dbuf_init(&conf, 1 << 20);
	if (rc == 0)
		rc = tfs_node_volume_tierfs_conf(vol, node, v->cache, creds, &conf, &writable,
						 &err);
	if (rc == 0) {
		rc = tfs_node_write_file(v->conf, tfs_dbuf_str(&conf), tfs_dbuf_len(&conf), 0600);
		if (rc)
			tfs_dbuf_addf(&err, "cannot write %s: %s", v->conf, strerror(rc));
	}
	if (rc) {
		if (tfs_dbuf_len(&err))
			say(msg, "%s", tfs_dbuf_str(&err));
		else
			say(msg, "%s", strerror(rc));
	}
	tfs_dbuf_free(&conf);
	tfs_dbuf_free(&err);
	if (rc)
		goto undo;
	rc = conf_sizes(v->conf, node->cache_root, &v->ram, &v->ssd);
	if (rc) {
		say(msg, "cannot read back %s: %s", v->conf, strerror(rc));
		goto undo;
	}
	rc = admit(node, v, vol->source, fp, writable, msg);
	if (rc) {
		tfs_warn(log, "%s: %s", v->target, tfs_dbuf_str(msg));
		goto undo;
	}
	rc = tfs_node_mkdirs(node->cache_root, 0700);
	if (rc == 0 && mkdir(v->cache, 0700) != 0 && errno != EEXIST)
		rc = errno;
	if (rc) {
		say(msg, "cannot create the cache directory %s: %s", v->cache, strerror(rc));
		goto undo;
	}
	rc = start_daemon(node, log, v, vol, msg);
	if (rc)
		goto undo;

	struct tfs_node_mount_entry me;
	rc = tfs_node_mount_lookup(v->target, &me);
	if (rc == 0 && !(me.mounted && strcmp(me.fstype, FSTYPE) == 0)) {
		say(msg, "tierfs mount reported success, but %s is not mounted", v->target);
		rc = EIO;
	} else if (rc == 0) {
		rc = tfs_node_mount_probe(v->target);
		if (rc)
			say(msg, "the new mount on %s does not answer: %s", v->target,
			    strerror(rc));
	} else {
		say(msg, "cannot read the mount table: %s", strerror(rc));
	}
	if (rc)
		goto undo;
	rc = write_info(v, PHASE_MOUNTED, vol->source, fp, daemon_pid(v->target), writable);
	if (rc)
		tfs_warn(log, "%s: cannot update %s: %s", v->target, v->info, strerror(rc));
	return 0;
undo:
	undo_mount(v, log, had_state, vol->source);
	return rc;
}

int tfs_node_fingerprint(const struct tfs_node_conf *node, const struct tfs_node_volume *vol,
			 char *out, size_t len, struct tfs_dbuf *msg)
{
	unsigned char key[KEY_LEN];
	char path[PATH_MAX];
	struct stat st;
	int rc;

	rc = tfs_node_mkdirs(node->state_dir, 0700);
	/* The state is root's alone: the key, the credentials. */
	if (rc == 0 && stat(node->state_dir, &st) == 0 && (st.st_mode & 077) &&
	    chmod(node->state_dir, 0700) != 0)
		rc = errno;
	if (rc) {
		say(msg, "state_dir %s: %s", node->state_dir, strerror(rc));
		return rc;
	}
	if (!fits(snprintf(path, sizeof(path), "%s/%s", node->state_dir, KEY_FILE), sizeof(path)))
		return ENAMETOOLONG;
	rc = tfs_node_key_file(path, key, sizeof(key));
	if (rc) {
		say(msg, "the fingerprint key %s: %s%s", path, strerror(rc),
		    rc == EPERM ? " (it must be a file of 32 bytes, ours, mode 0600)" : "");
		return rc;
	}
	rc = tfs_node_volume_fingerprint(vol, key, sizeof(key), out, len);
	explicit_bzero(key, sizeof(key));
	if (rc)
		say(msg, "cannot hash the volume's settings: %s", strerror(rc));
	return rc;
}

int tfs_node_mount_volume(const struct tfs_node_conf *node, const struct tfs_log *log,
			  const char *target, const struct tfs_node_volume *vol,
			  struct tfs_dbuf *msg)
{
	char fp[TFS_NODE_HASH_LEN + 1];
	struct vol v;
	int rc;

	rc = tfs_node_fingerprint(node, vol, fp, sizeof(fp), msg);
	if (rc)
		goto out;
	rc = vol_paths(node, target, &v, msg);
	if (rc)
		goto out;
	tfs_info(log, "mount %s (pod %s, volume %s): %s%s, state %s", v.target,
		 vol->pod ? vol->pod : "?", vol->pv ? vol->pv : "?", vol->source,
		 vol->read_only ? " read-only" : "", v.hash);
	sweep(node, log, v.hash);

	struct tfs_node_mount_entry me;
	rc = tfs_node_mount_lookup(v.target, &me);
	if (rc) {
		say(msg, "cannot read the mount table: %s", strerror(rc));
		goto out;
	}
	if (me.mounted) {
		struct info in;

		if (strcmp(me.fstype, FSTYPE) != 0 || read_info(v.info, &in) != 0) {
			rc = EBUSY;
			say(msg, "%s is already mounted (%s from %s), not by this driver", v.target,
			    me.fstype, me.source);
			goto out;
		}
		if (strcmp(in.source, vol->source) != 0) {
			rc = EBUSY;
			say(msg, "%s is already mounted from %s, not %s", v.target, in.source,
			    vol->source);
			goto out;
		}
		if (in.fingerprint[0] && strcmp(in.fingerprint, fp) != 0) {
			rc = EBUSY;
			say(msg,
			    "%s is already mounted from %s with other settings (options, "
			    "read-only, fsGroup or access key)",
			    v.target, vol->source);
			goto out;
		}
		rc = tfs_node_mount_probe(v.target);
		if (rc == 0) {
			tfs_info(log, "mount %s: already mounted", v.target);
			goto out;
		}
		/* A FUSE connection whose daemon died answers ENOTCONN, or
		 * ECONNABORTED once the kernel has aborted it. */
		if (rc != ENOTCONN && rc != ESTALE && rc != ECONNABORTED) {
			say(msg, "%s is mounted but does not answer: %s", v.target, strerror(rc));
			goto out;
		}
		/* The daemon is dead: detach the corpse and mount again, on
		 * the same cache (its journal is uploaded by the new daemon). */
		tfs_warn(log, "mount %s: the mount is dead (%s); mounting again", v.target,
			 strerror(rc));
		tfs_node_kill_by_arg(v.conf, KILL_GRACE_MS, NULL);
		if (umount2(v.target, MNT_DETACH) != 0) {
			rc = errno;
			say(msg, "cannot detach the dead mount on %s: %s", v.target, strerror(rc));
			goto out;
		}
	}
	rc = mount_new(node, log, &v, vol, fp, msg);
	if (rc == 0) {
		tfs_info(log, "mount %s: live", v.target);
	} else {
		/* "mount of SOURCE on TARGET failed: <the daemon's words>" */
		char *m = tfs_dbuf_steal(msg);

		say(msg, "mount of %s on %s failed: %s", vol->source, v.target,
		    m ? m : strerror(rc));
		free(m);
	}
out:
	if (rc)
		tfs_err(log, "mount %s: %s", target, tfs_dbuf_str(msg));
	return rc;
}

/* ---- unmount ---- */

/* Upload what the volume's pods wrote, bounded by `deadline_ms`: the
 * daemon's "drain" command (src/daemon.c) uploads everything pending
 * now and says what is left.  Returns 0 with *clean true when nothing is
 * left, 0 with *clean false when no daemon answered (a dead mount: its
 * journal stays in the cache); EBUSY with the report in msg when files
 * are left (the volume stays mounted, the daemon keeps uploading and the
 * kubelet retries the unmount, so nothing written is lost). */
static int drain_writeback(const struct vol *v, uint64_t deadline_ms, const struct tfs_log *log,
			   bool *clean, struct tfs_dbuf *msg)
{
	char sock[TFS_CTL_SOCK_PATH_MAX];
	struct json_object *req, *res = NULL, *f;
	uint64_t now = tfs_mono_ms(), files = 0, bytes = 0;
	uint64_t budget = deadline_ms > now + 2000 ? deadline_ms - now - 1000 : 1000;
	struct tfs_dbuf err;
	int rc;

	*clean = false;
	rc = tfs_ctl_socket_path(v->target, sock, sizeof(sock));
	if (rc)
		return 0;
	req = json_object_new_object();
	if (req == NULL)
		return ENOMEM;
	json_object_object_add(req, "cmd", json_object_new_string("drain"));
	json_object_object_add(req, "timeout_ms", json_object_new_int64((int64_t)budget));
	tfs_dbuf_init(&err, 1024);
	/* The timeout is of inactivity: the daemon answers after `budget`. */
	rc = tfs_ctl_call_ex(sock, req, (int)(budget + 5000), NULL, NULL, &res, &err);
	json_object_put(req);
	if (rc == ENOENT || rc == ECONNREFUSED ||
	    (rc == EINVAL && strstr(tfs_dbuf_str(&err), "unknown command"))) {
		/* No daemon (a dead mount), or one without write-back. */
		tfs_warn(log, "unmount %s: no drain (%s)", v->target,
			 tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		tfs_dbuf_free(&err);
		return 0;
	}
	if (rc) {
		/* A daemon that does not answer in time is still uploading
		 * (or stuck): unmounting now would strand its writes. */
		say(msg,
		    "writes to %s are not uploaded yet: the daemon did not finish draining "
		    "within %llu s (%s); the volume stays mounted and keeps uploading, so unmount "
		    "again later",
		    v->target, (unsigned long long)(budget / 1000),
		    tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		tfs_dbuf_free(&err);
		return EBUSY;
	}
	tfs_dbuf_free(&err);
	if (json_object_object_get_ex(res, "files", &f))
		files = (uint64_t)json_object_get_int64(f);
	if (json_object_object_get_ex(res, "bytes", &f))
		bytes = (uint64_t)json_object_get_int64(f);
	json_object_put(res);
	if (files) {
		say(msg,
		    "%llu file(s) (%llu bytes) written to %s are not uploaded yet after %llu s; "
		    "the volume stays mounted and keeps uploading, so unmount again later",
		    (unsigned long long)files, (unsigned long long)bytes, v->target,
		    (unsigned long long)(budget / 1000));
		return EBUSY;
	}
	*clean = true;
	return 0;
}

int tfs_node_unmount(const struct tfs_node_conf *node, const struct tfs_log *log,
		     const char *target, struct tfs_dbuf *msg)
{
	struct vol v;
	struct info in;
	struct tfs_node_mount_entry me;
	long pid = 0;
	bool clean = false, lazy = false;
	int rc;

	rc = vol_paths(node, target, &v, msg);
	if (rc)
		goto out;
	uint64_t deadline = tfs_mono_ms() + node->unmount_timeout_ms;
	bool have_info = read_info(v.info, &in) == 0;
	if (have_info)
		take_budget(&v, &in);
	if (!have_info) {
		/* Nothing of ours is recorded: the cache is the default one. */
		memset(&in, 0, sizeof(in));
		snprintf(in.cache, sizeof(in.cache), "%s", v.cache);
		in.writable = true;
	}
	tfs_info(log, "unmount %s (state %s%s)", v.target, v.hash, have_info ? "" : ": none");
	sweep(node, log, v.hash);

	rc = tfs_node_mount_lookup(v.target, &me);
	if (rc) {
		say(msg, "cannot read the mount table: %s", strerror(rc));
		goto out;
	}
	if (me.mounted) {
		if (strcmp(me.fstype, FSTYPE) != 0) {
			rc = EBUSY;
			say(msg, "%s is mounted (%s from %s), but not by tierfs: not unmounting it",
			    v.target, me.fstype, me.source);
			goto out;
		}
		if (!have_info) {
			/* A tierfs mount someone else made (by hand, another
			 * driver): not ours to drain, unmount or clean. */
			rc = EBUSY;
			say(msg,
			    "%s is a tierfs mount (from %s) that %s did not make (no state in %s): "
			    "not unmounting it",
			    v.target, me.source, tfs_node_driver_name(node->driver),
			    node->state_dir);
			goto out;
		}
		pid = daemon_pid(v.target);
		if (pid <= 0 && have_info)
			pid = in.pid;
		clean = !in.writable;
		if (in.writable) {
			rc = drain_writeback(&v, deadline, log, &clean, msg);
			if (rc)
				goto out;
		}
		char *argv[] = { node->tierfs, "umount", v.target, NULL };
		char *env[16];
		char line[MAX_MESSAGE + 8];
		struct tfs_dbuf outb;
		int status = 0;
		uint64_t now = tfs_mono_ms();

		child_env(env, sizeof(env) / sizeof(env[0]));
		tfs_dbuf_init(&outb, MAX_OUTPUT);
		rc = tfs_node_run(argv, env, deadline > now + 1000 ? deadline - now : 1000, &outb,
				  &status);
		one_line(&outb, line, sizeof(line));
		tfs_dbuf_free(&outb);
		if (rc) {
			/* Stuck, in its own drain or in umount(2): no lazy
			 * unmount under a daemon that may still upload. */
			say(msg,
			    "tierfs umount %s did not finish within the unmount_timeout (%s)%s%s",
			    v.target, strerror(rc), line[0] ? ": " : "", line);
			goto out;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			tfs_warn(log, "unmount %s: %s", v.target,
				 line[0] ? line : "tierfs umount failed");
		else if (line[0])
			tfs_warn(log, "unmount %s: %s", v.target, line); /* what is left */

		rc = tfs_node_mount_lookup(v.target, &me);
		if (rc == 0 && me.mounted) {
			/* Busy (or tierfs umount could not run): detach it.
			 * The daemon exits once the last user lets go. */
			tfs_warn(log, "unmount %s: still mounted; lazy unmount", v.target);
			if (umount2(v.target, MNT_DETACH) != 0 && errno != EINVAL) {
				rc = errno;
				say(msg, "cannot unmount %s: %s", v.target, strerror(rc));
				goto out;
			}
			lazy = true;
			/* Its users keep the daemon alive: do not wait long. */
			uint64_t soon = tfs_mono_ms() + LAZY_WAIT_MS;
			if (soon < deadline)
				deadline = soon;
		} else if (rc) {
			say(msg, "cannot read the mount table: %s", strerror(rc));
			goto out;
		}
		rc = tfs_node_mount_lookup(v.target, &me);
		if (rc == 0 && me.mounted) {
			rc = EBUSY;
			say(msg, "%s is still mounted after a lazy unmount", v.target);
			goto out;
		}
	} else if (!have_info) {
		/* Nothing of ours was ever there: nothing to keep. */
		tfs_info(log, "unmount %s: not mounted, no state", v.target);
		rc = 0;
		goto out;
	} else {
		tfs_info(log, "unmount %s: not mounted", v.target);
		clean = !in.writable || strcmp(in.phase, PHASE_UNMOUNTED) == 0;
	}

	/* Not mounted any more: the keys go now.  The cache goes once the
	 * daemon has exited, if nothing written can be left in it: the
	 * volume was read-only, or drained before a plain unmount. */
	(void)unlink(v.creds);
	while (pid > 0 && !tfs_node_pid_gone((pid_t)pid) && tfs_mono_ms() < deadline)
		tfs_node_sleep_ms(50);
	bool exited = pid <= 0 || tfs_node_pid_gone((pid_t)pid);
	if (!clean || (lazy && in.writable)) {
		if (have_info || lstat(in.cache, &(struct stat){ 0 }) == 0)
			keep_volume(log, &v, &in);
	} else if (!exited) {
		tfs_warn(log,
			 "unmount %s: daemon %ld still running (files still open?); its cache "
			 "is removed once it exits",
			 v.target, pid);
		(void)write_info(&v, PHASE_UNMOUNTED, in.source, in.fingerprint, pid, in.writable);
	} else {
		remove_volume(log, v.state, in.cache, v.hash, in.cgroup);
	}
	rc = 0;
	tfs_info(log, "unmount %s: done", v.target);
out:
	if (rc)
		tfs_err(log, "unmount %s: %s", target, tfs_dbuf_str(msg));
	return rc;
}
