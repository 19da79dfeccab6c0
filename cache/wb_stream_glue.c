/* wb_stream_glue.c - write-back's side of streaming (the streams themselves
 * are upload_stream.c, which knows nothing of write-back): which dirty files
 * stream and when their stream is broken or handed to the uploader, the
 * table of stream uploads in this mount's journal (the streams' `reg`
 * callback), and at start-up the sweep that aborts the uploads an earlier
 * run left registered.  The shared state and the locking are in
 * writeback_internal.h.
 */
#include "config.h"

#include "writeback_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* After an append: start streaming `f` once it is big enough, or tell its
 * stream how far it got.  Lock held. */
void wb_file_stream_grow(struct tfs_wb *wb, struct tfs_wb_file *f)
{
	if (f->stream) {
		tfs_upload_stream_grow(f->stream, f->size);
		return;
	}
	if (wb->streams == NULL || f->path == NULL ||
	    f->size < tfs_upload_streams_threshold(wb->streams))
		return;
	/* The object's headers are fixed now; mtime is left out (the
	 * object's Last-Modified stands for it), so that only a change of
	 * mode or owner before close makes the stream useless. */
	struct tfs_jrec r = { .mode = f->attr.mode, .uid = f->attr.uid, .gid = f->attr.gid };
	struct tfs_obj_meta om = { 0 };
	wb_set_meta_headers(&om, &r, false, false);
	int rc = tfs_upload_stream_start(wb->streams, f->path, f->fd, f->size, &om, &f->stream);
	if (rc == 0) {
		f->stream_mode = f->attr.mode;
		f->stream_uid = f->attr.uid;
		f->stream_gid = f->attr.gid;
	} else {
		f->appending = false; /* EBUSY or worse: upload it after close */
		if (rc != EBUSY)
			tfs_warn(wb->log, "writeback: cannot upload '%s' while it is written: %s",
				 f->path, strerror(rc));
	}
}

/* The last writer closed `f`, committed as generation `gen` of `e`: its
 * stream goes to `e` for the uploader to finish.  Lock held. */
void wb_file_stream_hand_over(struct wb_ent *e, struct tfs_wb_file *f, uint64_t gen)
{
	f->appending = false;
	if (f->stream == NULL)
		return;
	tfs_upload_stream_cancel(e->stream); /* an older generation's */
	e->stream = NULL;
	if (f->attr.mode != f->stream_mode || f->attr.uid != f->stream_uid ||
	    f->attr.gid != f->stream_gid) {
		wb_file_stream_break(f); /* its upload has the wrong headers */
		return;
	}
	e->stream = f->stream;
	e->stream_gen = gen;
	f->stream = NULL;
}

/* ---- the table of stream uploads, and the sweep at start-up ---- */

/* upload_stream's reg callback: the table of open stream uploads. */
static int stream_reg(void *ctx, const char *key, const char *upload_id, bool add)
{
	struct tfs_wb *wb = ctx;
	MDB_txn *txn;
	pthread_mutex_lock(&wb->lock);
	int rc = wb_txn_begin(wb, &txn);
	if (rc == 0) {
		rc = add ? tfs_journal_stream_add(txn, &wb->j, key, upload_id)
			 : tfs_journal_stream_del(txn, &wb->j, upload_id);
		rc = wb_txn_end(wb, txn, rc, add ? "stream begins" : "stream ends", key);
	}
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

struct orphan {
	char *key, *upload_id;
	struct orphan *next;
};

static int collect_orphan(void *ctx, const char *key, const char *upload_id)
{
	struct orphan **list = ctx;
	struct orphan *o = calloc(1, sizeof(*o));
	if (o == NULL || (o->key = strdup(key)) == NULL ||
	    (o->upload_id = strdup(upload_id)) == NULL) {
		if (o)
			free(o->key);
		free(o);
		return ENOMEM;
	}
	o->next = *list;
	*list = o;
	return 0;
}

static void free_orphans(struct orphan *list)
{
	while (list) {
		struct orphan *o = list;
		list = o->next;
		free(o->key);
		free(o->upload_id);
		free(o);
	}
}

/* At start-up, in the background: the uploads of streams that an earlier
 * run left registered (a crash while a file was written, or an abort that
 * failed), listed in wb->orphans before this run could start a stream,
 * are aborted, unless a journal record took the upload over. */
static void *sweeper(void *arg)
{
	struct tfs_wb *wb = arg;
	struct orphan *list = wb->orphans;
	MDB_txn *txn;
	wb->orphans = NULL;
	unsigned aborted = 0;
	while (list) {
		struct orphan *o = list;
		list = o->next;
		bool stop, taken = false;
		pthread_mutex_lock(&wb->lock);
		stop = wb->stop;
		struct tfs_jrec r;
		if (!stop && mdb_txn_begin(wb->env, NULL, MDB_RDONLY, &txn) == 0) {
			taken = tfs_journal_get(txn, &wb->j, o->key, &r) == 0 &&
				r.op == TFS_J_PUT && strcmp(r.mpu.upload_id, o->upload_id) == 0;
			tfs_jrec_clear(&r);
			mdb_txn_abort(txn);
		}
		pthread_mutex_unlock(&wb->lock);
		if (!stop &&
		    (taken || tfs_backend_abort_upload(wb->be, o->key, o->upload_id) == 0)) {
			aborted += !taken;
			(void)stream_reg(wb, o->key, o->upload_id, false);
		}
		free(o->key);
		free(o->upload_id);
		free(o);
	}
	if (aborted)
		tfs_info(wb->log,
			 "writeback: aborted %u multipart upload(s) of files that were being "
			 "written when the last run ended",
			 aborted);
	return NULL;
}

/* Streaming, when the settings and the backend allow it.  Returns 0 or
 * an errno (logged). */
static int streams_init(struct tfs_wb *wb)
{
	const struct tfs_writeback_config *cfg = &wb->cfg;
	struct tfs_upload_streams_config sc = {
		.be = wb->be,
		.log = wb->log,
		.max_streams = cfg->uploaders,
		.reg = stream_reg,
		.reg_ctx = wb,
	};
	bool at_close = cfg->mode == TFS_WB_SYNC ||
			(cfg->mode == TFS_WB_ASYNC && cfg->delay_ms == 0);
	if (!cfg->stream || !at_close ||
	    !tfs_backend_multipart_geometry(wb->be, &sc.threshold, &sc.part_size, &sc.parallel))
		return 0;
	int rc = tfs_upload_streams_create(&sc, &wb->streams);
	if (rc)
		tfs_err(wb->log, "writeback: cannot set up uploads while writing: %s",
			strerror(rc));
	return rc;
}

int wb_streams_start(struct tfs_wb *wb)
{
	const struct tfs_log *log = wb->log;
	MDB_txn *txn;
	int rc = streams_init(wb);
	if (rc)
		return rc;
	/* Now, not in the sweeper: no stream of this run has registered its
	 * upload yet, so every upload listed is one an earlier run left. */
	if (mdb_txn_begin(wb->env, NULL, MDB_RDONLY, &txn) == 0) {
		rc = tfs_journal_stream_each(txn, &wb->j, collect_orphan, &wb->orphans);
		mdb_txn_abort(txn);
	} else {
		rc = EIO;
	}
	if (rc) {
		tfs_err(log, "writeback: cannot read the journal's streams: %s", strerror(rc));
		return rc;
	}
	rc = pthread_create(&wb->sweeper, NULL, sweeper, wb);
	if (rc) {
		tfs_err(log, "writeback: cannot start a thread: %s", strerror(rc));
		return rc;
	}
	wb->sweeper_started = true;
	return 0;
}

void wb_streams_stop(struct tfs_wb *wb)
{
	if (wb->sweeper_started)
		pthread_join(wb->sweeper, NULL);
	free_orphans(wb->orphans);
	if (wb->streams) {
		/* Streams still running stop without aborting their uploads
		 * (the server may be down): the next mount aborts them. */
		tfs_upload_streams_shutdown(wb->streams);
		pthread_mutex_lock(&wb->lock);
		for (size_t i = 0; i < NBUCKETS; i++)
			for (struct wb_ent *e = wb->tab[i]; e; e = e->next) {
				tfs_upload_stream_cancel(e->stream);
				e->stream = NULL;
				if (e->file) {
					tfs_upload_stream_cancel(e->file->stream);
					e->file->stream = NULL;
				}
			}
		pthread_mutex_unlock(&wb->lock);
		tfs_upload_streams_destroy(wb->streams);
		wb->streams = NULL;
	}
}
