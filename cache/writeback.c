/* writeback.c - the write-back layer (writeback.h): the file API
 * (create, open for writing with copy-on-write, read, write, truncate,
 * commit, setattr, release) over the staging limit, and start-up (the
 * journal reloaded, staged files without a record moved to lost+found)
 * and shutdown.  Namespace changes are in wb_namespace.c, the job queue
 * and the uploaders in wb_upload.c, write-back's side of streaming in
 * wb_stream_glue.c, and what they all share in wb_txn.c (journal
 * transactions), wb_due.c (when a job is due), wb_state.c (the entry
 * table, staged files) and wb_attr.c (attribute conversions).  The shared
 * state, the locking and the cross-file contracts are in
 * writeback_internal.h.
 */
#include "config.h"

#include "writeback_internal.h"
#include "path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "dirs.h"
#include "fdio.h"
#include "ram.h"

/* A new dirty file with a fresh, empty staged file.  Lock held. */
static int new_file(struct tfs_wb *wb, const char *path, struct tfs_wb_file **out)
{
	struct tfs_wb_file *f = calloc(1, sizeof(*f));
	if (f == NULL || (f->path = strdup(path)) == NULL) {
		free(f);
		return ENOMEM;
	}
	f->staging_id = wb->next_staging++;
	f->fd = wb_open_staged(wb, f->staging_id, O_RDWR | O_CREAT | O_TRUNC);
	if (f->fd < 0) {
		int rc = -f->fd;
		tfs_err(wb->log, "writeback: cannot create a staged file in %s for '%s': %s",
			wb->stagedir, path, strerror(rc));
		free(f->path);
		free(f);
		return rc;
	}
	f->attr.mode = f->attr.uid = f->attr.gid = TFS_META_UNSET;
	f->attr.mtime = (int64_t)time(NULL);
	*out = f;
	return 0;
}

/* The data of a file changed now: its mtime and ctime.  Cannot fail. */
static void touch_times(struct tfs_wb_attr *a)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	a->mtime = a->ctime = (int64_t)ts.tv_sec;
	a->mtime_ns = a->ctime_ns = (uint32_t)ts.tv_nsec;
}

/* Room for `more` staged bytes?  Lock held.  Returns 0 or ENOSPC. */
static int reserve(struct tfs_wb *wb, uint64_t more, const char *path)
{
	if (more == 0 || wb->staged + more <= wb->staging_cap) {
		if (wb->staged + more < wb->staging_cap / 2)
			wb->full_logged = false;
		return 0;
	}
	if (!wb->full_logged) {
		wb->full_logged = true;
		tfs_err(wb->log,
			"writeback: staging is full (%" PRIu64 " of %" PRIu64 " bytes staged, "
			"writeback.staging_size): writing '%s' fails with ENOSPC until uploads "
			"finish",
			wb->staged, wb->staging_cap, path ? path : "(deleted)");
	}
	return ENOSPC;
}

/* Hold room for f growing to `end` bytes while its staged copy is written:
 * the growth counts as staged from the check on, so concurrent writers
 * cannot all pass the check and together exceed the bound.  Lock held.
 * Returns 0 (*held bytes are held: the caller gives them back with
 * end_growth() once the I/O is done) or ENOSPC (nothing held). */
static int hold_growth(struct tfs_wb *wb, const struct tfs_wb_file *f, uint64_t end, uint64_t *held)
{
	uint64_t more = end > f->size ? end - f->size : 0;
	int rc = reserve(wb, more, f->path);
	*held = rc ? 0 : more;
	wb->staged += *held;
	return rc;
}

/* The end of the I/O on f's staged copy that hold_growth() held `held`
 * bytes for, `rc` its result: takes the lock and gives the room back.  On
 * failure drops the lock again, logs "<doing> the staged copy" and returns
 * rc; on success returns 0 with the lock held, for the caller to count the
 * new size. */
static int end_growth(struct tfs_wb *wb, const struct tfs_wb_file *f, uint64_t held, int rc,
		      const char *doing)
{
	pthread_mutex_lock(&wb->lock);
	wb->staged -= held;
	if (rc == 0)
		return 0;
	pthread_mutex_unlock(&wb->lock);
	tfs_err(wb->log, "writeback: %s the staged copy of '%s': %s", doing,
		f->path ? f->path : "(deleted)", strerror(rc));
	return rc;
}

/* Make sure f->fd is open (files recovered from the journal open lazily). */
static int file_fd(struct tfs_wb *wb, struct tfs_wb_file *f)
{
	pthread_mutex_lock(&wb->lock);
	if (f->fd < 0) {
		int fd = wb_open_staged(wb, f->staging_id, O_RDWR);
		if (fd < 0) {
			pthread_mutex_unlock(&wb->lock);
			tfs_err(wb->log, "writeback: staged copy of '%s' missing: %s",
				f->path ? f->path : "(deleted)", strerror(-fd));
			return EIO;
		}
		f->fd = fd;
	}
	pthread_mutex_unlock(&wb->lock);
	return 0;
}

/* Journal file `f` (PUT, next generation) and its LOCAL entry.  Lock held. */
static int journal_file(struct tfs_wb *wb, struct wb_ent *e, struct tfs_wb_file *f)
{
	struct tfs_jrec r = wb_put_rec(f, e->gen + 1, f->path);
	struct tfs_attr a;
	uint64_t gen;
	wb_file_tfs_attr(f, &a);
	int rc = wb_journal(wb, &r, &a, "commit", &gen);
	if (rc == 0) {
		f->committed_seq = f->seq;
		f->journaled = true;
		wb_schedule(wb, e, TFS_J_PUT, gen, f->size);
	}
	return rc;
}

/* The first change of a file open for writing that no record describes
 * (a clean object opened for writing): an OPEN record (journal.h) names
 * its staged copy now, so that the copy outlives the daemon.  A daemon
 * killed before the close would otherwise leave a staged file no record
 * names, and a daemon resuming the mount could not give the writer its
 * data back.  An OPEN record uploads nothing: an unclosed file is no
 * complete version.  Later writes need no record of their own: a new
 * daemon takes the file's size from the staged file (load_one()).  One
 * transaction per file opened for writing and changed.  Lock held.
 * Returns 0, EIO or ENOSPC. */
static int journal_first_change(struct tfs_wb *wb, struct tfs_wb_file *f)
{
	if (f->journaled || f->open_rec || f->path == NULL || f->writers == 0)
		return 0;
	struct wb_ent *e = wb_ent_find(wb, f->path);
	if (e == NULL || e->file != f || e->has_job || e->running)
		return 0; /* a record of its own describes the path */
	struct tfs_jrec r = {
		.op = TFS_J_OPEN,
		.gen = e->gen + 1,
		.staging_id = f->staging_id,
		.closed_ms = tfs_wall_ms(),
		.path = f->path,
	};
	wb_jrec_set_attr(&r, &f->attr);
	MDB_txn *txn;
	int rc = wb_txn_begin(wb, &txn);
	if (rc == 0) {
		rc = wb_put_record(wb, txn, &r);
		uint64_t gen = r.gen;
		rc = wb_txn_end(wb, txn, rc, "open for writing", f->path);
		if (rc == 0) {
			e->gen = gen;
			f->open_rec = true;
		}
	}
	r.path = NULL;
	tfs_jrec_clear(&r);
	return rc;
}

/* ---- files ---- */

int tfs_wb_create_file(struct tfs_wb *wb, const char *path, const struct tfs_wb_attr *a,
		       struct tfs_wb_file **out)
{
	struct tfs_wb_file *f;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_get(wb, path);
	int rc = e ? new_file(wb, path, &f) : ENOMEM;
	if (rc == 0) {
		f->attr = *a;
		if (e->file) {
			/* O_CREAT|O_TRUNC over a dirty file: replace it. */
			struct tfs_wb_file *old = e->file;
			wb_file_stream_break(old);
			free(old->path);
			old->path = NULL;
			if (old->refs == 0)
				wb_free_file(wb, old, true);
		}
		e->file = f;
		f->refs = 1;
		f->writers = 1;
		f->seq = 1;
		f->appending = true;
		rc = journal_file(wb, e, f);
		if (rc) {
			e->file = NULL;
			wb_free_file(wb, f, true);
		}
	}
	if (e)
		wb_ent_maybe_free(wb, e);
	pthread_mutex_unlock(&wb->lock);
	if (rc == 0)
		*out = f;
	return rc;
}

/* Copy the object (clean version `a`) into staged file `fd` through the
 * cache stack. */
static int copy_in(struct tfs_wb *wb, const char *path, const struct tfs_attr *a, int fd)
{
	struct tfs_obj obj;
	tfs_obj_init(&obj, path, a->etag, a->size);
	uint64_t n = tfs_obj_blocks(&obj, wb->top->block_size);
	for (uint64_t i = 0; i < n; i++) {
		struct tfs_ram_block *b;
		int rc = tfs_ram_get(wb->top, &obj, i, TFS_RAM_WAIT, &b);
		if (rc) {
			tfs_err(wb->log, "writeback: cannot copy '%s' into staging: %s", path,
				strerror(rc));
			return rc;
		}
		rc = tfs_pwrite_all(fd, tfs_ram_block_data(b), tfs_ram_block_len(b),
				    (off_t)(i * wb->top->block_size));
		tfs_ram_put(wb->top, b);
		if (rc) {
			tfs_err(wb->log, "writeback: staging '%s': %s", path, strerror(rc));
			return rc;
		}
	}
	return 0;
}

/* The caller found `path` dirty (no ETag: clean == NULL), but it is not
 * any more: its upload retired it after the caller looked.  Its uploaded
 * version is in the metadata cache now (the retirement wrote it there
 * before the staged file went).  Fills *a and returns true if `path` is an
 * object in the bucket.  Lock not held. */
static bool retired_meanwhile(struct tfs_wb *wb, const char *path, struct tfs_attr *a)
{
	char dir[PATH_MAX];
	const char *name;
	return tfs_path_split(path, dir, sizeof(dir), &name) == 0 &&
	       tfs_meta_lookup(wb->meta, dir, name, a, NULL) == 0 && a->type == TFS_FT_FILE &&
	       a->etag[0] != '\0';
}

int tfs_wb_open_write(struct tfs_wb *wb, const char *path, const struct tfs_attr *clean, bool trunc,
		      struct tfs_wb_file **out)
{
	struct tfs_attr now;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_find(wb, path);
	if (e && e->file) {
		struct tfs_wb_file *f = e->file;
		f->refs++;
		if (++f->writers > 1)
			wb_file_stream_break(f); /* two writers: not one append stream */
		pthread_mutex_unlock(&wb->lock);
		int rc = file_fd(wb, f);
		if (rc == 0 && trunc)
			rc = tfs_wb_truncate(wb, f, 0);
		if (rc) {
			tfs_wb_release(wb, f, true);
			return rc;
		}
		*out = f;
		return 0;
	}
	pthread_mutex_unlock(&wb->lock);
	if (clean == NULL && retired_meanwhile(wb, path, &now))
		clean = &now; /* without this, its data would be lost */

	/* Copy-on-write: stage the object outside the lock, then publish. */
	struct tfs_wb_file *f;
	pthread_mutex_lock(&wb->lock);
	int rc = new_file(wb, path, &f);
	pthread_mutex_unlock(&wb->lock);
	if (rc)
		return rc;
	if (clean && !trunc) {
		pthread_mutex_lock(&wb->lock);
		rc = reserve(wb, clean->size, path);
		if (rc == 0) {
			f->size = clean->size; /* counted from now on */
			wb->staged += clean->size;
		}
		pthread_mutex_unlock(&wb->lock);
		if (rc == 0)
			rc = copy_in(wb, path, clean, f->fd);
		if (rc) {
			pthread_mutex_lock(&wb->lock);
			wb_free_file(wb, f, true);
			pthread_mutex_unlock(&wb->lock);
			return rc;
		}
	}
	if (clean)
		f->attr = tfs_wb_attr_of(clean);
	if (trunc)
		touch_times(&f->attr); /* O_TRUNC changes the file (POSIX) */
	f->refs = 1;
	f->writers = 1;
	f->seq = trunc ? 1 : 0; /* opening unchanged is not a change */
	f->appending = f->size == 0;
	pthread_mutex_lock(&wb->lock);
	e = wb_ent_get(wb, path);
	if (e == NULL) {
		rc = ENOMEM;
	} else if (e->file) {
		/* Someone staged it meanwhile: use theirs. */
		struct tfs_wb_file *theirs = e->file;
		theirs->refs++;
		if (++theirs->writers > 1)
			wb_file_stream_break(theirs);
		wb_free_file(wb, f, true);
		pthread_mutex_unlock(&wb->lock);
		if (trunc && (rc = tfs_wb_truncate(wb, theirs, 0)) != 0) {
			tfs_wb_release(wb, theirs, true);
			return rc;
		}
		*out = theirs;
		return 0;
	} else {
		e->file = f;
		if (f->seq)
			rc = journal_file(wb, e, f);
		if (rc)
			e->file = NULL;
	}
	if (e)
		wb_ent_maybe_free(wb, e);
	if (rc)
		wb_free_file(wb, f, true);
	pthread_mutex_unlock(&wb->lock);
	if (rc)
		return rc;
	*out = f;
	return 0;
}

struct tfs_wb_file *tfs_wb_find(struct tfs_wb *wb, const char *path)
{
	struct tfs_wb_file *f = NULL;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_find(wb, path);
	if (e && e->file) {
		f = e->file;
		f->refs++;
	}
	pthread_mutex_unlock(&wb->lock);
	if (f && file_fd(wb, f) != 0) {
		tfs_wb_release(wb, f, false);
		return NULL;
	}
	return f;
}

bool tfs_wb_attr(struct tfs_wb *wb, const char *path, struct tfs_attr *a)
{
	bool found = false;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_find(wb, path);
	if (e && e->file) {
		wb_file_tfs_attr(e->file, a);
		found = true;
	}
	pthread_mutex_unlock(&wb->lock);
	return found;
}

void tfs_wb_file_attr(struct tfs_wb *wb, struct tfs_wb_file *f, struct tfs_attr *a)
{
	pthread_mutex_lock(&wb->lock);
	wb_file_tfs_attr(f, a);
	pthread_mutex_unlock(&wb->lock);
}

/* Set the attributes named in `mask` (TFS_WB_SET_*) from `a` in *w.  A
 * new mode changes the permission bits only: the kind of file (S_IFMT
 * bits) stays.  Cannot fail.  No lock of its own: the caller's protects
 * the fields. */
static void set_by_mask(unsigned mask, const struct tfs_wb_attr *a, struct tfs_wb_attr *w)
{
	if (mask & TFS_WB_SET_MODE)
		w->mode = (w->mode != TFS_META_UNSET ? w->mode & S_IFMT : 0) | (a->mode & 07777);
	if (mask & TFS_WB_SET_UID)
		w->uid = a->uid;
	if (mask & TFS_WB_SET_GID)
		w->gid = a->gid;
	if (mask & TFS_WB_SET_MTIME) {
		w->mtime = a->mtime;
		w->mtime_ns = a->mtime_ns;
	}
	if (mask & TFS_WB_SET_ATIME) {
		w->atime = a->atime;
		w->atime_ns = a->atime_ns;
	}
	if (mask & TFS_WB_SET_CTIME) {
		w->ctime = a->ctime;
		w->ctime_ns = a->ctime_ns;
	}
}

void tfs_wb_file_setattr(struct tfs_wb *wb, struct tfs_wb_file *f, unsigned mask,
			 const struct tfs_wb_attr *a)
{
	pthread_mutex_lock(&wb->lock);
	set_by_mask(mask, a, &f->attr);
	pthread_mutex_unlock(&wb->lock);
}

bool tfs_wb_file_detached(struct tfs_wb *wb, struct tfs_wb_file *f)
{
	pthread_mutex_lock(&wb->lock);
	bool d = f->path == NULL;
	pthread_mutex_unlock(&wb->lock);
	return d;
}

int tfs_wb_release(struct tfs_wb *wb, struct tfs_wb_file *f, bool writer)
{
	int rc = 0;
	if (writer) {
		pthread_mutex_lock(&wb->lock);
		bool last = --f->writers == 0;
		pthread_mutex_unlock(&wb->lock);
		if (last)
			rc = tfs_wb_commit(wb, f, false);
	}
	pthread_mutex_lock(&wb->lock);
	bool wake = writer && f->writers == 0; /* its job may be due now */
	if (--f->refs == 0) {
		if (f->path == NULL) {
			wb_free_file(wb, f, true); /* detached: never uploaded */
		} else if (!f->journaled && !f->open_rec) {
			/* Clean (uploaded) or never changed: staging goes.  Unless
			 * a writer never closed it (the daemon stopping with the
			 * file open): its bytes stay for lost+found, as after a
			 * crash. */
			struct wb_ent *e = wb_ent_find(wb, f->path);
			if (e && e->file == f) {
				e->file = NULL;
				wb_ent_maybe_free(wb, e);
			}
			wb_free_file(wb, f, f->writers == 0);
		} else if (f->fd >= 0) {
			close(f->fd); /* reopened on demand */
			f->fd = -1;
		}
	}
	if (wake)
		pthread_cond_broadcast(&wb->work);
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

int tfs_wb_read(struct tfs_wb_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
	ssize_t n = tfs_pread_full(f->fd, buf, len, (off_t)off);
	if (n < 0)
		return (int)-n;
	*got = (size_t)n;
	return 0;
}

int tfs_wb_write(struct tfs_wb *wb, struct tfs_wb_file *f, const void *buf, size_t len,
		 uint64_t off)
{
	uint64_t held;
	pthread_mutex_lock(&wb->lock);
	int rc = hold_growth(wb, f, off + len, &held);
	if (f->appending && (off != f->size || f->writers > 1))
		wb_file_stream_break(f);
	if (rc == 0 && off != f->size)
		f->edited = true;
	pthread_mutex_unlock(&wb->lock);
	if (rc)
		return rc;
	rc = tfs_pwrite_all(f->fd, buf, len, (off_t)off);
	if (end_growth(wb, f, held, rc, "writing"))
		return rc;
	if (off + len > f->size) {
		wb->staged += off + len - f->size;
		f->size = off + len;
	}
	touch_times(&f->attr);
	f->seq++;
	if (f->appending && off + len == f->size)
		wb_file_stream_grow(wb, f);
	rc = journal_first_change(wb, f);
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

int tfs_wb_truncate(struct tfs_wb *wb, struct tfs_wb_file *f, uint64_t size)
{
	uint64_t held;
	pthread_mutex_lock(&wb->lock);
	int rc = hold_growth(wb, f, size, &held);
	pthread_mutex_unlock(&wb->lock);
	if (rc)
		return rc;
	rc = ftruncate(f->fd, (off_t)size) < 0 ? errno : 0;
	if (end_growth(wb, f, held, rc, "truncating"))
		return rc;
	if (size == 0) {
		wb_file_stream_break(f); /* empty again: appending starts over */
		f->appending = f->writers <= 1;
		f->edited = false;
	} else if (size != f->size) {
		wb_file_stream_break(f);
		f->edited = true;
	}
	wb->staged += size;
	wb->staged -= f->size;
	f->size = size;
	touch_times(&f->attr);
	f->seq++;
	rc = journal_first_change(wb, f);
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

/* Sync mode: make the job of `e` due now and wait for generation `gen`. */
static int wait_upload(struct tfs_wb *wb, const char *path, uint64_t gen)
{
	int rc = 0;
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_find(wb, path);
	if (e && e->has_job) {
		e->force = true;
		e->due_ms = 0;
		pthread_cond_broadcast(&wb->work);
	}
	for (;;) {
		e = wb_ent_find(wb, path);
		if (e == NULL || e->done_gen >= gen || !e->has_job)
			break;
		if (!e->running && e->attempts > 0 && e->gen == gen) {
			/* The upload failed: report it, keep retrying.  close()
			 * and fsync() get EIO (or ENOSPC/EDQUOT), never the
			 * backend's errno as such: EISDIR, EACCES or ENOENT
			 * from a write of a regular file would name the wrong
			 * cause.  The log and `tierfs stats` keep the real one. */
			rc = e->last_err == ENOSPC || e->last_err == EDQUOT ? e->last_err : EIO;
			break;
		}
		if (wb->stop) {
			rc = EIO;
			break;
		}
		pthread_cond_wait(&wb->done, &wb->lock);
	}
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

/* tfs_wb_commit(); `wait`: in sync mode, upload now. */
static int commit(struct tfs_wb *wb, struct tfs_wb_file *f, bool durable, bool wait)
{
	int rc = 0;
	uint64_t gen = 0;
	char *path = NULL;
	pthread_mutex_lock(&wb->lock);
	if (f->path && (f->seq != f->committed_seq || (durable && !f->journaled && f->seq))) {
		struct wb_ent *e = wb_ent_get(wb, f->path);
		rc = e ? journal_file(wb, e, f) : ENOMEM;
		if (rc == 0)
			gen = e->gen;
	} else if (f->path && f->journaled) {
		struct wb_ent *e = wb_ent_find(wb, f->path);
		gen = e ? e->gen : 0;
	}
	if (f->writers == 0) {
		struct wb_ent *e = f->path && gen && rc == 0 ? wb_ent_find(wb, f->path) : NULL;
		if (e && e->file == f)
			wb_file_stream_hand_over(e, f, gen);
		else
			wb_file_stream_break(f);
	}
	if (f->path && gen)
		path = strdup(f->path);
	int fd = f->fd >= 0 ? dup(f->fd) : -1;
	pthread_mutex_unlock(&wb->lock);
	if (rc == 0 && durable && fd >= 0) {
		/* The staged bytes, then the staging directory (a file created
		 * since the last sync needs its name on disk too), then the
		 * journal record that points to it. */
		if (fdatasync(fd) < 0 || fsync(wb->stagefd) < 0) {
			rc = errno;
			tfs_err(wb->log, "writeback: fsync of the staged copy of '%s': %s",
				path ? path : "(deleted)", strerror(rc));
		} else if ((rc = mdb_env_sync(wb->env, 1)) != 0) {
			tfs_err(wb->log, "writeback: journal sync: %s", mdb_strerror(rc));
			rc = EIO;
		}
	}
	if (fd >= 0)
		close(fd);
	if (rc == 0 && path && wait && wb->cfg.mode == TFS_WB_SYNC)
		rc = wait_upload(wb, path, gen);
	free(path);
	return rc;
}

int tfs_wb_commit(struct tfs_wb *wb, struct tfs_wb_file *f, bool durable)
{
	return commit(wb, f, durable, true);
}

int tfs_wb_commit_record(struct tfs_wb *wb, struct tfs_wb_file *f)
{
	return commit(wb, f, false, false);
}

int tfs_wb_setattr(struct tfs_wb *wb, const char *path, const struct tfs_attr *clean, unsigned mask,
		   const struct tfs_wb_attr *a)
{
	int rc = 0;
	uint64_t gen = 0;
	struct tfs_attr now;
again:
	pthread_mutex_lock(&wb->lock);
	struct wb_ent *e = wb_ent_find(wb, path);
	if (e && e->file) {
		struct tfs_wb_file *f = e->file;
		if (mask)
			wb_file_stream_break(f); /* its upload's headers are fixed */
		set_by_mask(mask, a, &f->attr);
		f->seq++;
		if (f->writers == 0 || f->journaled) {
			rc = journal_file(wb, e, f);
			gen = e->gen;
		}
		pthread_mutex_unlock(&wb->lock);
		return rc == 0 && gen && wb->cfg.mode == TFS_WB_SYNC ? wait_upload(wb, path, gen)
								     : rc;
	}
	if (clean == NULL) {
		pthread_mutex_unlock(&wb->lock);
		if (!retired_meanwhile(wb, path, &now))
			return ENOENT;
		clean = &now;
		goto again; /* dirty again meanwhile?  Then that copy changes. */
	}
	/* A clean object: a META record (server-side copy with new headers). */
	struct tfs_attr na = *clean;
	struct tfs_wb_attr wa = tfs_wb_attr_of(clean);
	set_by_mask(mask, a, &wa);
	tfs_wb_attr_apply(&wa, &na);
	e = wb_ent_get(wb, path);
	rc = ENOMEM;
	if (e) {
		enum tfs_jop op = na.type == TFS_FT_DIR ? TFS_J_MKDIR : TFS_J_META;
		struct tfs_jrec r = {
			.op = op,
			.gen = e->gen + 1,
			.size = na.size,
			.closed_ms = tfs_wall_ms(),
			.path = (char *)path,
		};
		wb_jrec_set_attr(&r, &wa);
		rc = wb_journal(wb, &r, &na, "setattr", &gen);
		if (rc == 0)
			wb_schedule(wb, e, op, gen, 0);
		wb_ent_maybe_free(wb, e);
	}
	pthread_mutex_unlock(&wb->lock);
	return rc == 0 && wb->cfg.mode == TFS_WB_SYNC ? wait_upload(wb, path, gen) : rc;
}

bool tfs_wb_writable(const struct tfs_wb *wb)
{
	return wb->cfg.mode != TFS_WB_OFF;
}

/* ---- start-up ---- */

struct load_ctx {
	struct tfs_wb *wb;
	uint64_t *ids;
	size_t nids, cap;
	int err;
};

static int keep_id(struct load_ctx *lc, uint64_t id)
{
	if (lc->nids == lc->cap) {
		size_t nc = lc->cap ? 2 * lc->cap : 64;
		uint64_t *n = realloc(lc->ids, nc * sizeof(*n));
		if (n == NULL)
			return ENOMEM;
		lc->ids = n;
		lc->cap = nc;
	}
	lc->ids[lc->nids++] = id;
	if (id >= lc->wb->next_staging)
		lc->wb->next_staging = id + 1;
	return 0;
}

/* An OPEN record: its file waits in wb->unsettled for
 * tfs_wb_settle_open(); its staged copy is kept from the sweep. */
static int load_open(struct load_ctx *lc, const struct tfs_jrec *r)
{
	struct tfs_wb *wb = lc->wb;
	struct tfs_wb_file *f = calloc(1, sizeof(*f));
	if (f == NULL || (f->path = strdup(r->path)) == NULL) {
		free(f);
		return ENOMEM;
	}
	f->staging_id = r->staging_id;
	f->fd = -1;
	f->attr = wb_jrec_attr(r);
	f->open_rec = true;
	f->seq = 1; /* changed, not committed: the writer's close commits it */
	int sfd = wb_open_staged(wb, r->staging_id, O_RDONLY);
	struct stat st;
	if (sfd >= 0 && fstat(sfd, &st) == 0)
		f->size = (uint64_t)st.st_size;
	if (sfd >= 0)
		close(sfd);
	f->next_unsettled = wb->unsettled;
	wb->unsettled = f;
	return keep_id(lc, r->staging_id);
}

static int load_one(void *ctx, const struct tfs_jrec *r)
{
	struct load_ctx *lc = ctx;
	struct tfs_wb *wb = lc->wb;
	if (r->path == NULL) {
		tfs_err(wb->log, "writeback: an undecodable journal record was skipped");
		return 0;
	}
	if (r->op == TFS_J_OPEN)
		return load_open(lc, r);
	struct wb_ent *e = wb_ent_get(wb, r->path);
	if (e == NULL)
		return ENOMEM;
	e->gen = r->gen;
	if (r->op == TFS_J_PUT) {
		struct tfs_wb_file *f = calloc(1, sizeof(*f));
		if (f == NULL || (f->path = strdup(r->path)) == NULL) {
			free(f);
			return ENOMEM;
		}
		f->staging_id = r->staging_id;
		f->fd = -1;
		f->size = r->size;
		/* A writer may have written past the last commit before the
		 * daemon died: what its staged file holds counts. */
		int sfd = wb_open_staged(wb, r->staging_id, O_RDONLY);
		struct stat st;
		if (sfd >= 0 && fstat(sfd, &st) == 0)
			f->size = (uint64_t)st.st_size;
		if (sfd >= 0)
			close(sfd);
		f->attr = wb_jrec_attr(r);
		f->journaled = true;
		e->file = f;
		wb->staged += f->size;
		int rc = keep_id(lc, r->staging_id);
		if (rc)
			return rc;
	}
	e->has_job = true;
	e->op = r->op;
	e->bytes = r->op == TFS_J_PUT ? r->size : 0;
	e->due_ms = 0;
	wb->recovered++;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Move staged file `name` to <lost>/<owner>-<name>, never over an existing
 * file: daemons sharing the cache, or a second loss of the index, reuse
 * the same staging numbers (then .1, .2, ... is appended). */
static int move_lost(struct tfs_wb *wb, const char *lost, const char *name)
{
	const char *owner = strrchr(wb->stagedir, '/') + 1;
	char to[PATH_MAX + 64];
	for (int n = 0; n < 1000; n++) {
		if (n == 0)
			snprintf(to, sizeof(to), "%s/%s-%s", lost, owner, name);
		else
			snprintf(to, sizeof(to), "%s/%s-%s.%d", lost, owner, name, n);
		if (renameat2(wb->stagefd, name, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return errno;
	}
	return EEXIST;
}

/* Staged files no record refers to: kept in lost+found, never deleted,
 * since they may hold the only copy of someone's data (a journal lost
 * with a damaged index). */
static void sweep_staging(struct tfs_wb *wb, struct load_ctx *lc, const char *cache_dir)
{
	if (lc->nids > 1)
		qsort(lc->ids, lc->nids, sizeof(*lc->ids), cmp_u64);
	int dfd = dup(wb->stagefd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (d == NULL) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	char lost[PATH_MAX];
	snprintf(lost, sizeof(lost), "%s/lost+found", cache_dir);
	unsigned moved = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char *end;
		if (de->d_name[0] == '.')
			continue;
		uint64_t id = strtoull(de->d_name, &end, 16);
		if (*end != '\0' || strlen(de->d_name) != 16)
			continue;
		if (id >= wb->next_staging)
			wb->next_staging = id + 1;
		if (lc->nids && bsearch(&id, lc->ids, lc->nids, sizeof(id), cmp_u64))
			continue;
		struct stat st;
		if (fstatat(wb->stagefd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    st.st_size == 0) {
			unlinkat(wb->stagefd, de->d_name, 0);
			continue;
		}
		if (moved == 0 && mkdir(lost, 0700) < 0 && errno != EEXIST)
			break;
		if (move_lost(wb, lost, de->d_name) == 0)
			moved++;
	}
	closedir(d);
	if (moved)
		tfs_warn(wb->log,
			 "writeback: %u staged file(s) without a journal record moved to %s "
			 "(their upload may not have happened; nothing was deleted)",
			 moved, lost);
}

int tfs_wb_create(const struct tfs_writeback_config *cfg, const char *cache_dir, const char *owner,
		  MDB_env *env, struct tfs_meta *meta, struct tfs_backend *be,
		  struct tfs_layer *top, const struct tfs_log *log, struct tfs_wb **out)
{
	struct tfs_wb *wb = calloc(1, sizeof(*wb));
	if (wb == NULL)
		return ENOMEM;
	wb->cfg = *cfg;
	wb->env = env;
	wb->meta = meta;
	wb->be = be;
	wb->top = top;
	wb->log = log;
	wb->stagefd = -1;
	wb->next_staging = 1;
	pthread_mutex_init(&wb->lock, NULL);
	pthread_cond_init(&wb->work, NULL);
	pthread_cond_init(&wb->done, NULL);
	int rc = 0;
	MDB_txn *txn;
	rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc == 0) {
		rc = tfs_journal_open(txn, owner, &wb->j);
		if (rc == 0)
			rc = mdb_txn_commit(txn);
		else
			mdb_txn_abort(txn);
	}
	if (rc) {
		tfs_err(log, "writeback: cannot open the journal: %s",
			rc > 0 ? strerror(rc) : mdb_strerror(rc));
		rc = EIO;
		goto fail;
	}
	/* <cache>/staging/<owner>: daemons sharing the cache keep apart. */
	size_t dl = strlen(cache_dir) + sizeof("/staging/") + 2 * TFS_JOURNAL_OWNER_LEN;
	wb->stagedir = malloc(dl);
	if (wb->stagedir == NULL) {
		rc = ENOMEM;
		goto fail;
	}
	int n = snprintf(wb->stagedir, dl, "%s/staging/", cache_dir);
	for (int i = 0; i < TFS_JOURNAL_OWNER_LEN; i++)
		n += snprintf(wb->stagedir + n, dl - (size_t)n, "%02x", wb->j.owner[i]);
	/* Created 0700 if missing; refused if another user could have
	 * planted it or staging/ (lib/dirs.h). */
	rc = tfs_dir_secure(wb->stagedir, TFS_DIR_CREATE, log);
	if (rc)
		goto fail;
	wb->stagefd = open(wb->stagedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (wb->stagefd < 0) {
		rc = errno;
		tfs_err(log, "writeback: cannot open %s: %s", wb->stagedir, strerror(rc));
		goto fail;
	}
	wb->staging_cap = cfg->staging_size;
	if (wb->staging_cap == 0) {
		struct statvfs sv;
		if (fstatvfs(wb->stagefd, &sv) < 0) {
			rc = errno;
			tfs_err(log, "writeback: statvfs %s: %s", wb->stagedir, strerror(rc));
			goto fail;
		}
		wb->staging_cap = (uint64_t)((double)sv.f_blocks * (double)sv.f_frsize *
					     cfg->staging_size_pct / 100.0);
	}
	struct load_ctx lc = { .wb = wb };
	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) == 0) {
		rc = tfs_journal_each(txn, &wb->j, load_one, &lc);
		mdb_txn_abort(txn);
	} else {
		rc = EIO;
	}
	if (rc) {
		free(lc.ids);
		tfs_err(log, "writeback: cannot read the journal: %s", strerror(rc));
		goto fail;
	}
	sweep_staging(wb, &lc, cache_dir);
	free(lc.ids);
	if (wb->recovered)
		tfs_info(log,
			 "writeback: %" PRIu64 " pending change(s) from the journal queued again",
			 wb->recovered);
	if (cfg->mode != TFS_WB_OFF) {
		rc = wb_streams_start(wb);
		if (rc)
			goto fail;
		rc = tfs_workers_init(&wb->pool, TFS_WB_MAX_UPLOADERS, wb_uploader_main, wb);
		if (rc)
			goto fail;
		rc = tfs_workers_set(&wb->pool, &wb->lock, &wb->work, cfg->uploaders, NULL, NULL);
		if (rc) {
			tfs_err(log, "writeback: cannot start uploaders: %s", strerror(rc));
			goto fail;
		}
	}
	*out = wb;
	return 0;
fail:
	tfs_wb_destroy(wb);
	return rc;
}

void tfs_wb_settle_open(struct tfs_wb *wb, bool resumed)
{
	char lost[PATH_MAX];
	unsigned moved = 0, kept = 0;
	snprintf(lost, sizeof(lost), "%s", wb->stagedir);
	char *cut = strstr(lost, "/staging/");
	if (cut)
		snprintf(cut, sizeof(lost) - (size_t)(cut - lost), "/lost+found");
	pthread_mutex_lock(&wb->lock);
	while (wb->unsettled) {
		struct tfs_wb_file *f = wb->unsettled;
		wb->unsettled = f->next_unsettled;
		f->next_unsettled = NULL;
		struct wb_ent *e = wb_ent_get(wb, f->path);
		if (resumed && e && e->file == NULL && !e->has_job) {
			e->file = f;
			wb->staged += f->size;
			kept++;
			continue;
		}
		/* A fresh mount: no writer goes on.  The record goes, the
		 * bytes to lost+found. */
		MDB_txn *txn;
		if (e && !e->has_job && wb_txn_begin(wb, &txn) == 0)
			(void)wb_txn_end(wb, txn, tfs_journal_del(txn, &wb->j, f->path),
					 "unclosed file", f->path);
		char name[17];
		snprintf(name, sizeof(name), "%016" PRIx64, f->staging_id);
		if (mkdir(lost, 0700) < 0 && errno != EEXIST)
			tfs_err(wb->log, "writeback: cannot create %s: %s", lost, strerror(errno));
		else if (move_lost(wb, lost, name) == 0)
			moved++;
		if (e)
			wb_ent_maybe_free(wb, e);
		free(f->path);
		free(f);
	}
	pthread_mutex_unlock(&wb->lock);
	if (kept)
		tfs_info(wb->log,
			 "writeback: %u file(s) open for writing before the restart "
			 "kept for their writers",
			 kept);
	if (moved)
		tfs_warn(wb->log, "writeback: %u file(s) never closed by their writer moved to %s",
			 moved, lost);
}

void tfs_wb_destroy(struct tfs_wb *wb)
{
	if (wb == NULL)
		return;
	while (wb->unsettled) {
		/* Never settled (a read-only mount): they stay on disk, named
		 * by their records, for the next mount. */
		struct tfs_wb_file *f = wb->unsettled;
		wb->unsettled = f->next_unsettled;
		free(f->path);
		free(f);
	}
	pthread_mutex_lock(&wb->lock);
	wb->stop = true;
	pthread_cond_broadcast(&wb->work);
	pthread_cond_broadcast(&wb->done);
	pthread_mutex_unlock(&wb->lock);
	tfs_workers_stop(&wb->pool);
	wb_streams_stop(wb);
	for (size_t i = 0; i < NBUCKETS; i++) {
		struct wb_ent *e = wb->tab[i];
		while (e) {
			struct wb_ent *n = e->next;
			if (e->file) {
				/* Still journalled (or named by an OPEN record):
				 * the staged copy stays for the next mount. */
				bool keep = e->file->journaled || e->file->open_rec;
				wb_free_file(wb, e->file, !keep);
			}
			free(e->path);
			free(e);
			e = n;
		}
	}
	if (wb->stagefd >= 0)
		close(wb->stagefd);
	free(wb->stagedir);
	pthread_mutex_destroy(&wb->lock);
	pthread_cond_destroy(&wb->work);
	pthread_cond_destroy(&wb->done);
	free(wb);
}
