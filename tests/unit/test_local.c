/* test_local.c - the local backend stays inside its root (issue 16, 2).
 *
 * A scratch directory holds root/ (the bucket) and outside/ (what no key
 * may reach), with symlinks in root/ pointing out: x -> outside/secret,
 * rel -> ../outside/secret, ckpt -> outside, d/inner -> outside.  Every
 * operation (head, get, list, put, marker put, copy, delete, and the
 * resolver itself) is tried through them, and outside/ must be unchanged.
 * Each test runs twice: suite local with openat2(), suite local_walk with
 * the O_NOFOLLOW walk used where the kernel has no openat2().
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

static const char *through[] = {
	"x", "rel", "ckpt/secret", "d/inner/secret", "ckpt/e1/f", "d/inner/e1/f",
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
	cr_assert(log_has("local: read 'x': a symlink on its path"), "no log line for 'x':\n%s",
		  logged);
	/* The same object through a real path is fine. */
	cr_assert_eq(tfs_backend_head(be, "d/ok", &m), 0);
	tfs_obj_meta_clear(&m);
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

BOTH(listings_leave_symlinks_out)
{
	struct tfs_dbuf s;
	tfs_dbuf_init(&s, 1 << 16);
	list_str("", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "d/ok ");
	list_str("", "/", &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "d/ ");
	list_str("ckpt/", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "");
	list_str("ckpt/", "/", &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "");
	list_str("d/inner/", "/", &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "");
	list_str("x", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "");
	tfs_dbuf_free(&s);
	cr_assert(log_has("'ckpt' in ") && log_has("'d/inner' in ") && log_has("is a symlink"),
		  "symlinks not named in the log:\n%s", logged);
	/* A FIFO is neither listed nor opened (no hang). */
	char p[512];
	path_of(p, sizeof(p), root, "d/fifo");
	cr_assert_eq(mkfifo(p, 0644), 0);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "d/fifo", &m), ENOENT);
	tfs_dbuf_init(&s, 1 << 16);
	list_str("d/", NULL, &s);
	cr_assert_str_eq(tfs_dbuf_str(&s), "d/ok ");
	tfs_dbuf_free(&s);
	cr_assert(log_has("'d/fifo' in ") && log_has("not a file or directory"), "%s", logged);
}

BOTH(writes_never_land_outside)
{
	const char *keys[] = {
		"ckpt/new", "ckpt/sub/deeper", "d/inner/new", "ckpt/e1/f", "x", "rel", "d/inner",
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *data = "written by the backend\n";
		int rc = tfs_backend_put(be, keys[i], tfs_io_cbuf(data), strlen(data), NULL, NULL);
		cr_assert_eq(rc, EACCES, "put '%s': %d, expected EACCES", keys[i], rc);
	}
	cr_assert(log_has("local: write 'ckpt/new': a symlink on its path"), "%s", logged);
	/* The symlinks themselves are not replaced either. */
	cr_assert(is_symlink("x") && is_symlink("rel") && is_symlink("d/inner") &&
		  is_symlink("ckpt"));
	/* Directory markers. */
	cr_assert_eq(tfs_backend_put(be, "ckpt/m/", tfs_io_cbuf(""), 0, NULL, NULL), EACCES);
	cr_assert_eq(tfs_backend_put(be, "ckpt/", tfs_io_cbuf(""), 0, NULL, NULL), EACCES);
	cr_assert_eq(tfs_backend_put(be, "d/inner/m/", tfs_io_cbuf(""), 0, NULL, NULL), EACCES);
	/* Copies: from a real object to a key through a symlink, and back. */
	cr_assert_eq(tfs_backend_copy(be, "d/ok", "ckpt/copied", NULL, NULL), EACCES);
	cr_assert_eq(tfs_backend_copy(be, "x", "d/stolen", NULL, NULL), ENOENT);
	cr_assert_eq(tfs_backend_copy(be, "ckpt/secret", "d/stolen", NULL, NULL), ENOENT);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "d/stolen", &m), ENOENT);
	outside_unchanged();
	/* A real key next to them still works. */
	cr_assert_eq(tfs_backend_put(be, "d/sub/new", tfs_io_cbuf("ok"), 2, NULL, NULL), 0);
	cr_assert_eq(tfs_backend_head(be, "d/sub/new", &m), 0);
	tfs_obj_meta_clear(&m);
}

BOTH(deletes_never_touch_outside)
{
	const char *keys[] = { "ckpt/secret", "ckpt/e1/f", "d/inner/e1/f", "x",
			       "rel",         "ckpt/e1/",  "ckpt/" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_eq(tfs_backend_delete(be, keys[i]), 0, "delete '%s'", keys[i]);
	outside_unchanged();
	cr_assert(is_symlink("x") && is_symlink("rel") && is_symlink("ckpt"), "a symlink was "
									      "removed");
	cr_assert(log_has("local: delete 'ckpt/secret': a symlink on its path"), "%s", logged);
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
