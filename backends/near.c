/* near.c - a copy in the cluster in front of the source of truth
 * (near.h). */
#include "config.h"

#include "near.h"

#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_impl.h"
#include "clock.h"
#include "fdio.h"
#include "hash.h"
#include "near_check.h"
#include "near_key.h"
#include "near_spool.h"
#include "near_sums.h"
#include "near_verify.h"
#include "statdef.h"
#include "workers.h"

#define RECENT 4096 /* versions remembered as queued (a power of two) */
#define MAX_COPIERS 64
#define KEY_MAX 1024 /* S3's longest key, in bytes */

/* A copy's name (near_key.h), and the far checks remembered. */
#define NAME_MAX_LEN (KEY_MAX + TFS_NEAR_NAME_HEX + 2)
#define CHECK_SLOTS (1u << 15)
#define CAPTURE_MAX (64u << 20) /* longest far read copied for a near copy */

enum job_kind {
	JOB_COPY,   /* from data, or read from far again */
	JOB_SIZE,   /* HEAD far for a spooled object's size */
	JOB_UPLOAD, /* upload a spooled object's file (fd, len) */
};

struct copy_job {
	struct copy_job *next;
	enum job_kind kind;
	int fd; /* JOB_UPLOAD: the spool file, owned */
	char *key;
	char etag[TFS_ETAG_MAX];
	char *data;       /* the whole object, or NULL: read it from far */
	uint64_t len;     /* bytes of data */
	bool maybe_part;  /* data is the object's start: whole if far's size is len */
	uint64_t charged; /* bytes taken from the budget */
	/* Digests of the ranges as they arrived (near_verify.h), owned */
	struct tfs_nv_piece *pieces;
	size_t npieces;
	bool pieces_complete;
};

enum counter {
	C_HITS,          /* reads served by near */
	C_MISSES,        /* reads near had no copy for */
	C_ERRORS,        /* near reads that failed otherwise (then read from far) */
	C_SKIPPED,       /* reads not asked of near: breaker open */
	C_BREAKER,       /* times the breaker opened */
	C_QUEUED,        /* copies queued */
	C_COPIED,        /* copies written to near */
	C_COPY_BYTES,    /* their bytes */
	C_FAR_REREADS,   /* copies that read the object from far again */
	C_EXISTED,       /* copies another node had made (found by HEAD) */
	C_CHANGED,       /* copies given up: the far version changed */
	C_DROPPED,       /* copies dropped: budget full, too big, or unmount */
	C_FAILED,        /* copies that failed */
	C_WRITE_THROUGH, /* copies queued by a PUT (write_through) */
	C_SPOOLED,       /* copies assembled from the readers' ranges */
	C_FAR_CHECKS,    /* HEADs of far before a near read (near_check.h) */
	C_FAR_REFUSED,   /* near reads refused: far refused this mount */
	C_SPOOL_GIVEN_UP /* objects the spool gave up (then read from far again) */
};
/* Integrity (near_verify.h, near_sums.h) */
enum {
	C_VERIFIED_MD5 = C_SPOOL_GIVEN_UP + 1, /* copies checked against far's MD5 ETag */
	C_VERIFIED_MULTIPART,                  /* ...against far's multipart ETag */
	C_VERIFIED_RANGES,                     /* ...against the digests of the ranges read */
	C_UNVERIFIED,       /* copies not uploaded: nothing could vouch for them */
	C_MISMATCHED,       /* copies not uploaded: their bytes differ from far's */
	C_VERIFY_FAILED,    /* near reads whose block digests differ (read far; copy deleted) */
	C_VERIFIED_CHECKSUM /* copies checked against far's full-object checksum */
};
#define NCOUNTERS (C_VERIFIED_CHECKSUM + 1)

struct near {
	struct tfs_near_config cfg;
	struct tfs_backend *near, *far;
	const struct tfs_log *log;
	pthread_mutex_t lock; /* everything below but the counters */
	pthread_cond_t work;
	struct copy_job *head, *tail;
	uint64_t charged; /* budget in use by queued and running copies */
	bool stop;
	uint64_t recent[RECENT]; /* hashes of versions queued lately; 0 = none */
	unsigned recent_next;
	unsigned fails;         /* failed near reads in a row */
	uint64_t open_until_ms; /* breaker open until then (monotonic); 0: closed */
	bool probing;           /* a read is trying near after the breaker's time */
	struct tfs_workers pool;
	struct tfs_near_spools *spools; /* NULL: no spool */
	struct tfs_near_checks *checks;
	/* Copy names (near_key.h): far as they record it (owned copies of
	 * the config's strings), and the secret, set once (have_secret)
	 * under secret_lock. */
	char *src_endpoint, *src_bucket, *src_prefix;
	struct tfs_near_source src;
	pthread_mutex_t secret_lock;
	uint8_t secret[TFS_NEAR_SECRET_LEN];
	atomic_bool have_secret;
	struct tfs_near_sums *sums; /* the copies' digests */
	atomic_uint_fast64_t count[NCOUNTERS];
};

static void count(struct near *n, unsigned c, uint64_t v)
{
	atomic_fetch_add_explicit(&n->count[c], v, memory_order_relaxed);
}

/* The name of the copy of version `etag` of `key` into buf, checked
 * against near's key rules.  Returns 0, EAGAIN (no secret yet) or the
 * error of tfs_near_copy_name() or of near's check_key. */
static int copy_name(struct near *n, const char *key, const char *etag, char *buf, size_t cap)
{
	if (!atomic_load(&n->have_secret))
		return EAGAIN;
	int rc = tfs_near_copy_name(n->secret, &n->src, key, etag, buf, cap);
	return rc ? rc : tfs_backend_check_key(n->near, buf);
}

/* Read (or make) the secret kept in near, once.  Returns 0 or its
 * error (logged). */
static int load_secret(struct near *n)
{
	int rc = 0;
	pthread_mutex_lock(&n->secret_lock);
	if (!atomic_load(&n->have_secret)) {
		rc = tfs_near_secret_load(n->near, n->log, n->secret);
		if (rc == 0)
			atomic_store(&n->have_secret, true);
	}
	pthread_mutex_unlock(&n->secret_lock);
	return rc;
}

/* ---- the breaker ---- */

/* May a read ask near now?  Yes while the breaker is closed; once its time
 * is up, one read (the probe) may, and the others wait for its result.
 * Counts a read it turns away.  Every yes must be followed by
 * near_result(). */
static bool near_try_read(struct near *n)
{
	pthread_mutex_lock(&n->lock);
	bool ok = n->open_until_ms == 0;
	if (!ok && !n->probing && tfs_mono_ns() / 1000000 >= n->open_until_ms)
		ok = n->probing = true;
	pthread_mutex_unlock(&n->lock);
	if (!ok)
		count(n, C_SKIPPED, 1);
	return ok;
}

/* Whether the breaker is closed (copies ask near only then). */
static bool near_closed(struct near *n)
{
	pthread_mutex_lock(&n->lock);
	bool ok = n->open_until_ms == 0;
	pthread_mutex_unlock(&n->lock);
	return ok;
}

/* Whether a read may ask near now or soon: the breaker is closed, or its
 * time is up (near_try_read() then decides).  A hint: takes no turn. */
static bool near_usable(struct near *n)
{
	pthread_mutex_lock(&n->lock);
	bool ok = n->open_until_ms == 0 ||
		  (!n->probing && tfs_mono_ns() / 1000000 >= n->open_until_ms);
	pthread_mutex_unlock(&n->lock);
	return ok;
}

/* A near request answered (ok: even "no such copy") or failed.  While the
 * breaker is open, only requests made before it opened can answer (the
 * reads and copies that were under way): their answers neither close it
 * (a fast HEAD says nothing of slow GETs) nor open it again.  Once
 * breaker_ms has passed, the probe (near_try_read()) decides: its failure
 * opens the breaker again at once, as do breaker_errors failures in a
 * row while it is closed. */
static void near_result(struct near *n, bool ok)
{
	pthread_mutex_lock(&n->lock);
	if (n->open_until_ms != 0 && tfs_mono_ns() / 1000000 < n->open_until_ms) {
		/* open: an answer to an older request */
	} else if (ok) {
		n->probing = false;
		n->fails = 0;
		n->open_until_ms = 0;
	} else if (n->open_until_ms || ++n->fails >= n->cfg.breaker_errors) {
		n->probing = false;
		n->fails = 0;
		n->open_until_ms = tfs_mono_ns() / 1000000 + n->cfg.breaker_ms;
		count(n, C_BREAKER, 1);
		tfs_warn(n->log, "near: %s fails: reading from %s alone for %u ms",
			 tfs_backend_describe(n->near), tfs_backend_describe(n->far),
			 n->cfg.breaker_ms);
	}
	pthread_mutex_unlock(&n->lock);
}

/* ---- copies ---- */

static uint64_t version_hash(const char *key, const char *etag)
{
	uint64_t h = tfs_fnv1a_str(TFS_FNV1A_INIT, key);
	h = tfs_fnv1a_byte(h, 0xff); /* a separator no key holds */
	h = tfs_fnv1a_str(h, etag);
	return h ? h : 1;
}

/* Whether the version was queued lately.  Lock held. */
static bool recently_queued(struct near *n, const char *key, const char *etag)
{
	uint64_t h = version_hash(key, etag);
	for (unsigned i = 0; i < RECENT; i++)
		if (n->recent[i] == h)
			return true;
	return false;
}

/* Remember the version as queued; false when it already was.  Lock held. */
static bool first_time(struct near *n, const char *key, const char *etag)
{
	if (recently_queued(n, key, etag))
		return false;
	n->recent[n->recent_next] = version_hash(key, etag);
	n->recent_next = (n->recent_next + 1) & (RECENT - 1);
	return true;
}

/* Forget that the version was queued (its copy was found bad and
 * deleted: the next read copies it again). */
static void forget_queued(struct near *n, const char *key, const char *etag)
{
	uint64_t h = version_hash(key, etag);
	pthread_mutex_lock(&n->lock);
	for (unsigned i = 0; i < RECENT; i++)
		if (n->recent[i] == h)
			n->recent[i] = 0;
	pthread_mutex_unlock(&n->lock);
}

static void job_free(struct copy_job *j)
{
	if (j) {
		if (j->fd >= 0)
			close(j->fd);
		free(j->key);
		free(j->data);
		free(j->pieces);
		free(j);
	}
}

/* Copy `len` bytes of `src` (a buffer, fd or iovec) into a new buffer. */
static char *gather(struct tfs_io src, uint64_t len)
{
	char *p = malloc(len ? len : 1);
	if (p == NULL)
		return NULL;
	if (src.kind == TFS_IO_BUF) {
		memcpy(p, src.cbuf, len);
	} else if (src.kind == TFS_IO_FD) {
		if (tfs_pread_full(src.fd, p, len, src.off) != (ssize_t)len) {
			free(p);
			return NULL;
		}
	} else {
		uint64_t at = 0;
		for (int i = 0; i < src.iovcnt && at < len; i++) {
			uint64_t k = src.iov[i].iov_len < len - at ? src.iov[i].iov_len : len - at;
			memcpy(p + at, src.iov[i].iov_base, k);
			at += k;
		}
		if (at != len) {
			free(p);
			return NULL;
		}
	}
	return p;
}

/* Make j's pieces one digest of its data (j->len bytes, from offset 0),
 * taken now: data from a reader's private copy or a far read of its own.
 * Without memory the job has no pieces (then only far's ETag can vouch
 * for it). */
static void job_piece(struct copy_job *j)
{
	free(j->pieces);
	j->npieces = 0;
	j->pieces = malloc(sizeof(*j->pieces));
	if (j->pieces == NULL)
		return;
	tfs_nv_piece_make(j->pieces, 0, tfs_io_cbuf(j->data), j->len);
	j->npieces = 1;
	j->pieces_complete = true;
}

/* Give j the pieces of a done spool result (res's are then j's). */
static void job_take_pieces(struct copy_job *j, struct tfs_spool_result *res)
{
	free(j->pieces);
	j->pieces = res->pieces;
	j->npieces = res->npieces;
	j->pieces_complete = res->pieces_complete;
	res->pieces = NULL;
}

/* Hand a job to the copiers. */
static void enqueue(struct near *n, struct copy_job *j)
{
	pthread_mutex_lock(&n->lock);
	if (n->tail)
		n->tail->next = j;
	else
		n->head = j;
	n->tail = j;
	pthread_cond_signal(&n->work);
	pthread_mutex_unlock(&n->lock);
}

/* A new job of `kind` for version `etag` of `key` (fd: JOB_UPLOAD's file,
 * owned by the job from now on), or NULL on ENOMEM (fd closed). */
static struct copy_job *job_new(enum job_kind kind, const char *key, const char *etag, int fd,
				uint64_t len)
{
	struct copy_job *j = calloc(1, sizeof(*j));
	if (j)
		j->key = strdup(key);
	if (j == NULL || j->key == NULL) {
		free(j);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	j->kind = kind;
	j->fd = fd;
	j->len = len;
	snprintf(j->etag, sizeof(j->etag), "%s", etag);
	return j;
}

/* Queue a copy of version `etag` of `key`: from `src` when it holds the
 * whole object (`whole`, `len` bytes) or may (`maybe_part`: the object's
 * first `len` bytes), else to be read from far.  Never blocks on the
 * budget: a copy that does not fit is dropped. */
static void queue_copy(struct near *n, const char *key, const char *etag, bool whole,
		       bool maybe_part, struct tfs_io src, uint64_t len, enum counter why)
{
	if (*etag == '\0' || !near_closed(n))
		return;
	if (whole && len > n->cfg.copy_budget) {
		count(n, C_DROPPED, 1);
		return;
	}
	pthread_mutex_lock(&n->lock);
	/* A copy dropped for the budget is not remembered: a later read
	 * may queue it. */
	bool fits = n->charged + (whole ? len : 0) <= n->cfg.copy_budget;
	bool fresh = !n->stop && (!fits || first_time(n, key, etag));
	if (fresh && fits)
		n->charged += whole ? len : 0;
	pthread_mutex_unlock(&n->lock);
	if (!fresh)
		return;
	struct copy_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->fd = -1;
		j->key = strdup(key);
	}
	if (fits && whole && j && j->key) {
		j->data = gather(src, len);
		j->len = len;
		j->charged = len;
		if (j->data)
			job_piece(j);
	}
	if (!fits || j == NULL || j->key == NULL || (whole && j->data == NULL)) {
		count(n, C_DROPPED, 1);
		pthread_mutex_lock(&n->lock);
		n->charged -= fits && whole ? len : 0;
		pthread_mutex_unlock(&n->lock);
		job_free(j);
		return;
	}
	snprintf(j->etag, sizeof(j->etag), "%s", etag);
	j->maybe_part = whole && maybe_part;
	count(n, C_QUEUED, 1);
	if (why != C_QUEUED)
		count(n, why, 1);
	enqueue(n, j);
}

/* Read the whole current version of j->key from far into j->data, taking
 * its size from the budget; when j->data already holds as many bytes as
 * far's HEAD says the object has, keep them.  Returns 0, ESTALE (the
 * version changed),
 * EFBIG (above the budget: dropped), EAGAIN (the budget is in use) or the
 * far read's error. */
static int reread(struct near *n, struct copy_job *j)
{
	struct tfs_obj_meta m = { 0 };
	int rc = tfs_backend_head(n->far, j->key, &m);
	uint64_t size = m.size;
	bool same = rc == 0 && strcmp(m.etag, j->etag) == 0;
	tfs_obj_meta_clear(&m);
	if (rc)
		return rc;
	if (!same)
		return ESTALE;
	if (j->data && size == j->len)
		return 0; /* what the reader read was the whole object */
	if (size > n->cfg.copy_budget)
		return EFBIG;
	pthread_mutex_lock(&n->lock);
	n->charged -= j->charged;
	j->charged = 0;
	free(j->data);
	j->data = NULL;
	bool fits = n->charged + size <= n->cfg.copy_budget;
	if (fits)
		n->charged += size;
	pthread_mutex_unlock(&n->lock);
	if (!fits)
		return EAGAIN;
	j->charged = size;
	j->data = malloc(size ? size : 1);
	if (j->data == NULL)
		return ENOMEM;
	size_t got = 0;
	char etag[TFS_ETAG_MAX];
	count(n, C_FAR_REREADS, 1);
	rc = tfs_backend_get_range(n->far, j->key, 0, size, j->etag, tfs_io_buf(j->data), &got,
				   etag);
	if (rc == 0 && got != size)
		rc = ESTALE; /* shorter than its HEAD said: it changed */
	j->len = got;
	if (rc == 0)
		job_piece(j);
	return rc;
}

/* The near key of j's version into nk, checked: false (counted as
 * dropped) when it has none, or while the breaker is open. */
static bool job_key(struct near *n, const struct copy_job *j, char *nk, size_t cap)
{
	int rc = copy_name(n, j->key, j->etag, nk, cap);
	if (rc || !near_closed(n)) {
		count(n, C_DROPPED, 1);
		return false;
	}
	return true;
}

/* Whether near lacks the copy nk (one HEAD): true to go on.  Counts a copy
 * another node made, and a failure. */
static bool near_lacks(struct near *n, const char *nk)
{
	int rc = tfs_near_sums_has(n->sums, nk); /* ENOENT also for a copy without digests */
	if (rc == 0) {
		near_result(n, true);
		count(n, C_EXISTED, 1);
		return false;
	}
	if (rc != ENOENT) {
		near_result(n, false);
		count(n, C_FAILED, 1);
		return false;
	}
	return true;
}

/* What far says of j's version now: false (counted) when it changed or
 * far cannot say. */
static bool far_says(struct near *n, const struct copy_job *j, struct tfs_obj_check *c)
{
	int rc = tfs_backend_head_check(n->far, j->key, c);
	if (rc == ENOTSUP) {
		struct tfs_obj_meta m = { 0 };
		memset(c, 0, sizeof(*c));
		rc = tfs_backend_head(n->far, j->key, &m);
		memcpy(c->etag, m.etag, sizeof(c->etag));
		c->size = m.size;
		tfs_obj_meta_clear(&m);
	}
	if (rc == 0 && strcmp(c->etag, j->etag) == 0)
		return true;
	count(n, rc == 0 || rc == ENOENT ? C_CHANGED : C_FAILED, 1);
	return false;
}

/* Write the copy nk of j's version, `len` bytes from `src`, once they are
 * verified against far's value for the version, or else against j's
 * pieces (near_verify.h); bytes nothing vouches for are not uploaded. */
static void put_copy(struct near *n, const char *nk, const struct copy_job *j, struct tfs_io src,
		     uint64_t len)
{
	struct tfs_obj_check c;
	if (!far_says(n, j, &c))
		return;
	struct tfs_nv_far far = { .etag = c.etag,
				  .size = c.size,
				  .part_size = c.part_size,
				  .encrypted = c.encrypted,
				  .checksum_alg = c.checksum_alg,
				  .checksum = c.checksum };
	struct tfs_nv_sums sums;
	enum tfs_nv_how how;
	int rc = tfs_nv_verify(src, len, &far, j->pieces, j->npieces, j->pieces_complete, &sums,
			       &how);
	if (rc) {
		tfs_warn(n->log, "near: copy of '%s' (%s) not made: %s", j->key, j->etag,
			 rc == EBADMSG   ? "its bytes differ from far's"
			 : rc == ENOTSUP ? "nothing vouches for its bytes"
					 : strerror(rc));
		count(n, rc == EBADMSG ? C_MISMATCHED : rc == ENOTSUP ? C_UNVERIFIED : C_FAILED, 1);
		return;
	}
	count(n,
	      how == TFS_NV_MD5         ? C_VERIFIED_MD5
	      : how == TFS_NV_MULTIPART ? C_VERIFIED_MULTIPART
	      : how == TFS_NV_CHECKSUM  ? C_VERIFIED_CHECKSUM
					: C_VERIFIED_RANGES,
	      1);
	struct tfs_obj_meta m = { 0 };
	rc = tfs_obj_meta_set(&m, TFS_NEAR_COPY_TAG, TFS_NEAR_COPY_TAG_VALUE);
	if (rc == 0)
		rc = tfs_obj_meta_set(&m, "tierfs-etag", j->etag);
	if (rc == 0 && strlen(j->key) < KEY_MAX)
		rc = tfs_obj_meta_set(&m, "tierfs-key", j->key);
	if (rc == 0)
		rc = tfs_near_sums_put(n->sums, nk, &m, src, len, &sums);
	tfs_obj_meta_clear(&m);
	tfs_nv_sums_clear(&sums);
	near_result(n, rc == 0);
	if (rc) {
		tfs_debug(n->log, "near: copy of '%s' failed: %s", j->key, strerror(rc));
		count(n, C_FAILED, 1);
		return;
	}
	count(n, C_COPIED, 1);
	count(n, C_COPY_BYTES, len);
}

/* Upload a spooled object's file: the readers' bytes, whole. */
static void upload_spooled(struct near *n, const struct copy_job *j, int fd, uint64_t size)
{
	char nk[NAME_MAX_LEN];
	if (job_key(n, j, nk, sizeof(nk)) && near_lacks(n, nk)) {
		put_copy(n, nk, j, tfs_io_fd(fd, 0), size);
		count(n, C_SPOOLED, 1);
	}
}

/* A spooled object's size, from far; uploads it if that makes it whole. */
static void size_spooled(struct near *n, struct copy_job *j)
{
	struct tfs_obj_meta m = { 0 };
	struct tfs_spool_result res;
	int rc = tfs_backend_head(n->far, j->key, &m);
	bool same = rc == 0 && strcmp(m.etag, j->etag) == 0;
	uint64_t size = m.size;
	tfs_obj_meta_clear(&m);
	if (!same)
		count(n, C_CHANGED, 1);
	tfs_near_spool_sized(n->spools, j->key, j->etag, same ? size : UINT64_MAX, &res);
	if (res.done_fd >= 0) {
		job_take_pieces(j, &res);
		upload_spooled(n, j, res.done_fd, res.size);
		close(res.done_fd);
	}
}

/* One copy: skip it if near has it, else write it there. */
static void copy_one(struct near *n, struct copy_job *j)
{
	char nk[NAME_MAX_LEN];
	if (j->kind == JOB_SIZE) {
		size_spooled(n, j);
		return;
	}
	if (j->kind == JOB_UPLOAD) {
		upload_spooled(n, j, j->fd, j->len);
		return;
	}
	if (!job_key(n, j, nk, sizeof(nk)) || !near_lacks(n, nk))
		return;
	if (j->data == NULL || j->maybe_part) {
		int rc = reread(n, j);
		if (rc == ESTALE || rc == ENOENT) {
			count(n, C_CHANGED, 1);
			return;
		}
		if (rc == EFBIG || rc == EAGAIN) {
			count(n, C_DROPPED, 1);
			return;
		}
		if (rc) {
			count(n, C_FAILED, 1);
			return;
		}
	}
	put_copy(n, nk, j, tfs_io_buf(j->data), j->len);
}

/* The spool gave an object up (idle): copy it by reading it from far.
 * The object was counted as queued when it was spooled. */
static void spool_abandoned(void *ctx, const char *key, const char *etag)
{
	struct near *n = ctx;
	count(n, C_SPOOL_GIVEN_UP, 1);
	struct copy_job *j = job_new(JOB_COPY, key, etag, -1, 0);
	if (j == NULL) {
		count(n, C_DROPPED, 1);
		return;
	}
	enqueue(n, j);
}

/* Spool the range a reader fetched from far.  Returns false when the
 * caller should queue a copy the other way. */
static bool spool_range(struct near *n, const char *key, const char *etag, uint64_t off,
			struct tfs_io src, uint64_t len)
{
	struct tfs_spool_result res;
	if (n->spools == NULL || src.kind == TFS_IO_FD || *etag == '\0' || !near_closed(n))
		return false;
	pthread_mutex_lock(&n->lock);
	bool known = recently_queued(n, key, etag);
	pthread_mutex_unlock(&n->lock);
	int rc = tfs_near_spool_add(n->spools, key, etag, off, src, len, &res);
	if (rc == ESTALE || (rc == 0 && known && res.first)) {
		/* done already, or queued lately another way: let it be */
		if (rc == 0 && res.first)
			tfs_near_spool_sized(n->spools, key, etag, UINT64_MAX, &res);
		return true;
	}
	if (rc) {
		tfs_debug(n->log, "near: spooling '%s': %s", key, strerror(rc));
		if (rc == EDQUOT || rc == ENFILE || rc == ENOMEM || rc == EINVAL)
			return false;          /* not spooled */
		spool_abandoned(n, key, etag); /* given up (E2BIG, the file's error) */
		return true;
	}
	if (res.first) {
		pthread_mutex_lock(&n->lock);
		(void)first_time(n, key, etag);
		pthread_mutex_unlock(&n->lock);
		struct copy_job *j = job_new(JOB_SIZE, key, etag, -1, 0);
		if (j)
			enqueue(n, j);
		count(n, C_QUEUED, 1);
	}
	if (res.done_fd >= 0) {
		struct copy_job *j = job_new(JOB_UPLOAD, key, etag, res.done_fd, res.size);
		if (j) {
			job_take_pieces(j, &res);
			enqueue(n, j);
		}
		free(res.pieces);
	}
	return true;
}

static void *copier(void *arg)
{
	struct tfs_worker *w = arg;
	struct near *n = w->ctx;
	pthread_mutex_lock(&n->lock);
	while (!n->stop && !tfs_workers_retire(w)) {
		struct copy_job *j = n->head;
		if (j == NULL) {
			pthread_cond_wait(&n->work, &n->lock);
			continue;
		}
		n->head = j->next;
		if (n->head == NULL)
			n->tail = NULL;
		pthread_mutex_unlock(&n->lock);
		copy_one(n, j);
		pthread_mutex_lock(&n->lock);
		n->charged -= j->charged;
		pthread_mutex_unlock(&n->lock);
		job_free(j);
		pthread_mutex_lock(&n->lock);
	}
	pthread_mutex_unlock(&n->lock);
	return NULL;
}

/* ---- the ops ---- */

/* Whether this mount's credentials may read version `etag` of `key` from
 * far (near_check.h): remembered, or asked now (HEAD).  Returns 0 (yes),
 * ESTALE (far has another version: read far) or far's error (EACCES,
 * ENOENT, EIO: the reader's). */
static int far_check(struct near *n, const char *key, const char *etag)
{
	const char *who = tfs_backend_cache_identity(n->far);
	if (tfs_near_checks_passed(n->checks, who, key, etag, tfs_mono_ms()))
		return 0;
	count(n, C_FAR_CHECKS, 1);
	struct tfs_obj_meta m = { 0 };
	int rc = tfs_backend_head(n->far, key, &m);
	if (rc == 0 && strcmp(m.etag, etag) != 0)
		rc = ESTALE;
	tfs_obj_meta_clear(&m);
	if (rc == 0)
		tfs_near_checks_note(n->checks, who, key, etag, tfs_mono_ms());
	else if (rc != ESTALE)
		count(n, C_FAR_REFUSED, 1);
	return rc;
}

/* Serve the read from near's copy of version if_match, if there is one
 * and far lets this mount read that version: *served.  Returns 0, or the
 * far check's error, which is the reader's. */
static int read_near(struct near *n, const char *key, uint64_t off, uint64_t len,
		     const char *if_match, struct tfs_io dst, size_t *got, bool *served)
{
	char nk[NAME_MAX_LEN];
	*served = false;
	if (!atomic_load(&n->have_secret)) {
		if (!near_try_read(n))
			return 0;
		int rc = load_secret(n);
		near_result(n, rc == 0);
		if (rc)
			return 0;
	}
	if (copy_name(n, key, if_match, nk, sizeof(nk)) != 0)
		return 0;
	int rc = far_check(n, key, if_match);
	if (rc)
		return rc == ESTALE ? 0 : rc;
	if (!near_try_read(n))
		return 0;
	/* Every block read is checked against the copy's digests
	 * (near_sums.h) before a byte reaches dst. */
	rc = tfs_near_sums_read(n->sums, nk, off, len, dst);
	if (rc == 0) {
		near_result(n, true);
		count(n, C_HITS, 1);
		*got = len;
		*served = true;
		return 0;
	}
	/* No copy (or none with digests), one shorter than the bytes asked
	 * (the read goes past the end, which far answers as well), or a
	 * copy that failed its digests (deleted): ask far. */
	bool answered = rc == ENOENT || rc == ERANGE || rc == EBADMSG;
	if (rc == EBADMSG)
		forget_queued(n, key, if_match);
	near_result(n, answered);
	count(n, rc == EBADMSG ? C_VERIFY_FAILED : answered ? C_MISSES : C_ERRORS, 1);
	if (!answered)
		tfs_debug(n->log, "near: reading '%s' from %s: %s; reading %s", key,
			  tfs_backend_describe(n->near), strerror(rc),
			  tfs_backend_describe(n->far));
	return 0;
}

/* A private copy of a far read's bytes, for its near copy.  A TFS_IO_IOV
 * destination with progress hands each buffer to the caller as soon as it
 * is full, and the caller may reuse it at once (for another block), so
 * the bytes are copied here when each buffer is reported, before it is
 * passed up, and never read from the caller's buffers afterwards. */
struct capture {
	struct tfs_io_progress mine; /* what the far backend reports to */
	struct tfs_io_progress *up;  /* the caller's */
	const struct iovec *iov;
	char *buf; /* the bytes read, in order */
};

static void capture_done(void *ctx, int i)
{
	struct capture *c = ctx;
	size_t len = c->iov[i].iov_len;
	memcpy(c->buf + c->mine.done_bytes - len, c->iov[i].iov_base, len);
	/* only now may the caller have (and reuse) the buffer */
	c->up->ndone++;
	c->up->done_bytes += len;
	c->up->done(c->up->ctx, i);
}

/* Set c up to capture a far read of len bytes into *dst (then read with
 * c's progress).  False when no copy is to be made of it (the bytes are
 * then not captured: the copy, if any, reads far again). */
static bool capture_start(struct near *n, struct capture *c, struct tfs_io *dst, uint64_t len)
{
	memset(c, 0, sizeof(*c));
	if (dst->kind != TFS_IO_IOV || dst->progress == NULL)
		return true; /* the caller's buffers are ours until we return */
	if (len > CAPTURE_MAX || !near_closed(n) || (c->buf = malloc(len ? len : 1)) == NULL)
		return false;
	c->up = dst->progress;
	c->iov = dst->iov;
	c->mine.done = capture_done;
	c->mine.ctx = c;
	c->mine.background = c->up->background;
	dst->progress = &c->mine;
	return true;
}

/* The source of the bytes a far read delivered (got bytes into dst):
 * the capture, completed with the buffers not reported (still ours). */
static struct tfs_io capture_end(struct capture *c, struct tfs_io dst, size_t got)
{
	if (c->buf == NULL)
		return dst;
	uint64_t at = c->mine.done_bytes;
	for (int i = c->mine.ndone; i < dst.iovcnt && at < got; i++) {
		size_t k = dst.iov[i].iov_len < got - at ? dst.iov[i].iov_len : got - at;
		memcpy(c->buf + at, dst.iov[i].iov_base, k);
		at += k;
	}
	return tfs_io_cbuf(c->buf);
}

static int near_get_range(void *priv, const char *key, uint64_t off, uint64_t len,
			  const char *if_match, struct tfs_io dst, size_t *got,
			  char etag_out[TFS_ETAG_MAX])
{
	struct near *n = priv;
	bool known = if_match && *if_match;

	if (known && !near_usable(n))
		count(n, C_SKIPPED, 1);
	else if (known) {
		bool served = false;
		int rc = read_near(n, key, off, len, if_match, dst, got, &served);
		if (rc || served) {
			if (rc == 0)
				snprintf(etag_out, TFS_ETAG_MAX, "%s", if_match);
			return rc;
		}
	}
	struct capture cap;
	bool copy = capture_start(n, &cap, &dst, len);
	int rc = tfs_backend_get_range(n->far, key, off, len, if_match, dst, got, etag_out);
	if (rc == 0 && *etag_out) /* far let this mount read that version */
		tfs_near_checks_note(n->checks, tfs_backend_cache_identity(n->far), key, etag_out,
				     tfs_mono_ms());
	if (rc == 0 && copy && (*got > 0 || off == 0)) {
		struct tfs_io src = capture_end(&cap, dst, *got);
		/* From offset 0, the bytes read are the object when it ended
		 * first; they may be when the read asked for exactly its size
		 * (a small file is one block), which the spool, or else the
		 * copier, finds out. */
		bool ended = off == 0 && *got < len;
		bool whole = off == 0 && src.kind != TFS_IO_FD && *got <= n->cfg.copy_budget;
		if (ended || !spool_range(n, key, etag_out, off, src, *got))
			queue_copy(n, key, etag_out, whole, *got == len, src, *got, C_QUEUED);
	} else if (rc == 0 && !copy && (*got > 0 || off == 0)) {
		/* not captured: a copy, if any, reads the object from far */
		queue_copy(n, key, etag_out, false, false, dst, *got, C_QUEUED);
	}
	free(cap.buf);
	return rc;
}

static int near_head(void *priv, const char *key, struct tfs_obj_meta *out)
{
	struct near *n = priv;
	int rc = tfs_backend_head(n->far, key, out);
	if (rc == 0 && out->etag[0]) /* far let this mount read that version */
		tfs_near_checks_note(n->checks, tfs_backend_cache_identity(n->far), key, out->etag,
				     tfs_mono_ms());
	return rc;
}

static int near_list(void *priv, const char *prefix, const char *delimiter, const char *token,
		     size_t max_keys, struct tfs_list_page *out)
{
	struct near *n = priv;
	return tfs_backend_list(n->far, prefix, delimiter, token, max_keys, out);
}

static int near_put(void *priv, const char *key, struct tfs_io src, uint64_t len,
		    const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct near *n = priv;
	int rc = tfs_backend_put(n->far, key, src, len, meta, etag_out);
	size_t kl = strlen(key);
	/* a directory marker is never read: no copy */
	if (rc == 0 && n->cfg.write_through && kl && key[kl - 1] != '/')
		queue_copy(n, key, etag_out, true, false, src, len, C_WRITE_THROUGH);
	return rc;
}

static int near_del(void *priv, const char *key)
{
	struct near *n = priv;
	return tfs_backend_delete(n->far, key);
}

static int near_copy(void *priv, const char *src, const char *dst, uint64_t size,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct near *n = priv;
	return tfs_backend_copy(n->far, src, dst, size, meta, etag_out);
}

static bool near_wants_multipart(void *priv, uint64_t len)
{
	struct near *n = priv;
	uint64_t threshold = 0, part = 0;
	unsigned par = 0;
	return tfs_backend_multipart_geometry(n->far, &threshold, &part, &par) && len >= threshold;
}

static int near_put_resumable(void *priv, const char *key, struct tfs_io src, uint64_t len,
			      const struct tfs_obj_meta *meta, struct tfs_mpu *st, tfs_mpu_fn fn,
			      void *ctx, char etag_out[TFS_ETAG_MAX])
{
	struct near *n = priv;
	int rc = tfs_backend_put_resumable(n->far, key, src, len, meta, st, fn, ctx, etag_out);
	if (rc == 0 && n->cfg.write_through)
		queue_copy(n, key, etag_out, true, false, src, len, C_WRITE_THROUGH);
	return rc;
}

static int near_abort_upload(void *priv, const char *key, const char *upload_id)
{
	struct near *n = priv;
	return tfs_backend_abort_upload(n->far, key, upload_id);
}

static int near_upload_begin(void *priv, const char *key, const struct tfs_obj_meta *meta,
			     char upload_id[TFS_UPLOAD_ID_MAX])
{
	struct near *n = priv;
	return tfs_backend_upload_begin(n->far, key, meta, upload_id);
}

static int near_upload_part(void *priv, const char *key, const char *upload_id, unsigned idx,
			    struct tfs_io src, uint64_t len, char etag_out[TFS_ETAG_MAX])
{
	struct near *n = priv;
	return tfs_backend_upload_part(n->far, key, upload_id, idx, src, len, etag_out);
}

static void near_multipart_geometry(void *priv, uint64_t *threshold, uint64_t *part_size,
				    unsigned *parallel)
{
	struct near *n = priv;
	(void)tfs_backend_multipart_geometry(n->far, threshold, part_size, parallel);
}

static int near_count_uploads(void *priv, const char *prefix, size_t *out)
{
	struct near *n = priv;
	return tfs_backend_count_uploads(n->far, prefix, out);
}

static const char *near_cache_identity(void *priv)
{
	struct near *n = priv;
	return tfs_backend_cache_identity(n->far);
}

static int near_check_key(void *priv, const char *key)
{
	struct near *n = priv;
	return tfs_backend_check_key(n->far, key);
}

/* The "backend.near" stats. */
struct near_snap {
	uint64_t count[NCOUNTERS];
	uint64_t copy_budget_used, spool_bytes;
	bool breaker_open;
	struct json_object *store, *far;
};

#define C(c, key, ...) TFS_STAT_KEY(struct near_snap, count[c], key, __VA_ARGS__)
#define ROW(f, ...) TFS_STAT(struct near_snap, f, __VA_ARGS__)
#define DIAG TFS_JSON_ONLY, NULL, "a diagnostic of the copies"
/* In the order of enum counter: the members come in the rows' order. */
static const struct tfs_statdef near_rows[] = {
	C(C_HITS, "hits", TFS_COUNTER, "tierfs_near_hits_total", "Reads served by the near copy."),
	C(C_MISSES, "misses", TFS_COUNTER, "tierfs_near_misses_total",
	  "Reads the near copy had no copy for (read from far)."),
	C(C_ERRORS, "errors", TFS_COUNTER, "tierfs_near_errors_total",
	  "Near reads that failed otherwise (read from far, no error to the reader)."),
	C(C_SKIPPED, "skipped_breaker_open", TFS_COUNTER, "tierfs_near_skipped_total",
	  "Reads not asked of near: its breaker was open."),
	C(C_BREAKER, "breaker_opens", TFS_COUNTER, "tierfs_near_breaker_opens_total",
	  "Times the near breaker opened."),
	C(C_QUEUED, "copies_queued", DIAG),
	C(C_COPIED, "copies", TFS_COUNTER, "tierfs_near_copies_total", "Copies written to near."),
	C(C_COPY_BYTES, "copy_bytes", TFS_COUNTER, "tierfs_near_copy_bytes_total",
	  "Bytes of the copies written to near."),
	C(C_FAR_REREADS, "copy_far_rereads", TFS_COUNTER, "tierfs_near_copy_far_rereads_total",
	  "Copies that read their object from far again."),
	C(C_EXISTED, "copies_existing", DIAG),
	C(C_CHANGED, "copies_changed", DIAG),
	C(C_DROPPED, "copies_dropped", TFS_COUNTER, "tierfs_near_copies_dropped_total",
	  "Copies dropped (budget, size, breaker open, unmount)."),
	C(C_FAILED, "copies_failed", TFS_COUNTER, "tierfs_near_copies_failed_total",
	  "Copies that failed."),
	C(C_WRITE_THROUGH, "copies_write_through", DIAG),
	C(C_SPOOLED, "copies_spooled", DIAG),
	C(C_FAR_CHECKS, "far_checks", TFS_COUNTER, "tierfs_near_far_checks_total",
	  "HEADs of far before a near read: this mount's credentials had not read that version "
	  "lately."),
	C(C_FAR_REFUSED, "far_refused", TFS_COUNTER, "tierfs_near_far_refused_total",
	  "Near reads failed with far's error: far refused this mount the version."),
	C(C_SPOOL_GIVEN_UP, "spool_given_up", DIAG),
	C(C_VERIFIED_MD5, "copies_verified_md5", DIAG),
	C(C_VERIFIED_MULTIPART, "copies_verified_multipart", DIAG),
	C(C_VERIFIED_RANGES, "copies_verified_ranges", DIAG),
	C(C_UNVERIFIED, "copies_unverified", TFS_COUNTER, "tierfs_near_copies_unverified_total",
	  "Copies not uploaded: nothing from far could vouch for their bytes."),
	C(C_MISMATCHED, "copies_mismatched", TFS_COUNTER, "tierfs_near_copies_mismatched_total",
	  "Copies not uploaded: their bytes differed from far's ETag or range digests."),
	C(C_VERIFY_FAILED, "verify_failed", TFS_COUNTER, "tierfs_near_verify_failed_total",
	  "Near reads whose block digests differed (read from far; the copy deleted)."),
	C(C_VERIFIED_CHECKSUM, "copies_verified_checksum", DIAG),
	ROW(copy_budget_used, TFS_JSON_ONLY, NULL, "a diagnostic of the copy budget"),
	ROW(spool_bytes, TFS_GAUGE, "tierfs_near_spool_bytes",
	    "Bytes in the spool files assembling copies of objects read in parts."),
	ROW(breaker_open, TFS_JSON_ONLY, NULL,
	    "a diagnostic: tierfs_near_breaker_opens_total counts"),
	ROW(store, TFS_JSON_ONLY, NULL,
	    "the near store's backend stats; near's own rows count its use"),
	ROW(far, TFS_JSON_ONLY, NULL, "far's backend stats; tierfs_near_far_bytes_total reads one"),
};
#undef DIAG
#undef ROW
#undef C

const struct tfs_stattab tfs_near_stattab = TFS_STATTAB("backend.near", near_rows);

/* Far's GET bytes: a member of far's backend stats (backend.c's rows). */
static const struct tfs_statdef near_far_rows[] = {
	TFS_STAT(struct tfs_backend_op_snap, payload_bytes, TFS_COUNTER,
		 "tierfs_near_far_bytes_total", "Bytes read from far (the cloud bucket)."),
};

const struct tfs_stattab tfs_near_far_stattab =
	TFS_STATTAB("backend.near.far.get", near_far_rows, .metrics_only = true);

static void near_stats(void *priv, struct json_object *out)
{
	struct near *n = priv;
	struct near_snap s;
	for (int i = 0; i < NCOUNTERS; i++)
		s.count[i] = atomic_load(&n->count[i]);
	pthread_mutex_lock(&n->lock);
	s.copy_budget_used = n->charged;
	s.breaker_open = n->open_until_ms && tfs_mono_ns() / 1000000 < n->open_until_ms;
	pthread_mutex_unlock(&n->lock);
	s.spool_bytes = n->spools ? tfs_near_spool_bytes(n->spools) : 0;
	s.store = tfs_backend_stats_json(n->near);
	s.far = tfs_backend_stats_json(n->far);
	(void)tfs_stat_add_section(out, &tfs_near_stattab, &s);
}

/* Stop the copiers (the running copies end first) and close the spool. */
static void stop_copiers(struct near *n)
{
	pthread_mutex_lock(&n->lock);
	n->stop = true;
	pthread_cond_broadcast(&n->work);
	pthread_mutex_unlock(&n->lock);
	tfs_workers_stop(&n->pool);
	tfs_near_spools_destroy(n->spools);
	n->spools = NULL;
	tfs_near_sums_destroy(n->sums);
	n->sums = NULL;
}

/* Free what tfs_near_create() made besides the copiers and the stores. */
static void free_state(struct near *n)
{
	tfs_near_checks_destroy(n->checks);
	free(n->src_endpoint);
	free(n->src_bucket);
	free(n->src_prefix);
	pthread_mutex_destroy(&n->secret_lock);
	pthread_cond_destroy(&n->work);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

/* The secret copies are named with (near_key.h): near.key's, or the one
 * kept in near.  When near cannot give it, the breaker opens: reads go to
 * far, and the first read after breaker_ms tries again. */
static void start_secret(struct near *n, const char *key)
{
	if (key) {
		tfs_near_secret_from_text(key, strlen(key), n->secret);
		atomic_store(&n->have_secret, true);
		return;
	}
	if (load_secret(n) == 0)
		return;
	pthread_mutex_lock(&n->lock);
	n->open_until_ms = tfs_mono_ns() / 1000000 + n->cfg.breaker_ms;
	pthread_mutex_unlock(&n->lock);
	count(n, C_BREAKER, 1);
	tfs_warn(n->log, "near: no secret from %s yet: reading from %s alone for %u ms",
		 tfs_backend_describe(n->near), tfs_backend_describe(n->far), n->cfg.breaker_ms);
}

static void near_destroy(void *priv)
{
	struct near *n = priv;
	stop_copiers(n);
	for (struct copy_job *j = n->head, *next; j; j = next) {
		next = j->next;
		count(n, C_DROPPED, 1);
		job_free(j);
	}
	tfs_backend_destroy(n->near);
	tfs_backend_destroy(n->far);
	free_state(n);
}

#define COMMON_OPS                                                                               \
	.name = "near", .head = near_head, .list = near_list, .get_range = near_get_range,       \
	.put = near_put, .del = near_del, .copy = near_copy,                                     \
	.cache_identity = near_cache_identity, .check_key = near_check_key, .stats = near_stats, \
	.destroy = near_destroy

static const struct tfs_backend_ops plain_ops = { COMMON_OPS };

static const struct tfs_backend_ops multipart_ops = {
	COMMON_OPS,
	.wants_multipart = near_wants_multipart,
	.put_resumable = near_put_resumable,
	.abort_upload = near_abort_upload,
	.upload_begin = near_upload_begin,
	.upload_part = near_upload_part,
	.multipart_geometry = near_multipart_geometry,
	.count_uploads = near_count_uploads,
};

int tfs_near_create(const struct tfs_near_config *cfg, struct tfs_backend *near,
		    struct tfs_backend *far, const struct tfs_log *log, struct tfs_backend **out)
{
	if (cfg->copiers < 1 || cfg->copiers > MAX_COPIERS || cfg->copy_budget < (1u << 20) ||
	    cfg->breaker_errors < 1 || near == NULL || far == NULL || near == far ||
	    (cfg->key && strlen(cfg->key) < TFS_NEAR_KEY_TEXT_MIN)) {
		tfs_err(log, "near: invalid configuration");
		return EINVAL;
	}
	struct near *n = calloc(1, sizeof(*n));
	if (n == NULL)
		return ENOMEM;
	n->cfg = *cfg;
	n->cfg.key = NULL; /* not kept: the secret is */
	n->near = near;
	n->far = far;
	n->log = log;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->work, NULL);
	pthread_mutex_init(&n->secret_lock, NULL);
	atomic_init(&n->have_secret, false);
	n->src_endpoint = strdup(cfg->source.endpoint ? cfg->source.endpoint : "");
	n->src_bucket = strdup(cfg->source.bucket ? cfg->source.bucket : "");
	n->src_prefix = strdup(cfg->source.prefix ? cfg->source.prefix : "");
	n->src = (struct tfs_near_source){ n->src_endpoint, n->src_bucket, n->src_prefix };
	n->cfg.source = n->src;
	if (n->src_endpoint == NULL || n->src_bucket == NULL || n->src_prefix == NULL ||
	    tfs_near_checks_create(CHECK_SLOTS, cfg->check_ttl_ms, &n->checks) != 0) {
		free_state(n);
		return ENOMEM;
	}
	char describe[1024];
	snprintf(describe, sizeof(describe), "%s (near copy: %s)", tfs_backend_describe(far),
		 tfs_backend_describe(near));
	uint64_t t = 0, p = 0;
	unsigned par = 0;
	const struct tfs_backend_ops *ops =
		tfs_backend_multipart_geometry(far, &t, &p, &par) ? &multipart_ops : &plain_ops;
	int rc = tfs_near_sums_create(near, log, &n->sums);
	if (rc == 0 && cfg->spool_dir)
		rc = tfs_near_spools_create(cfg->spool_dir, cfg->spool_size,
					    cfg->spool_idle_ms ? cfg->spool_idle_ms : 600000,
					    spool_abandoned, n, &n->spools);
	if (rc == 0)
		rc = tfs_workers_init(&n->pool, cfg->copiers, copier, n);
	if (rc == 0)
		rc = tfs_workers_set(&n->pool, &n->lock, &n->work, cfg->copiers, NULL, NULL);
	if (rc == 0)
		start_secret(n, cfg->key);
	if (rc == 0)
		rc = tfs_backend_new(ops, n, describe, out);
	if (rc) {
		stop_copiers(n);
		free_state(n);
	}
	return rc;
}
