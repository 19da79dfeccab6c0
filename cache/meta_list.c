/* meta_list.c - the metadata cache's listings: a directory listed from
 * the backend into the cache (refresh, prune), readdir, and listing ahead
 * of lookups by background threads.  Shared state and contracts:
 * meta_internal.h.
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

#include "meta_internal.h"
#include "clock.h"

#include "meta_headers.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_RETRY_MS 1000 /* after a failed background listing, queue none for this long */

/* A directory's tag for struct lister: never 0 (0 means "none"). */
static uint64_t dir_tag(const uint8_t h[HLEN])
{
	uint64_t t;
	memcpy(&t, h, sizeof(t));
	return t ? t : 1;
}

void meta_note_lookup(struct tfs_meta *m, const uint8_t h[HLEN])
{
	uint64_t t = dir_tag(h);
	for (int i = 0; i < m->nlisters; i++)
		if (atomic_load(&m->listers[i].tag) == t)
			atomic_fetch_add(&m->listers[i].demand, 1);
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

void meta_list_ahead(struct tfs_meta *m, const char *dir)
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

void meta_listers_start(struct tfs_meta *m)
{
	for (int i = 0; m->list_ahead && i < LISTER_THREADS; i++) {
		m->listers[i] = (struct lister){ .m = m, .slot = i };
		if (pthread_create(&m->listers[i].thread, NULL, lister_main, &m->listers[i]) != 0) {
			tfs_warn(m->log, "meta: cannot start a background lister; lookups HEAD "
					 "instead");
			break;
		}
		m->nlisters++;
	}
	if (m->nlisters == 0)
		m->list_ahead = false;
}

void meta_listers_stop(struct tfs_meta *m)
{
	pthread_mutex_lock(&m->list_lock);
	atomic_store(&m->stop, true);
	pthread_cond_broadcast(&m->list_work);
	pthread_mutex_unlock(&m->list_lock);
	for (int i = 0; i < m->nlisters; i++)
		pthread_join(m->listers[i].thread, NULL);
	for (size_t i = 0; i < m->qlen; i++)
		free(m->queue[(m->qhead + i) % LIST_QUEUE]);
}

size_t meta_list_pending(struct tfs_meta *m)
{
	pthread_mutex_lock(&m->list_lock);
	size_t busy = m->qlen;
	for (int i = 0; i < LISTER_THREADS; i++)
		busy += m->running[i] != NULL;
	pthread_mutex_unlock(&m->list_lock);
	return busy;
}

/* ---- readdir ---- */

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
