/* test_dirs.c - tfs_dir_secure(): directories another user could have
 * planted (owned by them, writable by group or others, a symlink, below a
 * directory they own or may write) are refused with a message naming
 * them; the daemon's own are created 0700. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirs.h"

#define OTHER_UID 65534

static char base[64];
static char lines[8][512];
static unsigned nlines;

static void keep(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	(void)level;
	if (nlines < 8)
		snprintf(lines[nlines++], sizeof(lines[0]), "%s", line);
}

static struct tfs_log lg;

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/tierfs-dirs-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	nlines = 0;
	tfs_log_init(&lg, keep, NULL, TFS_LOG_DEBUG);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

static const char *at(const char *rel)
{
	static char p[4][PATH_MAX];
	static unsigned i;
	char *o = p[i++ % 4];
	snprintf(o, PATH_MAX, "%s/%s", base, rel);
	return o;
}

/* The last line logged names `path` and says `what`. */
static void said(const char *path, const char *what)
{
	cr_assert_gt(nlines, 0, "nothing logged");
	const char *l = lines[nlines - 1];
	cr_assert(strstr(l, path) != NULL, "'%s' does not name %s", l, path);
	cr_assert(strstr(l, what) != NULL, "'%s' does not say '%s'", l, what);
}

static mode_t mode_of(const char *p)
{
	struct stat st;
	cr_assert_eq(lstat(p, &st), 0, "%s", p);
	return st.st_mode & 07777;
}

TestSuite(dirs, .init = setup, .fini = teardown, .timeout = 30);

Test(dirs, creates_missing_directories_0700)
{
	cr_assert_eq(tfs_dir_secure(at("a/b/c"), TFS_DIR_CREATE, &lg), 0);
	cr_assert_eq(mode_of(at("a")), 0700);
	cr_assert_eq(mode_of(at("a/b/c")), 0700);
	/* Again: an existing safe directory is fine, and so is 0755. */
	cr_assert_eq(chmod(at("a/b/c"), 0755), 0);
	cr_assert_eq(tfs_dir_secure(at("a/b/c"), TFS_DIR_CREATE, &lg), 0);
	cr_assert_eq(mode_of(at("a/b/c")), 0755);
	cr_assert_eq(tfs_dir_secure(at("a/b/c"), TFS_DIR_PRIVATE, &lg), 0);
	cr_assert_eq(mode_of(at("a/b/c")), 0700);
	cr_assert_eq(tfs_dir_secure(at("missing"), 0, &lg), ENOENT);
}

Test(dirs, owned_by_another_user_refused)
{
	if (geteuid() != 0)
		cr_skip_test("chown needs root");
	cr_assert_eq(mkdir(at("planted"), 0700), 0);
	cr_assert_eq(chown(at("planted"), OTHER_UID, OTHER_UID), 0);
	cr_assert_eq(tfs_dir_secure(at("planted"), TFS_DIR_CREATE, &lg), EPERM);
	said(at("planted"), "owned by uid 65534");
	cr_assert_eq(tfs_dir_secure(at("planted"), TFS_DIR_CREATE | TFS_DIR_ADMIN, &lg), EPERM);
	/* ... and what is below it, whoever owns that. */
	cr_assert_eq(mkdir(at("planted/mine"), 0700), 0);
	cr_assert_eq(tfs_dir_secure(at("planted/mine"), TFS_DIR_CREATE, &lg), EPERM);
	said(at("planted"), "owned by uid 65534");
}

Test(dirs, writable_by_group_or_others_refused)
{
	cr_assert_eq(mkdir(at("open"), 0700), 0);
	cr_assert_eq(chmod(at("open"), 0777), 0);
	cr_assert_eq(tfs_dir_secure(at("open"), TFS_DIR_CREATE, &lg), EPERM);
	said(at("open"), "writable by others");
	cr_assert_eq(tfs_dir_secure(at("open"), TFS_DIR_CREATE | TFS_DIR_ADMIN, &lg), EPERM);
	cr_assert_eq(chmod(at("open"), 0770), 0);
	cr_assert_eq(tfs_dir_secure(at("open"), TFS_DIR_PRIVATE, &lg), EPERM);
	said(at("open"), "writable by its group");
	cr_assert_eq(mode_of(at("open")), 0770, "a refused directory was changed");
	/* Below a directory others may write to: refused, unless sticky. */
	cr_assert_eq(chmod(at("open"), 0777), 0);
	cr_assert_eq(tfs_dir_secure(at("open/sub"), TFS_DIR_CREATE, &lg), EPERM);
	said(at("open"), "without the sticky bit");
	cr_assert_eq(chmod(at("open"), 01777), 0);
	cr_assert_eq(tfs_dir_secure(at("open/sub"), TFS_DIR_CREATE, &lg), 0);
}

Test(dirs, symlinks_and_files)
{
	cr_assert_eq(mkdir(at("real"), 0700), 0);
	cr_assert_eq(symlink(at("real"), at("link")), 0);
	cr_assert_eq(tfs_dir_secure(at("link"), TFS_DIR_CREATE, &lg), ENOTDIR);
	said(at("link"), "a symlink");
	/* The administrator's directory may be reached through a symlink:
	 * what it resolves to is checked. */
	cr_assert_eq(tfs_dir_secure(at("link"), TFS_DIR_CREATE | TFS_DIR_ADMIN, &lg), 0);
	cr_assert_eq(chmod(at("real"), 0777), 0);
	cr_assert_eq(tfs_dir_secure(at("link"), TFS_DIR_ADMIN, &lg), EPERM);
	FILE *f = fopen(at("file"), "w");
	cr_assert_not_null(f);
	fclose(f);
	cr_assert_eq(tfs_dir_secure(at("file"), TFS_DIR_CREATE, &lg), ENOTDIR);
	cr_assert_eq(tfs_dir_secure(at("file/sub"), TFS_DIR_CREATE, &lg), ENOTDIR);
	cr_assert_eq(tfs_dir_secure("", 0, &lg), EINVAL);
	cr_assert_eq(tfs_dir_secure(at("real/.."), 0, &lg), EINVAL);
}

Test(dirs, root_and_relative_paths)
{
	if (geteuid() != 0)
		cr_skip_test("/ is root's");
	cr_assert_eq(tfs_dir_secure("/", TFS_DIR_ADMIN, &lg), 0);
	cr_assert_eq(chdir(base), 0);
	cr_assert_eq(tfs_dir_secure("rel/x", TFS_DIR_CREATE, &lg), 0);
	cr_assert_eq(tfs_dir_secure("rel", 0, &lg), 0);
	cr_assert_eq(mode_of(at("rel/x")), 0700);
}

Test(dirs, symlink_in_a_directory_others_may_write)
{
	/* ssd.dir given as a symlink: the directory holding the symlink is
	 * checked too, since whoever may write there can point it elsewhere. */
	cr_assert_eq(mkdir(at("target"), 0700), 0);
	cr_assert_eq(mkdir(at("open"), 0700), 0);
	cr_assert_eq(chmod(at("open"), 0777), 0);
	cr_assert_eq(symlink(at("target"), at("open/cache")), 0);
	cr_assert_eq(tfs_dir_secure(at("open/cache"), TFS_DIR_ADMIN, &lg), EPERM);
	said(at("open"), "without the sticky bit");
	cr_assert_eq(chmod(at("open"), 0755), 0);
	cr_assert_eq(tfs_dir_secure(at("open/cache"), TFS_DIR_ADMIN, &lg), 0);
}
