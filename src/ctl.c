/* ctl.c - the control socket's server: a poll()-based thread that owns
 * the listening socket and the idle connections, and one worker thread per
 * running request. */
#include "config.h"

#include "ctl.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl_proto.h"
#include "dbuf.h"
#include "log.h"
#include "unix_listen.h"

#define LISTEN_BACKLOG 16

struct handler {
	char *cmd;
	tfs_ctl_handler fn;
	void *ctx;
};

/* A client connection.  Owned by the server thread, except while `busy`:
 * then the worker owns fd, `in` and write_err until it sets `done`; the
 * server thread reads them again only after joining the worker. */
struct tfs_ctl_conn {
	struct tfs_ctl *ctl;
	int fd;
	uid_t uid;
	struct tfs_dbuf in; /* bytes received and not yet consumed */
	size_t line_len;    /* the running request is in[0..line_len) */
	size_t consume;     /* bytes to drop from `in` once it is done */
	int64_t last_ms;    /* last activity, for the idle timeout */
	bool busy;          /* a worker runs a request */
	bool eof;           /* the client shut down its sending side */
	bool closing;       /* close once not busy */
	int write_err;      /* first failed write: the connection is dead */
	atomic_bool done;   /* set by the worker as its last access */
	pthread_t worker;
};

struct tfs_ctl {
	const struct tfs_log *log;
	char path[TFS_CTL_SOCK_PATH_MAX];
	dev_t sock_dev;
	ino_t sock_ino;
	uid_t uid;
	int lfd;
	int lock_fd;
	int wake[2];
	pthread_t thread;
	atomic_bool stopping;

	pthread_mutex_t lock; /* protects handlers, n_handlers */
	struct handler *handlers;
	size_t n_handlers;

	/* Server thread only. */
	struct tfs_ctl_conn *conns[TFS_CTL_MAX_CLIENTS];
	size_t n_conns;
	int64_t busy_warned_ms;     /* last "too many connections" warning */
	unsigned long busy_refused; /* refusals since that warning */
	char rbuf[CTL_READ_CHUNK];
};

static void wake(struct tfs_ctl *c)
{
	char b = 1;

	if (write(c->wake[1], &b, 1) < 0) {
		/* EAGAIN: the pipe is full, the server wakes up anyway. */
	}
}

/* Add `v` to `o` under `k`, handing `v` over even on failure (json-c
 * leaves it to the caller then).  ENOMEM when `v` is NULL or the add fails. */
static int obj_add(struct json_object *o, const char *k, struct json_object *v)
{
	if (v == NULL)
		return ENOMEM;
	if (json_object_object_add(o, k, v) != 0) {
		json_object_put(v);
		return ENOMEM;
	}
	return 0;
}

/* A new {"ok":false,"errno":err,"error":msg} object, or NULL on ENOMEM. */
static struct json_object *error_reply(int err, const char *msg)
{
	struct json_object *o = json_object_new_object();

	if (o == NULL)
		return NULL;
	if (obj_add(o, "ok", json_object_new_boolean(0)) != 0 ||
	    obj_add(o, "errno", json_object_new_int(err)) != 0 ||
	    obj_add(o, "error", json_object_new_string(msg)) != 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* From the server thread, which must not block: send a short error line if
 * the socket buffer takes it at once, else nothing. */
static void send_error_nowait(int fd, int err, const char *msg)
{
	struct json_object *o = error_reply(err, msg);
	char buf[CTL_MSG_MAX + 128];
	size_t n;

	if (o == NULL)
		return;
	const char *s = json_object_to_json_string_length(o, CTL_JSON_FLAGS, &n);
	if (s != NULL && n + 1 <= sizeof(buf)) {
		memcpy(buf, s, n);
		buf[n] = '\n';
		if (send(fd, buf, n + 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			/* best effort */
		}
	}
	json_object_put(o);
}

/* From a worker: write all of buf, waiting at most TFS_CTL_SEND_TIMEOUT_MS
 * for the client to make room each time. */
static int conn_write(struct tfs_ctl_conn *k, const char *buf, size_t len)
{
	int64_t deadline = (int64_t)tfs_mono_ms() + TFS_CTL_SEND_TIMEOUT_MS;
	int rc = 0;

	if (k->write_err)
		return k->write_err;
	while (len > 0) {
		if (atomic_load(&k->ctl->stopping)) {
			rc = ECANCELED;
			break;
		}
		ssize_t n = send(k->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			deadline = (int64_t)tfs_mono_ms() + TFS_CTL_SEND_TIMEOUT_MS;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int64_t left = deadline - (int64_t)tfs_mono_ms();
			if (left <= 0) {
				rc = ETIMEDOUT;
				break;
			}
			/* Short slices, so that a stop is noticed promptly. */
			struct pollfd p = { .fd = k->fd, .events = POLLOUT };
			if (poll(&p, 1, left > 250 ? 250 : (int)left) < 0 && errno != EINTR) {
				rc = errno;
				break;
			}
			continue;
		}
		rc = n < 0 ? errno : EIO;
		break;
	}
	if (rc)
		k->write_err = rc;
	return rc;
}

/* From a worker: send `o` as one line. */
static int conn_send(struct tfs_ctl_conn *k, struct json_object *o)
{
	size_t n;
	const char *s = json_object_to_json_string_length(o, CTL_JSON_FLAGS, &n);

	if (s == NULL)
		return ENOMEM;
	int rc = conn_write(k, s, n);
	if (rc == 0)
		rc = conn_write(k, "\n", 1);
	return rc;
}

int tfs_ctl_send_progress(struct tfs_ctl_conn *conn, struct json_object *progress)
{
	if (atomic_load(&conn->ctl->stopping))
		return ECANCELED;
	if (conn->write_err)
		return conn->write_err;
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return ENOMEM;
	if (json_object_object_add(o, "progress", json_object_get(progress)) != 0) {
		json_object_put(progress);
		json_object_put(o);
		return ENOMEM;
	}
	int rc = conn_send(conn, o);
	json_object_put(o);
	return rc;
}

bool tfs_ctl_conn_cancelled(const struct tfs_ctl_conn *conn)
{
	return atomic_load(&conn->ctl->stopping) || conn->write_err != 0;
}

int tfs_ctl_fail(struct json_object **resp, int err, const char *fmt, ...)
{
	char msg[CTL_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	*resp = json_object_new_string(msg);
	return err;
}
static bool lookup(struct tfs_ctl *c, const char *cmd, struct handler *h)
{
	bool found = false;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_handlers; i++) {
		if (strcmp(c->handlers[i].cmd, cmd) == 0) {
			*h = c->handlers[i];
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

/* On a worker: run the request in k->in[0..line_len) and send the reply. */
static void handle_request(struct tfs_ctl *c, struct tfs_ctl_conn *k)
{
	struct json_object *req = NULL, *resp = NULL, *reply = NULL;
	const char *cmd = "";
	char msg[CTL_MSG_MAX] = "";
	char perr[256], ebuf[128];
	int rc;

	rc = ctl_parse_line(k->in.buf, k->line_len, &req, perr, sizeof(perr));
	if (rc)
		snprintf(msg, sizeof(msg), "%s%s", rc == EINVAL ? "malformed request: " : "", perr);
	if (rc == 0) {
		struct json_object *v;
		if (!json_object_object_get_ex(req, "cmd", &v) ||
		    !json_object_is_type(v, json_type_string) ||
		    json_object_get_string_len(v) == 0) {
			rc = EINVAL;
			snprintf(msg, sizeof(msg), "malformed request: no \"cmd\" string");
		} else {
			cmd = json_object_get_string(v);
		}
	}
	if (rc == 0) {
		struct handler h;
		if (!lookup(c, cmd, &h)) {
			rc = EINVAL;
			snprintf(msg, sizeof(msg), "unknown command '%.200s'", cmd);
		} else {
			rc = h.fn(h.ctx, k, req, &resp);
			if (rc != 0 && !ctl_is_errno(rc)) {
				tfs_err(c->log, "ctl: handler of '%s' returned %d, not an errno",
					cmd, rc);
				rc = EIO;
			}
			if (rc != 0 && json_object_is_type(resp, json_type_string))
				snprintf(msg, sizeof(msg), "%s", json_object_get_string(resp));
		}
	}
	tfs_debug(c->log, "ctl: uid %u: '%.200s' -> %d", (unsigned)k->uid, cmd, rc);

	if (rc == 0) {
		struct json_object *res = resp != NULL ? resp : json_object_new_object();
		int e;

		resp = NULL;
		reply = json_object_new_object();
		e = reply == NULL ? ENOMEM : obj_add(reply, "ok", json_object_new_boolean(1));
		if (e == 0) {
			e = obj_add(reply, "result", res);
			res = NULL;
		}
		json_object_put(res);
		if (e != 0) {
			json_object_put(reply);
			reply = NULL;
			rc = ENOMEM;
			snprintf(msg, sizeof(msg), "out of memory building the reply");
		}
	}
	if (rc != 0) {
		if (msg[0] == '\0')
			snprintf(msg, sizeof(msg), "%s", strerror_r(rc, ebuf, sizeof(ebuf)));
		reply = error_reply(rc, msg);
	}
	if (reply != NULL) {
		conn_send(k, reply);
	} else {
		static const char oom[] = "{\"ok\":false,\"errno\":12,\"error\":\"out of "
					  "memory\"}\n";
		conn_write(k, oom, sizeof(oom) - 1);
	}
	json_object_put(reply);
	json_object_put(resp);
	json_object_put(req);
}

static void *worker_main(void *arg)
{
	struct tfs_ctl_conn *k = arg;
	struct tfs_ctl *c = k->ctl; /* k may be freed once done is set */

	handle_request(c, k);
	atomic_store(&k->done, true);
	wake(c);
	return NULL;
}

static void start_worker(struct tfs_ctl *c, struct tfs_ctl_conn *k, size_t line_len, size_t consume)
{
	k->line_len = line_len;
	k->consume = consume;
	atomic_store(&k->done, false);
	k->busy = true;
	/* The worker inherits this thread's mask: all signals blocked. */
	int rc = pthread_create(&k->worker, NULL, worker_main, k);
	if (rc) {
		k->busy = false;
		tfs_err(c->log, "ctl: cannot start a request thread: %s", strerror(rc));
		send_error_nowait(k->fd, rc, "the daemon cannot start a thread for the request");
		k->closing = true;
	}
}

static void process_input(struct tfs_ctl *c, struct tfs_ctl_conn *k)
{
	while (!k->closing) {
		size_t len = k->in.len, line_len, consume;
		char *nl = len ? memchr(k->in.buf, '\n', len) : NULL;

		if (nl != NULL) {
			line_len = (size_t)(nl - k->in.buf);
			consume = line_len + 1;
		} else if (k->eof && len > 0) {
			line_len = consume = len;
		} else {
			line_len = consume = len;
			if (len <= TFS_CTL_MAX_REQUEST) {
				if (k->eof)
					k->closing = true;
				return;
			}
		}
		if (line_len > TFS_CTL_MAX_REQUEST) {
			tfs_warn(c->log, "ctl: uid %u: request larger than %u bytes, disconnected",
				 (unsigned)k->uid, TFS_CTL_MAX_REQUEST);
			send_error_nowait(k->fd, EMSGSIZE, "request larger than 1 MiB");
			k->closing = true;
			return;
		}
		if (ctl_blank(k->in.buf, line_len)) {
			ctl_drop_front(&k->in, consume);
			continue;
		}
		start_worker(c, k, line_len, consume);
		return;
	}
}

static void conn_readable(struct tfs_ctl *c, struct tfs_ctl_conn *k, char *tmp, size_t tmplen)
{
	ssize_t n = recv(k->fd, tmp, tmplen, MSG_DONTWAIT);

	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			k->closing = true;
		return;
	}
	k->last_ms = (int64_t)tfs_mono_ms();
	if (n == 0) {
		k->eof = true;
	} else if (tfs_dbuf_add(&k->in, tmp, (size_t)n) != 0) {
		send_error_nowait(k->fd, ENOMEM, "out of memory");
		k->closing = true;
		return;
	}
	process_input(c, k);
}

static void accept_clients(struct tfs_ctl *c, int64_t *pause_until)
{
	for (;;) {
		int fd = accept4(c->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* EMFILE, ENOBUFS...: the listening socket stays
				 * readable, so do not poll it for a while. */
				tfs_warn(c->log, "ctl: accept: %s", strerror(errno));
				*pause_until = (int64_t)tfs_mono_ms() + 200;
			}
			return;
		}
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0) {
			tfs_warn(c->log, "ctl: SO_PEERCRED: %s", strerror(errno));
			close(fd);
			continue;
		}
		if (cr.uid != c->uid && cr.uid != 0) {
			char msg[128];
			tfs_warn(c->log, "ctl: refused a connection from uid %u (pid %d)",
				 (unsigned)cr.uid, (int)cr.pid);
			snprintf(msg, sizeof(msg),
				 "permission denied: this daemon serves uid %u and root",
				 (unsigned)c->uid);
			send_error_nowait(fd, EACCES, msg);
			close(fd);
			continue;
		}
		if (c->n_conns == TFS_CTL_MAX_CLIENTS) {
			/* At most one warning per 10 s: a busy client must not
			 * flood the log. */
			int64_t now = (int64_t)tfs_mono_ms();
			c->busy_refused++;
			if (now - c->busy_warned_ms >= 10000) {
				tfs_warn(c->log,
					 "ctl: %d connections open, refusing more (%lu refused "
					 "since the last warning, the last from pid %d)",
					 TFS_CTL_MAX_CLIENTS, c->busy_refused, (int)cr.pid);
				c->busy_warned_ms = now;
				c->busy_refused = 0;
			}
			send_error_nowait(fd, EBUSY, "too many control connections");
			close(fd);
			continue;
		}
		struct tfs_ctl_conn *k = calloc(1, sizeof(*k));
		if (k == NULL) {
			send_error_nowait(fd, ENOMEM, "out of memory");
			close(fd);
			continue;
		}
		k->ctl = c;
		k->fd = fd;
		k->uid = cr.uid;
		tfs_dbuf_init(&k->in, TFS_CTL_MAX_REQUEST + CTL_READ_CHUNK + 1);
		k->last_ms = (int64_t)tfs_mono_ms();
		atomic_init(&k->done, false);
		c->conns[c->n_conns++] = k;
	}
}

/* Join the workers that finished and start their connections' next
 * request. */
static void reap(struct tfs_ctl *c)
{
	for (size_t i = 0; i < c->n_conns; i++) {
		struct tfs_ctl_conn *k = c->conns[i];
		if (!k->busy || !atomic_load(&k->done))
			continue;
		pthread_join(k->worker, NULL);
		k->busy = false;
		ctl_drop_front(&k->in, k->consume);
		k->last_ms = (int64_t)tfs_mono_ms();
		if (k->write_err) {
			tfs_debug(c->log, "ctl: uid %u: reply not delivered: %s", (unsigned)k->uid,
				  strerror(k->write_err));
			k->closing = true;
		} else {
			process_input(c, k);
		}
	}
}

static void conn_free(struct tfs_ctl_conn *k)
{
	close(k->fd);
	tfs_dbuf_free(&k->in);
	free(k);
}

/* Close the connections marked closing (never a busy one). */
static void sweep(struct tfs_ctl *c)
{
	for (size_t i = 0; i < c->n_conns;) {
		struct tfs_ctl_conn *k = c->conns[i];
		if (k->closing && !k->busy) {
			conn_free(k);
			c->conns[i] = c->conns[--c->n_conns];
		} else {
			i++;
		}
	}
}

static void *server_main(void *arg)
{
	struct tfs_ctl *c = arg;
	struct pollfd pfd[2 + TFS_CTL_MAX_CLIENTS];
	struct tfs_ctl_conn *pc[2 + TFS_CTL_MAX_CLIENTS];
	int64_t pause_until = 0;

	while (!atomic_load(&c->stopping)) {
		int64_t now = (int64_t)tfs_mono_ms();
		int64_t timeout = -1;
		nfds_t n = 0;
		int lidx = -1;

		pfd[n] = (struct pollfd){ .fd = c->wake[0], .events = POLLIN };
		pc[n++] = NULL;
		if (now >= pause_until) {
			lidx = (int)n;
			pfd[n] = (struct pollfd){ .fd = c->lfd, .events = POLLIN };
			pc[n++] = NULL;
		} else {
			timeout = pause_until - now;
		}
		for (size_t i = 0; i < c->n_conns; i++) {
			struct tfs_ctl_conn *k = c->conns[i];
			if (k->busy)
				continue;
			int64_t left = k->last_ms + TFS_CTL_IDLE_MS - now;
			if (left < 0)
				left = 0;
			if (timeout < 0 || left < timeout)
				timeout = left;
			pfd[n] = (struct pollfd){ .fd = k->fd, .events = POLLIN };
			pc[n++] = k;
		}
		if (poll(pfd, n, (int)timeout) < 0) {
			if (errno != EINTR) {
				tfs_warn(c->log, "ctl: poll: %s", strerror(errno));
				poll(NULL, 0, 100);
			}
			continue;
		}
		if (pfd[0].revents) {
			char drain[64];
			while (read(c->wake[0], drain, sizeof(drain)) > 0)
				;
		}
		reap(c);
		if (lidx >= 0 && pfd[lidx].revents)
			accept_clients(c, &pause_until);
		for (nfds_t i = 0; i < n; i++) {
			if (pc[i] != NULL && pfd[i].revents && !pc[i]->closing)
				conn_readable(c, pc[i], c->rbuf, sizeof(c->rbuf));
		}
		now = (int64_t)tfs_mono_ms();
		for (size_t i = 0; i < c->n_conns; i++) {
			struct tfs_ctl_conn *k = c->conns[i];
			if (!k->busy && !k->closing && now - k->last_ms >= TFS_CTL_IDLE_MS) {
				tfs_debug(c->log, "ctl: uid %u: idle connection closed",
					  (unsigned)k->uid);
				k->closing = true;
			}
		}
		sweep(c);
	}
	/* Stopping: make the running workers' writes fail, join them. */
	for (size_t i = 0; i < c->n_conns; i++)
		if (c->conns[i]->busy)
			shutdown(c->conns[i]->fd, SHUT_RDWR);
	for (size_t i = 0; i < c->n_conns; i++) {
		struct tfs_ctl_conn *k = c->conns[i];
		if (k->busy)
			pthread_join(k->worker, NULL);
		conn_free(k);
	}
	c->n_conns = 0;
	return NULL;
}

static int ctl_open(struct tfs_ctl *c, const char *sock_path)
{
	char lock_path[TFS_CTL_SOCK_PATH_MAX + 8];
	struct stat st;
	int rc;

	snprintf(lock_path, sizeof(lock_path), "%s.lock", sock_path);
	c->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (c->lock_fd < 0) {
		rc = errno;
		tfs_err(c->log, "ctl: %s: %s", lock_path, strerror(rc));
		return rc;
	}
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno;
		if (rc == EWOULDBLOCK) {
			tfs_err(c->log,
				"ctl: another tierfs daemon serves this mountpoint (socket %s)",
				sock_path);
			return EADDRINUSE;
		}
		tfs_err(c->log, "ctl: flock %s: %s", lock_path, strerror(rc));
		return rc;
	}
	rc = tfs_unix_listen(sock_path, 0600, LISTEN_BACKLOG, c->log, "ctl", &st, &c->lfd);
	if (rc == EADDRINUSE)
		tfs_err(c->log, "ctl: another tierfs daemon serves this mountpoint (socket %s)",
			sock_path);
	if (rc)
		return rc;
	c->sock_dev = st.st_dev;
	c->sock_ino = st.st_ino;
	if (pipe2(c->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
		rc = errno;
		unlink(sock_path);
		tfs_err(c->log, "ctl: pipe: %s", strerror(rc));
		return rc;
	}
	return 0;
}

static void ctl_free(struct tfs_ctl *c)
{
	if (c->lfd >= 0)
		close(c->lfd);
	if (c->wake[0] >= 0)
		close(c->wake[0]);
	if (c->wake[1] >= 0)
		close(c->wake[1]);
	if (c->lock_fd >= 0)
		close(c->lock_fd); /* releases the lock */
	for (size_t i = 0; i < c->n_handlers; i++)
		free(c->handlers[i].cmd);
	free(c->handlers);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int tfs_ctl_start(const char *sock_path, const struct tfs_log *log, struct tfs_ctl **out)
{
	size_t plen = sock_path ? strlen(sock_path) : 0;
	sigset_t all, old;
	int rc;

	*out = NULL;
	if (plen == 0)
		return EINVAL;
	if (plen >= TFS_CTL_SOCK_PATH_MAX) {
		tfs_err(log, "ctl: socket path too long: %s", sock_path);
		return ENAMETOOLONG;
	}
	struct tfs_ctl *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return ENOMEM;
	c->log = log;
	c->lfd = c->lock_fd = c->wake[0] = c->wake[1] = -1;
	c->uid = geteuid();
	c->busy_warned_ms = INT64_MIN / 2;
	memcpy(c->path, sock_path, plen + 1);
	atomic_init(&c->stopping, false);
	rc = pthread_mutex_init(&c->lock, NULL);
	if (rc) {
		free(c);
		return rc;
	}
	rc = ctl_open(c, sock_path);
	if (rc) {
		ctl_free(c);
		return rc;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&c->thread, NULL, server_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		tfs_err(log, "ctl: cannot start the server thread: %s", strerror(rc));
		unlink(sock_path);
		ctl_free(c);
		return rc;
	}
	tfs_info(log, "ctl: listening on %s", sock_path);
	*out = c;
	return 0;
}

int tfs_ctl_register(struct tfs_ctl *c, const char *cmd, tfs_ctl_handler fn, void *ctx)
{
	int rc = 0;

	if (cmd == NULL || cmd[0] == '\0' || fn == NULL)
		return EINVAL;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_handlers; i++) {
		if (strcmp(c->handlers[i].cmd, cmd) == 0) {
			rc = EEXIST;
			goto out;
		}
	}
	struct handler *nh = realloc(c->handlers, (c->n_handlers + 1) * sizeof(*nh));
	if (nh == NULL) {
		rc = ENOMEM;
		goto out;
	}
	c->handlers = nh;
	char *name = strdup(cmd);
	if (name == NULL) {
		rc = ENOMEM;
		goto out;
	}
	nh[c->n_handlers++] = (struct handler){ .cmd = name, .fn = fn, .ctx = ctx };
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void tfs_ctl_stop(struct tfs_ctl *c)
{
	struct stat st;

	if (c == NULL)
		return;
	atomic_store(&c->stopping, true);
	wake(c);
	pthread_join(c->thread, NULL);
	/* Remove the socket only if it is still ours (not replaced by hand). */
	if (lstat(c->path, &st) == 0 && st.st_dev == c->sock_dev && st.st_ino == c->sock_ino)
		unlink(c->path);
	tfs_info(c->log, "ctl: stopped (%s)", c->path);
	ctl_free(c);
}
