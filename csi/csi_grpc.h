/* csi_grpc.h - a gRPC server of unary methods on a unix socket, on gRPC's
 * C core (libgrpc): it knows method paths and bytes, nothing of CSI.
 *
 * One thread runs csi_server_run(): it accepts calls, reads each request
 * and answers the methods marked `inline` at once (identity calls, Probe:
 * they must answer while a volume operation runs).  The other methods go,
 * in arrival order, to one worker thread, so at most one of them runs at a
 * time.  A method the table does not name gets UNIMPLEMENTED.
 *
 * Requests are bounded by CSI_GRPC_MAX_REQUEST bytes (gRPC refuses larger
 * ones with RESOURCE_EXHAUSTED before a handler sees them).
 */
#ifndef TFS_CSI_GRPC_H
#define TFS_CSI_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define CSI_GRPC_MAX_REQUEST (4 << 20)
#define CSI_GRPC_MAX_DETAILS 2048 /* bytes of a status message */

/* gRPC status codes (grpc/status.h) that the handlers return. */
enum csi_code {
	CSI_OK = 0,
	CSI_CANCELLED = 1,
	CSI_INVALID_ARGUMENT = 3,
	CSI_NOT_FOUND = 5,
	CSI_ALREADY_EXISTS = 6,
	CSI_RESOURCE_EXHAUSTED = 8,
	CSI_FAILED_PRECONDITION = 9,
	CSI_UNIMPLEMENTED = 12,
	CSI_INTERNAL = 13,
	CSI_UNAVAILABLE = 14,
};

/* What a handler answers: the reply's bytes (malloc'd, freed by the server;
 * NULL with len 0 is an empty message), or a non-OK code with a message. */
struct csi_reply {
	uint8_t *data;
	size_t len;
	enum csi_code code;
	char msg[CSI_GRPC_MAX_DETAILS];
};

/* A handler: `req` is the request's `len` bytes (valid for the call).  It
 * fills *out, whose code is CSI_OK and msg empty on entry.  It runs on the
 * server thread (inline methods) or the worker thread. */
typedef void (*csi_handler_fn)(void *ctx, const uint8_t *req, size_t len, struct csi_reply *out);

struct csi_method {
	const char *path; /* "/csi.v1.Node/NodeStageVolume" */
	csi_handler_fn fn;
	bool inline_call; /* answered by the server thread, never queued */
};

struct csi_server;

/* Listen on the unix socket `path` (absolute; a stale socket file there is
 * replaced, any other file is EEXIST; the socket is made mode 0600) and
 * serve `methods` (n of them, borrowed until csi_server_free()) with `ctx`.
 * Returns 0 and *out; EEXIST, ENAMETOOLONG, EADDRINUSE (another server
 * answers there), EIO (gRPC would not bind, logged), ENOMEM. */
int csi_server_start(const char *path, const struct csi_method *methods, size_t n, void *ctx,
		     const struct tfs_log *log, struct csi_server **out);

/* Serve until csi_server_stop().  Then: no new call is taken, the
 * volume operation in progress finishes, queued ones get UNAVAILABLE.
 * Returns 0. */
int csi_server_run(struct csi_server *s);

/* Make csi_server_run() return.  Thread safe; call it from any thread
 * (not from a signal handler). */
void csi_server_stop(struct csi_server *s);

/* Release everything and remove the socket file.  After csi_server_run()
 * returned, or instead of it. */
void csi_server_free(struct csi_server *s);

#endif
