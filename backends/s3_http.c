/* s3_http.c - pooled libcurl handles and one HTTP exchange. */
#include "config.h"

#include "s3_http.h"

#include "fdio.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define ERROR_BODY_MAX (64u * 1024u)
/* A 2xx reply collected whole (a ListObjectsV2 page of 1000 long,
 * URL-encoded keys runs to a few MiB); a longer one fails, never cut. */
#define REPLY_BODY_MAX (16u * 1024u * 1024u)
/* libcurl allocates its download buffer (this + 1 byte) for every
 * transfer and frees it at the end.  Kept below the daemon's malloc mmap
 * threshold (128 KiB, src/daemon.c), it is recycled from the heap; at
 * 128 KiB it was mapped, faulted in page by page and unmapped for every
 * GET: half of the page faults of a cold small-file epoch. */
#define RECV_BUFFER (120u * 1024u)
#define SEND_BUFFER (256u * 1024u)

struct tfs_http_pool {
	struct tfs_http_config cfg;
	char *ca_file;
	const struct tfs_log *log;
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t lock; /* protects idle[] and n_idle */
	CURL **idle;
	size_t n_idle;
};

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *userp)
{
	(void)h;
	(void)access;
	struct tfs_http_pool *p = userp;
	pthread_mutex_lock(&p->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *userp)
{
	(void)h;
	struct tfs_http_pool *p = userp;
	pthread_mutex_unlock(&p->share_locks[data]);
}

int tfs_http_pool_create(const struct tfs_http_config *cfg, const struct tfs_log *log,
			 struct tfs_http_pool **out)
{
	struct tfs_http_pool *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return ENOMEM;
	p->cfg = *cfg;
	p->log = log;
	if (p->cfg.max_connections == 0)
		p->cfg.max_connections = 1;
	if (cfg->ca_file) {
		if (access(cfg->ca_file, R_OK) != 0) {
			int e = errno;
			tfs_err(log, "s3: ca_file '%s': %s", cfg->ca_file, strerror(e));
			free(p);
			return EINVAL;
		}
		p->ca_file = strdup(cfg->ca_file);
		if (p->ca_file == NULL) {
			free(p);
			return ENOMEM;
		}
	}
	p->cfg.ca_file = p->ca_file;
	p->idle = calloc(p->cfg.max_connections, sizeof(*p->idle));
	pthread_mutex_init(&p->lock, NULL);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&p->share_locks[i], NULL);
	p->share = curl_share_init();
	if (p->idle == NULL || p->share == NULL) {
		tfs_http_pool_destroy(p);
		return ENOMEM;
	}
	curl_share_setopt(p->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(p->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(p->share, CURLSHOPT_USERDATA, p);
	curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	*out = p;
	return 0;
}

void tfs_http_pool_destroy(struct tfs_http_pool *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->n_idle; i++)
		curl_easy_cleanup(p->idle[i]);
	if (p->share)
		curl_share_cleanup(p->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&p->share_locks[i]);
	pthread_mutex_destroy(&p->lock);
	free(p->idle);
	free(p->ca_file);
	free(p);
}

static CURL *acquire(struct tfs_http_pool *p)
{
	CURL *h = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->n_idle)
		h = p->idle[--p->n_idle];
	pthread_mutex_unlock(&p->lock);
	if (h)
		return h;
	h = curl_easy_init();
	if (h)
		curl_easy_setopt(h, CURLOPT_SHARE, p->share);
	return h;
}

/* Keep the handle (and its open connection) unless the pool is full. */
static void release(struct tfs_http_pool *p, CURL *h, bool keep)
{
	if (keep) {
		pthread_mutex_lock(&p->lock);
		if (p->n_idle < p->cfg.max_connections) {
			p->idle[p->n_idle++] = h;
			h = NULL;
		}
		pthread_mutex_unlock(&p->lock);
	}
	if (h)
		curl_easy_cleanup(h);
}

void tfs_http_resp_init(struct tfs_http_resp *r)
{
	memset(r, 0, sizeof(*r));
	tfs_dbuf_init(&r->body, REPLY_BODY_MAX);
	r->content_length = -1;
	r->range_first = r->range_last = r->range_total = -1;
	r->parts_count = -1;
}

void tfs_http_resp_clear(struct tfs_http_resp *r)
{
	tfs_dbuf_free(&r->body);
	tfs_obj_meta_clear(&r->meta);
	tfs_http_resp_init(r);
}

/* ---- transfer state ---- */

struct xfer {
	const struct tfs_http_req *req;
	struct tfs_http_resp *resp;
	CURL *h;
	uint64_t sent;     /* body bytes handed to curl */
	uint64_t skipped;  /* bytes of a whole-object 200 dropped so far */
	int sink_error;    /* errno from writing to dst, or EOVERFLOW */
	bool stopped_full; /* we ended the body early: dst was full */
};

static size_t on_read(char *buf, size_t size, size_t nitems, void *userp)
{
	struct xfer *x = userp;
	const struct tfs_http_body *b = x->req->body;
	size_t want = size * nitems;
	uint64_t left = b->len - x->sent;

	if (want > left)
		want = (size_t)left;
	if (want == 0)
		return 0;
	if (b->src.kind == TFS_IO_BUF) {
		memcpy(buf, (const char *)b->src.cbuf + x->sent, want);
	} else {
		ssize_t n;
		do {
			n = pread(b->src.fd, buf, want, b->src.off + (off_t)x->sent);
		} while (n < 0 && errno == EINTR);
		if (n <= 0) {
			x->sink_error = n < 0 ? errno : EIO;
			return CURL_READFUNC_ABORT;
		}
		want = (size_t)n;
	}
	x->sent += want;
	return want;
}

static int on_seek(void *userp, curl_off_t offset, int origin)
{
	struct xfer *x = userp;
	if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->req->body->len)
		return CURL_SEEKFUNC_FAIL;
	x->sent = (uint64_t)offset;
	return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp)
{
	struct xfer *x = userp;
	size_t len = size * nmemb;
	long status = 0;

	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299 || x->req->dst == NULL) {
		/* Replies without dst are collected: an error body capped (its
		 * start says what went wrong), a 2xx one whole or not at all. */
		bool ok = status >= 200 && status <= 299;
		size_t cap = ok ? x->resp->body.max : ERROR_BODY_MAX;
		size_t have = tfs_dbuf_len(&x->resp->body);
		size_t room = have < cap ? cap - have : 0;
		if (ok && len > room) {
			x->sink_error = EOVERFLOW;
			return 0;
		}
		if (tfs_dbuf_add(&x->resp->body, data, len < room ? len : room) == ENOMEM) {
			x->sink_error = ENOMEM;
			return 0;
		}
		return len;
	}
	size_t used = len;
	if (status == 200 && x->skipped < x->req->dst_skip) {
		uint64_t drop = x->req->dst_skip - x->skipped;
		if (drop > len)
			drop = len;
		x->skipped += drop;
		data += drop;
		len -= (size_t)drop;
	}
	uint64_t room = x->req->dst_cap - x->resp->got;
	if (len > room) {
		len = (size_t)room;
		x->stopped_full = true;
	}
	const struct tfs_io *d = x->req->dst;
	if (len) {
		if (d->kind == TFS_IO_BUF) {
			memcpy((char *)d->buf + x->resp->got, data, len);
		} else if (d->kind == TFS_IO_IOV) {
			tfs_io_iov_copy(d, x->resp->got, data, len);
			tfs_io_iov_filled(d, x->resp->got + len);
		} else {
			int rc = tfs_pwrite_all(d->fd, data, len, d->off + (off_t)x->resp->got);
			if (rc) {
				x->sink_error = rc;
				return 0;
			}
		}
		x->resp->got += len;
	}
	/* Only a whole-object 200 can overrun; stop it once dst is full. */
	if (x->stopped_full)
		return 0;
	return used;
}

static void trim(const char **s, size_t *len)
{
	while (*len && isspace((unsigned char)**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && isspace((unsigned char)(*s)[*len - 1]))
		(*len)--;
}

static void copy_value(char *dst, size_t cap, const char *v, size_t vlen)
{
	if (vlen >= cap)
		vlen = cap - 1;
	memcpy(dst, v, vlen);
	dst[vlen] = '\0';
}

/* A decimal number at *s (digits only) up to INT64_MAX; advances *s.
 * Returns 0, EINVAL (no digits) or ERANGE (above INT64_MAX). */
static int parse_i64(const char **s, int64_t *out)
{
	if (!isdigit((unsigned char)**s))
		return EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(*s, &end, 10);
	*s = end;
	if (errno == ERANGE || v > (unsigned long long)INT64_MAX)
		return ERANGE;
	*out = (int64_t)v;
	return 0;
}

/* Content-Range: "bytes FIRST-LAST/TOTAL", TOTAL a number or "*". */
static void parse_content_range(struct tfs_http_resp *r, const char *v)
{
	int64_t first, last, total = -1;
	int rc;

	if (strncasecmp(v, "bytes ", 6) != 0)
		return;
	v += 6;
	rc = parse_i64(&v, &first);
	if (rc == 0 && *v++ != '-')
		rc = EINVAL;
	if (rc == 0)
		rc = parse_i64(&v, &last);
	if (rc == 0 && *v++ != '/')
		rc = EINVAL;
	if (rc == 0 && strcmp(v, "*") != 0 && (rc = parse_i64(&v, &total)) == 0 && *v != '\0')
		rc = EINVAL;
	if (rc == ERANGE)
		snprintf(r->refused, sizeof(r->refused), "Content-Range beyond 2^63-1 bytes");
	if (rc || last < first)
		return;
	r->range_first = first;
	r->range_last = last;
	r->range_total = total;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *userp)
{
	struct xfer *x = userp;
	size_t len = size * nitems;
	struct tfs_http_resp *r = x->resp;
	const char *colon = memchr(line, ':', len);

	/* A new status line (e.g. after 100 Continue): forget earlier headers. */
	if (len > 5 && strncmp(line, "HTTP/", 5) == 0) {
		r->etag[0] = '\0';
		r->content_length = -1;
		r->range_first = r->range_last = r->range_total = -1;
		r->refused[0] = '\0';
		r->last_modified[0] = '\0';
		r->bucket_region[0] = '\0';
		r->parts_count = -1;
		r->encrypted = false;
		r->checksum_alg[0] = r->checksum[0] = r->checksum_type[0] = '\0';
		tfs_obj_meta_clear(&r->meta);
		return len;
	}
	if (colon == NULL)
		return len;
	size_t nlen = (size_t)(colon - line);
	const char *v = colon + 1;
	size_t vlen = len - nlen - 1;
	trim(&v, &vlen);

	if (nlen == 4 && strncasecmp(line, "etag", 4) == 0) {
		copy_value(r->etag, sizeof(r->etag), v, vlen);
	} else if (nlen == 14 && strncasecmp(line, "content-length", 14) == 0) {
		char num[32];
		copy_value(num, sizeof(num), v, vlen);
		const char *s = num;
		int64_t cl;
		int rc = vlen < sizeof(num) ? parse_i64(&s, &cl) : ERANGE;
		if (rc == 0 && *s == '\0')
			r->content_length = cl;
		else if (rc == ERANGE && strspn(v, "0123456789") == vlen)
			snprintf(r->refused, sizeof(r->refused),
				 "Content-Length beyond 2^63-1 bytes");
	} else if (nlen == 13 && strncasecmp(line, "content-range", 13) == 0) {
		char cr[128];
		copy_value(cr, sizeof(cr), v, vlen);
		parse_content_range(r, cr);
	} else if (nlen == 13 && strncasecmp(line, "last-modified", 13) == 0) {
		copy_value(r->last_modified, sizeof(r->last_modified), v, vlen);
	} else if (nlen == 16 && strncasecmp(line, "x-amz-request-id", 16) == 0) {
		copy_value(r->request_id, sizeof(r->request_id), v, vlen);
	} else if (nlen == 19 && strncasecmp(line, "x-amz-bucket-region", 19) == 0) {
		copy_value(r->bucket_region, sizeof(r->bucket_region), v, vlen);
	} else if (nlen == 20 && strncasecmp(line, "x-amz-mp-parts-count", 20) == 0) {
		char num[16];
		copy_value(num, sizeof(num), v, vlen);
		const char *s = num;
		int64_t n;
		if (vlen < sizeof(num) && parse_i64(&s, &n) == 0 && *s == '\0' && n >= 1 &&
		    n <= 10000)
			r->parts_count = (long)n;
	} else if (nlen == 19 && strncasecmp(line, "x-amz-checksum-type", 19) == 0) {
		copy_value(r->checksum_type, sizeof(r->checksum_type), v, vlen);
	} else if (nlen > 15 && nlen - 15 < sizeof(r->checksum_alg) &&
		   strncasecmp(line, "x-amz-checksum-", 15) == 0 && vlen < sizeof(r->checksum)) {
		copy_value(r->checksum_alg, sizeof(r->checksum_alg), line + 15, nlen - 15);
		for (char *c = r->checksum_alg; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		copy_value(r->checksum, sizeof(r->checksum), v, vlen);
	} else if (nlen == 28 && strncasecmp(line, "x-amz-server-side-encryption", 28) == 0) {
		/* SSE-S3 (AES256) keeps the MD5 ETag; aws:kms and aws:kms:dsse do not */
		r->encrypted |= vlen >= 7 && strncasecmp(v, "aws:kms", 7) == 0;
	} else if (nlen > 38 &&
		   strncasecmp(line, "x-amz-server-side-encryption-customer-", 38) == 0) {
		r->encrypted = true; /* SSE-C */
	} else if (nlen > 11 && strncasecmp(line, "x-amz-meta-", 11) == 0) {
		char name[256], val[2048];
		if (nlen - 11 < sizeof(name) && vlen < sizeof(val)) {
			copy_value(name, sizeof(name), line + 11, nlen - 11);
			copy_value(val, sizeof(val), v, vlen);
			if (tfs_obj_meta_set(&r->meta, name, val) == ENOMEM)
				return 0;
		}
	}
	/* A size we refuse: stop now rather than read a body of that size. */
	return r->refused[0] ? 0 : len;
}

static void setup(struct tfs_http_pool *p, CURL *h, const struct tfs_http_req *req, struct xfer *x)
{
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, req->headers);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	/* S3 keys may contain "/../" or "//": never let curl squash them. */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)p->cfg.connect_timeout_ms);
	long slow = (long)p->cfg.low_speed_time_s;
	if (req->slow_reply && slow < TFS_HTTP_SLOW_REPLY_S)
		slow = TFS_HTTP_SLOW_REPLY_S;
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, slow);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)p->cfg.low_speed_limit);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	/* curl's 16 KiB default costs a recv() and a callback per 16 KiB;
	 * blocks are 64 KiB..64 MiB.  Each pooled handle keeps its buffer. */
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)RECV_BUFFER);
	curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, (long)SEND_BUFFER);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (p->cfg.ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, p->cfg.ca_file);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->resp->error);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);

	const char *m = req->method;
	if (strcmp(m, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(m, "PUT") == 0 || strcmp(m, "POST") == 0) {
		uint64_t len = req->body ? req->body->len : 0;
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
		if (strcmp(m, "POST") == 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
	} else if (strcmp(m, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
	}
}

int tfs_http_perform(struct tfs_http_pool *p, const struct tfs_http_req *req,
		     struct tfs_http_resp *resp)
{
	static const struct tfs_http_body empty = { .src = { .kind = TFS_IO_BUF, .fd = -1 } };
	struct tfs_http_req r = *req;
	struct xfer x = { .req = &r, .resp = resp };

	if (r.body == NULL)
		r.body = &empty;
	tfs_http_resp_clear(resp);
	CURL *h = acquire(p);
	if (h == NULL)
		return ENOMEM;
	x.h = h;
	setup(p, h, &r, &x);
	CURLcode cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
	/* Reset per-request options but keep the connection. */
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_SHARE, p->share);

	if (resp->refused[0]) {
		/* The server lied about a size: not a transport failure to retry. */
		release(p, h, false);
		snprintf(resp->error, sizeof(resp->error), "refused reply: %s", resp->refused);
		return EPROTO;
	}
	if (x.sink_error) {
		release(p, h, false);
		resp->status = 0;
		snprintf(resp->error, sizeof(resp->error), "local I/O: %s", strerror(x.sink_error));
		return x.sink_error;
	}
	if (cc == CURLE_WRITE_ERROR && x.stopped_full) {
		/* We cut a whole-object reply short on purpose: not an error,
		 * but the connection has unread bytes and cannot be reused. */
		release(p, h, false);
		return 0;
	}
	if (cc != CURLE_OK) {
		release(p, h, false);
		resp->status = 0;
		resp->transport_error = true;
		if (resp->error[0] == '\0')
			snprintf(resp->error, sizeof(resp->error), "%s", curl_easy_strerror(cc));
		return EIO;
	}
	/* Object replies (HEAD, and GETs into dst) always carry Content-Length
	 * and ETag on S3.  curl accepts a header block cut short by a closed
	 * connection as complete, so a reply missing either was cut: retry it
	 * rather than read "0 bytes" as "the object changed". */
	bool object_reply = strcmp(r.method, "HEAD") == 0 ||
			    (strcmp(r.method, "GET") == 0 && r.dst);
	if (object_reply && resp->status >= 200 && resp->status <= 299 &&
	    (resp->content_length < 0 || resp->etag[0] == '\0')) {
		release(p, h, false);
		resp->status = 0;
		resp->transport_error = true;
		snprintf(resp->error, sizeof(resp->error), "reply without %s (cut short)",
			 resp->content_length < 0 ? "Content-Length" : "ETag");
		return EIO;
	}
	release(p, h, true);
	return 0;
}
