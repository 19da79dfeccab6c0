/* fs_order.c - the control file TFS_FOLLOW_FILE (vfs/follow.h) at the
 * root: its name and attributes, the bytes written to its handles (one
 * budget, prefetch.order_max), and the order they set when committed:
 * the order of the process that opened the handle (vfs/follow.h).
 *
 * The lowest of the fs*.c files: it calls none of the others.  Its handles
 * are opened by tfs_fs_open_order() (fs_write.c), written by the write
 * handler and committed by the flush handler (fs_write.c): the flush
 * hands the text to the order builder (vfs/follow.h), whose thread
 * replies to it (through fs_write.c), so no FUSE thread parses or builds
 * an order.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs_internal.h"

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

/* A handle's text grows in steps of this many bytes (realloc: mremap
 * beyond the daemon's malloc mmap threshold, so no copy). */
#define TEXT_STEP 4096u

int tfs_fs_order_init(struct tfs_fs *fs, struct fh *h, fuse_req_t req, bool writer)
{
	struct fh_order *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return ENOMEM;
	o->uid = fuse_req_ctx(req)->uid;
	o->writer = writer;
	if (writer)
		tfs_follow_owner_of(fuse_req_ctx(req)->pid, &o->owner);
	o->fs = fs;
	h->order = o;
	return 0;
}

int tfs_fs_order_add(struct tfs_fs *fs, struct fh *h, const char *buf, size_t size)
{
	struct fh_order *o = h->order;
	int rc = 0;
	pthread_mutex_lock(&h->lock);
	if (o->busy) {
		rc = EBUSY;
	} else if (size > fs->cfg.order_max || o->len > fs->cfg.order_max - size) {
		rc = EFBIG;
	} else if (o->len + size > o->cap) {
		size_t cap = (o->len + size + TEXT_STEP - 1) / TEXT_STEP * TEXT_STEP;
		rc = tfs_follow_charge(fs->follow, o->uid, cap - o->cap);
		char *nb = rc == 0 ? realloc(o->buf, cap) : NULL;
		if (rc == 0 && nb == NULL) {
			tfs_follow_uncharge(fs->follow, o->uid, cap - o->cap);
			rc = ENOMEM;
		}
		if (nb) {
			o->buf = nb;
			o->cap = cap;
		}
	}
	if (rc == 0 && size) {
		memcpy(o->buf + o->len, buf, size);
		o->len += size;
	}
	pthread_mutex_unlock(&h->lock);
	if (rc == EFBIG)
		tfs_warn(fs->log,
			 "%s: a write of uid %lu beyond the order memory of prefetch.order_max "
			 "(%" PRIu64 " bytes) or prefetch.order_max_uid; EFBIG",
			 TFS_FOLLOW_FILE, (unsigned long)o->uid, fs->cfg.order_max);
	return rc;
}

fuse_req_t tfs_fs_order_committed(struct fh *h, int rc)
{
	struct fh_order *o = h->order;
	pthread_mutex_lock(&h->lock);
	o->busy = false;
	if (rc == 0) {
		o->set = true;
		o->done = o->req.len;
	}
	fuse_req_t req = o->flush;
	o->flush = NULL;
	pthread_mutex_unlock(&h->lock);
	return req;
}

int tfs_fs_commit_order(struct tfs_fs *fs, struct fh *h, fuse_req_t req,
			void (*done)(struct tfs_follow_request *r, int rc))
{
	struct fh_order *o = h->order;
	pthread_mutex_lock(&h->lock);
	if (!o->writer || o->busy || (o->set && o->len == o->done)) {
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	o->busy = true;
	o->flush = req;
	o->req = (struct tfs_follow_request){ .owner = o->owner,
					      .uid = o->uid,
					      .scope = fs->scope,
					      .text = o->buf ? o->buf : "",
					      .len = o->len,
					      .done = done,
					      .ctx = h };
	pthread_mutex_unlock(&h->lock);
	int rc = tfs_follow_submit(fs->follow, &o->req);
	if (rc) {
		pthread_mutex_lock(&h->lock);
		o->busy = false;
		o->flush = NULL;
		pthread_mutex_unlock(&h->lock);
		return rc;
	}
	return EINPROGRESS;
}

void tfs_fs_order_free(struct tfs_fs *fs, struct fh *h)
{
	if (fs->follow) /* NULL at the daemon's end: nothing is counted any more */
		tfs_follow_uncharge(fs->follow, h->order->uid, h->order->cap);
	free(h->order->buf);
	free(h->order);
	h->order = NULL;
}
