/* dirs.c - create and check the daemon's directories (the rule: dirs.h). */
#include "config.h"

#include "dirs.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p with mode 0700 for what is created. */
static int make_path(const char *path, const struct tfs_log *log)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	memcpy(buf, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
			int e = errno;
			tfs_err(log, "cannot create directory '%s': %s", buf, strerror(e));
			return e;
		}
		buf[i] = c;
	}
	return 0;
}

/* The absolute path of `path` without symlinks: all of it (follow), or
 * all but its last component, which is kept as it is. */
static int resolve(const char *path, bool follow, char out[PATH_MAX], const struct tfs_log *log)
{
	char parent[PATH_MAX];
	size_t len = strlen(path);

	while (len > 1 && path[len - 1] == '/')
		len--;
	memcpy(parent, path, len);
	parent[len] = '\0';
	if (strcmp(parent, "/") == 0) {
		memcpy(out, "/", 2);
		return 0;
	}
	if (follow) {
		if (realpath(parent, out) == NULL) {
			int e = errno;
			tfs_err(log, "directory '%s': %s", path, strerror(e));
			return e;
		}
		return 0;
	}
	char *slash = strrchr(parent, '/');
	const char *base = slash ? slash + 1 : parent;
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
		tfs_err(log, "directory '%s': not a plain name", path);
		return EINVAL;
	}
	if (slash == parent)
		slash[1] = '\0'; /* "/x": the parent is "/" */
	else if (slash)
		*slash = '\0';
	char rp[PATH_MAX];
	if (realpath(slash ? parent : ".", rp) == NULL) {
		int e = errno;
		tfs_err(log, "directory '%s': %s", path, strerror(e));
		return e;
	}
	size_t rl = strlen(rp), bl = strlen(base);
	if (rl + 1 + bl >= PATH_MAX) {
		tfs_err(log, "directory '%s': path too long", path);
		return ENAMETOOLONG;
	}
	if (rl == 1)
		rl = 0; /* rp is "/" */
	memcpy(out, rp, rl);
	out[rl] = '/';
	memcpy(out + rl + 1, base, bl + 1);
	return 0;
}

/* The directory itself. */
static int check_self(const char *path, const char *real, unsigned flags, const struct tfs_log *log)
{
	struct stat st;
	uid_t me = geteuid();

	if (lstat(real, &st) != 0) {
		int e = errno;
		tfs_err(log, "directory '%s': %s", path, strerror(e));
		return e;
	}
	if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode)) {
		tfs_err(log, "'%s' is %s, not a directory: refused", path,
			S_ISLNK(st.st_mode) ? "a symlink" : "another kind of file");
		return ENOTDIR;
	}
	if (st.st_uid != me && !((flags & TFS_DIR_ADMIN) && st.st_uid == 0)) {
		tfs_err(log,
			"directory '%s' is owned by uid %u, not %s%u: another user could have "
			"planted it; refused",
			path, (unsigned)st.st_uid,
			(flags & TFS_DIR_ADMIN) && me != 0 ? "root or " : "", (unsigned)me);
		return EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		tfs_err(log, "directory '%s' is writable by %s (mode %04o): refused (chmod go-w)",
			path, (st.st_mode & S_IWOTH) ? "others" : "its group",
			(unsigned)(st.st_mode & 07777));
		return EPERM;
	}
	if ((flags & TFS_DIR_PRIVATE) && (st.st_mode & 077) && chmod(real, 0700) != 0) {
		int e = errno;
		tfs_err(log, "directory '%s': chmod 0700: %s", path, strerror(e));
		return e;
	}
	return 0;
}

/* Every directory above `real` (absolute, without symlinks), up to "/". */
static int check_parents(const char *path, const char *real, const struct tfs_log *log)
{
	char buf[PATH_MAX];
	uid_t me = geteuid();
	struct stat st;

	memcpy(buf, real, strlen(real) + 1);
	for (;;) {
		char *slash = strrchr(buf, '/');
		if (slash == NULL || buf[1] == '\0')
			return 0; /* "/" was the last one checked */
		if (slash == buf)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (lstat(buf, &st) != 0) {
			int e = errno;
			tfs_err(log, "directory '%s' (above '%s'): %s", buf, path, strerror(e));
			return e;
		}
		if (!S_ISDIR(st.st_mode)) {
			tfs_err(log, "'%s' (above '%s') is not a directory: refused", buf, path);
			return ENOTDIR;
		}
		if (st.st_uid != 0 && st.st_uid != me) {
			tfs_err(log,
				"directory '%s' (above '%s') is owned by uid %u, not root: its "
				"owner "
				"could replace what is below it; refused",
				buf, path, (unsigned)st.st_uid);
			return EPERM;
		}
		if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
			tfs_err(log,
				"directory '%s' (above '%s') is writable by %s without the sticky "
				"bit "
				"(mode %04o): refused",
				buf, path, (st.st_mode & S_IWOTH) ? "others" : "its group",
				(unsigned)(st.st_mode & 07777));
			return EPERM;
		}
	}
}

int tfs_dir_secure(const char *path, unsigned flags, const struct tfs_log *log)
{
	char real[PATH_MAX];
	size_t len = path ? strlen(path) : 0;
	int rc;

	if (len == 0) {
		tfs_err(log, "directory: empty path");
		return EINVAL;
	}
	if (len >= PATH_MAX) {
		tfs_err(log, "directory '%.64s...': path too long", path);
		return ENAMETOOLONG;
	}
	if (flags & TFS_DIR_CREATE) {
		rc = make_path(path, log);
		if (rc)
			return rc;
	}
	/* The directories above the name itself first: nobody else may
	 * replace it (a symlink included) by one of their own. */
	rc = resolve(path, false, real, log);
	if (rc == 0)
		rc = check_parents(path, real, log);
	if (rc == 0 && (flags & TFS_DIR_ADMIN)) {
		rc = resolve(path, true, real, log);
		if (rc == 0)
			rc = check_parents(path, real, log);
	}
	if (rc == 0)
		rc = check_self(path, real, flags, log);
	return rc;
}
