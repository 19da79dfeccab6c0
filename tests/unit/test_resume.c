/* test_resume.c - a daemon that replaces a dead one on the same kernel
 * connection (src/fs.h: tfs_fs_config.resumed) serves the node IDs and
 * file handles the dead one gave out.
 *
 * Without a kernel: the FUSE low-level operations are driven through a
 * libfuse session with custom I/O (requests built here, replies captured).
 * The first daemon runs in a child process over a full stack (local
 * backend, SSD tier, metadata cache, write-back) and is killed with
 * SIGKILL after it handed out node IDs and handles (an open reader, an
 * open directory, a new file and a clean file open for writing, both
 * written); the test process then builds a second stack over the same
 * cache and sends requests with the dead daemon's IDs and handles, as the
 * kernel would. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <json-c/json.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf.h"
#include "fs.h"
#include "log.h"
#include "source.h"
#include "stack.h"

#define MOUNT "/mnt/tierfs-test-resume"
#define DATA_SIZE (300 * 1024)
#define NFILES 40

static char tmp[64], bucket[128], cache[128];
static bool in_child; /* the first daemon's process: no Criterion there */

/* An assertion that works in the forked first daemon too (Criterion's
 * own report to the runner only from the test's process). */
#define CHECK(e)                                                                        \
	do {                                                                            \
		if (!(e)) {                                                             \
			if (in_child) {                                                 \
				fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #e); \
				_exit(3);                                               \
			}                                                               \
			cr_assert(0, "%s", #e);                                         \
		}                                                                       \
	} while (0)
static struct tfs_log tlog;

/* What the first daemon handed out, passed to the test process. */
struct handed {
	uint64_t data, data_fh;   /* a file open for reading */
	uint64_t dir, dir_fh;     /* a directory, open, partly listed */
	int64_t dir_off;          /* where the listing stopped */
	uint64_t out, out_fh;     /* a new file, written */
	uint64_t clean, clean_fh; /* a clean file open O_RDWR, written */
	uint64_t moved;           /* a file whose directory was renamed */
	int ok;
};

/* ---- a FUSE session without a kernel ---- */

static char reply[1 << 20];
static size_t reply_len;
static uint64_t uniq;

static ssize_t cap_writev(int fd, struct iovec *iov, int count, void *ud)
{
	(void)fd;
	(void)ud;
	size_t n = 0;
	for (int i = 0; i < count; i++) {
		if (reply_len + iov[i].iov_len <= sizeof(reply))
			memcpy(reply + reply_len, iov[i].iov_base, iov[i].iov_len);
		reply_len += iov[i].iov_len;
		n += iov[i].iov_len;
	}
	return (ssize_t)n;
}

static ssize_t cap_read(int fd, void *buf, size_t len, void *ud)
{
	(void)fd;
	(void)buf;
	(void)len;
	(void)ud;
	errno = EIO;
	return -1;
}

struct daemon {
	struct tfs_config cfg;
	struct tfs_source src;
	struct tfs_stack *stack;
	struct tfs_fs *fs;
	struct fuse_session *se;
};

/* Send one request; returns the reply's errno (0: success) and points
 * *out at its payload (*outlen bytes). */
static int call(struct daemon *d, uint32_t op, uint64_t node, const void *arg, size_t alen,
		const void *arg2, size_t a2len, const char **out, size_t *outlen)
{
	static char req[(1 << 20) + 4096];
	struct fuse_in_header h = {
		.len = (uint32_t)(sizeof(h) + alen + a2len),
		.opcode = op,
		.unique = ++uniq,
		.nodeid = node,
		.uid = getuid(),
		.gid = getgid(),
		.pid = (uint32_t)getpid(),
	};
	CHECK((h.len) <= (sizeof(req)));
	memcpy(req, &h, sizeof(h));
	memcpy(req + sizeof(h), arg, alen);
	if (a2len)
		memcpy(req + sizeof(h) + alen, arg2, a2len);
	struct fuse_buf fb = { .size = h.len, .mem = req };
	reply_len = 0;
	fuse_session_process_buf(d->se, &fb);
	if (reply_len == 0)
		return -1; /* no reply (forget) */
	CHECK((reply_len) >= (sizeof(struct fuse_out_header)));
	const struct fuse_out_header *oh = (const void *)reply;
	CHECK((oh->unique) == (h.unique));
	if (out) {
		*out = reply + sizeof(*oh);
		*outlen = reply_len - sizeof(*oh);
	}
	return -oh->error;
}

static void daemon_start(struct daemon *d, bool resumed, uint32_t generation)
{
	struct tfs_dbuf err;
	char set[256];
	tfs_dbuf_init(&err, 4096);
	CHECK((tfs_config_defaults(&d->cfg)) == (0));
	const char *kv[] = { "ram.size=64M", "ssd.direct_io=false", "writeback.delay=1h",
			     "prefetch.workers=0", "cache.metadata_ttl=1h" };
	snprintf(set, sizeof(set), "ssd.dir=%s", cache);
	CHECK((tfs_config_set(&d->cfg, set, "test", &err)) == (0));
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		CHECK((tfs_config_set(&d->cfg, kv[i], "test", &err)) == (0));
	char e[256];
	CHECK((tfs_source_parse(bucket, &d->src, e, sizeof(e))) == (0));
	CHECK((tfs_stack_open(&d->cfg, &d->src, false, MOUNT, &tlog, &d->stack)) == (0));
	struct tfs_fs_config fsc = {
		.uid = getuid(),
		.gid = getgid(),
		.file_mode = 0644,
		.dir_mode = 0755,
		.ttl_ms = 3600000,
		.order_max = 1 << 20,
		.resumed = resumed,
		.generation = generation,
	};
	CHECK((tfs_fs_create(&fsc, d->stack->meta, d->stack->top, d->stack->pf, d->stack->wb,
			     d->stack->be, &tlog, &d->fs)) == (0));
	char *argv[] = { "test_resume", "-o", "max_read=1048576", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	d->se = fuse_session_new(&args, tfs_fs_ops(), sizeof(struct fuse_lowlevel_ops), d->fs);
	fuse_opt_free_args(&args);
	CHECK((d->se) != NULL);
	static const struct fuse_custom_io io = { .writev = cap_writev, .read = cap_read };
	CHECK((fuse_session_custom_io(d->se, &io, open("/dev/null", O_RDWR))) == (0));
	struct fuse_init_in in = { .major = FUSE_KERNEL_VERSION,
				   .minor = 31,
				   .max_readahead = 1 << 20 };
	const char *o;
	size_t ol;
	CHECK((call(d, FUSE_INIT, 0, &in, sizeof(in), NULL, 0, &o, &ol)) == (0));
	tfs_dbuf_free(&err);
}

static void daemon_stop(struct daemon *d)
{
	fuse_session_destroy(d->se);
	tfs_fs_destroy(d->fs);
	tfs_stack_close(d->stack);
	tfs_source_clear(&d->src);
	tfs_config_clear(&d->cfg);
}

/* ---- requests ---- */

static int lookup(struct daemon *d, uint64_t parent, const char *name, uint64_t *node)
{
	const char *o;
	size_t ol;
	int rc = call(d, FUSE_LOOKUP, parent, name, strlen(name) + 1, NULL, 0, &o, &ol);
	if (rc == 0)
		*node = ((const struct fuse_entry_out *)o)->nodeid;
	return rc;
}

static int do_open(struct daemon *d, uint64_t node, uint32_t op, int flags, uint64_t *fh)
{
	struct fuse_open_in in = { .flags = (uint32_t)flags };
	const char *o;
	size_t ol;
	int rc = call(d, op, node, &in, sizeof(in), NULL, 0, &o, &ol);
	if (rc == 0)
		*fh = ((const struct fuse_open_out *)o)->fh;
	return rc;
}

static int do_read(struct daemon *d, uint64_t node, uint64_t fh, int flags, uint64_t off,
		   uint32_t size, const char **data, size_t *len)
{
	struct fuse_read_in in = { .fh = fh, .offset = off, .size = size, .flags = (uint32_t)flags };
	return call(d, FUSE_READ, node, &in, sizeof(in), NULL, 0, data, len);
}

static int do_write(struct daemon *d, uint64_t node, uint64_t fh, int flags, uint64_t off,
		    const void *buf, uint32_t size)
{
	struct fuse_write_in in = {
		.fh = fh, .offset = off, .size = size, .flags = (uint32_t)flags
	};
	const char *o;
	size_t ol;
	int rc = call(d, FUSE_WRITE, node, &in, sizeof(in), buf, size, &o, &ol);
	if (rc == 0)
		CHECK((((const struct fuse_write_out *)o)->size) == (size));
	return rc;
}

static int do_release(struct daemon *d, uint32_t op, uint64_t node, uint64_t fh, int flags)
{
	struct fuse_release_in in = { .fh = fh, .flags = (uint32_t)flags };
	const char *o;
	size_t ol;
	return call(d, op, node, &in, sizeof(in), NULL, 0, &o, &ol);
}

static int do_flush(struct daemon *d, uint64_t node, uint64_t fh)
{
	struct fuse_flush_in in = { .fh = fh };
	const char *o;
	size_t ol;
	return call(d, FUSE_FLUSH, node, &in, sizeof(in), NULL, 0, &o, &ol);
}

/* A readdir reply's names, appended to `names` (space-separated); the
 * last entry's offset in *off.  Returns the errno. */
static int do_readdir(struct daemon *d, uint64_t node, uint64_t fh, int64_t *off, char *names,
		      size_t nlen)
{
	struct fuse_read_in in = { .fh = fh, .offset = (uint64_t)*off, .size = 512 };
	const char *o;
	size_t ol;
	int rc = call(d, FUSE_READDIR, node, &in, sizeof(in), NULL, 0, &o, &ol);
	for (size_t p = 0; rc == 0 && p + FUSE_NAME_OFFSET <= ol;) {
		const struct fuse_dirent *de = (const void *)(o + p);
		size_t used = strlen(names);
		snprintf(names + used, nlen - used, "%.*s ", (int)de->namelen, de->name);
		*off = (int64_t)de->off;
		p += FUSE_DIRENT_SIZE(de);
	}
	return rc;
}

static uint64_t file_size(struct daemon *d, uint64_t node)
{
	struct fuse_getattr_in in = { 0 };
	const char *o;
	size_t ol;
	CHECK((call(d, FUSE_GETATTR, node, &in, sizeof(in), NULL, 0, &o, &ol)) == (0));
	return ((const struct fuse_attr_out *)o)->attr.size;
}

/* ---- fixtures ---- */

static char pattern(uint64_t i)
{
	return (char)('a' + (i * 7 + i / 251) % 26);
}

static void put_file(const char *rel, size_t size)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", bucket, rel);
	FILE *f = fopen(p, "w");
	CHECK((f) != NULL);
	for (size_t i = 0; i < size; i++)
		fputc(pattern(i), f);
	CHECK((fclose(f)) == (0));
}

static void quiet(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	if (level <= TFS_LOG_WARN || getenv("TFS_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", line);
}

static void setup(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/tfs_resume_XXXXXX");
	CHECK((mkdtemp(tmp)) != NULL);
	snprintf(bucket, sizeof(bucket), "%s/bucket", tmp);
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	CHECK((mkdir(bucket, 0700)) == (0));
	CHECK((mkdir(cache, 0700)) == (0));
	char p[256];
	snprintf(p, sizeof(p), "%s/dir", bucket);
	CHECK((mkdir(p, 0700)) == (0));
	put_file("data.bin", DATA_SIZE);
	put_file("clean.bin", 1000);
	for (int i = 0; i < NFILES; i++) {
		char n[64];
		snprintf(n, sizeof(n), "dir/f%02d", i);
		put_file(n, 10);
	}
	tfs_log_init(&tlog, quiet, NULL, TFS_LOG_DEBUG);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	(void)system(cmd);
}

/* The first daemon: hands out IDs and handles, writes, and dies. */
static void first_daemon(int wfd)
{
	struct daemon d;
	struct handed h = { 0 };
	const char *data;
	size_t len;
	daemon_start(&d, false, 0);
	CHECK((lookup(&d, 1, "data.bin", &h.data)) == (0));
	CHECK((do_open(&d, h.data, FUSE_OPEN, O_RDONLY, &h.data_fh)) == (0));
	CHECK((do_read(&d, h.data, h.data_fh, O_RDONLY, 0, 4096, &data, &len)) == (0));
	CHECK((len) == (4096));
	CHECK((data[100]) == (pattern(100)));

	CHECK((lookup(&d, 1, "dir", &h.dir)) == (0));
	CHECK((lookup(&d, h.dir, "f05", &h.moved)) == (0));
	CHECK((do_open(&d, h.dir, FUSE_OPENDIR, O_RDONLY, &h.dir_fh)) == (0));
	char names[4096] = "";
	CHECK((do_readdir(&d, h.dir, h.dir_fh, &h.dir_off, names, sizeof(names))) == (0));
	CHECK((h.dir_off) > (2));
	CHECK((h.dir_off) < (NFILES));

	/* A new file, written. */
	struct {
		struct fuse_create_in in;
		char name[16];
	} c = { .in = { .flags = O_WRONLY | O_CREAT, .mode = S_IFREG | 0644 } };
	snprintf(c.name, sizeof(c.name), "out.bin");
	const char *o;
	size_t ol;
	CHECK((call(&d, FUSE_CREATE, 1, &c, sizeof(c.in) + strlen(c.name) + 1, NULL, 0, &o, &ol)) ==
	      (0));
	h.out = ((const struct fuse_entry_out *)o)->nodeid;
	h.out_fh = ((const struct fuse_open_out *)(o + sizeof(struct fuse_entry_out)))->fh;
	char buf[65536];
	memset(buf, 'A', sizeof(buf));
	CHECK((do_write(&d, h.out, h.out_fh, O_WRONLY, 0, buf, sizeof(buf))) == (0));

	/* A clean file opened for writing and changed (no close). */
	CHECK((lookup(&d, 1, "clean.bin", &h.clean)) == (0));
	CHECK((do_open(&d, h.clean, FUSE_OPEN, O_RDWR, &h.clean_fh)) == (0));
	CHECK((do_write(&d, h.clean, h.clean_fh, O_RDWR, 10, "XYZ", 3)) == (0));

	/* The directory moves (its files' node IDs with it). */
	struct {
		struct fuse_rename_in in;
		char names[16];
	} r = { .in = { .newdir = 1 } };
	memcpy(r.names, "dir\0moved", 10);
	CHECK((call(&d, FUSE_RENAME, 1, &r, sizeof(r.in) + 10, NULL, 0, &o, &ol)) == (0));

	h.ok = 1;
	CHECK((write(wfd, &h, sizeof(h))) == ((ssize_t)sizeof(h)));
	raise(SIGKILL); /* no clean-up: as a crash */
}

static struct handed run_first_daemon(void)
{
	int p[2];
	struct handed h = { 0 };
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		in_child = true;
		close(p[0]);
		first_daemon(p[1]);
		_exit(1);
	}
	close(p[1]);
	ssize_t n = read(p[0], &h, sizeof(h));
	close(p[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the first daemon failed (%d)", st);
	cr_assert_eq(n, (ssize_t)sizeof(h));
	cr_assert(h.ok);
	return h;
}

TestSuite(resume, .init = setup, .fini = teardown, .timeout = 60);

Test(resume, resumed_daemon_serves_the_dead_daemons_ids_and_handles)
{
	struct handed h = run_first_daemon();
	struct daemon d;
	const char *data;
	size_t len;
	daemon_start(&d, true, 1);

	/* The reader goes on where it was, through a rebuilt handle. */
	cr_assert_eq(do_read(&d, h.data, h.data_fh, O_RDONLY, 200000, 4096, &data, &len), 0);
	cr_assert_eq(len, 4096);
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(data[i], pattern(200000 + i), "byte %zu", 200000 + i);
	cr_assert_eq(file_size(&d, h.data), DATA_SIZE);

	/* The listing continues at its offset, in the directory's new
	 * place; the node of a file below it resolves to its new path. */
	char names[4096] = "";
	int64_t off = h.dir_off;
	while (off < NFILES + 2) {
		int64_t before = off;
		cr_assert_eq(do_readdir(&d, h.dir, h.dir_fh, &off, names, sizeof(names)), 0);
		if (off == before)
			break;
	}
	char want[16];
	snprintf(want, sizeof(want), "f%02d ", NFILES - 1);
	cr_assert_not_null(strstr(names, want), "the rest of the listing: %s", names);
	cr_assert_null(strstr(names, "f00 "), "the listing started over: %s", names);
	cr_assert_eq(file_size(&d, h.moved), 10);
	cr_assert_eq(do_release(&d, FUSE_RELEASEDIR, h.dir, h.dir_fh, O_RDONLY), 0);

	/* The writer of the new file goes on; its close uploads it all. */
	char buf[65536];
	memset(buf, 'B', sizeof(buf));
	cr_assert_eq(do_write(&d, h.out, h.out_fh, O_WRONLY, 65536, buf, sizeof(buf)), 0);
	cr_assert_eq(do_flush(&d, h.out, h.out_fh), 0);
	cr_assert_eq(do_release(&d, FUSE_RELEASE, h.out, h.out_fh, O_WRONLY), 0);

	/* The clean file's writer closes without writing again: its write
	 * from before the crash is uploaded. */
	cr_assert_eq(do_flush(&d, h.clean, h.clean_fh), 0);
	cr_assert_eq(do_release(&d, FUSE_RELEASE, h.clean, h.clean_fh, O_RDWR), 0);
	cr_assert_eq(do_release(&d, FUSE_RELEASE, h.data, h.data_fh, O_RDONLY), 0);

	/* A forget of more than this daemon knows, and of an unknown node. */
	struct fuse_forget_in fg = { .nlookup = 3 };
	call(&d, FUSE_FORGET, h.data, &fg, sizeof(fg), NULL, 0, NULL, NULL);
	call(&d, FUSE_FORGET, 123456789, &fg, sizeof(fg), NULL, 0, NULL, NULL);

	uint64_t left = 0, lbytes = 0;
	int drc = tfs_wb_drain(d.stack->wb, 30000, &left, &lbytes);
	if (drc) {
		struct json_object *js = json_object_new_object();
		tfs_wb_stats(d.stack->wb, js);
		fprintf(stderr, "%s\n", json_object_to_json_string(js));
	}
	cr_assert_eq(drc, 0, "write-back did not finish: %llu file(s), %llu bytes left",
		     (unsigned long long)left, (unsigned long long)lbytes);
	daemon_stop(&d);

	char p[256];
	struct stat st;
	snprintf(p, sizeof(p), "%s/out.bin", bucket);
	cr_assert_eq(stat(p, &st), 0, "out.bin was not uploaded");
	cr_assert_eq(st.st_size, 131072);
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f);
	for (long i = 0; i < 131072; i++)
		cr_assert_eq(fgetc(f), i < 65536 ? 'A' : 'B', "out.bin byte %ld", i);
	fclose(f);
	snprintf(p, sizeof(p), "%s/clean.bin", bucket);
	f = fopen(p, "r");
	cr_assert_not_null(f);
	char cb[1000];
	cr_assert_eq(fread(cb, 1, sizeof(cb), f), sizeof(cb));
	fclose(f);
	cr_assert_eq(memcmp(cb + 10, "XYZ", 3), 0, "the write before the crash was lost");
	cr_assert_eq(cb[9], pattern(9));
	cr_assert_eq(cb[13], pattern(13));
}

Test(resume, fresh_daemon_refuses_old_handles_and_ids)
{
	struct handed h = run_first_daemon();
	struct daemon d;
	const char *data;
	size_t len;
	daemon_start(&d, false, 0);
	/* Never dereferenced: an fh this daemon did not give is EBADF, a
	 * node ID of the wiped table is ESTALE. */
	cr_assert_eq(do_read(&d, h.data, h.data_fh, O_RDONLY, 0, 4096, &data, &len), EBADF);
	struct fuse_getattr_in gi = { 0 };
	const char *o;
	size_t ol;
	cr_assert_eq(call(&d, FUSE_GETATTR, h.clean, &gi, sizeof(gi), NULL, 0, &o, &ol), ESTALE);
	uint64_t node = 0;
	cr_assert_eq(lookup(&d, 1, "data.bin", &node), 0);
	cr_assert_eq(do_read(&d, node, h.data_fh, O_RDONLY, 0, 4096, &data, &len), EBADF);
	cr_assert_eq(do_write(&d, node, h.out_fh, O_WRONLY, 0, "x", 1), EBADF);
	daemon_stop(&d);
}

Test(resume, own_released_handle_is_ebadf)
{
	struct daemon d;
	const char *data;
	size_t len;
	uint64_t node = 0, fh = 0;
	daemon_start(&d, true, 3);
	cr_assert_eq(lookup(&d, 1, "data.bin", &node), 0);
	cr_assert_eq(do_open(&d, node, FUSE_OPEN, O_RDONLY, &fh), 0);
	cr_assert_eq(fh >> 32, 3, "fh %#llx does not carry the generation", (unsigned long long)fh);
	cr_assert_eq(do_release(&d, FUSE_RELEASE, node, fh, O_RDONLY), 0);
	cr_assert_eq(do_read(&d, node, fh, O_RDONLY, 0, 4096, &data, &len), EBADF);
	daemon_stop(&d);
}
