/* prefetch.h - background block fetches into the RAM tier, and read-ahead
 * for sequential readers: the one place that decides what is read ahead of
 * a reader (tfs_prefetch_sequential()).  The other prefetchers are asked
 * for explicitly and only use the queue: warm-up (src/warmup.c: named
 * files, filled whole) and sampler-order prefetch (vfs/follow.c: files
 * ahead of a reader in a known order).
 *
 * Jobs go into a bounded queue served by `workers` threads.  A job that
 * finds no free RAM budget is dropped (prefetch never waits for memory and
 * never evicts what a reader is using); a foreground read of a block being
 * prefetched waits for that fetch instead of issuing its own (the RAM
 * tier's shared fills).
 *
 * struct tfs_prefetch_config is filled and validated by src/conf.c.
 */
#ifndef TFS_PREFETCH_H
#define TFS_PREFETCH_H

#include <stdint.h>

#include "layer.h"

/* The most workers (the range of prefetch.workers). */
#define TFS_PREFETCH_MAX_WORKERS 256

struct tfs_prefetch_config {
	unsigned workers;       /* prefetch threads; 0 disables prefetching */
	uint64_t readahead;     /* bytes read ahead of a sequential reader */
	unsigned stream_gets;   /* runs (GETs when cold) in flight ahead of one
			       * sequential reader (0: 4) */
	uint64_t order_max;     /* order memory of all uids (the control file
			     * .tierfs-order: vfs/follow.c; not used here) */
	uint64_t order_max_uid; /* order memory of one uid; 0: half of order_max
				 * (vfs/follow.c; not used here) */
	uint64_t stall_ms;      /* a reader of an order that opened nothing of it for
			     * this long is idle (vfs/follow.c; not used here) */
};

struct tfs_prefetch;
struct json_object;

/* Start the workers over the RAM tier `ram` (not owned).  Returns 0 or
 * ENOMEM/EAGAIN (thread creation).  Call after daemonizing. */
int tfs_prefetch_create(const struct tfs_prefetch_config *cfg, struct tfs_layer *ram,
			const struct tfs_log *log, struct tfs_prefetch **out);

/* Read ahead blocks idx..idx+n-1 of `obj`: the ones neither cached nor
 * being filled are claimed in the RAM tier now, in the caller's thread
 * (tfs_ram_claim_run() with `flags`, 0 or TFS_RAM_ONCE for streamed
 * read-ahead), so a reader that comes for them next waits for this fetch;
 * each stretch of them (at most TFS_MAX_RUN blocks) is queued to be filled
 * with one request to the tiers below.  Returns 0 (also when everything
 * is present); EAGAIN when the queue is full, prefetching is off or the
 * budget is spent (the rest is not claimed); ENOMEM. */
int tfs_prefetch_run(struct tfs_prefetch *pf, const struct tfs_obj *obj, uint64_t idx, unsigned n,
		     int flags);

/* Read-ahead state of one reader (a file handle): zero it at the open. */
struct tfs_prefetch_stream {
	uint64_t next_off; /* where a sequential reader continues */
	uint64_t ra_next;  /* first block not yet handed to prefetch; 0 again
			    * when the handle moves to another version */
};

/* Read-ahead for the read of [off, end) of `obj` by the reader of stream
 * `s`.  The kernel sends its own readahead as parallel requests that may
 * arrive slightly out of order, so a read counts as sequential when it
 * starts near where the last one ended.  The window starts at the read's
 * own first block and is refilled in runs of half cfg.readahead, each
 * fetched with one request to the tiers below (one GET when cold) whose
 * blocks are handed out as they arrive.  It spans cfg.stream_gets runs (so
 * that many GETs are in flight for one reader: a remote store gives each
 * stream a bandwidth of its own), and at least twice cfg.readahead, the
 * kernel's own window, so the fetches stay ahead of the kernel's requests.
 * The blocks are claimed (tfs_prefetch_run()) before the read itself asks
 * for its block, so the kernel's parallel requests wait for the run that
 * covers them instead of racing it with GETs of their own.  The read's
 * own block, when it starts a stream, is cached like any block read; the
 * rest is streamed (TFS_RAM_ONCE).  A run refused (EAGAIN) is asked for
 * again by the next read.  No-op when `pf` is NULL or cfg.readahead 0.
 * The caller serializes the calls on one stream (the handle's lock). */
void tfs_prefetch_sequential(struct tfs_prefetch *pf, struct tfs_prefetch_stream *s,
			     const struct tfs_obj *obj, uint64_t off, uint64_t end);

/* Reload: run `workers` threads (0 .. TFS_PREFETCH_MAX_WORKERS; 0 stops
 * prefetching: new runs are refused with EAGAIN).  Extra threads leave
 * after their current job; the queue keeps its size.  Returns 0 or the
 * pthread_create() error (logged; fewer workers run).  Thread safe. */
int tfs_prefetch_set_workers(struct tfs_prefetch *pf, unsigned workers);

struct tfs_stattab;

/* The rows of the "prefetch" stats (statdef.h): what tfs_prefetch_stats()
 * adds, and the metrics over them. */
extern const struct tfs_stattab tfs_prefetch_stattab;

/* Add the "prefetch" object to `out`: workers, queued, done, dropped,
 * failed, pending (jobs queued now), active (jobs being filled now) and
 * active_max (the most filled at once since the start). */
void tfs_prefetch_stats(struct tfs_prefetch *pf, struct json_object *out);

/* Stop the workers (queued jobs are dropped) and free.  NULL is a no-op. */
void tfs_prefetch_destroy(struct tfs_prefetch *pf);

#endif
