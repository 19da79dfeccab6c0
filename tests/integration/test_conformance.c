/* test_conformance.c - one suite that every backend must pass.
 *
 * Run by tests/harness/conformance.sh against the local backend, against
 * moto_server and against a Ceph RADOS Gateway:
 *   TFS_TEST_BACKEND=local                 a fresh temporary directory
 *   TFS_TEST_BACKEND=s3 TFS_S3_ENDPOINT=.. TFS_S3_REGION=.. TFS_TEST_BUCKET=..
 *       AWS_ACCESS_KEY_ID=.. AWS_SECRET_ACCESS_KEY=.. TFS_S3_KIND=moto|rgw
 * Every test works under its own prefix, so runs never see each other.
 */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "dbuf.h"
#include "local.h"
#include "log.h"
#include "s3.h"

static struct tfs_log tlog;
static struct tfs_backend *be;
static char tmpdir[256];

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

static bool is_s3(void)
{
	return strcmp(env_or("TFS_TEST_BACKEND", "local"), "s3") == 0;
}

static bool is_kind(const char *kind)
{
	return strcmp(env_or("TFS_S3_KIND", ""), kind) == 0;
}

/* An S3 config for the harness's server; `prefix` is the test's own. */
static void s3_config(struct tfs_s3_config *c, const char *prefix)
{
	memset(c, 0, sizeof(*c));
	c->endpoint = (char *)env_or("TFS_S3_ENDPOINT", "http://127.0.0.1:1");
	c->region = (char *)env_or("TFS_S3_REGION", "us-east-1");
	c->path_style = true;
	c->bucket = (char *)env_or("TFS_TEST_BUCKET", "tierfs-test");
	c->prefix = (char *)prefix;
	c->connect_timeout_ms = 2000;
	c->low_speed_time_s = 10;
	c->low_speed_limit = 1024;
	c->retries = 3;
	c->retry_base_ms = 10;
	c->retry_max_ms = 200;
	c->multipart_threshold = 6u << 20;
	c->part_size = 5u << 20;
	c->upload_parallel = 3;
	c->max_connections = 8;
}

static void unique_prefix(char *buf, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, len, "conf-%ld-%ld-%d/", (long)ts.tv_sec, ts.tv_nsec, getpid());
}

static void setup(void)
{
	tfs_log_init_stderr(&tlog, getenv("TFS_TEST_DEBUG") ? TFS_LOG_DEBUG : TFS_LOG_WARN);
	if (is_s3()) {
		struct tfs_s3_config c;
		char prefix[128];
		unique_prefix(prefix, sizeof(prefix));
		s3_config(&c, prefix);
		cr_assert_eq(tfs_s3_create(&c, &tlog, &be), 0, "cannot create the S3 backend");
	} else {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/tierfs-conf-XXXXXX");
		cr_assert_not_null(mkdtemp(tmpdir));
		struct tfs_local_config c = { .root = tmpdir };
		cr_assert_eq(tfs_local_create(&c, &tlog, &be), 0);
	}
}

static void teardown(void)
{
	tfs_backend_destroy(be);
	be = NULL;
	if (tmpdir[0]) {
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		cr_assert_eq(system(cmd), 0);
	}
}

TestSuite(conformance, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ---- */

static void put_str(const char *key, const char *data)
{
	char etag[TFS_ETAG_MAX];
	int rc = tfs_backend_put(be, key, tfs_io_cbuf(data), strlen(data), NULL, etag);
	cr_assert_eq(rc, 0, "put '%s': %s", key, strerror(rc));
	cr_assert_neq(etag[0], '\0', "put '%s' returned no ETag", key);
}

static char *get_all(const char *key, size_t cap, size_t *len, int *err)
{
	char *buf = malloc(cap + 1);
	cr_assert_not_null(buf);
	*err = tfs_backend_get_range(be, key, 0, cap, NULL, tfs_io_buf(buf), len, NULL);
	buf[*err ? 0 : *len] = '\0';
	return buf;
}

static void expect_content(const char *key, const char *data)
{
	size_t len;
	int err;
	char *got = get_all(key, strlen(data) + 100, &len, &err);
	cr_assert_eq(err, 0, "get '%s': %s", key, strerror(err));
	cr_assert_eq(len, strlen(data), "get '%s': %zu bytes, expected %zu", key, len, strlen(data));
	cr_assert_str_eq(got, data, "content of '%s'", key);
	free(got);
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

/* Every key under `prefix` (no delimiter), paging with `page`. */
static size_t list_all(const char *prefix, const char *delim, size_t page, char ***keys_out,
		       size_t *n_prefixes)
{
	char **keys = NULL;
	size_t n = 0, np = 0;
	char *token = NULL;
	do {
		struct tfs_list_page p = { 0 };
		int rc = tfs_backend_list(be, prefix, delim, token, page, &p);
		cr_assert_eq(rc, 0, "list: %s", strerror(rc));
		cr_assert_leq(p.n_entries + p.n_prefixes, page ? page : 1000);
		keys = realloc(keys, (n + p.n_entries + p.n_prefixes) * sizeof(*keys));
		for (size_t i = 0; i < p.n_entries; i++)
			keys[n++] = strdup(p.entries[i].key);
		for (size_t i = 0; i < p.n_prefixes; i++) {
			keys[n++] = strdup(p.prefixes[i]);
			np++;
		}
		free(token);
		token = p.next_token ? strdup(p.next_token) : NULL;
		tfs_list_page_clear(&p);
	} while (token);
	*keys_out = keys;
	if (n_prefixes)
		*n_prefixes = np;
	return n;
}

static void free_keys(char **keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
}

/* ---- tests ---- */

Test(conformance, put_head_get_roundtrip)
{
	char etag_put[TFS_ETAG_MAX];
	const char *data = "hello, tierfs\n";
	time_t before = time(NULL);
	cr_assert_eq(tfs_backend_put(be, "hello.txt", tfs_io_cbuf(data), strlen(data), NULL, etag_put), 0);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "hello.txt", &m), 0);
	cr_assert_eq(m.size, strlen(data));
	cr_assert_str_eq(m.etag, etag_put, "PUT and HEAD disagree on the ETag");
	cr_assert_geq(m.mtime, before - 300);
	cr_assert_leq(m.mtime, time(NULL) + 300);
	tfs_obj_meta_clear(&m);
	expect_content("hello.txt", data);
}

Test(conformance, empty_object)
{
	put_str("empty", "");
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "empty", &m), 0);
	cr_assert_eq(m.size, 0);
	tfs_obj_meta_clear(&m);
	char buf[16];
	size_t got = 99;
	cr_assert_eq(tfs_backend_get_range(be, "empty", 0, sizeof(buf), NULL, tfs_io_buf(buf), &got, NULL), 0);
	cr_assert_eq(got, 0);
}

Test(conformance, ranged_reads)
{
	unsigned char data[100000];
	fill_pattern(data, sizeof(data), 7);
	char etag[TFS_ETAG_MAX], etag_get[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_put(be, "r/obj", tfs_io_cbuf(data), sizeof(data), NULL, etag), 0);

	static const struct { uint64_t off, len, expect; } cases[] = {
		{ 0, 10, 10 }, { 12345, 4096, 4096 }, { 99990, 10, 10 }, { 99990, 100, 10 },
		{ 0, 100000, 100000 }, { 100000, 10, 0 }, { 200000, 10, 0 }, { 1, 99999, 99999 },
	};
	unsigned char *buf = malloc(100000);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t got = 12345678;
		int rc = tfs_backend_get_range(be, "r/obj", cases[i].off, cases[i].len, NULL,
					       tfs_io_buf(buf), &got, etag_get);
		cr_assert_eq(rc, 0, "case %zu: %s", i, strerror(rc));
		cr_assert_eq(got, cases[i].expect, "case %zu: got %zu bytes", i, got);
		cr_assert_eq(memcmp(buf, data + cases[i].off, got), 0, "case %zu: wrong bytes", i);
		if (got)
			cr_assert_str_eq(etag_get, etag, "case %zu: GET ETag differs from PUT", i);
	}
	free(buf);
}

Test(conformance, get_into_fd_and_put_from_fd)
{
	unsigned char data[300000];
	fill_pattern(data, sizeof(data), 11);
	char path[] = "/tmp/tierfs-conf-fd-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(pwrite(fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	/* Upload bytes [1000, 251000) of the file. */
	cr_assert_eq(tfs_backend_put(be, "fd/obj", tfs_io_fd(fd, 1000), 250000, NULL, NULL), 0);
	char path2[] = "/tmp/tierfs-conf-fd-XXXXXX";
	int out = mkstemp(path2);
	cr_assert_geq(out, 0);
	unlink(path2);
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "fd/obj", 50000, 300000, NULL, tfs_io_fd(out, 7), &got, NULL), 0);
	cr_assert_eq(got, 200000);
	unsigned char *back = malloc(got);
	cr_assert_eq(pread(out, back, got, 7), (ssize_t)got);
	cr_assert_eq(memcmp(back, data + 1000 + 50000, got), 0);
	free(back);
	close(fd);
	close(out);
}

Test(conformance, get_into_scattered_buffers)
{
	unsigned char data[100000];
	fill_pattern(data, sizeof(data), 13);
	cr_assert_eq(tfs_backend_put(be, "iov/obj", tfs_io_cbuf(data), sizeof(data), NULL, NULL), 0);
	unsigned char a[10000], b[30000], c[10000];
	struct iovec iov[3] = { { a, sizeof(a) }, { b, sizeof(b) }, { c, sizeof(c) } };
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "iov/obj", 1000, 50000, NULL, tfs_io_iov(iov, 3), &got, NULL), 0);
	cr_assert_eq(got, 50000);
	cr_assert_eq(memcmp(a, data + 1000, sizeof(a)), 0);
	cr_assert_eq(memcmp(b, data + 11000, sizeof(b)), 0);
	cr_assert_eq(memcmp(c, data + 41000, sizeof(c)), 0);
	/* Objects are uploaded from buffers or files, never from iovecs. */
	cr_assert_eq(tfs_backend_put(be, "iov/x", tfs_io_iov(iov, 3), 10, NULL, NULL), EINVAL);
}

Test(conformance, if_match)
{
	char etag[TFS_ETAG_MAX], buf[64];
	size_t got;
	put_str("im", "version one");
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "im", &m), 0);
	memcpy(etag, m.etag, sizeof(etag));
	tfs_obj_meta_clear(&m);
	cr_assert_eq(tfs_backend_get_range(be, "im", 0, sizeof(buf), etag, tfs_io_buf(buf), &got, NULL), 0);
	cr_assert_eq(got, 11);
	put_str("im", "version two, longer");
	int rc = tfs_backend_get_range(be, "im", 0, sizeof(buf), etag, tfs_io_buf(buf), &got, NULL);
	cr_assert_eq(rc, ESTALE, "a GET with a stale If-Match gave %s", strerror(rc));
	cr_assert_eq(got, 0);
}

Test(conformance, missing_objects)
{
	struct tfs_obj_meta m = { 0 };
	char buf[8];
	size_t got;
	cr_assert_eq(tfs_backend_head(be, "no/such/key", &m), ENOENT);
	cr_assert_eq(tfs_backend_get_range(be, "no/such/key", 0, 8, NULL, tfs_io_buf(buf), &got, NULL), ENOENT);
	cr_assert_eq(tfs_backend_delete(be, "no/such/key"), 0, "deleting a missing key must succeed");
	cr_assert_eq(tfs_backend_copy(be, "no/such/key", "dst", NULL, NULL), ENOENT);
	const struct tfs_backend_stats *st = tfs_backend_stats(be);
	cr_assert_geq(atomic_load(&st->op[TFS_OP_HEAD].errors), 1);
	cr_assert_geq(atomic_load(&st->op[TFS_OP_GET].requests), 1);
}

Test(conformance, delete)
{
	put_str("del/me", "x");
	cr_assert_eq(tfs_backend_delete(be, "del/me"), 0);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "del/me", &m), ENOENT);
	char **keys;
	size_t n = list_all("del/", NULL, 0, &keys, NULL);
	cr_assert_eq(n, 0, "a deleted key is still listed");
	free_keys(keys, n);
}

Test(conformance, user_metadata_and_copy)
{
	struct tfs_obj_meta meta = { 0 };
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "33188"), 0);
	cr_assert_eq(tfs_obj_meta_set(&meta, "UID", "1000"), 0);
	const char *data = "metadata carrier";
	cr_assert_eq(tfs_backend_put(be, "meta/src", tfs_io_cbuf(data), strlen(data), &meta, NULL), 0);
	tfs_obj_meta_clear(&meta);

	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "meta/src", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33188");
	cr_assert_str_eq(tfs_obj_meta_get(&m, "uid") ?: "(none)", "1000");
	tfs_obj_meta_clear(&m);

	/* Copy keeping metadata. */
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_copy(be, "meta/src", "meta/copy", NULL, etag), 0);
	expect_content("meta/copy", data);
	cr_assert_eq(tfs_backend_head(be, "meta/copy", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33188");
	tfs_obj_meta_clear(&m);

	/* Copy replacing metadata (how chmod will be done). */
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "33261"), 0);
	cr_assert_eq(tfs_backend_copy(be, "meta/src", "meta/src", &meta, NULL), 0);
	tfs_obj_meta_clear(&meta);
	cr_assert_eq(tfs_backend_head(be, "meta/src", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33261");
	cr_assert_null(tfs_obj_meta_get(&m, "uid"), "REPLACE kept an old key");
	tfs_obj_meta_clear(&m);
	expect_content("meta/src", data);
}

Test(conformance, listing_with_delimiter)
{
	const char *keys[] = { "l/a/1", "l/a/2", "l/b", "l/c/d/e", "l/a-z", "l/a0" };
	for (size_t i = 0; i < 6; i++)
		put_str(keys[i], keys[i]);

	struct tfs_list_page p = { 0 };
	cr_assert_eq(tfs_backend_list(be, "l/", "/", NULL, 0, &p), 0);
	cr_assert_eq(p.n_entries, 3);
	cr_assert_str_eq(p.entries[0].key, "l/a-z");
	cr_assert_str_eq(p.entries[1].key, "l/a0");
	cr_assert_str_eq(p.entries[2].key, "l/b");
	cr_assert_eq(p.entries[2].size, 3);
	cr_assert_neq(p.entries[2].etag[0], '\0');
	cr_assert_eq(p.n_prefixes, 2);
	cr_assert_str_eq(p.prefixes[0], "l/a/");
	cr_assert_str_eq(p.prefixes[1], "l/c/");
	cr_assert_null(p.next_token);
	tfs_list_page_clear(&p);

	/* Without a delimiter: every key, in S3's byte order. */
	char **all;
	size_t n = list_all("l/", NULL, 0, &all, NULL);
	const char *order[] = { "l/a-z", "l/a/1", "l/a/2", "l/a0", "l/b", "l/c/d/e" };
	cr_assert_eq(n, 6);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(all[i], order[i], "position %zu", i);
	free_keys(all, n);

	/* A prefix that is not a directory. */
	n = list_all("l/a", "/", 0, &all, NULL);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(all[0], "l/a-z");
	cr_assert_str_eq(all[1], "l/a0");
	cr_assert_str_eq(all[2], "l/a/");
	free_keys(all, n);
}

Test(conformance, pagination)
{
	char key[64];
	for (int i = 0; i < 37; i++) {
		snprintf(key, sizeof(key), "p/%s/k%03d", i % 3 ? "x" : "y", i);
		put_str(key, "v");
	}
	char **all;
	size_t np;
	size_t n = list_all("p/", NULL, 5, &all, &np);
	cr_assert_eq(n, 37, "pages of 5 gave %zu keys", n);
	cr_assert_eq(np, 0);
	for (size_t i = 1; i < n; i++)
		cr_assert_lt(strcmp(all[i - 1], all[i]), 0, "out of order or duplicate at %zu", i);
	free_keys(all, n);

	/* Pages mixing prefixes and keys. */
	put_str("p/z1", "v");
	put_str("p/z2", "v");
	n = list_all("p/", "/", 1, &all, &np);
	cr_assert_eq(n, 4);
	cr_assert_eq(np, 2);
	cr_assert_str_eq(all[0], "p/x/");
	cr_assert_str_eq(all[1], "p/y/");
	cr_assert_str_eq(all[2], "p/z1");
	cr_assert_str_eq(all[3], "p/z2");
	free_keys(all, n);
}

Test(conformance, awkward_keys)
{
	const char *keys[] = {
		"k/with space", "k/plus+sign", "k/per%cent", "k/per%20cent", "k/amp&and=eq",
		"k/tilde~star*", "k/unicode-\xc3\xb1-\xe6\x97\xa5\xe6\x9c\xac", "k/quote'\"",
		"k/semi;colon,comma", "k/lt<gt>", "k/hash#q?", "k/a b/c d",
	};
	size_t nk = sizeof(keys) / sizeof(keys[0]);
	for (size_t i = 0; i < nk; i++)
		put_str(keys[i], keys[i]);
	for (size_t i = 0; i < nk; i++)
		expect_content(keys[i], keys[i]);
	char **all;
	size_t n = list_all("k/", NULL, 0, &all, NULL);
	cr_assert_eq(n, nk);
	for (size_t i = 0; i < nk; i++) {
		bool found = false;
		for (size_t j = 0; j < n; j++)
			found |= strcmp(all[j], keys[i]) == 0;
		cr_assert(found, "key '%s' is not listed as it was written", keys[i]);
	}
	free_keys(all, n);
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_copy(be, "k/with space", "k/copy of+%", NULL, etag), 0);
	expect_content("k/copy of+%", "k/with space");
}

Test(conformance, keys_s3_does_not_normalise)
{
	const char *keys[] = { "n//double", "n/./dot", "n/../up", "n/trail." };
	for (size_t i = 0; i < 4; i++) {
		const char *data = keys[i];
		int rc = tfs_backend_put(be, keys[i], tfs_io_cbuf(data), strlen(data), NULL, NULL);
		if (!is_s3() && i < 3) {
			/* A directory cannot hold these: refused, never aliased. */
			cr_assert_eq(rc, EINVAL, "local backend accepted '%s'", keys[i]);
			continue;
		}
		cr_assert_eq(rc, 0, "put '%s': %s", keys[i], strerror(rc));
		expect_content(keys[i], data);
	}
	if (is_s3()) {
		/* Each stayed a distinct object. */
		char **all;
		size_t n = list_all("n/", NULL, 0, &all, NULL);
		cr_assert_eq(n, 4);
		free_keys(all, n);
	}
}

Test(conformance, multipart_upload, .timeout = 300)
{
	size_t len = (12u << 20) + 12345; /* three parts of 5 MiB, the last short */
	unsigned char *data = malloc(len);
	fill_pattern(data, len, 99);
	char path[] = "/tmp/tierfs-conf-mp-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_eq(pwrite(fd, data, len, 0), (ssize_t)len);
	struct tfs_obj_meta meta = { 0 };
	cr_assert_eq(tfs_obj_meta_set(&meta, "mtime", "1700000000"), 0);
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_put(be, "mp/big", tfs_io_fd(fd, 0), len, &meta, etag), 0);
	tfs_obj_meta_clear(&meta);
	cr_assert_neq(etag[0], '\0', "multipart PUT returned no ETag");
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "mp/big", &m), 0);
	cr_assert_eq(m.size, len);
	cr_assert_str_eq(m.etag, etag);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mtime") ?: "(none)", "1700000000");
	tfs_obj_meta_clear(&m);
	unsigned char *back = malloc(len);
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "mp/big", 0, len, NULL, tfs_io_buf(back), &got, NULL), 0);
	cr_assert_eq(got, len);
	cr_assert_eq(memcmp(back, data, len), 0, "multipart object differs");
	/* From a buffer as well. */
	cr_assert_eq(tfs_backend_put(be, "mp/buf", tfs_io_cbuf(data), len, NULL, NULL), 0);
	cr_assert_eq(tfs_backend_get_range(be, "mp/buf", len - 100, 100, NULL, tfs_io_buf(back), &got, NULL), 0);
	cr_assert_eq(got, 100);
	cr_assert_eq(memcmp(back, data + len - 100, 100), 0);
	free(back);
	free(data);
	close(fd);
}

Test(conformance, overwrite_changes_etag)
{
	char e1[TFS_ETAG_MAX], e2[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_put(be, "ow", tfs_io_cbuf("aaaa"), 4, NULL, e1), 0);
	cr_assert_eq(tfs_backend_put(be, "ow", tfs_io_cbuf("bbbb"), 4, NULL, e2), 0);
	cr_assert_str_neq(e1, e2, "an overwrite kept the ETag");
	expect_content("ow", "bbbb");
}

Test(conformance, stats_count_operations)
{
	put_str("st", "12345");
	char buf[8];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "st", 0, 5, NULL, tfs_io_buf(buf), &got, NULL), 0);
	const struct tfs_backend_stats *st = tfs_backend_stats(be);
	cr_assert_eq(atomic_load(&st->op[TFS_OP_PUT].requests), 1);
	cr_assert_eq(atomic_load(&st->op[TFS_OP_PUT].bytes), 5);
	cr_assert_eq(atomic_load(&st->op[TFS_OP_GET].requests), 1);
	cr_assert_eq(atomic_load(&st->op[TFS_OP_GET].bytes), 5);
	cr_assert_eq(atomic_load(&st->op[TFS_OP_GET].errors), 0);
}

/* ---- S3 errors (skipped for the local backend) ---- */

Test(conformance, s3_wrong_secret_is_eacces)
{
	if (!is_s3() || !is_kind("rgw"))
		cr_skip_test("needs a server that checks signatures (Ceph RGW)");
	char *saved = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
	setenv("AWS_SECRET_ACCESS_KEY", "definitely-wrong-secret", 1);
	struct tfs_s3_config c;
	struct tfs_backend *bad;
	s3_config(&c, "");
	cr_assert_eq(tfs_s3_create(&c, &tlog, &bad), 0);
	setenv("AWS_SECRET_ACCESS_KEY", saved, 1);
	free(saved);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_put(bad, "x", tfs_io_cbuf("x"), 1, NULL, NULL), EACCES);
	cr_assert_eq(tfs_backend_head(bad, "x", &m), EACCES);
	tfs_backend_destroy(bad);
}

Test(conformance, s3_missing_bucket_is_enoent)
{
	if (!is_s3())
		cr_skip_test("S3 only");
	struct tfs_s3_config c;
	struct tfs_backend *b2;
	s3_config(&c, "");
	c.bucket = "tierfs-no-such-bucket";
	cr_assert_eq(tfs_s3_create(&c, &tlog, &b2), 0);
	struct tfs_list_page p = { 0 };
	cr_assert_eq(tfs_backend_list(b2, "", "/", NULL, 0, &p), ENOENT);
	tfs_backend_destroy(b2);
}

Test(conformance, s3_connection_refused_is_eio)
{
	if (!is_s3())
		cr_skip_test("S3 only");
	struct tfs_s3_config c;
	struct tfs_backend *b2;
	s3_config(&c, "");
	c.endpoint = "http://127.0.0.1:1"; /* nothing listens on port 1 */
	c.retries = 2;
	c.retry_base_ms = 1;
	c.retry_max_ms = 5;
	cr_assert_eq(tfs_s3_create(&c, &tlog, &b2), 0);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(b2, "x", &m), EIO);
	cr_assert_eq(atomic_load(&tfs_backend_stats(b2)->op[TFS_OP_HEAD].errors), 1);
	tfs_backend_destroy(b2);
}
