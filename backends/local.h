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
 */
#ifndef TFS_LOCAL_H
#define TFS_LOCAL_H

#include "backend.h"
#include "log.h"

struct tfs_local_config {
	char *root; /* existing directory */
};

/* Create a local backend rooted at cfg->root.  Returns 0, ENOENT or
 * ENOTDIR when the root is not a directory, ENOMEM.  Logged. */
int tfs_local_create(const struct tfs_local_config *cfg, const struct tfs_log *log,
		     struct tfs_backend **out);

#endif
