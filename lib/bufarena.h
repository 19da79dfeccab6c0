/* bufarena.h - fixed-size buffers carved from huge-page-sized chunks.
 *
 * The RAM tier recycles its block buffers, but every buffer it has never
 * used before costs a page fault per 4 KiB on first touch (256 for a
 * 1 MiB block), and the kernel pins a buffer's pages one by one each time
 * it copies a FUSE reply out of it.  An arena maps chunks of
 * max(2 MiB, bufsize) bytes aligned to 2 MiB and asks for transparent huge
 * pages on them (MADV_HUGEPAGE; honoured when the kernel's THP setting is
 * "madvise" or "always"), and hands out the chunk's buffers one at a time.
 *
 * Memory: a buffer that was never handed out costs nothing; a released
 * buffer's memory is given back at once (MADV_DONTNEED), its address is
 * kept for the next tfs_bufarena_get().  Address space is only unmapped by
 * tfs_bufarena_destroy(), so it stays at the peak number of buffers.  With
 * huge pages a chunk holding one used buffer may keep its whole huge page
 * until the kernel splits it on release, so resident memory can briefly
 * exceed the buffers in use by up to one chunk per chunk in use.
 *
 * Not thread safe: the caller serialises every call (the RAM tier's lock).
 */
#ifndef TFS_BUFARENA_H
#define TFS_BUFARENA_H

#include <stddef.h>

struct tfs_bufarena {
	size_t bufsize, chunk; /* chunk: bytes mapped at a time */
	void **chunks;         /* mapped chunks, for destroy */
	size_t nchunks, chunks_cap;
	void **spare; /* buffers without memory, ready to hand out */
	size_t nspare, spare_cap;
};

/* Set up an arena of buffers of `bufsize` bytes (a power of two, at least
 * 4 KiB).  Maps nothing yet.  Cannot fail. */
void tfs_bufarena_init(struct tfs_bufarena *a, size_t bufsize);

/* A buffer of bufsize bytes, aligned to 4 KiB (to bufsize when it is 2 MiB
 * or less), zero-filled the first time it is touched.  Returns NULL on
 * ENOMEM (mmap or the bookkeeping failed). */
void *tfs_bufarena_get(struct tfs_bufarena *a);

/* Give a buffer from this arena back: its memory is released now, its
 * address is reused.  Cannot fail (a failed bookkeeping allocation leaks
 * the address, not memory). */
void tfs_bufarena_put(struct tfs_bufarena *a, void *buf);

/* Unmap everything.  Every buffer handed out becomes invalid. */
void tfs_bufarena_destroy(struct tfs_bufarena *a);

#endif
