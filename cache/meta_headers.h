/* meta_headers.h - what an object's x-amz-meta-* headers say of it: the
 * attributes of a file (its kind, mode, owner, times to the nanosecond,
 * a device's number) and of a directory from its marker object, as s3fs
 * writes them.  For meta.c and meta_list.c only.  Pure functions: no state, no I/O,
 * thread safe.
 */
#ifndef TFS_META_HEADERS_H
#define TFS_META_HEADERS_H

#include "backend.h"
#include "meta.h"

/* *a from a HEAD of an object: a TFS_FT_FILE with the size, ETag and
 * Last-Modified, the permission bits of x-amz-meta-mode (decimal st_mode,
 * type bits included) and its kind (struct tfs_attr's fmt: a symlink only
 * with 1 to PATH_MAX-1 bytes of body, else a regular file), rdev for a
 * device, uid and gid (TFS_META_UNSET when missing or not a number), and
 * x-amz-meta-mtime/atime/ctime ("sec" or "sec.nsec"; mtime falls back to
 * Last-Modified, the others to 0).  a->headers is set.  Cannot fail. */
void tfs_meta_attr_from_head(const struct tfs_obj_meta *om, struct tfs_attr *a);

/* *a for a directory from a HEAD of its marker "dir/": mode, owner and
 * times as tfs_meta_attr_from_head() reads them (mtime 0, the mount's,
 * without x-amz-meta-mtime: a marker's Last-Modified is not the
 * directory's time).  Cannot fail. */
void tfs_meta_attr_from_marker(const struct tfs_obj_meta *om, struct tfs_attr *a);

/* *a for a directory nothing is known of: mode, uid and gid unset. */
void tfs_meta_dir_attr(struct tfs_attr *a);

#endif
