/* wb_state.c - write-back's shared state: entries, staged files, journal transactions.
 *
 * The table of paths with work or open files (struct wb_ent), the staged
 * files' names and their freeing, journal transactions (a record written
 * with its metadata-cache change, and the job it queues), and the object
 * headers a record gives.  Called by writeback.c, wb_namespace.c,
 * wb_upload.c and wb_stream_glue.c; calls only journal.c,
 * upload_stream.c, the metadata cache and the object-header helpers of
 * backend.h.  The state, the locking and the contracts are in
 * writeback_internal.h.
 */
#include "config.h"

#include "writeback_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"

/* ---- the entry table ---- */

static size_t bucket(const char *path)
{
	return (size_t)(tfs_fnv1a_str(TFS_FNV1A_INIT, path) % NBUCKETS);
}

struct wb_ent *wb_ent_find(struct tfs_wb *wb, const char *path)
{
	for (struct wb_ent *e = wb->tab[bucket(path)]; e; e = e->next)
		if (strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

struct wb_ent *wb_ent_get(struct tfs_wb *wb, const char *path)
{
	struct wb_ent *e = wb_ent_find(wb, path);
	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (e == NULL || (e->path = strdup(path)) == NULL) {
		free(e);
		return NULL;
	}
	size_t b = bucket(path);
	e->next = wb->tab[b];
	wb->tab[b] = e;
	return e;
}

/* Free `e` if nothing needs it any more. */
void wb_ent_maybe_free(struct tfs_wb *wb, struct wb_ent *e)
{
	if (e->has_job || e->running || e->file)
		return;
	tfs_upload_stream_cancel(e->stream);
	struct wb_ent **pp = &wb->tab[bucket(e->path)];
	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	free(e->path);
	free(e);
}

/* ---- staged files ---- */

static void staging_name(uint64_t id, char buf[32])
{
	snprintf(buf, 32, "%016" PRIx64, id);
}

int wb_open_staged(struct tfs_wb *wb, uint64_t id, int flags)
{
	char name[32];
	staging_name(id, name);
	int fd = openat(wb->stagefd, name, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
	return fd < 0 ? -errno : fd;
}

static void unlink_staged(struct tfs_wb *wb, uint64_t id)
{
	char name[32];
	staging_name(id, name);
	if (unlinkat(wb->stagefd, name, 0) < 0 && errno != ENOENT)
		tfs_warn(wb->log, "writeback: cannot delete staged file %s/%s: %s", wb->stagedir,
			 name, strerror(errno));
}

void wb_free_file(struct tfs_wb *wb, struct tfs_wb_file *f, bool delete_staged)
{
	tfs_upload_stream_cancel(f->stream);
	wb->staged -= f->size; /* callers hold the lock */
	if (f->fd >= 0)
		close(f->fd);
	if (delete_staged)
		unlink_staged(wb, f->staging_id);
	free(f->path);
	free(f);
}

struct tfs_wb_attr tfs_wb_attr_of(const struct tfs_attr *a)
{
	struct tfs_wb_attr w = {
		.mode = a->mode == TFS_META_UNSET ? TFS_META_UNSET : (a->mode & 07777) | a->fmt,
		.uid = a->uid,
		.gid = a->gid,
		.mtime = a->mtime,
		.atime = a->atime,
		.ctime = a->ctime,
		.mtime_ns = a->mtime_ns,
		.atime_ns = a->atime_ns,
		.ctime_ns = a->ctime_ns,
		.rdev = a->rdev,
	};
	return w;
}

void tfs_wb_attr_apply(const struct tfs_wb_attr *w, struct tfs_attr *a)
{
	a->mode = w->mode == TFS_META_UNSET ? TFS_META_UNSET : w->mode & 07777;
	a->fmt = w->mode == TFS_META_UNSET ? 0 : w->mode & S_IFMT;
	a->uid = w->uid;
	a->gid = w->gid;
	a->mtime = w->mtime;
	a->atime = w->atime;
	a->ctime = w->ctime;
	a->mtime_ns = w->mtime_ns;
	a->atime_ns = w->atime_ns;
	a->ctime_ns = w->ctime_ns;
	a->rdev = w->rdev;
}

void wb_jrec_set_attr(struct tfs_jrec *r, const struct tfs_wb_attr *a)
{
	r->mode = a->mode;
	r->uid = a->uid;
	r->gid = a->gid;
	r->mtime = a->mtime;
	r->atime = a->atime;
	r->ctime = a->ctime;
	r->mtime_ns = a->mtime_ns;
	r->atime_ns = a->atime_ns;
	r->ctime_ns = a->ctime_ns;
	r->rdev = a->rdev;
}

struct tfs_wb_attr wb_jrec_attr(const struct tfs_jrec *r)
{
	struct tfs_wb_attr a = {
		.mode = r->mode,
		.uid = r->uid,
		.gid = r->gid,
		.mtime = r->mtime,
		.atime = r->atime,
		.ctime = r->ctime,
		.mtime_ns = r->mtime_ns,
		.atime_ns = r->atime_ns,
		.ctime_ns = r->ctime_ns,
		.rdev = r->rdev,
	};
	return a;
}

void wb_file_tfs_attr(const struct tfs_wb_file *f, struct tfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = TFS_FT_FILE;
	a->size = f->size;
	tfs_wb_attr_apply(&f->attr, a);
	a->local = true;
	a->headers = true;
}

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

/* Queue the job of `e` (generation gen, op) in memory.  Lock held. */
void wb_schedule(struct tfs_wb *wb, struct wb_ent *e, enum tfs_jop op, uint64_t gen, uint64_t bytes)
{
	e->has_job = true;
	e->failed = false;
	e->op = op;
	e->gen = gen;
	e->bytes = bytes;
	e->attempts = 0;
	e->next_try_ms = 0;
	e->due_ms = wb_due_ms(wb, e);
	pthread_cond_broadcast(&wb->work);
}

static uint64_t path_hash(const char *path)
{
	uint64_t h = tfs_fnv1a_str(TFS_FNV1A_INIT, path);
	return h ? h : 1;
}

void wb_note_upload(struct tfs_wb *wb, const char *path)
{
	uint64_t h = path_hash(path);
	wb->recent_up[h % RECENT_UPLOADS].hash = h;
	wb->recent_up[h % RECENT_UPLOADS].ms = tfs_wall_ms();
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

bool wb_temp_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	size_t n = strlen(name);
	return ends_with(name, n, ".tmp") || ends_with(name, n, ".temp") ||
	       strcasestr(name, ".tmp.") != NULL || strcasestr(name, ".tempstate") != NULL ||
	       strncasecmp(name, "tmp", 3) == 0;
}

uint64_t wb_due_ms(const struct tfs_wb *wb, const struct wb_ent *e)
{
	uint64_t now = tfs_wall_ms();
	if (wb->cfg.mode != TFS_WB_ASYNC)
		return now;
	uint64_t delay = wb->cfg.delay_ms, rw = wb->cfg.rewrite_delay_ms;
	if (rw > delay) {
		/* Only a file written front to back (a checkpoint, a log) goes
		 * after `delay`, unless it was closed again while, or soon
		 * after, it was uploaded, or its name says it is temporary (a
		 * rename into place comes next: the upload it would start at
		 * once is wasted, cancelled or deleted).  Every other change settles
		 * first: a file changed in place or left empty, a directory, a
		 * delete, new attributes. */
		uint64_t h = path_hash(e->path);
		uint64_t at = wb->recent_up[h % RECENT_UPLOADS].hash == h
				      ? wb->recent_up[h % RECENT_UPLOADS].ms
				      : 0;
		bool written = e->op == TFS_J_PUT && e->file && !e->file->edited &&
			       e->file->size > 0 && !wb_temp_name(e->path);
		if (!written || e->running || (at && now - at < rw))
			delay = rw;
	}
	return now + delay;
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

/* ---- what a record becomes ---- */

/* x-amz-meta-<name> as s3fs writes a time: "sec", or "sec.nsec" with
 * nine digits. */
static void set_time(struct tfs_obj_meta *om, const char *name, int64_t s, uint32_t ns)
{
	char v[48];
	if (ns && ns < 1000000000u)
		snprintf(v, sizeof(v), "%lld.%09u", (long long)s, (unsigned)ns);
	else
		snprintf(v, sizeof(v), "%lld", (long long)s);
	tfs_obj_meta_set(om, name, v);
}

void wb_set_meta_headers(struct tfs_obj_meta *om, const struct tfs_jrec *r, bool dir, bool mtime)
{
	char v[32];
	if (r->mode != TFS_META_UNSET) {
		/* s3fs stores st_mode in decimal, with the file type bits. */
		uint32_t fmt = r->mode & S_IFMT;
		if (dir || fmt == 0)
			fmt = dir ? S_IFDIR : S_IFREG;
		snprintf(v, sizeof(v), "%u", (unsigned)(fmt | (r->mode & 07777)));
		tfs_obj_meta_set(om, "mode", v);
		if (!dir && (fmt == S_IFCHR || fmt == S_IFBLK)) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)r->rdev);
			tfs_obj_meta_set(om, "rdev", v);
		}
	}
	if (r->uid != TFS_META_UNSET) {
		snprintf(v, sizeof(v), "%u", (unsigned)r->uid);
		tfs_obj_meta_set(om, "uid", v);
	}
	if (r->gid != TFS_META_UNSET) {
		snprintf(v, sizeof(v), "%u", (unsigned)r->gid);
		tfs_obj_meta_set(om, "gid", v);
	}
	if (mtime)
		set_time(om, "mtime", r->mtime, r->mtime_ns);
	if (mtime && r->atime)
		set_time(om, "atime", r->atime, r->atime_ns);
	if (mtime && r->ctime)
		set_time(om, "ctime", r->ctime, r->ctime_ns);
}

/* `f` is no longer written by appending only: cancel its stream.  Lock
 * held. */
void wb_file_stream_break(struct tfs_wb_file *f)
{
	f->appending = false;
	tfs_upload_stream_cancel(f->stream);
	f->stream = NULL;
}
