/* unix_listen.h - a listening unix stream socket (the control socket, the
 * metrics endpoint). */
#ifndef TFS_UNIX_LISTEN_H
#define TFS_UNIX_LISTEN_H

#include <sys/types.h>

struct stat;
struct tfs_log;

/* Listen on a unix stream socket at `path` (non-blocking, close-on-exec),
 * the socket file chmod'ed to `mode` before it listens.  A socket file
 * nobody listens on (ECONNREFUSED: a daemon that crashed) is replaced
 * ("<who>: replacing the stale socket PATH" is logged); if a server
 * accepts on it the result is EADDRINUSE (not logged: the caller knows
 * what to say); any other kind of file gives EEXIST.  *st gets the
 * socket file's lstat(), to recognise it when removing it.  Returns 0 and
 * *fd, ENAMETOOLONG (does not fit sun_path), or the errno of the failing
 * call; errors but EADDRINUSE are logged with `who`.  Thread safe. */
int tfs_unix_listen(const char *path, mode_t mode, int backlog, const struct tfs_log *log,
		    const char *who, struct stat *st, int *fd);

#endif
