/* backend.c - dispatch for the backend interface, statistics and the
 * helpers for the value types of backend.h. */
#include "config.h"

#include "backend_impl.h"
#include "clock.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "statdef.h"

struct tfs_backend {
	const struct tfs_backend_ops *ops;
	void *priv;
	char *describe;
	struct tfs_backend_stats stats;
};

static const char *const op_names[TFS_OP__COUNT] = {
	[TFS_OP_HEAD] = "head", [TFS_OP_LIST] = "list",     [TFS_OP_GET] = "get",
	[TFS_OP_PUT] = "put",   [TFS_OP_DELETE] = "delete", [TFS_OP_COPY] = "copy",
};

const char *tfs_backend_op_name(enum tfs_backend_op op)
{
	return (unsigned)op < TFS_OP__COUNT ? op_names[op] : "?";
}

/* ---- value types ---- */

void tfs_obj_meta_clear(struct tfs_obj_meta *m)
{
	for (size_t i = 0; i < m->n_user; i++) {
		free(m->user[i].name);
		free(m->user[i].value);
	}
	free(m->user);
	memset(m, 0, sizeof(*m));
}

static bool is_token_name(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (!isalnum(c) && c != '-' && c != '_' && c != '.')
			return false;
	}
	return true;
}

int tfs_obj_meta_set(struct tfs_obj_meta *m, const char *name, const char *value)
{
	if (!is_token_name(name))
		return EINVAL;
	for (size_t i = 0; i < m->n_user; i++) {
		if (strcasecmp(m->user[i].name, name) == 0) {
			char *v = strdup(value);
			if (v == NULL)
				return ENOMEM;
			free(m->user[i].value);
			m->user[i].value = v;
			return 0;
		}
	}
	struct tfs_meta_kv *nu = realloc(m->user, (m->n_user + 1) * sizeof(*nu));
	if (nu == NULL)
		return ENOMEM;
	m->user = nu;
	char *n = strdup(name);
	char *v = strdup(value);
	if (n == NULL || v == NULL) {
		free(n);
		free(v);
		return ENOMEM;
	}
	for (char *p = n; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	m->user[m->n_user].name = n;
	m->user[m->n_user].value = v;
	m->n_user++;
	return 0;
}

const char *tfs_obj_meta_get(const struct tfs_obj_meta *m, const char *name)
{
	for (size_t i = 0; i < m->n_user; i++)
		if (strcasecmp(m->user[i].name, name) == 0)
			return m->user[i].value;
	return NULL;
}

void tfs_list_page_clear(struct tfs_list_page *p)
{
	for (size_t i = 0; i < p->n_entries; i++)
		free(p->entries[i].key);
	free(p->entries);
	for (size_t i = 0; i < p->n_prefixes; i++)
		free(p->prefixes[i]);
	free(p->prefixes);
	free(p->next_token);
	memset(p, 0, sizeof(*p));
}

void tfs_io_iov_copy(const struct tfs_io *io, uint64_t pos, const void *data, size_t len)
{
	const char *src = data;
	int done = io->progress ? io->progress->ndone : 0;
	for (int i = 0; i < io->iovcnt && len; i++) {
		size_t seg = io->iov[i].iov_len;
		if (pos >= seg) {
			pos -= seg;
			continue;
		}
		size_t n = seg - (size_t)pos < len ? seg - (size_t)pos : len;
		if (i >= done) /* a reported buffer may be in use: never rewrite it */
			memcpy((char *)io->iov[i].iov_base + pos, src, n);
		src += n;
		len -= n;
		pos = 0;
	}
}

void tfs_io_iov_filled(const struct tfs_io *io, uint64_t filled)
{
	struct tfs_io_progress *p = io->progress;
	if (p == NULL)
		return;
	while (p->ndone < io->iovcnt && p->done_bytes + io->iov[p->ndone].iov_len <= filled) {
		p->done_bytes += io->iov[p->ndone].iov_len;
		p->done(p->ctx, p->ndone++);
	}
}

int tfs_mpu_alloc(struct tfs_mpu *st, unsigned nparts)
{
	char(*etags)[TFS_ETAG_MAX] = nparts ? calloc(nparts, sizeof(*etags)) : NULL;
	if (etags == NULL)
		return ENOMEM;
	free(st->etags);
	st->etags = etags;
	st->nparts = nparts;
	return 0;
}

void tfs_mpu_clear(struct tfs_mpu *st)
{
	if (st == NULL)
		return;
	free(st->etags);
	memset(st, 0, sizeof(*st));
}

/* ---- instance ---- */

int tfs_backend_new(const struct tfs_backend_ops *ops, void *priv, const char *describe,
		    struct tfs_backend **out)
{
	struct tfs_backend *be = calloc(1, sizeof(*be));
	if (be == NULL)
		return ENOMEM;
	be->describe = strdup(describe);
	if (be->describe == NULL) {
		free(be);
		return ENOMEM;
	}
	be->ops = ops;
	be->priv = priv;
	*out = be;
	return 0;
}

void tfs_backend_destroy(struct tfs_backend *be)
{
	if (be == NULL)
		return;
	be->ops->destroy(be->priv);
	free(be->describe);
	free(be);
}

const char *tfs_backend_describe(const struct tfs_backend *be)
{
	return be->describe;
}

const char *tfs_backend_cache_identity(const struct tfs_backend *be)
{
	const char *id = be->ops->cache_identity ? be->ops->cache_identity(be->priv) : NULL;
	return id ? id : "";
}

const struct tfs_backend_stats *tfs_backend_stats(const struct tfs_backend *be)
{
	return &be->stats;
}

#define OP_ROW(f, ...) TFS_STAT(struct tfs_backend_op_snap, f, __VA_ARGS__)
static const struct tfs_statdef op_rows[] = {
	OP_ROW(requests, TFS_COUNTER, "tierfs_backend_requests_total",
	       "Backend requests, by operation."),
	OP_ROW(errors, TFS_COUNTER, "tierfs_backend_errors_total",
	       "Backend requests that failed after retries, by operation."),
	OP_ROW(payload_bytes, TFS_COUNTER, "tierfs_backend_bytes_total",
	       "Payload bytes read (get) or written (put), by operation."),
	OP_ROW(latency, TFS_HISTOGRAM, "tierfs_backend_request_duration_seconds",
	       "Backend request latency, retries included, by operation."),
};
#undef OP_ROW

const struct tfs_stattab tfs_backend_op_stattab = TFS_STATTAB("backend", op_rows, .each = "op");

struct backend_snap {
	uint64_t list_foreign_dropped, list_loops;
	const char *source;
};

#define ROW(f, ...) TFS_STAT(struct backend_snap, f, __VA_ARGS__)
static const struct tfs_statdef backend_rows[] = {
	ROW(list_foreign_dropped, TFS_COUNTER, "tierfs_backend_list_foreign_dropped_total",
	    "Listing names dropped because they lie outside the listing asked for."),
	ROW(list_loops, TFS_COUNTER, "tierfs_backend_list_loops_total",
	    "Listings cut off with EIO because they did not end (a token came back, too many "
	    "pages)."),
	ROW(source, TFS_JSON_ONLY, NULL, "a string: the backend's description"),
};
#undef ROW

const struct tfs_stattab tfs_backend_stattab = TFS_STATTAB("backend", backend_rows);

struct json_object *tfs_backend_stats_json(const struct tfs_backend *be)
{
	const struct tfs_backend_stats *st = &be->stats;
	struct json_object *bo = json_object_new_object();
	if (bo == NULL)
		return NULL;
	for (int op = 0; op < TFS_OP__COUNT; op++) {
		const struct tfs_backend_op_stats *os = &st->op[op];
		struct tfs_backend_op_snap snap = {
			.requests = atomic_load(&os->requests),
			.errors = atomic_load(&os->errors),
			.payload_bytes = atomic_load(&os->bytes),
			.latency = &os->latency,
		};
		struct json_object *o = tfs_stat_object(&tfs_backend_op_stattab, &snap);
		if (o != NULL)
			json_object_object_add(bo, tfs_backend_op_name((enum tfs_backend_op)op), o);
	}
	struct backend_snap snap = {
		.list_foreign_dropped = atomic_load(&st->list_foreign_dropped),
		.list_loops = atomic_load(&st->list_loops),
		.source = tfs_backend_describe(be),
	};
	(void)tfs_stat_json(bo, &tfs_backend_stattab, &snap);
	if (be->ops->stats)
		be->ops->stats(be->priv, bo);
	return bo;
}

/* Count one request of `op` that started at t0 (tfs_mono_ns(); 0: not
 * timed, a part of a multipart upload). */
static int account(struct tfs_backend *be, enum tfs_backend_op op, int rc, uint64_t bytes,
		   uint64_t t0)
{
	struct tfs_backend_op_stats *s = &be->stats.op[op];

	if (t0)
		tfs_hist_observe(&s->latency, t0);
	atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
	if (rc)
		atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
	else if (bytes)
		atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
	return rc;
}

/* Keys are non-empty C strings; a NUL inside cannot be expressed anyway. */
static bool key_ok(const char *key)
{
	return key != NULL && key[0] != '\0';
}

int tfs_backend_check_key(const struct tfs_backend *be, const char *key)
{
	if (!key_ok(key))
		return EINVAL;
	return be->ops->check_key ? be->ops->check_key(be->priv, key) : 0;
}

int tfs_backend_head(struct tfs_backend *be, const char *key, struct tfs_obj_meta *out)
{
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key))
		return EINVAL;
	return account(be, TFS_OP_HEAD, be->ops->head(be->priv, key, out), 0, t0);
}

int tfs_backend_head_check(struct tfs_backend *be, const char *key, struct tfs_obj_check *out)
{
	uint64_t t0 = tfs_mono_ns();

	memset(out, 0, sizeof(*out));
	if (!key_ok(key))
		return EINVAL;
	if (be->ops->head_check == NULL)
		return ENOTSUP;
	return account(be, TFS_OP_HEAD, be->ops->head_check(be->priv, key, out), 0, t0);
}

/* Whether a name of a listing of `prefix` with delimiter `delim` ("": none)
 * belongs there: a key (`is_prefix` false) or a common prefix. */
static bool list_name_ok(const char *name, const char *prefix, size_t plen, const char *delim,
			 bool is_prefix)
{
	size_t dlen = strlen(delim);

	if (strncmp(name, prefix, plen) != 0)
		return false;
	const char *rest = name + plen;
	const char *d = dlen ? strstr(rest, delim) : NULL;
	if (!is_prefix)
		return d == NULL; /* a key holding the delimiter belongs to a common prefix */
	/* A common prefix: the delimiter once, at its end. */
	return d != NULL && d[dlen] == '\0';
}

/* Drop the names of *p that do not belong to the listing (compacting the
 * arrays in place); returns how many were dropped. */
static size_t list_drop_foreign(struct tfs_list_page *p, const char *prefix, const char *delim)
{
	size_t plen = strlen(prefix), w = 0, dropped = 0;

	for (size_t i = 0; i < p->n_entries; i++) {
		if (!list_name_ok(p->entries[i].key, prefix, plen, delim, false)) {
			free(p->entries[i].key);
			dropped++;
			continue;
		}
		p->entries[w++] = p->entries[i];
	}
	p->n_entries = w;
	w = 0;
	for (size_t i = 0; i < p->n_prefixes; i++) {
		if (!list_name_ok(p->prefixes[i], prefix, plen, delim, true)) {
			free(p->prefixes[i]);
			dropped++;
			continue;
		}
		p->prefixes[w++] = p->prefixes[i];
	}
	p->n_prefixes = w;
	return dropped;
}

int tfs_backend_list(struct tfs_backend *be, const char *prefix, const char *delimiter,
		     const char *token, size_t max_keys, struct tfs_list_page *out)
{
	uint64_t t0 = tfs_mono_ns();

	if (prefix == NULL)
		prefix = "";
	if (max_keys == 0 || max_keys > 1000)
		max_keys = 1000;
	int rc = be->ops->list(be->priv, prefix, delimiter, token, max_keys, out);
	if (rc == 0) {
		out->n_dropped += list_drop_foreign(out, prefix, delimiter ? delimiter : "");
		if (out->n_dropped)
			atomic_fetch_add_explicit(&be->stats.list_foreign_dropped, out->n_dropped,
						  memory_order_relaxed);
	}
	return account(be, TFS_OP_LIST, rc, 0, t0);
}

void tfs_list_walk_clear(struct tfs_list_walk *w)
{
	free(w->token);
	free(w->mark);
	memset(w, 0, sizeof(*w));
}

/* Brent's cycle detection over the tokens: `mark` is the token after page
 * 1, 2, 4, 8...; a token equal to it closes a loop.  Returns 0, EIO (a
 * loop) or ENOMEM. */
static int walk_step(struct tfs_list_walk *w, const char *next)
{
	if (w->mark && strcmp(w->mark, next) == 0)
		return EIO;
	if (w->mark_at == 0)
		w->mark_at = 1;
	if (w->pages == w->mark_at) {
		char *m = strdup(next);
		if (m == NULL)
			return ENOMEM;
		free(w->mark);
		w->mark = m;
		w->mark_at *= 2;
	}
	return 0;
}

int tfs_backend_list_walk(struct tfs_backend *be, const struct tfs_log *log,
			  struct tfs_list_walk *w, const char *prefix, const char *delimiter,
			  size_t max_keys, struct tfs_list_page *out)
{
	const char *what = NULL;
	int rc;

	if (w->done)
		return EINVAL;
	if (prefix == NULL)
		prefix = "";
	if (w->pages >= TFS_LIST_WALK_MAX_PAGES) {
		what = "more pages than the limit";
		rc = EIO;
		goto loop;
	}
	rc = tfs_backend_list(be, prefix, delimiter, w->token, max_keys, out);
	if (rc) {
		w->done = true;
		return rc;
	}
	w->pages++;
	if (out->n_dropped && log)
		tfs_warn(log, "listing '%s' of %s: dropped %zu names outside it", prefix,
			 tfs_backend_describe(be), out->n_dropped);
	free(w->token);
	w->token = NULL;
	if (out->next_token == NULL) {
		w->done = true;
		return 0;
	}
	rc = walk_step(w, out->next_token);
	if (rc == 0) {
		w->token = strdup(out->next_token);
		if (w->token == NULL)
			rc = ENOMEM;
	}
	if (rc == 0)
		return 0;
	tfs_list_page_clear(out);
	if (rc == ENOMEM) {
		w->done = true;
		return rc;
	}
	what = "a continuation token came back";
loop:
	atomic_fetch_add_explicit(&be->stats.list_loops, 1, memory_order_relaxed);
	if (log)
		tfs_err(log,
			"listing '%s' of %s: %s after %" PRIu64 " pages: the listing does not end",
			prefix, tfs_backend_describe(be), what, w->pages);
	w->done = true;
	return EIO;
}

int tfs_backend_get_range(struct tfs_backend *be, const char *key, uint64_t off, uint64_t len,
			  const char *if_match, struct tfs_io dst, size_t *got,
			  char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";
	size_t n = 0;
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key))
		return EINVAL;
	if (len > SIZE_MAX)
		return EINVAL;
	int rc = be->ops->get_range(be->priv, key, off, len, if_match, dst, &n, etag);
	if (rc == 0 && n > len)
		rc = EIO; /* a backend bug: never hand out more than asked */
	*got = rc ? 0 : n;
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	return account(be, TFS_OP_GET, rc, n, t0);
}

int tfs_backend_put(struct tfs_backend *be, const char *key, struct tfs_io src, uint64_t len,
		    const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key) || src.kind == TFS_IO_IOV)
		return EINVAL;
	int rc = be->ops->put(be->priv, key, src, len, meta, etag);
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	return account(be, TFS_OP_PUT, rc, len, t0);
}

int tfs_backend_put_new(struct tfs_backend *be, const char *key, struct tfs_io src, uint64_t len,
			const struct tfs_obj_meta *meta)
{
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key) || src.kind == TFS_IO_IOV)
		return EINVAL;
	if (be->ops->put_new == NULL)
		return ENOTSUP;
	int rc = be->ops->put_new(be->priv, key, src, len, meta);
	return account(be, TFS_OP_PUT, rc, len, t0);
}

/* Counts each part a resumable put uploads, then calls the caller's fn. */
struct part_counter {
	struct tfs_backend *be;
	uint64_t len;
	tfs_mpu_fn fn;
	void *ctx;
};

static int count_part(void *arg, const struct tfs_mpu *st, unsigned part)
{
	struct part_counter *pc = arg;
	if (part != UINT_MAX) {
		uint64_t off = (uint64_t)part * st->part_size;
		uint64_t n = pc->len - off < st->part_size ? pc->len - off : st->part_size;
		account(pc->be, TFS_OP_PUT, 0, n, 0);
	}
	return pc->fn ? pc->fn(pc->ctx, st, part) : 0;
}

int tfs_backend_put_resumable(struct tfs_backend *be, const char *key, struct tfs_io src,
			      uint64_t len, const struct tfs_obj_meta *meta, struct tfs_mpu *st,
			      tfs_mpu_fn fn, void *ctx, char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";

	if (st == NULL)
		return EINVAL;
	if (be->ops->put_resumable == NULL || !be->ops->wants_multipart(be->priv, len))
		return tfs_backend_put(be, key, src, len, meta, etag_out);
	if (!key_ok(key) || src.kind == TFS_IO_IOV)
		return EINVAL;
	struct part_counter pc = { .be = be, .len = len, .fn = fn, .ctx = ctx };
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->put_resumable(be->priv, key, src, len, meta, st, count_part, &pc, etag);
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	if (rc)
		account(be, TFS_OP_PUT, rc, 0, t0);
	else
		tfs_hist_observe(&be->stats.op[TFS_OP_PUT].latency, t0);
	return rc;
}

int tfs_backend_abort_upload(struct tfs_backend *be, const char *key, const char *upload_id)
{
	if (!key_ok(key))
		return EINVAL;
	if (be->ops->abort_upload == NULL || upload_id == NULL || upload_id[0] == '\0')
		return 0;
	uint64_t t0 = tfs_mono_ns();
	return account(be, TFS_OP_DELETE, be->ops->abort_upload(be->priv, key, upload_id), 0, t0);
}

bool tfs_backend_multipart_geometry(const struct tfs_backend *be, uint64_t *threshold,
				    uint64_t *part_size, unsigned *parallel)
{
	*threshold = UINT64_MAX;
	*part_size = 0;
	*parallel = 1;
	if (be->ops->multipart_geometry == NULL || be->ops->upload_begin == NULL ||
	    be->ops->upload_part == NULL)
		return false;
	be->ops->multipart_geometry(be->priv, threshold, part_size, parallel);
	return true;
}

int tfs_backend_upload_begin(struct tfs_backend *be, const char *key,
			     const struct tfs_obj_meta *meta, char upload_id[TFS_UPLOAD_ID_MAX])
{
	upload_id[0] = '\0';
	if (!key_ok(key))
		return EINVAL;
	if (be->ops->upload_begin == NULL)
		return ENOTSUP;
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->upload_begin(be->priv, key, meta, upload_id);
	if (rc)
		upload_id[0] = '\0';
	return account(be, TFS_OP_PUT, rc, 0, t0);
}

int tfs_backend_upload_part(struct tfs_backend *be, const char *key, const char *upload_id,
			    unsigned idx, struct tfs_io src, uint64_t len,
			    char etag_out[TFS_ETAG_MAX])
{
	if (!key_ok(key) || upload_id == NULL || upload_id[0] == '\0' || src.kind == TFS_IO_IOV ||
	    idx >= 10000)
		return EINVAL;
	if (be->ops->upload_part == NULL)
		return ENOTSUP;
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->upload_part(be->priv, key, upload_id, idx, src, len, etag_out);
	return account(be, TFS_OP_PUT, rc, len, t0);
}

int tfs_backend_count_uploads(struct tfs_backend *be, const char *prefix, size_t *out)
{
	*out = 0;
	if (be->ops->count_uploads == NULL)
		return 0;
	uint64_t t0 = tfs_mono_ns();
	int rc = be->ops->count_uploads(be->priv, prefix ? prefix : "", out);
	if (rc)
		*out = 0;
	return account(be, TFS_OP_LIST, rc, 0, t0);
}

int tfs_backend_delete(struct tfs_backend *be, const char *key)
{
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(key))
		return EINVAL;
	return account(be, TFS_OP_DELETE, be->ops->del(be->priv, key), 0, t0);
}

int tfs_backend_copy(struct tfs_backend *be, const char *src, const char *dst, uint64_t size,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	char etag[TFS_ETAG_MAX] = "";
	uint64_t t0 = tfs_mono_ns();

	if (!key_ok(src) || !key_ok(dst))
		return EINVAL;
	int rc = be->ops->copy(be->priv, src, dst, size, meta, etag);
	if (etag_out)
		memcpy(etag_out, etag, TFS_ETAG_MAX);
	return account(be, TFS_OP_COPY, rc, 0, t0);
}
