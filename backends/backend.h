/* backend.h - the object-store interface every tier ends in.
 *
 * A backend is a constant ops table (struct tfs_backend_ops, defined in
 * backend_impl.h for implementers only) plus an opaque instance.  Callers
 * use the tfs_backend_*() wrappers below, which dispatch through the table
 * and keep per-operation statistics.  Nothing above this interface knows
 * about HTTP, XML or signing.
 *
 * Keys are relative to the backend's root (the bucket prefix, or the
 * directory of the local backend), use '/' as separator, and are passed
 * verbatim: no normalisation of "//", "..", "+" or "%" is done, exactly as
 * S3 does not normalise them.
 *
 * Errors: every function returns 0 on success or a positive errno:
 *   ENOENT        the object does not exist (S3 404 / NoSuchKey)
 *   EACCES        access denied (S3 403, including SignatureDoesNotMatch)
 *   ESTALE        a conditional request failed: the object changed (S3 412)
 *   EINVAL        the request itself is malformed (bad key, bad range)
 *   ENOMEM        out of memory
 *   EIO           everything else, after retries: 5xx, throttling,
 *                 connection or TLS failure, timeouts, a malformed reply
 * The backend logs the cause (key, server code and message) before it
 * returns an error; callers need not log it again.
 *
 * Thread safety: all operations may be called concurrently from any number
 * of threads on the same instance.
 */
#ifndef TFS_BACKEND_H
#define TFS_BACKEND_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "hist.h"

struct tfs_log;

#define TFS_ETAG_MAX 128 /* ETag buffers, including quotes and NUL */

struct tfs_backend; /* opaque instance */

/* One user metadata pair: x-amz-meta-<name>: <value>.  Names are stored in
 * lower case, without the prefix. */
struct tfs_meta_kv {
	char *name;
	char *value;
};

/* Object attributes.  Owns its strings: release with tfs_obj_meta_clear(). */
struct tfs_obj_meta {
	uint64_t size;
	char etag[TFS_ETAG_MAX]; /* as the server sends it, quotes included */
	int64_t mtime;           /* Last-Modified, seconds since the epoch */
	struct tfs_meta_kv *user;
	size_t n_user;
};

void tfs_obj_meta_clear(struct tfs_obj_meta *m);
/* Add or replace a user metadata entry (name is lower-cased).  Returns 0,
 * EINVAL for an empty or non-token name, or ENOMEM. */
int tfs_obj_meta_set(struct tfs_obj_meta *m, const char *name, const char *value);
/* The value for `name` (case-insensitive) or NULL.  Borrowed pointer. */
const char *tfs_obj_meta_get(const struct tfs_obj_meta *m, const char *name);

/* One listing page.  Owns everything: release with tfs_list_page_clear(). */
struct tfs_list_entry {
	char *key; /* relative to the backend root */
	uint64_t size;
	char etag[TFS_ETAG_MAX];
	int64_t mtime;
};

struct tfs_list_page {
	struct tfs_list_entry *entries;
	size_t n_entries;
	char **prefixes; /* common prefixes, each ending in the delimiter */
	size_t n_prefixes;
	char *next_token; /* NULL on the last page */
	/* Names of the reply that were dropped as foreign (see
	 * tfs_backend_list); counted in tfs_backend_stats.list_foreign_dropped. */
	size_t n_dropped;
};

void tfs_list_page_clear(struct tfs_list_page *p);

/* Where get_range puts bytes, and where put takes them from.  TFS_IO_IOV
 * (scattered buffers) is for get_range only: one GET filling several
 * cache blocks. */
enum tfs_io_kind {
	TFS_IO_BUF,
	TFS_IO_FD,
	TFS_IO_IOV
};

struct tfs_io {
	enum tfs_io_kind kind;
	union {
		void *buf;        /* TFS_IO_BUF (get: destination) */
		const void *cbuf; /* TFS_IO_BUF (put: source) */
	};
	int fd;                  /* TFS_IO_FD: read/written with pread/pwrite */
	off_t off;               /* TFS_IO_FD: file offset of the first byte */
	const struct iovec *iov; /* TFS_IO_IOV: the buffers, in order */
	int iovcnt;
	struct tfs_io_progress *progress; /* TFS_IO_IOV, optional: see below */
};

/* Progress of a TFS_IO_IOV get_range: done(ctx, i) is called once for each
 * buffer i, in order, from the thread that called get_range, as soon as the
 * buffer holds all its bytes of a reply the backend has accepted (status,
 * version), so a caller can hand out the first blocks of a long GET before
 * the last ones arrive.  A backend that cannot vouch for bytes before the
 * whole read is checked (the local one: an object rewritten in place)
 * reports them only at the end.  `ndone` buffers (`done_bytes` bytes) have
 * been reported; a retry never writes into them again.  Buffers reported
 * stay valid even if the call then fails.  Start with ndone = done_bytes =
 * 0. */
struct tfs_io_progress {
	void (*done)(void *ctx, int i);
	void *ctx;
	int ndone;
	uint64_t done_bytes;
	/* Set by the caller: nobody waits for these bytes (a warm-up), so a
	 * cache layer they pass through writes them before it reports them
	 * instead of deferring (or dropping) the write.  Backends ignore it. */
	bool background;
};

static inline struct tfs_io tfs_io_buf(void *buf)
{
	struct tfs_io io = { .kind = TFS_IO_BUF, .fd = -1, .off = 0 };
	io.buf = buf;
	return io;
}

static inline struct tfs_io tfs_io_cbuf(const void *buf)
{
	struct tfs_io io = { .kind = TFS_IO_BUF, .fd = -1, .off = 0 };
	io.cbuf = buf;
	return io;
}

static inline struct tfs_io tfs_io_fd(int fd, off_t off)
{
	struct tfs_io io = { .kind = TFS_IO_FD, .fd = fd, .off = off };
	io.buf = NULL;
	return io;
}

static inline struct tfs_io tfs_io_iov(const struct iovec *iov, int iovcnt)
{
	struct tfs_io io = { .kind = TFS_IO_IOV, .fd = -1, .iov = iov, .iovcnt = iovcnt };
	io.buf = NULL;
	io.progress = NULL;
	return io;
}

/* Copy `len` bytes to byte position `pos` of a TFS_IO_IOV destination;
 * bytes beyond the buffers, and bytes of buffers already reported done
 * (io->progress), are dropped.  Cannot fail. */
void tfs_io_iov_copy(const struct tfs_io *io, uint64_t pos, const void *data, size_t len);

/* Report to io->progress (if any) every buffer that the first `filled`
 * bytes of a TFS_IO_IOV destination complete.  Cannot fail. */
void tfs_io_iov_filled(const struct tfs_io *io, uint64_t filled);

/* Per-operation counters, updated by the dispatch wrappers.  Each call
 * counts one request (and one error if it fails), except:
 *   tfs_backend_put_resumable()  as a plain put: like tfs_backend_put().
 *       As a multipart upload: one PUT request, with its bytes, per part it
 *       uploads (parts skipped on a resume are not counted), plus one more
 *       request, as an error, when the call fails.  The requests around
 *       the parts (create, ListParts, complete, the abort of a state that
 *       does not fit) are not counted on their own.
 *   tfs_backend_abort_upload()   one DELETE request (none for "" or on a
 *       backend without multipart).
 *   tfs_backend_count_uploads()  one LIST request (none on a backend
 *       without multipart).
 * Latency: each call of a wrapper that makes a request is one observation
 * of its operation's histogram, from the call to its return, retries and
 * backoff included; a multipart upload is one PUT observation for the
 * whole upload (its parts are not timed one by one). */
enum tfs_backend_op {
	TFS_OP_HEAD,
	TFS_OP_LIST,
	TFS_OP_GET,
	TFS_OP_PUT,
	TFS_OP_DELETE,
	TFS_OP_COPY,
	TFS_OP__COUNT
};

struct tfs_backend_op_stats {
	atomic_uint_fast64_t requests;
	atomic_uint_fast64_t errors;
	atomic_uint_fast64_t bytes; /* payload bytes read (GET) or written (PUT) */
	struct tfs_hist latency;
};

struct tfs_backend_stats {
	struct tfs_backend_op_stats op[TFS_OP__COUNT];
	/* Listing names dropped because they do not belong to the listing
	 * asked for (tfs_backend_list). */
	atomic_uint_fast64_t list_foreign_dropped;
	/* Listings cut off with EIO because they did not end
	 * (tfs_backend_list_walk). */
	atomic_uint_fast64_t list_loops;
};

const char *tfs_backend_op_name(enum tfs_backend_op op);

/* One operation's counters, as its stats object has them. */
struct tfs_backend_op_snap {
	uint64_t requests, errors, payload_bytes;
	const struct tfs_hist *latency;
};

struct tfs_stattab;

/* The rows of a backend's stats (statdef.h): one object per operation
 * ("backend.<op>", tfs_backend_op_stattab, the rows of a struct
 * tfs_backend_op_snap), then the backend's own members
 * (tfs_backend_stattab). */
extern const struct tfs_stattab tfs_backend_op_stattab;
extern const struct tfs_stattab tfs_backend_stattab;

/* The counters as a new JSON object: per operation (head, list, get, put,
 * delete, copy) its requests, errors, payload_bytes and latency
 * histogram; list_foreign_dropped, list_loops, source (the description),
 * and whatever the implementation adds (a near copy: "near").  NULL on
 * ENOMEM.  Thread safe. */
struct json_object *tfs_backend_stats_json(const struct tfs_backend *be);

/* HEAD: fill *out (which must be zeroed or cleared) with the object's
 * attributes.  On error *out is left empty. */
int tfs_backend_head(struct tfs_backend *be, const char *key, struct tfs_obj_meta *out);

/* What a HEAD says of a version's bytes, for checking a copy of them
 * (backends/near_verify.h). */
struct tfs_obj_check {
	char etag[TFS_ETAG_MAX];
	uint64_t size;      /* the object's size */
	uint64_t part_size; /* a multipart object's part 1 size (HEAD ?partNumber=1);
			     * 0 when the server did not say (Ceph RGW before Reef) */
	bool encrypted;     /* SSE-KMS or SSE-C: the ETag is not the bytes' MD5 */
	/* A full-object checksum (x-amz-checksum-mode: ENABLED): its
	 * algorithm ("crc32", "crc32c", "crc64nvme", "sha1", "sha256") and
	 * its base64 value; "" when far has none (or only a composite one). */
	char checksum_alg[16];
	char checksum[64];
};

/* HEAD `key` for its check values: one HEAD, and for a multipart ETag a
 * second one with ?partNumber=1, whose size is part 1's when the reply
 * names the parts' count (x-amz-mp-parts-count) that the ETag names.
 * The first HEAD asks for the object's checksum (x-amz-checksum-mode).
 * Counted as HEAD requests.  ENOTSUP on a backend without it (local);
 * otherwise errors as tfs_backend_head(). */
int tfs_backend_head_check(struct tfs_backend *be, const char *key, struct tfs_obj_check *out);

/* LIST one page of keys starting with `prefix` ("" for all).  With a
 * non-NULL `delimiter` (normally "/"), keys containing it after the prefix
 * are rolled up into common prefixes.  `token` is NULL for the first page,
 * then the previous page's next_token.  `max_keys` 0 means the backend
 * default (1000).  *out must be zeroed; release with tfs_list_page_clear().
 *
 * The reply is checked, not trusted: a key that does not start with
 * `prefix`, or that holds the delimiter after it; a common prefix that does
 * not start with `prefix`, that does not end with the delimiter, that holds
 * it before its end, or that comes without a delimiter asked for, is dropped
 * and counted (out->n_dropped, stats list_foreign_dropped).  So every name
 * a caller sees is `prefix` followed by at least zero bytes, and a key equal
 * to `prefix` (a directory marker) is kept.  Callers that walk all the
 * pages use tfs_backend_list_walk(), which bounds the walk. */
int tfs_backend_list(struct tfs_backend *be, const char *prefix, const char *delimiter,
		     const char *token, size_t max_keys, struct tfs_list_page *out);

/* Most pages one walk over a listing fetches: 10^5 pages, 10^8 names at
 * 1000 a page, more than any directory or bucket tierfs is meant for. */
#define TFS_LIST_WALK_MAX_PAGES 100000u

/* A walk over all the pages of one listing.  Zero it to start; release with
 * tfs_list_walk_clear().  Not shared between threads. */
struct tfs_list_walk {
	char *token;      /* the next page's token; NULL before the first page */
	char *mark;       /* an earlier token, to recognise a loop (Brent) */
	uint64_t pages;   /* pages fetched so far */
	uint64_t mark_at; /* the page count at which `mark` moves on */
	bool done;        /* the last page was fetched */
};

/* Fetch the walk's next page into *out (zeroed; tfs_list_page_clear()), as
 * tfs_backend_list() with w's token; w->done is set on the last page.  A
 * listing that does not end fails with EIO, logged on `log` (may be NULL)
 * and counted in stats list_loops: a continuation token that comes back
 * (any loop of tokens is found within about twice its length plus the
 * pages before it) or more than TFS_LIST_WALK_MAX_PAGES pages.  Names
 * dropped from the page are logged at warning level.  Returns 0, EIO,
 * ENOMEM, the backend's errno, or EINVAL when called after the walk ended;
 * after an error the walk is over (w->done is set). */
int tfs_backend_list_walk(struct tfs_backend *be, const struct tfs_log *log,
			  struct tfs_list_walk *w, const char *prefix, const char *delimiter,
			  size_t max_keys, struct tfs_list_page *out);
void tfs_list_walk_clear(struct tfs_list_walk *w);

/* GET bytes [off, off+len) into `dst`.  Sets *got to the number of bytes
 * delivered: less than `len` only when the object ends first (0 when off is
 * at or past the end).  If `if_match` is non-NULL and non-empty the read
 * fails with ESTALE when the object's ETag differs.  `etag_out` (may be
 * NULL) receives the ETag of the object that was read ("" when got == 0
 * and the backend could not tell).  Short or partial transfers are never
 * reported as success. */
int tfs_backend_get_range(struct tfs_backend *be, const char *key, uint64_t off, uint64_t len,
			  const char *if_match, struct tfs_io dst, size_t *got,
			  char etag_out[TFS_ETAG_MAX]);

/* PUT `len` bytes from `src` as object `key`, with the user metadata in
 * `meta` (may be NULL; only meta->user is used).  Large objects go up as a
 * multipart upload with parts in parallel; a failed multipart upload is
 * aborted.  `etag_out` (may be NULL) receives the new object's ETag. */
int tfs_backend_put(struct tfs_backend *be, const char *key, struct tfs_io src, uint64_t len,
		    const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX]);

/* PUT a small object only if no object `key` exists (S3: If-None-Match:
 * *), in one request.  Returns as tfs_backend_put(), or ESTALE when an
 * object exists (412), or ENOTSUP when the backend cannot make the
 * condition (a caller may then put and read back).  A store that ignores
 * the header overwrites, so callers read back what was kept.  Counted as
 * a PUT. */
int tfs_backend_put_new(struct tfs_backend *be, const char *key, struct tfs_io src, uint64_t len,
			const struct tfs_obj_meta *meta);

/* ---- resumable multipart uploads ----
 *
 * For a write-back journal that must survive a crash: the caller persists
 * the state of an upload (its id and the ETags of the parts done) from the
 * callback, and after a restart hands the same state back to resume the
 * upload instead of starting over.  An upload the caller gives up on must
 * be aborted with tfs_backend_abort_upload(), or it stays on the server
 * (and is billed) until a bucket lifecycle rule removes it.  An upload
 * created but not yet reported to the callback when the process dies
 * cannot be known to the caller: only such a lifecycle rule, or a sweep
 * with ListMultipartUploads, removes it. */

#define TFS_UPLOAD_ID_MAX 512 /* upload id buffers, including the NUL */

/* State of a resumable multipart upload, owned by the caller (who persists
 * it).  etags has nparts entries; "" marks a part not yet uploaded.  Part i
 * (0-based) is bytes [i * part_size, min((i + 1) * part_size, len)).  A
 * state read back from disk is checked before use: one that is not
 * NUL-terminated or does not fit the object's length is not resumed. */
struct tfs_mpu {
	char upload_id[TFS_UPLOAD_ID_MAX]; /* "" = no upload started */
	uint64_t part_size;                /* all parts but the last */
	unsigned nparts;
	char (*etags)[TFS_ETAG_MAX]; /* malloc'd; tfs_mpu_clear() frees */
};

/* Allocate etags for nparts parts (all ""), freeing the old array and
 * setting st->nparts, keeping upload_id/part_size.  0, or ENOMEM with *st
 * unchanged (also for nparts 0). */
int tfs_mpu_alloc(struct tfs_mpu *st, unsigned nparts);

/* Free etags and zero *st.  NULL-safe. */
void tfs_mpu_clear(struct tfs_mpu *st);

/* Called after the upload is created (part == UINT_MAX) and after each
 * part completes (part = its index, 0-based), serialized (never two at
 * once) with *st up to date: st->etags[part] is set, and the state is
 * exactly what a resume needs.  Return 0 to go on, or an errno to stop the
 * put, which then returns that errno and leaves the upload open.  Parts
 * still in flight when it stops are waited for but not recorded in *st,
 * so *st stays what the callback last saw.  May run on any of the
 * upload's threads (the caller's or a helper). */
typedef int (*tfs_mpu_fn)(void *ctx, const struct tfs_mpu *st, unsigned part);

/* PUT like tfs_backend_put(), resumably.  Below the backend's multipart
 * threshold, or on a backend without multipart, this is a plain put and
 * *st / fn are not touched.  Otherwise: when st->upload_id is set and
 * st->part_size/nparts fit `len` (nparts == ceil(len / part_size), within
 * S3's limits of 5 MiB .. 5 GiB per part and 10,000 parts; normally the
 * geometry an earlier call chose), the server is asked whether the upload
 * still exists (one ListParts request), then parts with an etag are
 * skipped and the rest uploaded (in parallel) into that upload.  When the
 * server no longer knows the upload (NoSuchUpload, also when a part upload
 * or the completion says so) a new upload is started (st reset, fn
 * called); when st does not fit `len` the old upload is aborted first
 * (if that fails, its error is returned and *st is unchanged).  A new
 * upload chooses its geometry from the backend's part_size, grown so that
 * there are at most 10,000 parts.  On success the upload is completed and
 * st->upload_id cleared (etags are kept).  On failure the upload is left
 * open for a later resume: the caller aborts it with
 * tfs_backend_abort_upload() once it gives up or the data changed.
 * `src` must hold the same bytes on every call for one upload (EINVAL
 * from a resumed upload can mean the server refused the saved ETags:
 * abort, clear the state and start over).  fn may be NULL (the state is
 * then only in memory).  EINVAL for st NULL or a TFS_IO_IOV source; other
 * errors as tfs_backend_put(), or fn's (which wins over a part failing at
 * the same time). */
int tfs_backend_put_resumable(struct tfs_backend *be, const char *key, struct tfs_io src,
			      uint64_t len, const struct tfs_obj_meta *meta, struct tfs_mpu *st,
			      tfs_mpu_fn fn, void *ctx, char etag_out[TFS_ETAG_MAX]);

/* Abort a multipart upload of `key`, freeing its parts.  An upload the
 * server does not know counts as aborted (0), and so does upload_id NULL
 * or "" (no request is made), and any upload on a backend without
 * multipart. */
int tfs_backend_abort_upload(struct tfs_backend *be, const char *key, const char *upload_id);

/* ---- multipart uploads of a file still being written ----
 *
 * For write-back that uploads a file while it grows: create the upload
 * with tfs_backend_upload_begin(), send full parts as they are written
 * with tfs_backend_upload_part(), and once the length is known hand a
 * struct tfs_mpu with the parts' ETags (part_size the geometry's) to
 * tfs_backend_put_resumable(), which uploads the parts still missing and
 * completes the upload.  An upload given up on must be aborted with
 * tfs_backend_abort_upload(), as for a resumable put. */

/* Whether the backend has multipart uploads; if so, a put of at least
 * *threshold bytes is a multipart upload with parts of *part_size bytes
 * (while it needs at most 10,000 of them), *parallel parts at once.
 * Cannot fail. */
bool tfs_backend_multipart_geometry(const struct tfs_backend *be, uint64_t *threshold,
				    uint64_t *part_size, unsigned *parallel);

/* CreateMultipartUpload of `key` with meta's user metadata (meta may be
 * NULL); the new upload's id goes to upload_id.  ENOTSUP without
 * multipart; otherwise errors as tfs_backend_put(). */
int tfs_backend_upload_begin(struct tfs_backend *be, const char *key,
			     const struct tfs_obj_meta *meta, char upload_id[TFS_UPLOAD_ID_MAX]);

/* Upload part `idx` (0-based, < 10,000) of `upload_id`: `len` bytes from
 * `src` (a buffer or fd; src.off is the part's own start).  etag_out gets
 * the part's ETag.  ENOTSUP without multipart, EINVAL for a bad index,
 * length or IOV source; ENOENT when the server no longer knows the
 * upload; otherwise errors as tfs_backend_put(). */
int tfs_backend_upload_part(struct tfs_backend *be, const char *key, const char *upload_id,
			    unsigned idx, struct tfs_io src, uint64_t len,
			    char etag_out[TFS_ETAG_MAX]);

/* Test/ops helper: the number of multipart uploads in progress under
 * `prefix` ("" or NULL = all under the backend root), from the first page
 * of ListMultipartUploads, so at most 1000.  A backend without multipart
 * (local) has none: 0. */
int tfs_backend_count_uploads(struct tfs_backend *be, const char *prefix, size_t *out);

/* DELETE `key`.  Deleting a missing key succeeds, as on S3. */
int tfs_backend_delete(struct tfs_backend *be, const char *key);

/* A size the caller does not know (tfs_backend_copy()). */
#define TFS_SIZE_UNKNOWN UINT64_MAX

/* Server-side COPY of `src` to `dst`.  With `meta` NULL the source's user
 * metadata is kept; otherwise it is replaced by meta->user.  `size` is
 * the source's size as the caller last saw it, or TFS_SIZE_UNKNOWN: S3
 * copies an object larger than its copy_part_size in parts (UploadPartCopy,
 * as S3 copies at most 5 GiB in one request), after a HEAD that gives the
 * real size; a wrong `size` costs a request, never the copy.  ENOENT when
 * `src` is missing; ESTALE when it was replaced during a copy in parts. */
int tfs_backend_copy(struct tfs_backend *be, const char *src, const char *dst, uint64_t size,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX]);

/* Whether `key` (a file's key, or a directory marker ending in '/') is a
 * name this backend can store, asked before a change is accepted so that
 * its upload cannot fail for the name alone.  Makes no request, counts
 * nothing, logs nothing.  Returns 0; ENAMETOOLONG when the key is longer
 * than the backend allows (S3: 1,024 bytes with the bucket prefix; local:
 * PATH_MAX, NAME_MAX per segment, directory markers included); EINVAL
 * for a name the backend refuses (empty; local: an empty, "." or ".."
 * segment, or one starting with ".tierfs-tmp.", its temporary files and
 * directory markers). */
int tfs_backend_check_key(const struct tfs_backend *be, const char *key);

/* A short description for logs, e.g. "s3://bucket/prefix" or "/srv/data".
 * Borrowed; valid until destroy. */
const char *tfs_backend_describe(const struct tfs_backend *be);

/* Who this instance reads the source as, so that a cache shared by several
 * instances is shared only by those with the same access: for S3 the
 * access key ID of the credentials it signs with, a space and 32 hex
 * digits derived one-way from the secret key (an HMAC: never the secret
 * key or session token themselves); "" for a backend whose description alone says what it
 * can read (local: the root directory).  Fixed for the instance's
 * lifetime.  Borrowed; valid until destroy. */
const char *tfs_backend_cache_identity(const struct tfs_backend *be);

/* The instance's counters (read with atomic loads).  Borrowed. */
const struct tfs_backend_stats *tfs_backend_stats(const struct tfs_backend *be);

/* Destroy the instance and free everything it owns.  NULL is a no-op.  No
 * operation may be in progress. */
void tfs_backend_destroy(struct tfs_backend *be);

#endif
