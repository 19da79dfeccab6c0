/* test_ctl.c - the control socket (server, client, socket location) and the
 * human rendering of `tierfs stats`. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_client.h"
#include "dbuf.h"
#include "log.h"
#include "stats_render.h"

static char tmpdir[64];
static char sock_path[TFS_CTL_SOCK_PATH_MAX - 16];
static struct tfs_log tlog;
static struct tfs_ctl *srv;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tfs_dbuf log_text;

static void capture(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	(void)level;
	pthread_mutex_lock(&log_mu);
	tfs_dbuf_adds(&log_text, line);
	tfs_dbuf_addc(&log_text, '\n');
	pthread_mutex_unlock(&log_mu);
}

static bool log_has(const char *s)
{
	pthread_mutex_lock(&log_mu);
	bool r = strstr(tfs_dbuf_str(&log_text), s) != NULL;
	pthread_mutex_unlock(&log_mu);
	return r;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tfsctl.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(sock_path, sizeof(sock_path), "%s/s.sock", tmpdir);
	tfs_dbuf_init(&log_text, 1u << 20);
	tfs_log_init(&tlog, capture, NULL, TFS_LOG_DEBUG);
}

static void remove_tmpdir(void)
{
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	tfs_dbuf_free(&log_text);
}

/* ---- handlers ---- */

static int h_stats(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
		   struct json_object **resp)
{
	(void)ctx;
	(void)conn;
	(void)req;
	*resp = json_tokener_parse("{\"uptime_s\":5,\"ram\":{\"used_bytes\":1536,\"hits\":7,"
				   "\"tiers\":{\"ssd\":{\"files\":3}}},"
				   "\"ops\":[{\"op\":\"read\",\"count\":3}]}");
	return *resp ? 0 : ENOMEM;
}

static int h_fail(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
		  struct json_object **resp)
{
	(void)ctx;
	(void)conn;
	struct json_object *what;
	if (json_object_object_get_ex(req, "quiet", &what))
		return EBUSY;
	return tfs_ctl_fail(resp, ENOENT, "no such thing '%s'", "x");
}

static int h_echo(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
		  struct json_object **resp)
{
	(void)ctx;
	(void)conn;
	*resp = json_object_get(req);
	return 0;
}

/* Waits until two requests are inside at once: proves concurrency. */
struct meet {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int inside;
};
static struct meet meet = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static int h_meet(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
		  struct json_object **resp)
{
	struct meet *m = ctx;
	struct timespec dl;
	int rc = 0;
	(void)conn;
	(void)req;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	pthread_mutex_lock(&m->mu);
	m->inside++;
	pthread_cond_broadcast(&m->cv);
	while (m->inside < 2 && rc == 0)
		rc = pthread_cond_timedwait(&m->cv, &m->mu, &dl);
	pthread_mutex_unlock(&m->mu);
	if (rc)
		return tfs_ctl_fail(resp, ETIMEDOUT, "alone");
	*resp = json_object_new_string("met");
	return 0;
}

static int h_progress(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
		      struct json_object **resp)
{
	(void)ctx;
	(void)req;
	for (int i = 1; i <= 3; i++) {
		struct json_object *p = json_object_new_object();
		json_object_object_add(p, "done", json_object_new_int(i));
		int rc = tfs_ctl_send_progress(conn, p);
		json_object_put(p);
		if (rc)
			return rc;
	}
	*resp = json_object_new_int(42);
	return 0;
}

static atomic_int long_started;
static atomic_int long_cancelled;

static int h_long(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
		  struct json_object **resp)
{
	(void)ctx;
	(void)req;
	(void)resp;
	atomic_store(&long_started, 1);
	for (int i = 0; i < 1000 && !tfs_ctl_conn_cancelled(conn); i++)
		usleep(10000);
	if (tfs_ctl_conn_cancelled(conn))
		atomic_store(&long_cancelled, 1);
	return ECANCELED;
}

static void start_server(void)
{
	cr_assert_eq(tfs_ctl_start(sock_path, &tlog, &srv), 0);
	cr_assert_eq(tfs_ctl_register(srv, "stats", h_stats, NULL), 0);
	cr_assert_eq(tfs_ctl_register(srv, "fail", h_fail, NULL), 0);
	cr_assert_eq(tfs_ctl_register(srv, "echo", h_echo, NULL), 0);
	cr_assert_eq(tfs_ctl_register(srv, "meet", h_meet, &meet), 0);
	cr_assert_eq(tfs_ctl_register(srv, "progress", h_progress, NULL), 0);
	cr_assert_eq(tfs_ctl_register(srv, "long", h_long, NULL), 0);
}

static void setup(void)
{
	make_tmpdir();
	start_server();
}

static void teardown(void)
{
	tfs_ctl_stop(srv);
	srv = NULL;
	remove_tmpdir();
}

/* ---- client helpers ---- */

static struct json_object *cmd_req(const char *cmd)
{
	struct json_object *r = json_object_new_object();
	json_object_object_add(r, "cmd", json_object_new_string(cmd));
	return r;
}

/* Call `cmd`; returns the errno, *res the result, err the message. */
static int call(const char *cmd, struct json_object **res, struct tfs_dbuf *err)
{
	struct json_object *req = cmd_req(cmd);
	int rc = tfs_ctl_call(sock_path, req, res, err);
	json_object_put(req);
	return rc;
}

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
		     strerror(errno));
	return fd;
}

static void raw_send(int fd, const char *s)
{
	size_t n = strlen(s);
	cr_assert_eq(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Read one reply line (5 s timeout) and parse it; NULL on EOF. */
static struct json_object *raw_reply(int fd)
{
	char line[4096];
	size_t n = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		cr_assert_eq(poll(&p, 1, 5000), 1, "no reply within 5 s");
		char c;
		ssize_t r = recv(fd, &c, 1, 0);
		if (r <= 0)
			return NULL;
		if (c == '\n')
			break;
		cr_assert_lt(n, sizeof(line) - 1);
		line[n++] = c;
	}
	line[n] = '\0';
	struct json_object *o = json_tokener_parse(line);
	cr_assert_not_null(o, "unparsable reply: %s", line);
	return o;
}

/* Check an error reply and release it. */
static void assert_error_reply(struct json_object *o, int err, const char *msg_part)
{
	struct json_object *v;
	cr_assert_not_null(o);
	cr_assert(json_object_object_get_ex(o, "ok", &v));
	cr_assert_eq(json_object_get_boolean(v), 0);
	cr_assert(json_object_object_get_ex(o, "errno", &v));
	cr_assert_eq(json_object_get_int(v), err, "errno %d, expected %d (%s)",
		     json_object_get_int(v), err, json_object_to_json_string(o));
	cr_assert(json_object_object_get_ex(o, "error", &v));
	cr_assert(strstr(json_object_get_string(v), msg_part) != NULL, "message '%s'",
		  json_object_get_string(v));
	json_object_put(o);
}

static bool reply_ok(struct json_object *o)
{
	struct json_object *v;
	return o != NULL && json_object_object_get_ex(o, "ok", &v) && json_object_get_boolean(v);
}

static int64_t get_int_path(struct json_object *o, const char *a, const char *b)
{
	struct json_object *v;
	cr_assert(json_object_object_get_ex(o, a, &v), "no %s", a);
	if (b != NULL)
		cr_assert(json_object_object_get_ex(v, b, &v), "no %s.%s", a, b);
	return json_object_get_int64(v);
}

/* ---- the server and the client ---- */

TestSuite(ctl, .init = setup, .fini = teardown, .timeout = 30);

Test(ctl, stats_roundtrip)
{
	struct json_object *res, *v;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(call("stats", &res, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(get_int_path(res, "uptime_s", NULL), 5);
	cr_assert_eq(get_int_path(res, "ram", "used_bytes"), 1536);
	cr_assert(json_object_object_get_ex(res, "ram", &v));
	cr_assert(json_object_object_get_ex(v, "tiers", &v));
	cr_assert_eq(get_int_path(v, "ssd", "files"), 3);
	cr_assert(json_object_object_get_ex(res, "ops", &v));
	cr_assert_eq(json_object_array_length(v), 1);
	cr_assert_str_eq(tfs_dbuf_str(&err), "");
	json_object_put(res);
	tfs_dbuf_free(&err);
}

Test(ctl, unknown_command)
{
	struct json_object *res = (void *)1;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(call("nope", &res, &err), EINVAL);
	cr_assert_null(res);
	cr_assert_str_eq(tfs_dbuf_str(&err), "unknown command 'nope'");
	tfs_dbuf_free(&err);
}

Test(ctl, handler_errors_reach_the_client)
{
	struct json_object *res, *req;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(call("fail", &res, &err), ENOENT);
	cr_assert_str_eq(tfs_dbuf_str(&err), "no such thing 'x'");
	tfs_dbuf_reset(&err);
	req = cmd_req("fail");
	json_object_object_add(req, "quiet", json_object_new_boolean(1));
	cr_assert_eq(tfs_ctl_call(sock_path, req, &res, &err), EBUSY);
	cr_assert_str_eq(tfs_dbuf_str(&err), strerror(EBUSY));
	json_object_put(req);
	tfs_dbuf_free(&err);
}

Test(ctl, register_twice_is_refused)
{
	cr_assert_eq(tfs_ctl_register(srv, "stats", h_stats, NULL), EEXIST);
	cr_assert_eq(tfs_ctl_register(srv, "", h_stats, NULL), EINVAL);
}

Test(ctl, malformed_lines_get_error_replies)
{
	int fd = raw_connect();
	raw_send(fd, "not json\n");
	assert_error_reply(raw_reply(fd), EINVAL, "malformed request");
	raw_send(fd, "[1,2]\n");
	assert_error_reply(raw_reply(fd), EINVAL, "not a JSON object");
	raw_send(fd, "{\"cmd\":42}\n");
	assert_error_reply(raw_reply(fd), EINVAL, "no \"cmd\" string");
	raw_send(fd, "{\"cmd\":\"stats\"} trailing\n");
	assert_error_reply(raw_reply(fd), EINVAL, "trailing");
	raw_send(fd, "{\"cmd\":\"st");
	raw_send(fd, "ats\"\n");
	assert_error_reply(raw_reply(fd), EINVAL, "malformed request");
	/* Blank lines are skipped; the connection is still usable,
	 * pipelined requests are answered in order, CRLF is fine. */
	raw_send(fd, "\n  \r\n{\"cmd\":\"stats\"}\r\n{\"cmd\":\"echo\",\"n\":2}\n");
	struct json_object *o = raw_reply(fd);
	cr_assert(reply_ok(o), "%s", json_object_to_json_string(o));
	json_object_put(o);
	o = raw_reply(fd);
	cr_assert(reply_ok(o));
	struct json_object *r;
	cr_assert(json_object_object_get_ex(o, "result", &r));
	cr_assert_eq(get_int_path(r, "n", NULL), 2);
	json_object_put(o);
	close(fd);
}

Test(ctl, last_request_without_newline_is_answered)
{
	int fd = raw_connect();
	raw_send(fd, "{\"cmd\":\"stats\"}");
	shutdown(fd, SHUT_WR);
	struct json_object *o = raw_reply(fd);
	cr_assert(reply_ok(o));
	json_object_put(o);
	cr_assert_null(raw_reply(fd), "the server should close after the reply");
	close(fd);
}

Test(ctl, request_over_1mib_is_refused)
{
	size_t big = TFS_CTL_MAX_REQUEST + 4096;
	char *pad = malloc(big + 1);
	memset(pad, 'x', big);
	pad[big] = '\0';
	struct json_object *req = cmd_req("echo"), *res = NULL;
	json_object_object_add(req, "pad", json_object_new_string(pad));
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(tfs_ctl_call(sock_path, req, &res, &err), EMSGSIZE, "%s", tfs_dbuf_str(&err));
	cr_assert_null(res);
	cr_assert(strstr(tfs_dbuf_str(&err), "larger than 1 MiB") != NULL, "%s",
		  tfs_dbuf_str(&err));
	json_object_put(req);

	/* Just under the limit is fine, and the server still serves. */
	pad[TFS_CTL_MAX_REQUEST - 100] = '\0';
	req = cmd_req("echo");
	json_object_object_add(req, "pad", json_object_new_string(pad));
	tfs_dbuf_reset(&err);
	cr_assert_eq(tfs_ctl_call(sock_path, req, &res, &err), 0, "%s", tfs_dbuf_str(&err));
	struct json_object *v;
	cr_assert(json_object_object_get_ex(res, "pad", &v));
	cr_assert_eq((size_t)json_object_get_string_len(v), (size_t)TFS_CTL_MAX_REQUEST - 100);
	json_object_put(res);
	json_object_put(req);
	free(pad);
	tfs_dbuf_free(&err);
}

struct caller {
	pthread_t t;
	const char *cmd;
	int rc;
	char err[256];
};

static void *caller_main(void *arg)
{
	struct caller *cl = arg;
	struct json_object *res = NULL;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, sizeof(cl->err) - 1);
	cl->rc = call(cl->cmd, &res, &err);
	snprintf(cl->err, sizeof(cl->err), "%s", tfs_dbuf_str(&err));
	json_object_put(res);
	tfs_dbuf_free(&err);
	return NULL;
}

Test(ctl, concurrent_clients_are_both_served)
{
	/* A client that sent half a request and went quiet blocks nobody. */
	int idle = raw_connect();
	raw_send(idle, "{\"cmd\":");

	struct caller a = { .cmd = "meet" }, b = { .cmd = "meet" };
	cr_assert_eq(pthread_create(&a.t, NULL, caller_main, &a), 0);
	cr_assert_eq(pthread_create(&b.t, NULL, caller_main, &b), 0);
	pthread_join(a.t, NULL);
	pthread_join(b.t, NULL);
	cr_assert_eq(a.rc, 0, "a: %s", a.err);
	cr_assert_eq(b.rc, 0, "b: %s", b.err);

	struct json_object *res;
	cr_assert_eq(call("stats", &res, NULL), 0);
	json_object_put(res);
	close(idle);
}

Test(ctl, many_connections_beyond_the_limit_get_ebusy)
{
	int fds[TFS_CTL_MAX_CLIENTS];
	for (int i = 0; i < TFS_CTL_MAX_CLIENTS; i++)
		fds[i] = raw_connect();
	/* Make sure the server has accepted them all. */
	raw_send(fds[TFS_CTL_MAX_CLIENTS - 1], "{\"cmd\":\"stats\"}\n");
	json_object_put(raw_reply(fds[TFS_CTL_MAX_CLIENTS - 1]));

	struct json_object *res = NULL;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(call("stats", &res, &err), EBUSY, "%s", tfs_dbuf_str(&err));
	cr_assert(strstr(tfs_dbuf_str(&err), "too many") != NULL);
	for (int i = 0; i < TFS_CTL_MAX_CLIENTS; i++)
		close(fds[i]);
	/* Closed connections free their slots. */
	int rc = EBUSY;
	for (int i = 0; i < 100 && rc == EBUSY; i++) {
		rc = call("stats", &res, NULL);
		if (rc == EBUSY)
			usleep(10000);
	}
	cr_assert_eq(rc, 0);
	json_object_put(res);
	tfs_dbuf_free(&err);
}

static int count_progress(void *ctx, struct json_object *p)
{
	int *n = ctx;
	struct json_object *v;
	cr_assert(json_object_object_get_ex(p, "done", &v));
	cr_assert_eq(json_object_get_int(v), *n + 1);
	(*n)++;
	return 0;
}

Test(ctl, progress_lines_precede_the_reply)
{
	struct json_object *req = cmd_req("progress"), *res = NULL;
	int n = 0;
	cr_assert_eq(tfs_ctl_call_ex(sock_path, req, 5000, count_progress, &n, &res, NULL), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(json_object_get_int(res), 42);
	json_object_put(res);
	/* Without a callback they are skipped. */
	cr_assert_eq(tfs_ctl_call(sock_path, req, &res, NULL), 0);
	cr_assert_eq(json_object_get_int(res), 42);
	json_object_put(res);
	json_object_put(req);
}

Test(ctl, socket_is_0600_and_stop_unlinks_it)
{
	struct stat st;
	cr_assert_eq(lstat(sock_path, &st), 0);
	cr_assert(S_ISSOCK(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	tfs_ctl_stop(srv);
	srv = NULL;
	cr_assert_eq(lstat(sock_path, &st), -1);
	cr_assert_eq(errno, ENOENT);

	struct json_object *res = NULL;
	struct tfs_dbuf err;
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(call("stats", &res, &err), ENOENT);
	cr_assert(strstr(tfs_dbuf_str(&err), "no tierfs daemon serves this mountpoint") != NULL,
		  "%s", tfs_dbuf_str(&err));
	cr_assert(strstr(tfs_dbuf_str(&err), sock_path) != NULL);
	tfs_dbuf_free(&err);
}

static void *long_caller(void *arg)
{
	return caller_main(arg);
}

Test(ctl, stop_cancels_a_running_handler)
{
	struct caller a = { .cmd = "long" };
	cr_assert_eq(pthread_create(&a.t, NULL, long_caller, &a), 0);
	for (int i = 0; i < 500 && !atomic_load(&long_started); i++)
		usleep(10000);
	cr_assert(atomic_load(&long_started));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tfs_ctl_stop(srv);
	srv = NULL;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 3, "stop took too long");
	cr_assert(atomic_load(&long_cancelled));
	pthread_join(a.t, NULL);
	cr_assert_eq(a.rc, ECONNRESET, "rc %d: %s", a.rc, a.err);
}

Test(ctl, other_users_are_refused)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to switch uid");
	/* Let uid 65534 reach the socket; the credentials check must stop it. */
	chmod(tmpdir, 0755);
	chmod(sock_path, 0666);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		struct json_object *res = NULL;
		struct tfs_dbuf err;
		tfs_dbuf_init(&err, 4096);
		int rc = call("stats", &res, &err);
		_exit(rc == EACCES && strstr(tfs_dbuf_str(&err), "permission denied") ? 0 : 1);
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child status %d", WEXITSTATUS(status));
	cr_assert(log_has("refused a connection from uid 65534"));
}

/* ---- starting a server over what is already there ---- */

TestSuite(ctl_start, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 30);

Test(ctl_start, stale_socket_is_replaced)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd); /* the file stays: a crashed daemon */

	cr_assert_eq(tfs_ctl_start(sock_path, &tlog, &srv), 0);
	cr_assert_eq(tfs_ctl_register(srv, "stats", h_stats, NULL), 0);
	struct json_object *res;
	cr_assert_eq(call("stats", &res, NULL), 0);
	json_object_put(res);
	cr_assert(log_has("replacing the stale socket"));
	tfs_ctl_stop(srv);
	srv = NULL;
}

Test(ctl_start, second_server_on_a_live_path_fails)
{
	struct tfs_ctl *second = (void *)1;
	cr_assert_eq(tfs_ctl_start(sock_path, &tlog, &srv), 0);
	cr_assert_eq(tfs_ctl_register(srv, "stats", h_stats, NULL), 0);
	cr_assert_eq(tfs_ctl_start(sock_path, &tlog, &second), EADDRINUSE);
	cr_assert_null(second);
	cr_assert(log_has("another tierfs daemon serves this mountpoint"));
	/* The first one is untouched. */
	struct json_object *res;
	cr_assert_eq(call("stats", &res, NULL), 0);
	json_object_put(res);
	tfs_ctl_stop(srv);
	srv = NULL;
	/* Once it is gone, a new server may start. */
	cr_assert_eq(tfs_ctl_start(sock_path, &tlog, &srv), 0);
	tfs_ctl_stop(srv);
	srv = NULL;
}

Test(ctl_start, live_foreign_listener_is_not_replaced)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	cr_assert_eq(tfs_ctl_start(sock_path, &tlog, &srv), EADDRINUSE);
	struct stat st;
	cr_assert_eq(lstat(sock_path, &st), 0, "the live socket must stay");
	close(fd);
}

Test(ctl_start, other_files_are_not_replaced)
{
	FILE *f = fopen(sock_path, "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(tfs_ctl_start(sock_path, &tlog, &srv), EEXIST);
	struct stat st;
	cr_assert_eq(lstat(sock_path, &st), 0);
	cr_assert(S_ISREG(st.st_mode));
}

Test(ctl_start, bad_paths)
{
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	cr_assert_eq(tfs_ctl_start("", &tlog, &srv), EINVAL);
	cr_assert_eq(tfs_ctl_start(longp, &tlog, &srv), ENAMETOOLONG);
	struct json_object *req = cmd_req("stats"), *res;
	cr_assert_eq(tfs_ctl_call(longp, req, &res, NULL), ENAMETOOLONG);
	json_object_put(req);
}

/* ---- the socket's location ---- */

static char base[PATH_MAX];

static void path_setup(void)
{
	char p[PATH_MAX + 64];
	make_tmpdir();
	cr_assert_not_null(realpath(tmpdir, base));
	snprintf(p, sizeof(p), "%s/real", base);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/real/mnt", base);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/real/x", base);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/link", base);
	cr_assert_eq(symlink("real", p), 0);
	snprintf(p, sizeof(p), "%s/mntlink", base);
	cr_assert_eq(symlink("real/mnt", p), 0);
	snprintf(p, sizeof(p), "%s/run", base);
	setenv("XDG_RUNTIME_DIR", p, 1); /* used when not root */
}

TestSuite(ctl_path, .init = path_setup, .fini = remove_tmpdir, .timeout = 30);

static void expect_canonical(const char *rel, const char *want_rel)
{
	char in[PATH_MAX + 64], want[PATH_MAX + 64], got[PATH_MAX];
	snprintf(in, sizeof(in), "%s/%s", base, rel);
	snprintf(want, sizeof(want), "%s/%s", base, want_rel);
	cr_assert_eq(tfs_ctl_canonical_path(in, got, sizeof(got)), 0, "%s", in);
	cr_assert_str_eq(got, want, "canonical(%s)", in);
}

static void sock_of(const char *rel, char *out)
{
	char in[PATH_MAX + 64];
	if (rel[0] == '/' || rel[0] == '.')
		snprintf(in, sizeof(in), "%s", rel);
	else
		snprintf(in, sizeof(in), "%s/%s", base, rel);
	cr_assert_eq(tfs_ctl_socket_path(in, out, TFS_CTL_SOCK_PATH_MAX), 0, "%s", in);
}

Test(ctl_path, spellings_of_one_mountpoint_agree)
{
	expect_canonical("real/mnt", "real/mnt");
	expect_canonical("real/mnt/", "real/mnt");
	expect_canonical("real/mnt//.//", "real/mnt");
	expect_canonical("real/./mnt", "real/mnt");
	expect_canonical("real/x/../mnt", "real/mnt");
	expect_canonical("link/mnt", "real/mnt");
	expect_canonical("link//mnt/", "real/mnt");
	expect_canonical("mntlink", "real/mnt");
	expect_canonical("mntlink/", "real/mnt");
	expect_canonical("real/mnt/x/..", "real/mnt");
	/* A last component that does not exist (yet). */
	expect_canonical("real/ghost", "real/ghost");
	expect_canonical("link/ghost/", "real/ghost");
	expect_canonical("real/x/../ghost", "real/ghost");
	/* A parent that does not exist: lexical. */
	expect_canonical("none/a/../b", "none/b");

	char a[TFS_CTL_SOCK_PATH_MAX], b[TFS_CTL_SOCK_PATH_MAX];
	sock_of("real/mnt", a);
	const char *same[] = { "real/mnt/", "real/x/../mnt", "link/mnt", "mntlink", "link/mnt//" };
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		sock_of(same[i], b);
		cr_assert_str_eq(a, b, "%s", same[i]);
	}
	/* Relative to the working directory. */
	char cwd[PATH_MAX];
	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	cr_assert_eq(chdir(base), 0);
	sock_of("./real/./mnt/", b);
	cr_assert_str_eq(a, b);
	cr_assert_eq(chdir("real/mnt"), 0);
	sock_of(".", b);
	cr_assert_str_eq(a, b);
	cr_assert_eq(chdir(cwd), 0);

	sock_of("real/ghost", b);
	cr_assert_str_neq(a, b);
	char c[TFS_CTL_SOCK_PATH_MAX];
	sock_of("link/ghost/", c);
	cr_assert_str_eq(b, c);
}

Test(ctl_path, socket_path_shape_and_directory)
{
	char s[TFS_CTL_SOCK_PATH_MAX], dir[PATH_MAX + 16];
	sock_of("real/mnt", s);
	if (geteuid() == 0)
		snprintf(dir, sizeof(dir), "/run/tierfs/");
	else
		snprintf(dir, sizeof(dir), "%s/run/tierfs/", base);
	cr_assert_eq(strncmp(s, dir, strlen(dir)), 0, "%s not under %s", s, dir);
	const char *name = s + strlen(dir);
	cr_assert_eq(strlen(name), 16 + 5, "%s", name);
	cr_assert_str_eq(name + 16, ".sock");
	for (int i = 0; i < 16; i++)
		cr_assert(strchr("0123456789abcdef", name[i]) != NULL);
	dir[strlen(dir) - 1] = '\0';
	struct stat st;
	cr_assert_eq(lstat(dir, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0700);
}

Test(ctl_path, errors)
{
	char out[PATH_MAX];
	cr_assert_eq(tfs_ctl_canonical_path("", out, sizeof(out)), EINVAL);
	cr_assert_eq(tfs_ctl_canonical_path(NULL, out, sizeof(out)), EINVAL);
	cr_assert_eq(tfs_ctl_canonical_path("/", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/");
	cr_assert_eq(tfs_ctl_canonical_path("/..", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/");
	cr_assert_eq(tfs_ctl_canonical_path("/tmp", out, 3), ERANGE);
	cr_assert_eq(tfs_ctl_socket_path("/tmp", out, 8), ERANGE);

	char loop[PATH_MAX + 64];
	snprintf(loop, sizeof(loop), "%s/loop", base);
	cr_assert_eq(symlink("loop", loop), 0);
	cr_assert_eq(tfs_ctl_canonical_path(loop, out, sizeof(out)), ELOOP);
}

/* ---- the human rendering ---- */

static void expect_render(const char *json, const char *want)
{
	struct json_object *o = json_tokener_parse(json);
	struct tfs_dbuf out;
	cr_assert_not_null(o);
	tfs_dbuf_init(&out, 1u << 20);
	cr_assert_eq(tfs_stats_render(o, &out), 0);
	cr_assert_str_eq(tfs_dbuf_str(&out), want, "got:\n%s\nwant:\n%s", tfs_dbuf_str(&out), want);
	tfs_dbuf_free(&out);
	json_object_put(o);
}

Test(stats_render, sections_units_tables_lists)
{
	expect_render("{\"version\":\"0.1.0\",\"uptime_s\":12,"
		      "\"ram\":{\"used_bytes\":1536,\"capacity_bytes\":1073741824,"
		      "\"hit_ratio\":0.5,\"evictions\":0},"
		      "\"ops\":[{\"op\":\"read\",\"count\":10,\"total_bytes\":1536},"
		      "{\"op\":\"write\",\"count\":2}],"
		      "\"tiers\":[\"ram\",\"ssd\"],\"degraded\":false,\"last_error\":null,"
		      "\"empty\":{},"
		      "\"events\":[{\"t\":1,\"detail\":{\"a\":1}},5]}",
		      "version:    0.1.0\n"
		      "uptime_s:   12\n"
		      "ram:\n"
		      "  used_bytes:     1.5 KiB\n"
		      "  capacity_bytes: 1 GiB\n"
		      "  hit_ratio:      0.5\n"
		      "  evictions:      0\n"
		      "ops:\n"
		      "  op     count  total_bytes\n"
		      "  read      10      1.5 KiB\n"
		      "  write      2            -\n"
		      "tiers:      ram, ssd\n"
		      "degraded:   false\n"
		      "last_error: -\n"
		      "empty:      -\n"
		      "events:\n"
		      "  [0]:\n"
		      "    t: 1\n"
		      "    detail:\n"
		      "      a: 1\n"
		      "  [1]: 5\n");
}

Test(stats_render, scalars)
{
	expect_render("{\"big\":18446744073709551615,\"neg\":-3,\"neg_bytes\":-1,"
		      "\"sizes_bytes\":[512,2048],\"s\":\"a\\nb\",\"e\":\"\","
		      "\"f_bytes\":1048576.0,\"pi\":3.14159}",
		      "big:         18446744073709551615\n"
		      "neg:         -3\n"
		      "neg_bytes:   -1\n"
		      "sizes_bytes: 512 B, 2 KiB\n"
		      "s:           a?b\n"
		      "e:           \"\"\n"
		      "f_bytes:     1 MiB\n"
		      "pi:          3.14159\n");
	expect_render("{}", "");
}

Test(stats_render, not_an_object)
{
	struct json_object *o = json_object_new_array();
	struct tfs_dbuf out;
	tfs_dbuf_init(&out, 1024);
	cr_assert_eq(tfs_stats_render(o, &out), EINVAL);
	cr_assert_eq(tfs_stats_render(NULL, &out), EINVAL);
	/* A buffer that is too small reports it. */
	json_object_put(o);
	o = json_tokener_parse("{\"a\":\"0123456789\"}");
	tfs_dbuf_init(&out, 5);
	cr_assert_eq(tfs_stats_render(o, &out), EOVERFLOW);
	tfs_dbuf_free(&out);
	json_object_put(o);
}
