/* meta.c - metadata cache: listings and attributes in LMDB, revalidated
 * against the backend after the TTL.  The LMDB records are in
 * meta_store.c (its top shows them); meta_internal.h lists the files,
 * their calls and their locks.
 *
 * A listing refresh writes each page in one short write transaction with
 * fetched = the refresh's start time, then deletes the directory's entries
 * older than that start: concurrent lookups keep being served meanwhile.
 *
 * Listing ahead (cache.list_ahead): a lookup that finds nothing cached in
 * a directory without a fresh listing HEADs its name, as always, and also
 * queues that directory for a listing by one of LISTER_THREADS background
 * threads.  Once it is listed, the directory's other lookups of names it
 * holds are answered from the cache: a cold epoch over a directory of N
 * files costs N/1000 LISTs instead of N HEADs.  A name such a listing
 * lacks is still HEADed (DIR_AHEAD), so that an object created after it
 * is found at once.  A HEAD that returns s3fs's
 * x-amz-meta-mode/uid/gid/mtime queues nothing: a listing does not carry
 * them, so the lookups of such a directory keep asking for them (unless
 * cache.fetch_headers makes listings HEAD each object).
 *
 * A listing ahead goes on to its next page only while lookups keep coming:
 * page k+1 is fetched only if at least k lookups in the directory arrived
 * since the listing began (struct lister's `demand`).  So it costs at most
 * one LIST more than the lookups made in that directory while it ran, and
 * a job that reads a few files of a directory of millions lists a page or
 * two of it, not all of it.
 * Stopped early, the listing is kept as DIR_PARTIAL (see there).
 */
#include "config.h"

#include "meta.h"
#include "meta_internal.h"
#include "clock.h"

#include "lmdb_env.h"
#include "meta_headers.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_RETRY_MS 1000 /* after a failed background listing, queue none for this long */

bool tfs_meta_settled(const struct tfs_meta *m, const struct tfs_attr *a)
{
	if (a->headers || a->local || m->fetch_headers == TFS_HEADERS_NONE)
		return true;
	return a->type == TFS_FT_FILE &&
	       (m->fetch_headers != TFS_HEADERS_SMALL || a->size >= TFS_META_PROBE_SIZE);
}

/* A directory's tag for struct lister: never 0 (0 means "none"). */
static uint64_t dir_tag(const uint8_t h[HLEN])
{
	uint64_t t;
	memcpy(&t, h, sizeof(t));
	return t ? t : 1;
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

static void list_ahead(struct tfs_meta *m, const char *dir);

/* Count a lookup in the directory with hash h for a lister listing it
 * (the demand that keeps a listing ahead going). */
static void note_lookup(struct tfs_meta *m, const uint8_t h[HLEN])
{
	uint64_t t = dir_tag(h);
	for (int i = 0; i < m->nlisters; i++)
		if (atomic_load(&m->listers[i].tag) == t)
			atomic_fetch_add(&m->listers[i].demand, 1);
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
	note_lookup(m, h);
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
		list_ahead(m, dir);
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

/* ---- listings ---- */

static bool name_ok(const char *name)
{
	size_t n = strlen(name);
	return n > 0 && n <= NAME_MAX && strchr(name, '/') == NULL && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}

/* Does directory `dir` hold, at any depth, an entry this mount wrote and
 * has not written back (inside the caller's transaction)?  Such a
 * directory stays although the bucket no longer lists it.  Bounded: past
 * the bounds the answer is "yes" (keeping a directory is the safe side). */
static bool local_below(struct tfs_meta *m, MDB_txn *txn, const char *dir, unsigned depth,
			unsigned *budget)
{
	uint8_t h[HLEN];
	MDB_cursor *c;
	bool found = false;
	if (depth > 32 || *budget == 0)
		return true;
	meta_dir_hash(dir, h);
	if (mdb_cursor_open(txn, m->entries, &c) != 0)
		return true;
	MDB_val k = { HLEN, h }, v;
	int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (!found && rc == 0 && k.mv_size >= HLEN && memcmp(k.mv_data, h, HLEN) == 0) {
		struct tfs_attr a;
		uint64_t f;
		(*budget)--;
		if (*budget == 0) {
			found = true;
			break;
		}
		if (meta_valid_rec(&v)) {
			meta_decode(&v, &a, &f);
			if (a.local && a.type != TYPE_WHITEOUT) {
				found = true;
			} else if (a.type == TFS_FT_DIR && k.mv_size - HLEN <= NAME_MAX) {
				char name[NAME_MAX + 1], sub[4096];
				memcpy(name, (const char *)k.mv_data + HLEN, k.mv_size - HLEN);
				name[k.mv_size - HLEN] = '\0';
				if (tfs_meta_join(dir, name, sub, sizeof(sub)) == 0) {
					/* The recursion has its own cursor; ours stays valid. */
					found = local_below(m, txn, sub, depth + 1, budget);
				}
			}
		}
		if (!found)
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	return found;
}

/* Delete the entries of directory `dir` (hash `h`) fetched before `start`,
 * except this mount's own (LOCAL) entries and directories that hold some. */
static int prune(struct tfs_meta *m, const char *dir, const uint8_t h[HLEN], uint64_t start)
{
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = mdb_cursor_open(txn, m->entries, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	MDB_val k = { HLEN, (void *)h }, v;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size >= HLEN && memcmp(k.mv_data, h, HLEN) == 0) {
		uint64_t fetched = 0;
		struct tfs_attr a;
		if (!meta_valid_rec(&v)) {
			rc = mdb_cursor_del(c, 0);
		} else {
			meta_decode(&v, &a, &fetched);
			bool keep = a.local || fetched >= start;
			if (!keep && a.type == TFS_FT_DIR && k.mv_size - HLEN <= NAME_MAX) {
				char name[NAME_MAX + 1], sub[4096];
				unsigned budget = 100000;
				memcpy(name, (const char *)k.mv_data + HLEN, k.mv_size - HLEN);
				name[k.mv_size - HLEN] = '\0';
				keep = tfs_meta_join(dir, name, sub, sizeof(sub)) == 0 &&
				       local_below(m, txn, sub, 0, &budget);
			}
			if (!keep)
				rc = mdb_cursor_del(c, 0);
		}
		if (rc == 0)
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND && rc != 0) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

/* The part of a listed name after its directory's prefix of plen bytes, or
 * "" (never a valid name) when the name is shorter: tfs_backend_list()
 * drops names outside the prefix, and this never reads past a name's end
 * whatever a backend returns. */
static const char *after_prefix(const char *name, size_t plen)
{
	return strnlen(name, plen) == plen ? name + plen : "";
}

static int store_page(struct tfs_meta *m, const uint8_t h[HLEN], size_t plen,
		      const struct tfs_list_page *p, uint64_t start, bool *any)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
	if (rc)
		return rc;
	for (size_t i = 0; rc == 0 && i < p->n_entries; i++) {
		const struct tfs_list_entry *e = &p->entries[i];
		const char *name = after_prefix(e->key, plen);
		*any = true;
		if (!name_ok(name))
			continue; /* the directory's own marker, or unrepresentable */
		struct tfs_attr a = { .type = TFS_FT_FILE, .size = e->size, .mtime = e->mtime };
		a.mode = a.uid = a.gid = TFS_META_UNSET;
		snprintf(a.etag, sizeof(a.etag), "%s", e->etag);
		/* Keep what a HEAD learned (x-amz-meta-*) while the ETag holds. */
		uint8_t kbuf[HLEN + NAME_MAX + 1];
		size_t nlen = strlen(name);
		memcpy(kbuf, h, HLEN);
		memcpy(kbuf + HLEN, name, nlen);
		MDB_val k = { HLEN + nlen, kbuf }, v;
		if (mdb_get(txn, m->entries, &k, &v) == 0 && meta_valid_rec(&v)) {
			struct tfs_attr old;
			uint64_t f;
			meta_decode(&v, &old, &f);
			if (old.local)
				continue; /* the mount's own change wins until written back */
			if (f > start)
				continue; /* learned after this listing began (a HEAD, a
					   * tombstone): newer than what it says */
			if (old.type == TFS_FT_FILE && strcmp(old.etag, a.etag) == 0)
				a = old; /* the same version: all a HEAD learned stays */
		}
		rc = meta_put_entry(txn, m, h, name, &a, start, NULL);
	}
	for (size_t i = 0; rc == 0 && i < p->n_prefixes; i++) {
		char name[NAME_MAX + 2];
		const char *s = after_prefix(p->prefixes[i], plen);
		size_t n = strlen(s);
		*any = true;
		if (n < 2 || n - 1 > NAME_MAX)
			continue;
		memcpy(name, s, n - 1);
		name[n - 1] = '\0';
		if (!name_ok(name))
			continue;
		/* A file of the same name listed in this refresh wins. */
		uint8_t kbuf[HLEN + NAME_MAX + 1];
		memcpy(kbuf, h, HLEN);
		memcpy(kbuf + HLEN, name, n - 1);
		MDB_val k = { HLEN + n - 1, kbuf }, v;
		if (mdb_get(txn, m->entries, &k, &v) == 0 && meta_valid_rec(&v)) {
			struct tfs_attr old;
			uint64_t f;
			meta_decode(&v, &old, &f);
			if (old.local || f > start || (old.type == TFS_FT_FILE && f >= start))
				continue;
			if (old.type == TFS_FT_DIR) {
				/* Still a directory: what its marker said stays. */
				rc = meta_put_entry(txn, m, h, name, &old, start, NULL);
				continue;
			}
		}
		struct tfs_attr a;
		tfs_meta_dir_attr(&a);
		rc = meta_put_entry(txn, m, h, name, &a, start, NULL);
	}
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

/* HEAD the files of a listed page whose x-amz-meta-* are not known yet. */
static void fetch_headers(struct tfs_meta *m, const uint8_t h[HLEN], size_t plen,
			  const struct tfs_list_page *p, uint64_t start)
{
	for (size_t i = 0; i < p->n_entries; i++) {
		const char *name = after_prefix(p->entries[i].key, plen);
		struct tfs_attr a;
		uint64_t f;
		if (!name_ok(name) || meta_get_entry(m, h, name, &a, &f) != 0 ||
		    a.type != TFS_FT_FILE)
			continue;
		if (a.headers)
			continue; /* kept from an earlier HEAD of this ETag */
		struct tfs_obj_meta om = { 0 };
		atomic_fetch_add(&m->backend_lookups, 1);
		if (tfs_backend_head(m->be, p->entries[i].key, &om) != 0)
			continue; /* the listing's attributes stay */
		tfs_meta_attr_from_head(&om, &a);
		tfs_obj_meta_clear(&om);
		meta_store_entry(m, h, name, &a, start);
	}
}

/* A directory with no key in the bucket still exists if this mount made
 * it, or made something in it, and has not written that back yet. */
static bool exists_locally(struct tfs_meta *m, const char *dir, const uint8_t h[HLEN])
{
	char parent[4096];
	const char *name;
	struct tfs_attr a;
	uint64_t f;
	uint8_t ph[HLEN];
	if (meta_split_path(dir, parent, sizeof(parent), &name) == 0) {
		meta_dir_hash(parent, ph);
		if (meta_get_entry(m, ph, name, &a, &f) == 0 && a.local && a.type == TFS_FT_DIR)
			return true;
	}
	MDB_txn *txn;
	MDB_cursor *c;
	bool found = false;
	if (mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn) != 0)
		return false;
	if (mdb_cursor_open(txn, m->entries, &c) == 0) {
		MDB_val k = { HLEN, (void *)h }, v;
		int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		while (!found && rc == 0 && k.mv_size >= HLEN && memcmp(k.mv_data, h, HLEN) == 0) {
			if (meta_valid_rec(&v)) {
				meta_decode(&v, &a, &f);
				found = a.local && a.type != TYPE_WHITEOUT;
			}
			rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		}
		mdb_cursor_close(c);
	}
	mdb_txn_abort(txn);
	return found;
}

/* List `dir` (hash h) from the backend into the cache and record the
 * listing with `flags`.  With `demand` (a listing ahead: struct lister),
 * page k+1 is fetched only if *demand >= k; stopping before the last page
 * records DIR_PARTIAL, prunes nothing and does not conclude that the
 * directory is gone.  Returns 0, ENOENT (no such directory), ECANCELED
 * (closing) or an errno (backend or LMDB, logged). */
static int refresh(struct tfs_meta *m, const char *dir, const uint8_t h[HLEN], uint64_t flags,
		   atomic_uint_fast64_t *demand)
{
	char prefix[4096];
	uint64_t start = tfs_wall_ms(), pages = 0;
	struct tfs_list_walk w = { 0 };
	bool any = false, partial = false;
	int rc = 0;

	if (dir[0]) {
		int n = snprintf(prefix, sizeof(prefix), "%s/", dir);
		if (n < 0 || (size_t)n >= sizeof(prefix))
			return ENAMETOOLONG;
	} else {
		prefix[0] = '\0';
	}
	size_t plen = strlen(prefix);
	atomic_fetch_add(&m->listings, 1);
	do {
		struct tfs_list_page p = { 0 };
		if (atomic_load(&m->stop)) {
			rc = ECANCELED;
			break;
		}
		rc = tfs_backend_list_walk(m->be, m->log, &w, prefix, "/", 1000, &p);
		if (rc)
			break;
		atomic_fetch_add(&m->list_pages, 1);
		pages++;
		int mrc = store_page(m, h, plen, &p, start, &any);
		if (mrc)
			rc = meta_errno(m, mrc, "store listing");
		if (rc == 0 && m->fetch_headers == TFS_HEADERS_ALL)
			fetch_headers(m, h, plen, &p, start);
		tfs_list_page_clear(&p);
		if (!w.done && demand && atomic_load(demand) < pages)
			partial = true;
	} while (rc == 0 && !w.done && !partial);
	tfs_list_walk_clear(&w);
	if (rc)
		return rc;
	int mrc = 0;
	if (partial) {
		flags |= DIR_PARTIAL;
		atomic_fetch_add(&m->listed_partial, 1);
		tfs_debug(m->log,
			  "meta: listing '%s' ahead stopped after %" PRIu64 " pages: few lookups "
			  "there",
			  dir, pages);
	} else if (!any && dir[0] && !exists_locally(m, dir, h)) {
		/* No key has this prefix: the directory is gone. */
		int prc = prune(m, dir, h, UINT64_MAX);
		if (prc)
			meta_errno(m, prc, "prune");
		return ENOENT;
	} else {
		mrc = prune(m, dir, h, start);
	}
	if (mrc == 0) {
		MDB_txn *txn;
		struct dirrec d = { .listed_ms = start, .flags = flags };
		MDB_val k = { HLEN, (void *)h }, v = { sizeof(d), &d };
		mrc = mdb_txn_begin(m->env, NULL, 0, &txn);
		if (mrc == 0) {
			mrc = mdb_put(txn, m->dirs, &k, &v, 0);
			if (mrc == 0)
				mrc = mdb_txn_commit(txn);
			else
				mdb_txn_abort(txn);
		}
	}
	return meta_errno(m, mrc, "finish listing");
}

/* The index is unreadable: list the backend directly, in name order
 * (entries and prefixes of a page merged), nothing cached. */
static int readdir_direct(struct tfs_meta *m, const char *dir, const char *after,
			  tfs_meta_entry_fn fn, void *ctx)
{
	char prefix[4096];
	int n = snprintf(prefix, sizeof(prefix), "%s%s", dir, dir[0] ? "/" : "");
	if (n < 0 || (size_t)n >= sizeof(prefix))
		return ENAMETOOLONG;
	size_t plen = (size_t)n;
	struct tfs_list_walk w = { 0 };
	int rc = 0, cb = 0;
	bool any = false;
	atomic_fetch_add(&m->errors, 1);
	do {
		struct tfs_list_page p = { 0 };
		rc = tfs_backend_list_walk(m->be, m->log, &w, prefix, "/", 1000, &p);
		if (rc)
			break;
		size_t i = 0, j = 0;
		while (cb == 0 && (i < p.n_entries || j < p.n_prefixes)) {
			const char *e = i < p.n_entries ? after_prefix(p.entries[i].key, plen)
							: NULL;
			char pname[NAME_MAX + 2] = "";
			if (j < p.n_prefixes) {
				const char *ps = after_prefix(p.prefixes[j], plen);
				size_t pl = strlen(ps);
				if (pl >= 2 && pl - 1 <= NAME_MAX) {
					memcpy(pname, ps, pl - 1);
					pname[pl - 1] = '\0';
				}
			}
			bool take_entry = e && (j >= p.n_prefixes || strcmp(e, pname) <= 0);
			struct tfs_attr a;
			const char *name;
			if (take_entry) {
				name = e;
				memset(&a, 0, sizeof(a));
				a.type = TFS_FT_FILE;
				a.size = p.entries[i].size;
				a.mtime = p.entries[i].mtime;
				a.mode = a.uid = a.gid = TFS_META_UNSET;
				snprintf(a.etag, sizeof(a.etag), "%s", p.entries[i].etag);
				i++;
			} else {
				name = pname;
				tfs_meta_dir_attr(&a);
				j++;
			}
			any = true;
			if (!name_ok(name) || strcmp(name, after) <= 0)
				continue;
			cb = fn(ctx, name, &a);
		}
		tfs_list_page_clear(&p);
	} while (rc == 0 && cb == 0 && !w.done);
	tfs_list_walk_clear(&w);
	if (cb)
		return cb;
	if (rc == 0 && !any && dir[0])
		return ENOENT;
	return rc;
}

/* A readdir is served from a listing made ahead of lookups: from now on it
 * answers "no such name" too, as a listing made for a readdir does (the
 * caller has seen what it holds).  Best effort: on failure the flag stays
 * and the lookups keep asking. */
static void shown_dir(struct tfs_meta *m, const uint8_t h[HLEN], const struct dirrec *d)
{
	MDB_txn *txn;
	struct dirrec nd = { .listed_ms = d->listed_ms, .flags = d->flags & ~(uint64_t)DIR_AHEAD };
	MDB_val k = { HLEN, (void *)h }, v = { sizeof(nd), &nd }, old;
	if (mdb_txn_begin(m->env, NULL, 0, &txn) != 0)
		return;
	/* Only if no newer listing replaced it meanwhile. */
	if (mdb_get(txn, m->dirs, &k, &old) == 0 && old.mv_size == sizeof(nd) &&
	    memcmp(old.mv_data, d, sizeof(nd)) == 0 && mdb_put(txn, m->dirs, &k, &v, 0) == 0)
		(void)mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
}

/* Does the cached listing d serve a caller that wants a listing with
 * `flags`?  It must be fresh; a partial one serves only listing ahead. */
static bool serves(struct tfs_meta *m, const struct dirrec *d, uint64_t flags)
{
	if (!d->listed_ms || !meta_fresh(m, d->listed_ms, tfs_wall_ms()))
		return false;
	return !(d->flags & DIR_PARTIAL) || (flags & DIR_AHEAD);
}

/* List `dir` (hash h) unless a fresh listing that serves `flags` is cached
 * (serves()), marking a new listing with `flags` (DIR_AHEAD or 0); one
 * listing per directory at a time (its stripe's mutex), the others wait
 * for it.  `demand`: refresh()'s, for a listing ahead (NULL: list it all).
 * *listed (may be NULL) says whether this call listed it.  Returns 0,
 * ENOENT (no such directory), ECANCELED (closing) or the backend's error
 * (counted). */
static int ensure_listed(struct tfs_meta *m, const char *dir, const uint8_t h[HLEN], uint64_t flags,
			 atomic_uint_fast64_t *demand, bool *listed)
{
	struct dirrec d = { 0 };
	int rc = 0;

	if (listed)
		*listed = false;
	if (meta_get_dir(m, h, &d) == 0 && serves(m, &d, flags)) {
		if ((d.flags & DIR_AHEAD) && !(flags & DIR_AHEAD))
			shown_dir(m, h, &d);
		return 0;
	}
	pthread_mutex_t *mu = &m->stripes[h[0] % STRIPES];
	pthread_mutex_lock(mu);
	/* Someone may have listed it while we waited. */
	if (meta_get_dir(m, h, &d) != 0 || !serves(m, &d, flags)) {
		rc = refresh(m, dir, h, flags, demand);
		if (listed)
			*listed = true;
	}
	pthread_mutex_unlock(mu);
	if (rc && rc != ENOENT && rc != ECANCELED)
		atomic_fetch_add(&m->errors, 1);
	return rc;
}

/* ---- listing ahead of lookups ---- */

/* Queue `dir` for a background listing, unless listing ahead is off, the
 * TTL is 0 (a listing would never be trusted), a listing failed less than
 * LIST_RETRY_MS ago, or it is queued or being listed already.  A full
 * queue drops the request: the lookups still work, by HEAD. */
static void list_ahead(struct tfs_meta *m, const char *dir)
{
	if (!m->list_ahead || atomic_load(&m->ttl_ms) == 0)
		return;
	uint64_t now = tfs_wall_ms();
	pthread_mutex_lock(&m->list_lock);
	bool skip = m->stop || m->qlen == LIST_QUEUE ||
		    (m->list_failed_ms && now - m->list_failed_ms < LIST_RETRY_MS);
	for (size_t i = 0; !skip && i < m->qlen; i++)
		skip = strcmp(m->queue[(m->qhead + i) % LIST_QUEUE], dir) == 0;
	for (int i = 0; !skip && i < LISTER_THREADS; i++)
		skip = m->running[i] && strcmp(m->running[i], dir) == 0;
	char *copy = skip ? NULL : strdup(dir);
	if (copy) {
		m->queue[(m->qhead + m->qlen) % LIST_QUEUE] = copy;
		m->qlen++;
		pthread_cond_signal(&m->list_work);
	}
	pthread_mutex_unlock(&m->list_lock);
}

/* A background lister (arg: its struct lister): takes directories off the
 * queue and lists them (ensure_listed(), so a directory listed meanwhile
 * costs nothing). */
static void *lister_main(void *arg)
{
	struct tfs_meta *m = ((struct lister *)arg)->m;
	int slot = ((struct lister *)arg)->slot;
	pthread_mutex_lock(&m->list_lock);
	for (;;) {
		while (!m->stop && m->qlen == 0)
			pthread_cond_wait(&m->list_work, &m->list_lock);
		if (m->stop)
			break;
		char *dir = m->queue[m->qhead];
		m->qhead = (m->qhead + 1) % LIST_QUEUE;
		m->qlen--;
		m->running[slot] = dir;
		pthread_mutex_unlock(&m->list_lock);

		uint8_t h[HLEN];
		bool listed;
		struct lister *me = &m->listers[slot];
		meta_dir_hash(dir, h);
		atomic_store(&me->demand, 0);
		atomic_store(&me->tag, dir_tag(h));
		int rc = ensure_listed(m, dir, h, DIR_AHEAD, &me->demand, &listed);
		atomic_store(&me->tag, 0);
		if (listed)
			atomic_fetch_add(&m->listed_ahead, 1);
		if (rc && rc != ENOENT && rc != ECANCELED)
			tfs_debug(m->log, "meta: listing '%s' ahead of its lookups failed: %s", dir,
				  strerror(rc));

		pthread_mutex_lock(&m->list_lock);
		if (rc && rc != ENOENT)
			m->list_failed_ms = tfs_wall_ms();
		m->running[slot] = NULL;
		free(dir);
	}
	pthread_mutex_unlock(&m->list_lock);
	return NULL;
}

int tfs_meta_readdir(struct tfs_meta *m, const char *dir, const char *after, tfs_meta_entry_fn fn,
		     void *ctx)
{
	uint8_t h[HLEN];
	struct dirrec d = { 0 };
	int rc;

	meta_dir_hash(dir, h);
	int drc = meta_get_dir(m, h, &d);
	if (drc == EIO)
		return readdir_direct(m, dir, after, fn, ctx);
	rc = ensure_listed(m, dir, h, 0, NULL, NULL);
	if (rc)
		return rc;

	MDB_txn *txn;
	MDB_cursor *c;
	uint8_t kbuf[HLEN + NAME_MAX + 1];
	size_t alen = strlen(after);
	if (alen > NAME_MAX)
		return EINVAL;
	rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return meta_errno(m, rc, "read txn");
	rc = mdb_cursor_open(txn, m->entries, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return meta_errno(m, rc, "cursor");
	}
	memcpy(kbuf, h, HLEN);
	memcpy(kbuf + HLEN, after, alen);
	MDB_val k = { HLEN + alen, kbuf }, v;
	int cb = 0;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && k.mv_size >= HLEN && memcmp(k.mv_data, h, HLEN) == 0) {
		char name[NAME_MAX + 1];
		size_t nlen = k.mv_size - HLEN;
		if (nlen <= NAME_MAX && meta_valid_rec(&v)) {
			memcpy(name, (const char *)k.mv_data + HLEN, nlen);
			name[nlen] = '\0';
			if (!(alen && strcmp(name, after) == 0)) {
				struct tfs_attr a;
				uint64_t f;
				meta_decode(&v, &a, &f);
				if (a.type != TYPE_WHITEOUT) {
					cb = fn(ctx, name, &a);
					if (cb)
						break;
				}
			}
		}
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (cb)
		return cb;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : meta_errno(m, rc, "readdir");
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

void tfs_meta_stats(struct tfs_meta *m, struct json_object *out)
{
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return;
	json_object_object_add(o, "hits", json_object_new_uint64(atomic_load(&m->hits)));
	json_object_object_add(o, "negative_hits",
			       json_object_new_uint64(atomic_load(&m->neg_hits)));
	json_object_object_add(o, "backend_lookups",
			       json_object_new_uint64(atomic_load(&m->backend_lookups)));
	json_object_object_add(o, "listings", json_object_new_uint64(atomic_load(&m->listings)));
	json_object_object_add(o, "list_pages",
			       json_object_new_uint64(atomic_load(&m->list_pages)));
	json_object_object_add(o, "stale_served",
			       json_object_new_uint64(atomic_load(&m->stale_served)));
	json_object_object_add(o, "errors", json_object_new_uint64(atomic_load(&m->errors)));
	json_object_object_add(o, "listed_ahead",
			       json_object_new_uint64(atomic_load(&m->listed_ahead)));
	json_object_object_add(o, "listed_ahead_partial",
			       json_object_new_uint64(atomic_load(&m->listed_partial)));
	pthread_mutex_lock(&m->list_lock);
	size_t busy = m->qlen;
	for (int i = 0; i < LISTER_THREADS; i++)
		busy += m->running[i] != NULL;
	pthread_mutex_unlock(&m->list_lock);
	json_object_object_add(o, "list_ahead_pending", json_object_new_uint64(busy));
	json_object_object_add(o, "ttl_ms", json_object_new_uint64(atomic_load(&m->ttl_ms)));
	json_object_object_add(out, "metadata", o);
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
	for (int i = 0; m->list_ahead && i < LISTER_THREADS; i++) {
		m->listers[i] = (struct lister){ .m = m, .slot = i };
		if (pthread_create(&m->listers[i].thread, NULL, lister_main, &m->listers[i]) != 0) {
			tfs_warn(log, "meta: cannot start a background lister; lookups HEAD "
				      "instead");
			break;
		}
		m->nlisters++;
	}
	if (m->nlisters == 0)
		m->list_ahead = false;
	*out = m;
	return 0;
}

void tfs_meta_close(struct tfs_meta *m)
{
	if (m == NULL)
		return;
	pthread_mutex_lock(&m->list_lock);
	atomic_store(&m->stop, true);
	pthread_cond_broadcast(&m->list_work);
	pthread_mutex_unlock(&m->list_lock);
	for (int i = 0; i < m->nlisters; i++)
		pthread_join(m->listers[i].thread, NULL);
	for (size_t i = 0; i < m->qlen; i++)
		free(m->queue[(m->qhead + i) % LIST_QUEUE]);
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
