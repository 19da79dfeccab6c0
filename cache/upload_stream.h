/* upload_stream.h - uploading a file while it is still being written.
 *
 * A checkpoint is written once, from its first byte to its last.  Waiting
 * for close() before uploading it makes the time until it is in the bucket
 * the write time plus the upload time; a stream overlaps the two.  Once a
 * file written only by appending since it was created or truncated to
 * zero passes the backend's multipart threshold, write-back starts a
 * stream: a multipart upload whose full parts are sent from the staged
 * copy as the writer appends them.  At the last close the stream is handed
 * to the file's journal record (tfs_upload_stream_finish() gives the upload id
 * and the parts' ETags) and the uploader only sends what is left (the last
 * part) and completes it.  Anything but an append (a write elsewhere, a
 * truncate, another writer, a rename, an unlink) cancels the stream: its
 * upload is aborted in the background and the file is uploaded whole after
 * close, as without streaming.
 *
 * Crashes: every stream's upload id is registered (the `reg` callback,
 * which write-back backs with an LMDB table) as soon as the upload exists
 * and unregistered once it is aborted.  The next mount aborts every
 * registered upload that no journal record took over, so a kill -9 during
 * a write orphans no upload.
 *
 * Threads: each stream runs `parallel` threads of its own, which create
 * the upload and then send each full part once the file has grown past it.
 * A stream's functions may be called from any thread; none blocks for long
 * except tfs_upload_stream_finish() (which waits for the parts in flight) and
 * tfs_upload_streams_destroy().  The group's lock protects the count of live
 * streams; each stream's own lock protects its fields.
 */
#ifndef TFS_UPLOAD_STREAM_H
#define TFS_UPLOAD_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "log.h"

/* Register (add) or unregister (!add) the open upload `upload_id` of `key`
 * durably.  Returns 0 or an errno (logged by the callee). */
typedef int (*tfs_upload_stream_reg_fn)(void *ctx, const char *key, const char *upload_id,
					bool add);

struct tfs_upload_streams_config {
	struct tfs_backend *be;    /* borrowed */
	const struct tfs_log *log; /* borrowed */
	uint64_t threshold;        /* stream files once they reach this size */
	uint64_t part_size;        /* the backend's multipart part size */
	unsigned parallel;         /* part uploads in flight per stream (>= 1) */
	unsigned max_streams;      /* streams at once; more files wait for close */
	tfs_upload_stream_reg_fn reg;
	void *reg_ctx;
};

struct tfs_upload_streams;
struct tfs_upload_stream;

/* A group of streams sharing one configuration (copied).  Returns 0,
 * ENOMEM, or EINVAL (parallel or max_streams 0, part_size below 5 MiB,
 * threshold below part_size). */
int tfs_upload_streams_create(const struct tfs_upload_streams_config *cfg,
			      struct tfs_upload_streams **out);
/* From now on a cancelled stream does not abort its upload (it stays
 * registered for the next mount to abort): for shutting down without
 * waiting on a server that may be down.  Cannot fail. */
void tfs_upload_streams_shutdown(struct tfs_upload_streams *g);
/* Wait until every stream has ended (cancel them first; a stream still
 * running is waited for) and free the group.  NULL is a no-op. */
void tfs_upload_streams_destroy(struct tfs_upload_streams *g);
/* The size at which a file starts streaming. */
uint64_t tfs_upload_streams_threshold(const struct tfs_upload_streams *g);

/* Counters (monotonic): streams started, handed over at close, cancelled
 * or failed; parts uploaded by streams. */
struct tfs_upload_streams_stats {
	uint64_t started, finished, cancelled, parts;
};
void tfs_upload_streams_stats(struct tfs_upload_streams *g, struct tfs_upload_streams_stats *out);

/* Start streaming `key`, a file of `size` bytes so far whose staged copy is
 * `fd` (dup'd: the caller keeps its own).  `meta` (the object's headers)
 * is moved into the stream (*meta is zeroed).  The upload is created by
 * the stream's threads, not here.  Returns 0, EBUSY (max_streams are
 * running), ENOMEM, EMFILE, or a pthread error; on failure *meta is
 * cleared. */
int tfs_upload_stream_start(struct tfs_upload_streams *g, const char *key, int fd, uint64_t size,
			    struct tfs_obj_meta *meta, struct tfs_upload_stream **out);

/* The file grew to `size` bytes by appending.  Cannot fail. */
void tfs_upload_stream_grow(struct tfs_upload_stream *s, uint64_t size);

/* The file is complete at `size` bytes: stop taking parts, wait for the
 * parts in flight, and fill *st (zeroed first) with the upload id, the
 * part size and the ETags of the parts uploaded ("" for the rest), for
 * ceil(size / part_size) parts.  The stream is freed; the upload stays
 * registered until the caller, having recorded *st durably, calls
 * tfs_upload_stream_forget().  Returns 0, or (stream freed, its upload
 * aborted, *st empty) the stream's failure, or EINVAL when `size` does not
 * fit the parts sent (more than 10,000 parts). */
int tfs_upload_stream_finish(struct tfs_upload_stream *s, uint64_t size, struct tfs_mpu *st);

/* Give up on the stream: its threads stop after the part in flight, the
 * upload is aborted and unregistered, and the stream freed, all in the
 * background.  NULL is a no-op.  Never blocks. */
void tfs_upload_stream_cancel(struct tfs_upload_stream *s);

/* Unregister the upload `upload_id` of `key` after the caller recorded it
 * elsewhere (see tfs_upload_stream_finish()).  Returns the reg callback's
 * result. */
int tfs_upload_stream_forget(struct tfs_upload_streams *g, const char *key, const char *upload_id);

#endif
