/* write.c - writes and commits of open files over write-back
 * (cache/writeback.h): a write into a writer's staged copy (or the
 * control file's text), the close that journals it (flush) and the
 * fsync that uploads it first in sync mode.
 *
 * Calls order_file.c (the control file) and vfs.c (inode paths).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "vfs_state.h"

const struct tfs_attr *tfs_vfs_in_bucket(const struct tfs_attr *a)
{
	return a->type == TFS_FT_FILE && a->etag[0] ? a : NULL;
}

int tfs_vfs_stage(struct tfs_vfs *v, const char *path, const struct tfs_attr *a, bool trunc,
		  struct tfs_wb_file **out)
{
	return tfs_wb_open_write(v->wb, path, tfs_vfs_in_bucket(a), trunc, out);
}

int tfs_vfs_truncate(struct tfs_vfs *v, const char *path, const struct tfs_attr *a,
		     struct tfs_vfs_handle *h, uint64_t size)
{
	if (h && h->wf && h->writer)
		return tfs_wb_truncate(v->wb, h->wf, size);
	struct tfs_wb_file *wf;
	int rc = tfs_vfs_stage(v, path, a, size == 0, &wf);
	if (rc)
		return rc;
	if (size != 0 || a->size != 0)
		rc = tfs_wb_truncate(v->wb, wf, size);
	int crc = tfs_wb_release(v->wb, wf, true);
	return rc ? rc : crc;
}

/* A write by anyone but root clears the set-user-ID bit, and the
 * set-group-ID bit of a group-executable file, as the kernel does for
 * local filesystems (it does not for FUSE writes that bypass the page
 * cache).  Cannot fail. */
static void kill_setid(struct tfs_vfs *v, struct tfs_wb_file *wf, uid_t uid)
{
	struct tfs_attr a;
	if (uid == 0)
		return;
	tfs_wb_file_attr(v->wb, wf, &a);
	if (a.mode == TFS_META_UNSET)
		return;
	uint32_t kill = S_ISUID | ((a.mode & S_IXGRP) ? S_ISGID : 0);
	if (!(a.mode & kill))
		return;
	struct tfs_wb_attr na = { .mode = a.mode & ~kill };
	tfs_wb_file_setattr(v->wb, wf, TFS_WB_SET_MODE, &na);
}

int tfs_vfs_write(struct tfs_vfs *v, struct tfs_vfs_handle *h, const char *buf, size_t size,
		  uint64_t off, uid_t uid)
{
	if (h->kind == TFS_VFS_ORDER) /* appended, whatever the offset */
		return tfs_vfs_order_add(v, h, buf, size);
	if (h->wf == NULL || !h->writer)
		return EBADF;
	if (off + size > TFS_VFS_MAX_FILE)
		return EFBIG;
	int rc = tfs_wb_write(v->wb, h->wf, buf, size, off);
	if (rc == 0)
		kill_setid(v, h->wf, uid);
	return rc;
}

int tfs_vfs_flush(struct tfs_vfs *v, struct tfs_vfs_handle *h, void *waiter,
		  void (*done)(struct tfs_follow_request *r, int rc))
{
	int rc = 0;
	if (h->wf && h->writer)
		rc = tfs_wb_commit(v->wb, h->wf, false);
	else if (h->kind == TFS_VFS_ORDER &&
		 (rc = tfs_vfs_order_commit(v, h, waiter, done)) == EINPROGRESS)
		return rc;
	if (rc)
		tfs_err(v->log, "close '%s': %s", h->key, strerror(rc));
	return rc;
}

int tfs_vfs_fsync(struct tfs_vfs *v, struct tfs_vfs_handle *h)
{
	int rc = h->wf ? tfs_wb_commit(v->wb, h->wf, true) : 0;
	if (rc)
		tfs_err(v->log, "fsync '%s': %s", h->key, strerror(rc));
	return rc;
}

int tfs_vfs_commit_node(struct tfs_vfs *v, uint64_t ino, bool durable)
{
	char path[PATH_MAX];
	struct tfs_wb_file *wf = NULL;
	if (v->wb && tfs_vfs_ino_path(v, ino, path, NULL) == 0 &&
	    !tfs_itable_path_is_detached(path))
		wf = tfs_wb_find(v->wb, path);
	if (wf == NULL)
		return 0;
	int rc = tfs_wb_commit(v->wb, wf, durable);
	(void)tfs_wb_release(v->wb, wf, false);
	return rc;
}
