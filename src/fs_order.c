/* fs_order.c - the control file TFS_FOLLOW_FILE (src/follow.h) at the
 * root: its name and attributes, the bytes written to its handles (one
 * budget, prefetch.order_max), and the order they set when committed:
 * the order of the process that opened the handle (src/follow.h).
 *
 * The lowest of the fs*.c files: it calls none of the others.  Its handles
 * are opened by tfs_fs_open_order() (fs_write.c), written by the write
 * handler and committed by the flush handler (fs_write.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fs_internal.h"
#include "manifest.h"

void tfs_fs_set_follow(struct tfs_fs *fs, struct tfs_follow *follow,
		       const struct tfs_manifest_scope *scope)
{
	fs->follow = follow;
	fs->scope = scope;
}

bool tfs_fs_is_order_file(const char *path)
{
	return strcmp(path, TFS_FOLLOW_FILE) == 0;
}

void tfs_fs_order_attr(const struct tfs_fs *fs, struct tfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = TFS_FT_FILE;
	a->mode = 0644;
	a->uid = fs->cfg.uid;
	a->gid = TFS_META_UNSET;
	a->mtime = fs->root_attr.mtime;
}

int tfs_fs_order_add(struct tfs_fs *fs, struct fh *h, const char *buf, size_t size)
{
	uint64_t cur = atomic_load(&fs->order_bytes);
	do {
		if (size > fs->cfg.order_max || cur > fs->cfg.order_max - size) {
			tfs_warn(fs->log,
				 "%s: more than prefetch.order_max (%" PRIu64 " bytes, %" PRIu64
				 " held by open handles); EFBIG",
				 TFS_FOLLOW_FILE, fs->cfg.order_max, cur);
			return EFBIG;
		}
	} while (!atomic_compare_exchange_weak(&fs->order_bytes, &cur, cur + size));
	int rc = tfs_dbuf_add(h->order, buf, size);
	if (rc) {
		atomic_fetch_sub(&fs->order_bytes, (uint64_t)size);
		return rc == ENOMEM ? ENOMEM : EFBIG;
	}
	return 0;
}

int tfs_fs_commit_order(struct tfs_fs *fs, struct fh *h)
{
	size_t len = tfs_dbuf_len(h->order);
	if (!h->order_writer || (h->order_set && len == h->order_done))
		return 0;
	struct tfs_manifest m;
	int rc = tfs_manifest_parse(tfs_dbuf_str(h->order), tfs_dbuf_len(h->order), fs->scope,
				    50u * 1000u * 1000u, &m);
	if (rc)
		return rc;
	if (m.n > 0 && m.n == m.errors) {
		tfs_warn(fs->log, "%s: no valid entry (line %llu: %s); order unchanged",
			 TFS_FOLLOW_FILE, (unsigned long long)m.v[0].line, m.v[0].error);
		tfs_manifest_free(&m);
		return EINVAL;
	}
	rc = tfs_follow_set(fs->follow, &h->order_owner, &m);
	tfs_manifest_free(&m);
	if (rc == 0) {
		h->order_set = true;
		h->order_done = len;
	}
	return rc;
}

void tfs_fs_order_free(struct tfs_fs *fs, struct fh *h)
{
	atomic_fetch_sub(&fs->order_bytes, (uint64_t)tfs_dbuf_len(h->order));
	tfs_dbuf_free(h->order);
	free(h->order);
	h->order = NULL;
}
