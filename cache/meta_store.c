/* meta_store.c - the metadata cache's LMDB records: their encoding, the
 * reads and writes of entries and directory listings, tombstones, and the
 * inode numbers given out.  The contracts are in meta_internal.h.
 *
 * Two named DBs in the shared environment:
 *   meta_entries  key = H(dir) || name        value = struct rec + etag
 *   meta_dirs     key = H(dir)                value = struct dirrec (8 bytes
 *                                             before flags existed: flags 0)
 * H(dir) is the first 16 bytes of SHA-256(dir), which keeps keys far below
 * LMDB's 511-byte limit for any S3 key and groups a directory's entries in
 * name order, so readdir is a cursor walk in bounded memory.
 * meta_dirs also holds, under INO_KEY, the next inode number to give out.
 */
#include "config.h"

#include "meta_internal.h"
#include "clock.h"

#include "lmdb_env.h"
#include "path.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define REC_VERSION 3   /* 2: without the fields after fetched_ms */
#define REC_HEADERS 0x1 /* flags: attributes from a HEAD */
#define REC_LOCAL 0x2   /* flags: written through the mount, not in the bucket yet */

struct rec {
	uint8_t version;
	uint8_t type;
	uint8_t flags;
	uint8_t pad;
	uint16_t etag_len;
	uint16_t pad2;
	uint32_t mode, uid, gid;
	uint64_t size;
	int64_t mtime;
	uint64_t fetched_ms;
	/* Version 3: */
	uint32_t fmt, pad3;
	uint64_t rdev;
	int64_t atime, ctime;
	uint64_t ino;
	uint32_t mtime_ns, atime_ns, ctime_ns, pad4;
};

#define REC_V2_SIZE offsetof(struct rec, fmt)
/* The key in meta_dirs (whose other keys are HLEN bytes long) of the next
 * inode number to give out; numbers start at INO_FIRST. */
#define INO_KEY "next_ino"
#define INO_FIRST 16

bool meta_fresh(struct tfs_meta *m, uint64_t fetched, uint64_t now)
{
	uint64_t max_age = atomic_load(&m->ttl_ms);

	if (max_age == UINT64_MAX)
		return true;
	return now >= fetched ? now - fetched < max_age : true;
}

void meta_dir_hash(const char *dir, uint8_t h[HLEN])
{
	uint8_t full[32];
	unsigned int len = 0;
	EVP_Digest(dir, strlen(dir), full, &len, EVP_sha256(), NULL);
	memcpy(h, full, HLEN);
}

int tfs_meta_join(const char *dir, const char *name, char *buf, size_t len)
{
	int n = dir[0] ? snprintf(buf, len, "%s/%s", dir, name) : snprintf(buf, len, "%s", name);
	return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
}

int meta_errno(const struct tfs_meta *m, int rc, const char *what)
{
	if (rc == MDB_NOTFOUND)
		return ENOENT;
	return tfs_lmdb_fail(m->log, rc, "meta: %s", what);
}

/* ---- record encoding ---- */

/* The size of a record's fixed part: version 2 records (written before
 * the fields of version 3) are read too, with those fields 0. */
static size_t rec_size(uint8_t version)
{
	return version == REC_VERSION ? sizeof(struct rec) : version == 2 ? REC_V2_SIZE : 0;
}

void meta_decode(const MDB_val *v, struct tfs_attr *a, uint64_t *fetched)
{
	struct rec r;
	memset(&r, 0, sizeof(r));
	memcpy(&r, v->mv_data, REC_V2_SIZE);
	size_t hs = rec_size(r.version);
	memcpy(&r, v->mv_data, hs);
	memset(a, 0, sizeof(*a));
	a->type = (enum tfs_ftype)r.type;
	a->size = r.size;
	a->mtime = r.mtime;
	a->atime = r.atime;
	a->ctime = r.ctime;
	a->mode = r.mode;
	a->fmt = r.fmt;
	a->uid = r.uid;
	a->gid = r.gid;
	a->rdev = r.rdev;
	a->ino = r.ino;
	a->mtime_ns = r.mtime_ns;
	a->atime_ns = r.atime_ns;
	a->ctime_ns = r.ctime_ns;
	a->headers = (r.flags & REC_HEADERS) != 0;
	a->local = (r.flags & REC_LOCAL) != 0;
	size_t el = r.etag_len < TFS_ETAG_MAX ? r.etag_len : TFS_ETAG_MAX - 1;
	memcpy(a->etag, (const char *)v->mv_data + hs, el);
	a->etag[el] = '\0';
	*fetched = r.fetched_ms;
}

bool meta_valid_rec(const MDB_val *v)
{
	struct rec r;
	if (v->mv_size < REC_V2_SIZE)
		return false;
	memcpy(&r, v->mv_data, REC_V2_SIZE);
	size_t hs = rec_size(r.version);
	return hs && v->mv_size == hs + r.etag_len;
}

/* A new inode number, from the counter in meta_dirs (inside the caller's
 * write transaction, which serializes it).  Returns 0 or an LMDB error. */
static int next_ino(MDB_txn *txn, struct tfs_meta *m, uint64_t *ino)
{
	MDB_val k = { sizeof(INO_KEY) - 1, (void *)INO_KEY }, v;
	uint64_t n = INO_FIRST;
	int rc = mdb_get(txn, m->dirs, &k, &v);
	if (rc == 0 && v.mv_size == sizeof(n))
		memcpy(&n, v.mv_data, sizeof(n));
	else if (rc != 0 && rc != MDB_NOTFOUND)
		return rc;
	if (n < INO_FIRST)
		n = INO_FIRST;
	*ino = n++;
	v.mv_size = sizeof(n);
	v.mv_data = &n;
	return mdb_put(txn, m->dirs, &k, &v, 0);
}

bool meta_same_kind(const struct tfs_attr *a, const struct tfs_attr *b)
{
	return a->type == b->type && (a->type != TFS_FT_FILE || a->fmt == b->fmt);
}

int meta_put_entry(MDB_txn *txn, struct tfs_meta *m, const uint8_t h[HLEN], const char *name,
		   const struct tfs_attr *a, uint64_t fetched, uint64_t *ino_out)
{
	uint8_t kbuf[HLEN + NAME_MAX + 1];
	uint8_t vbuf[sizeof(struct rec) + TFS_ETAG_MAX];
	size_t nlen = strlen(name);
	struct rec r = {
		.version = REC_VERSION,
		.type = (uint8_t)a->type,
		.flags = (uint8_t)((a->headers ? REC_HEADERS : 0) | (a->local ? REC_LOCAL : 0)),
		.etag_len = (uint16_t)strlen(a->etag),
		.mode = a->mode,
		.uid = a->uid,
		.gid = a->gid,
		.size = a->size,
		.mtime = a->mtime,
		.fetched_ms = fetched,
		.fmt = a->fmt,
		.rdev = a->rdev,
		.atime = a->atime,
		.ctime = a->ctime,
		.ino = a->ino,
		.mtime_ns = a->mtime_ns,
		.atime_ns = a->atime_ns,
		.ctime_ns = a->ctime_ns,
	};
	memcpy(kbuf, h, HLEN);
	memcpy(kbuf + HLEN, name, nlen);
	MDB_val k = { HLEN + nlen, kbuf }, v;
	if (r.ino == 0 && a->type != TYPE_WHITEOUT) {
		/* The name keeps its number while it keeps its kind. */
		if (mdb_get(txn, m->entries, &k, &v) == 0 && meta_valid_rec(&v)) {
			struct tfs_attr old;
			uint64_t f;
			meta_decode(&v, &old, &f);
			if (meta_same_kind(&old, a))
				r.ino = old.ino;
		}
		if (r.ino == 0) {
			int rc = next_ino(txn, m, &r.ino);
			if (rc)
				return rc;
		}
	}
	memcpy(vbuf, &r, sizeof(r));
	memcpy(vbuf + sizeof(r), a->etag, r.etag_len);
	v.mv_size = sizeof(r) + r.etag_len;
	v.mv_data = vbuf;
	if (ino_out)
		*ino_out = r.ino;
	return mdb_put(txn, m->entries, &k, &v, 0);
}

/* ---- entries and directories ---- */

int meta_get_entry(struct tfs_meta *m, const uint8_t h[HLEN], const char *name, struct tfs_attr *a,
		   uint64_t *fetched)
{
	uint8_t kbuf[HLEN + NAME_MAX + 1];
	size_t nlen = strlen(name);
	MDB_txn *txn;
	memcpy(kbuf, h, HLEN);
	memcpy(kbuf + HLEN, name, nlen);
	MDB_val k = { HLEN + nlen, kbuf }, v;
	int rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return meta_errno(m, rc, "read txn");
	rc = mdb_get(txn, m->entries, &k, &v);
	if (rc == 0 && !meta_valid_rec(&v))
		rc = MDB_NOTFOUND;
	if (rc == 0)
		meta_decode(&v, a, fetched);
	mdb_txn_abort(txn);
	return meta_errno(m, rc, "get entry");
}

int meta_txn_get(struct tfs_meta *m, MDB_txn *txn, const uint8_t h[HLEN], const char *name,
		 struct tfs_attr *a, uint64_t *fetched)
{
	uint8_t kbuf[HLEN + NAME_MAX + 1];
	size_t nlen = strlen(name);
	memcpy(kbuf, h, HLEN);
	memcpy(kbuf + HLEN, name, nlen);
	MDB_val k = { HLEN + nlen, kbuf }, v;
	int rc = mdb_get(txn, m->entries, &k, &v);
	if (rc == 0 && !meta_valid_rec(&v))
		rc = MDB_NOTFOUND;
	if (rc == 0)
		meta_decode(&v, a, fetched);
	return rc;
}

int meta_get_dir(struct tfs_meta *m, const uint8_t h[HLEN], struct dirrec *d)
{
	MDB_txn *txn;
	MDB_val k = { HLEN, (void *)h }, v;
	int rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return meta_errno(m, rc, "read txn");
	rc = mdb_get(txn, m->dirs, &k, &v);
	memset(d, 0, sizeof(*d));
	if (rc == 0 && (v.mv_size == sizeof(*d) || v.mv_size == sizeof(d->listed_ms)))
		memcpy(d, v.mv_data, v.mv_size);
	else if (rc == 0)
		rc = MDB_NOTFOUND;
	mdb_txn_abort(txn);
	return meta_errno(m, rc, "get dir");
}

int meta_store_entry(struct tfs_meta *m, const uint8_t h[HLEN], const char *name,
		     struct tfs_attr *a, uint64_t fetched)
{
	MDB_txn *txn;
	uint64_t ino = 0;
	int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
	if (rc == 0) {
		rc = meta_put_entry(txn, m, h, name, a, fetched, &ino);
		if (rc == 0)
			rc = mdb_txn_commit(txn);
		else
			mdb_txn_abort(txn);
	}
	if (rc == 0)
		a->ino = ino;
	return meta_errno(m, rc, "store entry");
}

int meta_edit_entry(struct tfs_meta *m, const char *path, void (*fn)(struct tfs_attr *a, void *ctx),
		    void *ctx, const char *what)
{
	uint8_t h[HLEN];
	const char *name;
	struct tfs_attr a;
	uint64_t f;
	MDB_txn *txn;
	int rc = meta_path_entry(path, h, &name);
	if (rc)
		return rc;
	rc = mdb_txn_begin(m->env, NULL, 0, &txn);
	if (rc)
		return meta_errno(m, rc, what);
	rc = meta_txn_get(m, txn, h, name, &a, &f);
	if (rc == 0 && a.type == TYPE_WHITEOUT)
		rc = MDB_NOTFOUND;
	if (rc == 0) {
		fn(&a, ctx);
		rc = meta_put_entry(txn, m, h, name, &a, f, NULL);
	}
	if (rc == 0)
		return meta_errno(m, mdb_txn_commit(txn), what);
	mdb_txn_abort(txn);
	return meta_errno(m, rc, what);
}

/* ---- tombstones ---- */

int meta_put_tombstone(MDB_txn *txn, struct tfs_meta *m, const uint8_t h[HLEN], const char *name)
{
	struct tfs_attr a;
	memset(&a, 0, sizeof(a));
	a.type = (enum tfs_ftype)TYPE_WHITEOUT;
	return meta_put_entry(txn, m, h, name, &a, tfs_wall_ms(), NULL);
}

bool meta_tombstone(const struct tfs_attr *a)
{
	return a->type == TYPE_WHITEOUT && !a->local;
}

void meta_forget(struct tfs_meta *m, const char *dir, const char *name)
{
	uint8_t h[HLEN];
	MDB_txn *txn;
	if (strlen(name) > NAME_MAX)
		return;
	meta_dir_hash(dir, h);
	if (mdb_txn_begin(m->env, NULL, 0, &txn) != 0)
		return;
	if (meta_put_tombstone(txn, m, h, name) != 0) {
		mdb_txn_abort(txn);
		tfs_warn(m->log, "meta: cannot forget '%s' in '%s'", name, dir);
		return;
	}
	if (mdb_txn_commit(txn) != 0)
		tfs_warn(m->log, "meta: cannot forget '%s' in '%s'", name, dir);
}

/* ---- paths ---- */

int meta_split_path(const char *path, char *dir, size_t dlen, const char **name)
{
	int rc = tfs_path_split(path, dir, dlen, name);
	return rc == 0 && strlen(*name) > NAME_MAX ? ENAMETOOLONG : rc;
}

int meta_path_entry(const char *path, uint8_t h[HLEN], const char **name)
{
	char dir[4096];
	int rc = meta_split_path(path, dir, sizeof(dir), name);
	if (rc == 0)
		meta_dir_hash(dir, h);
	return rc;
}
