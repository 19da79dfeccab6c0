/* wb_txn.c - journal transactions of write-back: a record written in
 * one LMDB transaction with its metadata-cache change, the record a
 * closed file gives, and how a new record keeps its predecessor's
 * multipart state.  Calls journal.c, the metadata cache and wb_attr.c.
 */
#include "config.h"

#include "writeback_internal.h"

#include <errno.h>
#include <string.h>

/* ---- journal transactions ---- */

/* An LMDB failure of a journal transaction as the layer's callers see
 * it: ENOSPC when the map is full, EIO for anything else.  Narrower than
 * tfs_lmdb_errno() on purpose, which passes a positive errno on (ENOMEM
 * from a begin, a write error from a commit): the write-back API promises
 * its callers (FUSE replies to create, close, fsync, unlink ...) EIO or
 * ENOSPC for a journal failure (writeback.h).  Pure. */
static int journal_errno(int rc)
{
	return rc == MDB_MAP_FULL ? ENOSPC : EIO;
}

int wb_txn_begin(struct tfs_wb *wb, MDB_txn **txn)
{
	int rc = mdb_txn_begin(wb->env, NULL, 0, txn);
	if (rc) {
		tfs_err(wb->log, "writeback: journal: %s", mdb_strerror(rc));
		return journal_errno(rc);
	}
	return 0;
}

int wb_txn_end(struct tfs_wb *wb, MDB_txn *txn, int rc, const char *what, const char *path)
{
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		if (rc) {
			tfs_err(wb->log, "writeback: journal commit (%s '%s'): %s", what, path,
				mdb_strerror(rc));
			return journal_errno(rc);
		}
		return 0;
	}
	mdb_txn_abort(txn);
	tfs_err(wb->log, "writeback: journal (%s '%s'): %s", what, path, strerror(rc));
	return rc;
}

struct tfs_jrec wb_put_rec(const struct tfs_wb_file *f, uint64_t gen, const char *path)
{
	struct tfs_jrec r = {
		.op = TFS_J_PUT,
		.gen = gen,
		.staging_id = f->staging_id,
		.size = f->size,
		.closed_ms = tfs_wall_ms(),
		.path = (char *)path,
	};
	wb_jrec_set_attr(&r, &f->attr);
	return r;
}

/* Write a record for `path`, keeping the multipart state of the previous
 * one so the uploader can resume or abort it.  Lock held. */
int wb_put_record(struct tfs_wb *wb, MDB_txn *txn, struct tfs_jrec *r)
{
	struct tfs_jrec old;
	int rc = tfs_journal_get(txn, &wb->j, r->path, &old);
	if (rc == 0) {
		if (r->gen <= old.gen)
			r->gen = old.gen + 1;
		/* A name removed and made again as the other type before
		 * write-back: the new record must still remove the old key. */
		if (old.op == TFS_J_DELETE &&
		    (r->op == TFS_J_MKDIR || (r->op == TFS_J_PUT && old.is_dir)))
			r->is_dir = 1; /* a DELETE of "key" (and maybe "key/") must still happen */
		else if (old.op == r->op && old.is_dir &&
			 (r->op == TFS_J_PUT || r->op == TFS_J_MKDIR))
			r->is_dir = 1;
		else if (r->op == TFS_J_DELETE && old.op == TFS_J_PUT && old.is_dir)
			r->is_dir = 1; /* the marker the PUT was to remove goes too */
		if (r->mpu.upload_id[0] == '\0' && old.mpu.upload_id[0]) {
			r->mpu = old.mpu;
			r->mpu_gen = old.mpu_gen;
			memset(&old.mpu, 0, sizeof(old.mpu));
		}
		tfs_jrec_clear(&old);
	} else if (rc != ENOENT && rc != EINVAL) {
		return rc;
	}
	return tfs_journal_put(txn, &wb->j, r);
}

int wb_journal(struct tfs_wb *wb, struct tfs_jrec *r, const struct tfs_attr *local,
	       const char *what, uint64_t *gen)
{
	MDB_txn *txn;
	const char *path = r->path;
	int rc = wb_txn_begin(wb, &txn);
	if (rc == 0) {
		rc = wb_put_record(wb, txn, r);
		if (rc == 0)
			rc = local ? tfs_meta_txn_set_local(wb->meta, txn, path, local)
				   : tfs_meta_txn_whiteout(wb->meta, txn, path);
		*gen = r->gen;
		rc = wb_txn_end(wb, txn, rc, what, path);
	}
	r->path = NULL; /* the caller's */
	tfs_jrec_clear(r);
	return rc;
}
