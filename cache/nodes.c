/* nodes.c - the persisted node table of a mount (nodes.h): one LMDB named
 * database, records keyed by owner hash and node ID. */
#include "config.h"

#include "nodes.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lmdb_env.h"

#define OWNER_LEN 8
#define KEY_LEN (OWNER_LEN + 8)
#define VAL_HEAD 5 /* type, fmt */

struct tfs_nodes {
	MDB_env *env;
	MDB_dbi dbi;
	uint8_t owner[OWNER_LEN];
	const struct tfs_log *log;
};

static void make_key(const struct tfs_nodes *n, uint64_t ino, uint8_t k[KEY_LEN])
{
	memcpy(k, n->owner, OWNER_LEN);
	for (int i = 0; i < 8; i++)
		k[OWNER_LEN + i] = (uint8_t)(ino >> (56 - 8 * i));
}

static uint64_t key_ino(const uint8_t *k)
{
	uint64_t ino = 0;
	for (int i = 0; i < 8; i++)
		ino = ino << 8 | k[OWNER_LEN + i];
	return ino;
}

static bool ours(const struct tfs_nodes *n, const MDB_val *k)
{
	return k->mv_size == KEY_LEN && memcmp(k->mv_data, n->owner, OWNER_LEN) == 0;
}

/* Delete every record of this owner in `txn`. */
static int wipe(struct tfs_nodes *n, MDB_txn *txn)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, n->dbi, &c);
	if (rc)
		return rc;
	uint8_t k0[KEY_LEN];
	make_key(n, 0, k0);
	MDB_val k = { KEY_LEN, k0 }, v;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && ours(n, &k)) {
		rc = mdb_cursor_del(c, 0);
		k.mv_size = KEY_LEN;
		k.mv_data = k0;
		if (rc == 0)
			rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int tfs_nodes_open(MDB_env *env, const char *owner, bool wipe_all, const struct tfs_log *log,
		   struct tfs_nodes **out)
{
	struct tfs_nodes *n = calloc(1, sizeof(*n));
	if (n == NULL)
		return ENOMEM;
	n->env = env;
	n->log = log;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (EVP_Digest(owner, strlen(owner), md, &mdlen, EVP_sha256(), NULL) != 1) {
		free(n);
		return ENOMEM;
	}
	memcpy(n->owner, md, OWNER_LEN);
	MDB_txn *txn;
	int rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc == 0) {
		rc = mdb_dbi_open(txn, "nodes", MDB_CREATE, &n->dbi);
		if (rc == 0 && wipe_all)
			rc = wipe(n, txn);
		if (rc == 0)
			rc = mdb_txn_commit(txn);
		else
			mdb_txn_abort(txn);
	}
	if (rc) {
		rc = tfs_lmdb_fail(log, rc, "node table of %s: cannot open it", owner);
		free(n);
		return rc;
	}
	*out = n;
	return 0;
}

void tfs_nodes_close(struct tfs_nodes *n)
{
	free(n);
}

static int put_one(struct tfs_nodes *n, MDB_txn *txn, const struct tfs_node_rec *r)
{
	uint8_t kb[KEY_LEN];
	make_key(n, r->ino, kb);
	MDB_val k = { KEY_LEN, kb };
	if (r->path == NULL) {
		int rc = mdb_del(txn, n->dbi, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	size_t plen = strlen(r->path);
	MDB_val v = { VAL_HEAD + plen, NULL };
	int rc = mdb_put(txn, n->dbi, &k, &v, MDB_RESERVE);
	if (rc)
		return rc;
	uint8_t *p = v.mv_data;
	p[0] = (uint8_t)r->type;
	memcpy(p + 1, &r->fmt, 4);
	memcpy(p + VAL_HEAD, r->path, plen);
	return 0;
}

int tfs_nodes_write(struct tfs_nodes *n, const struct tfs_node_rec *recs, size_t count,
		    uint64_t next_ino)
{
	MDB_txn *txn = NULL;
	int rc = mdb_txn_begin(n->env, NULL, 0, &txn);
	for (size_t i = 0; rc == 0 && i < count; i++)
		rc = put_one(n, txn, &recs[i]);
	if (rc == 0) {
		uint8_t kb[KEY_LEN], vb[8];
		make_key(n, 0, kb);
		memcpy(vb, &next_ino, 8);
		MDB_val k = { KEY_LEN, kb }, v = { 8, vb };
		rc = mdb_put(txn, n->dbi, &k, &v, 0);
	}
	if (rc == 0)
		rc = mdb_txn_commit(txn);
	else if (txn)
		mdb_txn_abort(txn);
	if (rc == 0)
		return 0;
	return tfs_lmdb_fail(n->log, rc, "node table: cannot write %zu record(s)", count);
}

int tfs_nodes_match(struct tfs_nodes *n, uint64_t ino, enum tfs_ftype type, uint32_t fmt,
		    const char *path)
{
	MDB_txn *txn = NULL;
	int rc = mdb_txn_begin(n->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return tfs_lmdb_fail(n->log, rc, "node table: cannot read it");
	uint8_t kb[KEY_LEN];
	make_key(n, ino, kb);
	MDB_val k = { KEY_LEN, kb }, v;
	rc = mdb_get(txn, n->dbi, &k, &v);
	bool same = false;
	if (rc == 0) {
		const uint8_t *p = v.mv_data;
		size_t plen = strlen(path);
		same = v.mv_size == VAL_HEAD + plen && p[0] == (uint8_t)type &&
		       memcmp(p + 1, &fmt, 4) == 0 && memcmp(p + VAL_HEAD, path, plen) == 0;
	}
	mdb_txn_abort(txn);
	if (rc && rc != MDB_NOTFOUND)
		return tfs_lmdb_fail(n->log, rc, "node table: read");
	return same ? 0 : ENOENT;
}

int tfs_nodes_load(struct tfs_nodes *n, tfs_nodes_fn fn, void *ctx, uint64_t *next_ino)
{
	MDB_txn *txn = NULL;
	MDB_cursor *c = NULL;
	*next_ino = 0;
	int rc = mdb_txn_begin(n->env, NULL, MDB_RDONLY, &txn);
	if (rc == 0)
		rc = mdb_cursor_open(txn, n->dbi, &c);
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		return tfs_lmdb_fail(n->log, rc, "node table: cannot read it");
	}
	uint8_t k0[KEY_LEN];
	make_key(n, 0, k0);
	MDB_val k = { KEY_LEN, k0 }, v;
	char *path = NULL;
	size_t cap = 0;
	unsigned bad = 0;
	int frc = 0;
	rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	while (rc == 0 && frc == 0 && ours(n, &k)) {
		uint64_t ino = key_ino(k.mv_data);
		const uint8_t *p = v.mv_data;
		if (ino == 0 && v.mv_size == 8) {
			memcpy(next_ino, p, 8);
		} else if (ino == 0 || v.mv_size < VAL_HEAD ||
			   (p[0] != TFS_FT_FILE && p[0] != TFS_FT_DIR)) {
			bad++;
		} else {
			size_t plen = v.mv_size - VAL_HEAD;
			if (plen + 1 > cap) {
				char *np = realloc(path, plen + 1);
				if (np == NULL) {
					frc = ENOMEM;
					break;
				}
				path = np;
				cap = plen + 1;
			}
			memcpy(path, p + VAL_HEAD, plen);
			path[plen] = '\0';
			struct tfs_node_rec r = { .ino = ino, .type = p[0], .path = path };
			memcpy(&r.fmt, p + 1, 4);
			frc = fn(ctx, &r);
		}
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	free(path);
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (bad)
		tfs_warn(n->log, "node table: %u record(s) that do not decode skipped", bad);
	if (frc)
		return frc;
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : tfs_lmdb_fail(n->log, rc, "node table: read");
}
