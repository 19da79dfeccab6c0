/* test_meta_attrs.c - what the metadata cache learns of an object beyond
 * its listing: the kind of file and the times in s3fs's headers (HEADed
 * once for small listed objects), a directory's attributes from its marker,
 * inode numbers kept with the entries, and records of the previous format.
 * Over a local backend (the headers are its xattrs). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <lmdb.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend.h"
#include "lmdb_env.h"
#include "local.h"
#include "log.h"
#include "meta.h"

#define MAP_SIZE (64ull << 20)

struct t {
	char dir[64], root[80], index[80];
	struct tfs_log log;
	struct tfs_backend *be;
	MDB_env *env;
	struct tfs_meta *m;
	struct tfs_cache_config cc;
};

static void drop_line(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	(void)level;
	(void)line;
}

static void t_meta_open(struct t *t)
{
	cr_assert_eq(tfs_meta_open(t->env, t->be, &t->cc, &t->log, &t->m), 0);
}

static void t_open(struct t *t, enum tfs_fetch_headers fh)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/tfs-meta-attrs-XXXXXX");
	cr_assert_not_null(mkdtemp(t->dir));
	snprintf(t->root, sizeof(t->root), "%s/b", t->dir);
	snprintf(t->index, sizeof(t->index), "%s/i", t->dir);
	cr_assert_eq(mkdir(t->root, 0700), 0);
	cr_assert_eq(mkdir(t->index, 0700), 0);
	tfs_log_init(&t->log, drop_line, NULL, TFS_LOG_DEBUG);
	struct tfs_local_config lc = { .root = t->root };
	cr_assert_eq(tfs_local_create(&lc, &t->log, &t->be), 0);
	cr_assert_eq(tfs_lmdb_open(t->index, MAP_SIZE, &t->log, &t->env), 0);
	t->cc = (struct tfs_cache_config){ .block_size = 1 << 20,
					   .metadata_ttl_ms = UINT64_MAX,
					   .fetch_headers = fh };
	t_meta_open(t);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void t_close(struct t *t)
{
	tfs_meta_close(t->m);
	tfs_lmdb_close(t->env);
	tfs_backend_destroy(t->be);
	nftw(t->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void put(struct t *t, const char *key, const char *body, const char *mode, const char *extra,
		const char *value)
{
	struct tfs_obj_meta om = { 0 };
	if (mode)
		cr_assert_eq(tfs_obj_meta_set(&om, "mode", mode), 0);
	if (extra)
		cr_assert_eq(tfs_obj_meta_set(&om, extra, value), 0);
	cr_assert_eq(tfs_backend_put(t->be, key, tfs_io_cbuf(body), strlen(body), &om, NULL), 0,
		     "put %s", key);
	tfs_obj_meta_clear(&om);
}

static uint64_t heads(struct t *t)
{
	return atomic_load(&tfs_backend_stats(t->be)->op[TFS_OP_HEAD].requests);
}

static int count_entry(void *ctx, const char *name, const struct tfs_attr *a)
{
	(void)name;
	(void)a;
	(*(unsigned *)ctx)++;
	return 0;
}

static void list(struct t *t, const char *dir)
{
	unsigned n = 0;
	cr_assert_eq(tfs_meta_readdir(t->m, dir, "", count_entry, &n), 0);
	cr_assert(n > 0);
}

/* Listed first, so each lookup below starts from the listing. */
Test(meta_attrs, small_objects_headed_once_for_their_kind)
{
	struct t t;
	char big[5001];
	t_open(&t, TFS_HEADERS_SMALL);
	memset(big, 'b', 5000);
	big[5000] = '\0';
	put(&t, "d/link", "../target", "41471", "mtime", "1800000000.123456789");
	put(&t, "d/fifo", "", "4516", NULL, NULL);
	put(&t, "d/chr", "", "8612", "rdev", "259");
	/* Objects that say S_IFLNK but cannot be symlinks (empty, or 4 KiB
	 * and more): the local backend makes no such symlink, so their
	 * headers are set on the files behind its back. */
	put(&t, "d/bad", "", NULL, NULL, NULL);
	put(&t, "d/big", big, NULL, NULL, NULL);
	for (int i = 0; i < 2; i++) {
		char p[160];
		snprintf(p, sizeof(p), "%s/d/%s", t.root, i ? "big" : "bad");
		cr_assert_eq(setxattr(p, "user.tierfs.meta.mode", "41471", 5, 0), 0, "%s", p);
	}
	list(&t, "d");

	struct tfs_attr a;
	uint64_t h0 = heads(&t);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "link", &a, NULL), 0);
	cr_assert_eq(a.fmt, S_IFLNK);
	cr_assert_eq(a.size, 9);
	cr_assert_eq(a.mode, 0777);
	cr_assert_eq(a.mtime, 1800000000);
	cr_assert_eq(a.mtime_ns, 123456789);
	cr_assert_eq(heads(&t), h0 + 1);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "link", &a, NULL), 0);
	cr_assert_eq(a.fmt, S_IFLNK);
	cr_assert_eq(heads(&t), h0 + 1, "HEADed again");

	cr_assert_eq(tfs_meta_lookup(t.m, "d", "fifo", &a, NULL), 0);
	cr_assert_eq(a.fmt, S_IFIFO);
	cr_assert_eq(a.mode, 0644);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "chr", &a, NULL), 0);
	cr_assert_eq(a.fmt, S_IFCHR);
	cr_assert_eq(a.rdev, 259);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "bad", &a, NULL), 0);
	cr_assert_eq(a.fmt, 0, "an empty symlink");
	/* 4 KiB and more: the listing is trusted, no HEAD, a regular file. */
	uint64_t h1 = heads(&t);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "big", &a, NULL), 0);
	cr_assert_eq(a.fmt, 0);
	cr_assert_eq(heads(&t), h1);
	/* Listed again (a readdir after the TTL): what the HEAD learned stays. */
	tfs_meta_set_ttl(t.m, 0);
	list(&t, "d");
	tfs_meta_set_ttl(t.m, UINT64_MAX);
	uint64_t h2 = heads(&t);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "link", &a, NULL), 0);
	cr_assert_eq(a.fmt, S_IFLNK);
	cr_assert_eq(heads(&t), h2);
	t_close(&t);
}

Test(meta_attrs, fetch_headers_false_trusts_listings)
{
	struct t t;
	t_open(&t, TFS_HEADERS_NONE);
	put(&t, "d/link", "target", "41471", NULL, NULL);
	list(&t, "d");
	struct tfs_attr a;
	uint64_t h0 = heads(&t);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "link", &a, NULL), 0);
	cr_assert_eq(a.fmt, 0);
	cr_assert_eq(heads(&t), h0);
	t_close(&t);
}

Test(meta_attrs, directory_marker_attributes)
{
	struct t t;
	t_open(&t, TFS_HEADERS_SMALL);
	put(&t, "m/", "", "17407", "uid", "123"); /* 041777, as s3fs writes it */
	put(&t, "m/x", "x", NULL, NULL, NULL);
	put(&t, "n/x", "x", NULL, NULL, NULL); /* no marker */
	list(&t, "");
	struct tfs_attr a;
	cr_assert_eq(tfs_meta_lookup(t.m, "", "m", &a, NULL), 0);
	cr_assert_eq(a.type, TFS_FT_DIR);
	cr_assert_eq(a.mode, 01777, "mode %o", a.mode);
	cr_assert_eq(a.uid, 123);
	cr_assert_eq(tfs_meta_lookup(t.m, "", "n", &a, NULL), 0);
	cr_assert_eq(a.type, TFS_FT_DIR);
	cr_assert_eq(a.mode, TFS_META_UNSET);
	/* Not listed first: the lookup finds the marker too. */
	t_close(&t);
	t_open(&t, TFS_HEADERS_SMALL);
	put(&t, "m/", "", "16877", "gid", "456");
	put(&t, "m/x", "x", NULL, NULL, NULL);
	cr_assert_eq(tfs_meta_lookup(t.m, "", "m", &a, NULL), 0);
	cr_assert_eq(a.type, TFS_FT_DIR);
	cr_assert_eq(a.mode, 0755);
	cr_assert_eq(a.gid, 456);
	t_close(&t);
}

struct ino_of {
	const char *name;
	uint64_t ino;
};

static int find_ino(void *ctx, const char *name, const struct tfs_attr *a)
{
	struct ino_of *f = ctx;
	if (strcmp(name, f->name) == 0)
		f->ino = a->ino;
	return 0;
}

Test(meta_attrs, inode_numbers_kept)
{
	struct t t;
	t_open(&t, TFS_HEADERS_SMALL);
	put(&t, "d/a", "a", NULL, NULL, NULL);
	put(&t, "d/b", "b", NULL, NULL, NULL);
	struct tfs_attr a, b;
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "a", &a, NULL), 0);
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "b", &b, NULL), 0);
	cr_assert_neq(a.ino, 0);
	cr_assert_neq(b.ino, 0);
	cr_assert_neq(a.ino, b.ino);
	cr_assert_eq(tfs_meta_ino(t.m, "d/a"), a.ino);
	struct ino_of f = { "a", 0 };
	cr_assert_eq(tfs_meta_readdir(t.m, "d", "", find_ino, &f), 0);
	cr_assert_eq(f.ino, a.ino, "listing gave %llu, lookup %llu", (unsigned long long)f.ino,
		     (unsigned long long)a.ino);
	/* Across a close and reopen of the cache. */
	tfs_meta_close(t.m);
	t_meta_open(&t);
	struct tfs_attr a2;
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "a", &a2, NULL), 0);
	cr_assert_eq(a2.ino, a.ino);
	/* A rename moves the number; a new name of a removed one gets a new. */
	MDB_txn *txn;
	cr_assert_eq(mdb_txn_begin(t.env, NULL, 0, &txn), 0);
	struct tfs_attr c = a;
	c.ino = 0;
	cr_assert_eq(tfs_meta_txn_set_local(t.m, txn, "d/c", &c), 0);
	cr_assert_eq(tfs_meta_txn_whiteout(t.m, txn, "d/a"), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	cr_assert_neq(tfs_meta_ino(t.m, "d/c"), a.ino);
	cr_assert_eq(tfs_meta_set_ino(t.m, "d/c", a.ino), 0);
	cr_assert_eq(tfs_meta_ino(t.m, "d/c"), a.ino);
	cr_assert_eq(tfs_meta_ino(t.m, "d/a"), 0);
	cr_assert_eq(mdb_txn_begin(t.env, NULL, 0, &txn), 0);
	cr_assert_eq(tfs_meta_txn_set_local(t.m, txn, "d/a", &c), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	uint64_t na = tfs_meta_ino(t.m, "d/a");
	cr_assert(na != 0 && na != a.ino && na != b.ino);
	cr_assert_eq(tfs_meta_set_ino(t.m, "d/none", 5), ENOENT);
	t_close(&t);
}

/* An entry cached by the previous format (version 2, without kinds,
 * extra times and inode numbers) still answers. */
Test(meta_attrs, version_2_entry_reads)
{
	struct t t;
	t_open(&t, TFS_HEADERS_SMALL);
	struct rec2 {
		uint8_t version, type, flags, pad;
		uint16_t etag_len, pad2;
		uint32_t mode, uid, gid;
		uint64_t size;
		int64_t mtime;
		uint64_t fetched_ms;
	} r = { .version = 2,
		.type = TFS_FT_FILE,
		.flags = 1,
		.etag_len = 4,
		.mode = 0600,
		.uid = 7,
		.gid = 8,
		.size = 12345,
		.mtime = 1500000000,
		.fetched_ms = 1 };
	uint8_t key[16 + 1], val[sizeof(r) + 4], full[32];
	unsigned int n = 0;
	EVP_Digest("d", 1, full, &n, EVP_sha256(), NULL);
	memcpy(key, full, 16);
	key[16] = 'z';
	memcpy(val, &r, sizeof(r));
	memcpy(val + sizeof(r), "\"e\"x", 4);
	MDB_txn *txn;
	MDB_dbi dbi;
	cr_assert_eq(mdb_txn_begin(t.env, NULL, 0, &txn), 0);
	cr_assert_eq(mdb_dbi_open(txn, "meta_entries", 0, &dbi), 0);
	MDB_val k = { sizeof(key), key }, v = { sizeof(val), val };
	cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	struct tfs_attr a;
	cr_assert_eq(tfs_meta_lookup(t.m, "d", "z", &a, NULL), 0);
	cr_assert_eq(a.size, 12345);
	cr_assert_eq(a.mode, 0600);
	cr_assert_eq(a.uid, 7);
	cr_assert_eq(a.fmt, 0);
	cr_assert_str_eq(a.etag, "\"e\"x");
	t_close(&t);
}
