/* wb_due.c - when a write-back job is due: queueing a job in memory,
 * the recent uploads a rewrite is timed against, and the names that say
 * a file is temporary (renamed into place next).  Lock held where
 * writeback_internal.h says so.
 */
#include "config.h"

#include "writeback_internal.h"

#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "hash.h"

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
