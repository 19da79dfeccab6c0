/* journal.c - write-back journal records in LMDB.
 *
 * Value layout (little-endian host order; the journal never leaves the
 * machine): struct hdr, then the path, the upload id, for each part a
 * u16 length and the ETag bytes, and (version 2) struct tail.  Version 1
 * records, without the tail, are read with its fields 0.
 */
#include "config.h"

#include "journal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "lmdb_env.h"

#define JREC_VERSION 2

struct hdr {
	uint8_t version;
	uint8_t op;
	uint16_t path_len;
	uint32_t mode, uid, gid;
	uint64_t gen, staging_id, size;
	int64_t mtime;
	uint64_t closed_ms;
	uint32_t attempts, is_dir;
	uint64_t mpu_gen, part_size;
	uint32_t nparts;
	uint16_t upload_id_len;
	uint16_t pad;
};

struct tail {
	int64_t atime, ctime;
	uint64_t rdev;
	uint32_t mtime_ns, atime_ns, ctime_ns, pad;
};

void tfs_jrec_clear(struct tfs_jrec *r)
{
	if (r == NULL)
		return;
	free(r->path);
	tfs_mpu_clear(&r->mpu);
	memset(r, 0, sizeof(*r));
}

#define KEY_LEN (TFS_JOURNAL_OWNER_LEN + 32)

/* The key of `name` (a record's path, a stream's upload id) in either
 * database: this journal's owner, then SHA-256(name). */
static void key_of(const struct tfs_journal *j, const char *name, uint8_t k[KEY_LEN])
{
	unsigned int n = 0;
	memcpy(k, j->owner, TFS_JOURNAL_OWNER_LEN);
	EVP_Digest(name, strlen(name), k + TFS_JOURNAL_OWNER_LEN, &n, EVP_sha256(), NULL);
}

int tfs_jrec_encode(const struct tfs_jrec *r, void **out, size_t *len)
{
	size_t pl = strlen(r->path), ul = strlen(r->mpu.upload_id);
	unsigned np = r->mpu.etags ? r->mpu.nparts : 0;
	if (pl > UINT16_MAX || ul > UINT16_MAX)
		return EINVAL;
	size_t n = sizeof(struct hdr) + pl + ul + sizeof(struct tail);
	for (unsigned i = 0; i < np; i++)
		n += 2 + strlen(r->mpu.etags[i]);
	char *buf = malloc(n), *p = buf;
	if (buf == NULL)
		return ENOMEM;
	struct hdr h = {
		.version = JREC_VERSION,
		.op = (uint8_t)r->op,
		.path_len = (uint16_t)pl,
		.mode = r->mode,
		.uid = r->uid,
		.gid = r->gid,
		.gen = r->gen,
		.staging_id = r->staging_id,
		.size = r->size,
		.mtime = r->mtime,
		.closed_ms = r->closed_ms,
		.attempts = r->attempts,
		.is_dir = r->is_dir,
		.mpu_gen = r->mpu_gen,
		.part_size = r->mpu.part_size,
		.nparts = np,
		.upload_id_len = (uint16_t)ul,
	};
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, r->path, pl);
	p += pl;
	memcpy(p, r->mpu.upload_id, ul);
	p += ul;
	for (unsigned i = 0; i < np; i++) {
		uint16_t el = (uint16_t)strlen(r->mpu.etags[i]);
		memcpy(p, &el, 2);
		memcpy(p + 2, r->mpu.etags[i], el);
		p += 2 + el;
	}
	struct tail t = { .atime = r->atime,
			  .ctime = r->ctime,
			  .rdev = r->rdev,
			  .mtime_ns = r->mtime_ns,
			  .atime_ns = r->atime_ns,
			  .ctime_ns = r->ctime_ns };
	memcpy(p, &t, sizeof(t));
	*out = buf;
	*len = n;
	return 0;
}

int tfs_jrec_decode(const void *buf, size_t len, struct tfs_jrec *out)
{
	struct hdr h;
	const char *p = buf, *end = p + len;
	memset(out, 0, sizeof(*out));
	if (len < sizeof(h))
		return EINVAL;
	memcpy(&h, p, sizeof(h));
	p += sizeof(h);
	if ((h.version != JREC_VERSION && h.version != 1) || h.op < TFS_J_PUT ||
	    h.op > TFS_J_OPEN || (size_t)(end - p) < (size_t)h.path_len + h.upload_id_len ||
	    h.upload_id_len >= TFS_UPLOAD_ID_MAX || h.path_len == 0)
		return EINVAL;
	out->op = (enum tfs_jop)h.op;
	out->gen = h.gen;
	out->staging_id = h.staging_id;
	out->size = h.size;
	out->mode = h.mode;
	out->uid = h.uid;
	out->gid = h.gid;
	out->mtime = h.mtime;
	out->closed_ms = h.closed_ms;
	out->attempts = h.attempts;
	out->is_dir = h.is_dir;
	out->mpu_gen = h.mpu_gen;
	out->path = strndup(p, h.path_len);
	if (out->path == NULL)
		return ENOMEM;
	p += h.path_len;
	memcpy(out->mpu.upload_id, p, h.upload_id_len);
	out->mpu.upload_id[h.upload_id_len] = '\0';
	p += h.upload_id_len;
	out->mpu.part_size = h.part_size;
	if (h.nparts) {
		if (tfs_mpu_alloc(&out->mpu, h.nparts) != 0) {
			tfs_jrec_clear(out);
			return ENOMEM;
		}
		for (unsigned i = 0; i < h.nparts; i++) {
			uint16_t el;
			if (end - p < 2) {
				tfs_jrec_clear(out);
				return EINVAL;
			}
			memcpy(&el, p, 2);
			p += 2;
			if (end - p < el || el >= TFS_ETAG_MAX) {
				tfs_jrec_clear(out);
				return EINVAL;
			}
			memcpy(out->mpu.etags[i], p, el);
			out->mpu.etags[i][el] = '\0';
			p += el;
		}
	}
	if (h.version == JREC_VERSION) {
		struct tail t;
		if ((size_t)(end - p) < sizeof(t)) {
			tfs_jrec_clear(out);
			return EINVAL;
		}
		memcpy(&t, p, sizeof(t));
		p += sizeof(t);
		out->atime = t.atime;
		out->ctime = t.ctime;
		out->rdev = t.rdev;
		out->mtime_ns = t.mtime_ns;
		out->atime_ns = t.atime_ns;
		out->ctime_ns = t.ctime_ns;
	}
	if (p != end) {
		tfs_jrec_clear(out);
		return EINVAL;
	}
	return 0;
}

/* Store `len` bytes of `buf` (freed here, on every path) under `name`
 * in `dbi`: 0 or an errno. */
static int put_owned(MDB_txn *txn, const struct tfs_journal *j, MDB_dbi dbi, const char *name,
		     void *buf, size_t len)
{
	uint8_t kb[KEY_LEN];
	key_of(j, name, kb);
	MDB_val k = { sizeof(kb), kb }, v = { len, buf };
	int rc = mdb_put(txn, dbi, &k, &v, 0);
	free(buf);
	return tfs_lmdb_errno(rc);
}

/* Delete `name` from `dbi`; an absent key is no error. */
static int del_owned(MDB_txn *txn, const struct tfs_journal *j, MDB_dbi dbi, const char *name)
{
	uint8_t kb[KEY_LEN];
	key_of(j, name, kb);
	MDB_val k = { sizeof(kb), kb };
	int rc = mdb_del(txn, dbi, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : tfs_lmdb_errno(rc);
}

/* Call visit(ctx, value) for each record of `dbi` keyed under this
 * journal's owner, in key order, until it returns non-zero (returned). */
typedef int (*visit_fn)(void *ctx, const MDB_val *v);

static int each_owned(MDB_txn *txn, const struct tfs_journal *j, MDB_dbi dbi, visit_fn visit,
		      void *ctx)
{
	MDB_cursor *c;
	MDB_val k = { TFS_JOURNAL_OWNER_LEN, (void *)j->owner }, v;
	int rc = mdb_cursor_open(txn, dbi, &c);
	if (rc)
		return tfs_lmdb_errno(rc);
	int ret = 0;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     rc == 0 && ret == 0 && k.mv_size == KEY_LEN &&
	     memcmp(k.mv_data, j->owner, TFS_JOURNAL_OWNER_LEN) == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		ret = visit(ctx, &v);
	mdb_cursor_close(c);
	if (ret)
		return ret;
	return rc == MDB_NOTFOUND ? 0 : tfs_lmdb_errno(rc);
}

int tfs_journal_open(MDB_txn *txn, const char *owner, struct tfs_journal *out)
{
	uint8_t md[32];
	unsigned int n = 0;
	EVP_Digest(owner, strlen(owner), md, &n, EVP_sha256(), NULL);
	memcpy(out->owner, md, TFS_JOURNAL_OWNER_LEN);
	int rc = mdb_dbi_open(txn, "wb_journal", MDB_CREATE, &out->dbi);
	if (rc == 0)
		rc = mdb_dbi_open(txn, "wb_streams", MDB_CREATE, &out->streams);
	return tfs_lmdb_errno(rc);
}

int tfs_journal_get(MDB_txn *txn, const struct tfs_journal *j, const char *path,
		    struct tfs_jrec *out)
{
	uint8_t kb[KEY_LEN];
	memset(out, 0, sizeof(*out)); /* callers clear it on every path */
	key_of(j, path, kb);
	MDB_val k = { sizeof(kb), kb }, v;
	int rc = mdb_get(txn, j->dbi, &k, &v);
	if (rc)
		return tfs_lmdb_errno(rc);
	rc = tfs_jrec_decode(v.mv_data, v.mv_size, out);
	if (rc == 0 && strcmp(out->path, path) != 0) {
		tfs_jrec_clear(out); /* a SHA-256 collision: treat as absent */
		return ENOENT;
	}
	return rc;
}

int tfs_journal_put(MDB_txn *txn, const struct tfs_journal *j, const struct tfs_jrec *r)
{
	void *buf;
	size_t len;
	int rc = tfs_jrec_encode(r, &buf, &len);
	return rc ? rc : put_owned(txn, j, j->dbi, r->path, buf, len);
}

int tfs_journal_del(MDB_txn *txn, const struct tfs_journal *j, const char *path)
{
	return del_owned(txn, j, j->dbi, path);
}

struct visit_rec {
	tfs_journal_fn fn;
	void *ctx;
};

static int visit_rec(void *ctx, const MDB_val *v)
{
	struct visit_rec *vr = ctx;
	struct tfs_jrec r;
	if (tfs_jrec_decode(v->mv_data, v->mv_size, &r) == ENOMEM)
		return ENOMEM;
	int ret = vr->fn(vr->ctx, &r); /* r.path NULL when undecodable */
	tfs_jrec_clear(&r);
	return ret;
}

int tfs_journal_each(MDB_txn *txn, const struct tfs_journal *j, tfs_journal_fn fn, void *ctx)
{
	struct visit_rec vr = { fn, ctx };
	return each_owned(txn, j, j->dbi, visit_rec, &vr);
}

/* ---- streams ---- */

int tfs_journal_stream_add(MDB_txn *txn, const struct tfs_journal *j, const char *key,
			   const char *upload_id)
{
	size_t kl = strlen(key) + 1, ul = strlen(upload_id) + 1;
	char *buf = malloc(kl + ul);
	if (buf == NULL)
		return ENOMEM;
	memcpy(buf, key, kl);
	memcpy(buf + kl, upload_id, ul);
	return put_owned(txn, j, j->streams, upload_id, buf, kl + ul);
}

int tfs_journal_stream_del(MDB_txn *txn, const struct tfs_journal *j, const char *upload_id)
{
	return del_owned(txn, j, j->streams, upload_id);
}

struct visit_stream {
	tfs_journal_stream_fn fn;
	void *ctx;
};

static int visit_stream(void *ctx, const MDB_val *v)
{
	struct visit_stream *vs = ctx;
	const char *p = v->mv_data, *end = p + v->mv_size;
	const char *z = v->mv_size ? memchr(p, '\0', v->mv_size) : NULL;
	if (z == NULL || z + 1 >= end || end[-1] != '\0' ||
	    memchr(z + 1, '\0', (size_t)(end - z - 1)) != end - 1)
		return 0; /* undecodable: skipped */
	return vs->fn(vs->ctx, p, z + 1);
}

int tfs_journal_stream_each(MDB_txn *txn, const struct tfs_journal *j, tfs_journal_stream_fn fn,
			    void *ctx)
{
	struct visit_stream vs = { fn, ctx };
	return each_owned(txn, j, j->streams, visit_stream, &vs);
}
