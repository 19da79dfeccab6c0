/* test_dbuf.c - the bounded dynamic buffer. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dbuf.h"

Test(dbuf, append_and_format)
{
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 1024);
	cr_assert_str_eq(tfs_dbuf_str(&d), "");
	cr_assert_eq(tfs_dbuf_adds(&d, "abc"), 0);
	cr_assert_eq(tfs_dbuf_addc(&d, '-'), 0);
	cr_assert_eq(tfs_dbuf_addf(&d, "%d/%s", 42, "x"), 0);
	cr_assert_str_eq(tfs_dbuf_str(&d), "abc-42/x");
	cr_assert_eq(tfs_dbuf_len(&d), 8);
	tfs_dbuf_reset(&d);
	cr_assert_str_eq(tfs_dbuf_str(&d), "");
	tfs_dbuf_free(&d);
}

Test(dbuf, long_format_grows)
{
	struct tfs_dbuf d;
	char big[1000];
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tfs_dbuf_init(&d, 4096);
	cr_assert_eq(tfs_dbuf_addf(&d, "<%s>", big), 0);
	cr_assert_eq(tfs_dbuf_len(&d), 1001);
	cr_assert_eq(tfs_dbuf_str(&d)[0], '<');
	cr_assert_eq(tfs_dbuf_str(&d)[1000], '>');
	tfs_dbuf_free(&d);
}

Test(dbuf, maximum_is_enforced_and_buffer_unchanged)
{
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 5);
	cr_assert_eq(tfs_dbuf_adds(&d, "12345"), 0);
	cr_assert_eq(tfs_dbuf_adds(&d, "6"), EOVERFLOW);
	cr_assert_eq(tfs_dbuf_addf(&d, "%d", 7), EOVERFLOW);
	cr_assert_str_eq(tfs_dbuf_str(&d), "12345");
	char *s = tfs_dbuf_steal(&d);
	cr_assert_str_eq(s, "12345");
	cr_assert_eq(tfs_dbuf_len(&d), 0);
	free(s);
}
