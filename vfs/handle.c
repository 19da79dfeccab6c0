/* handle.c - open files: the tagged handle (vfs_state.h: a clean
 * version, a staged copy or the control file), and the table of the fh
 * values the kernel holds.
 *
 * Calls order_file.c (a control-file handle's buffer is freed with it).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "vfs_state.h"

static size_t fh_bucket(uint64_t id)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 40) & (TFS_VFS_FH_BUCKETS - 1);
}

/* The entry of `id` (fh_lock held). */
static struct tfs_vfs_ent *fh_lookup(struct tfs_vfs *v, uint64_t id)
{
	struct tfs_vfs_ent *e = v->fhs[fh_bucket(id)];
	while (e && e->id != id)
		e = e->next;
	return e;
}

static void fh_link(struct tfs_vfs *v, struct tfs_vfs_ent *e)
{
	size_t b = fh_bucket(e->id);
	e->next = v->fhs[b];
	v->fhs[b] = e;
	v->fh_count++;
}

static void fh_unlink(struct tfs_vfs *v, struct tfs_vfs_ent *e)
{
	struct tfs_vfs_ent **pp = &v->fhs[fh_bucket(e->id)];
	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = e->next;
		v->fh_count--;
	}
}

void tfs_vfs_fh_enter(struct tfs_vfs *v, struct tfs_vfs_ent *e)
{
	pthread_mutex_lock(&v->fh_lock);
	uint64_t id;
	do {
		/* The counter wraps after 2^32 opens: skip values still held
		 * (and 0, which no handle has). */
		id = (uint64_t)v->cfg.generation << 32 | ++v->fh_next;
	} while ((uint32_t)id == 0 || fh_lookup(v, id));
	e->id = id;
	fh_link(v, e);
	pthread_mutex_unlock(&v->fh_lock);
}

struct tfs_vfs_ent *tfs_vfs_fh_rekey(struct tfs_vfs *v, struct tfs_vfs_ent *e, uint64_t id)
{
	pthread_mutex_lock(&v->fh_lock);
	struct tfs_vfs_ent *other = fh_lookup(v, id);
	if (other == NULL) {
		fh_unlink(v, e);
		e->id = id;
		fh_link(v, e);
	}
	pthread_mutex_unlock(&v->fh_lock);
	return other;
}

struct tfs_vfs_ent *tfs_vfs_fh_find(struct tfs_vfs *v, uint64_t id)
{
	pthread_mutex_lock(&v->fh_lock);
	struct tfs_vfs_ent *e = fh_lookup(v, id);
	pthread_mutex_unlock(&v->fh_lock);
	return e;
}

void tfs_vfs_fh_remove(struct tfs_vfs *v, struct tfs_vfs_ent *e)
{
	pthread_mutex_lock(&v->fh_lock);
	fh_unlink(v, e);
	pthread_mutex_unlock(&v->fh_lock);
}

struct tfs_vfs_ent *tfs_vfs_fh_any(struct tfs_vfs *v)
{
	struct tfs_vfs_ent *e = NULL;
	pthread_mutex_lock(&v->fh_lock);
	for (size_t i = 0; e == NULL && v->fh_count && i < TFS_VFS_FH_BUCKETS; i++)
		e = v->fhs[i];
	pthread_mutex_unlock(&v->fh_lock);
	return e;
}

struct tfs_vfs_handle *tfs_vfs_handle_new(struct tfs_vfs *v, const char *key)
{
	struct tfs_vfs_handle *h = calloc(1, sizeof(*h));
	if (h == NULL || (h->key = strdup(key)) == NULL) {
		free(h);
		return NULL;
	}
	pthread_mutex_init(&h->lock, NULL);
	tfs_vfs_fh_enter(v, &h->ent);
	return h;
}

void tfs_vfs_handle_free(struct tfs_vfs *v, struct tfs_vfs_handle *h)
{
	tfs_vfs_fh_remove(v, &h->ent);
	if (h->wf)
		(void)tfs_wb_release(v->wb, h->wf, h->writer);
	if (h->order)
		tfs_vfs_order_free(v, h);
	for (size_t i = 0; i < h->n_retired; i++)
		free(h->retired_keys[i]);
	free(h->retired_keys);
	pthread_mutex_destroy(&h->lock);
	free(h->key);
	free(h);
}

void tfs_vfs_handle_stage(struct tfs_vfs_handle *h, struct tfs_wb_file *wf)
{
	h->wf = wf;
	h->kind = TFS_VFS_STAGED;
}

struct tfs_wb_file *tfs_vfs_handle_staged(struct tfs_vfs *v, struct tfs_vfs_handle *h,
					  const char *cur)
{
	pthread_mutex_lock(&h->lock);
	if (h->kind == TFS_VFS_CLEAN && v->wb && cur) {
		struct tfs_wb_file *wf = tfs_wb_find(v->wb, cur); /* a reference, or NULL */
		if (wf)
			tfs_vfs_handle_stage(h, wf);
	}
	struct tfs_wb_file *wf = h->kind == TFS_VFS_STAGED ? h->wf : NULL;
	pthread_mutex_unlock(&h->lock);
	return wf;
}
