/* cmd_ctl.c - the commands that act on a running daemon through its
 * control socket: `tierfs flush`, `tierfs reload` and `tierfs umount`
 * (which asks for a drain, unmounts, and waits for the daemon to end). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "commands.h"
#include "ctl_client.h"
#include "ctl_path.h"
#include "dbuf.h"

/* Whether the daemon answers; *pid (may be NULL) gets its pid, *keeper
 * (may be NULL) its keeper's (left alone without a keeper). */
static bool socket_alive(const char *sock, pid_t *pid, pid_t *keeper)
{
	struct json_object *req = json_object_new_object(), *res = NULL, *p, *k;
	json_object_object_add(req, "cmd", json_object_new_string("stats"));
	int rc = tfs_ctl_call_ex(sock, req, 2000, NULL, NULL, &res, NULL);
	if (rc == 0 && pid && json_object_object_get_ex(res, "pid", &p))
		*pid = (pid_t)json_object_get_int(p);
	if (rc == 0 && keeper && json_object_object_get_ex(res, "keeper", &k) &&
	    json_object_object_get_ex(k, "pid", &p))
		*keeper = (pid_t)json_object_get_int(p);
	json_object_put(req);
	json_object_put(res);
	return rc == 0;
}

/* Whether process `pid` still runs (a zombie counts as gone). */
static bool process_alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *close_paren = strrchr(buf, ')');
	return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z';
}

/* Print the progress of a waiting drain on a terminal. */
static int drain_progress(void *ctx, struct json_object *p)
{
	(void)ctx;
	struct json_object *f, *b;
	if (isatty(STDERR_FILENO) && json_object_object_get_ex(p, "files", &f) &&
	    json_object_object_get_ex(p, "bytes", &b))
		fprintf(stderr,
			"\rtierfs: %" PRId64 " file(s), %" PRId64 " bytes left to upload   ",
			json_object_get_int64(f), json_object_get_int64(b));
	return 0;
}

/* Ask the daemon to upload what is pending (flush: wait until nothing is
 * left but failed uploads; umount: up to its drain timeout).  Returns
 * true and what is left if it answered. */
static bool drain(const char *sock, bool wait, uint64_t *files, uint64_t *bytes,
		  struct tfs_dbuf *err)
{
	struct json_object *req = json_object_new_object(), *res = NULL, *v;
	json_object_object_add(req, "cmd", json_object_new_string("drain"));
	if (wait)
		json_object_object_add(req, "wait", json_object_new_boolean(1));
	int rc = tfs_ctl_call_ex(sock, req, 24 * 3600 * 1000, drain_progress, NULL, &res, err);
	json_object_put(req);
	if (wait && isatty(STDERR_FILENO))
		fputc('\n', stderr);
	if (rc == 0 && json_object_object_get_ex(res, "files", &v))
		*files = (uint64_t)json_object_get_int64(v);
	if (rc == 0 && json_object_object_get_ex(res, "bytes", &v))
		*bytes = (uint64_t)json_object_get_int64(v);
	json_object_put(res);
	return rc == 0;
}

int tfs_cmd_flush(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: tierfs flush MOUNTPOINT\n");
		return TFS_EXIT_CONFIG;
	}
	char sock[PATH_MAX];
	uint64_t files = 0, bytes = 0;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	if (tfs_ctl_socket_path(argv[1], sock, sizeof(sock)) != 0 ||
	    !drain(sock, true, &files, &bytes, &err)) {
		fprintf(stderr, "tierfs: flush '%s': %s\n", argv[1],
			tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : "no tierfs daemon serves it");
		tfs_dbuf_free(&err);
		return TFS_EXIT_FAIL;
	}
	tfs_dbuf_free(&err);
	if (files) {
		fprintf(stderr,
			"tierfs: flush '%s': %" PRIu64 " file(s) (%" PRIu64 " bytes) could not be "
			"uploaded; "
			"see `tierfs stats %s` and the log\n",
			argv[1], files, bytes, argv[1]);
		return TFS_EXIT_FAIL;
	}
	return TFS_EXIT_OK;
}

/* Print the strings of result's array `key` as "PREFIX a, b, c" on f. */
static void print_list(FILE *f, struct json_object *result, const char *key, const char *prefix)
{
	struct json_object *arr;
	if (!json_object_object_get_ex(result, key, &arr) ||
	    !json_object_is_type(arr, json_type_array) || json_object_array_length(arr) == 0)
		return;
	fputs(prefix, f);
	for (size_t i = 0; i < json_object_array_length(arr); i++)
		fprintf(f, "%s%s", i ? ", " : "",
			json_object_get_string(json_object_array_get_idx(arr, i)));
	fputc('\n', f);
}

int tfs_cmd_reload(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: tierfs reload MOUNTPOINT\n");
		return TFS_EXIT_CONFIG;
	}
	char sock[PATH_MAX];
	struct tfs_dbuf err;
	struct json_object *req = json_object_new_object(), *res = NULL;
	int rc = req ? 0 : ENOMEM;
	tfs_dbuf_init(&err, 4096);
	if (rc == 0)
		rc = json_object_object_add(req, "cmd", json_object_new_string("reload")) ? ENOMEM
											  : 0;
	if (rc == 0)
		rc = tfs_ctl_socket_path(argv[1], sock, sizeof(sock));
	if (rc == 0)
		rc = tfs_ctl_call(sock, req, &res, &err);
	json_object_put(req);
	if (rc) {
		fprintf(stderr, "tierfs: reload of '%s' failed: %s\n", argv[1],
			tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		tfs_dbuf_free(&err);
		/* the daemon found the configuration invalid: a config error */
		return rc == EINVAL ? TFS_EXIT_CONFIG : TFS_EXIT_FAIL;
	}
	tfs_dbuf_free(&err);
	struct json_object *applied;
	if (json_object_object_get_ex(res, "applied", &applied) &&
	    json_object_array_length(applied) == 0)
		printf("tierfs: reload of '%s': nothing to apply\n", argv[1]);
	print_list(stdout, res, "applied", "tierfs: applied: ");
	print_list(stderr, res, "needs_remount", "tierfs: needs a remount, not applied: ");
	json_object_put(res);
	return TFS_EXIT_OK;
}

int tfs_cmd_umount(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: tierfs umount MOUNTPOINT\n");
		return TFS_EXIT_CONFIG;
	}
	const char *mp = argv[1];
	char sock[PATH_MAX];
	bool have_sock = tfs_ctl_socket_path(mp, sock, sizeof(sock)) == 0;
	int rc;
	uint64_t left_files = 0, left_bytes = 0;
	pid_t daemon_pid = 0, keeper_pid = 0;
	if (have_sock)
		(void)socket_alive(sock, &daemon_pid, &keeper_pid);
	bool drained = have_sock && drain(sock, false, &left_files, &left_bytes, NULL);
	if (geteuid() == 0) {
		rc = umount2(mp, 0) == 0 ? 0 : errno;
	} else {
		pid_t pid = fork();
		if (pid == 0) {
			execlp("fusermount3", "fusermount3", "-u", mp, (char *)NULL);
			_exit(127);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : EIO;
	}
	if (rc) {
		fprintf(stderr, "tierfs: umount '%s': %s\n", mp, strerror(rc));
		return TFS_EXIT_FAIL;
	}
	/* Wait (bounded) for the daemon to finish its teardown: its socket
	 * goes first, then the process, once uploads in flight have ended and
	 * the index is closed (a new mount must not start before that); then
	 * for its keeper. */
	for (int i = 0;
	     have_sock && i < 600 &&
	     (socket_alive(sock, NULL, NULL) || (daemon_pid > 0 && process_alive(daemon_pid)) ||
	      (keeper_pid > 0 && process_alive(keeper_pid)));
	     i++) {
		struct timespec ts = { 0, 100 * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (drained && left_files)
		fprintf(stderr,
			"tierfs: %s: %" PRIu64 " file(s) (%" PRIu64 " bytes) not uploaded yet; "
			"they stay in "
			"the journal and are uploaded at the next mount of this bucket with the "
			"same cache "
			"directory\n",
			mp, left_files, left_bytes);
	return TFS_EXIT_OK;
}

/* The "keeper" object of the daemon's stats, or NULL (no daemon, or no
 * keeper); *st gets the whole reply to put. */
static struct json_object *keeper_stats(const char *sock, struct json_object **st)
{
	struct json_object *req = json_object_new_object(), *k = NULL;
	*st = NULL;
	if (req == NULL)
		return NULL;
	json_object_object_add(req, "cmd", json_object_new_string("stats"));
	if (tfs_ctl_call_ex(sock, req, 2000, NULL, NULL, st, NULL) == 0)
		(void)json_object_object_get_ex(*st, "keeper", &k);
	json_object_put(req);
	return k;
}

static uint64_t member_u64(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) ? (uint64_t)json_object_get_int64(v) : 0;
}

/* Whether a file exists at `path` (a socket left by a daemon that died:
 * its keeper is starting the next one). */
static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int tfs_cmd_upgrade(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: tierfs upgrade MOUNTPOINT\n");
		return TFS_EXIT_CONFIG;
	}
	const char *mp = argv[1];
	char sock[PATH_MAX];
	struct tfs_dbuf err;
	struct json_object *st = NULL, *k = NULL, *req = json_object_new_object(), *res = NULL;
	uint64_t gen = 0, old_pid = 0;
	int rc = req ? tfs_ctl_socket_path(mp, sock, sizeof(sock)) : ENOMEM;

	tfs_dbuf_init(&err, 4096);
	/* The daemon now; a daemon being restarted answers within 10 s. */
	for (int i = 0; rc == 0 && i < 1000; i++) {
		k = keeper_stats(sock, &st);
		if (st || !exists(sock))
			break;
		sleep_ms(10);
	}
	if (rc == 0 && k == NULL) {
		(void)tfs_dbuf_adds(&err, st ? "the daemon runs without a keeper (an older "
					       "tierfs): "
					       "remount it to upgrade"
					     : "no tierfs daemon serves it");
		rc = st ? ENOTSUP : ENOENT;
	}
	if (k) {
		gen = member_u64(k, "generation");
		old_pid = member_u64(st, "pid");
	}
	json_object_put(st);
	uint64_t t0 = tfs_mono_ns();
	if (rc == 0) {
		json_object_object_add(req, "cmd", json_object_new_string("upgrade"));
		rc = tfs_ctl_call_ex(sock, req, 10000, NULL, NULL, &res, &err);
		/* The daemon may end before its reply is out. */
		if (rc == ECONNRESET || rc == EPIPE)
			rc = 0;
	}
	json_object_put(req);
	json_object_put(res);
	if (rc) {
		fprintf(stderr, "tierfs: upgrade of '%s' failed: %s\n", mp,
			tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		tfs_dbuf_free(&err);
		return TFS_EXIT_FAIL;
	}
	tfs_dbuf_free(&err);
	/* Wait for the next generation to serve (the keeper starts it at
	 * once; a binary that fails to start is retried with backoff). */
	for (int i = 0; i < 6000; i++) {
		k = keeper_stats(sock, &st);
		uint64_t g = k ? member_u64(k, "generation") : 0;
		uint64_t since = k ? member_u64(k, "serving_since_ns") : 0;
		if (k && g > gen && since) {
			printf("tierfs: upgraded %s: daemon %" PRIu64 " -> %" PRIu64
			       " (generation %" PRIu64 " -> %" PRIu64 "), pause %.1f ms\n",
			       mp, old_pid, member_u64(st, "pid"), gen, g,
			       since > t0 ? (double)(since - t0) / 1e6 : 0.0);
			json_object_put(st);
			return TFS_EXIT_OK;
		}
		json_object_put(st);
		sleep_ms(10);
	}
	fprintf(stderr,
		"tierfs: upgrade of '%s': no new daemon serves after 60 s; the keeper retries "
		"(see the log)\n",
		mp);
	return TFS_EXIT_FAIL;
}
