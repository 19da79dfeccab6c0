/* ctl_client.c - the control socket's client: one request, its progress
 * lines and its reply, for the CLI and the FlexVolume driver. */
#include "config.h"

#include "ctl_client.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl_path.h"
#include "ctl_proto.h"
#include "dbuf.h"

static void errmsg(struct tfs_dbuf *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void errmsg(struct tfs_dbuf *err, const char *fmt, ...)
{
	char msg[CTL_MSG_MAX + 256];
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
	int64_t deadline = (int64_t)tfs_mono_ms() + timeout_ms;

	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			deadline = (int64_t)tfs_mono_ms() + timeout_ms;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int64_t left = deadline - (int64_t)tfs_mono_ms();
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
	char msg[CTL_MSG_MAX], ebuf[128];
	int rc;

	if (ctl_blank(line, len))
		return -1;
	if (ctl_parse_line(line, len, &o, msg, sizeof(msg)) != 0) {
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
			    ctl_is_errno((int)json_object_get_int64(e)))
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
			if (!ctl_is_errno(rc))
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
			errmsg(err, "no tierfs daemon serves this mountpoint (socket %s)",
			       sock_path);
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
			errmsg(err,
			       "the daemon did not accept the connection within %d s (socket %s)",
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
	char tmp[CTL_READ_CHUNK];
	size_t n;
	int fd = -1, rc, send_rc;

	*result = NULL;
	if (sock_path == NULL || sock_path[0] == '\0' || req == NULL || timeout_ms <= 0)
		return EINVAL;
	if (strlen(sock_path) >= TFS_CTL_SOCK_PATH_MAX) {
		errmsg(err, "socket path too long: %s", sock_path);
		return ENAMETOOLONG;
	}
	const char *s = json_object_to_json_string_length(req, CTL_JSON_FLAGS, &n);
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
	int64_t deadline = (int64_t)tfs_mono_ms() + timeout_ms;
	for (;;) {
		char *nl = in.len ? memchr(in.buf, '\n', in.len) : NULL;
		if (nl != NULL) {
			size_t len = (size_t)(nl - in.buf);
			rc = client_line(in.buf, len, progress, progress_ctx, result, err);
			if (rc >= 0)
				break;
			ctl_drop_front(&in, len + 1);
			continue;
		}
		if (in.len > TFS_CTL_MAX_REPLY) {
			rc = EMSGSIZE;
			errmsg(err, "reply from the daemon larger than %u bytes",
			       TFS_CTL_MAX_REPLY);
			break;
		}
		int64_t left = deadline - (int64_t)tfs_mono_ms();
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
		deadline = (int64_t)tfs_mono_ms() + timeout_ms;
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
