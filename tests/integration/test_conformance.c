/* test_conformance.c - one suite that every backend must pass.
 *
 * Run by tests/harness/conformance.sh against the local backend, against
 * moto_server and against a Ceph RADOS Gateway:
 *   TFS_TEST_BACKEND=local                 a fresh temporary directory
 *       (TFS_LOCAL_WALK=1: without openat2, as on kernels before 5.6)
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
	c->path_style = TFS_S3_PATH_ON;
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
	c->copy_part_size = 5u << 20;
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
		/* TFS_LOCAL_WALK=1: resolve keys as where openat2() is missing. */
		struct tfs_local_config c = { .root = tmpdir,
					      .no_openat2 = getenv("TFS_LOCAL_WALK") != NULL };
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
	cr_assert_eq(len, strlen(data), "get '%s': %zu bytes, expected %zu", key, len,
		     strlen(data));
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
	cr_assert_eq(tfs_backend_put(be, "hello.txt", tfs_io_cbuf(data), strlen(data), NULL,
				     etag_put),
		     0);
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
	cr_assert_eq(tfs_backend_get_range(be, "empty", 0, sizeof(buf), NULL, tfs_io_buf(buf), &got,
					   NULL),
		     0);
	cr_assert_eq(got, 0);
}

Test(conformance, ranged_reads)
{
	unsigned char data[100000];
	fill_pattern(data, sizeof(data), 7);
	char etag[TFS_ETAG_MAX], etag_get[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_put(be, "r/obj", tfs_io_cbuf(data), sizeof(data), NULL, etag), 0);

	static const struct {
		uint64_t off, len, expect;
	} cases[] = {
		{ 0, 10, 10 },      { 12345, 4096, 4096 }, { 99990, 10, 10 },
		{ 99990, 100, 10 }, { 0, 100000, 100000 }, { 100000, 10, 0 },
		{ 200000, 10, 0 },  { 1, 99999, 99999 },
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
	cr_assert_eq(tfs_backend_get_range(be, "fd/obj", 50000, 300000, NULL, tfs_io_fd(out, 7),
					   &got, NULL),
		     0);
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
	cr_assert_eq(tfs_backend_put(be, "iov/obj", tfs_io_cbuf(data), sizeof(data), NULL, NULL),
		     0);
	unsigned char a[10000], b[30000], c[10000];
	struct iovec iov[3] = { { a, sizeof(a) }, { b, sizeof(b) }, { c, sizeof(c) } };
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "iov/obj", 1000, 50000, NULL, tfs_io_iov(iov, 3),
					   &got, NULL),
		     0);
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
	cr_assert_eq(tfs_backend_get_range(be, "im", 0, sizeof(buf), etag, tfs_io_buf(buf), &got,
					   NULL),
		     0);
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
	cr_assert_eq(tfs_backend_get_range(be, "no/such/key", 0, 8, NULL, tfs_io_buf(buf), &got,
					   NULL),
		     ENOENT);
	cr_assert_eq(tfs_backend_delete(be, "no/such/key"), 0,
		     "deleting a missing key must succeed");
	cr_assert_eq(tfs_backend_copy(be, "no/such/key", "dst", TFS_SIZE_UNKNOWN, NULL, NULL),
		     ENOENT);
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
	cr_assert_eq(tfs_backend_put(be, "meta/src", tfs_io_cbuf(data), strlen(data), &meta, NULL),
		     0);
	tfs_obj_meta_clear(&meta);

	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "meta/src", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33188");
	cr_assert_str_eq(tfs_obj_meta_get(&m, "uid") ?: "(none)", "1000");
	tfs_obj_meta_clear(&m);

	/* Copy keeping metadata (the size known, as a rename knows it). */
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_copy(be, "meta/src", "meta/copy", strlen(data), NULL, etag), 0);
	expect_content("meta/copy", data);
	cr_assert_eq(tfs_backend_head(be, "meta/copy", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33188");
	tfs_obj_meta_clear(&m);

	/* Copy replacing metadata (how chmod is done), the size not known. */
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "33261"), 0);
	cr_assert_eq(tfs_backend_copy(be, "meta/src", "meta/src", TFS_SIZE_UNKNOWN, &meta, NULL),
		     0);
	tfs_obj_meta_clear(&meta);
	cr_assert_eq(tfs_backend_head(be, "meta/src", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33261");
	cr_assert_null(tfs_obj_meta_get(&m, "uid"), "REPLACE kept an old key");
	tfs_obj_meta_clear(&m);
	expect_content("meta/src", data);
}

static void expect_bytes(const char *key, const unsigned char *data, size_t len)
{
	unsigned char *back = malloc(len + 1);
	size_t got;
	cr_assert_not_null(back);
	int rc = tfs_backend_get_range(be, key, 0, len + 1, NULL, tfs_io_buf(back), &got, NULL);
	cr_assert_eq(rc, 0, "get '%s': %s", key, strerror(rc));
	cr_assert_eq(got, len, "'%s' has %zu bytes, expected %zu", key, got, len);
	cr_assert_eq(memcmp(back, data, len), 0, "'%s' differs", key);
	free(back);
}

/* S3 copies at most 5 GiB in one request: an object larger than
 * copy_part_size (5 MiB here) is copied in parts (UploadPartCopy), its
 * metadata kept or replaced, and no upload is left behind.  A caller that
 * believes the object small gets one CopyObject, which these servers do
 * at any size (AWS's refusal is scripted in test_s3_retry.c). */
Test(conformance, copy_in_parts)
{
	size_t n = (12u << 20) + 12345;
	unsigned char *data = malloc(n);
	cr_assert_not_null(data);
	fill_pattern(data, n, 77);
	struct tfs_obj_meta meta = { 0 }, m = { 0 };
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "33188"), 0);
	cr_assert_eq(tfs_obj_meta_set(&meta, "uid", "1000"), 0);
	char put_etag[TFS_ETAG_MAX] = "";
	cr_assert_eq(tfs_backend_put(be, "big/src", tfs_io_cbuf(data), n, &meta, put_etag), 0);
	tfs_obj_meta_clear(&meta);
	/* A multipart put's ETag is the one HEAD gives. */
	cr_assert_eq(tfs_backend_head(be, "big/src", &m), 0);
	cr_assert_str_eq(m.etag, put_etag, "the put's ETag %s is not the object's %s", put_etag,
			 m.etag);
	tfs_obj_meta_clear(&m);

	/* The size right, then believed small (the object grew since). */
	const char *dst[2] = { "big/a", "big/b" };
	uint64_t said[2] = { n, 100 };
	for (int i = 0; i < 2; i++) {
		char etag[TFS_ETAG_MAX] = "";
		cr_assert_eq(tfs_backend_copy(be, "big/src", dst[i], said[i], NULL, etag), 0);
		expect_bytes(dst[i], data, n);
		cr_assert_eq(tfs_backend_head(be, dst[i], &m), 0);
		cr_assert_eq(m.size, n);
		cr_assert_str_eq(m.etag, etag, "the copy's ETag %s is not the object's %s", etag,
				 m.etag);
		cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33188");
		cr_assert_str_eq(tfs_obj_meta_get(&m, "uid") ?: "(none)", "1000");
		tfs_obj_meta_clear(&m);
		if (is_s3() && i == 0) {
			size_t el = strlen(etag);
			cr_assert(el > 4 && strcmp(etag + el - 3, "-3\"") == 0,
				  "not copied in 3 parts: ETag %s", etag);
		}
	}

	/* Onto itself with new metadata (a chmod of a large file). */
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "33261"), 0);
	cr_assert_eq(tfs_backend_copy(be, "big/src", "big/src", n, &meta, NULL), 0);
	tfs_obj_meta_clear(&meta);
	cr_assert_eq(tfs_backend_head(be, "big/src", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "33261");
	cr_assert_null(tfs_obj_meta_get(&m, "uid"), "REPLACE kept an old key");
	tfs_obj_meta_clear(&m);
	expect_bytes("big/src", data, n);

	cr_assert_eq(tfs_backend_copy(be, "big/none", "big/c", n, NULL, NULL), ENOENT);
	size_t uploads = 99;
	cr_assert_eq(tfs_backend_count_uploads(be, "big/", &uploads), 0);
	cr_assert_eq(uploads, 0, "a copy left %zu upload(s)", uploads);
	free(data);
}

/* A symlink as s3fs stores it: the target as body, mode S_IFLNK in the
 * metadata (the local backend makes it a real symlink).  Every backend
 * gives back the body, the mode and the mtime, through a copy too. */
Test(conformance, symlink_object)
{
	const char *target = "../some/target";
	struct tfs_obj_meta meta = { 0 }, m = { 0 };
	char etag[TFS_ETAG_MAX], etag2[TFS_ETAG_MAX];
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "41471"), 0); /* S_IFLNK | 0777 */
	cr_assert_eq(tfs_obj_meta_set(&meta, "mtime", "1700000000"), 0);
	cr_assert_eq(tfs_backend_put(be, "sl/link", tfs_io_cbuf(target), strlen(target), &meta,
				     etag),
		     0);
	tfs_obj_meta_clear(&meta);
	if (!is_s3()) {
		char p[512], t[64] = "";
		snprintf(p, sizeof(p), "%s/sl/link", tmpdir);
		cr_assert_eq(readlink(p, t, sizeof(t) - 1), (ssize_t)strlen(target),
			     "not a symlink on disk");
		cr_assert_str_eq(t, target);
	}
	cr_assert_eq(tfs_backend_head(be, "sl/link", &m), 0);
	cr_assert_eq(m.size, strlen(target));
	cr_assert_str_eq(m.etag, etag);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "41471");
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mtime") ?: "(none)", "1700000000");
	tfs_obj_meta_clear(&m);
	expect_content("sl/link", target);
	char **keys;
	size_t n = list_all("sl/", NULL, 0, &keys, NULL);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(keys[0], "sl/link");
	free_keys(keys, n);

	/* Copy keeping the metadata, then onto itself with a new mtime. */
	cr_assert_eq(tfs_backend_copy(be, "sl/link", "sl/copy", TFS_SIZE_UNKNOWN, NULL, NULL), 0);
	expect_content("sl/copy", target);
	cr_assert_eq(tfs_backend_head(be, "sl/copy", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "41471");
	tfs_obj_meta_clear(&m);
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "41471"), 0);
	cr_assert_eq(tfs_obj_meta_set(&meta, "mtime", "1600000000"), 0);
	cr_assert_eq(tfs_backend_copy(be, "sl/copy", "sl/copy", TFS_SIZE_UNKNOWN, &meta, NULL), 0);
	tfs_obj_meta_clear(&meta);
	cr_assert_eq(tfs_backend_head(be, "sl/copy", &m), 0);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "(none)", "41471");
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mtime") ?: "(none)", "1600000000");
	tfs_obj_meta_clear(&m);
	expect_content("sl/copy", target);

	/* A new target: a new ETag. */
	cr_assert_eq(tfs_obj_meta_set(&meta, "mode", "41471"), 0);
	cr_assert_eq(tfs_backend_put(be, "sl/link", tfs_io_cbuf("/elsewhere"), 10, &meta, etag2),
		     0);
	tfs_obj_meta_clear(&meta);
	cr_assert_str_neq(etag2, etag);
	expect_content("sl/link", "/elsewhere");

	cr_assert_eq(tfs_backend_delete(be, "sl/link"), 0);
	cr_assert_eq(tfs_backend_delete(be, "sl/copy"), 0);
	cr_assert_eq(tfs_backend_head(be, "sl/link", &m), ENOENT);
	n = list_all("sl/", NULL, 0, &keys, NULL);
	cr_assert_eq(n, 0);
	free_keys(keys, n);
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
		"k/with space",
		"k/plus+sign",
		"k/per%cent",
		"k/per%20cent",
		"k/amp&and=eq",
		"k/tilde~star*",
		"k/unicode-\xc3\xb1-\xe6\x97\xa5\xe6\x9c\xac",
		"k/quote'\"",
		"k/semi;colon,comma",
		"k/lt<gt>",
		"k/hash#q?",
		"k/a b/c d",
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
	cr_assert_eq(tfs_backend_copy(be, "k/with space", "k/copy of+%", TFS_SIZE_UNKNOWN, NULL,
				      etag),
		     0);
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
	cr_assert_eq(
		tfs_backend_get_range(be, "mp/big", 0, len, NULL, tfs_io_buf(back), &got, NULL), 0);
	cr_assert_eq(got, len);
	cr_assert_eq(memcmp(back, data, len), 0, "multipart object differs");
	/* From a buffer as well. */
	cr_assert_eq(tfs_backend_put(be, "mp/buf", tfs_io_cbuf(data), len, NULL, NULL), 0);
	cr_assert_eq(tfs_backend_get_range(be, "mp/buf", len - 100, 100, NULL, tfs_io_buf(back),
					   &got, NULL),
		     0);
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

/* What the shared cache is keyed by (src/stack.c): the access key ID,
 * never the secret key or session token; nothing for the local backend. */
Test(conformance, cache_identity_is_the_access_key_id)
{
	const char *id = tfs_backend_cache_identity(be);
	if (!is_s3()) {
		cr_assert_str_eq(id, "");
		return;
	}
	/* The key ID, a space, 32 hex digits derived from the secret. */
	size_t kl = strlen(getenv("AWS_ACCESS_KEY_ID"));
	cr_assert_eq(strncmp(id, getenv("AWS_ACCESS_KEY_ID"), kl), 0, "%s", id);
	cr_assert_eq(id[kl], ' ', "%s", id);
	cr_assert_eq(strspn(id + kl + 1, "0123456789abcdef"), 32, "%s", id);
	cr_assert_eq(id[kl + 33], '\0', "%s", id);
	char *mine = strdup(id);
	/* Another key ID is another identity; neither the secret nor the
	 * session token is in it. */
	struct tfs_s3_config c;
	struct tfs_backend *other;
	char *key = strdup(getenv("AWS_ACCESS_KEY_ID"));
	char *secret = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
	setenv("AWS_ACCESS_KEY_ID", "ASIAOTHERSESSIONKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "other-secret-value", 1);
	setenv("AWS_SESSION_TOKEN", "session-token-value", 1);
	s3_config(&c, "");
	cr_assert_eq(tfs_s3_create(&c, &tlog, &other), 0);
	setenv("AWS_ACCESS_KEY_ID", key, 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	unsetenv("AWS_SESSION_TOKEN");
	free(key);
	free(secret);
	id = tfs_backend_cache_identity(other);
	cr_assert_eq(strncmp(id, "ASIAOTHERSESSIONKEY ", 20), 0, "%s", id);
	cr_assert_null(strstr(id, "other-secret-value"));
	cr_assert_null(strstr(id, "session-token-value"));
	tfs_backend_destroy(other);
	/* The same key ID with another secret is another identity: knowing a
	 * key ID (no secret) never reaches the cache of its real owner. */
	secret = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
	setenv("AWS_SECRET_ACCESS_KEY", "not-the-real-secret", 1);
	s3_config(&c, "");
	cr_assert_eq(tfs_s3_create(&c, &tlog, &other), 0);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	free(secret);
	id = tfs_backend_cache_identity(other);
	cr_assert_eq(strncmp(id, mine, kl + 1), 0, "%s vs %s", id, mine);
	cr_assert_str_neq(id, mine);
	tfs_backend_destroy(other);
	free(mine);
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

/* ---- resumable multipart uploads ----
 * The suite's S3 config uses 5 MiB parts above 6 MiB: 5 MiB is the least
 * S3, moto and RGW accept for every part but the last.  On the local
 * backend (no multipart) every resumable put must be a plain put. */

/* What the tfs_mpu_fn saw.  Runs on upload threads: no cr_assert here. */
struct mpu_log {
	unsigned stop_after; /* return ECANCELED once this many parts are in (0: never) */
	unsigned created;    /* calls with part == UINT_MAX */
	unsigned parts;      /* calls for a part */
	bool bad;            /* a call with an inconsistent state */
	atomic_int inside;   /* calls running now */
	bool overlap;        /* two calls ran at once */
};

static int mpu_fn(void *ctx, const struct tfs_mpu *st, unsigned part)
{
	struct mpu_log *l = ctx;
	if (atomic_fetch_add(&l->inside, 1) != 0)
		l->overlap = true;
	if (st->upload_id[0] == '\0' || st->etags == NULL || st->nparts == 0)
		l->bad = true;
	if (part == UINT_MAX)
		l->created++;
	else if (part >= st->nparts || st->etags[part][0] == '\0')
		l->bad = true;
	else
		l->parts++;
	usleep(2000); /* widen the window for overlapping calls */
	int rc = l->stop_after && part != UINT_MAX && l->parts >= l->stop_after ? ECANCELED : 0;
	atomic_fetch_sub(&l->inside, 1);
	return rc;
}

static unsigned char *pattern_buf(size_t len, unsigned seed)
{
	unsigned char *p = malloc(len);
	cr_assert_not_null(p);
	fill_pattern(p, len, seed);
	return p;
}

static size_t open_uploads(void)
{
	size_t n = 12345;
	int rc = tfs_backend_count_uploads(be, "", &n);
	cr_assert_eq(rc, 0, "count_uploads: %s", strerror(rc));
	return n;
}

static uint64_t put_stat(bool bytes)
{
	const struct tfs_backend_op_stats *o = &tfs_backend_stats(be)->op[TFS_OP_PUT];
	return atomic_load(bytes ? &o->bytes : &o->requests);
}

static unsigned etags_set(const struct tfs_mpu *st)
{
	unsigned n = 0;
	for (unsigned i = 0; i < st->nparts; i++)
		n += st->etags[i][0] != '\0';
	return n;
}

/* A resumable put that fn stops after `stop_after` parts: the upload is
 * left open with that many parts recorded. */
static void put_interrupted(const char *key, const unsigned char *data, size_t len,
			    unsigned stop_after, struct tfs_mpu *st)
{
	struct mpu_log l = { .stop_after = stop_after };
	int rc = tfs_backend_put_resumable(be, key, tfs_io_cbuf(data), len, NULL, st, mpu_fn, &l,
					   NULL);
	cr_assert_eq(rc, ECANCELED, "interrupted put of '%s': %s", key, strerror(rc));
	cr_assert_neq(st->upload_id[0], '\0', "no upload id after an interrupted put");
	cr_assert_eq(l.created, 1);
	cr_assert_eq(l.parts, stop_after);
	cr_assert_eq(etags_set(st), stop_after, "%u parts recorded, expected %u", etags_set(st),
		     stop_after);
	cr_assert(!l.bad && !l.overlap);
}

/* A resumable put that must complete; returns what fn saw. */
static struct mpu_log put_to_end(const char *key, const unsigned char *data, size_t len,
				 struct tfs_mpu *st)
{
	struct mpu_log l = { 0 };
	char etag[TFS_ETAG_MAX];
	int rc = tfs_backend_put_resumable(be, key, tfs_io_cbuf(data), len, NULL, st, mpu_fn, &l,
					   etag);
	cr_assert_eq(rc, 0, "resumable put of '%s': %s", key, strerror(rc));
	cr_assert_neq(etag[0], '\0', "resumable put of '%s' returned no ETag", key);
	cr_assert(!l.bad, "fn saw an inconsistent state");
	cr_assert(!l.overlap, "fn calls overlapped");
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, key, &m), 0);
	cr_assert_str_eq(m.etag, etag);
	tfs_obj_meta_clear(&m);
	expect_bytes(key, data, len);
	return l;
}

Test(conformance, resumable_put_interrupted_then_resumed, .timeout = 300)
{
	size_t len = (15u << 20) + 12345; /* four parts, the last short */
	unsigned char *data = pattern_buf(len, 21);
	struct tfs_mpu st = { 0 };

	if (!is_s3()) {
		struct mpu_log l = put_to_end("rs/big", data, len, &st);
		cr_assert_eq(l.created + l.parts, 0, "fn called on a backend without multipart");
		cr_assert_eq(st.etags, NULL);
		cr_assert_eq(st.nparts, 0);
		cr_assert_eq(open_uploads(), 0);
		free(data);
		return;
	}
	put_interrupted("rs/big", data, len, 2, &st);
	cr_assert_eq(st.part_size, 5u << 20);
	cr_assert_eq(st.nparts, 4);
	cr_assert_eq(atomic_load(&tfs_backend_stats(be)->op[TFS_OP_PUT].errors), 1);
	cr_assert_eq(open_uploads(), 1);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "rs/big", &m), ENOENT, "object exists before completion");

	/* Resume: only the parts without an ETag go up, into the same upload. */
	uint64_t want_bytes = 0;
	for (unsigned i = 0; i < st.nparts; i++)
		if (st.etags[i][0] == '\0')
			want_bytes += i + 1 < st.nparts ? st.part_size : len - i * st.part_size;
	uint64_t req0 = put_stat(false), bytes0 = put_stat(true);
	struct mpu_log l = put_to_end("rs/big", data, len, &st);
	cr_assert_str_eq(st.upload_id, "", "upload id kept after success");
	cr_assert_eq(l.created, 0, "the resume started a new upload");
	cr_assert_eq(l.parts, 2);
	cr_assert_eq(put_stat(false) - req0, 2, "%llu PUT requests to resume, expected 2",
		     (unsigned long long)(put_stat(false) - req0));
	cr_assert_eq(put_stat(true) - bytes0, want_bytes);
	cr_assert_eq(etags_set(&st), 4);
	cr_assert_eq(open_uploads(), 0);
	tfs_mpu_clear(&st);
	cr_assert_eq(st.etags, NULL);
	free(data);
}

Test(conformance, resumable_put_restarts_unknown_or_changed_upload, .timeout = 300)
{
	size_t len = (10u << 20) + 777; /* three parts */
	unsigned char *data = pattern_buf(len, 22);
	struct tfs_mpu st = { 0 };

	/* An upload id the server never issued. */
	snprintf(st.upload_id, sizeof(st.upload_id), "tierfs-bogus-upload-id");
	st.part_size = 5u << 20;
	cr_assert_eq(tfs_mpu_alloc(&st, 3), 0);
	snprintf(st.etags[0], TFS_ETAG_MAX, "\"0123456789abcdef0123456789abcdef\"");
	struct mpu_log l = put_to_end("rr/bogus", data, len, &st);
	if (is_s3()) {
		cr_assert_str_eq(st.upload_id, "", "upload id kept after success");
		cr_assert_eq(l.created, 1, "a bogus upload id was not replaced");
		cr_assert_eq(l.parts, 3);
	} else {
		cr_assert_eq(l.created + l.parts, 0);
		cr_assert_str_eq(st.upload_id, "tierfs-bogus-upload-id",
				 "st touched by a plain put");
	}
	tfs_mpu_clear(&st);
	cr_assert_eq(open_uploads(), 0);
	if (!is_s3()) {
		free(data);
		return;
	}

	/* An upload that was aborted. */
	put_interrupted("rr/aborted", data, len, 1, &st);
	cr_assert_eq(open_uploads(), 1);
	cr_assert_eq(tfs_backend_abort_upload(be, "rr/aborted", st.upload_id), 0);
	cr_assert_eq(open_uploads(), 0);
	cr_assert_eq(tfs_backend_abort_upload(be, "rr/aborted", st.upload_id), 0,
		     "aborting twice must succeed");
	l = put_to_end("rr/aborted", data, len, &st);
	cr_assert_eq(l.created, 1);
	cr_assert_eq(l.parts, 3);
	cr_assert_eq(open_uploads(), 0);
	tfs_mpu_clear(&st);

	/* The data changed size: the old upload is aborted, not orphaned. */
	put_interrupted("rr/changed", data, len, 1, &st);
	cr_assert_eq(open_uploads(), 1);
	size_t len2 = len + (5u << 20);
	unsigned char *data2 = pattern_buf(len2, 23);
	l = put_to_end("rr/changed", data2, len2, &st);
	cr_assert_eq(l.created, 1);
	cr_assert_eq(l.parts, 4);
	cr_assert_eq(open_uploads(), 0, "the upload for the old size was left behind");
	tfs_mpu_clear(&st);
	free(data2);
	free(data);
}

Test(conformance, resumable_put_only_completion_left, .timeout = 300)
{
	if (!is_s3())
		cr_skip_test("no multipart on this backend (see the other resumable tests)");
	size_t len = (10u << 20) + 4321; /* three parts */
	unsigned char *data = pattern_buf(len, 26);
	struct tfs_mpu st = { 0 };
	/* Stopped after the last part: a crash before CompleteMultipartUpload. */
	put_interrupted("oc/obj", data, len, 3, &st);
	uint64_t req0 = put_stat(false);
	struct mpu_log l = put_to_end("oc/obj", data, len, &st);
	cr_assert_eq(l.created + l.parts, 0, "parts uploaded again");
	cr_assert_eq(put_stat(false) - req0, 0);
	cr_assert_str_eq(st.upload_id, "");
	cr_assert_eq(open_uploads(), 0);
	tfs_mpu_clear(&st);
	free(data);
}

static void mpu_copy(struct tfs_mpu *dst, const struct tfs_mpu *src)
{
	*dst = (struct tfs_mpu){ .part_size = src->part_size };
	cr_assert_eq(tfs_mpu_alloc(dst, src->nparts), 0);
	memcpy(dst->upload_id, src->upload_id, sizeof(dst->upload_id));
	memcpy(dst->etags, src->etags, (size_t)src->nparts * sizeof(*src->etags));
}

Test(conformance, resumable_put_completed_but_reply_lost, .timeout = 300)
{
	if (!is_s3())
		cr_skip_test("no multipart on this backend (see the other resumable tests)");
	size_t len = (10u << 20) + 4321; /* three parts */
	unsigned char *data = pattern_buf(len, 27);
	struct tfs_mpu st = { 0 }, other;
	put_interrupted("rl/obj", data, len, 3, &st);
	/* The completion happens, but its reply never reaches the caller,
	 * whose state still names the upload. */
	mpu_copy(&other, &st);
	(void)put_to_end("rl/obj", data, len, &other);
	tfs_mpu_clear(&other);
	uint64_t req0 = put_stat(false);
	struct mpu_log l = put_to_end("rl/obj", data, len, &st);
	cr_assert_eq(l.created + l.parts, 0, "uploaded again although the object is complete");
	cr_assert_eq(put_stat(false) - req0, 0);
	cr_assert_str_eq(st.upload_id, "");
	cr_assert_eq(open_uploads(), 0);
	tfs_mpu_clear(&st);
	free(data);
}

/* An upload whose CreateMultipartUpload was retried after a lost reply is
 * known to nobody; the put that finds its own upload completed by an
 * earlier attempt must still abort it, as a put that completes does. */
Test(conformance, resumable_put_completed_earlier_sweeps_stale_uploads, .timeout = 300)
{
	if (!is_s3())
		cr_skip_test("no multipart on this backend (see the other resumable tests)");
	size_t len = (10u << 20) + 4321; /* three parts */
	unsigned char *data = pattern_buf(len, 28);
	struct tfs_mpu st = { 0 }, other;
	char orphan[TFS_UPLOAD_ID_MAX];
	put_interrupted("rs/obj", data, len, 3, &st);
	mpu_copy(&other, &st);
	(void)put_to_end("rs/obj", data, len, &other);
	tfs_mpu_clear(&other);
	cr_assert_eq(tfs_backend_upload_begin(be, "rs/obj", NULL, orphan), 0);
	cr_assert_eq(open_uploads(), 1);
	(void)put_to_end("rs/obj", data, len, &st);
	cr_assert_str_eq(st.upload_id, "");
	cr_assert_eq(open_uploads(), 0, "the stale upload of the key was left open");
	tfs_mpu_clear(&st);
	free(data);
}

Test(conformance, streamed_parts_then_resumable_completion, .timeout = 300)
{
	uint64_t threshold, part_size;
	unsigned parallel;
	char id[TFS_UPLOAD_ID_MAX], etag[TFS_ETAG_MAX];
	if (!is_s3()) {
		cr_assert(!tfs_backend_multipart_geometry(be, &threshold, &part_size, &parallel));
		cr_assert_eq(tfs_backend_upload_begin(be, "st/obj", NULL, id), ENOTSUP);
		cr_assert_eq(tfs_backend_upload_part(be, "st/obj", "x", 0, tfs_io_cbuf(""), 0,
						     etag),
			     ENOTSUP);
		return;
	}
	cr_assert(tfs_backend_multipart_geometry(be, &threshold, &part_size, &parallel));
	cr_assert(threshold > part_size && part_size >= (5u << 20) && parallel >= 1);
	size_t len = 2 * part_size + 4321; /* three parts, two sent while "written" */
	unsigned char *data = pattern_buf(len, 28);
	cr_assert_eq(tfs_backend_upload_begin(be, "st/obj", NULL, id), 0);
	cr_assert_neq(id[0], '\0');
	cr_assert_eq(open_uploads(), 1);
	struct tfs_mpu st = { .part_size = part_size };
	cr_assert_eq(tfs_mpu_alloc(&st, 3), 0);
	memcpy(st.upload_id, id, sizeof(id));
	for (unsigned i = 0; i < 2; i++) {
		int rc = tfs_backend_upload_part(be, "st/obj", id, i,
						 tfs_io_cbuf(data + i * part_size), part_size,
						 st.etags[i]);
		cr_assert_eq(rc, 0, "part %u: %s", i, strerror(rc));
		cr_assert_neq(st.etags[i][0], '\0');
	}
	cr_assert_eq(tfs_backend_upload_part(be, "st/obj", id, 10000, tfs_io_cbuf(data), 1, etag),
		     EINVAL);
	uint64_t req0 = put_stat(false);
	struct mpu_log l = put_to_end("st/obj", data, len, &st);
	cr_assert_eq(l.created, 0, "a new upload was started");
	cr_assert_eq(l.parts, 1, "%u parts uploaded at completion, expected only the last",
		     l.parts);
	cr_assert_eq(put_stat(false) - req0, 1);
	cr_assert_eq(open_uploads(), 0);
	tfs_mpu_clear(&st);
	free(data);
}

/* fn that aborts the upload under the put after its first part. */
struct vanish {
	struct mpu_log log;
	const char *key;
	bool aborted;
	int abort_rc;
};

static int vanish_fn(void *ctx, const struct tfs_mpu *st, unsigned part)
{
	struct vanish *v = ctx;
	int rc = mpu_fn(&v->log, st, part);
	if (rc == 0 && part != UINT_MAX && !v->aborted) {
		v->aborted = true;
		v->abort_rc = tfs_backend_abort_upload(be, v->key, st->upload_id);
	}
	return rc;
}

Test(conformance, s3_resumable_put_upload_vanishes_midway, .timeout = 300)
{
	if (!is_s3() || !is_kind("rgw"))
		cr_skip_test("needs a server that answers NoSuchUpload to a part upload (moto: "
			     "500)");
	/* One part at a time, so that the abort lands between two parts. */
	struct tfs_s3_config c;
	char prefix[128];
	tfs_backend_destroy(be);
	unique_prefix(prefix, sizeof(prefix));
	s3_config(&c, prefix);
	c.upload_parallel = 1;
	cr_assert_eq(tfs_s3_create(&c, &tlog, &be), 0);

	size_t len = (15u << 20) + 12345; /* four parts */
	unsigned char *data = pattern_buf(len, 25);
	struct tfs_mpu st = { 0 };
	put_interrupted("vm/obj", data, len, 1, &st);
	struct vanish v = { .key = "vm/obj" };
	int rc = tfs_backend_put_resumable(be, "vm/obj", tfs_io_cbuf(data), len, NULL, &st,
					   vanish_fn, &v, NULL);
	cr_assert_eq(rc, 0, "resume after the upload vanished: %s", strerror(rc));
	cr_assert_eq(v.abort_rc, 0);
	cr_assert_eq(v.log.created, 1, "no new upload after NoSuchUpload");
	cr_assert_eq(v.log.parts, 1 + 4, "%u parts reported", v.log.parts);
	cr_assert(!v.log.bad && !v.log.overlap);
	cr_assert_str_eq(st.upload_id, "");
	expect_bytes("vm/obj", data, len);
	cr_assert_eq(open_uploads(), 0);
	tfs_mpu_clear(&st);
	free(data);
}

Test(conformance, abort_unknown_upload)
{
	const struct tfs_backend_op_stats *del = &tfs_backend_stats(be)->op[TFS_OP_DELETE];
	cr_assert_eq(tfs_backend_abort_upload(be, "ab/x", "tierfs-no-such-upload"), 0);
	cr_assert_eq(atomic_load(&del->requests), is_s3() ? 1 : 0);
	cr_assert_eq(atomic_load(&del->errors), 0);
	cr_assert_eq(tfs_backend_abort_upload(be, "ab/x", ""), 0);
	cr_assert_eq(tfs_backend_abort_upload(be, "ab/x", NULL), 0);
	cr_assert_eq(atomic_load(&del->requests), is_s3() ? 1 : 0, "no request for an empty id");
	cr_assert_eq(open_uploads(), 0);
	size_t n = 99;
	cr_assert_eq(tfs_backend_count_uploads(be, "ab/", &n), 0);
	cr_assert_eq(n, 0);
}

Test(conformance, resumable_put_small_object_is_plain)
{
	unsigned char data[1000];
	fill_pattern(data, sizeof(data), 24);
	/* A stale state must not be touched (nor its upload resumed). */
	struct tfs_mpu st = { .part_size = 123 };
	snprintf(st.upload_id, sizeof(st.upload_id), "keep-me");
	struct mpu_log l = put_to_end("sm/obj", data, sizeof(data), &st);
	cr_assert_eq(l.created + l.parts, 0, "fn called for a plain put");
	cr_assert_str_eq(st.upload_id, "keep-me");
	cr_assert_eq(st.part_size, 123);
	cr_assert_eq(st.nparts, 0);
	cr_assert_eq(st.etags, NULL);
	cr_assert_eq(put_stat(false), 1);
	cr_assert_eq(put_stat(true), sizeof(data));
	cr_assert_eq(tfs_backend_put_resumable(be, "sm/obj", tfs_io_cbuf(data), 10, NULL, NULL,
					       mpu_fn, &l, NULL),
		     EINVAL, "st NULL accepted");
}
