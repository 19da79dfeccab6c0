/* ctl.h - the daemon's control socket: a unix-domain stream server that
 * answers newline-delimited JSON commands, and the client the CLI uses.
 *
 * Protocol (one connection may carry any number of requests, one at a time):
 *
 *   request   one JSON object on one line:  {"cmd":"stats", ...arguments}
 *   progress  zero or more lines before the reply, for long commands:
 *             {"progress":{...}}
 *   reply     exactly one line per request:
 *             {"ok":true,"result":{...}}
 *             {"ok":false,"errno":N,"error":"message"}
 *
 * N is a Linux errno value.  A request line longer than
 * TFS_CTL_MAX_REQUEST bytes is answered with EMSGSIZE and the connection is
 * closed (there is no way to find the next request).  A line that is not a
 * JSON object with a "cmd" string is answered with EINVAL and the
 * connection stays usable; so is an unknown command ("unknown command
 * 'x'").  Blank lines are ignored.  A last request without a newline,
 * followed by the end of the stream, is still answered.
 *
 * Who may connect: the socket file is mode 0600 inside a 0700 directory,
 * and each peer's credentials (SO_PEERCRED) are checked: only the daemon's
 * own uid and root are served; others get one EACCES reply and are
 * disconnected.  At most TFS_CTL_MAX_CLIENTS connections are open at once;
 * further ones get an EBUSY reply and are disconnected.  A connection that
 * sends nothing for TFS_CTL_IDLE_MS while it has no request running is
 * closed.
 * A connection buffers at most one request line (TFS_CTL_MAX_REQUEST plus
 * one 64 KiB read), so the server's memory is bounded by the client limit.
 *
 * Threading model.  One server thread owns the listening socket and every
 * idle connection; it uses poll() and non-blocking sockets only, so it
 * never waits for a client.  Each complete request line is handed to a
 * short-lived worker thread that parses it, calls the handler and writes
 * the progress lines and the reply itself (a blocking write bounded by
 * TFS_CTL_SEND_TIMEOUT_MS).  While a request runs, the worker owns its
 * connection and the server thread does not poll it; the server thread
 * joins the worker when it reports completion, then reads the next
 * request.  Hence:
 *   - a slow or long handler (`tierfs warmup`) or a client that reads
 *     slowly delays only its own connection, never the others;
 *   - handlers run concurrently with each other (at most one per
 *     connection, so at most TFS_CTL_MAX_CLIENTS at once) and with the
 *     rest of the daemon: a handler must be thread safe;
 *   - a worker costs one thread creation per request, which is nothing
 *     next to what a control command does.
 * The server and worker threads block all signals, so signals are
 * delivered to the daemon's other threads.
 *
 * Not supported (yet): cancelling a running request from the client other
 * than by disconnecting (the handler sees it when its next
 * tfs_ctl_send_progress() fails), several requests in parallel on one
 * connection (they are queued), unregistering a handler.
 */
#ifndef TFS_CTL_H
#define TFS_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct json_object;
struct tfs_dbuf;
struct tfs_log;

/* Longest request line accepted by the server, without the newline. */
#define TFS_CTL_MAX_REQUEST (1u << 20)
/* Longest reply or progress line accepted by the client. */
#define TFS_CTL_MAX_REPLY (16u << 20)
/* Connections served at once. */
#define TFS_CTL_MAX_CLIENTS 32
/* An idle connection (no request running) is closed after this. */
#define TFS_CTL_IDLE_MS (5 * 60 * 1000)
/* A worker gives up writing to a client that does not read for this long. */
#define TFS_CTL_SEND_TIMEOUT_MS (10 * 1000)
/* Default client timeout, see tfs_ctl_call(). */
#define TFS_CTL_TIMEOUT_MS (30 * 1000)
/* Size of sockaddr_un.sun_path: a buffer of this size fits every socket
 * path tfs_ctl_socket_path() produces. */
#define TFS_CTL_SOCK_PATH_MAX 108

/* ---- the socket's location ---- */

/* The canonical absolute form of a mountpoint, the string both the daemon
 * and the CLI hash.  It must not depend on whether a FUSE filesystem is
 * mounted there (the daemon computes it before mounting; the CLI while the
 * mount is live, or dead: stat() on a dead FUSE mount fails with
 * ENOTCONN), so the mountpoint itself is never stat()ed or resolved:
 *
 *   1. A relative path is made absolute with getcwd().  Trailing slashes
 *      and trailing "." components are dropped.  If the last component is
 *      "..", the whole path is first normalised lexically (see below).
 *   2. The parent directory is resolved with realpath(3).  If that fails
 *      (the parent does not exist, or itself lies in a dead FUSE mount...)
 *      it is normalised lexically instead: "//" and "." removed, ".."
 *      removes the previous component, without looking at the filesystem.
 *   3. The last component is appended.  If it is a symbolic link
 *      (readlink(2), which does not enter a mounted filesystem's root),
 *      its target replaces the path and the steps are repeated (at most
 *      40 times, then ELOOP).  A last component that does not exist is
 *      fine.
 *
 * So "/mnt/x", "/mnt/x/", "/mnt/./x", "/mnt/y/../x", "L/x" with L a link
 * to /mnt, and a link to /mnt/x all give "/mnt/x".
 *
 * Returns 0 and writes a NUL-terminated path to out[0..len); EINVAL for an
 * empty or NULL mountpoint; ENAMETOOLONG when a path exceeds PATH_MAX;
 * ERANGE when `len` is too small (PATH_MAX always suffices); ELOOP;
 * ENOMEM; the errno of getcwd() for a relative path.  Thread safe. */
int tfs_ctl_canonical_path(const char *mountpoint, char *out, size_t len);

/* The control socket of the daemon serving `mountpoint`:
 *
 *   RUNDIR/HHHHHHHHHHHHHHHH.sock
 *
 * where H... are the first 16 hex digits of the SHA-256 of
 * tfs_ctl_canonical_path(mountpoint), and RUNDIR is "/run/tierfs" when the
 * effective uid is 0, else "$XDG_RUNTIME_DIR/tierfs" when that variable
 * holds an absolute path, else "/tmp/tierfs-UID".  RUNDIR is created with
 * mode 0700 if missing (by the CLI too: it is harmless); an existing RUNDIR
 * must be a directory (not a symlink) owned by the effective uid that
 * neither group nor others may write to, below directories that only
 * root or the effective uid can change (tfs_dir_secure(), lib/dirs.h), and
 * is chmod'ed to 0700 if group or others may read it.
 *
 * Returns 0 and writes the path to out[0..len); the errors of
 * tfs_ctl_canonical_path(); ENAMETOOLONG when the socket path does not
 * fit in TFS_CTL_SOCK_PATH_MAX (a very long $XDG_RUNTIME_DIR); ERANGE when
 * `len` is too small (TFS_CTL_SOCK_PATH_MAX suffices); ENOTDIR or EPERM
 * for an unsafe RUNDIR; the errno of mkdir(2) or chmod(2); EIO if the
 * hash fails.  Thread safe (reads the environment). */
int tfs_ctl_socket_path(const char *mountpoint, char *out, size_t len);

/* ---- the server ---- */

struct tfs_ctl;
/* One client connection, as seen by a running handler.  Valid only for the
 * duration of the handler call. */
struct tfs_ctl_conn;

/* A command handler, called on a worker thread (see above) with the
 * request object (read only, owned by the server; it includes "cmd").
 *
 * On success return 0 and set *resp to the result (any JSON value; the
 * reference is handed to the server; NULL stands for {}).  On failure
 * return a positive errno; *resp may then hold a JSON string with the
 * message for the client (handed over too; see tfs_ctl_fail()), else
 * strerror() is used.  `conn` allows progress lines. */
typedef int (*tfs_ctl_handler)(void *ctx, struct tfs_ctl_conn *conn, struct json_object *req,
			       struct json_object **resp);

/* Create the socket at `sock_path` and start the server thread.
 *
 * A lock file "<sock_path>.lock" (created 0600, never removed) is held
 * with flock() for the server's lifetime.  If another server holds it, or
 * an existing socket at `sock_path` accepts a connection, this fails with
 * EADDRINUSE ("another tierfs daemon serves this mountpoint").  A socket
 * file nobody listens on (ECONNREFUSED: a daemon that crashed) is replaced;
 * any other file at that path gives EEXIST.  The socket is bound, then
 * chmod'ed to 0600 before it listens (bind cannot create it with a mode,
 * and umask is process-wide; the 0700 directory covers the gap).
 *
 * `log` may be NULL and must outlive the server.  Returns 0 and sets *out;
 * EADDRINUSE; EEXIST; EINVAL (empty path); ENAMETOOLONG (longer than
 * TFS_CTL_SOCK_PATH_MAX - 1); ENOMEM; EAGAIN (thread); the errno of the
 * failing socket call.  Errors are logged.  On failure nothing is left
 * behind but the lock file. */
int tfs_ctl_start(const char *sock_path, const struct tfs_log *log, struct tfs_ctl **out);

/* Register `fn` for requests whose "cmd" is `cmd` (copied).  May be
 * called at any time, from any thread, including while requests are being
 * served (the table has its own mutex, held only to add or look up an
 * entry); a command cannot be unregistered.  `ctx` must stay valid until
 * tfs_ctl_stop() returns.  Returns 0; EEXIST when `cmd` is already
 * registered; EINVAL for an empty name; ENOMEM. */
int tfs_ctl_register(struct tfs_ctl *c, const char *cmd, tfs_ctl_handler fn, void *ctx);

/* Stop the server: running handlers are told to stop
 * (tfs_ctl_conn_cancelled() turns true and their writes fail), the server
 * joins them and every thread, closes every connection, and removes the
 * socket file if it is still the one it created.  Waits for running
 * handlers to return, so a long handler must check
 * tfs_ctl_conn_cancelled().  NULL is ignored.  Frees `c`. */
void tfs_ctl_stop(struct tfs_ctl *c);

/* For handlers: send {"progress": progress} to the client now, before the
 * reply.  `progress` is not consumed (the caller keeps its reference).
 * Returns 0; EPIPE when the client has gone, ETIMEDOUT when it did not
 * read for TFS_CTL_SEND_TIMEOUT_MS, ECANCELED when the server is stopping,
 * ENOMEM.  After a failure the connection is dead: the handler should stop
 * its work and return; its reply is discarded. */
int tfs_ctl_send_progress(struct tfs_ctl_conn *conn, struct json_object *progress);

/* For handlers: true once the server is stopping or a write to the client
 * failed; a long handler should poll it and return (any errno). */
bool tfs_ctl_conn_cancelled(const struct tfs_ctl_conn *conn);

/* For handlers: set *resp to a JSON string holding the formatted message
 * and return `err`, so a handler can end with
 *   return tfs_ctl_fail(resp, ENOENT, "no such file '%s'", path);
 * If the string cannot be allocated *resp is NULL (strerror is used). */
int tfs_ctl_fail(struct json_object **resp, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- unix listening sockets (the control socket, the metrics endpoint) ---- */

struct stat;

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

/* ---- the client ---- */

/* Called by tfs_ctl_call_ex() for each progress line with the value of
 * "progress" (borrowed: valid during the call).  Return 0 to continue or
 * a positive errno to abandon the call (the connection is closed, which
 * the handler sees as EPIPE). */
typedef int (*tfs_ctl_progress_fn)(void *ctx, struct json_object *progress);

/* Send `req` (not consumed; normally {"cmd":...}) to the server at
 * `sock_path` and wait for its reply.
 *
 * `timeout_ms` bounds each wait: to connect, to send, and for the next
 * byte from the daemon (an inactivity timeout, so a long command that
 * sends progress lines does not time out).  `progress` may be NULL
 * (progress lines are then skipped).
 *
 * Returns 0 and sets *result to the "result" value (a new reference: the
 * caller puts it).  On failure *result is NULL, a one-line message is
 * appended to `err` (may be NULL) and the return value is:
 *   ENOENT, ECONNREFUSED  no daemon listens: "no tierfs daemon serves this
 *                         mountpoint (socket PATH)"
 *   EACCES                the socket belongs to another user
 *   ETIMEDOUT             the daemon did not answer in time
 *   ECONNRESET            the daemon closed the connection without replying
 *   EPROTO                the reply is not valid protocol
 *   EMSGSIZE              a reply line exceeds TFS_CTL_MAX_REPLY
 *   the daemon's errno    with the daemon's message (EIO if its errno is
 *                         not a valid errno)
 *   the callback's errno, ENOMEM, or the errno of a socket call.
 * Thread safe; no state is kept between calls. */
int tfs_ctl_call_ex(const char *sock_path, struct json_object *req, int timeout_ms,
		    tfs_ctl_progress_fn progress, void *progress_ctx, struct json_object **result,
		    struct tfs_dbuf *err);

/* tfs_ctl_call_ex() with TFS_CTL_TIMEOUT_MS and no progress callback. */
int tfs_ctl_call(const char *sock_path, struct json_object *req, struct json_object **result,
		 struct tfs_dbuf *err);

#endif
