/* fake_layer.h - an inner cache layer for unit tests: deterministic bytes
 * per (key, etag, offset), call counting, optional errors and delays, and
 * reads held until the test releases them. */
#ifndef TFS_FAKE_LAYER_H
#define TFS_FAKE_LAYER_H

#include <stdatomic.h>

#include "layer.h"

struct fake_layer {
	atomic_int calls;
	atomic_int in_flight, max_in_flight;
	atomic_int fail_with; /* non-zero: read_block returns this */
	atomic_int delay_ms;
	atomic_int invalidations;
	atomic_int multi_calls; /* read_blocks calls */
	/* read_blocks reports each block to its progress as it is filled:
	 * with fail_with set, it reports `fail_after` blocks and then fails;
	 * while `gate` is 1 it waits after reporting the first block. */
	atomic_int fail_after;
	atomic_int gate;
	atomic_int at_gate; /* 1 while read_blocks waits at the gate */
	/* read_block of the object named `hold_key` (NULL: none) waits until
	 * `release` is 1; `held` is 1 once one has waited. */
	const char *_Atomic hold_key;
	atomic_int held, release;
};

/* The byte at `off` of object (key, etag). */
unsigned char fake_byte(const char *key, const char *etag, uint64_t off);
/* Fill buf with the `len` bytes at `off` of object (key, etag). */
void fake_fill(const char *key, const char *etag, uint64_t off, void *buf, size_t len);
/* A layer whose state is *f (borrowed). */
struct tfs_layer *fake_layer_create(struct fake_layer *f, uint64_t block_size);

#endif
