/* read.c - the read path of an open file: its staged copy, or the version
 * its handle pins read through the cache stack, with read-ahead
 * (cache/prefetch.h) and moves to a newer version.
 *
 * A read never mixes two versions.  A handle moves to the object's
 * current version at most once per read, in two cases: the read starts
 * at or past the end of the version it knows (a newer one, appended
 * through this mount and written back meanwhile, may be longer: `tail -f`
 * expects it), or the cache stack found the version gone (ESTALE: the
 * object was replaced, by this mount's write-back or in the bucket).
 *
 * Calls handle.c (the staged copy a handle reads) and vfs.c (attributes,
 * inode paths).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ram.h"
#include "vfs_state.h"

/* Point handle `h` at version `a` of the object now at `path` (the old
 * key string stays alive until the handle goes: reads in flight use it).
 * Returns 0 or ENOMEM. */
static int move_version(struct tfs_vfs_handle *h, const char *path, const struct tfs_attr *a)
{
	char *key = strdup(path);
	pthread_mutex_lock(&h->lock);
	char **r = key ? realloc(h->retired_keys, (h->n_retired + 1) * sizeof(*r)) : NULL;
	if (r == NULL) {
		pthread_mutex_unlock(&h->lock);
		free(key);
		return ENOMEM;
	}
	h->retired_keys = r;
	h->retired_keys[h->n_retired++] = h->key;
	h->key = key;
	tfs_obj_init(&h->obj, h->key, a->etag, a->size);
	h->ra.ra_next = 0;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

/* Whether the object at `cur` (NULL: the name is gone) is now a file of
 * another version than `obj`: then handle `h` moves to it (move_version())
 * and its ETag goes to moved[].  Returns true when it moved. */
static bool move_to_current(struct tfs_vfs *v, struct tfs_vfs_handle *h, const char *cur,
			    const struct tfs_obj *obj, char moved[TFS_ETAG_MAX])
{
	struct tfs_attr na;
	if (cur == NULL || tfs_vfs_attr(v, cur, &na) != 0 || na.type != TFS_FT_FILE ||
	    na.etag[0] == '\0' || strcmp(na.etag, obj->etag) == 0 || move_version(h, cur, &na) != 0)
		return false;
	snprintf(moved, TFS_ETAG_MAX, "%s", na.etag);
	return true;
}

/* Read [start, end) of `obj` (end > start, within it) into *out. */
static int read_blocks(struct tfs_vfs *v, const struct tfs_obj *obj, uint64_t start, uint64_t end,
		       struct tfs_vfs_data *out)
{
	uint64_t bs = v->block_size;
	uint64_t first = start / bs, last = (end - 1) / bs;
	struct tfs_ram_block *b;
	if (first == last) {
		/* The common case: one block, replied from its buffer. */
		int rc = tfs_ram_get(v->top, obj, first, TFS_RAM_WAIT, &b);
		if (rc)
			return rc;
		out->buf = (const char *)tfs_ram_block_data(b) + (start - first * bs);
		out->len = (size_t)(end - start);
		out->block = b;
		out->block_done = end == first * bs + tfs_ram_block_len(b);
		return 0;
	}
	/* Spanning blocks: copy, holding one block at a time. */
	char *buf = malloc((size_t)(end - start));
	if (buf == NULL)
		return ENOMEM;
	for (uint64_t i = first; i <= last; i++) {
		int rc = tfs_ram_get(v->top, obj, i, TFS_RAM_WAIT, &b);
		if (rc) {
			free(buf);
			return rc;
		}
		uint64_t bstart = i * bs, bend = bstart + tfs_ram_block_len(b);
		uint64_t from = start > bstart ? start : bstart, to = end < bend ? end : bend;
		memcpy(buf + (from - start), (const char *)tfs_ram_block_data(b) + (from - bstart),
		       (size_t)(to - from));
		tfs_ram_release(v->top, b, to == bend);
	}
	out->buf = out->mem = buf;
	out->len = (size_t)(end - start);
	return 0;
}

/* A dirty file reads its staged copy `wf`: the writer's own bytes at once. */
static int read_staged(struct tfs_vfs *v, struct tfs_vfs_handle *h, struct tfs_wb_file *wf,
		       uint64_t off, size_t size, struct tfs_vfs_data *out)
{
	char *buf = malloc(size ? size : 1);
	size_t got = 0;
	int rc = buf ? tfs_wb_read(wf, buf, size, off, &got) : ENOMEM;
	if (rc) {
		free(buf);
		tfs_err(v->log, "read '%s' (staged copy) at %" PRIu64 ": %s", h->key, off,
			strerror(rc));
		return rc;
	}
	out->buf = out->mem = buf;
	out->len = got;
	return 0;
}

int tfs_vfs_open_read(struct tfs_vfs *v, struct tfs_inode *in, const char *path,
		      struct tfs_vfs_handle **out)
{
	struct tfs_attr a;
	struct tfs_vfs_handle *h = tfs_vfs_handle_new(v, path);
	if (h == NULL)
		return ENOMEM;
	struct tfs_wb_file *wf = v->wb ? tfs_wb_find(v->wb, path) : NULL;
	if (wf) {
		tfs_vfs_handle_stage(h, wf);
	} else {
		int rc = tfs_vfs_attr(v, path, &a);
		if (rc == 0 && (a.type != in->type || a.fmt != in->fmt))
			rc = ESTALE;
		if (rc) {
			tfs_vfs_handle_free(v, h);
			return rc;
		}
		tfs_obj_init(&h->obj, h->key, a.etag, a.size);
	}
	*out = h;
	return 0;
}

int tfs_vfs_read(struct tfs_vfs *v, struct tfs_vfs_handle *h, uint64_t ino, uint64_t off,
		 size_t size, struct tfs_vfs_data *out)
{
	memset(out, 0, sizeof(*out));
	/* The file's path now (it follows renames); NULL once its name is
	 * gone: then the handle reads the staged copy the inode kept, if it
	 * has one, or else keeps the version it has. */
	char cur[PATH_MAX];
	struct tfs_inode *in = NULL;
	const char *curp =
		tfs_vfs_ino_path(v, ino, cur, &in) == 0 && !tfs_itable_path_is_detached(cur) ? cur
											     : NULL;
	out->in = in;
	for (bool retried = false;; retried = true) {
		struct tfs_wb_file *wf = tfs_vfs_handle_staged(v, h, curp);
		struct tfs_attr snap;
		void *kept = NULL;
		if (wf == NULL && curp == NULL && in &&
		    tfs_itable_detached(v->itable, in, &snap, &kept))
			wf = kept; /* unlinked while written through another handle:
				    * its staged copy, borrowed for this request */
		if (wf)
			return read_staged(v, h, wf, off, size, out);
		if (h->kind == TFS_VFS_ORDER)
			return 0;   /* the control file reads as empty */
		struct tfs_obj obj; /* this read's version (a retry may move h->obj on) */
		pthread_mutex_lock(&h->lock);
		obj = h->obj;
		pthread_mutex_unlock(&h->lock);
		/* At or past the end of the version this handle knows: a newer
		 * one may be longer. */
		if (off >= obj.size && size && !retried &&
		    move_to_current(v, h, curp, &obj, out->moved))
			continue;
		if (off >= obj.size || size == 0)
			return 0;
		uint64_t end = off + size < obj.size ? off + size : obj.size;
		pthread_mutex_lock(&h->lock);
		tfs_prefetch_sequential(v->pf, &h->ra, &obj, off, end);
		pthread_mutex_unlock(&h->lock);
		int rc = read_blocks(v, &obj, off, end, out);
		if (rc == 0)
			return 0;
		if (rc == ESTALE && !retried && move_to_current(v, h, curp, &obj, out->moved)) {
			tfs_info(v->log,
				 "read '%s': the object changed while open; reading ETag %s now",
				 curp, out->moved);
			continue;
		}
		if (rc == ESTALE)
			tfs_warn(v->log,
				 "read '%s': the object changed while open (was ETag %s); reopen "
				 "it",
				 obj.key, obj.etag);
		else
			tfs_err(v->log, "read '%s' at %" PRIu64 ": %s", obj.key, off, strerror(rc));
		return rc == ENOENT ? ESTALE : rc;
	}
}

int tfs_vfs_readlink(struct tfs_vfs *v, uint64_t ino, char target[PATH_MAX])
{
	struct tfs_inode *in;
	struct tfs_attr a;
	char path[PATH_MAX];
	size_t got = 0;
	int rc = tfs_vfs_ino_path(v, ino, path, &in);
	if (rc == 0)
		rc = tfs_vfs_attr(v, path, &a);
	if (rc == 0 && (a.type != in->type || a.fmt != in->fmt))
		rc = ESTALE;
	if (rc == 0 && (a.fmt != S_IFLNK || a.size == 0 || a.size >= PATH_MAX))
		rc = EINVAL;
	struct tfs_wb_file *wf = rc == 0 && v->wb ? tfs_wb_find(v->wb, path) : NULL;
	if (wf) {
		rc = tfs_wb_read(wf, target, (size_t)a.size, 0, &got);
		(void)tfs_wb_release(v->wb, wf, false);
	} else if (rc == 0) {
		struct tfs_obj obj;
		struct tfs_ram_block *b;
		tfs_obj_init(&obj, path, a.etag, a.size);
		rc = a.size <= v->block_size ? tfs_ram_get(v->top, &obj, 0, TFS_RAM_WAIT, &b) : EIO;
		if (rc == 0) {
			got = tfs_ram_block_len(b);
			memcpy(target, tfs_ram_block_data(b), got);
			tfs_ram_release(v->top, b, true);
		}
	}
	if (rc == 0 && got != a.size)
		rc = EIO;
	if (rc == 0)
		target[got] = '\0';
	return rc;
}

void tfs_vfs_data_release(struct tfs_vfs *v, struct tfs_vfs_data *d)
{
	if (d->block)
		tfs_ram_release(v->top, d->block, d->block_done);
	free(d->mem);
	memset(d, 0, sizeof(*d));
}
