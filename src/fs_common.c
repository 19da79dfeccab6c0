/* fs_common.c - what the FUSE handlers of fs.c and fs_write.c share: the
 * operation counters and error replies, and entry filling.
 *
 * Below the handlers and above the file core (vfs/vfs.h).  Only
 * tfs_fs_reply_err() replies.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs_internal.h"
#include "path.h"

double tfs_fs_timeout(const struct tfs_fs *fs)
{
	uint64_t ttl = atomic_load(&fs->v->ttl_ms);

	return ttl == UINT64_MAX ? FOREVER_S : (double)ttl / 1000.0;
}

void tfs_fs_count(struct tfs_fs *fs, enum fs_op op, int err)
{
	atomic_fetch_add_explicit(&fs->ops[op], 1, memory_order_relaxed);
	if (err)
		atomic_fetch_add_explicit(&fs->errs[op], 1, memory_order_relaxed);
}

void tfs_fs_reply_err(fuse_req_t req, enum fs_op op, int err)
{
	tfs_fs_count(fs_of(req), op, err);
	fuse_reply_err(req, err);
}

void tfs_fs_fill_entry(struct tfs_fs *fs, struct tfs_inode *in, const struct tfs_attr *a,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = in->ino;
	e->generation = 1;
	e->attr_timeout = tfs_fs_timeout(fs);
	e->entry_timeout = tfs_fs_timeout(fs);
	tfs_vfs_fill_stat(fs->v, in->ino, a, &e->attr);
	tfs_itable_set_attr_etag(fs->v->itable, in, a->type == TFS_FT_FILE ? a->etag : "");
}
