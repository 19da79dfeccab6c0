/* vfs_state.h - the file core's state and its handles, shared by the
 * vfs/ files and, while the carve of issue 33 goes on, by the handlers of
 * src/fs*.c that still work on them directly (the namespace and write
 * handlers).  Each handler moved into vfs/ removes uses of it from src/.
 */
#ifndef TFS_VFS_STATE_H
#define TFS_VFS_STATE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "follow.h"
#include "prefetch.h"
#include "vfs.h"
#include "writeback.h"

/* File handles.  The kernel's fh is never a pointer: it is a value this
 * daemon looks up in v->fhs, (cfg.generation << 32) | a counter (never 0),
 * so a value given out by an earlier daemon of the mount (another
 * generation) is never taken for one of ours, and a value that is not in
 * the table is never dereferenced.  On a resumed daemon (cfg.resumed) a
 * request with an unknown fh gets a handle rebuilt from its node and open
 * flags, entered under the old value until its RELEASE.  Both kinds of
 * handle (struct tfs_vfs_handle, and the FUSE adapter's directory
 * handles) begin with this entry. */
#define TFS_VFS_FH_BUCKETS 4096
struct tfs_vfs_ent {
	uint64_t id;  /* the fh value the kernel holds */
	bool dir;     /* a directory handle (the adapter's), else a struct tfs_vfs_handle */
	bool rebuilt; /* made for an fh of an earlier daemon */
	struct tfs_vfs_ent *next;
};

/* Names busy at once: two per rename in flight (16 FUSE threads). */
#define TFS_VFS_NS_BUSY 32

struct tfs_vfs {
	struct tfs_fs_config cfg;
	struct tfs_itable *itable;
	struct tfs_nodes *nodes; /* the persisted node table, or NULL (no mountpoint) */
	struct tfs_meta *meta;
	struct tfs_layer *top;
	struct tfs_prefetch *pf;
	struct tfs_wb *wb;                      /* NULL: read-only */
	struct tfs_backend *be;                 /* for renames of clean objects */
	struct tfs_follow *follow;              /* sampler-order prefetch, or NULL */
	const struct tfs_manifest_scope *scope; /* for the control file */
	const struct tfs_log *log;
	uint64_t block_size;
	_Atomic uint64_t ttl_ms;   /* cache.metadata_ttl, changed by tfs_vfs_set_ttl() */
	struct tfs_attr root_attr; /* the root, and "." / ".." in listings */
	pthread_mutex_t ns_lock;   /* serializes namespace changes (create, rename, ...) */
	/* Names a rename of a clean object is copying in the bucket with
	 * ns_lock released (src/fs_write.c, ns_wait()); ns_lock guards them. */
	const char *ns_busy[TFS_VFS_NS_BUSY];
	pthread_cond_t ns_cond;                      /* broadcast when names leave ns_busy */
	pthread_mutex_t fh_lock;                     /* fhs, fh_count, fh_next */
	struct tfs_vfs_ent *fhs[TFS_VFS_FH_BUCKETS]; /* every handle given to the
						      * kernel and not released,
						      * by fh value */
	uint64_t fh_count;
	uint32_t fh_next; /* low half of the next fh value (cfg.generation is the high) */
};

/* A handle of the control file TFS_FOLLOW_FILE: what was written, and
 * its commit.  The handle's `lock` protects `busy`, `waiter`, `set` and
 * `done`. */
struct tfs_vfs_order {
	char *buf;                     /* what was written: len bytes, cap */
	size_t len, cap;               /* allocated, counted to uid (tfs_follow_charge()) */
	uid_t uid;                     /* the opener's */
	struct tfs_follow_owner owner; /* the process that opened it */
	bool writer;                   /* opened for writing */
	bool set;                      /* a commit set its order */
	size_t done;                   /* bytes of buf the last commit set */
	bool busy;                     /* handed to the builder: no write until done */
	void *waiter;                  /* the close waiting for the builder (the adapter's) */
	struct tfs_follow_request req; /* to the builder */
	struct tfs_vfs *v;
};

/* What an open file is.  The tag says which of the handle's fields mean
 * something; a clean handle becomes a staged one (never back) when the
 * file is written through this mount while it is open. */
enum tfs_vfs_kind {
	TFS_VFS_CLEAN,  /* reads one version through the cache stack: obj, ra */
	TFS_VFS_STAGED, /* reads (and, if writer, writes) the staged copy wf */
	TFS_VFS_ORDER,  /* the control file: order */
};

/* An open file. */
struct tfs_vfs_handle {
	struct tfs_vfs_ent ent; /* first: v->fhs holds &ent */
	enum tfs_vfs_kind kind; /* under lock: CLEAN may become STAGED */
	pthread_mutex_t lock;   /* protects kind, wf, obj, key, ra and order's state */
	char *key;              /* the path at open, or after the last version move */
	bool writer;            /* opened for writing (holds a writer count) */
	/* TFS_VFS_CLEAN (obj also read by fstat() once the name is gone): */
	struct tfs_obj obj;
	char **retired_keys; /* earlier keys (reads in flight may still use them) */
	size_t n_retired;
	struct tfs_prefetch_stream ra; /* read-ahead (cache/prefetch.h) */
	/* TFS_VFS_STAGED: */
	struct tfs_wb_file *wf; /* a reference */
	/* TFS_VFS_ORDER (order_file.c): */
	struct tfs_vfs_order *order;
};

/* ---- handle.c ---- */

/* Allocate and free file handles.  The core keeps them in a table by fh
 * value (v->fhs, under v->fh_lock): the kernel sends no RELEASE for
 * files still open when the connection ends (the last close after a lazy
 * unmount, or the daemon stopped), and the adapter's destroy releases
 * those.  tfs_vfs_handle_new() makes a clean handle of `key`, entered
 * under a new fh value (h->ent.id); it returns NULL when out of memory.
 * tfs_vfs_handle_free() takes it out of the table and releases the
 * handle's staged copy (committing a writer's file only if h->writer: a
 * writer's last close) and its control-file buffer. */
struct tfs_vfs_handle *tfs_vfs_handle_new(struct tfs_vfs *v, const char *key);
void tfs_vfs_handle_free(struct tfs_vfs *v, struct tfs_vfs_handle *h);
/* Make clean handle `h` a staged one reading `wf` (a reference, handed
 * over).  The caller holds h->lock, or has not given `h` out yet. */
void tfs_vfs_handle_stage(struct tfs_vfs_handle *h, struct tfs_wb_file *wf);
/* The staged copy handle `h` reads, if any (NULL for a clean handle that
 * stays clean, and for the control file).  A clean handle switches to
 * the staged copy of `cur` (its path now; NULL: its name is gone) once
 * the file is written through this mount: it then sees those writes at
 * once, as on a local filesystem, and keeps that reference until it is
 * freed. */
struct tfs_wb_file *tfs_vfs_handle_staged(struct tfs_vfs *v, struct tfs_vfs_handle *h,
					  const char *cur);
/* Enter `e` (not in the table) under a new fh value, set in e->id.
 * Cannot fail. */
void tfs_vfs_fh_enter(struct tfs_vfs *v, struct tfs_vfs_ent *e);
/* Move `e` (in the table) to fh value `id` (an earlier daemon's), unless
 * another handle holds `id` already: then `e` stays where it was and that
 * handle is returned (the caller frees its own); else NULL. */
struct tfs_vfs_ent *tfs_vfs_fh_rekey(struct tfs_vfs *v, struct tfs_vfs_ent *e, uint64_t id);
/* The handle entered under `id`, or NULL.  The kernel sends no RELEASE
 * while a request on the handle is in flight, so it stays valid for the
 * request. */
struct tfs_vfs_ent *tfs_vfs_fh_find(struct tfs_vfs *v, uint64_t id);
/* Take `e` out of the table (a missing one is fine). */
void tfs_vfs_fh_remove(struct tfs_vfs *v, struct tfs_vfs_ent *e);
/* Any one handle in the table, or NULL. */
struct tfs_vfs_ent *tfs_vfs_fh_any(struct tfs_vfs *v);

/* ---- order_file.c: the control file TFS_FOLLOW_FILE (follow.h) ---- */

/* Whether `path` is the control file's (at the root).  It exists only
 * while v->follow is set (tfs_vfs_set_follow()): callers check both. */
bool tfs_vfs_is_order_file(const char *path);
/* Its attributes: a file of mode 0644 owned by the mount's uid (cfg.uid),
 * empty, with the mount's time. */
void tfs_vfs_order_attr(const struct tfs_vfs *v, struct tfs_attr *a);
/* Make `h` (a new handle) a control-file handle of opener `uid` and
 * thread `tid` (0: unknown), opened for writing when `writer`.  Returns 0
 * or ENOMEM. */
int tfs_vfs_order_init(struct tfs_vfs *v, struct tfs_vfs_handle *h, uid_t uid, pid_t tid,
		       bool writer);
/* Append `size` bytes written to control-file handle `h`; the memory it
 * allocates (in steps of 4 KiB) is counted against the order memory of
 * the opener's uid (follow.h) until the handle is freed.  Returns 0,
 * EFBIG (beyond prefetch.order_max or the uid's share; nothing is kept),
 * EBUSY (its close is being committed) or ENOMEM. */
int tfs_vfs_order_add(struct tfs_vfs *v, struct tfs_vfs_handle *h, const char *buf, size_t size);
/* A close of handle `h`, `waiter` the adapter's (its flush request): hand
 * what it collected to the order builder (tfs_follow_submit()), which
 * sets the order of the process that opened it (nothing collected
 * removes that process's order) and then calls `done` (in its thread)
 * with 0, EINVAL (not one valid entry in a non-empty file), EFBIG or
 * ENOMEM; `done` calls tfs_vfs_order_committed().  Only a handle opened
 * for writing commits, and only when it has bytes the last commit did not
 * see, or has not committed yet, and is not committing now (a close of a
 * duplicate fd commits nothing new).  Returns EINPROGRESS (`done` will
 * be called), 0 (nothing to commit) or ESHUTDOWN. */
int tfs_vfs_order_commit(struct tfs_vfs *v, struct tfs_vfs_handle *h, void *waiter,
			 void (*done)(struct tfs_follow_request *r, int rc));
/* The commit of `h` (r->ctx of `done`) ended with `rc`: writes are taken
 * again, and with rc 0 the bytes it set are remembered.  Returns the
 * waiter, the last use of `h` before the adapter answers it (once
 * answered, the handle may be released). */
void *tfs_vfs_order_committed(struct tfs_vfs_handle *h, int rc);
/* Free handle `h`'s buffer (h->order, non-NULL, not committing) and give
 * its memory back; h->order becomes NULL.  Called by
 * tfs_vfs_handle_free(). */
void tfs_vfs_order_free(struct tfs_vfs *v, struct tfs_vfs_handle *h);

/* ---- write.c ---- */

/* The version in the bucket behind attributes `a`, or NULL for a file
 * that exists only as a staged copy (which has no ETag).  A LOCAL entry
 * with an ETag is a bucket object with pending attribute changes.  Pure. */
const struct tfs_attr *tfs_vfs_in_bucket(const struct tfs_attr *a);
/* Stage `path` for writing (tfs_wb_open_write(): a reference and a
 * writer count in *out); `a` is its current state, `trunc` O_TRUNC.
 * Returns 0 or write-back's error (ENOSPC, EIO...). */
int tfs_vfs_stage(struct tfs_vfs *v, const char *path, const struct tfs_attr *a, bool trunc,
		  struct tfs_wb_file **out);
/* truncate(2) of `path` (current attributes `a`) to `size`: through
 * handle `h` when it writes the file (ftruncate), else through a staging
 * of its own, committed at once.  Returns 0 or write-back's error. */
int tfs_vfs_truncate(struct tfs_vfs *v, const char *path, const struct tfs_attr *a,
		     struct tfs_vfs_handle *h, uint64_t size);

/* Write `size` bytes at `off` through handle `h` for caller `uid`: into a
 * writer's staged copy (clearing the set-user-ID bit, and set-group-ID of
 * a group-executable file, unless `uid` is root, as the kernel does for
 * local filesystems), or appended to the control file's text whatever
 * the offset (tfs_vfs_order_add()).  Returns 0 (all written), EBADF (not
 * opened for writing), EFBIG (beyond TFS_VFS_MAX_FILE), ENOSPC (staging
 * full), EIO, or the control file's errors. */
int tfs_vfs_write(struct tfs_vfs *v, struct tfs_vfs_handle *h, const char *buf, size_t size,
		  uint64_t off, uid_t uid);
/* A close of handle `h` (FLUSH): a writer's staged copy is committed
 * (journalled; uploaded first in sync mode: tfs_wb_commit()); the control
 * file's text is handed to the order builder (tfs_vfs_order_commit(),
 * with `waiter` and `done`).  Returns 0, EINPROGRESS (`done` will be
 * called) or the commit's error (logged). */
int tfs_vfs_flush(struct tfs_vfs *v, struct tfs_vfs_handle *h, void *waiter,
		  void (*done)(struct tfs_follow_request *r, int rc));
/* fsync(): the staged copy `h` reads, if any, committed durably.
 * Returns 0 or the commit's error (logged). */
int tfs_vfs_fsync(struct tfs_vfs *v, struct tfs_vfs_handle *h);
/* A flush or fsync whose fh an earlier daemon gave out (no handle is
 * rebuilt without the open flags): commit the staged copy of node
 * `ino`'s file, if it has one and a name, as its writer's handle would
 * (`durable`: fsync).  Returns 0 or the commit's error. */
int tfs_vfs_commit_node(struct tfs_vfs *v, uint64_t ino, bool durable);

#endif
