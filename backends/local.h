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
 * Confinement: no key names anything outside the root, and no symlink
 * found under the root is followed.  Every path is resolved from the
 * root's descriptor with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
 * or, where the kernel lacks openat2 (ENOSYS, or EPERM from a seccomp
 * filter, probed once at create), one component at a time with O_NOFOLLOW.
 * A key whose path holds a symlink reads as missing (ENOENT: HEAD, GET,
 * the source of a COPY), cannot be written (EACCES: PUT, the destination
 * of a COPY) and is not deleted (0, nothing removed); each is logged with
 * the key.  Listings leave out symlinks, FIFOs, sockets and devices, with
 * a (rate-limited) warning naming each entry.
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
