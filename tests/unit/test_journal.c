/* test_journal.c - write-back journal records: encoding round trips,
 * rejection of damaged values, and the LMDB operations. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal.h"

static struct tfs_jrec sample(void)
{
	struct tfs_jrec r = {
		.op = TFS_J_PUT,
		.gen = 7,
		.staging_id = 42,
		.size = 123456789,
		.mode = 0640,
		.uid = 1000,
		.gid = 100,
		.mtime = 1600000000,
		.atime = 1700000000,
		.ctime = 1650000000,
		.mtime_ns = 123456789,
		.atime_ns = 5,
		.ctime_ns = 999999999,
		.rdev = 0x0103,
		.closed_ms = 99,
		.attempts = 3,
		.mpu_gen = 6,
	};
	r.path = strdup("ckpt/epoch-3/model.pt");
	snprintf(r.mpu.upload_id, sizeof(r.mpu.upload_id), "%s", "2~abcDEF");
	r.mpu.part_size = 8 << 20;
	cr_assert_eq(tfs_mpu_alloc(&r.mpu, 3), 0);
	snprintf(r.mpu.etags[0], TFS_ETAG_MAX, "%s", "\"e0\"");
	snprintf(r.mpu.etags[2], TFS_ETAG_MAX, "%s", "\"e2\"");
	return r;
}

static void same(const struct tfs_jrec *a, const struct tfs_jrec *b)
{
	cr_assert_eq(a->op, b->op);
	cr_assert_eq(a->gen, b->gen);
	cr_assert_eq(a->staging_id, b->staging_id);
	cr_assert_eq(a->size, b->size);
	cr_assert_eq(a->mode, b->mode);
	cr_assert_eq(a->uid, b->uid);
	cr_assert_eq(a->gid, b->gid);
	cr_assert_eq(a->mtime, b->mtime);
	cr_assert_eq(a->atime, b->atime);
	cr_assert_eq(a->ctime, b->ctime);
	cr_assert_eq(a->mtime_ns, b->mtime_ns);
	cr_assert_eq(a->atime_ns, b->atime_ns);
	cr_assert_eq(a->ctime_ns, b->ctime_ns);
	cr_assert_eq(a->rdev, b->rdev);
	cr_assert_eq(a->closed_ms, b->closed_ms);
	cr_assert_eq(a->attempts, b->attempts);
	cr_assert_eq(a->mpu_gen, b->mpu_gen);
	cr_assert_str_eq(a->path, b->path);
	cr_assert_str_eq(a->mpu.upload_id, b->mpu.upload_id);
	cr_assert_eq(a->mpu.part_size, b->mpu.part_size);
	cr_assert_eq(a->mpu.nparts, b->mpu.nparts);
	for (unsigned i = 0; i < a->mpu.nparts; i++)
		cr_assert_str_eq(a->mpu.etags[i], b->mpu.etags[i]);
}

Test(journal, encode_decode_round_trip)
{
	struct tfs_jrec r = sample(), d;
	void *buf;
	size_t len;
	cr_assert_eq(tfs_jrec_encode(&r, &buf, &len), 0);
	cr_assert_eq(tfs_jrec_decode(buf, len, &d), 0);
	same(&r, &d);
	/* Every truncation and an extra byte are rejected, never misread. */
	for (size_t n = 0; n < len; n++) {
		struct tfs_jrec x;
		cr_assert_eq(tfs_jrec_decode(buf, n, &x), EINVAL, "truncated to %zu", n);
	}
	char *longer = malloc(len + 1);
	memcpy(longer, buf, len);
	longer[len] = 0;
	struct tfs_jrec x;
	cr_assert_eq(tfs_jrec_decode(longer, len + 1, &x), EINVAL);
	/* An unknown version is rejected. */
	((unsigned char *)buf)[0] = 99;
	cr_assert_eq(tfs_jrec_decode(buf, len, &x), EINVAL);
	free(longer);
	free(buf);
	tfs_jrec_clear(&r);
	tfs_jrec_clear(&d);
}

/* A record written before atime, ctime, nanoseconds and rdev existed
 * (version 1: no tail of 40 bytes) still reads, with those fields 0, so
 * an upgrade keeps every pending upload. */
Test(journal, version_1_record_reads)
{
	struct tfs_jrec r = sample(), d;
	void *buf;
	size_t len;
	cr_assert_eq(tfs_jrec_encode(&r, &buf, &len), 0);
	((unsigned char *)buf)[0] = 1;
	cr_assert_eq(tfs_jrec_decode(buf, len, &d), EINVAL, "a version 1 record with a tail");
	cr_assert_eq(tfs_jrec_decode(buf, len - 40, &d), 0);
	cr_assert_str_eq(d.path, r.path);
	cr_assert_eq(d.mtime, r.mtime);
	cr_assert_eq(d.mode, r.mode);
	cr_assert_eq(d.mpu.nparts, r.mpu.nparts);
	cr_assert(d.atime == 0 && d.ctime == 0 && d.rdev == 0 && d.mtime_ns == 0);
	free(buf);
	tfs_jrec_clear(&r);
	tfs_jrec_clear(&d);
}

Test(journal, record_without_multipart_state)
{
	struct tfs_jrec r = { .op = TFS_J_DELETE, .gen = 1, .is_dir = 1 }, d;
	r.path = strdup("a/dir");
	void *buf;
	size_t len;
	cr_assert_eq(tfs_jrec_encode(&r, &buf, &len), 0);
	cr_assert_eq(tfs_jrec_decode(buf, len, &d), 0);
	same(&r, &d);
	cr_assert_eq(d.is_dir, 1);
	cr_assert_null(d.mpu.etags);
	free(buf);
	tfs_jrec_clear(&r);
	tfs_jrec_clear(&d);
}

static int count_fn(void *ctx, const struct tfs_jrec *r)
{
	cr_assert_not_null(r->path);
	(*(int *)ctx)++;
	return 0;
}

Test(journal, lmdb_put_get_del_each)
{
	char dir[] = "/tmp/tfs-journal-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	MDB_env *env;
	MDB_txn *txn;
	struct tfs_journal jn, other;
	cr_assert_eq(mdb_env_create(&env), 0);
	cr_assert_eq(mdb_env_set_maxdbs(env, 4), 0);
	cr_assert_eq(mdb_env_open(env, dir, MDB_NOTLS, 0600), 0);
	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	cr_assert_eq(tfs_journal_open(txn, "/mnt/a", &jn), 0);
	cr_assert_eq(tfs_journal_open(txn, "/mnt/b", &other), 0);
	struct tfs_jrec r = sample(), d;
	/* Keys longer than LMDB's 511-byte limit are fine (hashed). */
	char *longpath = malloc(1025);
	memset(longpath, 'k', 1024);
	longpath[1024] = '\0';
	struct tfs_jrec r2 = { .op = TFS_J_MKDIR, .gen = 1, .path = longpath };
	cr_assert_eq(tfs_journal_put(txn, &jn, &r), 0);
	cr_assert_eq(tfs_journal_put(txn, &jn, &r2), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);

	cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	cr_assert_eq(tfs_journal_get(txn, &jn, "ckpt/epoch-3/model.pt", &d), 0);
	same(&r, &d);
	tfs_jrec_clear(&d);
	cr_assert_eq(tfs_journal_get(txn, &jn, "nope", &d), ENOENT);
	int n = 0;
	cr_assert_eq(tfs_journal_each(txn, &jn, count_fn, &n), 0);
	cr_assert_eq(n, 2);
	/* Another mount sharing the cache has its own journal. */
	n = 0;
	cr_assert_eq(tfs_journal_each(txn, &other, count_fn, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(tfs_journal_get(txn, &other, "ckpt/epoch-3/model.pt", &d), ENOENT);
	mdb_txn_abort(txn);

	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	cr_assert_eq(tfs_journal_del(txn, &jn, r.path), 0);
	cr_assert_eq(tfs_journal_del(txn, &jn, "never-there"), 0);
	cr_assert_eq(tfs_journal_get(txn, &jn, r.path, &d), ENOENT);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	tfs_jrec_clear(&r);
	tfs_jrec_clear(&r2);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

struct seen {
	int n;
	char key[64], id[64];
};

static int stream_fn(void *ctx, const char *key, const char *upload_id)
{
	struct seen *s = ctx;
	s->n++;
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->id, sizeof(s->id), "%s", upload_id);
	return 0;
}

Test(journal, stream_table_per_owner)
{
	char dir[] = "/tmp/tfs-journal-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	MDB_env *env;
	MDB_txn *txn;
	struct tfs_journal jn, other;
	cr_assert_eq(mdb_env_create(&env), 0);
	cr_assert_eq(mdb_env_set_maxdbs(env, 4), 0);
	cr_assert_eq(mdb_env_open(env, dir, MDB_NOTLS, 0600), 0);
	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	cr_assert_eq(tfs_journal_open(txn, "/mnt/a", &jn), 0);
	cr_assert_eq(tfs_journal_open(txn, "/mnt/b", &other), 0);
	cr_assert_eq(tfs_journal_stream_add(txn, &jn, "ckpt/a.pt", "upload-1"), 0);
	cr_assert_eq(tfs_journal_stream_add(txn, &jn, "ckpt/b.pt", "upload-2"), 0);
	cr_assert_eq(tfs_journal_stream_add(txn, &other, "ckpt/a.pt", "upload-3"), 0);
	/* A record of the same path is a different table. */
	struct tfs_jrec r = sample();
	cr_assert_eq(tfs_journal_put(txn, &jn, &r), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);

	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	struct seen s = { 0 };
	cr_assert_eq(tfs_journal_stream_each(txn, &jn, stream_fn, &s), 0);
	cr_assert_eq(s.n, 2);
	cr_assert_eq(tfs_journal_stream_del(txn, &jn, "upload-2"), 0);
	cr_assert_eq(tfs_journal_stream_del(txn, &jn, "never-there"), 0);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(tfs_journal_stream_each(txn, &jn, stream_fn, &s), 0);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.key, "ckpt/a.pt");
	cr_assert_str_eq(s.id, "upload-1");
	memset(&s, 0, sizeof(s));
	cr_assert_eq(tfs_journal_stream_each(txn, &other, stream_fn, &s), 0);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.id, "upload-3");
	int n = 0;
	cr_assert_eq(tfs_journal_each(txn, &jn, count_fn, &n), 0);
	cr_assert_eq(n, 1, "streams showed up as journal records");
	mdb_txn_abort(txn);
	mdb_env_close(env);
	tfs_jrec_clear(&r);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* An OPEN record (a file open for writing, never committed) reads back;
 * an op beyond it does not. */
Test(journal, open_record_round_trip)
{
	struct tfs_jrec r = sample(), d, x;
	void *buf;
	size_t len;
	r.op = TFS_J_OPEN;
	cr_assert_eq(tfs_jrec_encode(&r, &buf, &len), 0);
	cr_assert_eq(tfs_jrec_decode(buf, len, &d), 0);
	same(&r, &d);
	free(buf);
	r.op = TFS_J_OPEN + 1;
	cr_assert_eq(tfs_jrec_encode(&r, &buf, &len), 0);
	cr_assert_eq(tfs_jrec_decode(buf, len, &x), EINVAL);
	free(buf);
	tfs_jrec_clear(&r);
	tfs_jrec_clear(&d);
}
