/* order_file.c - the control file TFS_FOLLOW_FILE (follow.h) at the
 * root: its name and attributes, the bytes written to its handles (one
 * budget, prefetch.order_max), and the order they set when committed:
 * the order of the process that opened the handle (follow.h).
 *
 * The lowest of the vfs/ files: it calls none of the others.  A close of
 * a handle hands the text to the order builder (follow.h), whose thread
 * calls the adapter back, so no FUSE thread parses or builds an order.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vfs_state.h"

bool tfs_vfs_is_order_file(const char *path)
{
	return strcmp(path, TFS_FOLLOW_FILE) == 0;
}

void tfs_vfs_order_attr(const struct tfs_vfs *v, struct tfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = TFS_FT_FILE;
	a->mode = 0644;
	a->uid = v->cfg.uid;
	a->gid = TFS_META_UNSET;
	a->mtime = v->root_attr.mtime;
}

/* A handle's text grows in steps of this many bytes (realloc: mremap
 * beyond the daemon's malloc mmap threshold, so no copy). */
#define TEXT_STEP 4096u

int tfs_vfs_order_init(struct tfs_vfs *v, struct tfs_vfs_handle *h, uid_t uid, pid_t tid,
		       bool writer)
{
	struct tfs_vfs_order *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return ENOMEM;
	o->uid = uid;
	o->writer = writer;
	if (writer)
		tfs_follow_owner_of(tid, &o->owner);
	o->v = v;
	h->order = o;
	h->kind = TFS_VFS_ORDER;
	return 0;
}

int tfs_vfs_order_add(struct tfs_vfs *v, struct tfs_vfs_handle *h, const char *buf, size_t size)
{
	struct tfs_vfs_order *o = h->order;
	int rc = 0;
	pthread_mutex_lock(&h->lock);
	if (o->busy) {
		rc = EBUSY;
	} else if (size > v->cfg.order_max || o->len > v->cfg.order_max - size) {
		rc = EFBIG;
	} else if (o->len + size > o->cap) {
		size_t cap = (o->len + size + TEXT_STEP - 1) / TEXT_STEP * TEXT_STEP;
		rc = tfs_follow_charge(v->follow, o->uid, cap - o->cap);
		char *nb = rc == 0 ? realloc(o->buf, cap) : NULL;
		if (rc == 0 && nb == NULL) {
			tfs_follow_uncharge(v->follow, o->uid, cap - o->cap);
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
		tfs_warn(v->log,
			 "%s: a write of uid %lu beyond the order memory of prefetch.order_max "
			 "(%" PRIu64 " bytes) or prefetch.order_max_uid; EFBIG",
			 TFS_FOLLOW_FILE, (unsigned long)o->uid, v->cfg.order_max);
	return rc;
}

void *tfs_vfs_order_committed(struct tfs_vfs_handle *h, int rc)
{
	struct tfs_vfs_order *o = h->order;
	pthread_mutex_lock(&h->lock);
	o->busy = false;
	if (rc == 0) {
		o->set = true;
		o->done = o->req.len;
	}
	void *waiter = o->waiter;
	o->waiter = NULL;
	pthread_mutex_unlock(&h->lock);
	return waiter;
}

int tfs_vfs_order_commit(struct tfs_vfs *v, struct tfs_vfs_handle *h, void *waiter,
			 void (*done)(struct tfs_follow_request *r, int rc))
{
	struct tfs_vfs_order *o = h->order;
	pthread_mutex_lock(&h->lock);
	if (!o->writer || o->busy || (o->set && o->len == o->done)) {
		pthread_mutex_unlock(&h->lock);
		return 0;
	}
	o->busy = true;
	o->waiter = waiter;
	o->req = (struct tfs_follow_request){ .owner = o->owner,
					      .uid = o->uid,
					      .scope = v->scope,
					      .text = o->buf ? o->buf : "",
					      .len = o->len,
					      .done = done,
					      .ctx = h };
	pthread_mutex_unlock(&h->lock);
	int rc = tfs_follow_submit(v->follow, &o->req);
	if (rc) {
		pthread_mutex_lock(&h->lock);
		o->busy = false;
		o->waiter = NULL;
		pthread_mutex_unlock(&h->lock);
		return rc;
	}
	return EINPROGRESS;
}

void tfs_vfs_order_free(struct tfs_vfs *v, struct tfs_vfs_handle *h)
{
	if (v->follow) /* NULL at the daemon's end: nothing is counted any more */
		tfs_follow_uncharge(v->follow, h->order->uid, h->order->cap);
	free(h->order->buf);
	free(h->order);
	h->order = NULL;
}
