/* wb_state.c - write-back's shared state: the entry table and staged files.
 *
 * The table of paths with work or open files (struct wb_ent), the staged
 * files' names and their freeing, and the end of a file's stream.  Called
 * by writeback.c, wb_namespace.c, wb_upload.c, wb_stream_glue.c and
 * wb_txn.c; calls only upload_stream.c.  The state, the locking and the
 * contracts are in writeback_internal.h.
 */
#include "config.h"

#include "writeback_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* `f` is no longer written by appending only: cancel its stream.  Lock
 * held. */
void wb_file_stream_break(struct tfs_wb_file *f)
{
	f->appending = false;
	tfs_upload_stream_cancel(f->stream);
	f->stream = NULL;
}
