/* s3_http.h - one HTTP exchange over a pooled libcurl handle.
 *
 * The pool keeps up to `max_connections` curl easy handles; each keeps its
 * connection open between requests, so a request that finds an idle handle
 * needs no new TCP or TLS handshake.  DNS results and TLS sessions are
 * shared between handles.  Nothing here knows S3: the caller builds the
 * URL and headers (including the signature) and interprets the status.
 *
 * Thread safety: tfs_http_perform() may be called from any thread; the pool
 * is protected by its own mutex, held only to take or return a handle.
 * Create the pool after daemonizing.
 */
#ifndef TFS_S3_HTTP_H
#define TFS_S3_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <curl/curl.h>

#include "backend.h"
#include "dbuf.h"
#include "log.h"

struct tfs_http_pool;

struct tfs_http_config {
	unsigned max_connections;
	unsigned connect_timeout_ms;
	unsigned low_speed_time_s;
	unsigned low_speed_limit;
	const char *ca_file; /* NULL: system CAs */
};

/* Returns 0, EINVAL (bad ca_file), ENOMEM or EIO (curl init failed). */
int tfs_http_pool_create(const struct tfs_http_config *cfg, const struct tfs_log *log,
			 struct tfs_http_pool **out);
void tfs_http_pool_destroy(struct tfs_http_pool *pool);

/* Where a request body comes from. */
struct tfs_http_body {
	struct tfs_io src; /* TFS_IO_BUF (cbuf) or TFS_IO_FD (pread from fd at off) */
	uint64_t len;
};

struct tfs_http_req {
	const char *method;               /* "GET", "HEAD", "PUT", "POST", "DELETE" */
	const char *url;                  /* complete, already encoded */
	struct curl_slist *headers;       /* borrowed */
	const struct tfs_http_body *body; /* NULL: no body (Content-Length: 0 for PUT/POST) */
	/* Destination for a 2xx response body; NULL collects it in resp->body.
	 * For a 200 reply to a ranged GET that the server served whole, the
	 * first `skip` bytes are dropped. */
	const struct tfs_io *dst;
	uint64_t dst_cap;  /* at most this many bytes go to dst */
	uint64_t dst_skip; /* bytes to drop first when the reply is a full 200 */
	/* The server may think for minutes before it answers (S3 documents
	 * this for CompleteMultipartUpload, which assembles the object):
	 * the low-speed limit then allows TFS_HTTP_SLOW_REPLY_S of silence. */
	bool slow_reply;
};

#define TFS_HTTP_SLOW_REPLY_S 900

/* What came back.  Owns its memory: tfs_http_resp_clear(). */
struct tfs_http_resp {
	long status;          /* 0 when the exchange failed */
	struct tfs_dbuf body; /* non-2xx bodies (the first 64 KiB), and 2xx bodies
			       * without dst (whole, up to 16 MiB: EOVERFLOW beyond) */
	uint64_t got;         /* bytes delivered to dst */
	char etag[TFS_ETAG_MAX];
	int64_t content_length; /* -1 when absent */
	/* Content-Range "bytes FIRST-LAST/TOTAL": range_first -1 when absent
	 * or unreadable; range_total -1 for "*". */
	int64_t range_first, range_last, range_total;
	/* Why a header was refused (a size above INT64_MAX); "" when none.
	 * Such a reply makes tfs_http_perform() return EPROTO. */
	char refused[96];
	char last_modified[64];
	char request_id[128];
	char bucket_region[64];   /* x-amz-bucket-region, "" when absent */
	struct tfs_obj_meta meta; /* x-amz-meta-* headers, and nothing else */
	long parts_count;         /* x-amz-mp-parts-count; -1 when absent */
	bool encrypted;           /* SSE-KMS or SSE-C named by the reply */
	/* x-amz-checksum-<alg>: the last one named, "" when none */
	char checksum_alg[16];
	char checksum[64];
	char checksum_type[16];      /* x-amz-checksum-type, "" when absent */
	char error[CURL_ERROR_SIZE]; /* transport error text when status == 0 */
	bool transport_error;
};

void tfs_http_resp_init(struct tfs_http_resp *r);
void tfs_http_resp_clear(struct tfs_http_resp *r);

/* Perform one exchange.  Returns 0 when a complete HTTP response arrived
 * (whatever its status), EIO for a transport failure (connect, TLS, reset,
 * timeout, a body shorter than its Content-Length: resp->error says
 * which), EPROTO for a reply with a Content-Length or Content-Range size
 * above INT64_MAX (resp->error says which; the transfer is abandoned when
 * the header arrives, not retried), ENOMEM, EOVERFLOW (a 2xx reply without dst over 16 MiB),
 * or the errno of writing to dst.  `resp` must be
 * initialised; it is reset first. */
int tfs_http_perform(struct tfs_http_pool *pool, const struct tfs_http_req *req,
		     struct tfs_http_resp *resp);

#endif
