/* test_bufarena.c - buffers from huge-page-sized chunks: alignment, reuse,
 * and memory given back on release. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bufarena.h"

#define MIB ((size_t)1 << 20)

/* Pages of [p, p + len) that are resident. */
static size_t resident(void *p, size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = len / pg, res = 0;
	unsigned char vec[1024];
	cr_assert_leq(n, sizeof(vec));
	cr_assert_eq(mincore(p, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		res += vec[i] & 1;
	return res;
}

Test(bufarena, buffers_are_aligned_distinct_and_reused)
{
	struct tfs_bufarena a;
	tfs_bufarena_init(&a, MIB);
	char *b[5];
	for (int i = 0; i < 5; i++) {
		b[i] = tfs_bufarena_get(&a);
		cr_assert_not_null(b[i]);
		cr_assert_eq((uintptr_t)b[i] % MIB, 0, "buffer %d not aligned to its size", i);
		memset(b[i], i + 1, MIB);
	}
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++)
			cr_assert(i == j || b[i] + MIB <= b[j] || b[j] + MIB <= b[i],
				  "%d and %d overlap", i, j);
	for (int i = 0; i < 5; i++)
		cr_assert(b[i][0] == i + 1 && b[i][MIB - 1] == i + 1, "buffer %d was overwritten",
			  i);
	cr_assert_eq(a.nchunks, 3, "2 MiB chunks of two 1 MiB buffers");
	tfs_bufarena_put(&a, b[2]);
	cr_assert_eq(tfs_bufarena_get(&a), b[2], "a released address is reused");
	tfs_bufarena_destroy(&a);
}

Test(bufarena, released_memory_goes_back)
{
	struct tfs_bufarena a;
	tfs_bufarena_init(&a, MIB);
	char *p = tfs_bufarena_get(&a);
	memset(p, 7, MIB);
	cr_assert_gt(resident(p, MIB), 0);
	tfs_bufarena_put(&a, p);
	cr_assert_eq(resident(p, MIB), 0, "released memory is still resident");
	char *q = tfs_bufarena_get(&a);
	cr_assert_eq(q, p);
	cr_assert_eq(q[0], 0, "a reused buffer starts zeroed");
	tfs_bufarena_destroy(&a);
}

Test(bufarena, blocks_larger_than_a_huge_page)
{
	struct tfs_bufarena a;
	tfs_bufarena_init(&a, 4 * MIB);
	char *p = tfs_bufarena_get(&a), *q = tfs_bufarena_get(&a);
	cr_assert(p && q && p != q);
	cr_assert_eq((uintptr_t)p % (2 * MIB), 0);
	p[4 * MIB - 1] = 1;
	q[4 * MIB - 1] = 2;
	cr_assert_eq(p[4 * MIB - 1], 1);
	tfs_bufarena_destroy(&a);
}
