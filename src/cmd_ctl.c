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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "ctl_client.h"
#include "ctl_path.h"
#include "dbuf.h"

/* Whether the daemon answers; *pid (may be NULL) gets its pid. */
static bool socket_alive(const char *sock, pid_t *pid)
{
	struct json_object *req = json_object_new_object(), *res = NULL, *p;
	json_object_object_add(req, "cmd", json_object_new_string("stats"));
	int rc = tfs_ctl_call_ex(sock, req, 2000, NULL, NULL, &res, NULL);
	if (rc == 0 && pid && json_object_object_get_ex(res, "pid", &p))
		*pid = (pid_t)json_object_get_int(p);
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
	pid_t daemon_pid = 0;
	if (have_sock)
		(void)socket_alive(sock, &daemon_pid);
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
	 * the index is closed (a new mount must not start before that). */
	for (int i = 0; have_sock && i < 600 &&
			(socket_alive(sock, NULL) || (daemon_pid > 0 && process_alive(daemon_pid)));
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
