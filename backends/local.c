/* local.c - the local-directory backend: a directory on disk as a bucket.
 *
 * Mapping.  A key "a/b/c" is the file <root>/a/b/c.  Because a file system
 * cannot hold every S3 key, keys with an empty segment ("a//b", "/a"), a
 * "." or ".." segment, or a segment starting with the temporary-file
 * prefix are refused with EINVAL; nothing outside <root> can be named.
 * Keys ending in '/' are directory markers, stored as directories.  A
 * directory left empty by a DELETE is removed, as its key vanishes on S3.
 *
 * Confinement.  Every path is resolved from root_fd by resolve() or
 * resolve_dir(): openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the
 * kernel has it, else walk_parent(), one component at a time, each opened
 * with O_NOFOLLOW.  Either way a symlink in any component fails with ELOOP
 * and a path leaving the root ('..', absolute) with EXDEV.  Calls that take
 * a directory and a name (renameat, unlinkat, mkdirat) get the directory
 * resolved that way and a single last component, which they never follow;
 * listings stat entries relative to the directory they read, without
 * following (local.h: what a key through a symlink gives).  A symlink as
 * a key's last component is an object: opened O_PATH | O_NOFOLLOW (the
 * link itself) and read with readlinkat(), made with symlinkat() in
 * TMP_DIR and renamed into place, removed with unlinkat().
 *
 * Listings are local_list.c's; what the two files share is in
 * local_internal.h.
 */
#include "config.h"

#include "backend_impl.h"
#include "dbuf.h"
#include "fdio.h"
#include "local.h"
#include "local_internal.h"
#include "path.h"

#include <dirent.h>
#include <signal.h>
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#ifdef HAVE_LINUX_OPENAT2_H
#include <linux/openat2.h>
#endif
#if defined(HAVE_LINUX_OPENAT2_H) && defined(SYS_openat2)
#define HAVE_OPENAT2 1
#endif

/* ---- keys ---- */

/* Validate `key`; sets *is_dir for a trailing '/'. */
static int check_key(struct local *lb, const char *key, bool *is_dir)
{
	size_t len = strlen(key);
	bool dir = len > 0 && key[len - 1] == '/';
	size_t end = dir ? len - 1 : len;
	size_t start = 0;

	if (len >= PATH_MAX)
		goto bad;
	for (size_t i = 0; i <= end; i++) {
		if (i == end || key[i] == '/') {
			if (!local_segment_ok(key + start, i - start))
				goto bad;
			start = i + 1;
		}
	}
	*is_dir = dir;
	return 0;
bad:
	tfs_warn(lb->log,
		 "local: key '%s' cannot be stored in a directory (empty, '.' or '..' "
		 "segment, or too long)",
		 key);
	return EINVAL;
}

/* ---- resolving paths inside the root ---- */

/* Release a directory descriptor from resolve_dir()/walk_parent(): every
 * one but the root's own. */
static void put_dir(struct local *lb, int fd)
{
	if (fd >= 0 && fd != lb->root_fd)
		close(fd);
}

#ifdef HAVE_OPENAT2
/* openat2() confined to `dirfd`: no symlink followed, no way out.  The fd,
 * or -1 with errno (ELOOP: a symlink; EXDEV: the path leaves dirfd). */
static int open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)flags,
		.mode = (flags & O_CREAT) ? (uint64_t)mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}
#endif

/* The directory `name` in `dfd` as an O_PATH descriptor, made (0755) first
 * when missing and `mkdirs`.  0, or the errno (ELOOP for a symlink). */
static int enter_dir(int dfd, const char *name, bool mkdirs, int *fd_out)
{
	int rc = local_open_last(dfd, name, O_PATH | O_DIRECTORY, 0, fd_out);
	if (rc == ENOENT && mkdirs) {
		if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
			return errno;
		rc = local_open_last(dfd, name, O_PATH | O_DIRECTORY, 0, fd_out);
	}
	return rc;
}

/* The resolver without openat2: walk `path` from the root one component at
 * a time, each directory entered with enter_dir() (made when `mkdirs`).
 * Empty components are skipped.  On success *dfd_out is the directory
 * holding the last component (release with put_dir()) and `last` is that
 * component ("" when the path names the root itself).  Errors: EXDEV for
 * an absolute path or a ".." component, ENAMETOOLONG for a component over
 * NAME_MAX, ELOOP for a symlink, else enter_dir()'s. */
static int walk_parent(struct local *lb, const char *path, bool mkdirs, int *dfd_out,
		       char last[NAME_MAX + 1])
{
	int dfd = lb->root_fd, rc = 0;
	const char *p = path;

	last[0] = '\0';
	if (*p == '/')
		return EXDEV;
	for (;;) {
		while (*p == '/')
			p++;
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if (n == 0)
			break;
		if (n > NAME_MAX) {
			rc = ENAMETOOLONG;
			break;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			rc = EXDEV;
			break;
		}
		if (last[0] != '\0') {
			int nfd;
			rc = enter_dir(dfd, last, mkdirs, &nfd);
			if (rc)
				break;
			put_dir(lb, dfd);
			dfd = nfd;
		}
		memcpy(last, p, n);
		last[n] = '\0';
		p = end;
	}
	if (rc) {
		put_dir(lb, dfd);
		return rc;
	}
	*dfd_out = dfd;
	return 0;
}

/* Open `path` below the root with open_beneath() when this instance
 * resolves with openat2(): 0 and *fd_out (the caller's), or the errno;
 * ENOSYS when it does not (built without it, refused at start-up, or by
 * the kernel now): the caller walks instead. */
static int beneath(struct local *lb, const char *path, int flags, mode_t mode, int *fd_out)
{
#ifdef HAVE_OPENAT2
	if (lb->openat2) {
		int fd = open_beneath(lb->root_fd, path, flags, mode);
		if (fd < 0)
			return errno;
		*fd_out = fd;
		return 0;
	}
#else
	(void)lb, (void)path, (void)flags, (void)mode, (void)fd_out;
#endif
	return ENOSYS;
}

/* Open `path` (relative to the root; "" is the root) with `flags` (and
 * `mode` with O_CREAT), following no symlink and staying in the root: one
 * openat2(), or walk_parent() + local_open_last().  A trailing '/' requires a
 * directory.  0 and *fd_out (the caller's), or the errno: ELOOP for a
 * symlink on the path, EXDEV for a path leaving the root, ENOENT/ENOTDIR
 * for a missing one.  Not logged. */
static int resolve(struct local *lb, const char *path, int flags, mode_t mode, int *fd_out)
{
	flags |= O_CLOEXEC;
	int rc = beneath(lb, path[0] ? path : ".", flags, mode, fd_out);
	if (rc != ENOSYS)
		return rc;
	char last[NAME_MAX + 1];
	int dfd;
	rc = walk_parent(lb, path, false, &dfd, last);
	if (rc)
		return rc;
	size_t len = strlen(path);
	if (len > 0 && path[len - 1] == '/')
		flags |= O_DIRECTORY;
	rc = local_open_last(dfd, last[0] ? last : ".", flags, mode, fd_out);
	put_dir(lb, dfd);
	return rc;
}

int tfs_local_resolve(int root_fd, const char *path, int flags, bool walk, int *fd_out)
{
	struct local lb = { .root = (char *)"", .root_fd = root_fd, .openat2 = !walk };
	return resolve(&lb, path, flags, 0, fd_out);
}

/* The directory `path` (relative to the root, "" for the root) as an
 * O_PATH descriptor, resolved as resolve() does; with `mkdirs`, missing
 * directories on the way are made (0755), never through a symlink.
 * Release with put_dir().  Errors as resolve(). */
static int resolve_dir(struct local *lb, const char *path, bool mkdirs, int *fd_out)
{
	if (path[0] == '\0') {
		*fd_out = lb->root_fd;
		return 0;
	}
	int rc = beneath(lb, path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, fd_out);
	if (rc != ENOSYS && !(rc == ENOENT && mkdirs))
		return rc;
	char last[NAME_MAX + 1];
	int dfd;
	rc = walk_parent(lb, path, mkdirs, &dfd, last);
	if (rc)
		return rc;
	if (last[0] == '\0') {
		*fd_out = dfd;
		return 0;
	}
	rc = enter_dir(dfd, last, mkdirs, fd_out);
	put_dir(lb, dfd);
	return rc;
}

/* The directory holding `key`'s last component (resolve_dir(), made when
 * `mkdirs`) and that component, a pointer into `key`.  `key` has no
 * trailing '/'. */
static int resolve_parent(struct local *lb, const char *key, bool mkdirs, int *dfd_out,
			  const char **name_out)
{
	char dir[PATH_MAX];
	int rc = tfs_path_split(key, dir, sizeof(dir), name_out);

	return rc ? rc : resolve_dir(lb, dir, mkdirs, dfd_out);
}

/* ELOOP or EXDEV from a resolver: the key's path holds a symlink, or
 * leaves the root. */
static bool refused(int e)
{
	return e == ELOOP || e == EXDEV;
}

/* Log a refused resolution of `key` (`what`: "read", "write", ...) and
 * return the backend's errno: `loop_rc` for a symlink, EACCES for a path
 * leaving the root. */
static int log_refused(struct local *lb, const char *what, const char *key, int e, int loop_rc)
{
	if (e == ELOOP) {
		tfs_warn(lb->log, "local: %s '%s': a symlink on its path under %s is not followed",
			 what, local_esc(key).s, lb->root);
		return loop_rc;
	}
	tfs_warn(lb->log, "local: %s '%s': the path leaves %s: refused", what, local_esc(key).s,
		 lb->root);
	return EACCES;
}

/* ---- symlinks ----
 *
 * A symlink is an object as s3fs stores one: its body is the target, its
 * user metadata "mode" the decimal st_mode with S_IFLNK.  Its ETag adds a
 * hash of the target to the size, ctime and inode (the mtime of a link is
 * set from metadata, so it alone does not tell two versions apart). */

#define LINK_MODE (S_IFLNK | 0777)

/* The metadata value `name` as an unsigned decimal number (the whole
 * string) no larger than `max`.  False when absent or malformed. */
static bool meta_ulong(const struct tfs_obj_meta *m, const char *name, unsigned long max,
		       unsigned long *out)
{
	const char *v = m ? tfs_obj_meta_get(m, name) : NULL;
	if (v == NULL || *v < '0' || *v > '9')
		return false;
	char *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno != 0 || *end != '\0' || x > max)
		return false;
	*out = x;
	return true;
}

/* The kind of object `m` (may be NULL) asks for: 0 when it has no "mode",
 * 1 when its "mode" has S_IFLNK, -1 for any other (or a malformed) mode. */
static int meta_link(const struct tfs_obj_meta *m)
{
	unsigned long mode;
	if (m == NULL || tfs_obj_meta_get(m, "mode") == NULL)
		return 0;
	return meta_ulong(m, "mode", UINT32_MAX, &mode) && (mode & S_IFMT) == S_IFLNK ? 1 : -1;
}

/* The metadata value `name` as decimal seconds since the epoch, with an
 * optional fraction ("1700000000", "1700000000.25"; digits past the 9th
 * are dropped).  False when absent or malformed. */
static bool meta_time(const struct tfs_obj_meta *m, const char *name, struct timespec *ts)
{
	const char *v = m ? tfs_obj_meta_get(m, name) : NULL;
	if (v == NULL || *v < '0' || *v > '9')
		return false;
	char *end;
	errno = 0;
	long long sec = strtoll(v, &end, 10);
	if (errno != 0 || (time_t)sec != sec)
		return false;
	long ns = 0, scale = 100000000;
	if (*end == '.') {
		for (end++; *end >= '0' && *end <= '9'; end++) {
			ns += (*end - '0') * scale;
			scale /= 10;
		}
	}
	if (*end != '\0')
		return false;
	ts->tv_sec = (time_t)sec;
	ts->tv_nsec = ns;
	return true;
}

/* A symlink's body checked and made a C string in target[]: 1 to
 * PATH_MAX - 1 bytes, no NUL.  0, EINVAL (logged), or the errno of
 * reading a descriptor source. */
static int link_body(struct local *lb, const char *key, struct tfs_io src, uint64_t len,
		     char target[PATH_MAX])
{
	if (len == 0 || len >= PATH_MAX) {
		tfs_warn(lb->log, "local: symlink '%s': a target of %" PRIu64 " bytes (1 to %d)",
			 local_esc(key).s, len, PATH_MAX - 1);
		return EINVAL;
	}
	if (src.kind == TFS_IO_BUF) {
		memcpy(target, src.cbuf, len);
	} else if (src.kind == TFS_IO_FD) {
		ssize_t r = pread(src.fd, target, len, src.off);
		if (r < 0 || (uint64_t)r != len) {
			int e = r < 0 ? errno : EIO;
			tfs_err(lb->log, "local: symlink '%s': reading its target: %s",
				local_esc(key).s, strerror(e));
			return EIO;
		}
	} else {
		return EINVAL;
	}
	target[len] = '\0';
	if (memchr(target, '\0', len) != NULL) {
		tfs_warn(lb->log, "local: symlink '%s': its target holds a NUL byte",
			 local_esc(key).s);
		return EINVAL;
	}
	return 0;
}

static int load_meta(struct local *lb, int fd, const char *key, struct tfs_obj_meta *out)
{
	char names[4096];
	ssize_t n = flistxattr(fd, names, sizeof(names));
	if (n < 0)
		return (errno == ENOTSUP || errno == ERANGE) ? 0 : 0;
	for (char *p = names; p < names + n; p += strlen(p) + 1) {
		if (strncmp(p, XATTR_PREFIX, sizeof(XATTR_PREFIX) - 1) != 0)
			continue;
		char val[2048];
		ssize_t vn = fgetxattr(fd, p, val, sizeof(val) - 1);
		if (vn < 0)
			continue;
		val[vn] = '\0';
		int rc = tfs_obj_meta_set(out, p + sizeof(XATTR_PREFIX) - 1, val);
		if (rc == ENOMEM)
			return rc;
		if (rc)
			tfs_debug(lb->log, "local: ignoring odd metadata name on '%s'", key);
	}
	return 0;
}

static int store_meta(struct local *lb, int fd, const char *key, const struct tfs_obj_meta *meta)
{
	if (meta == NULL)
		return 0;
	for (size_t i = 0; i < meta->n_user; i++) {
		char name[512];
		snprintf(name, sizeof(name), XATTR_PREFIX "%s", meta->user[i].name);
		const char *v = meta->user[i].value;
		if (fsetxattr(fd, name, v, strlen(v), 0) < 0) {
			int e = errno;
			tfs_err(lb->log, "local: cannot store metadata '%s' on '%s': %s",
				meta->user[i].name, key, strerror(e));
			return e;
		}
	}
	return 0;
}

/* Open the object `key`: a regular file (read-only), a directory marker,
 * or a symlink as the last component (an O_PATH | O_NOFOLLOW descriptor
 * of the link itself, never followed).  0 with *fd_out and *st, or the
 * backend errno, logged: ENOENT for a missing key or one through a
 * symlink. */
static int open_obj(struct local *lb, const char *key, int *fd_out, struct stat *st)
{
	bool dir;
	int rc = check_key(lb, key, &dir);
	if (rc)
		return rc;
	/* O_NONBLOCK: a FIFO under the root must not hold the thread; it is
	 * no object (below) and regular files ignore the flag. */
	int fd, tries = 0;
	bool path_fd;
again:
	path_fd = false;
	rc = resolve(lb, key, O_RDONLY | O_NONBLOCK, 0, &fd);
	if (rc == ELOOP && !dir) {
		/* The last component may be the symlink: open it itself.  A
		 * symlink before it still fails with ELOOP. */
		rc = resolve(lb, key, O_PATH | O_NOFOLLOW, 0, &fd);
		path_fd = true;
	}
	if (rc) {
		if (refused(rc))
			return log_refused(lb, "read", key, rc, ENOENT);
		if (rc == ENOENT || rc == ENOTDIR)
			return ENOENT;
		tfs_err(lb->log, "local: open '%s': %s", local_esc(key).s, strerror(rc));
		return rc == EACCES || rc == EPERM ? EACCES : EIO;
	}
	if (fstat(fd, st) < 0) {
		int e = errno;
		close(fd);
		tfs_err(lb->log, "local: stat '%s': %s", local_esc(key).s, strerror(e));
		return EIO;
	}
	/* A file renamed over the symlink between the two opens: again. */
	if (path_fd && S_ISREG(st->st_mode) && ++tries < 3) {
		close(fd);
		goto again;
	}
	/* "a" naming a directory is not an object; "a/" naming a file neither. */
	if (S_ISDIR(st->st_mode) != dir ||
	    (!dir && !(path_fd ? S_ISLNK(st->st_mode) : S_ISREG(st->st_mode)))) {
		close(fd);
		return ENOENT;
	}
	*fd_out = fd;
	return 0;
}

/* ---- head ---- */

/* Set user metadata `name` to the decimal `v`.  0 or ENOMEM. */
static int meta_set_num(struct tfs_obj_meta *m, const char *name, long long v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%lld", v);
	return tfs_obj_meta_set(m, name, buf) == ENOMEM ? ENOMEM : 0;
}

/* A time as s3fs writes it: "sec", or "sec.nnnnnnnnn".  0 or ENOMEM. */
static int meta_set_time(struct tfs_obj_meta *m, const char *name, const struct timespec *ts)
{
	char buf[48];
	if (ts->tv_nsec > 0 && ts->tv_nsec < 1000000000)
		snprintf(buf, sizeof(buf), "%lld.%09ld", (long long)ts->tv_sec, ts->tv_nsec);
	else
		snprintf(buf, sizeof(buf), "%lld", (long long)ts->tv_sec);
	return tfs_obj_meta_set(m, name, buf) == ENOMEM ? ENOMEM : 0;
}

/* HEAD of the symlink open as `fd` (O_PATH): its target's length and the
 * metadata s3fs gives a symlink, from lstat. */
static int link_head(struct local *lb, int fd, const char *key, const struct stat *st,
		     struct tfs_obj_meta *out)
{
	char target[PATH_MAX];
	size_t n = 0;
	int rc = local_read_link(fd, "", target, &n);
	if (rc) {
		tfs_err(lb->log, "local: readlink '%s': %s", local_esc(key).s, strerror(rc));
		return EIO;
	}
	out->size = n;
	out->mtime = st->st_mtim.tv_sec;
	local_make_link_etag(st, target, n, out->etag);
	rc = meta_set_num(out, "mode", LINK_MODE);
	if (rc == 0)
		rc = meta_set_num(out, "uid", st->st_uid);
	if (rc == 0)
		rc = meta_set_num(out, "gid", st->st_gid);
	if (rc == 0)
		rc = meta_set_time(out, "mtime", &st->st_mtim);
	if (rc == 0)
		rc = meta_set_time(out, "atime", &st->st_atim);
	return rc;
}

static int local_head(void *priv, const char *key, struct tfs_obj_meta *out)
{
	struct local *lb = priv;
	struct stat st;
	int fd;
	int rc = open_obj(lb, key, &fd, &st);
	if (rc)
		return rc;
	if (S_ISLNK(st.st_mode)) {
		rc = link_head(lb, fd, key, &st, out);
		close(fd);
		if (rc)
			tfs_obj_meta_clear(out);
		return rc;
	}
	out->size = S_ISDIR(st.st_mode) ? 0 : (uint64_t)st.st_size;
	out->mtime = st.st_mtim.tv_sec;
	local_make_etag(&st, out->etag);
	if (S_ISDIR(st.st_mode)) {
		/* A marker's metadata is on its marker file (none: none). */
		int mfd = openat(fd, MARKER_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (mfd >= 0) {
			rc = load_meta(lb, mfd, key, out);
			close(mfd);
		}
	} else {
		rc = load_meta(lb, fd, key, out);
	}
	close(fd);
	if (rc)
		tfs_obj_meta_clear(out);
	return rc;
}

/* ---- get ---- */

/* Copy up to len bytes at `off` of `fd` into dst; *got is what was copied. */
static int read_into(int fd, uint64_t off, uint64_t len, struct tfs_io dst, size_t *got)
{
	char *bounce = NULL;
	size_t done = 0;
	int rc = 0;

	if (dst.kind != TFS_IO_BUF) {
		bounce = malloc(COPY_CHUNK);
		if (bounce == NULL)
			return ENOMEM;
	}
	while (done < len) {
		size_t want = len - done;
		char *to;
		if (dst.kind == TFS_IO_BUF) {
			to = (char *)dst.buf + done;
		} else {
			to = bounce;
			if (want > COPY_CHUNK)
				want = COPY_CHUNK;
		}
		ssize_t n = pread(fd, to, want, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = errno;
			break;
		}
		if (n == 0)
			break;
		if (dst.kind == TFS_IO_FD) {
			rc = tfs_pwrite_all(dst.fd, bounce, (size_t)n, dst.off + (off_t)done);
			if (rc)
				break;
		} else if (dst.kind == TFS_IO_IOV) {
			tfs_io_iov_copy(&dst, done, bounce, (size_t)n);
		}
		done += (size_t)n;
	}
	free(bounce);
	*got = done;
	return rc;
}

/* GET of the symlink open as `fd` (O_PATH): bytes of its target.  A
 * link's target never changes, so there is no torn read to check for. */
static int link_get(struct local *lb, int fd, const struct stat *st, const char *key, uint64_t off,
		    uint64_t len, const char *if_match, struct tfs_io dst, size_t *got,
		    char etag_out[TFS_ETAG_MAX])
{
	char target[PATH_MAX];
	size_t n = 0;
	int rc = local_read_link(fd, "", target, &n);
	if (rc) {
		tfs_err(lb->log, "local: readlink '%s': %s", local_esc(key).s, strerror(rc));
		return EIO;
	}
	local_make_link_etag(st, target, n, etag_out);
	if (if_match && *if_match && strcmp(if_match, etag_out) != 0) {
		tfs_info(lb->log, "local: '%s' changed (ETag %s, expected %s)", local_esc(key).s,
			 etag_out, if_match);
		return ESTALE;
	}
	size_t k = off >= n ? 0 : (n - off < len ? n - (size_t)off : (size_t)len);
	const char *from = target + (off < n ? off : n);
	if (dst.kind == TFS_IO_BUF) {
		memcpy(dst.buf, from, k);
	} else if (dst.kind == TFS_IO_FD) {
		rc = tfs_pwrite_all(dst.fd, from, k, dst.off);
		if (rc) {
			tfs_err(lb->log, "local: read '%s': %s", local_esc(key).s, strerror(rc));
			return EIO;
		}
	} else {
		tfs_io_iov_copy(&dst, 0, from, k);
		tfs_io_iov_filled(&dst, k);
	}
	*got = k;
	return 0;
}

static int local_get_range(void *priv, const char *key, uint64_t off, uint64_t len,
			   const char *if_match, struct tfs_io dst, size_t *got,
			   char etag_out[TFS_ETAG_MAX])
{
	struct local *lb = priv;
	struct stat st, st2;
	int fd, rc;

	rc = open_obj(lb, key, &fd, &st);
	if (rc)
		return rc;
	if (S_ISLNK(st.st_mode)) {
		*got = 0;
		rc = link_get(lb, fd, &st, key, off, len, if_match, dst, got, etag_out);
		close(fd);
		return rc;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		*got = 0;
		local_make_etag(&st, etag_out);
		return 0;
	}
	local_make_etag(&st, etag_out);
	if (if_match && *if_match && strcmp(if_match, etag_out) != 0) {
		close(fd);
		tfs_info(lb->log, "local: '%s' changed (ETag %s, expected %s)", key, etag_out,
			 if_match);
		return ESTALE;
	}
	uint64_t size = (uint64_t)st.st_size;
	uint64_t n = off >= size ? 0 : (size - off < len ? size - off : len);
	rc = read_into(fd, off, n, dst, got);
	if (rc == 0 && fstat(fd, &st2) == 0) {
		char etag2[TFS_ETAG_MAX];
		local_make_etag(&st2, etag2);
		if (strcmp(etag2, etag_out) != 0 || *got != n) {
			/* Rewritten in place while we read: the bytes may be torn. */
			tfs_warn(lb->log, "local: '%s' changed during the read", key);
			rc = ESTALE;
		}
	}
	/* Only now are the bytes known to be of one version. */
	if (rc == 0 && dst.kind == TFS_IO_IOV)
		tfs_io_iov_filled(&dst, *got);
	close(fd);
	if (rc && rc != ESTALE) {
		tfs_err(lb->log, "local: read '%s': %s", key, strerror(rc));
		rc = EIO;
	}
	return rc;
}

/* ---- put / copy ---- */

/* The directory of `key`'s last component (made when missing, as
 * resolve_parent()) and TMP_DIR, both for put_dir().  0 or the errno. */
static int open_dirs(struct local *lb, const char *key, int *pfd, const char **name, int *tfd)
{
	int rc = resolve_parent(lb, key, true, pfd, name);
	if (rc)
		return rc;
	if (mkdirat(lb->root_fd, TMP_DIR, 0700) < 0 && errno != EEXIST)
		return errno;
	return local_open_last(lb->root_fd, TMP_DIR, O_PATH | O_DIRECTORY, 0, tfd);
}

/* A new name in TMP_DIR ("<pid>-<random>", which sweep_tmp() knows). */
static void tmp_name(char tmp[64], int attempt)
{
	unsigned r = (unsigned)random() ^ (unsigned)getpid() ^ ((unsigned)attempt << 20);
	snprintf(tmp, 64, "%u-%08x", (unsigned)getpid(), r);
}

/* Make a new entry in TMP_DIR (`tfd`) under a fresh name, written to
 * `tmp`: make(ctx, tfd, tmp) creates it and returns 0 or an errno; on
 * EEXIST another name is tried, 100 names at most.  Returns make's last
 * result. */
typedef int (*make_fn)(void *ctx, int tfd, const char *tmp);

static int make_tmp(int tfd, char tmp[64], make_fn make, void *ctx)
{
	int rc = EEXIST;
	for (int attempt = 0; attempt < 100 && rc == EEXIST; attempt++) {
		tmp_name(tmp, attempt);
		rc = make(ctx, tfd, tmp);
	}
	return rc;
}

/* Begin replacing `key`: its directory and TMP_DIR (open_dirs(): *pfd,
 * *name, *tfd, each for put_dir() whatever happens) and a new entry in
 * TMP_DIR made by make(ctx, ...) under the name written to `tmp`
 * (make_tmp()).  0 or the errno. */
static int begin_replace(struct local *lb, const char *key, make_fn make, void *ctx, int *pfd,
			 const char **name, int *tfd, char tmp[64])
{
	int rc = open_dirs(lb, key, pfd, name, tfd);
	return rc ? rc : make_tmp(*tfd, tmp, make, ctx);
}

static int make_file(void *ctx, int tfd, const char *tmp)
{
	int *fd = ctx;
	*fd = openat(tfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	return *fd < 0 ? errno : 0;
}

static int make_link(void *ctx, int tfd, const char *tmp)
{
	return symlinkat(ctx, tfd, tmp) < 0 ? errno : 0;
}

/* The backend errno of a failed write of `key`, logged. */
static int write_failed(struct local *lb, const char *key, int rc)
{
	if (refused(rc))
		return log_refused(lb, "write", key, rc, EACCES);
	tfs_err(lb->log, "local: write '%s' in %s: %s", local_esc(key).s, lb->root, strerror(rc));
	if (rc == ENOSPC || rc == EDQUOT || rc == ENOTSUP || rc == EISDIR || rc == ENOTDIR ||
	    rc == ENAMETOOLONG || rc == ENOMEM)
		return rc;
	return rc == EACCES || rc == EPERM ? EACCES : EIO;
}

/* Write a temporary file in TMP_DIR, filled by `fill`, then rename it to
 * `key`.  The key's parent directories are made (resolve_parent()), and the
 * rename acts on that directory and the last component, so nothing is
 * written through a symlink; a symlink at the key itself is replaced, as
 * any object there. */
typedef int (*fill_fn)(void *ctx, int fd);

static int replace_file(struct local *lb, const char *key, fill_fn fill, void *ctx,
			const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	char tmp[64];
	const char *name;
	struct stat st;
	int rc, fd = -1, pfd = -1, tfd = -1;

	rc = begin_replace(lb, key, make_file, &fd, &pfd, &name, &tfd, tmp);
	if (rc)
		goto fail_nofile;
	rc = fill(ctx, fd);
	if (rc == 0)
		rc = store_meta(lb, fd, key, meta);
	if (rc == 0 && fsync(fd) < 0)
		rc = errno;
	if (rc == 0 && renameat(tfd, tmp, pfd, name) < 0)
		rc = errno;
	if (rc == 0) {
		if (fstat(fd, &st) == 0)
			local_make_etag(&st, etag_out);
		close(fd);
		put_dir(lb, tfd);
		put_dir(lb, pfd);
		return 0;
	}
	close(fd);
	unlinkat(tfd, tmp, 0);
fail_nofile:
	put_dir(lb, tfd);
	put_dir(lb, pfd);
	return write_failed(lb, key, rc);
}

/* Give the symlink `tmp` in `tfd` the owner and times of *keep, or else
 * meta's "uid", "gid", "mtime" and "atime" (those present and valid),
 * never following it.  A failure is logged (at debug level for EPERM, a
 * daemon that is not root giving a file away) and not returned: the link
 * itself is what counts. */
static void link_attrs(struct local *lb, int tfd, const char *tmp, const char *key,
		       const struct tfs_obj_meta *meta, const struct stat *keep)
{
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
	unsigned long v;

	if (keep != NULL) {
		uid = keep->st_uid;
		gid = keep->st_gid;
		ts[0] = keep->st_atim;
		ts[1] = keep->st_mtim;
	} else {
		if (meta_ulong(meta, "uid", UINT32_MAX - 1, &v))
			uid = (uid_t)v;
		if (meta_ulong(meta, "gid", UINT32_MAX - 1, &v))
			gid = (gid_t)v;
		(void)meta_time(meta, "atime", &ts[0]);
		(void)meta_time(meta, "mtime", &ts[1]);
	}
	if ((uid != (uid_t)-1 || gid != (gid_t)-1) &&
	    fchownat(tfd, tmp, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
		int e = errno;
		if (e == EPERM)
			tfs_debug(lb->log, "local: symlink '%s': owner %ld:%ld not set: %s",
				  local_esc(key).s, (long)(int)uid, (long)(int)gid, strerror(e));
		else
			tfs_warn(lb->log, "local: symlink '%s': owner not set: %s",
				 local_esc(key).s, strerror(e));
	}
	if ((ts[0].tv_nsec != UTIME_OMIT || ts[1].tv_nsec != UTIME_OMIT) &&
	    utimensat(tfd, tmp, ts, AT_SYMLINK_NOFOLLOW) < 0)
		tfs_warn(lb->log, "local: symlink '%s': times not set: %s", local_esc(key).s,
			 strerror(errno));
}

/* Make `key` a symlink to `target` (checked by link_body()), as
 * replace_file() makes a file: made in TMP_DIR under a temporary name,
 * given its owner and times (link_attrs()), renamed into place. */
static int replace_link(struct local *lb, const char *key, const char *target,
			const struct tfs_obj_meta *meta, const struct stat *keep,
			char etag_out[TFS_ETAG_MAX])
{
	char tmp[64];
	const char *name;
	struct stat st;
	int rc, lfd = -1, pfd = -1, tfd = -1;

	rc = begin_replace(lb, key, make_link, (void *)target, &pfd, &name, &tfd, tmp);
	if (rc)
		goto out;
	/* The link itself, to stat it once it is in place. */
	lfd = openat(tfd, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (lfd < 0) {
		rc = errno;
		unlinkat(tfd, tmp, 0);
		goto out;
	}
	link_attrs(lb, tfd, tmp, key, meta, keep);
	if (renameat(tfd, tmp, pfd, name) < 0) {
		rc = errno;
		unlinkat(tfd, tmp, 0);
		goto out;
	}
	if (fstat(lfd, &st) == 0)
		local_make_link_etag(&st, target, strlen(target), etag_out);
out:
	if (lfd >= 0)
		close(lfd);
	put_dir(lb, tfd);
	put_dir(lb, pfd);
	return rc ? write_failed(lb, key, rc) : 0;
}

struct put_ctx {
	struct tfs_io src;
	uint64_t len;
};

static int fill_from_io(void *vctx, int fd)
{
	struct put_ctx *c = vctx;
	if (c->src.kind == TFS_IO_BUF)
		return tfs_pwrite_all(fd, c->src.cbuf, c->len, 0);
	/* From a file descriptor: copy_file_range, then a bounce buffer. */
	uint64_t done = 0;
	while (done < c->len) {
		loff_t in_off = c->src.off + (off_t)done;
		loff_t out_off = (off_t)done;
		ssize_t n = copy_file_range(c->src.fd, &in_off, fd, &out_off, c->len - done, 0);
		if (n < 0 &&
		    (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			return EIO; /* source shorter than promised */
		done += (uint64_t)n;
	}
	if (done == c->len)
		return 0;
	size_t got = 0;
	struct tfs_io dst = tfs_io_fd(fd, (off_t)done);
	int rc = read_into(c->src.fd, (uint64_t)c->src.off + done, c->len - done, dst, &got);
	if (rc == 0 && done + got != c->len)
		rc = EIO;
	return rc;
}

static int local_put(void *priv, const char *key, struct tfs_io src, uint64_t len,
		     const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	struct local *lb = priv;
	bool dir;
	int rc = check_key(lb, key, &dir);
	if (rc)
		return rc;
	if (dir) {
		if (len != 0)
			return EINVAL;
		/* The directory (and its parents), never made through a
		 * symlink, then the marker file in it. */
		int dfd = -1;
		struct stat st;
		rc = resolve_dir(lb, key, true, &dfd);
		if (rc == 0) {
			int mfd = openat(dfd, MARKER_FILE,
					 O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
			if (mfd < 0) {
				rc = errno;
			} else {
				/* The marker object's metadata (s3fs's mode, owner
				 * and times of the directory) lives on the file. */
				rc = store_meta(lb, mfd, key, meta);
				close(mfd);
			}
		}
		if (rc == 0 && fstat(dfd, &st) < 0)
			rc = errno;
		put_dir(lb, dfd);
		if (rc == 0) {
			local_make_etag(&st, etag_out);
			return 0;
		}
		if (refused(rc))
			return log_refused(lb, "mkdir", key, rc, EACCES);
		tfs_err(lb->log, "local: mkdir '%s': %s", local_esc(key).s, strerror(rc));
		return EIO;
	}
	if (meta_link(meta) == 1) {
		char target[PATH_MAX];
		rc = link_body(lb, key, src, len, target);
		return rc ? rc : replace_link(lb, key, target, meta, NULL, etag_out);
	}
	struct put_ctx c = { .src = src, .len = len };
	return replace_file(lb, key, fill_from_io, &c, meta, etag_out);
}

struct copy_ctx {
	struct local *lb;
	int src_fd;
	uint64_t len;
	bool keep_meta;
	const char *src_key;
};

static int fill_from_copy(void *vctx, int fd)
{
	struct copy_ctx *c = vctx;
	struct put_ctx p = { .src = tfs_io_fd(c->src_fd, 0), .len = c->len };
	int rc = fill_from_io(&p, fd);
	if (rc || !c->keep_meta)
		return rc;
	struct tfs_obj_meta m = { 0 };
	rc = load_meta(c->lb, c->src_fd, c->src_key, &m);
	if (rc == 0)
		rc = store_meta(c->lb, fd, c->src_key, &m);
	tfs_obj_meta_clear(&m);
	return rc;
}

/* Copy the object open as `fd` (*st) to the symlink `dst`: the target of
 * a symlink source (owner and times kept with meta NULL), or the bytes of
 * a file source, checked as a put's body. */
static int copy_to_link(struct local *lb, int fd, const struct stat *st, const char *src,
			const char *dst, const struct tfs_obj_meta *meta,
			char etag_out[TFS_ETAG_MAX])
{
	char target[PATH_MAX];
	size_t n = 0;
	if (S_ISLNK(st->st_mode)) {
		int rc = local_read_link(fd, "", target, &n);
		if (rc) {
			tfs_err(lb->log, "local: readlink '%s': %s", local_esc(src).s,
				strerror(rc));
			return EIO;
		}
		return replace_link(lb, dst, target, meta, meta ? NULL : st, etag_out);
	}
	int rc = link_body(lb, dst, tfs_io_fd(fd, 0), (uint64_t)st->st_size, target);
	return rc ? rc : replace_link(lb, dst, target, meta, NULL, etag_out);
}

static int local_copy(void *priv, const char *src, const char *dst, uint64_t size,
		      const struct tfs_obj_meta *meta, char etag_out[TFS_ETAG_MAX])
{
	(void)size; /* a local copy is one file copy, whatever its size */
	struct local *lb = priv;
	struct stat st;
	bool dir;
	int fd;
	int rc = check_key(lb, dst, &dir);
	if (rc)
		return rc;
	rc = open_obj(lb, src, &fd, &st);
	if (rc)
		return rc;
	if (dir || S_ISDIR(st.st_mode)) {
		close(fd);
		return EINVAL;
	}
	/* The copy is a symlink when meta says so, or when the source is one
	 * and meta says no other type; its body is the source's target or
	 * bytes either way. */
	int ml = meta_link(meta);
	if (ml == 1 || (S_ISLNK(st.st_mode) && ml == 0)) {
		rc = copy_to_link(lb, fd, &st, src, dst, meta, etag_out);
		close(fd);
		return rc;
	}
	if (S_ISLNK(st.st_mode)) {
		/* A symlink made a file: the target as its bytes. */
		char target[PATH_MAX];
		size_t n = 0;
		rc = local_read_link(fd, "", target, &n);
		close(fd);
		if (rc) {
			tfs_err(lb->log, "local: readlink '%s': %s", local_esc(src).s,
				strerror(rc));
			return EIO;
		}
		struct put_ctx p = { .src = tfs_io_cbuf(target), .len = n };
		return replace_file(lb, dst, fill_from_io, &p, meta, etag_out);
	}
	struct copy_ctx c = {
		.lb = lb,
		.src_fd = fd,
		.len = (uint64_t)st.st_size,
		.keep_meta = meta == NULL,
		.src_key = src,
	};
	rc = replace_file(lb, dst, fill_from_copy, &c, meta, etag_out);
	close(fd);
	return rc;
}

/* ---- delete ---- */

/* Remove the directories left empty above `key`, deepest first, each by
 * unlinkat() in its resolved parent; stops at the first that stays. */
static void prune_parents(struct local *lb, const char *key)
{
	char path[PATH_MAX];
	size_t len = strlen(key);
	if (len >= sizeof(path))
		return;
	memcpy(path, key, len + 1);
	if (len && path[len - 1] == '/')
		path[--len] = '\0';
	for (;;) {
		char *slash = strrchr(path, '/');
		if (slash == NULL)
			return;
		*slash = '\0';
		const char *name;
		int pfd;
		if (resolve_parent(lb, path, false, &pfd, &name) != 0)
			return;
		int r = unlinkat(pfd, name, AT_REMOVEDIR);
		put_dir(lb, pfd);
		if (r < 0)
			return;
	}
}

/* Unlink `name` in `pfd`: the directory of a marker key (its marker file
 * first; ELOOP for a symlink there, left alone), or a regular file or a
 * symlink (itself, never what it points to).  Anything else counts as
 * missing (ENOENT). */
static int unlink_obj(int pfd, const char *name, bool dir)
{
	if (dir) {
		int dfd;
		int rc = local_open_last(pfd, name, O_PATH | O_DIRECTORY, 0, &dfd);
		if (rc == ELOOP)
			return rc;
		if (rc == 0) {
			(void)unlinkat(dfd, MARKER_FILE, 0);
			close(dfd);
		}
	} else {
		struct stat st;
		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return errno;
		if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
			return ENOENT;
	}
	return unlinkat(pfd, name, dir ? AT_REMOVEDIR : 0) < 0 ? errno : 0;
}

static int local_delete(void *priv, const char *key)
{
	struct local *lb = priv;
	bool dir;
	int rc = check_key(lb, key, &dir);
	if (rc)
		return rc;
	char path[PATH_MAX];
	size_t len = strlen(key); /* < PATH_MAX: check_key() */
	memcpy(path, key, len + 1);
	if (dir)
		path[len - 1] = '\0';
	const char *name;
	int pfd = -1;
	rc = resolve_parent(lb, path, false, &pfd, &name);
	if (rc == 0)
		rc = unlink_obj(pfd, name, dir);
	put_dir(lb, pfd);
	if (refused(rc))
		return log_refused(lb, "delete", key, rc, 0); /* nothing deleted */
	if (rc) {
		if (rc == ENOENT || rc == ENOTDIR || rc == ENOTEMPTY || rc == EEXIST ||
		    rc == EISDIR)
			return 0; /* nothing to delete, or a marker with content */
		tfs_err(lb->log, "local: delete '%s': %s", local_esc(key).s, strerror(rc));
		return rc == EACCES || rc == EPERM ? EACCES : EIO;
	}
	prune_parents(lb, key);
	return 0;
}

static void local_destroy(void *priv)
{
	struct local *lb = priv;
	if (lb == NULL)
		return;
	if (lb->root_fd >= 0)
		close(lb->root_fd);
	free(lb->root);
	free(lb);
}

/* What check_key() refuses, told apart and not logged: a name too long
 * for the file system (a directory "a/" is stored as a/MARKER_FILE), or
 * one it cannot hold as a key. */
static int local_check_key(void *priv, const char *key)
{
	(void)priv;
	size_t len = strlen(key);
	bool dir = len > 0 && key[len - 1] == '/';
	size_t end = dir ? len - 1 : len;

	if ((dir ? len + sizeof(MARKER_FILE) - 1 : len) >= PATH_MAX)
		return ENAMETOOLONG;
	for (size_t i = 0, start = 0; i <= end; i++) {
		if (i < end && key[i] != '/')
			continue;
		if (i - start > NAME_MAX)
			return ENAMETOOLONG;
		if (!local_segment_ok(key + start, i - start))
			return EINVAL;
		start = i + 1;
	}
	return 0;
}

static const struct tfs_backend_ops local_ops = {
	.name = "local",
	.head = local_head,
	.list = local_list,
	.get_range = local_get_range,
	.put = local_put,
	.del = local_delete,
	.copy = local_copy,
	.check_key = local_check_key,
	.destroy = local_destroy,
};

/* Remove temporary files of writes cut short: those of processes that are
 * gone, and any older than TMP_STALE_S (a live writer of another process
 * sharing the directory is left alone). */
static void sweep_tmp(struct local *lb)
{
	int fd = openat(lb->root_fd, TMP_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	time_t now = time(NULL);
	unsigned removed = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		if (de->d_name[0] == '.' ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		/* "<pid>-<random>": a writer that is gone, or an old file. */
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		bool gone = *end == '-' && pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
		if (!gone && now - st.st_mtime < TMP_STALE_S)
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0)
			removed++;
	}
	closedir(d);
	if (removed)
		tfs_info(lb->log,
			 "local: removed %u temporary file(s) of interrupted writes in %s/%s",
			 removed, lb->root, TMP_DIR);
}

/* Can this kernel resolve with openat2()?  Not before Linux 5.6 (ENOSYS),
 * nor under a seccomp filter that refuses it (EPERM): then every path is
 * walked with O_NOFOLLOW instead. */
static bool probe_openat2(struct local *lb)
{
#ifdef HAVE_OPENAT2
	int fd = open_beneath(lb->root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	tfs_info(lb->log,
		 "local: openat2() unavailable (%s): keys are resolved one component at a "
		 "time with O_NOFOLLOW",
		 strerror(errno));
#else
	tfs_info(lb->log, "local: built without openat2(): keys are resolved one component at a "
			  "time "
			  "with O_NOFOLLOW");
#endif
	return false;
}

int tfs_local_create(const struct tfs_local_config *cfg, const struct tfs_log *log,
		     struct tfs_backend **out)
{
	struct local *lb = calloc(1, sizeof(*lb));
	if (lb == NULL)
		return ENOMEM;
	lb->log = log;
	lb->root_fd = -1;
	lb->root = realpath(cfg->root, NULL);
	if (lb->root == NULL) {
		int e = errno;
		tfs_err(log, "local: bucket directory '%s': %s", cfg->root, strerror(e));
		local_destroy(lb);
		return e == ENOMEM ? ENOMEM : (e == ENOTDIR ? ENOTDIR : ENOENT);
	}
	lb->root_fd = open(lb->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lb->root_fd < 0) {
		int e = errno;
		tfs_err(log, "local: bucket directory '%s': %s", lb->root, strerror(e));
		local_destroy(lb);
		return e == ENOTDIR ? ENOTDIR : (e == EACCES ? EACCES : ENOENT);
	}
	lb->openat2 = !cfg->no_openat2 && probe_openat2(lb);
	sweep_tmp(lb);
	int rc = tfs_backend_new(&local_ops, lb, lb->root, out);
	if (rc)
		local_destroy(lb);
	return rc;
}
