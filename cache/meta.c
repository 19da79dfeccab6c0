/* meta.c - metadata cache: listings and attributes in LMDB, revalidated
 * against the backend after the TTL.  This file: lookups, the local
 * changes of write-back, inode numbers, stats, open and close.  Listings
 * and listing ahead of lookups are in meta_list.c (its top explains
 * them), the LMDB records in meta_store.c; meta_internal.h lists the
 * files, their calls and their locks.
 *
 * A lookup answers from the cached entry while it is fresh, or LOCAL;
 * an entry a listing left unsettled (tfs_meta_settled()) is HEADed once
 * first.  A stale entry is HEADed again, and so is a name with no entry
 * unless a fresh listing made for a readdir says it does not exist (no
 * object: a one-key listing of "name/", and a HEAD of that marker if
 * there is one, tell whether it is a directory); such a miss also queues
 * the directory for listing ahead.  When the backend cannot be reached
 * (EIO) a stale entry is served; when the index cannot be read, the
 * backend answers uncached.
 */
#include "config.h"

#include "meta.h"
#include "meta_internal.h"
#include "clock.h"

#include "lmdb_env.h"
#include "meta_headers.h"
#include "statdef.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

bool tfs_meta_settled(const struct tfs_meta *m, const struct tfs_attr *a)
{
	if (a->headers || a->local || m->fetch_headers == TFS_HEADERS_NONE)
		return true;
	return a->type == TFS_FT_FILE &&
	       (m->fetch_headers != TFS_HEADERS_SMALL || a->size >= TFS_META_PROBE_SIZE);
}

/* ---- attributes from the backend ---- */

/* The attributes of directory `key` ("dir/", with its slash) from its
 * marker object: HEAD it.  No marker (ENOENT): the defaults.  Either way
 * the answer is final (headers).  Returns 0 or the backend's error. */
static int marker_attr(struct tfs_meta *m, const char *key, struct tfs_attr *a)
{
	struct tfs_obj_meta om = { 0 };
	atomic_fetch_add(&m->backend_lookups, 1);
	int rc = tfs_backend_head(m->be, key, &om);
	if (rc == 0)
		tfs_meta_attr_from_marker(&om, a);
	else if (rc == ENOENT)
		tfs_meta_dir_attr(a);
	tfs_obj_meta_clear(&om);
	if (rc && rc != ENOENT)
		return rc;
	a->headers = true;
	return 0;
}

/* Ask the backend what `name` in `dir` is.  *s3fs_meta (may be NULL) is
 * set when the object carries any of s3fs's x-amz-meta-* attributes. */
static int backend_lookup(struct tfs_meta *m, const char *dir, const char *name, struct tfs_attr *a,
			  bool *s3fs_meta)
{
	char key[4096];
	int rc = tfs_meta_join(dir, name, key, sizeof(key) - 1);
	if (rc)
		return rc;
	atomic_fetch_add(&m->backend_lookups, 1);
	struct tfs_obj_meta om = { 0 };
	rc = tfs_backend_head(m->be, key, &om);
	if (rc == 0) {
		tfs_meta_attr_from_head(&om, a);
		if (s3fs_meta)
			*s3fs_meta = tfs_obj_meta_get(&om, "mode") ||
				     tfs_obj_meta_get(&om, "uid") || tfs_obj_meta_get(&om, "gid") ||
				     tfs_obj_meta_get(&om, "mtime");
		tfs_obj_meta_clear(&om);
		return 0;
	}
	if (rc != ENOENT)
		return rc;
	size_t kl = strlen(key);
	key[kl] = '/';
	key[kl + 1] = '\0';
	struct tfs_list_page p = { 0 };
	rc = tfs_backend_list(m->be, key, "/", NULL, 1, &p);
	if (rc)
		return rc;
	bool exists = p.n_entries > 0 || p.n_prefixes > 0;
	/* The marker "name/" sorts first: a one-key page shows it if any. */
	bool marker = p.n_entries > 0 && strcmp(p.entries[0].key, key) == 0;
	tfs_list_page_clear(&p);
	if (!exists)
		return ENOENT;
	tfs_meta_dir_attr(a);
	if (!marker) {
		a->headers = true; /* nothing more to learn */
		return 0;
	}
	if (marker_attr(m, key, a) != 0)
		tfs_meta_dir_attr(a); /* the directory exists; its attributes wait */
	return 0;
}

/* Learn what a listing could not tell of `name` in `dir` (cached as *a,
 * not settled): HEAD the object, or the directory's marker.  The answer is
 * stored with the listing's time `fetched`; *changed (may be NULL) is set
 * when the object's ETag is not the listed one.  Returns 0 (*a updated),
 * ENOENT (the object is gone: forgotten) or the backend's error (*a
 * unchanged). */
static int settle(struct tfs_meta *m, const uint8_t h[HLEN], const char *dir, const char *name,
		  struct tfs_attr *a, uint64_t fetched, bool *changed)
{
	char key[4096];
	struct tfs_attr n;
	int rc = tfs_meta_join(dir, name, key, sizeof(key) - 1);
	if (rc)
		return rc;
	if (a->type == TFS_FT_DIR) {
		size_t kl = strlen(key);
		key[kl] = '/';
		key[kl + 1] = '\0';
		rc = marker_attr(m, key, &n);
	} else {
		struct tfs_obj_meta om = { 0 };
		atomic_fetch_add(&m->backend_lookups, 1);
		rc = tfs_backend_head(m->be, key, &om);
		if (rc == 0)
			tfs_meta_attr_from_head(&om, &n);
		tfs_obj_meta_clear(&om);
		if (rc == 0 && strcmp(n.etag, a->etag) != 0 && changed)
			*changed = true;
	}
	if (rc)
		return rc;
	n.ino = meta_same_kind(&n, a) ? a->ino : 0;
	*a = n;
	meta_store_entry(m, h, name, a, fetched);
	return 0;
}

int tfs_meta_lookup(struct tfs_meta *m, const char *dir, const char *name, struct tfs_attr *out,
		    bool *changed)
{
	uint8_t h[HLEN];
	struct tfs_attr cached;
	uint64_t fetched = 0, now = tfs_wall_ms();
	struct dirrec d = { 0 };

	if (changed)
		*changed = false;
	if (strlen(name) > NAME_MAX)
		return ENAMETOOLONG;
	meta_dir_hash(dir, h);
	meta_note_lookup(m, h);
	int have = meta_get_entry(m, h, name, &cached, &fetched);
	if (have == 0 && meta_tombstone(&cached))
		have = ENOENT; /* gone since then: ask again */
	if (have == EIO) {
		/* The index is unreadable (damaged under us): answer from the
		 * backend, uncached, until a restart rebuilds it. */
		atomic_fetch_add(&m->errors, 1);
		return backend_lookup(m, dir, name, out, NULL);
	}
	if (have == 0 && (cached.local || meta_fresh(m, fetched, now))) {
		if (cached.type == TYPE_WHITEOUT) {
			atomic_fetch_add(&m->hits, 1);
			return ENOENT;
		}
		if (!tfs_meta_settled(m, &cached)) {
			int src = settle(m, h, dir, name, &cached, fetched, changed);
			if (src == ENOENT) {
				meta_forget(m, dir, name);
				if (changed)
					*changed = true;
				return ENOENT;
			}
			if (src)
				atomic_fetch_add(&m->stale_served, 1);
		} else {
			atomic_fetch_add(&m->hits, 1);
		}
		*out = cached;
		return 0;
	}
	bool listed = have == ENOENT && meta_get_dir(m, h, &d) == 0 && d.listed_ms &&
		      meta_fresh(m, d.listed_ms, now);
	if (listed && !(d.flags & DIR_AHEAD)) {
		atomic_fetch_add(&m->neg_hits, 1);
		return ENOENT;
	}
	bool s3fs_meta = false;
	int rc = backend_lookup(m, dir, name, out, &s3fs_meta);
	if (have == ENOENT && !listed && !s3fs_meta && (rc == 0 || rc == ENOENT))
		meta_list_ahead(m, dir);
	if (rc == 0) {
		if (have == 0 && cached.type == TFS_FT_FILE && out->type == TFS_FT_FILE) {
			if (strcmp(cached.etag, out->etag) != 0 && changed)
				*changed = true;
		}
		if (have == 0 && out->type == TFS_FT_DIR && cached.type == TFS_FT_DIR &&
		    !out->headers)
			*out = cached; /* its marker did not answer: keep what it had */
		meta_store_entry(m, h, name, out, now);
		return 0;
	}
	if (rc == ENOENT) {
		if (have == 0) {
			meta_forget(m, dir, name);
			if (changed)
				*changed = true;
		}
		return ENOENT;
	}
	if (have == 0 && rc == EIO) {
		/* The backend is unreachable: a stale answer beats none. */
		atomic_fetch_add(&m->stale_served, 1);
		*out = cached;
		return 0;
	}
	atomic_fetch_add(&m->errors, 1);
	return rc;
}

/* ---- local changes ---- */

static int txn_put(struct tfs_meta *m, MDB_txn *txn, const char *path, const struct tfs_attr *a,
		   uint64_t fetched)
{
	const char *name;
	uint8_t h[HLEN];
	int rc = meta_path_entry(path, h, &name);
	if (rc)
		return rc;
	return meta_errno(m, meta_put_entry(txn, m, h, name, a, fetched, NULL),
			  "store local entry");
}

int tfs_meta_txn_set_local(struct tfs_meta *m, MDB_txn *txn, const char *path,
			   const struct tfs_attr *a)
{
	struct tfs_attr l = *a;
	l.local = true;
	int rc = txn_put(m, txn, path, &l, tfs_wall_ms());
	if (rc == 0 && a->type == TFS_FT_DIR) {
		/* A new directory: its (empty) listing is complete. */
		uint8_t h[HLEN];
		struct dirrec d = { .listed_ms = tfs_wall_ms() };
		meta_dir_hash(path, h);
		MDB_val k = { HLEN, h }, v = { sizeof(d), &d };
		MDB_val old;
		if (mdb_get(txn, m->dirs, &k, &old) == MDB_NOTFOUND)
			rc = meta_errno(m, mdb_put(txn, m->dirs, &k, &v, 0), "store local dir");
	}
	return rc;
}

int tfs_meta_txn_whiteout(struct tfs_meta *m, MDB_txn *txn, const char *path)
{
	struct tfs_attr a;
	memset(&a, 0, sizeof(a));
	a.type = (enum tfs_ftype)TYPE_WHITEOUT;
	a.local = true;
	return txn_put(m, txn, path, &a, tfs_wall_ms());
}

/* Whether time (s, ns) is later than (s2, ns2). */
static bool later(int64_t s, uint32_t ns, int64_t s2, uint32_t ns2)
{
	return s > s2 || (s == s2 && ns > ns2);
}

/* Directory attributes `a` about to replace `old`: keep old's mtime and
 * ctime where they are later (changes of its entries, tfs_meta_touch_dir()). */
static void keep_later_times(const struct tfs_attr *old, struct tfs_attr *a)
{
	if (later(old->mtime, old->mtime_ns, a->mtime, a->mtime_ns)) {
		a->mtime = old->mtime;
		a->mtime_ns = old->mtime_ns;
	}
	if (later(old->ctime, old->ctime_ns, a->ctime, a->ctime_ns)) {
		a->ctime = old->ctime;
		a->ctime_ns = old->ctime_ns;
	}
}

struct touch {
	int64_t sec;
	uint32_t ns;
};

static void touch_fn(struct tfs_attr *a, void *ctx)
{
	const struct touch *t = ctx;
	struct tfs_attr n = *a;
	if (a->type != TFS_FT_DIR)
		return;
	n.mtime = n.ctime = t->sec;
	n.mtime_ns = n.ctime_ns = t->ns;
	keep_later_times(a, &n);
	*a = n;
}

int tfs_meta_touch_dir(struct tfs_meta *m, const char *path, int64_t sec, uint32_t ns)
{
	struct touch t = { sec, ns };
	if (path[0] == '\0')
		return 0;
	int rc = meta_edit_entry(m, path, touch_fn, &t, "touch dir");
	return rc == ENOENT ? 0 : rc; /* nothing cached: nothing to change */
}

int tfs_meta_txn_set_clean(struct tfs_meta *m, MDB_txn *txn, const char *path,
			   const struct tfs_attr *a)
{
	struct tfs_attr c = *a, old;
	uint8_t h[HLEN];
	const char *name;
	uint64_t f;
	c.local = false;
	if (c.type == TFS_FT_DIR && meta_path_entry(path, h, &name) == 0 &&
	    meta_txn_get(m, txn, h, name, &old, &f) == 0 && old.type == TFS_FT_DIR)
		keep_later_times(&old, &c);
	return txn_put(m, txn, path, &c, tfs_wall_ms());
}

int tfs_meta_txn_forget(struct tfs_meta *m, MDB_txn *txn, const char *path)
{
	const char *name;
	uint8_t h[HLEN];
	int rc = meta_path_entry(path, h, &name);
	if (rc)
		return rc;
	return meta_errno(m, meta_put_tombstone(txn, m, h, name), "forget entry");
}

/* ---- inode numbers ---- */

uint64_t tfs_meta_ino(struct tfs_meta *m, const char *path)
{
	const char *name;
	uint8_t h[HLEN];
	struct tfs_attr a;
	uint64_t f;
	if (meta_path_entry(path, h, &name) != 0)
		return 0;
	return meta_get_entry(m, h, name, &a, &f) == 0 && a.type != TYPE_WHITEOUT ? a.ino : 0;
}

static void set_ino_fn(struct tfs_attr *a, void *ctx)
{
	a->ino = *(const uint64_t *)ctx;
}

int tfs_meta_set_ino(struct tfs_meta *m, const char *path, uint64_t ino)
{
	return ino ? meta_edit_entry(m, path, set_ino_fn, &ino, "set ino") : 0;
}

/* ---- stats, open and close ---- */

struct meta_snap {
	uint64_t hits, negative_hits, backend_lookups, listings, list_pages, stale_served, errors,
		listed_ahead, listed_ahead_partial, list_ahead_pending, ttl_ms;
};

#define ROW(f, ...) TFS_STAT(struct meta_snap, f, __VA_ARGS__)
static const struct tfs_statdef meta_rows[] = {
	ROW(hits, TFS_COUNTER, "tierfs_metadata_hits_total",
	    "Lookups answered from the metadata cache."),
	ROW(negative_hits, TFS_COUNTER, "tierfs_metadata_negative_hits_total",
	    "Lookups of missing names answered from a cached listing."),
	ROW(backend_lookups, TFS_COUNTER, "tierfs_metadata_backend_lookups_total",
	    "Lookups that asked the backend (HEAD)."),
	ROW(listings, TFS_COUNTER, "tierfs_metadata_listings_total",
	    "Directory listings fetched from the backend."),
	ROW(list_pages, TFS_COUNTER, "tierfs_metadata_list_pages_total",
	    "LIST pages fetched for those listings."),
	ROW(stale_served, TFS_COUNTER, "tierfs_metadata_stale_served_total",
	    "Stale entries served because the backend could not be reached."),
	ROW(errors, TFS_COUNTER, "tierfs_metadata_errors_total",
	    "Metadata operations that failed."),
	ROW(listed_ahead, TFS_COUNTER, "tierfs_metadata_listed_ahead_total",
	    "Directories listed in the background because a lookup missed in them "
	    "(cache.list_ahead)."),
	ROW(listed_ahead_partial, TFS_COUNTER, "tierfs_metadata_listed_ahead_partial_total",
	    "Listings ahead of lookups that stopped early because few lookups came "
	    "(cache.list_ahead)."),
	ROW(list_ahead_pending, TFS_JSON_ONLY, NULL, "a diagnostic: listings ahead queued now"),
	ROW(ttl_ms, TFS_GAUGE, "tierfs_metadata_ttl_seconds",
	    "cache.metadata_ttl in seconds (+Inf: forever).", .ms_to_s = true),
};
#undef ROW

const struct tfs_stattab tfs_meta_stattab = TFS_STATTAB("metadata", meta_rows);

void tfs_meta_stats(struct tfs_meta *m, struct json_object *out)
{
	struct meta_snap s = {
		.hits = atomic_load(&m->hits),
		.negative_hits = atomic_load(&m->neg_hits),
		.backend_lookups = atomic_load(&m->backend_lookups),
		.listings = atomic_load(&m->listings),
		.list_pages = atomic_load(&m->list_pages),
		.stale_served = atomic_load(&m->stale_served),
		.errors = atomic_load(&m->errors),
		.listed_ahead = atomic_load(&m->listed_ahead),
		.listed_ahead_partial = atomic_load(&m->listed_partial),
		.list_ahead_pending = meta_list_pending(m),
		.ttl_ms = atomic_load(&m->ttl_ms),
	};
	(void)tfs_stat_add_section(out, &tfs_meta_stattab, &s);
}

void tfs_meta_set_ttl(struct tfs_meta *m, uint64_t ttl_ms)
{
	atomic_store(&m->ttl_ms, ttl_ms);
}

int tfs_meta_open(MDB_env *env, struct tfs_backend *be, const struct tfs_cache_config *cc,
		  const struct tfs_log *log, struct tfs_meta **out)
{
	struct tfs_meta *m = calloc(1, sizeof(*m));
	MDB_txn *txn = NULL;
	if (m == NULL)
		return ENOMEM;
	m->env = env;
	m->be = be;
	m->ttl_ms = cc->metadata_ttl_ms;
	m->fetch_headers = cc->fetch_headers;
	m->list_ahead = cc->list_ahead;
	m->log = log;
	int rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta_entries", MDB_CREATE, &m->entries);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "meta_dirs", MDB_CREATE, &m->dirs);
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
	} else if (txn) {
		mdb_txn_abort(txn);
	}
	if (rc) {
		rc = tfs_lmdb_fail(log, rc, "meta: cannot open the metadata DBs");
		free(m);
		return rc;
	}
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&m->stripes[i], NULL);
	pthread_mutex_init(&m->list_lock, NULL);
	pthread_cond_init(&m->list_work, NULL);
	meta_listers_start(m);
	*out = m;
	return 0;
}

void tfs_meta_close(struct tfs_meta *m)
{
	if (m == NULL)
		return;
	meta_listers_stop(m);
	pthread_cond_destroy(&m->list_work);
	pthread_mutex_destroy(&m->list_lock);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&m->stripes[i]);
	free(m->mount);
	free(m);
}

int tfs_meta_set_mount(struct tfs_meta *m, const char *mountpoint)
{
	char *p = strdup(mountpoint);
	if (p == NULL)
		return ENOMEM;
	free(m->mount);
	m->mount = p;
	return 0;
}

const char *tfs_meta_mount(const struct tfs_meta *m)
{
	return m->mount;
}

MDB_env *tfs_meta_env(const struct tfs_meta *m)
{
	return m->env;
}
