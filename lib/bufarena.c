/* bufarena.c - fixed-size buffers carved from huge-page-sized chunks. */
#include "config.h"

#include "bufarena.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_SIZE ((size_t)2 << 20)

void tfs_bufarena_init(struct tfs_bufarena *a, size_t bufsize)
{
	*a = (struct tfs_bufarena){ .bufsize = bufsize };
	a->chunk = bufsize > HUGE_SIZE ? bufsize : HUGE_SIZE;
}

/* Append p to a growable array.  Returns 0 or -1 (ENOMEM). */
static int push(void ***arr, size_t *n, size_t *cap, void *p)
{
	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		void **na = realloc(*arr, ncap * sizeof(*na));
		if (na == NULL)
			return -1;
		*arr = na;
		*cap = ncap;
	}
	(*arr)[(*n)++] = p;
	return 0;
}

/* Map one chunk aligned to HUGE_SIZE: map more, unmap the ends. */
static char *map_chunk(size_t chunk)
{
	size_t len = chunk + HUGE_SIZE;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uintptr_t start = ((uintptr_t)p + HUGE_SIZE - 1) & ~(uintptr_t)(HUGE_SIZE - 1);
	char *c = (char *)start;
	if (c > p)
		munmap(p, (size_t)(c - p));
	if (c + chunk < p + len)
		munmap(c + chunk, (size_t)(p + len - (c + chunk)));
	(void)madvise(c, chunk, MADV_HUGEPAGE); /* a hint: EINVAL without THP */
	return c;
}

void *tfs_bufarena_get(struct tfs_bufarena *a)
{
	if (a->nspare)
		return a->spare[--a->nspare];
	char *c = map_chunk(a->chunk);
	if (c == NULL)
		return NULL;
	if (push(&a->chunks, &a->nchunks, &a->chunks_cap, c) != 0) {
		munmap(c, a->chunk);
		return NULL;
	}
	/* Hand out the first buffer; the others wait, costing nothing. */
	for (size_t off = a->chunk; off > a->bufsize; off -= a->bufsize)
		if (push(&a->spare, &a->nspare, &a->spare_cap, c + off - a->bufsize) != 0)
			break; /* that address is lost, not memory */
	return c;
}

void tfs_bufarena_put(struct tfs_bufarena *a, void *buf)
{
	(void)madvise(buf, a->bufsize, MADV_DONTNEED);
	(void)push(&a->spare, &a->nspare, &a->spare_cap, buf);
}

void tfs_bufarena_destroy(struct tfs_bufarena *a)
{
	for (size_t i = 0; i < a->nchunks; i++)
		munmap(a->chunks[i], a->chunk);
	free(a->chunks);
	free(a->spare);
	*a = (struct tfs_bufarena){ 0 };
}
