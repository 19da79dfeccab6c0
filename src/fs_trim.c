/* fs_trim.c - keep the inode table within mount.max_inodes: above it, ask
 * the kernel to drop dentries (inode.h, tfs_itable_set_max()).
 *
 * A thread of its own sends the invalidations: the kernel takes the
 * parent directory's lock for each, which a FUSE request in that
 * directory (a lookup) may hold until its reply, so a FUSE worker must not
 * wait for it. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs_internal.h"

/* Names invalidated per round, and the pause between rounds: the kernel's
 * FORGETs for a round arrive after its notifications, so the count is
 * looked at again only after them. */
#define TRIM_BATCH 512
#define TRIM_PAUSE_MS 20
/* Idle: how often the count is looked at. */
#define TRIM_IDLE_MS 200

static void sleep_ms(struct tfs_fs *fs, unsigned ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&fs->trim_lock);
	if (!fs->trim_stop)
		pthread_cond_timedwait(&fs->trim_cond, &fs->trim_lock, &ts);
	pthread_mutex_unlock(&fs->trim_lock);
}

static bool stopping(struct tfs_fs *fs)
{
	pthread_mutex_lock(&fs->trim_lock);
	bool s = fs->trim_stop;
	pthread_mutex_unlock(&fs->trim_lock);
	return s;
}

/* One round: invalidate up to min(excess, TRIM_BATCH) names.  Returns
 * how many were picked. */
static size_t trim_round(struct tfs_fs *fs, struct tfs_itable_victim *v)
{
	uint64_t excess = tfs_itable_excess(fs->v->itable);
	if (excess == 0)
		return 0;
	size_t n =
		tfs_itable_pick_trim(fs->v->itable, v, excess < TRIM_BATCH ? excess : TRIM_BATCH);
	for (size_t i = 0; i < n && !stopping(fs); i++) {
		int rc = fuse_lowlevel_notify_inval_entry(fs->se, v[i].parent, v[i].name,
							  strlen(v[i].name));
		/* ENOENT: the kernel no longer has the entry (forgotten
		 * meanwhile); anything else ends the trimming (the session
		 * is going). */
		if (rc && rc != -ENOENT) {
			tfs_debug(fs->log, "fuse: invalidating '%s' in node %" PRIu64 ": %s",
				  v[i].name, v[i].parent, strerror(-rc));
			return 0;
		}
	}
	return n;
}

static void *trim_main(void *arg)
{
	struct tfs_fs *fs = arg;
	struct tfs_itable_victim *v = malloc(TRIM_BATCH * sizeof(*v));
	if (v == NULL) {
		tfs_warn(fs->log, "fuse: no memory for the inode trimmer: mount.max_inodes "
				  "is not enforced");
		return NULL;
	}
	while (!stopping(fs))
		sleep_ms(fs, trim_round(fs, v) ? TRIM_PAUSE_MS : TRIM_IDLE_MS);
	free(v);
	return NULL;
}

int tfs_fs_trim_start(struct tfs_fs *fs)
{
	if (fs->v->cfg.max_inodes == 0 || fs->se == NULL)
		return 0;
	tfs_itable_set_max(fs->v->itable, fs->v->cfg.max_inodes);
	fs->trim_stop = false;
	int rc = pthread_create(&fs->trim_thread, NULL, trim_main, fs);
	if (rc) {
		tfs_warn(fs->log,
			 "fuse: cannot start the inode trimmer (%s): mount.max_inodes "
			 "is not enforced",
			 strerror(rc));
		return rc;
	}
	fs->trim_started = true;
	return 0;
}

void tfs_fs_trim_stop(struct tfs_fs *fs)
{
	if (!fs->trim_started)
		return;
	pthread_mutex_lock(&fs->trim_lock);
	fs->trim_stop = true;
	pthread_cond_signal(&fs->trim_cond);
	pthread_mutex_unlock(&fs->trim_lock);
	pthread_join(fs->trim_thread, NULL);
	fs->trim_started = false;
}
