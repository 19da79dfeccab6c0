/* wb_namespace.c - namespace changes through the write-back layer: unlink
 * and rmdir (a DELETE record and a LOCAL whiteout), mkdir (a MKDIR record
 * for the directory marker), the rename of a staged file (its record
 * moves: a PUT of the new name and a DELETE of the old, in one
 * transaction), and the bookkeeping around a rename the caller does in the
 * bucket directly.  Each change is journalled with its metadata-cache
 * change in one LMDB transaction, under wb->lock (writeback_internal.h).
 */
#include "config.h"

#include "writeback_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Detach the dirty file of `e` (unlink, rename over).  Lock held. */
static void detach(struct tfs_wb *wb, struct wb_ent *e)
{
	struct tfs_wb_file *f = e->file;
	tfs_upload_stream_cancel(e->stream); /* its upload is of this name */
	e->stream = NULL;
	if (f == NULL)
		return;
	wb_file_stream_break(f);
	e->file = NULL;
	free(f->path);
	f->path = NULL;
	f->journaled = false;
	if (f->refs == 0)
		wb_free_file(wb, f, true);
}

int tfs_wb_remove(struct tfs_wb *wb, const char *path, bool is_dir)
{
	int rc = ENOMEM;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_get(wb, path);
	if (e) {
		struct tfs_jrec r = {
			.op = TFS_J_DELETE,
			.gen = e->gen + 1,
			.is_dir = is_dir,
			.closed_ms = tfs_wall_ms(),
			.path = (char *)path,
		};
		uint64_t gen;
		rc = wb_journal(wb, &r, NULL, "remove", &gen);
		if (rc == 0) {
			detach(wb, e);
			wb_schedule(wb, e, TFS_J_DELETE, gen, 0);
		}
		wb_ent_maybe_free(wb, e);
	}
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

int tfs_wb_mkdir(struct tfs_wb *wb, const char *path, const struct tfs_wb_attr *a)
{
	int rc = ENOMEM;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_get(wb, path);
	if (e) {
		struct tfs_jrec r = {
			.op = TFS_J_MKDIR,
			.gen = e->gen + 1,
			.closed_ms = tfs_wall_ms(),
			.path = (char *)path,
		};
		struct tfs_attr da = { .type = TFS_FT_DIR, .headers = true };
		wb_jrec_set_attr(&r, a);
		tfs_wb_attr_apply(a, &da);
		da.fmt = 0;
		da.rdev = 0;
		uint64_t gen;
		rc = wb_journal(wb, &r, &da, "mkdir", &gen);
		if (rc == 0)
			wb_schedule(wb, e, TFS_J_MKDIR, gen, 0);
		wb_ent_maybe_free(wb, e);
	}
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

int tfs_wb_rename_dirty(struct tfs_wb *wb, const char *from, const char *to)
{
	MDB_txn *txn;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *src = wb_ent_find(wb, from);
	if (src == NULL || src->file == NULL || !src->file->journaled) {
		pthread_mutex_unlock(&wb->lock);
		return ENOENT;
	}
	struct tfs_wb_file *f = src->file;
	struct wb_ent *dst = wb_ent_get(wb, to);
	char *newpath = strdup(to);
	int rc = dst && newpath ? wb_txn_begin(wb, &txn) : ENOMEM;
	if (rc == 0) {
		struct tfs_jrec put = wb_put_rec(f, dst->gen + 1, to);
		struct tfs_jrec del = {
			.op = TFS_J_DELETE,
			.gen = src->gen + 1,
			.closed_ms = tfs_wall_ms(),
			.path = (char *)from,
		};
		struct tfs_attr a;
		wb_file_tfs_attr(f, &a);
		/* The destination's old multipart state (if any) is aborted by
		 * the uploader; the source's stays with its DELETE record. */
		rc = wb_put_record(wb, txn, &put);
		if (rc == 0)
			rc = wb_put_record(wb, txn, &del);
		if (rc == 0)
			rc = tfs_meta_txn_set_local(wb->meta, txn, to, &a);
		if (rc == 0)
			rc = tfs_meta_txn_whiteout(wb->meta, txn, from);
		uint64_t pgen = put.gen, dgen = del.gen;
		put.path = del.path = NULL;
		tfs_jrec_clear(&put);
		tfs_jrec_clear(&del);
		rc = wb_txn_end(wb, txn, rc, "rename", from);
		if (rc == 0) {
			detach(wb, dst);
			wb_file_stream_break(f); /* its upload is of the old name */
			tfs_upload_stream_cancel(src->stream);
			src->stream = NULL;
			src->file = NULL;
			free(f->path);
			f->path = newpath;
			newpath = NULL;
			f->committed_seq = f->seq;
			dst->file = f;
			wb_schedule(wb, dst, TFS_J_PUT, pgen, f->size);
			wb_schedule(wb, src, TFS_J_DELETE, dgen, 0);
		}
	}
	free(newpath);
	if (dst)
		wb_ent_maybe_free(wb, dst);
	wb_ent_maybe_free(wb, src);
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

int tfs_wb_claim(struct tfs_wb *wb, const char *path, bool *busy)
{
	int rc = 0;
	*busy = false;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e;
	while ((e = wb_ent_find(wb, path)) != NULL && e->running)
		pthread_cond_wait(&wb->done, &wb->lock);
	if (e && e->file && e->file->refs > 0) {
		*busy = true; /* open: its writer's data must not be dropped */
	} else if (e && e->has_job) {
		MDB_txn *txn;
		rc = wb_txn_begin(wb, &txn);
		if (rc == 0) {
			struct tfs_jrec r;
			if (tfs_journal_get(txn, &wb->j, path, &r) == 0 && r.mpu.upload_id[0]) {
				*busy = true; /* let the uploader abort its multipart upload */
				tfs_jrec_clear(&r);
				mdb_txn_abort(txn);
			} else {
				rc = tfs_journal_del(txn, &wb->j, path);
				rc = wb_txn_end(wb, txn, rc, "claim", path);
				if (rc == 0) {
					e->has_job = false;
					detach(wb, e);
					wb_ent_maybe_free(wb, e);
				}
			}
		}
	}
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

int tfs_wb_renamed_clean(struct tfs_wb *wb, const char *from, const char *to,
			 const struct tfs_attr *a)
{
	MDB_txn *txn;
	pthread_mutex_lock(&wb->lock);
	int rc = wb_txn_begin(wb, &txn);
	if (rc == 0) {
		rc = tfs_meta_txn_forget(wb->meta, txn, from);
		if (rc == 0)
			rc = tfs_meta_txn_set_clean(wb->meta, txn, to, a);
		rc = wb_txn_end(wb, txn, rc, "rename", from);
	}
	pthread_mutex_unlock(&wb->lock);
	return rc;
}
