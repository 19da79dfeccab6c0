/* unix_listen.c - a listening unix stream socket that replaces a stale
 * socket file but never a live server's: the control socket and the
 * metrics endpoint use it. */
#include "config.h"

#include "unix_listen.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

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
