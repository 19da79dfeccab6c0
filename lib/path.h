/* path.h - splitting an object path ("a/b/c", no leading '/') into the
 * directory that holds it and its last component.
 */
#ifndef TFS_PATH_H
#define TFS_PATH_H

#include <stddef.h>

/* Split `path` at its last '/': "a/b/c" gives dir "a/b" and *name "c"; a
 * path without '/' gives dir "" and *name path.  *name points into `path`.
 * Returns 0, or ENAMETOOLONG when the directory does not fit in `dlen`
 * bytes (dir is then "", *name still set).  Cannot fail otherwise; no
 * state, thread safe. */
int tfs_path_split(const char *path, char *dir, size_t dlen, const char **name);

#endif
