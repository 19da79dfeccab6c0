/* namespace.c - names: what a name in a directory is, merging the
 * control file, write-back's local entries, the metadata cache and the
 * inode table.  (The namespace changes, create, mkdir, unlink, rename,
 * are still the FUSE adapter's, in src/fs_write.c.)
 *
 * Calls vfs.c (inode paths) and order_file.c (the control file).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>

#include "backend.h"
#include "vfs_state.h"

int tfs_vfs_lookup(struct tfs_vfs *v, uint64_t parent, const char *name, struct tfs_attr *a,
		   struct tfs_inode **out)
{
	struct tfs_inode *p;
	bool changed = false;
	char dir[PATH_MAX], path[PATH_MAX];
	int rc = tfs_vfs_ino_path(v, parent, dir, &p);
	if (rc == 0 && p->type != TFS_FT_DIR)
		rc = ENOTDIR;
	if (rc == 0)
		rc = tfs_meta_join(dir, name, path, sizeof(path));
	/* A key the backend cannot hold names nothing: ENAMETOOLONG, as
	 * create, mkdir, symlink and rename answer for it. */
	if (rc == 0 && v->be && tfs_backend_check_key(v->be, path) == ENAMETOOLONG)
		rc = ENAMETOOLONG;
	if (rc == 0 && v->follow && tfs_vfs_is_order_file(path))
		tfs_vfs_order_attr(v, a);
	else if (rc == 0 && v->wb && tfs_wb_attr(v->wb, path, a))
		a->ino = tfs_meta_ino(v->meta, path);
	else if (rc == 0)
		rc = tfs_meta_lookup(v->meta, dir, name, a, &changed);
	if (rc == 0)
		rc = tfs_itable_lookup(v->itable, path, a->type, a->fmt, out);
	if (rc == 0 && changed) {
		struct tfs_obj obj;
		tfs_obj_init(&obj, path, "", 0);
		tfs_layer_invalidate(v->top, obj.id);
	}
	return rc;
}
