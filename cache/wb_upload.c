/* wb_upload.c - the write-back job queue: the uploaders (a pool of
 * writeback.uploaders threads) pick the due job of a path no handle has
 * open for writing, run it against the backend (PUT of the staged file,
 * resumable as a multipart upload, MKDIR marker, DELETE, META copy),
 * retire its record only if its generation is unchanged, and retry
 * failures with exponential backoff.  Also drain, stats and the reload of
 * the pool's size.  The shared state and the locking are in
 * writeback_internal.h.
 */
#include "config.h"

#include "writeback_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backoff.h"
#include "statdef.h"
#include "fdio.h"

struct mpu_ctx {
	struct tfs_wb *wb;
	const char *path;
	uint64_t gen;
};

/* Persist multipart progress in the record, if it is still ours. */
static int save_mpu(void *ctx, const struct tfs_mpu *st, unsigned part)
{
	(void)part;
	struct mpu_ctx *c = ctx;
	struct tfs_wb *wb = c->wb;
	MDB_txn *txn;
	struct tfs_jrec r;
	pthread_mutex_lock(&wb->lock);
	int rc = wb_txn_begin(wb, &txn);
	if (rc == 0) {
		rc = tfs_journal_get(txn, &wb->j, c->path, &r);
		if (rc == 0 && r.gen != c->gen)
			rc = ECANCELED; /* rewritten meanwhile: upload it again */
		if (rc == 0) {
			tfs_mpu_clear(&r.mpu);
			rc = st->nparts ? tfs_mpu_alloc(&r.mpu, st->nparts) : 0;
			if (rc == 0) {
				memcpy(r.mpu.upload_id, st->upload_id, sizeof(r.mpu.upload_id));
				r.mpu.part_size = st->part_size;
				if (st->nparts)
					memcpy(r.mpu.etags, st->etags,
					       (size_t)st->nparts * sizeof(*st->etags));
				r.mpu_gen = c->gen;
				rc = tfs_journal_put(txn, &wb->j, &r);
			}
		}
		tfs_jrec_clear(&r);
		if (rc == ECANCELED || rc == ENOENT) {
			mdb_txn_abort(txn);
			rc = ECANCELED;
		} else {
			rc = wb_txn_end(wb, txn, rc, "multipart progress", c->path);
		}
	}
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

/* Offer the uploaded bytes to the SSD tier as the new version. */
static void adopt(struct tfs_wb *wb, const char *path, int fd, uint64_t size, const char *etag)
{
	struct tfs_obj obj;
	uint64_t bs = wb->top->block_size;
	char *buf = malloc(bs);
	if (buf == NULL)
		return;
	tfs_obj_init(&obj, path, etag, size);
	tfs_layer_invalidate(wb->top, obj.id);
	uint64_t n = tfs_obj_blocks(&obj, bs);
	for (uint64_t i = 0; i < n; i++) {
		size_t len = tfs_obj_block_len(&obj, i, bs);
		if (tfs_pread_full(fd, buf, len, (off_t)(i * bs)) != (ssize_t)len)
			break;
		tfs_layer_put_block(wb->top, &obj, i, buf);
	}
	free(buf);
}

/* Retire record `path` if it still has generation `gen`, applying the
 * namespace change `a` (NULL: forget the entry).  Returns true if retired. */
static bool retire(struct tfs_wb *wb, const char *path, uint64_t gen, const struct tfs_attr *a)
{
	MDB_txn *txn;
	struct tfs_jrec r;
	bool retired = false;
	if (wb_txn_begin(wb, &txn) != 0)
		return false;
	int rc = tfs_journal_get(txn, &wb->j, path, &r);
	if (rc == 0 && r.gen == gen) {
		rc = tfs_journal_del(txn, &wb->j, path);
		if (rc == 0)
			rc = a ? tfs_meta_txn_set_clean(wb->meta, txn, path, a)
			       : tfs_meta_txn_forget(wb->meta, txn, path);
		retired = rc == 0;
	} else if (rc == 0) {
		rc = ECANCELED; /* a newer generation: it runs next */
	}
	tfs_jrec_clear(&r);
	if (retired)
		retired = wb_txn_end(wb, txn, 0, "retire", path) == 0;
	else
		mdb_txn_abort(txn);
	return retired;
}

/* If the file of record `r` was streamed while it was written, and the
 * stream is of this generation, make its upload the record's multipart
 * state, so that only the parts still missing are sent.  A stream of an
 * older generation is cancelled.  Best effort: on any failure the file is
 * uploaded whole. */
static void take_stream(struct tfs_wb *wb, struct wb_ent *e, struct tfs_jrec *r, uint64_t size,
			struct mpu_ctx *mc)
{
	struct tfs_upload_stream *ws = NULL;
	pthread_mutex_lock(&wb->lock);
	if (e && e->stream) {
		if (e->stream_gen == r->gen)
			ws = e->stream;
		else
			tfs_upload_stream_cancel(e->stream);
		e->stream = NULL;
	}
	pthread_mutex_unlock(&wb->lock);
	if (ws == NULL)
		return;
	struct tfs_mpu st;
	if (tfs_upload_stream_finish(ws, size, &st) != 0)
		return;
	if (r->mpu.upload_id[0] &&
	    tfs_backend_abort_upload(wb->be, r->path, r->mpu.upload_id) != 0) {
		/* The record's own upload stays: the stream's is the one to drop. */
		if (tfs_backend_abort_upload(wb->be, r->path, st.upload_id) == 0)
			(void)tfs_upload_stream_forget(wb->streams, r->path, st.upload_id);
		tfs_mpu_clear(&st);
		return;
	}
	tfs_mpu_clear(&r->mpu);
	r->mpu = st;
	r->mpu_gen = r->gen;
	if (save_mpu(mc, &r->mpu, UINT_MAX) == 0) {
		(void)tfs_upload_stream_forget(wb->streams, r->path, r->mpu.upload_id);
	} else {
		/* Rewritten meanwhile, or the journal failed: drop it. */
		if (tfs_backend_abort_upload(wb->be, r->path, r->mpu.upload_id) == 0)
			(void)tfs_upload_stream_forget(wb->streams, r->path, r->mpu.upload_id);
		tfs_mpu_clear(&r->mpu);
	}
}

static int do_put(struct tfs_wb *wb, struct tfs_jrec *r, bool *retired)
{
	int fd = wb_open_staged(wb, r->staging_id, O_RDONLY);
	if (fd < 0) {
		tfs_err(wb->log,
			"writeback: staged copy of '%s' is missing (%s): it cannot be uploaded",
			r->path, strerror(-fd));
		return EIO;
	}
	struct stat st;
	uint64_t seq0 = 0;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_find(wb, r->path);
	struct tfs_wb_file *f = e && e->file && e->file->staging_id == r->staging_id ? e->file
										     : NULL;
	if (f)
		seq0 = f->seq;
	pthread_mutex_unlock(&wb->lock);
	if (fstat(fd, &st) < 0) {
		int rc = errno;
		close(fd);
		return rc;
	}
	uint64_t size = (uint64_t)st.st_size;
	int rc = 0;
	if (r->mpu.upload_id[0] && r->mpu_gen != r->gen) {
		/* An upload of an older version: its parts are no use. */
		tfs_info(wb->log,
			 "writeback: '%s' changed since its multipart upload began: aborting it",
			 r->path);
		if (tfs_backend_abort_upload(wb->be, r->path, r->mpu.upload_id) == 0)
			tfs_mpu_clear(&r->mpu);
	}
	struct mpu_ctx mc = { wb, r->path, r->gen };
	take_stream(wb, e, r, size, &mc);
	struct tfs_obj_meta om = { 0 };
	wb_set_meta_headers(&om, r, false, true);
	char etag[TFS_ETAG_MAX] = "";
	rc = tfs_backend_put_resumable(wb->be, r->path, tfs_io_fd(fd, 0), size, &om, &r->mpu,
				       save_mpu, &mc, etag);
	tfs_obj_meta_clear(&om);
	if (rc == ECANCELED && r->mpu.upload_id[0]) {
		/* The file changed meanwhile (save_mpu refused to record this
		 * upload, so no record names it): abort it, or it is orphaned.
		 * The newer generation is uploaded next. */
		(void)tfs_backend_abort_upload(wb->be, r->path, r->mpu.upload_id);
	} else if (rc == EINVAL && r->mpu.upload_id[0]) {
		/* The server refused the recorded parts: start over next time. */
		tfs_warn(wb->log,
			 "writeback: '%s': the multipart upload cannot be completed; "
			 "aborting it and starting again",
			 r->path);
		if (tfs_backend_abort_upload(wb->be, r->path, r->mpu.upload_id) == 0) {
			struct tfs_mpu none = { 0 };
			(void)save_mpu(&mc, &none, UINT_MAX);
		}
	} else if (rc != 0 && rc != ECANCELED && f) {
		/* A file truncated while it was read fails the upload ("shorter
		 * than promised"): not a failure when it changed meanwhile, as
		 * its next generation is uploaded anyway. */
		pthread_mutex_lock(&wb->lock);
		bool changed = e->file != f || f->seq != seq0;
		pthread_mutex_unlock(&wb->lock);
		if (changed) {
			tfs_debug(wb->log,
				  "writeback: '%s' changed during its upload (%s): uploading "
				  "it again",
				  r->path, strerror(rc));
			rc = ECANCELED;
		}
	}
	if (rc == 0) {
		pthread_mutex_lock(&wb->lock);
		bool same = f == NULL || (e->file == f && f->seq == seq0);
		if (same && e && e->gen == r->gen && e->durable_gen < r->gen)
			e->durable_gen = r->gen; /* in the bucket: what follows is local */
		pthread_mutex_unlock(&wb->lock);
		if (same)
			adopt(wb, r->path, fd, size, etag);
		pthread_mutex_lock(&wb->lock);
		same = f == NULL || (e->file == f && f->seq == seq0);
		pthread_mutex_unlock(&wb->lock);
		struct tfs_attr a = { .type = TFS_FT_FILE, .size = size, .headers = true };
		struct tfs_wb_attr wa = wb_jrec_attr(r);
		tfs_wb_attr_apply(&wa, &a);
		snprintf(a.etag, sizeof(a.etag), "%s", etag);
		if (same)
			*retired = retire(wb, r->path, r->gen, &a);
		if (!same || !*retired) {
			struct tfs_obj obj;
			tfs_obj_init(&obj, r->path, etag, size);
			tfs_layer_invalidate(wb->top, obj.id);
		}
	}
	close(fd);
	return rc == ECANCELED ? 0 : rc;
}

/* Run the job for `path` at generation `gen`.  *retired tells whether the
 * record is gone.  Returns 0 or the backend's error. */
static int run_job(struct tfs_wb *wb, const char *path, uint64_t gen, bool *retired)
{
	MDB_txn *txn;
	struct tfs_jrec r;
	*retired = false;
	int rc = mdb_txn_begin(wb->env, NULL, MDB_RDONLY, &txn);
	if (rc) {
		tfs_err(wb->log, "writeback: '%s': journal: %s", path, mdb_strerror(rc));
		return EIO;
	}
	rc = tfs_journal_get(txn, &wb->j, path, &r);
	mdb_txn_abort(txn);
	if (rc == ENOENT) {
		*retired = true; /* nothing left to do */
		return 0;
	}
	if (rc)
		return rc;
	if (r.gen != gen) {
		tfs_jrec_clear(&r);
		return 0; /* superseded: the newer generation is queued */
	}
	char key[PATH_MAX + 2];
	switch (r.op) {
	case TFS_J_PUT:
		if (r.is_dir) {
			/* The name was a directory: its marker goes first. */
			snprintf(key, sizeof(key), "%s/", r.path);
			rc = tfs_backend_delete(wb->be, key);
			if (rc)
				break;
		}
		rc = do_put(wb, &r, retired);
		if (rc == 0 && *retired) {
			pthread_mutex_lock(&wb->lock);
			wb->uploads++;
			wb->upload_bytes += r.size;
			pthread_mutex_unlock(&wb->lock);
		}
		break;
	case TFS_J_MKDIR: {
		struct tfs_obj_meta om = { 0 };
		if (r.is_dir) {
			/* The name was a file: it goes first. */
			rc = tfs_backend_delete(wb->be, r.path);
			if (rc)
				break;
		}
		wb_set_meta_headers(&om, &r, true, true);
		snprintf(key, sizeof(key), "%s/", r.path);
		rc = tfs_backend_put(wb->be, key, tfs_io_cbuf(""), 0, &om, NULL);
		tfs_obj_meta_clear(&om);
		struct tfs_attr a = { .type = TFS_FT_DIR, .headers = true };
		struct tfs_wb_attr wa = wb_jrec_attr(&r);
		tfs_wb_attr_apply(&wa, &a);
		a.fmt = 0;
		if (rc == 0 && (*retired = retire(wb, r.path, gen, &a))) {
			pthread_mutex_lock(&wb->lock);
			wb->mkdirs++;
			pthread_mutex_unlock(&wb->lock);
		}
		break;
	}
	case TFS_J_DELETE:
		if (r.mpu.upload_id[0])
			(void)tfs_backend_abort_upload(wb->be, r.path, r.mpu.upload_id);
		rc = tfs_backend_delete(wb->be, r.path);
		if (rc == 0 && r.is_dir) {
			snprintf(key, sizeof(key), "%s/", r.path);
			rc = tfs_backend_delete(wb->be, key);
		}
		if (rc == 0 && (*retired = retire(wb, r.path, gen, NULL))) {
			pthread_mutex_lock(&wb->lock);
			wb->deletes++;
			pthread_mutex_unlock(&wb->lock);
		}
		break;
	case TFS_J_OPEN:
		break; /* no job is made for it: an unclosed file uploads nothing */
	case TFS_J_META: {
		struct tfs_obj_meta om = { 0 };
		char etag[TFS_ETAG_MAX] = "";
		wb_set_meta_headers(&om, &r, false, true);
		rc = tfs_backend_copy(wb->be, r.path, r.path, r.size, &om, etag);
		tfs_obj_meta_clear(&om);
		if (rc == ENOENT) {
			/* Gone from the bucket: nothing to change. */
			*retired = retire(wb, r.path, gen, NULL);
			rc = 0;
		} else if (rc == 0) {
			struct tfs_attr a = { .type = TFS_FT_FILE,
					      .size = r.size,
					      .headers = true };
			struct tfs_wb_attr wa = wb_jrec_attr(&r);
			tfs_wb_attr_apply(&wa, &a);
			snprintf(a.etag, sizeof(a.etag), "%s", etag);
			if ((*retired = retire(wb, r.path, gen, &a))) {
				pthread_mutex_lock(&wb->lock);
				wb->metas++;
				pthread_mutex_unlock(&wb->lock);
			}
		}
		break;
	}
	}
	tfs_jrec_clear(&r);
	return rc;
}

/* The next runnable job, or NULL; *wait_ms says how long until one may be. */
static struct wb_ent *pick(struct tfs_wb *wb, uint64_t now, uint64_t *wait_ms)
{
	struct wb_ent *best = NULL;
	uint64_t best_due = UINT64_MAX, soonest = UINT64_MAX;
	for (size_t i = 0; i < NBUCKETS; i++) {
		for (struct wb_ent *e = wb->tab[i]; e; e = e->next) {
			if (!e->has_job || e->running || e->failed)
				continue;
			if (e->op == TFS_J_PUT && e->file && e->file->writers > 0 && !e->force)
				continue; /* still being written: the last close schedules it */
			uint64_t due = e->due_ms > e->next_try_ms ? e->due_ms : e->next_try_ms;
			if (due <= now) {
				if (due < best_due) {
					best = e;
					best_due = due;
				}
			} else if (due < soonest) {
				soonest = due;
			}
		}
	}
	*wait_ms = soonest == UINT64_MAX ? 1000 : soonest - now;
	return best;
}

void *wb_uploader_main(void *arg)
{
	struct tfs_worker *self = arg;
	struct tfs_wb *wb = self->ctx;
	pthread_mutex_lock(&wb->lock);
	while (!wb->stop && !tfs_workers_retire(self)) {
		uint64_t wait_ms;
		struct wb_ent *e = pick(wb, tfs_wall_ms(), &wait_ms);
		if (e == NULL) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			if (wait_ms > 1000)
				wait_ms = 1000;
			ts.tv_sec += (time_t)(wait_ms / 1000);
			ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&wb->work, &wb->lock, &ts);
			continue;
		}
		e->running = true;
		wb_note_upload(wb, e->path);
		uint64_t gen = e->gen;
		char *path = strdup(e->path);
		pthread_mutex_unlock(&wb->lock);
		bool retired = false;
		int rc = path ? run_job(wb, path, gen, &retired) : ENOMEM;
		pthread_mutex_lock(&wb->lock);
		e->running = false;
		e->last_err = rc;
		if (rc == 0) {
			if (retired) {
				if (e->done_gen < gen)
					e->done_gen = gen;
				if (e->gen == gen) {
					e->has_job = false;
					e->force = false;
					if (e->file) {
						e->file->journaled = false;
						if (e->file->refs == 0) {
							struct tfs_wb_file *f = e->file;
							e->file = NULL;
							wb_free_file(wb, f, true);
						}
					}
				}
			} else {
				/* Changed during the upload, or superseded: the
				 * record stays and runs again (at once when a
				 * drain forced it: a drain that began during
				 * the upload waits for it). */
				wb->reuploads++;
				e->due_ms = e->force ? 0 : wb_due_ms(wb, e);
			}
			e->attempts = 0;
		} else {
			e->attempts++;
			wb->failures++;
			e->next_try_ms = tfs_wall_ms() + tfs_backoff_ms(wb->cfg.retry_base_ms,
									wb->cfg.retry_max_ms,
									e->attempts - 1);
			if (wb->cfg.max_retries && e->attempts >= wb->cfg.max_retries) {
				e->failed = true;
				tfs_err(wb->log,
					"writeback: '%s': giving up after %u attempts (%s); "
					"it stays in the journal and is retried at the next mount",
					e->path, e->attempts, strerror(rc));
			} else {
				tfs_warn(wb->log,
					 "writeback: '%s': upload attempt %u failed (%s); "
					 "retrying in %" PRIu64 " ms",
					 e->path, e->attempts, strerror(rc),
					 e->next_try_ms - tfs_wall_ms());
			}
		}
		free(path);
		wb_ent_maybe_free(wb, e);
		pthread_cond_broadcast(&wb->done);
	}
	pthread_mutex_unlock(&wb->lock);
	return NULL;
}

/* What is left: jobs not failed-for-good count too. */
static void pending(struct tfs_wb *wb, uint64_t *files, uint64_t *bytes, uint64_t *failed)
{
	*files = *bytes = 0;
	if (failed)
		*failed = 0;
	for (size_t i = 0; i < NBUCKETS; i++)
		for (struct wb_ent *e = wb->tab[i]; e; e = e->next)
			if (e->has_job) {
				(*files)++;
				*bytes += e->bytes;
				if (failed && e->failed)
					(*failed)++;
			}
}

enum tfs_wb_upload_state tfs_wb_upload_state(struct tfs_wb *wb, const char *path, int *err)
{
	enum tfs_wb_upload_state st = TFS_WB_CLEAN;
	int last = 0;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_find(wb, path);
	if (e) {
		struct tfs_wb_file *f = e->file;
		last = e->attempts ? e->last_err : 0;
		/* Its last committed version in the bucket: the rest of its
		 * job (the cache's copy, retiring the record) is local. */
		bool in_bucket = e->durable_gen == e->gen;
		if (e->has_job && e->failed)
			st = TFS_WB_FAILED;
		else if (((e->has_job || e->running) && !in_bucket) ||
			 (f && (f->writers > 0 || f->seq != f->committed_seq)))
			st = TFS_WB_PENDING;
	}
	pthread_mutex_unlock(&wb->lock);
	if (err)
		*err = st == TFS_WB_CLEAN ? 0 : last;
	return st;
}

int tfs_wb_drain(struct tfs_wb *wb, uint64_t timeout_ms, uint64_t *files, uint64_t *bytes)
{
	uint64_t deadline = tfs_wall_ms() + timeout_ms, f = 0, b = 0, failed = 0;
	pthread_mutex_lock(&wb->lock);
	for (size_t i = 0; i < NBUCKETS; i++)
		for (struct wb_ent *e = wb->tab[i]; e; e = e->next)
			if (e->has_job) {
				e->due_ms = 0;
				e->force = true; /* unmounting: nobody writes any more */
			}
	pthread_cond_broadcast(&wb->work);
	for (;;) {
		pending(wb, &f, &b, &failed);
		uint64_t now = tfs_wall_ms();
		if (f == 0 || f == failed || now >= deadline || tfs_workers_count(&wb->pool) == 0)
			break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t w = deadline - now < 200 ? deadline - now : 200;
		ts.tv_nsec += (long)w * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&wb->done, &wb->lock, &ts);
	}
	pthread_mutex_unlock(&wb->lock);
	if (files)
		*files = f;
	if (bytes)
		*bytes = b;
	return f ? ETIMEDOUT : 0;
}

struct wb_snap {
	uint64_t pending_files, dirty_bytes, failed_files, uploading, open_files, uploads,
		upload_bytes, deletes, mkdirs, attr_updates, attempt_failures, reuploads, recovered,
		streams, streams_finished, streams_cancelled, streamed_parts, staged_bytes,
		staging_capacity_bytes;
	struct json_object *failing;
	const char *mode;
	uint64_t uploaders;
};

#define ROW(f, ...) TFS_STAT(struct wb_snap, f, __VA_ARGS__)
static const struct tfs_statdef wb_rows[] = {
	ROW(pending_files, TFS_GAUGE, "tierfs_writeback_pending_files",
	    "Changes waiting to be uploaded (files)."),
	ROW(dirty_bytes, TFS_GAUGE, "tierfs_writeback_dirty_bytes",
	    "Bytes waiting to be uploaded."),
	ROW(failed_files, TFS_GAUGE, "tierfs_writeback_failed_files",
	    "Changes whose upload gave up (writeback.max_retries); kept in the journal."),
	ROW(uploading, TFS_GAUGE, "tierfs_writeback_uploading", "Uploads in progress."),
	ROW(open_files, TFS_GAUGE, "tierfs_writeback_open_files", "Dirty files open for writing."),
	ROW(uploads, TFS_COUNTER, "tierfs_writeback_uploads_total", "Files uploaded."),
	ROW(upload_bytes, TFS_COUNTER, "tierfs_writeback_upload_bytes_total", "Bytes uploaded."),
	ROW(deletes, TFS_COUNTER, "tierfs_writeback_deletes_total", "Deletes done in the bucket."),
	ROW(mkdirs, TFS_COUNTER, "tierfs_writeback_mkdirs_total",
	    "Directory markers created in the bucket."),
	ROW(attr_updates, TFS_COUNTER, "tierfs_writeback_attr_updates_total",
	    "Attribute changes (chmod, utimens) done in the bucket."),
	ROW(attempt_failures, TFS_COUNTER, "tierfs_writeback_attempt_failures_total",
	    "Upload attempts that failed."),
	ROW(reuploads, TFS_COUNTER, "tierfs_writeback_reuploads_total",
	    "Uploads repeated because the file changed meanwhile."),
	ROW(recovered, TFS_COUNTER, "tierfs_writeback_recovered_total",
	    "Changes found in the journal at start-up and queued again."),
	ROW(streams, TFS_JSON_ONLY, NULL, "a diagnostic of streamed uploads"),
	ROW(streams_finished, TFS_JSON_ONLY, NULL, "a diagnostic of streamed uploads"),
	ROW(streams_cancelled, TFS_JSON_ONLY, NULL, "a diagnostic of streamed uploads"),
	ROW(streamed_parts, TFS_JSON_ONLY, NULL, "a diagnostic of streamed uploads"),
	ROW(staged_bytes, TFS_GAUGE, "tierfs_writeback_staged_bytes", "Bytes in staged files."),
	ROW(staging_capacity_bytes, TFS_GAUGE, "tierfs_writeback_staging_capacity_bytes",
	    "The most bytes that may be staged (writeback.staging_size)."),
	ROW(failing, TFS_JSON_ONLY, NULL, "a list: the first 20 changes whose uploads failed"),
	ROW(mode, TFS_JSON_ONLY, NULL, "a string: writeback.mode"),
	ROW(uploaders, TFS_GAUGE, "tierfs_writeback_uploaders",
	    "Upload threads (writeback.uploaders)."),
};
#undef ROW

const struct tfs_stattab tfs_wb_stattab = TFS_STATTAB("writeback", wb_rows);

/* The first 20 changes whose uploads failed, as a new JSON array (NULL on
 * ENOMEM).  Called with wb->lock held. */
static struct json_object *failing_json(struct tfs_wb *wb)
{
	struct json_object *failing = json_object_new_array();
	size_t listed = 0;
	for (size_t i = 0; failing && i < NBUCKETS && listed < 20; i++)
		for (struct wb_ent *e = wb->tab[i]; e && listed < 20; e = e->next) {
			if (!e->has_job || e->attempts == 0)
				continue;
			struct json_object *x = json_object_new_object();
			if (x == NULL)
				continue;
			json_object_object_add(x, "path", json_object_new_string(e->path));
			json_object_object_add(x, "attempts", json_object_new_uint64(e->attempts));
			json_object_object_add(
				x, "last_error",
				json_object_new_string(strerror(e->last_err ? e->last_err : EIO)));
			json_object_object_add(x, "gave_up", json_object_new_boolean(e->failed));
			json_object_array_add(failing, x);
			listed++;
		}
	return failing;
}

void tfs_wb_stats(struct tfs_wb *wb, struct json_object *out)
{
	static const char *const modes[] = { "async", "sync", "off" };
	struct wb_snap s = { .mode = modes[wb->cfg.mode] };
	pthread_mutex_lock(&wb->lock);
	pending(wb, &s.pending_files, &s.dirty_bytes, &s.failed_files);
	for (size_t i = 0; i < NBUCKETS; i++)
		for (struct wb_ent *e = wb->tab[i]; e; e = e->next) {
			s.uploading += e->running;
			s.open_files += e->file && e->file->refs > 0;
		}
	struct tfs_upload_streams_stats ss = { 0 };
	if (wb->streams)
		tfs_upload_streams_stats(wb->streams, &ss);
	s.uploads = wb->uploads;
	s.upload_bytes = wb->upload_bytes;
	s.deletes = wb->deletes;
	s.mkdirs = wb->mkdirs;
	s.attr_updates = wb->metas;
	s.attempt_failures = wb->failures;
	s.reuploads = wb->reuploads;
	s.recovered = wb->recovered;
	s.streams = ss.started;
	s.streams_finished = ss.finished;
	s.streams_cancelled = ss.cancelled;
	s.streamed_parts = ss.parts;
	pthread_mutex_unlock(&wb->lock);
	pthread_mutex_lock(&wb->lock);
	s.failing = failing_json(wb);
	s.staged_bytes = wb->staged;
	s.staging_capacity_bytes = wb->staging_cap;
	pthread_mutex_unlock(&wb->lock);
	pthread_mutex_lock(&wb->lock);
	s.uploaders = tfs_workers_count(&wb->pool);
	pthread_mutex_unlock(&wb->lock);
	(void)tfs_stat_add_section(out, &tfs_wb_stattab, &s);
}

int tfs_wb_set_uploaders(struct tfs_wb *wb, unsigned n)
{
	if (wb->cfg.mode == TFS_WB_OFF)
		return 0;
	unsigned old, now;
	int rc = tfs_workers_set(&wb->pool, &wb->lock, &wb->work, n, &old, &now);
	if (rc)
		tfs_err(wb->log, "writeback: cannot start uploaders: %s (%u running)", strerror(rc),
			now);
	else
		tfs_info(wb->log, "writeback: %u -> %u uploaders", old, now);
	return rc;
}
