/* cmd_warmup.c - `tierfs warmup`, `pin`, `unpin` and `evict`: turn paths
 * into keys of the mount, send the request to the daemon's control socket
 * (src/warmup.h does the work) and show progress and a summary.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "ctl_client.h"
#include "ctl_path.h"
#include "dbuf.h"
#include "units.h"

struct view {
	bool tty, quiet;
	const char *what;
	time_t last_line;
};

static int64_t num(struct json_object *o, const char *k)
{
	struct json_object *v;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

static void size_str(int64_t b, char *buf, size_t len)
{
	if (tfs_format_size(b < 0 ? 0 : (uint64_t)b, buf, len) != 0)
		snprintf(buf, len, "%" PRId64 " B", b);
}

static int show_progress(void *ctx, struct json_object *p)
{
	struct view *v = ctx;
	if (v->quiet)
		return 0;
	int64_t fd = num(p, "files_done"), ft = num(p, "files_total");
	int64_t bd = num(p, "bytes_done"), bt = num(p, "bytes_total");
	struct json_object *x;
	double secs = json_object_object_get_ex(p, "seconds", &x) ? json_object_get_double(x) : 0;
	bool listed = json_object_object_get_ex(p, "listing_done", &x) &&
		      json_object_get_boolean(x);
	double rate = secs > 0 ? (double)num(p, "fetched_bytes") / secs : 0;
	char done[32], total[32], r[32], eta[32] = "?";
	size_str(bd, done, sizeof(done));
	size_str(bt, total, sizeof(total));
	size_str((int64_t)rate, r, sizeof(r));
	if (listed && rate > 0 && bt > bd) {
		long s = (long)((double)(bt - bd) / rate);
		snprintf(eta, sizeof(eta), "%ld:%02ld", s / 60, s % 60);
	}
	if (v->tty) {
		int width = 30,
		    fill = ft > 0 && listed ? (int)((double)fd / (double)ft * width) : 0;
		char bar[64];
		for (int i = 0; i < width; i++)
			bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
		bar[width] = '\0';
		fprintf(stderr, "\r%s [%s] %" PRId64 "/%" PRId64 "%s files  %s/%s  %s/s  ETA %s   ",
			v->what, bar, fd, ft, listed ? "" : "+", done, total, r, eta);
	} else {
		time_t now = time(NULL);
		if (now - v->last_line < 5)
			return 0;
		v->last_line = now;
		fprintf(stderr, "%s: %" PRId64 "/%" PRId64 "%s files, %s of %s, %s/s, ETA %s\n",
			v->what, fd, ft, listed ? "" : "+", done, total, r, eta);
	}
	return 0;
}

static void on_sigint(int sig)
{
	(void)sig;
	static const char msg[] = "\ntierfs: interrupted; the daemon stops the run\n";
	ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)w;
	_exit(130);
}

/* The key of `path` inside the mount at `mp` (both absolute, mp canonical):
 * "" for the root.  Returns 0, ENOENT (no such path) or EXDEV (outside). */
static int key_of(const char *mp, const char *path, char *key, size_t len)
{
	char *abs = realpath(path, NULL);
	if (abs == NULL)
		return errno;
	size_t ml = strlen(mp);
	int rc = 0;
	if (strcmp(abs, mp) == 0)
		key[0] = '\0';
	else if (strncmp(abs, mp, ml) == 0 && abs[ml] == '/')
		rc = snprintf(key, len, "%s", abs + ml + 1) >= (int)len ? ENAMETOOLONG : 0;
	else
		rc = EXDEV;
	free(abs);
	return rc;
}

/* The tierfs mount holding `path`: the longest fuse.tierfs mount point in
 * /proc/self/mountinfo that is a prefix of its real path. */
static int mount_of(const char *path, char *mp, size_t len)
{
	char *abs = realpath(path, NULL);
	if (abs == NULL)
		return errno;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL) {
		free(abs);
		return errno;
	}
	char line[8192];
	size_t best = 0;
	while (fgets(line, sizeof(line), f)) {
		char point[PATH_MAX], fstype[64];
		const char *sep = strstr(line, " - ");
		if (sep == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(sep + 3, "%63s", fstype) != 1 || strcmp(fstype, "fuse.tierfs") != 0)
			continue;
		/* mountinfo escapes space, tab, newline and backslash as \ooo */
		char un[PATH_MAX];
		size_t j = 0;
		for (size_t i = 0; point[i] && j + 1 < sizeof(un); i++) {
			if (point[i] == '\\' && point[i + 1] && point[i + 2] && point[i + 3]) {
				un[j++] = (char)((point[i + 1] - '0') * 64 +
						 (point[i + 2] - '0') * 8 + (point[i + 3] - '0'));
				i += 3;
			} else {
				un[j++] = point[i];
			}
		}
		un[j] = '\0';
		size_t n = strlen(un);
		if (n > best && strncmp(abs, un, n) == 0 &&
		    (abs[n] == '\0' || abs[n] == '/' || n == 1)) {
			best = n;
			snprintf(mp, len, "%s", un);
		}
	}
	fclose(f);
	free(abs);
	return best ? 0 : ENOENT;
}

static void usage_warmup(FILE *f)
{
	fprintf(f, "usage: tierfs warmup [-j N] [--tier ssd|ram] [--pin] [--quiet]\n"
		   "                     [--manifest FILE] MOUNTPOINT [PATH...]\n"
		   "       tierfs warmup --follow MANIFEST MOUNTPOINT\n"
		   "       tierfs pin PATH...   tierfs unpin PATH...\n"
		   "       tierfs evict MOUNTPOINT PATH...\n");
}

/* Send `req` and print the summary.  Returns an exit status. */
static int call(const char *cmd, const char *mp, struct json_object *req, struct view *v)
{
	char sock[PATH_MAX];
	struct json_object *res = NULL;
	struct tfs_dbuf err;
	int rc = tfs_ctl_socket_path(mp, sock, sizeof(sock));
	if (rc) {
		fprintf(stderr, "tierfs %s: %s: %s\n", cmd, mp, strerror(rc));
		return TFS_EXIT_FAIL;
	}
	struct sigaction sa = { .sa_handler = on_sigint };
	sigaction(SIGINT, &sa, NULL);
	tfs_dbuf_init(&err, 4096);
	rc = tfs_ctl_call_ex(sock, req, 7 * 24 * 3600 * 1000, show_progress, v, &res, &err);
	if (v->tty && !v->quiet)
		fputc('\n', stderr);
	if (rc) {
		fprintf(stderr, "tierfs %s: %s: %s\n", cmd, mp,
			tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		tfs_dbuf_free(&err);
		return TFS_EXIT_FAIL;
	}
	tfs_dbuf_free(&err);
	int64_t failed = num(res, "failed_files");
	struct json_object *x, *fl;
	double secs = json_object_object_get_ex(res, "seconds", &x) ? json_object_get_double(x) : 0;
	char fb[32], cb[32], rate[32];
	size_str(num(res, "fetched_bytes"), fb, sizeof(fb));
	size_str(num(res, "cached_bytes"), cb, sizeof(cb));
	size_str(secs > 0 ? (int64_t)((double)num(res, "fetched_bytes") / secs) : 0, rate,
		 sizeof(rate));
	if (strcmp(cmd, "warmup") == 0 || strcmp(cmd, "pin") == 0)
		printf("%s: %" PRId64 " fetched (%s), %" PRId64 " already cached (%s), %" PRId64
		       " failed, in %.1f s (%s/s)%s\n",
		       cmd, num(res, "fetched_files"), fb, num(res, "cached_files"), cb, failed,
		       secs, rate, strcmp(cmd, "pin") == 0 ? "; all pinned but the failed" : "");
	else
		printf("%s: %" PRId64 " file(s), %" PRId64 " failed\n", cmd,
		       num(res, "files_done") - failed, failed);
	if (num(res, "skipped_files"))
		printf("%s: %" PRId64 " file(s) skipped: written through the mount, not uploaded "
		       "yet\n",
		       cmd, num(res, "skipped_files"));
	if (json_object_object_get_ex(res, "failures", &fl)) {
		for (size_t i = 0; i < json_object_array_length(fl); i++) {
			struct json_object *f = json_object_array_get_idx(fl, i), *p, *e;
			if (json_object_object_get_ex(f, "path", &p) &&
			    json_object_object_get_ex(f, "error", &e))
				printf("  FAILED %s: %s\n", json_object_get_string(p),
				       json_object_get_string(e));
		}
		if ((int64_t)json_object_array_length(fl) < failed)
			printf("  ... and %" PRId64 " more\n",
			       failed - (int64_t)json_object_array_length(fl));
	}
	json_object_put(res);
	return failed ? TFS_EXIT_FAIL : TFS_EXIT_OK;
}

/* --jobs/-j: a number from 1 to 256 into *(long *)dst. */
static int set_jobs(const char *arg, void *dst)
{
	char *end;
	long jobs = strtol(arg, &end, 10);
	if (*end || jobs < 1 || jobs > 256) {
		fprintf(stderr, "tierfs warmup: -j: a number from 1 to 256, not '%s'\n", arg);
		return TFS_EXIT_CONFIG;
	}
	*(long *)dst = jobs;
	return 0;
}

/* --tier: "ssd" or "ram" into *(const char **)dst. */
static int set_tier(const char *arg, void *dst)
{
	if (strcmp(arg, "ssd") != 0 && strcmp(arg, "ram") != 0) {
		fprintf(stderr, "tierfs warmup: --tier: ssd or ram, not '%s'\n", arg);
		return TFS_EXIT_CONFIG;
	}
	*(const char **)dst = arg;
	return 0;
}

int tfs_cmd_warmup(int argc, char **argv)
{
	const char *tier = "ssd", *manifest = NULL, *follow = NULL;
	long jobs = 0;
	bool pin = false, quiet = false;
	const struct tfs_cli_opt opts[] = {
		{ "jobs", 'j', true, &jobs, set_jobs },   { "tier", 0, true, &tier, set_tier },
		{ "pin", 0, false, &pin, NULL },          { "quiet", 'q', false, &quiet, NULL },
		{ "manifest", 0, true, &manifest, NULL }, { "follow", 0, true, &follow, NULL },
	};
	int first;
	int parsed = tfs_cli_parse(argc, argv, true, opts, sizeof(opts) / sizeof(opts[0]), NULL,
				   usage_warmup, &first);
	if (parsed != -1)
		return parsed;
	if (first >= argc)
		return tfs_cli_usage_error(NULL, usage_warmup);
	char *mp = realpath(argv[first], NULL);
	if (mp == NULL) {
		fprintf(stderr, "tierfs warmup: %s: %s\n", argv[first], strerror(errno));
		return TFS_EXIT_FAIL;
	}
	struct json_object *req = json_object_new_object(), *paths = json_object_new_array();
	int status = TFS_EXIT_OK;
	json_object_object_add(req, "cmd", json_object_new_string(follow ? "follow" : "warmup"));
	json_object_object_add(req, "tier", json_object_new_string(tier));
	if (jobs)
		json_object_object_add(req, "jobs", json_object_new_int64(jobs));
	if (pin)
		json_object_object_add(req, "pin", json_object_new_boolean(1));
	const char *mfile = follow ? follow : manifest;
	if (mfile) {
		char *abs = realpath(mfile, NULL);
		if (abs == NULL) {
			fprintf(stderr, "tierfs warmup: manifest '%s': %s\n", mfile,
				strerror(errno));
			status = TFS_EXIT_FAIL;
			goto out;
		}
		json_object_object_add(req, "manifest", json_object_new_string(abs));
		free(abs);
	}
	for (int i = first + 1; i < argc; i++) {
		char key[PATH_MAX];
		int rc = key_of(mp, argv[i], key, sizeof(key));
		if (rc) {
			fprintf(stderr, "tierfs warmup: %s: %s\n", argv[i],
				rc == EXDEV ? "not inside the mount" : strerror(rc));
			status = TFS_EXIT_FAIL;
			goto out;
		}
		json_object_array_add(paths, json_object_new_string(key));
	}
	if (json_object_array_length(paths) == 0 && mfile == NULL)
		json_object_array_add(paths, json_object_new_string(""));
	json_object_object_add(req, "paths", json_object_get(paths));
	struct view v = { .tty = isatty(STDERR_FILENO) != 0,
			  .quiet = quiet,
			  .what = follow ? "follow" : "warmup",
			  .last_line = time(NULL) };
	status = call(follow ? "follow" : "warmup", mp, req, &v);
out:
	json_object_put(paths);
	json_object_put(req);
	free(mp);
	return status;
}

/* pin / unpin PATH... (the mount is found from the paths), evict MOUNTPOINT PATH... */
int tfs_cmd_pin(int argc, char **argv)
{
	const char *cmd = argv[0];
	bool evict = strcmp(cmd, "evict") == 0;
	int first = evict ? 2 : 1;
	if (argc <= first || argv[1][0] == '-') {
		usage_warmup(stderr);
		return TFS_EXIT_CONFIG;
	}
	char mp[PATH_MAX];
	if (evict) {
		char *m = realpath(argv[1], NULL);
		if (m == NULL) {
			fprintf(stderr, "tierfs evict: %s: %s\n", argv[1], strerror(errno));
			return TFS_EXIT_FAIL;
		}
		snprintf(mp, sizeof(mp), "%s", m);
		free(m);
	} else {
		int rc = mount_of(argv[1], mp, sizeof(mp));
		if (rc) {
			fprintf(stderr, "tierfs %s: %s: %s\n", cmd, argv[1],
				rc == ENOENT ? "not inside a tierfs mount" : strerror(rc));
			return TFS_EXIT_FAIL;
		}
	}
	struct json_object *req = json_object_new_object(), *paths = json_object_new_array();
	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	int status = TFS_EXIT_OK;
	for (int i = first; i < argc; i++) {
		char key[PATH_MAX];
		int rc = key_of(mp, argv[i], key, sizeof(key));
		if (rc) {
			fprintf(stderr, "tierfs %s: %s: %s\n", cmd, argv[i],
				rc == EXDEV ? "not inside the same tierfs mount" : strerror(rc));
			status = TFS_EXIT_FAIL;
			goto out;
		}
		json_object_array_add(paths, json_object_new_string(key));
	}
	json_object_object_add(req, "paths", json_object_get(paths));
	struct view v = { .tty = isatty(STDERR_FILENO) != 0, .what = cmd, .last_line = time(NULL) };
	status = call(cmd, mp, req, &v);
out:
	json_object_put(paths);
	json_object_put(req);
	return status;
}
