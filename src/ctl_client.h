/* ctl_client.h - the client of a daemon's control socket (the CLI, the
 * FlexVolume driver): send one request, follow its progress lines, get its
 * reply.  The protocol is in ctl_proto.h; tfs_ctl_socket_path()
 * (ctl_path.h) finds the socket of a mountpoint. */
#ifndef TFS_CTL_CLIENT_H
#define TFS_CTL_CLIENT_H

struct json_object;
struct tfs_dbuf;

/* Longest reply or progress line accepted by the client. */
#define TFS_CTL_MAX_REPLY (16u << 20)
/* Default client timeout, see tfs_ctl_call(). */
#define TFS_CTL_TIMEOUT_MS (30 * 1000)

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
