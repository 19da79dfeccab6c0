/* ctl.h - the server of the daemon's control socket: a unix-domain stream
 * server that answers newline-delimited JSON commands (the protocol is
 * described in ctl_proto.h) with the handlers registered here.  The client
 * is ctl_client.h, the socket's location ctl_path.h.
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
 * Not supported: cancelling a running request from the client other
 * than by disconnecting (the handler sees it when its next
 * tfs_ctl_send_progress() fails), several requests in parallel on one
 * connection (they are queued), unregistering a handler.
 */
#ifndef TFS_CTL_H
#define TFS_CTL_H

#include <stdbool.h>
#include <stddef.h>

#include "ctl_path.h"

struct json_object;
struct tfs_log;

/* Longest request line accepted by the server, without the newline. */
#define TFS_CTL_MAX_REQUEST (1u << 20)
/* Connections served at once. */
#define TFS_CTL_MAX_CLIENTS 32
/* An idle connection (no request running) is closed after this. */
#define TFS_CTL_IDLE_MS (5 * 60 * 1000)
/* A worker gives up writing to a client that does not read for this long. */
#define TFS_CTL_SEND_TIMEOUT_MS (10 * 1000)

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

#endif
