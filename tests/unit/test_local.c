/* test_local.c - the local backend stays inside its root (issue 16, 2)
 * and stores symlinks as symlinks (issue 18).
 *
 * A scratch directory holds root/ (the bucket) and outside/ (what no key
 * may reach), with symlinks in root/ pointing out: x -> outside/secret,
 * rel -> ../outside/secret, ckpt -> outside, d/inner -> outside.  Every
 * operation (head, get, list, put, marker put, copy, delete, and the
 * resolver itself) is tried through them, and outside/ must be unchanged:
 * a symlink as a key's last component is an object whose body is its
 * target, one before it makes the key unreachable.  Then symlink objects
 * (mode S_IFLNK, as s3fs writes them) are put, read, listed, copied and
 * deleted.  Each test runs twice: suite local with openat2(), suite
 * local_walk with the O_NOFOLLOW walk used where the kernel has no
 * openat2().
 */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "dbuf.h"
#include "local.h"
#include "log.h"

static char base[64];
static char root[128];
static char outside[128];
static struct tfs_backend *be;
static struct tfs_log tlog;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char logged[1 << 16];

static void sink(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	(void)level;
	pthread_mutex_lock(&log_mu);
	size_t n = strlen(logged);
	snprintf(logged + n, sizeof(logged) - n, "%s\n", line);
	pthread_mutex_unlock(&log_mu);
}

static void path_of(char *buf, size_t n, const char *dir, const char *rel)
{
	cr_assert_lt((size_t)snprintf(buf, n, "%s/%s", dir, rel), n);
}

static void write_file(const char *dir, const char *rel, const char *data)
{
	char p[512];
	path_of(p, sizeof(p), dir, rel);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s: %s", p, strerror(errno));
	fputs(data, f);
	cr_assert_eq(fclose(f), 0);
}

static void link_to(const char *target, const char *rel)
{
	char p[512];
	path_of(p, sizeof(p), root, rel);
	cr_assert_eq(symlink(target, p), 0, "symlink %s: %s", p, strerror(errno));
}

static void make_dir(const char *dir, const char *rel)
{
	char p[512];
	path_of(p, sizeof(p), dir, rel);
	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
}

static void setup(bool walk)
{
	logged[0] = '\0';
	tfs_log_init(&tlog, sink, NULL, TFS_LOG_DEBUG);
	snprintf(base, sizeof(base), "/tmp/tierfs-local-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	path_of(root, sizeof(root), base, "root");
	path_of(outside, sizeof(outside), base, "outside");
	cr_assert_eq(mkdir(root, 0755), 0);
	cr_assert_eq(mkdir(outside, 0755), 0);
	write_file(outside, "secret", "top secret\n");
	make_dir(outside, "e1");
	write_file(outside, "e1/f", "outside file in a directory\n");
	link_to(outside, "ckpt");
	char target[512];
	path_of(target, sizeof(target), outside, "secret");
	link_to(target, "x");
	link_to("../outside/secret", "rel");
	make_dir(root, "d");
	write_file(root, "d/ok", "inside\n");
	link_to(outside, "d/inner");
	struct tfs_local_config c = { .root = root, .no_openat2 = walk };
	cr_assert_eq(tfs_local_create(&c, &tlog, &be), 0);
}

static void teardown(void)
{
	tfs_backend_destroy(be);
	be = NULL;
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

static void setup_openat2(void)
{
	setup(false);
}

static void setup_walk(void)
{
	setup(true);
}

TestSuite(local, .init = setup_openat2, .fini = teardown, .timeout = 30);
TestSuite(local_walk, .init = setup_walk, .fini = teardown, .timeout = 30);

/* Each test body runs in both suites. */
#define BOTH(name)              \
	static void name(void); \
	Test(local, name)       \
	{                       \
		name();         \
	}                       \
	Test(local_walk, name)  \
	{                       \
		name();         \
	}                       \
	static void name(void)

/* outside/ holds exactly secret ("top secret\n") and e1/f, unchanged. */
static void outside_unchanged(void)
{
	char p[512], buf[64] = "";
	path_of(p, sizeof(p), outside, "secret");
	FILE *f = fopen(p, "r");
	cr_assert_not_null(f, "outside/secret is gone");
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "top secret\n", "outside/secret was changed");
	path_of(p, sizeof(p), outside, "e1/f");
	cr_assert_eq(access(p, F_OK), 0, "outside/e1/f is gone");
	const char *want[] = { "e1", "secret" };
	DIR *d = opendir(outside);
	cr_assert_not_null(d);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		cr_assert(strcmp(de->d_name, want[0]) == 0 || strcmp(de->d_name, want[1]) == 0,
			  "outside/%s appeared", de->d_name);
		n++;
	}
	closedir(d);
	cr_assert_eq(n, 2, "outside/ lost an entry");
	path_of(p, sizeof(p), outside, "e1");
	d = opendir(p);
	cr_assert_not_null(d);
	n = 0;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	cr_assert_eq(n, 1, "outside/e1 changed");
}

static bool is_symlink(const char *rel)
{
	char p[512];
	struct stat st;
	path_of(p, sizeof(p), root, rel);
	return lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
}

static bool log_has(const char *s)
{
	pthread_mutex_lock(&log_mu);
	bool r = strstr(logged, s) != NULL;
	pthread_mutex_unlock(&log_mu);
	return r;
}

/* Keys with a symlink before their last component. */
static const char *through[] = {
	"ckpt/secret",
	"d/inner/secret",
	"ckpt/e1/f",
	"d/inner/e1/f",
};
#define N_THROUGH (sizeof(through) / sizeof(through[0]))

BOTH(head_and_get_through_symlinks_are_enoent)
{
	for (size_t i = 0; i < N_THROUGH; i++) {
		struct tfs_obj_meta m = { 0 };
		cr_assert_eq(tfs_backend_head(be, through[i], &m), ENOENT, "head '%s' not ENOENT",
			     through[i]);
		char buf[64] = "";
		size_t got = 99;
		int rc = tfs_backend_get_range(be, through[i], 0, sizeof(buf), NULL,
					       tfs_io_buf(buf), &got, NULL);
		cr_assert_eq(rc, ENOENT, "get '%s': %d, read '%.*s'", through[i], rc, (int)got,
			     buf);
		cr_assert_eq(strstr(buf, "secret"), NULL);
	}
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "ckpt/", &m), ENOENT, "head of the symlinked directory");
	cr_assert_eq(tfs_backend_head(be, "x/", &m), ENOENT, "head of a symlink as a marker");
	cr_assert(log_has("local: read 'ckpt/secret': a symlink on its path"),
		  "no log line for 'ckpt/secret':\n%s", logged);
	/* The same object through a real path is fine. */
	cr_assert_eq(tfs_backend_head(be, "d/ok", &m), 0);
	tfs_obj_meta_clear(&m);
	outside_unchanged();
}

/* The whole body of `key` (a string), by one get_range. */
static int get_str(const char *key, char *buf, size_t n, char etag[TFS_ETAG_MAX])
{
	size_t got = 0;
	memset(buf, 0, n);
	return tfs_backend_get_range(be, key, 0, n - 1, NULL, tfs_io_buf(buf), &got, etag);
}

/* A symlink as the last component is an object: its body is its target,
 * never the bytes it points to (x -> outside/secret, a file of the same
 * owner the daemon could read). */
BOTH(symlinks_read_as_their_target)
{
	char target[512], buf[PATH_MAX], etag[TFS_ETAG_MAX];
	path_of(target, sizeof(target), outside, "secret");
	struct {
		const char *key, *target;
	} cases[] = { { "x", target }, { "rel", "../outside/secret" }, { "ckpt", outside } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tfs_obj_meta m = { 0 };
		cr_assert_eq(tfs_backend_head(be, cases[i].key, &m), 0, "head '%s'", cases[i].key);
		cr_assert_eq(m.size, strlen(cases[i].target));
		cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "", "41471"); /* S_IFLNK|0777 */
		char uid[32];
		snprintf(uid, sizeof(uid), "%u", (unsigned)getuid());
		cr_assert_str_eq(tfs_obj_meta_get(&m, "uid") ?: "", uid);
		cr_assert_not_null(tfs_obj_meta_get(&m, "mtime"));
		cr_assert_not_null(tfs_obj_meta_get(&m, "atime"));
		cr_assert_eq(get_str(cases[i].key, buf, sizeof(buf), etag), 0);
		cr_assert_str_eq(buf, cases[i].target, "get '%s'", cases[i].key);
		cr_assert_str_eq(etag, m.etag);
		tfs_obj_meta_clear(&m);
	}
	outside_unchanged();
}

/* Every key under `prefix` (no delimiter), as one string "k1 k2 ...". */
static void list_str(const char *prefix, const char *delim, struct tfs_dbuf *out)
{
	struct tfs_list_page p = { 0 };
	cr_assert_eq(tfs_backend_list(be, prefix, delim, NULL, 0, &p), 0);
	tfs_dbuf_reset(out);
	for (size_t i = 0; i < p.n_entries; i++) {
		tfs_dbuf_adds(out, p.entries[i].key);
		tfs_dbuf_adds(out, " ");
	}
	for (size_t i = 0; i < p.n_prefixes; i++) {
		tfs_dbuf_adds(out, p.prefixes[i]);
		tfs_dbuf_adds(out, " ");
	}
	tfs_list_page_clear(&p);
}

BOTH(listings_show_symlinks_never_follow_them)
{
	struct tfs_dbuf s;
	tfs_dbuf_init(&s, 1 << 16);
	list_str("", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "ckpt d/inner d/ok rel x ");
	list_str("", "/", &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "ckpt rel x d/ ");
	list_str("ckpt/", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "");
	list_str("ckpt/", "/", &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "");
	list_str("d/inner/", "/", &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "");
	list_str("x", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "x ");
	tfs_dbuf_free(&s);
	/* An entry's size and ETag are the link's, as HEAD gives them. */
	struct tfs_list_page p = { 0 };
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_list(be, "rel", NULL, NULL, 0, &p), 0);
	cr_assert_eq(p.n_entries, 1);
	cr_assert_eq(tfs_backend_head(be, "rel", &m), 0);
	cr_assert_eq(p.entries[0].size, strlen("../outside/secret"));
	cr_assert_str_eq(p.entries[0].etag, m.etag);
	cr_assert_eq(p.entries[0].mtime, m.mtime);
	tfs_obj_meta_clear(&m);
	tfs_list_page_clear(&p);
	/* A FIFO is neither listed nor opened (no hang), nor deleted. */
	char path[512];
	path_of(path, sizeof(path), root, "d/fifo");
	cr_assert_eq(mkfifo(path, 0644), 0);
	cr_assert_eq(tfs_backend_head(be, "d/fifo", &m), ENOENT);
	char buf[8];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "d/fifo", 0, sizeof(buf), NULL, tfs_io_buf(buf),
					   &got, NULL),
		     ENOENT);
	tfs_dbuf_init(&s, 1 << 16);
	list_str("d/", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "d/inner d/ok ");
	tfs_dbuf_free(&s);
	cr_assert(log_has("'d/fifo' in ") && log_has("not a file, symlink or directory"), "%s",
		  logged);
	cr_assert_eq(tfs_backend_delete(be, "d/fifo"), 0);
	cr_assert_eq(access(path, F_OK), 0, "the FIFO was deleted");
}

BOTH(writes_never_land_outside)
{
	const char *keys[] = { "ckpt/new", "ckpt/sub/deeper", "d/inner/new", "ckpt/e1/f" };
	const char *data = "written by the backend\n";
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		int rc = tfs_backend_put(be, keys[i], tfs_io_cbuf(data), strlen(data), NULL, NULL);
		cr_assert_eq(rc, EACCES, "put '%s': %d, expected EACCES", keys[i], rc);
	}
	cr_assert(log_has("local: write 'ckpt/new': a symlink on its path"), "%s", logged);
	cr_assert(is_symlink("x") && is_symlink("rel") && is_symlink("d/inner") &&
		  is_symlink("ckpt"));
	/* Directory markers. */
	cr_assert_eq(tfs_backend_put(be, "ckpt/m/", tfs_io_cbuf(""), 0, NULL, NULL), EACCES);
	cr_assert_eq(tfs_backend_put(be, "ckpt/", tfs_io_cbuf(""), 0, NULL, NULL), EACCES);
	cr_assert_eq(tfs_backend_put(be, "d/inner/m/", tfs_io_cbuf(""), 0, NULL, NULL), EACCES);
	/* Copies: from a real object to a key through a symlink, and back. */
	cr_assert_eq(tfs_backend_copy(be, "d/ok", "ckpt/copied", TFS_SIZE_UNKNOWN, NULL, NULL),
		     EACCES);
	cr_assert_eq(tfs_backend_copy(be, "ckpt/secret", "d/stolen", TFS_SIZE_UNKNOWN, NULL, NULL),
		     ENOENT);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "d/stolen", &m), ENOENT);
	/* Copying a symlink copies the link, not what it points to. */
	char target[512], buf[PATH_MAX];
	path_of(target, sizeof(target), outside, "secret");
	cr_assert_eq(tfs_backend_copy(be, "x", "d/stolen", TFS_SIZE_UNKNOWN, NULL, NULL), 0);
	cr_assert(is_symlink("d/stolen"));
	cr_assert_eq(get_str("d/stolen", buf, sizeof(buf), NULL), 0);
	cr_assert_str_eq(buf, target);
	outside_unchanged();
	/* A put at a symlink's key replaces the link, never writes through it. */
	const char *over[] = { "x", "rel", "d/inner" };
	for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
		cr_assert_eq(tfs_backend_put(be, over[i], tfs_io_cbuf(data), strlen(data), NULL,
					     NULL),
			     0, "put '%s'", over[i]);
		cr_assert(!is_symlink(over[i]), "'%s' is still a symlink", over[i]);
		cr_assert_eq(get_str(over[i], buf, sizeof(buf), NULL), 0);
		cr_assert_str_eq(buf, data);
	}
	outside_unchanged();
	/* A real key next to them still works. */
	cr_assert_eq(tfs_backend_put(be, "d/sub/new", tfs_io_cbuf("ok"), 2, NULL, NULL), 0);
	cr_assert_eq(tfs_backend_head(be, "d/sub/new", &m), 0);
	tfs_obj_meta_clear(&m);
}

BOTH(deletes_never_touch_outside)
{
	const char *keys[] = {
		"ckpt/secret", "ckpt/e1/f", "d/inner/e1/f", "ckpt/e1/", "ckpt/", "x/"
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_eq(tfs_backend_delete(be, keys[i]), 0, "delete '%s'", keys[i]);
	outside_unchanged();
	cr_assert(is_symlink("x") && is_symlink("rel") && is_symlink("ckpt"), "a symlink was "
									      "removed");
	cr_assert(log_has("local: delete 'ckpt/secret': a symlink on its path"), "%s", logged);
	/* A symlink's own key deletes the link, never its target. */
	const char *links[] = { "x", "rel", "ckpt", "d/inner" };
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		char p[512];
		struct stat st;
		cr_assert_eq(tfs_backend_delete(be, links[i]), 0, "delete '%s'", links[i]);
		path_of(p, sizeof(p), root, links[i]);
		cr_assert_neq(lstat(p, &st), 0, "'%s' was not deleted", links[i]);
	}
	outside_unchanged();
	/* Pruning the parents of a real key stops at the root. */
	cr_assert_eq(tfs_backend_put(be, "p/q/r", tfs_io_cbuf("1"), 1, NULL, NULL), 0);
	cr_assert_eq(tfs_backend_delete(be, "p/q/r"), 0);
	char p[512];
	path_of(p, sizeof(p), root, "p");
	cr_assert_neq(access(p, F_OK), 0, "empty parents were not pruned");
}

BOTH(symlinked_temporary_directory_is_refused)
{
	char p[512];
	path_of(p, sizeof(p), root, ".tierfs-tmp.d");
	rmdir(p);
	cr_assert_eq(symlink(outside, p), 0);
	int rc = tfs_backend_put(be, "plain", tfs_io_cbuf("abc"), 3, NULL, NULL);
	cr_assert_eq(rc, EACCES, "put with a symlinked temporary directory: %d", rc);
	outside_unchanged();
}

BOTH(keys_with_control_bytes_are_logged_escaped)
{
	link_to(outside, "e\nvil");
	const char *data = "x";
	cr_assert_eq(tfs_backend_put(be, "e\nvil/f", tfs_io_cbuf(data), 1, NULL, NULL), EACCES);
	cr_assert(log_has("'e\\x0avil/f'"), "key not escaped in the log:\n%s", logged);
	cr_assert(!log_has("e\nvil"));
	outside_unchanged();
}

/* The resolver itself, without the key check in front of it. */
static void resolver_refuses(bool walk)
{
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(rfd, 0);
	struct {
		const char *path;
		int want;
	} cases[] = {
		{ "x", ELOOP },
		{ "rel", ELOOP },
		{ "ckpt/secret", ELOOP },
		{ "d/inner/secret", ELOOP },
		{ "d/inner", ELOOP },
		{ "../outside/secret", EXDEV },
		{ "d/../../outside/secret", EXDEV },
		{ "/etc/passwd", EXDEV },
		{ "d/nothing", ENOENT },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = -1;
		int rc = tfs_local_resolve(rfd, cases[i].path, O_RDONLY, walk, &fd);
		if (rc == 0)
			close(fd);
		cr_assert_eq(rc, cases[i].want, "%s resolve '%s': %d (%s), expected %d",
			     walk ? "walk" : "openat2", cases[i].path, rc, strerror(rc),
			     cases[i].want);
	}
	int fd = -1;
	cr_assert_eq(tfs_local_resolve(rfd, "d/ok", O_RDONLY, walk, &fd), 0);
	char buf[16] = "";
	cr_assert_eq(read(fd, buf, sizeof(buf) - 1), 7);
	cr_assert_str_eq(buf, "inside\n");
	close(fd);
	cr_assert_eq(tfs_local_resolve(rfd, "d/", O_RDONLY | O_DIRECTORY, walk, &fd), 0);
	close(fd);
	cr_assert_eq(tfs_local_resolve(rfd, "d/ok/", O_RDONLY, walk, &fd), ENOTDIR);
	close(rfd);
}

Test(local, resolver_refuses_symlinks_and_escapes)
{
	resolver_refuses(false);
}

Test(local_walk, resolver_refuses_symlinks_and_escapes)
{
	resolver_refuses(true);
}

/* ---- symlinks as objects (issue 18): mode S_IFLNK, the target as body ---- */

#define LINK_MODE_STR "41471" /* S_IFLNK | 0777, as s3fs writes it */

static void link_meta(struct tfs_obj_meta *m, const char *mode, const char *mtime,
		      const char *atime)
{
	memset(m, 0, sizeof(*m));
	cr_assert_eq(tfs_obj_meta_set(m, "mode", mode), 0);
	if (mtime)
		cr_assert_eq(tfs_obj_meta_set(m, "mtime", mtime), 0);
	if (atime)
		cr_assert_eq(tfs_obj_meta_set(m, "atime", atime), 0);
}

static void lstat_root(const char *rel, struct stat *st)
{
	char p[512];
	path_of(p, sizeof(p), root, rel);
	cr_assert_eq(lstat(p, st), 0, "lstat %s: %s", p, strerror(errno));
}

static void readlink_is(const char *rel, const char *want)
{
	char p[512], t[PATH_MAX];
	path_of(p, sizeof(p), root, rel);
	ssize_t n = readlink(p, t, sizeof(t) - 1);
	cr_assert_geq(n, 0, "readlink %s: %s", p, strerror(errno));
	t[n] = '\0';
	cr_assert_str_eq(t, want, "target of %s", rel);
}

BOTH(symlink_put_head_get_list_copy_delete)
{
	const char *target = "../target/file";
	struct tfs_obj_meta meta, m = { 0 };
	char etag[TFS_ETAG_MAX], etag2[TFS_ETAG_MAX], buf[PATH_MAX];
	struct stat st;

	link_meta(&meta, LINK_MODE_STR, "1700000000.5", "1600000000");
	cr_assert_eq(
		tfs_backend_put(be, "l/link", tfs_io_cbuf(target), strlen(target), &meta, etag), 0);
	tfs_obj_meta_clear(&meta);
	/* (Reading a link may move its atime: lstat and HEAD come first.) */
	lstat_root("l/link", &st);
	cr_assert(S_ISLNK(st.st_mode), "not stored as a symlink");
	cr_assert_eq(st.st_mtim.tv_sec, 1700000000);
	cr_assert_eq(st.st_mtim.tv_nsec, 500000000);
	cr_assert_eq(st.st_atim.tv_sec, 1600000000);

	/* HEAD: the link's size, lstat's times and owner, mode S_IFLNK. */
	cr_assert_eq(tfs_backend_head(be, "l/link", &m), 0);
	cr_assert_eq(m.size, strlen(target));
	cr_assert_eq(m.mtime, 1700000000);
	cr_assert_str_eq(m.etag, etag, "put and head disagree on the ETag");
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "", LINK_MODE_STR);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mtime") ?: "", "1700000000.500000000");
	cr_assert_str_eq(tfs_obj_meta_get(&m, "atime") ?: "", "1600000000");
	tfs_obj_meta_clear(&m);
	readlink_is("l/link", target);

	/* GET: the target, by range, with If-Match, to a buffer and a fd. */
	size_t got = 0;
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(tfs_backend_get_range(be, "l/link", 3, 4, etag, tfs_io_buf(buf), &got, etag2),
		     0);
	cr_assert_eq(got, 4);
	cr_assert_str_eq(buf, "targ");
	cr_assert_str_eq(etag2, etag);
	cr_assert_eq(tfs_backend_get_range(be, "l/link", 100, 4, NULL, tfs_io_buf(buf), &got, NULL),
		     0);
	cr_assert_eq(got, 0);
	cr_assert_eq(tfs_backend_get_range(be, "l/link", 0, 4, "\"other\"", tfs_io_buf(buf), &got,
					   NULL),
		     ESTALE);
	FILE *tf = tmpfile();
	cr_assert_not_null(tf);
	cr_assert_eq(tfs_backend_get_range(be, "l/link", 0, 100, NULL, tfs_io_fd(fileno(tf), 2),
					   &got, NULL),
		     0);
	cr_assert_eq(got, strlen(target));
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(pread(fileno(tf), buf, sizeof(buf), 2), (ssize_t)strlen(target));
	cr_assert_str_eq(buf, target);
	fclose(tf);

	/* LIST: an entry like HEAD's. */
	struct tfs_list_page p = { 0 };
	cr_assert_eq(tfs_backend_list(be, "l/", "/", NULL, 0, &p), 0);
	cr_assert_eq(p.n_entries, 1);
	cr_assert_str_eq(p.entries[0].key, "l/link");
	cr_assert_eq(p.entries[0].size, strlen(target));
	cr_assert_str_eq(p.entries[0].etag, etag);
	cr_assert_eq(p.entries[0].mtime, 1700000000);
	tfs_list_page_clear(&p);

	/* A new target, even of the same length and times: a new ETag. */
	link_meta(&meta, LINK_MODE_STR, "1700000000.5", "1600000000");
	cr_assert_eq(tfs_backend_put(be, "l/link", tfs_io_cbuf("../target/fil2"), 14, &meta, etag2),
		     0);
	tfs_obj_meta_clear(&meta);
	cr_assert_str_neq(etag2, etag, "the ETag did not change with the target");
	readlink_is("l/link", "../target/fil2");

	/* COPY with meta NULL: the same target, owner and times. */
	struct stat src;
	lstat_root("l/link", &src);
	cr_assert_eq(tfs_backend_copy(be, "l/link", "l/copy", TFS_SIZE_UNKNOWN, NULL, NULL), 0);
	lstat_root("l/copy", &st);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(st.st_mtim.tv_sec, 1700000000);
	cr_assert_eq(st.st_mtim.tv_nsec, 500000000);
	cr_assert_eq(st.st_atim.tv_sec, src.st_atim.tv_sec);
	cr_assert_eq(st.st_uid, src.st_uid);
	readlink_is("l/copy", "../target/fil2");

	/* COPY onto itself with new metadata: chown / utimes of a link. */
	link_meta(&meta, LINK_MODE_STR, "1500000000", NULL);
	char id[32];
	snprintf(id, sizeof(id), "%u", getuid() == 0 ? 4321u : (unsigned)getuid());
	cr_assert_eq(tfs_obj_meta_set(&meta, "uid", id), 0);
	cr_assert_eq(tfs_backend_copy(be, "l/copy", "l/copy", TFS_SIZE_UNKNOWN, &meta, etag), 0);
	tfs_obj_meta_clear(&meta);
	cr_assert(is_symlink("l/copy"));
	readlink_is("l/copy", "../target/fil2");
	lstat_root("l/copy", &st);
	cr_assert_eq(st.st_mtim.tv_sec, 1500000000);
	cr_assert_eq(st.st_uid, getuid() == 0 ? 4321u : getuid());
	cr_assert_eq(tfs_backend_head(be, "l/copy", &m), 0);
	cr_assert_str_eq(m.etag, etag);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "uid") ?: "", id);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mtime") ?: "", "1500000000");
	tfs_obj_meta_clear(&m);

	/* The write-back's path: a resumable put from a file descriptor. */
	tf = tmpfile();
	cr_assert_not_null(tf);
	cr_assert_eq(pwrite(fileno(tf), "xx/from/fd", 10, 0), 10);
	struct tfs_mpu mpu = { 0 };
	link_meta(&meta, LINK_MODE_STR, NULL, NULL);
	cr_assert_eq(tfs_backend_put_resumable(be, "l/fd", tfs_io_fd(fileno(tf), 2), 8, &meta, &mpu,
					       NULL, NULL, NULL),
		     0);
	tfs_obj_meta_clear(&meta);
	fclose(tf);
	readlink_is("l/fd", "/from/fd");
	cr_assert_eq(tfs_backend_delete(be, "l/fd"), 0);

	/* DELETE: the link goes, the other stays; then the parent too. */
	cr_assert_eq(tfs_backend_delete(be, "l/link"), 0);
	cr_assert_eq(tfs_backend_head(be, "l/link", &m), ENOENT);
	cr_assert(is_symlink("l/copy"));
	cr_assert_eq(tfs_backend_delete(be, "l/copy"), 0);
	char path[512];
	path_of(path, sizeof(path), root, "l");
	cr_assert_neq(access(path, F_OK), 0, "the emptied parent was not pruned");
	outside_unchanged();
}

/* Not root: a link given away keeps the daemon's uid, and the put works. */
BOTH(symlink_owner_not_settable_is_not_an_error)
{
	if (getuid() == 0)
		cr_skip_test("root may give a file away");
	struct tfs_obj_meta meta;
	link_meta(&meta, LINK_MODE_STR, NULL, NULL);
	cr_assert_eq(tfs_obj_meta_set(&meta, "uid", "0"), 0);
	cr_assert_eq(tfs_backend_put(be, "own", tfs_io_cbuf("t"), 1, &meta, NULL), 0);
	tfs_obj_meta_clear(&meta);
	struct stat st;
	lstat_root("own", &st);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(st.st_uid, getuid());
	cr_assert(log_has("local: symlink 'own': owner"), "%s", logged);
}

/* A symlink made on disk, not by tierfs, pointing to a file outside. */
BOTH(symlink_made_outside_tierfs_is_an_object)
{
	link_to("/etc/passwd", "pw");
	struct tfs_dbuf s;
	tfs_dbuf_init(&s, 1 << 16);
	list_str("", "/", &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "ckpt pw rel x d/ ");
	tfs_dbuf_free(&s);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "pw", &m), 0);
	unsigned long mode = strtoul(tfs_obj_meta_get(&m, "mode") ?: "0", NULL, 10);
	cr_assert(S_ISLNK(mode), "mode %lo", mode);
	cr_assert_eq(m.size, strlen("/etc/passwd"));
	tfs_obj_meta_clear(&m);
	char buf[PATH_MAX];
	cr_assert_eq(get_str("pw", buf, sizeof(buf), NULL), 0);
	cr_assert_str_eq(buf, "/etc/passwd");
}

BOTH(bad_symlink_bodies_are_einval)
{
	static char longer[PATH_MAX + 1];
	memset(longer, 'a', sizeof(longer) - 1);
	struct {
		const char *body;
		size_t len;
	} cases[] = { { "", 0 }, { "a\0b", 3 }, { longer, PATH_MAX } };
	struct tfs_obj_meta meta;
	link_meta(&meta, LINK_MODE_STR, NULL, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = tfs_backend_put(be, "bad", tfs_io_cbuf(cases[i].body), cases[i].len, &meta,
					 NULL);
		cr_assert_eq(rc, EINVAL, "body %zu: %d", i, rc);
		char p[512];
		struct stat st;
		path_of(p, sizeof(p), root, "bad");
		cr_assert_neq(lstat(p, &st), 0, "body %zu left an object", i);
	}
	/* The longest that fits is a symlink. */
	cr_assert_eq(tfs_backend_put(be, "bad", tfs_io_cbuf(longer), PATH_MAX - 1, &meta, NULL), 0);
	cr_assert(is_symlink("bad"));
	tfs_obj_meta_clear(&meta);
	cr_assert(log_has("local: symlink 'bad': its target holds a NUL byte"), "%s", logged);
}

/* FIFOs, sockets and devices written as objects are plain files: their
 * mode and rdev stay metadata, nothing is made with mknod. */
BOTH(special_file_modes_are_regular_files)
{
	const char *modes[] = { "4516" /* S_IFIFO|0644 */, "49645" /* S_IFSOCK|0755 */,
				"8592" /* S_IFCHR|0620 */, "25008" /* S_IFBLK|0660 */ };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct tfs_obj_meta meta = { 0 }, m = { 0 };
		cr_assert_eq(tfs_obj_meta_set(&meta, "mode", modes[i]), 0);
		cr_assert_eq(tfs_obj_meta_set(&meta, "rdev", "2049"), 0);
		cr_assert_eq(tfs_backend_put(be, "dev/node", tfs_io_cbuf(""), 0, &meta, NULL), 0);
		tfs_obj_meta_clear(&meta);
		struct stat st;
		lstat_root("dev/node", &st);
		cr_assert(S_ISREG(st.st_mode), "mode %s made a %o", modes[i], st.st_mode);
		cr_assert_eq(tfs_backend_head(be, "dev/node", &m), 0);
		cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "", modes[i]);
		cr_assert_str_eq(tfs_obj_meta_get(&m, "rdev") ?: "", "2049");
		tfs_obj_meta_clear(&m);
	}
}

/* COPY between kinds follows the new metadata, as on S3: a file with a
 * link mode becomes a symlink to its bytes; a link with a file mode a
 * file holding its target. */
BOTH(copy_changes_kind_with_the_mode)
{
	struct tfs_obj_meta meta;
	char buf[PATH_MAX];
	cr_assert_eq(tfs_backend_put(be, "k/f", tfs_io_cbuf("t/x"), 3, NULL, NULL), 0);
	link_meta(&meta, LINK_MODE_STR, NULL, NULL);
	cr_assert_eq(tfs_backend_copy(be, "k/f", "k/l", TFS_SIZE_UNKNOWN, &meta, NULL), 0);
	tfs_obj_meta_clear(&meta);
	readlink_is("k/l", "t/x");
	link_meta(&meta, "33188", NULL, NULL); /* S_IFREG|0644 */
	cr_assert_eq(tfs_backend_copy(be, "k/l", "k/g", TFS_SIZE_UNKNOWN, &meta, NULL), 0);
	tfs_obj_meta_clear(&meta);
	cr_assert(!is_symlink("k/g"));
	cr_assert_eq(get_str("k/g", buf, sizeof(buf), NULL), 0);
	cr_assert_str_eq(buf, "t/x");
	/* A link's own key given metadata without a mode stays a link. */
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_obj_meta_set(&m, "mtime", "1400000000"), 0);
	cr_assert_eq(tfs_backend_copy(be, "k/l", "k/l", TFS_SIZE_UNKNOWN, &m, NULL), 0);
	tfs_obj_meta_clear(&m);
	readlink_is("k/l", "t/x");
}
