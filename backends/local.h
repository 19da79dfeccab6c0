/* local.h - the local-directory backend: a directory acts as the bucket.
 *
 * Keys are paths relative to the root directory.  Directories are implied
 * by keys, as on S3; a key ending in '/' is a directory marker and is stored
 * as an empty directory.  User metadata is kept in the extended attributes
 * "user.tierfs.meta.<name>" (xattr support on the backing filesystem is
 * required only when metadata is written).
 *
 * ETag: "<size hex>-<mtime ns hex>-<inode hex>" in quotes.  It changes
 * whenever the file is replaced (new inode) or rewritten (new mtime/size)
 * and is computed from one fstat(), so HEAD and LIST stay cheap on large
 * files.  It is not a content hash: two identical files have different
 * ETags.
 *
 * PUT writes to a temporary file in the same directory and renames it into
 * place, so readers never see a partial object.
 *
 * Symlinks are objects, stored as real symlinks, in the format s3fs uses
 * on S3: the body is the link's target and the user metadata "mode" the
 * decimal st_mode with S_IFLNK ("41471" = S_IFLNK | 0777).  A PUT whose
 * "mode" has S_IFLNK makes a symlink (symlinkat() under a temporary name,
 * renamed into place); its body must be 1 to PATH_MAX - 1 bytes with no
 * NUL, else EINVAL.  A symlink holds no extended attributes, so of its
 * metadata only "uid"/"gid" (fchownat(), not followed; EPERM, a daemon
 * that is not root, is logged at debug level and ignored) and
 * "mtime"/"atime" (utimensat(), not followed; decimal seconds with an
 * optional fraction) are kept.  HEAD of a symlink gives size = the
 * target's length, its lstat mtime, and the metadata mode (S_IFLNK |
 * 0777), uid, gid, mtime and atime (seconds) from lstat; GET gives the
 * target's bytes; LIST lists it; DELETE removes the link.  COPY makes a
 * symlink when the new metadata's "mode" has S_IFLNK, or when the source
 * is a symlink and the metadata has no "mode" (meta NULL: owner and times
 * kept), with the source's target (or bytes) as target; a symlink copied
 * with another file type becomes a file holding its target.  A symlink's
 * ETag is "<length>-<ctime ns>-<inode>-l<FNV-1a 64 of the target>" (hex),
 * so a new target gives a new ETag.  An object whose "mode" is a FIFO,
 * socket or device is a regular file like any other, its mode kept as
 * metadata: nothing is made with mknod().
 *
 * Confinement: no key names anything outside the root, and the daemon
 * follows no symlink found under the root.  Every path is resolved from
 * the root's descriptor with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
 * or, where the kernel lacks openat2 (ENOSYS, or EPERM from a seccomp
 * filter, probed once at create), one component at a time with O_NOFOLLOW.
 * A symlink as a key's last component is the object itself, read with
 * readlinkat() and replaced by a PUT or COPY to its key (rename), never
 * followed.  A key with a symlink before its last component reads as
 * missing (ENOENT: HEAD, GET, the source of a COPY), cannot be written
 * (EACCES: PUT, the destination of a COPY) and is not deleted (0, nothing
 * removed); each is logged with the key.  Listings leave out FIFOs,
 * sockets and devices, with a (rate-limited) warning naming each entry.
 */
#ifndef TFS_LOCAL_H
#define TFS_LOCAL_H

#include "backend.h"
#include "log.h"

struct tfs_local_config {
	char *root; /* existing directory */
	/* Tests only: resolve keys with the O_NOFOLLOW walk, as where the
	 * kernel has no openat2(). */
	bool no_openat2;
};

/* Create a local backend rooted at cfg->root.  Returns 0, ENOENT or
 * ENOTDIR when the root is not a directory, ENOMEM.  Logged. */
int tfs_local_create(const struct tfs_local_config *cfg, const struct tfs_log *log,
		     struct tfs_backend **out);

/* The resolver behind every operation, for tests: open `path` relative to
 * the directory `root_fd` with `flags` (O_CLOEXEC is added), following no
 * symlink and never leaving root_fd; `walk` forces the O_NOFOLLOW walk used
 * where the kernel has no openat2().  No key check (".." and "/" reach the
 * resolver).  0 and *fd_out (the caller's), ELOOP for a symlink on the
 * path, EXDEV for a path leaving the root, else the errno of the open.  Not
 * logged. */
int tfs_local_resolve(int root_fd, const char *path, int flags, bool walk, int *fd_out);

#endif
