/* ctl.c - the control socket: socket location, the poll()-based server with
 * one worker thread per running request, and the client. */
#include "config.h"

#include "ctl.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <openssl/evp.h>
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
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dbuf.h"
#include "dirs.h"
#include "log.h"

_Static_assert(TFS_CTL_SOCK_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
	       "TFS_CTL_SOCK_PATH_MAX must be the size of sun_path");

#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
#define READ_CHUNK 65536
#define MAX_SYMLINKS 40
#define LISTEN_BACKLOG 16
#define MSG_MAX 1024

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Remove the first `n` bytes of `d` (n <= len). */
static void dbuf_drop_front(struct tfs_dbuf *d, size_t n)
{
	if (n == 0)
		return;
	memmove(d->buf, d->buf + n, d->len - n);
	d->len -= n;
	d->buf[d->len] = '\0';
}

static bool is_errno(int e)
{
	return e > 0 && e < 4096;
}

/* ---- the socket's location ---- */

/* Normalise the absolute path `abs` without looking at the filesystem:
 * "//" and "." are removed, ".." removes the previous component. */
static int lexical(const char *abs, char *out, size_t len)
{
	const char *p = abs;
	size_t o = 0;

	while (*p) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t n = (size_t)(p - s);
		if (n == 1 && s[0] == '.')
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		if (o + 1 + n >= len)
			return ENAMETOOLONG;
		out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	if (o == 0) {
		if (len < 2)
			return ENAMETOOLONG;
		out[o++] = '/';
	}
	out[o] = '\0';
	return 0;
}

/* out = dir + "/" + name, without doubling the slash of "/". */
static int join(const char *dir, const char *name, char *out, size_t len)
{
	int n = snprintf(out, len, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
	return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
}

int tfs_ctl_canonical_path(const char *mountpoint, char *out, size_t len)
{
	char path[PATH_MAX], parent[PATH_MAX], rparent[PATH_MAX], cand[PATH_MAX];
	char target[PATH_MAX];
	int rc;

	if (mountpoint == NULL || mountpoint[0] == '\0')
		return EINVAL;
	if (mountpoint[0] == '/') {
		if (strlen(mountpoint) >= sizeof(path))
			return ENAMETOOLONG;
		memcpy(path, mountpoint, strlen(mountpoint) + 1);
	} else {
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return errno == ERANGE ? ENAMETOOLONG : errno;
		rc = join(cwd, mountpoint, path, sizeof(path));
		if (rc)
			return rc;
	}

	for (int depth = 0;; depth++) {
		if (depth > MAX_SYMLINKS)
			return ELOOP;
		/* Drop trailing slashes and trailing "." components. */
		size_t n = strlen(path);
		for (;;) {
			while (n > 1 && path[n - 1] == '/')
				n--;
			if (n >= 2 && path[n - 1] == '.' && path[n - 2] == '/') {
				n--;
				continue;
			}
			break;
		}
		path[n] = '\0';
		char *slash = strrchr(path, '/');
		if (strcmp(slash + 1, "..") == 0) {
			rc = lexical(path, cand, sizeof(cand));
			if (rc)
				return rc;
			memcpy(path, cand, strlen(cand) + 1);
			slash = strrchr(path, '/');
		}
		const char *last = slash + 1;
		if (*last == '\0') {
			/* The root directory. */
			memcpy(cand, "/", 2);
			break;
		}
		if (slash == path) {
			memcpy(parent, "/", 2);
		} else {
			memcpy(parent, path, (size_t)(slash - path));
			parent[slash - path] = '\0';
		}
		if (realpath(parent, rparent) == NULL) {
			rc = errno;
			if (rc == ENOMEM || rc == ENAMETOOLONG || rc == ELOOP)
				return rc;
			rc = lexical(parent, rparent, sizeof(rparent));
			if (rc)
				return rc;
		}
		rc = join(rparent, last, cand, sizeof(cand));
		if (rc)
			return rc;
		ssize_t t = readlink(cand, target, sizeof(target));
		if (t < 0)
			break; /* not a link, missing, or unreadable: use it as is */
		if ((size_t)t >= sizeof(target))
			return ENAMETOOLONG;
		target[t] = '\0';
		if (target[0] == '/') {
			memcpy(path, target, (size_t)t + 1);
		} else {
			rc = join(rparent, target, path, sizeof(path));
			if (rc)
				return rc;
		}
	}
	if (strlen(cand) >= len)
		return ERANGE;
	memcpy(out, cand, strlen(cand) + 1);
	return 0;
}

/* Create `dir` 0700 or check that the existing one is safe to use
 * (lib/dirs.h), and make it 0700. */
static int ensure_dir(const char *dir)
{
	return tfs_dir_secure(dir, TFS_DIR_CREATE | TFS_DIR_PRIVATE, NULL);
}

static int runtime_dir(char *out, size_t len)
{
	uid_t uid = geteuid();
	int n;

	if (uid == 0) {
		n = snprintf(out, len, "/run/tierfs");
	} else {
		const char *x = secure_getenv("XDG_RUNTIME_DIR");
		if (x != NULL && x[0] == '/') {
			size_t xl = strlen(x);
			while (xl > 1 && x[xl - 1] == '/')
				xl--;
			if (xl > (size_t)INT_MAX - 16)
				return ENAMETOOLONG;
			n = snprintf(out, len, "%.*s/tierfs", (int)xl, x);
		} else {
			n = snprintf(out, len, "/tmp/tierfs-%u", (unsigned)uid);
		}
	}
	if (n < 0 || (size_t)n >= len)
		return ENAMETOOLONG;
	return 0;
}

int tfs_ctl_socket_path(const char *mountpoint, char *out, size_t len)
{
	char canon[PATH_MAX], dir[PATH_MAX], hex[17];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int rc;

	rc = tfs_ctl_canonical_path(mountpoint, canon, sizeof(canon));
	if (rc)
		return rc;
	if (!EVP_Digest(canon, strlen(canon), md, &mdlen, EVP_sha256(), NULL) || mdlen < 8)
		return EIO;
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	rc = runtime_dir(dir, sizeof(dir));
	if (rc)
		return rc;
	/* "/" + 16 hex digits + ".sock" */
	size_t n = strlen(dir) + 1 + 16 + 5;
	if (n >= TFS_CTL_SOCK_PATH_MAX)
		return ENAMETOOLONG;
	if (n >= len)
		return ERANGE;
	rc = ensure_dir(dir);
	if (rc)
		return rc;
	snprintf(out, len, "%s/%s.sock", dir, hex);
	return 0;
}

/* ---- the server ---- */

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
	char rbuf[READ_CHUNK];
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
	char buf[MSG_MAX + 128];
	size_t n;

	if (o == NULL)
		return;
	const char *s = json_object_to_json_string_length(o, JSON_FLAGS, &n);
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
	int64_t deadline = now_ms() + TFS_CTL_SEND_TIMEOUT_MS;
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
			deadline = now_ms() + TFS_CTL_SEND_TIMEOUT_MS;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int64_t left = deadline - now_ms();
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
	const char *s = json_object_to_json_string_length(o, JSON_FLAGS, &n);

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
	char msg[MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	*resp = json_object_new_string(msg);
	return err;
}

/* Parse one line into a JSON object.  EINVAL with a message for anything
 * else; ENOMEM. */
static int parse_line(const char *line, size_t len, struct json_object **out, char *msg,
		      size_t msglen)
{
	*out = NULL;
	if (memchr(line, '\0', len) != NULL) {
		snprintf(msg, msglen, "malformed JSON: NUL byte");
		return EINVAL;
	}
	if (len > INT_MAX) {
		snprintf(msg, msglen, "line too long");
		return EINVAL;
	}
	struct json_tokener *tok = json_tokener_new();
	if (tok == NULL) {
		snprintf(msg, msglen, "out of memory");
		return ENOMEM;
	}
	struct json_object *o = json_tokener_parse_ex(tok, line, (int)len);
	enum json_tokener_error je = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (o == NULL && je != json_tokener_success) {
		snprintf(msg, msglen, "malformed JSON: %s",
			 je == json_tokener_continue ? "incomplete" : json_tokener_error_desc(je));
		return EINVAL;
	}
	for (size_t i = end; i < len; i++) {
		if (!isspace((unsigned char)line[i])) {
			json_object_put(o);
			snprintf(msg, msglen, "malformed JSON: trailing characters");
			return EINVAL;
		}
	}
	if (!json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		snprintf(msg, msglen, "not a JSON object");
		return EINVAL;
	}
	*out = o;
	return 0;
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
	char msg[MSG_MAX] = "";
	char perr[256], ebuf[128];
	int rc;

	rc = parse_line(k->in.buf, k->line_len, &req, perr, sizeof(perr));
	if (rc)
		snprintf(msg, sizeof(msg), "%s%s", rc == EINVAL ? "malformed request: " : "", perr);
	if (rc == 0) {
		struct json_object *v;
		if (!json_object_object_get_ex(req, "cmd", &v) ||
		    !json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0) {
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
			if (rc != 0 && !is_errno(rc)) {
				tfs_err(c->log, "ctl: handler of '%s' returned %d, not an errno", cmd,
					rc);
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
		static const char oom[] = "{\"ok\":false,\"errno\":12,\"error\":\"out of memory\"}\n";
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

static bool blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isspace((unsigned char)s[i]))
			return false;
	return true;
}

/* Start the next request of an idle connection, if complete. */
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
		if (blank(k->in.buf, line_len)) {
			dbuf_drop_front(&k->in, consume);
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
	k->last_ms = now_ms();
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
				*pause_until = now_ms() + 200;
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
			snprintf(msg, sizeof(msg), "permission denied: this daemon serves uid %u and root",
				 (unsigned)c->uid);
			send_error_nowait(fd, EACCES, msg);
			close(fd);
			continue;
		}
		if (c->n_conns == TFS_CTL_MAX_CLIENTS) {
			/* At most one warning per 10 s: a busy client must not
			 * flood the log. */
			int64_t now = now_ms();
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
		tfs_dbuf_init(&k->in, TFS_CTL_MAX_REQUEST + READ_CHUNK + 1);
		k->last_ms = now_ms();
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
		dbuf_drop_front(&k->in, k->consume);
		k->last_ms = now_ms();
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
		int64_t now = now_ms();
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
		now = now_ms();
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

/* Is something serving `path`?  0 when nothing is there (a stale socket is
 * removed), EADDRINUSE when a server accepts, EEXIST for a non-socket. */
static int probe_existing(const char *path, const struct tfs_log *log, const char *who)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int rc;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : errno;
	if (!S_ISSOCK(st.st_mode)) {
		tfs_err(log, "%s: %s exists and is not a socket", who, path);
		return EEXIST;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errno;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		rc = EADDRINUSE;
	else
		rc = errno;
	close(fd);
	if (rc == EAGAIN || rc == EINPROGRESS)
		rc = EADDRINUSE; /* a full backlog: alive */
	if (rc == EADDRINUSE)
		return EADDRINUSE;
	if (rc == ECONNREFUSED) {
		tfs_info(log, "%s: replacing the stale socket %s", who, path);
		if (unlink(path) != 0 && errno != ENOENT)
			return errno;
		return 0;
	}
	return rc == ENOENT ? 0 : rc;
}

int tfs_unix_listen(const char *path, mode_t mode, int backlog, const struct tfs_log *log,
		    const char *who, struct stat *st, int *fdp)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t plen = strlen(path);
	int fd, rc;

	if (plen == 0 || plen >= sizeof(sa.sun_path)) {
		tfs_err(log, "%s: socket path too long: %s", who, path);
		return ENAMETOOLONG;
	}
	rc = probe_existing(path, log, who);
	if (rc)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = errno;
		tfs_err(log, "%s: %s: %s", who, path, strerror(rc));
		return rc;
	}
	memcpy(sa.sun_path, path, plen + 1);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = errno;
		close(fd);
		tfs_err(log, "%s: %s: %s", who, path, strerror(rc));
		return rc;
	}
	if (chmod(path, mode) != 0 || lstat(path, st) != 0 || listen(fd, backlog) != 0) {
		rc = errno;
		unlink(path);
		close(fd);
		tfs_err(log, "%s: %s: %s", who, path, strerror(rc));
		return rc;
	}
	*fdp = fd;
	return 0;
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

/* ---- the client ---- */

static void errmsg(struct tfs_dbuf *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void errmsg(struct tfs_dbuf *err, const char *fmt, ...)
{
	char msg[MSG_MAX + 256];
	va_list ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tfs_dbuf_adds(err, msg);
}

static int client_send(int fd, const char *buf, size_t len, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;

	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			deadline = now_ms() + timeout_ms;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return ETIMEDOUT;
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
				return errno;
			continue;
		}
		return n < 0 ? errno : EIO;
	}
	return 0;
}

/* Handle one line from the server.  Returns -1 to read on (a progress
 * line), 0 for a successful reply, or an errno. */
static int client_line(const char *line, size_t len, tfs_ctl_progress_fn progress, void *pctx,
		       struct json_object **result, struct tfs_dbuf *err)
{
	struct json_object *o, *v, *e;
	char msg[MSG_MAX], ebuf[128];
	int rc;

	if (blank(line, len))
		return -1;
	if (parse_line(line, len, &o, msg, sizeof(msg)) != 0) {
		errmsg(err, "malformed reply from the daemon: %s", msg);
		return EPROTO;
	}
	if (json_object_object_get_ex(o, "ok", &v)) {
		if (!json_object_is_type(v, json_type_boolean)) {
			rc = EPROTO;
			errmsg(err, "malformed reply from the daemon: \"ok\" is not a boolean");
		} else if (json_object_get_boolean(v)) {
			if (json_object_object_get_ex(o, "result", &v))
				*result = json_object_get(v);
			else
				*result = json_object_new_object();
			rc = *result != NULL ? 0 : ENOMEM;
			if (rc)
				errmsg(err, "out of memory");
		} else {
			rc = EIO;
			if (json_object_object_get_ex(o, "errno", &e) &&
			    json_object_is_type(e, json_type_int) &&
			    is_errno((int)json_object_get_int64(e)))
				rc = (int)json_object_get_int64(e);
			if (json_object_object_get_ex(o, "error", &e) &&
			    json_object_is_type(e, json_type_string))
				errmsg(err, "%s", json_object_get_string(e));
			else
				errmsg(err, "%s", strerror_r(rc, ebuf, sizeof(ebuf)));
		}
	} else if (json_object_object_get_ex(o, "progress", &v)) {
		rc = progress != NULL ? progress(pctx, v) : 0;
		if (rc != 0) {
			if (!is_errno(rc))
				rc = ECANCELED;
			errmsg(err, "cancelled (%s)", strerror_r(rc, ebuf, sizeof(ebuf)));
		} else {
			rc = -1;
		}
	} else {
		rc = EPROTO;
		errmsg(err, "malformed reply from the daemon: neither \"ok\" nor \"progress\"");
	}
	json_object_put(o);
	return rc;
}

static int client_connect(const char *sock_path, int timeout_ms, int *fdp, struct tfs_dbuf *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	int rc;

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = errno;
		errmsg(err, "socket: %s", strerror(rc));
		return rc;
	}
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	/* A blocking connect to a full backlog waits up to SO_SNDTIMEO. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = errno;
		close(fd);
		switch (rc) {
		case ENOENT:
		case ECONNREFUSED:
			errmsg(err, "no tierfs daemon serves this mountpoint (socket %s)", sock_path);
			break;
		case EACCES:
		case EPERM:
			errmsg(err, "permission denied on %s (is the daemon run by another user?)",
			       sock_path);
			rc = EACCES;
			break;
		case EAGAIN:
		case EINPROGRESS:
		case ETIMEDOUT:
			errmsg(err, "the daemon did not accept the connection within %d s (socket %s)",
			       (timeout_ms + 999) / 1000, sock_path);
			rc = ETIMEDOUT;
			break;
		default:
			errmsg(err, "cannot connect to %s: %s", sock_path, strerror(rc));
			break;
		}
		return rc;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		rc = errno;
		close(fd);
		errmsg(err, "fcntl: %s", strerror(rc));
		return rc;
	}
	*fdp = fd;
	return 0;
}

int tfs_ctl_call_ex(const char *sock_path, struct json_object *req, int timeout_ms,
		    tfs_ctl_progress_fn progress, void *progress_ctx, struct json_object **result,
		    struct tfs_dbuf *err)
{
	struct tfs_dbuf in;
	char tmp[READ_CHUNK];
	size_t n;
	int fd = -1, rc, send_rc;

	*result = NULL;
	if (sock_path == NULL || sock_path[0] == '\0' || req == NULL || timeout_ms <= 0)
		return EINVAL;
	if (strlen(sock_path) >= TFS_CTL_SOCK_PATH_MAX) {
		errmsg(err, "socket path too long: %s", sock_path);
		return ENAMETOOLONG;
	}
	const char *s = json_object_to_json_string_length(req, JSON_FLAGS, &n);
	if (s == NULL) {
		errmsg(err, "out of memory");
		return ENOMEM;
	}
	rc = client_connect(sock_path, timeout_ms, &fd, err);
	if (rc)
		return rc;

	send_rc = client_send(fd, s, n, timeout_ms);
	if (send_rc == 0)
		send_rc = client_send(fd, "\n", 1, timeout_ms);
	if (send_rc == ETIMEDOUT) {
		close(fd);
		errmsg(err, "the daemon did not take the request within %d s (socket %s)",
		       (timeout_ms + 999) / 1000, sock_path);
		return ETIMEDOUT;
	}
	/* After EPIPE or ECONNRESET the daemon may still have explained
	 * why it hung up (a request too large): read on. */

	tfs_dbuf_init(&in, TFS_CTL_MAX_REPLY + sizeof(tmp) + 1);
	int64_t deadline = now_ms() + timeout_ms;
	for (;;) {
		char *nl = in.len ? memchr(in.buf, '\n', in.len) : NULL;
		if (nl != NULL) {
			size_t len = (size_t)(nl - in.buf);
			rc = client_line(in.buf, len, progress, progress_ctx, result, err);
			if (rc >= 0)
				break;
			dbuf_drop_front(&in, len + 1);
			continue;
		}
		if (in.len > TFS_CTL_MAX_REPLY) {
			rc = EMSGSIZE;
			errmsg(err, "reply from the daemon larger than %u bytes", TFS_CTL_MAX_REPLY);
			break;
		}
		int64_t left = deadline - now_ms();
		if (left <= 0) {
			rc = ETIMEDOUT;
			errmsg(err, "no reply from the daemon within %d s (socket %s)",
			       (timeout_ms + 999) / 1000, sock_path);
			break;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			rc = errno;
			errmsg(err, "poll: %s", strerror(rc));
			break;
		}
		ssize_t got = recv(fd, tmp, sizeof(tmp), 0);
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			continue;
		if (got <= 0) {
			rc = got < 0 ? errno : 0;
			if (send_rc)
				rc = send_rc;
			errmsg(err, "the daemon closed the connection without replying%s%s%s",
			       rc ? " (" : "", rc ? strerror(rc) : "", rc ? ")" : "");
			rc = ECONNRESET;
			break;
		}
		if (tfs_dbuf_add(&in, tmp, (size_t)got) != 0) {
			rc = ENOMEM;
			errmsg(err, "out of memory");
			break;
		}
		deadline = now_ms() + timeout_ms;
	}
	tfs_dbuf_free(&in);
	close(fd);
	if (rc != 0) {
		json_object_put(*result);
		*result = NULL;
	}
	return rc;
}

int tfs_ctl_call(const char *sock_path, struct json_object *req, struct json_object **result,
		 struct tfs_dbuf *err)
{
	return tfs_ctl_call_ex(sock_path, req, TFS_CTL_TIMEOUT_MS, NULL, NULL, result, err);
}
