/* ctl_path.c - where a mount's control socket lives: the canonical form of
 * a mountpoint, its hash, and the checked runtime directory. */
#include "config.h"

#include "ctl_path.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "dirs.h"

_Static_assert(TFS_CTL_SOCK_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path), "TFS_CTL_SOCK_"
										     "PATH_MAX "
										     "must be the "
										     "size of "
										     "sun_path");

#define MAX_SYMLINKS 40

/* Normalise the absolute path `abs` without looking at the filesystem:
 * "//" and "." are removed, ".." removes the previous component. */
static int lexical(const char *abs, char *out, size_t len)
{
	const char *p = abs;
	size_t o = 0;

	while (*p) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		size_t n = (size_t)(p - s);
		if (n == 1 && s[0] == '.')
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		if (o + 1 + n >= len)
			return ENAMETOOLONG;
		out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	if (o == 0) {
		if (len < 2)
			return ENAMETOOLONG;
		out[o++] = '/';
	}
	out[o] = '\0';
	return 0;
}

/* out = dir + "/" + name, without doubling the slash of "/". */
static int join(const char *dir, const char *name, char *out, size_t len)
{
	int n = snprintf(out, len, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
	return n < 0 || (size_t)n >= len ? ENAMETOOLONG : 0;
}

int tfs_ctl_canonical_path(const char *mountpoint, char *out, size_t len)
{
	char path[PATH_MAX], parent[PATH_MAX], rparent[PATH_MAX], cand[PATH_MAX];
	char target[PATH_MAX];
	int rc;

	if (mountpoint == NULL || mountpoint[0] == '\0')
		return EINVAL;
	if (mountpoint[0] == '/') {
		if (strlen(mountpoint) >= sizeof(path))
			return ENAMETOOLONG;
		memcpy(path, mountpoint, strlen(mountpoint) + 1);
	} else {
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return errno == ERANGE ? ENAMETOOLONG : errno;
		rc = join(cwd, mountpoint, path, sizeof(path));
		if (rc)
			return rc;
	}

	for (int depth = 0;; depth++) {
		if (depth > MAX_SYMLINKS)
			return ELOOP;
		/* Drop trailing slashes and trailing "." components. */
		size_t n = strlen(path);
		for (;;) {
			while (n > 1 && path[n - 1] == '/')
				n--;
			if (n >= 2 && path[n - 1] == '.' && path[n - 2] == '/') {
				n--;
				continue;
			}
			break;
		}
		path[n] = '\0';
		char *slash = strrchr(path, '/');
		if (strcmp(slash + 1, "..") == 0) {
			rc = lexical(path, cand, sizeof(cand));
			if (rc)
				return rc;
			memcpy(path, cand, strlen(cand) + 1);
			slash = strrchr(path, '/');
		}
		const char *last = slash + 1;
		if (*last == '\0') {
			/* The root directory. */
			memcpy(cand, "/", 2);
			break;
		}
		if (slash == path) {
			memcpy(parent, "/", 2);
		} else {
			memcpy(parent, path, (size_t)(slash - path));
			parent[slash - path] = '\0';
		}
		if (realpath(parent, rparent) == NULL) {
			rc = errno;
			if (rc == ENOMEM || rc == ENAMETOOLONG || rc == ELOOP)
				return rc;
			rc = lexical(parent, rparent, sizeof(rparent));
			if (rc)
				return rc;
		}
		rc = join(rparent, last, cand, sizeof(cand));
		if (rc)
			return rc;
		ssize_t t = readlink(cand, target, sizeof(target));
		if (t < 0)
			break; /* not a link, missing, or unreadable: use it as is */
		if ((size_t)t >= sizeof(target))
			return ENAMETOOLONG;
		target[t] = '\0';
		if (target[0] == '/') {
			memcpy(path, target, (size_t)t + 1);
		} else {
			rc = join(rparent, target, path, sizeof(path));
			if (rc)
				return rc;
		}
	}
	if (strlen(cand) >= len)
		return ERANGE;
	memcpy(out, cand, strlen(cand) + 1);
	return 0;
}

/* Create `dir` 0700 or check that the existing one is safe to use
 * (lib/dirs.h), and make it 0700. */
static int ensure_dir(const char *dir)
{
	return tfs_dir_secure(dir, TFS_DIR_CREATE | TFS_DIR_PRIVATE, NULL);
}

static int runtime_dir(char *out, size_t len)
{
	uid_t uid = geteuid();
	int n;

	if (uid == 0) {
		n = snprintf(out, len, "/run/tierfs");
	} else {
		const char *x = secure_getenv("XDG_RUNTIME_DIR");
		if (x != NULL && x[0] == '/') {
			size_t xl = strlen(x);
			while (xl > 1 && x[xl - 1] == '/')
				xl--;
			if (xl > (size_t)INT_MAX - 16)
				return ENAMETOOLONG;
			n = snprintf(out, len, "%.*s/tierfs", (int)xl, x);
		} else {
			n = snprintf(out, len, "/tmp/tierfs-%u", (unsigned)uid);
		}
	}
	if (n < 0 || (size_t)n >= len)
		return ENAMETOOLONG;
	return 0;
}

int tfs_ctl_socket_path(const char *mountpoint, char *out, size_t len)
{
	char canon[PATH_MAX], dir[PATH_MAX], hex[17];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int rc;

	rc = tfs_ctl_canonical_path(mountpoint, canon, sizeof(canon));
	if (rc)
		return rc;
	if (!EVP_Digest(canon, strlen(canon), md, &mdlen, EVP_sha256(), NULL) || mdlen < 8)
		return EIO;
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	rc = runtime_dir(dir, sizeof(dir));
	if (rc)
		return rc;
	/* "/" + 16 hex digits + ".sock" */
	size_t n = strlen(dir) + 1 + 16 + 5;
	if (n >= TFS_CTL_SOCK_PATH_MAX)
		return ENAMETOOLONG;
	if (n >= len)
		return ERANGE;
	rc = ensure_dir(dir);
	if (rc)
		return rc;
	snprintf(out, len, "%s/%s.sock", dir, hex);
	return 0;
}
