/* test_vfs.c - POSIX semantics of the file core (vfs/vfs.h) without FUSE:
 * handles, reads of staged copies and of versions through the cache
 * stack, version moves under an open handle, and the control file.  The
 * stack is the daemon's (src/stack.h) over a local backend directory.
 */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "follow.h"
#include "log.h"
#include "source.h"
#include "stack.h"
#include "vfs_state.h"

static char tmp[64], bucket[128], cache[128];
static struct tfs_log tlog;
static struct tfs_config cfg;
static struct tfs_source src;
static struct tfs_stack *stack;
static struct tfs_vfs *v;

/* Test data unique at every offset: byte i of a file of seed s. */
static unsigned char byte_at(unsigned seed, size_t i)
{
	uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return (unsigned char)(x ^ (x >> 17) ^ (i >> 8));
}

static void fill(unsigned seed, unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = byte_at(seed, i);
}

/* Write object `key` of `len` bytes of seed `seed` into the bucket
 * directory (behind the mount's back, as another client would). */
static void put_object(const char *key, size_t len, unsigned seed)
{
	char p[256], t[300];
	unsigned char *buf = malloc(len ? len : 1);
	cr_assert_not_null(buf);
	fill(seed, buf, len);
	snprintf(p, sizeof(p), "%s/%s", bucket, key);
	snprintf(t, sizeof(t), "%s.tmp", p);
	FILE *f = fopen(t, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(buf, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(rename(t, p), 0);
	free(buf);
}

static void start(const char *ttl)
{
	struct tfs_dbuf err;
	char set[256];
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	const char *kv[] = { "ram.size=64M", "ssd.direct_io=false", "writeback.delay=1h",
			     "prefetch.workers=2", ttl };
	snprintf(set, sizeof(set), "ssd.dir=%s", cache);
	cr_assert_eq(tfs_config_set(&cfg, set, "test", &err), 0);
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		cr_assert_eq(tfs_config_set(&cfg, kv[i], "test", &err), 0, "%s", kv[i]);
	tfs_dbuf_free(&err);
	char e[256];
	cr_assert_eq(tfs_source_parse(bucket, &src, e, sizeof(e)), 0);
	cr_assert_eq(tfs_stack_open(&cfg, &src, false, "/mnt/tierfs-test-vfs", &tlog, &stack), 0);
	struct tfs_fs_config fsc = {
		.uid = getuid(),
		.gid = getgid(),
		.file_mode = 0644,
		.dir_mode = 0755,
		.ttl_ms = cfg.cache.metadata_ttl_ms,
		.order_max = 64,
	};
	cr_assert_eq(tfs_vfs_create(&fsc, stack->meta, stack->top, stack->pf, stack->wb, stack->be,
				    &tlog, &v),
		     0);
}

static void setup(void)
{
	tfs_log_init_stderr(&tlog, TFS_LOG_WARN);
	snprintf(tmp, sizeof(tmp), "/tmp/tfs_vfs_XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(bucket, sizeof(bucket), "%s/bucket", tmp);
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	cr_assert_eq(mkdir(bucket, 0700), 0);
	cr_assert_eq(mkdir(cache, 0700), 0);
}

static void teardown(void)
{
	struct tfs_vfs_ent *e;
	while (v && (e = tfs_vfs_fh_any(v)) != NULL)
		tfs_vfs_handle_free(v, (struct tfs_vfs_handle *)e);
	tfs_vfs_destroy(v);
	v = NULL;
	tfs_stack_close(stack);
	stack = NULL;
	tfs_source_clear(&src);
	tfs_config_clear(&cfg);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	(void)system(cmd);
}

/* The inode of file `path` (a lookup, as the kernel's before an open). */
static struct tfs_inode *file_inode(const char *path)
{
	struct tfs_inode *in;
	cr_assert_eq(tfs_itable_lookup(v->itable, path, TFS_FT_FILE, 0, &in), 0);
	return in;
}

/* Read [off, off + len) through `h` of `in` and check it is seed
 * `seed`'s bytes there (`want` of them: short at the end). */
static void expect_read(struct tfs_vfs_handle *h, struct tfs_inode *in, uint64_t off, size_t len,
			size_t want, unsigned seed)
{
	struct tfs_vfs_data d;
	cr_assert_eq(tfs_vfs_read(v, h, in->ino, off, len, &d), 0);
	cr_assert_eq(d.len, want, "read at %llu: %zu bytes, want %zu", (unsigned long long)off,
		     d.len, want);
	for (size_t i = 0; i < want; i++)
		cr_assert_eq((unsigned char)d.buf[i], byte_at(seed, off + i), "byte %llu",
			     (unsigned long long)(off + i));
	tfs_vfs_data_release(v, &d);
}

/* Create `path` through write-back, write `len` bytes of seed `seed` and
 * close it (committed, not uploaded yet: writeback.delay is 1h). */
static void write_file(const char *path, size_t len, unsigned seed)
{
	struct tfs_wb_attr a = { .mode = 0644, .uid = getuid(), .gid = getgid() };
	struct tfs_wb_file *wf;
	unsigned char *buf = malloc(len);
	cr_assert_not_null(buf);
	fill(seed, buf, len);
	cr_assert_eq(tfs_wb_create_file(stack->wb, path, &a, &wf), 0);
	cr_assert_eq(tfs_wb_write(stack->wb, wf, buf, len, 0), 0);
	cr_assert_eq(tfs_wb_release(stack->wb, wf, true), 0);
	free(buf);
}

TestSuite(vfs, .init = setup, .fini = teardown, .timeout = 60);

Test(vfs, read_after_write_before_and_after_upload)
{
	start("cache.metadata_ttl=1h");
	const size_t len = 3 * 1024 * 1024 + 17; /* spans blocks, short last one */
	write_file("w.bin", len, 7);
	/* Before the upload: the staged copy. */
	struct tfs_inode *in = file_inode("w.bin");
	struct tfs_vfs_handle *h;
	cr_assert_eq(tfs_vfs_open_read(v, in, "w.bin", &h), 0);
	cr_assert_eq(h->kind, TFS_VFS_STAGED);
	expect_read(h, in, 0, 4096, 4096, 7);
	expect_read(h, in, len - 100, 4096, 100, 7);
	tfs_vfs_handle_free(v, h);
	struct stat st;
	char p[256];
	snprintf(p, sizeof(p), "%s/w.bin", bucket);
	cr_assert_neq(stat(p, &st), 0, "uploaded before the drain");
	/* After the upload: the version in the bucket, through the cache. */
	cr_assert_eq(tfs_wb_drain(stack->wb, 30000, NULL, NULL), 0);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq((size_t)st.st_size, len);
	cr_assert_eq(tfs_vfs_open_read(v, in, "w.bin", &h), 0);
	cr_assert_eq(h->kind, TFS_VFS_CLEAN);
	cr_assert_eq(h->obj.size, len);
	expect_read(h, in, 0, 1 << 20, 1 << 20, 7);
	expect_read(h, in, (1 << 20) - 10, 2 << 20, 2 << 20, 7); /* across blocks */
	expect_read(h, in, len - 5, 100, 5, 7);
	expect_read(h, in, len, 100, 0, 7);
}

Test(vfs, clean_handle_sees_writes_through_this_mount)
{
	start("cache.metadata_ttl=1h");
	put_object("c.bin", 5000, 1);
	struct tfs_inode *in = file_inode("c.bin");
	struct tfs_vfs_handle *h;
	cr_assert_eq(tfs_vfs_open_read(v, in, "c.bin", &h), 0);
	cr_assert_eq(h->kind, TFS_VFS_CLEAN);
	expect_read(h, in, 0, 5000, 5000, 1);
	/* Another handle writes the file: this one reads the staged copy. */
	struct tfs_attr a;
	cr_assert_eq(tfs_vfs_attr(v, "c.bin", &a), 0);
	struct tfs_wb_file *wf;
	cr_assert_eq(tfs_wb_open_write(stack->wb, "c.bin", &a, true, &wf), 0);
	unsigned char buf[6000];
	fill(2, buf, sizeof(buf));
	cr_assert_eq(tfs_wb_write(stack->wb, wf, buf, sizeof(buf), 0), 0);
	expect_read(h, in, 0, 8192, 6000, 2);
	cr_assert_eq(h->kind, TFS_VFS_STAGED);
	cr_assert_eq(tfs_wb_release(stack->wb, wf, true), 0);
}

Test(vfs, version_change_under_an_open_handle)
{
	start("cache.metadata_ttl=0");
	put_object("v.bin", 10000, 3);
	struct tfs_inode *in = file_inode("v.bin");
	struct tfs_vfs_handle *h;
	cr_assert_eq(tfs_vfs_open_read(v, in, "v.bin", &h), 0);
	char old[TFS_ETAG_MAX];
	snprintf(old, sizeof(old), "%s", h->obj.etag);
	/* Replaced in the bucket, longer, before this handle read anything:
	 * its version is gone, and the read moves the handle to the new one
	 * (one move, one version per read). */
	usleep(10000); /* the local backend's ETag holds the mtime */
	put_object("v.bin", 20000, 4);
	struct tfs_vfs_data d;
	cr_assert_eq(tfs_vfs_read(v, h, in->ino, 0, 20000, &d), 0);
	cr_assert_eq(d.len, 20000);
	cr_assert_neq(d.moved[0], '\0', "no version move reported");
	cr_assert_str_neq(d.moved, old);
	cr_assert_str_eq(h->obj.etag, d.moved);
	for (size_t i = 0; i < d.len; i++)
		cr_assert_eq((unsigned char)d.buf[i], byte_at(4, i));
	tfs_vfs_data_release(v, &d);
	/* A read past the end of the known version finds an appended one. */
	usleep(10000);
	put_object("v.bin", 30000, 5);
	cr_assert_eq(tfs_vfs_read(v, h, in->ino, 20000, 10000, &d), 0);
	cr_assert_neq(d.moved[0], '\0');
	cr_assert_eq(d.len, 10000);
	for (size_t i = 0; i < d.len; i++)
		cr_assert_eq((unsigned char)d.buf[i], byte_at(5, 20000 + i));
	tfs_vfs_data_release(v, &d);
	/* No newer version: a read at the end is empty and moves nothing. */
	cr_assert_eq(tfs_vfs_read(v, h, in->ino, 30000, 100, &d), 0);
	cr_assert_eq(d.len, 0);
	cr_assert_eq(d.moved[0], '\0');
	tfs_vfs_data_release(v, &d);
}

Test(vfs, gone_version_without_a_name_is_estale)
{
	start("cache.metadata_ttl=0");
	put_object("g.bin", 10000, 6);
	struct tfs_inode *in = file_inode("g.bin");
	struct tfs_vfs_handle *h;
	cr_assert_eq(tfs_vfs_open_read(v, in, "g.bin", &h), 0);
	char p[256];
	snprintf(p, sizeof(p), "%s/g.bin", bucket);
	cr_assert_eq(unlink(p), 0);
	struct tfs_vfs_data d;
	cr_assert_eq(tfs_vfs_read(v, h, in->ino, 0, 100, &d), ESTALE);
	cr_assert_eq(d.moved[0], '\0');
}

static int order_done_rc = -1;

static void order_done(struct tfs_follow_request *r, int rc)
{
	struct tfs_vfs_handle *h = r->ctx;
	cr_assert_eq(tfs_vfs_order_committed(h, rc), &order_done_rc);
	__atomic_store_n(&order_done_rc, rc, __ATOMIC_SEQ_CST);
}

Test(vfs, control_file)
{
	start("cache.metadata_ttl=1h");
	struct tfs_follow_config fc = { .workers = 0, .window = 4, .budget = 1 << 20 };
	struct tfs_follow *f;
	cr_assert_eq(tfs_follow_create(NULL, NULL, &fc, &tlog, &f), 0);
	static const struct tfs_manifest_scope scope = { .mountpoint = "/mnt/tierfs-test-vfs" };
	tfs_vfs_set_follow(v, f, &scope);
	struct tfs_attr a;
	cr_assert_eq(tfs_vfs_attr(v, TFS_FOLLOW_FILE, &a), 0);
	cr_assert_eq(a.type, TFS_FT_FILE);
	cr_assert_eq(a.size, 0);
	cr_assert_eq(a.mode, 0644);
	struct tfs_vfs_handle *h = tfs_vfs_handle_new(v, TFS_FOLLOW_FILE);
	cr_assert_not_null(h);
	cr_assert_eq(tfs_vfs_order_init(v, h, getuid(), 0, true), 0);
	cr_assert_eq(h->kind, TFS_VFS_ORDER);
	/* It reads as empty, whatever was written. */
	cr_assert_eq(tfs_vfs_order_add(v, h, "a.bin\n", 6), 0);
	struct tfs_vfs_data d;
	cr_assert_eq(tfs_vfs_read(v, h, 1, 0, 4096, &d), 0);
	cr_assert_eq(d.len, 0);
	/* Beyond prefetch.order_max (64 here): EFBIG, nothing kept. */
	char big[80];
	memset(big, 'x', sizeof(big));
	cr_assert_eq(tfs_vfs_order_add(v, h, big, sizeof(big)), EFBIG);
	cr_assert_eq(h->order->len, 6);
	/* The close hands the text to the builder, which calls back. */
	cr_assert_eq(tfs_vfs_order_commit(v, h, &order_done_rc, order_done), EINPROGRESS);
	for (int i = 0; i < 5000 && __atomic_load_n(&order_done_rc, __ATOMIC_SEQ_CST) < 0; i++)
		usleep(1000);
	cr_assert_eq(__atomic_load_n(&order_done_rc, __ATOMIC_SEQ_CST), 0);
	/* Nothing new since: a second close commits nothing. */
	cr_assert_eq(tfs_vfs_order_commit(v, h, &order_done_rc, order_done), 0);
	tfs_vfs_handle_free(v, h);
	tfs_follow_destroy(f);
	tfs_vfs_set_follow(v, NULL, NULL);
}

/* A new file `path` open for writing, as create(2) makes it. */
static struct tfs_vfs_handle *create_writer(const char *path, uint32_t mode)
{
	struct tfs_wb_attr a = { .mode = mode, .uid = getuid(), .gid = getgid() };
	struct tfs_wb_file *wf;
	struct tfs_vfs_handle *h = tfs_vfs_handle_new(v, path);
	cr_assert_not_null(h);
	cr_assert_eq(tfs_wb_create_file(stack->wb, path, &a, &wf), 0);
	tfs_vfs_handle_stage(h, wf);
	h->writer = true;
	return h;
}

Test(vfs, write_read_back_flush_and_upload)
{
	start("cache.metadata_ttl=1h");
	struct tfs_vfs_handle *h = create_writer("n.bin", 0644);
	struct tfs_inode *in = file_inode("n.bin");
	unsigned char buf[70000];
	fill(9, buf, sizeof(buf));
	/* Out of order, with a hole filled last. */
	cr_assert_eq(tfs_vfs_write(v, h, (char *)buf + 40000, 30000, 40000, getuid()), 0);
	cr_assert_eq(tfs_vfs_write(v, h, (char *)buf, 40000, 0, getuid()), 0);
	expect_read(h, in, 0, sizeof(buf), sizeof(buf), 9); /* the writer's bytes at once */
	/* A reader opened now reads the same staged copy. */
	struct tfs_vfs_handle *r;
	cr_assert_eq(tfs_vfs_open_read(v, in, "n.bin", &r), 0);
	cr_assert_eq(r->kind, TFS_VFS_STAGED);
	expect_read(r, in, 39990, 20, 20, 9);
	/* The reader cannot write; nothing is written beyond 5 TiB. */
	cr_assert_eq(tfs_vfs_write(v, r, "x", 1, 0, getuid()), EBADF);
	cr_assert_eq(tfs_vfs_write(v, h, "x", 1, TFS_VFS_MAX_FILE, getuid()), EFBIG);
	cr_assert_eq(tfs_vfs_flush(v, h, NULL, NULL), 0);
	cr_assert_eq(tfs_vfs_fsync(v, r), 0);
	tfs_vfs_handle_free(v, h);
	tfs_vfs_handle_free(v, r);
	cr_assert_eq(tfs_wb_drain(stack->wb, 30000, NULL, NULL), 0);
	char p[256];
	snprintf(p, sizeof(p), "%s/n.bin", bucket);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f);
	unsigned char got[sizeof(buf) + 1];
	cr_assert_eq(fread(got, 1, sizeof(got), f), sizeof(buf));
	fclose(f);
	cr_assert_eq(memcmp(got, buf, sizeof(buf)), 0);
}

Test(vfs, write_by_another_user_clears_setuid)
{
	start("cache.metadata_ttl=1h");
	struct tfs_vfs_handle *h = create_writer("s.bin", 04755);
	cr_assert_eq(tfs_vfs_write(v, h, "ab", 2, 0, 0), 0); /* root keeps it */
	struct tfs_attr a;
	cr_assert_eq(tfs_vfs_attr(v, "s.bin", &a), 0);
	cr_assert_eq(a.mode & 07777, 04755);
	cr_assert_eq(tfs_vfs_write(v, h, "cd", 2, 2, 12345), 0);
	cr_assert_eq(tfs_vfs_attr(v, "s.bin", &a), 0);
	cr_assert_eq(a.mode & 07777, 0755);
	cr_assert_eq(a.size, 4);
}

Test(vfs, truncate)
{
	start("cache.metadata_ttl=1h");
	put_object("t.bin", 100000, 10);
	struct tfs_inode *in = file_inode("t.bin");
	struct tfs_attr a;
	/* Shorter, without a handle: staged, committed, read back. */
	cr_assert_eq(tfs_vfs_attr(v, "t.bin", &a), 0);
	cr_assert_eq(tfs_vfs_truncate(v, "t.bin", &a, NULL, 30000), 0);
	cr_assert_eq(tfs_vfs_attr(v, "t.bin", &a), 0);
	cr_assert_eq(a.size, 30000);
	struct tfs_vfs_handle *r;
	cr_assert_eq(tfs_vfs_open_read(v, in, "t.bin", &r), 0);
	expect_read(r, in, 29000, 5000, 1000, 10);
	/* Longer through a writer's handle (ftruncate): a hole of zeros. */
	struct tfs_vfs_handle *w = tfs_vfs_handle_new(v, "t.bin");
	cr_assert_not_null(w);
	struct tfs_wb_file *wf;
	cr_assert_eq(tfs_vfs_stage(v, "t.bin", &a, false, &wf), 0);
	tfs_vfs_handle_stage(w, wf);
	w->writer = true;
	cr_assert_eq(tfs_vfs_truncate(v, "t.bin", &a, w, 50000), 0);
	struct tfs_vfs_data d;
	cr_assert_eq(tfs_vfs_read(v, r, in->ino, 29990, 30000, &d), 0);
	cr_assert_eq(d.len, 20010);
	for (size_t i = 0; i < 10; i++)
		cr_assert_eq((unsigned char)d.buf[i], byte_at(10, 29990 + i));
	for (size_t i = 10; i < d.len; i++)
		cr_assert_eq(d.buf[i], 0, "byte %zu of the hole", 29990 + i);
	tfs_vfs_data_release(v, &d);
	/* To zero: an empty file after the upload. */
	cr_assert_eq(tfs_vfs_flush(v, w, NULL, NULL), 0);
	tfs_vfs_handle_free(v, w);
	cr_assert_eq(tfs_vfs_attr(v, "t.bin", &a), 0);
	cr_assert_eq(tfs_vfs_truncate(v, "t.bin", &a, NULL, 0), 0);
	tfs_vfs_handle_free(v, r);
	cr_assert_eq(tfs_wb_drain(stack->wb, 30000, NULL, NULL), 0);
	struct stat st;
	char p[256];
	snprintf(p, sizeof(p), "%s/t.bin", bucket);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_size, 0);
}

static int count_entry(void *ctx, const char *name, const struct tfs_attr *a)
{
	(void)name;
	(void)a;
	(*(int *)ctx)++;
	return 0;
}

Test(vfs, lookup_after_a_listing_race)
{
	start("cache.metadata_ttl=0");
	char p[256];
	snprintf(p, sizeof(p), "%s/d", bucket);
	cr_assert_eq(mkdir(p, 0700), 0);
	put_object("d/a.bin", 10, 11);
	struct tfs_attr a;
	struct tfs_inode *d, *in, *again;
	cr_assert_eq(tfs_vfs_lookup(v, 1, "d", &a, &d), 0);
	cr_assert_eq(a.type, TFS_FT_DIR);
	/* The directory is listed; then the bucket changes behind it. */
	int n = 0;
	cr_assert_eq(tfs_meta_readdir(v->meta, "d", "", count_entry, &n), 0);
	cr_assert_eq(n, 1);
	put_object("d/b.bin", 20, 12);
	cr_assert_eq(tfs_vfs_lookup(v, d->ino, "b.bin", &a, &in), 0, "a name the listing missed");
	cr_assert_eq(a.size, 20);
	snprintf(p, sizeof(p), "%s/d/a.bin", bucket);
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(tfs_vfs_lookup(v, d->ino, "a.bin", &a, &again), ENOENT,
		     "a name the listing still holds");
	/* A file created through this mount while nothing is uploaded. */
	struct tfs_vfs_handle *h = create_writer("d/c.bin", 0600);
	cr_assert_eq(tfs_vfs_write(v, h, "xyz", 3, 0, getuid()), 0);
	cr_assert_eq(tfs_vfs_lookup(v, d->ino, "c.bin", &a, &in), 0);
	cr_assert_eq(a.size, 3);
	cr_assert_eq(a.mode & 07777, 0600);
	cr_assert_eq(tfs_vfs_lookup(v, d->ino, "c.bin", &a, &again), 0);
	cr_assert_eq(again, in, "one inode per name");
	/* Not a directory, a name too long, the control file without orders. */
	cr_assert_eq(tfs_vfs_lookup(v, in->ino, "x", &a, &again), ENOTDIR);
	char lng[300];
	memset(lng, 'n', sizeof(lng) - 1);
	lng[sizeof(lng) - 1] = '\0';
	cr_assert_eq(tfs_vfs_lookup(v, 1, lng, &a, &again), ENAMETOOLONG);
	cr_assert_eq(tfs_vfs_lookup(v, 1, TFS_FOLLOW_FILE, &a, &again), ENOENT);
	cr_assert_eq(tfs_vfs_lookup(v, 999999, "x", &a, &again), ESTALE);
}

Test(vfs, readlink)
{
	start("cache.metadata_ttl=1h");
	/* A symlink made through this mount: its staged body, then uploaded. */
	struct tfs_wb_attr sa = { .mode = S_IFLNK | 0777, .uid = getuid(), .gid = getgid() };
	struct tfs_wb_file *wf;
	cr_assert_eq(tfs_wb_create_file(stack->wb, "l", &sa, &wf), 0);
	cr_assert_eq(tfs_wb_write(stack->wb, wf, "dir/target.bin", 14, 0), 0);
	cr_assert_eq(tfs_wb_release(stack->wb, wf, true), 0);
	struct tfs_inode *in;
	cr_assert_eq(tfs_itable_lookup(v->itable, "l", TFS_FT_FILE, S_IFLNK, &in), 0);
	char target[PATH_MAX];
	cr_assert_eq(tfs_vfs_readlink(v, in->ino, target), 0);
	cr_assert_str_eq(target, "dir/target.bin");
	cr_assert_eq(tfs_wb_drain(stack->wb, 30000, NULL, NULL), 0);
	memset(target, 0, sizeof(target));
	cr_assert_eq(tfs_vfs_readlink(v, in->ino, target), 0);
	cr_assert_str_eq(target, "dir/target.bin");
	/* A regular file is no symlink. */
	put_object("f.bin", 10, 13);
	cr_assert_eq(tfs_vfs_readlink(v, file_inode("f.bin")->ino, target), EINVAL);
}
