/* ram.h - the RAM tier: a block cache with a hard byte budget.
 *
 * Every block buffer in the daemon comes from this tier: cached blocks,
 * blocks being filled from the SSD tier or the backend, and read-ahead.
 * Their total never exceeds ram.size.  A quarter of the budget (at least
 * 8 blocks) is kept for blocks in flight, so that cached data never has to
 * be evicted just to make room for a read under the epoch policy.
 *
 * Concurrent readers of the same block share one fill: the first reader
 * fetches from the inner layer, the others wait for it.
 *
 * struct tfs_ram_config is filled and validated by src/conf.c ([ram]).
 */
#ifndef TFS_RAM_H
#define TFS_RAM_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "layer.h"

struct tfs_stattab;

/* The rows of the tier's "ram" stats (statdef.h): what its layer stats
 * add, and the metrics over them. */
extern const struct tfs_stattab tfs_ram_stattab;

struct tfs_ram_config {
	uint64_t size; /* bytes of block data held in memory (>= 16 MiB) */
};

/* Create the tier on top of `inner`.  Returns 0, EINVAL (budget smaller
 * than 4 blocks) or ENOMEM.  On success the tier owns `inner`; on failure
 * the caller still does. */
int tfs_ram_create(const struct tfs_ram_config *cfg, const struct tfs_cache_config *cc,
		   struct tfs_layer *inner, const struct tfs_log *log, struct tfs_layer **out);

/* Reload: change the budget to `size` bytes (>= 4 blocks).  A larger
 * budget wakes readers waiting for memory; a smaller one frees pooled
 * buffers and evicts cached blocks at once, oldest first and whatever the
 * policy; blocks in use are freed when released (until then more than
 * `size` may be allocated).  The hash table keeps its size.  Returns 0,
 * EINVAL (below 4 blocks) or ENOMEM (the old budget stays).  Thread safe
 * (the tier's lock). */
int tfs_ram_set_size(struct tfs_layer *ram, uint64_t size);

/* The budget in bytes: ram.size, as last set.  Thread safe (the tier's
 * lock). */
uint64_t tfs_ram_size(struct tfs_layer *ram);

/* A referenced block: valid until tfs_ram_put(). */
struct tfs_ram_block;
const void *tfs_ram_block_data(const struct tfs_ram_block *b);
size_t tfs_ram_block_len(const struct tfs_ram_block *b);

enum tfs_ram_get_flags {
	TFS_RAM_WAIT = 0,        /* wait for budget when every buffer is in use */
	TFS_RAM_NOWAIT = 1,      /* prefetch: fail with EAGAIN instead of waiting */
	TFS_RAM_ONCE = 2,        /* fill_run: streamed read-ahead, kept only until a
			     * reader consumes it (tfs_ram_release(.., true)),
			     * so one big file streamed through does not flush
			     * the tier and its buffers are recycled at once */
	TFS_RAM_PASS = 4,        /* fill_run: fill the tiers below (warm-up into the
			     * SSD tier) without keeping the blocks in RAM;
			     * readers waiting on the fill still get them */
	TFS_RAM_SKIP = 8,        /* claim_run: start after the leading blocks that
			     * are cached or being filled */
	TFS_RAM_BACKGROUND = 16, /* get: not a reader of the mount (warm-up),
				  * so not counted by tfs_ram_yield() */
	TFS_RAM_LINGER = 32,     /* with ONCE (claim_run, fill_run): a consumed
				  * block stays cached, as a block a reader
				  * fetched itself, while the cached bytes are
				  * at most half the cached share; beyond that
				  * it is dropped as ONCE says, so read-ahead
				  * keeps its room */
};

/* Foreground priority for background fetches (warm-up): wait while any
 * foreground tfs_ram_get() (one without TFS_RAM_BACKGROUND) is waiting for
 * data, from its own fetch or another's fill, but at most `max_ms`, so a
 * steady stream of misses slows warm-up down without stopping it.
 * Returns true if it had to wait (counted as background_yields).  Thread
 * safe; cannot fail. */
bool tfs_ram_yield(struct tfs_layer *ram, unsigned max_ms);

/* Get block `idx` of `obj`, filling it from the inner layer on a miss.
 * Returns 0 and a referenced *out; EAGAIN (NOWAIT and no free budget);
 * or the inner layer's error (ESTALE, ENOENT, EIO, ENOMEM), in which case
 * nothing is cached. */
int tfs_ram_get(struct tfs_layer *ram, const struct tfs_obj *obj, uint64_t idx, int flags,
		struct tfs_ram_block **out);
/* Prefetch: fill the blocks first.. of obj that are neither cached nor
 * being filled, up to n (at most TFS_MAX_RUN) and as far as the budget
 * allows without waiting, with one read_blocks() on the inner layer (one
 * GET for a cold run), handing each block to its waiters as it arrives.
 * Stops at the first block already present.
 * `flags` is 0, TFS_RAM_ONCE (with or without TFS_RAM_LINGER) or
 * TFS_RAM_PASS.  *filled (may be NULL) gets
 * the number of blocks it claimed (first..first+*filled-1).  Returns 0,
 * EAGAIN (nothing to do: the first block is present or no budget), or the
 * inner layer's error.  Takes no reference. */
int tfs_ram_fill_run(struct tfs_layer *ram, const struct tfs_obj *obj, uint64_t first, unsigned n,
		     int flags, unsigned *filled);

/* Read-ahead in two steps: claim blocks now, in the reader's thread, so a
 * reader that comes next waits for them instead of fetching them again;
 * fill them later on a worker.
 *
 * tfs_ram_claim_run() claims, as tfs_ram_fill_run() would fill, the blocks
 * first.. of obj up to n (at most TFS_MAX_RUN) that are neither cached nor
 * being filled, as far as the budget allows without waiting, stopping at
 * the first block present; with TFS_RAM_SKIP it first skips the blocks
 * present at the start.  Claimed blocks are in state FILLING: readers wait
 * for them.  `flags` as for fill_run, plus TFS_RAM_SKIP.  Returns 0 and
 * *out (the caller owns it and must hand it to exactly one of
 * tfs_ram_fill_claim() or tfs_ram_cancel_claim()), or 0 and *out NULL
 * when every block of the range is present (SKIP); EAGAIN when the first
 * block to claim is present or there is no budget; EINVAL; ENOMEM. */
struct tfs_ram_claim;
int tfs_ram_claim_run(struct tfs_layer *ram, const struct tfs_obj *obj, uint64_t first, unsigned n,
		      int flags, struct tfs_ram_claim **out);
/* The claimed blocks: first.. first+len-1. */
uint64_t tfs_ram_claim_first(const struct tfs_ram_claim *c);
unsigned tfs_ram_claim_len(const struct tfs_ram_claim *c);
/* Fill a claim with one read_blocks() on the inner layer (one GET when
 * cold); each block is handed to its waiters as soon as it arrives.
 * Frees the claim.  Returns 0 or the inner layer's error, after which the
 * blocks that arrived whole stay cached and the others are dropped. */
int tfs_ram_fill_claim(struct tfs_layer *ram, struct tfs_ram_claim *c);
/* Give a claim up unfilled (a full queue, shutdown): its waiters fetch the
 * blocks themselves.  Frees the claim.  Cannot fail. */
void tfs_ram_cancel_claim(struct tfs_layer *ram, struct tfs_ram_claim *c);

/* Drop a reference.  Cannot fail. */
void tfs_ram_put(struct tfs_layer *ram, struct tfs_ram_block *b);
/* Drop a reference; `consumed` says the caller read the block to its end,
 * which frees a TFS_RAM_ONCE block (other holders keep their references
 * valid) or, for a TFS_RAM_LINGER one while there is room, makes it an
 * ordinary cached block (counted as stream_kept).  Cannot fail. */
void tfs_ram_release(struct tfs_layer *ram, struct tfs_ram_block *b, bool consumed);
/* True when the block is cached or being filled (no reference taken). */
bool tfs_ram_has(struct tfs_layer *ram, const struct tfs_obj *obj, uint64_t idx);

#endif
