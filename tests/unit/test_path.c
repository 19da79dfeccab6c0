/* test_path.c - tfs_path_split(): one behaviour for every caller. */
#include "path.h"

#include <criterion/criterion.h>
#include <errno.h>

Test(path, splits_at_the_last_slash)
{
	char dir[16];
	const char *name;
	cr_assert_eq(tfs_path_split("a/b/c", dir, sizeof(dir), &name), 0);
	cr_assert_str_eq(dir, "a/b");
	cr_assert_str_eq(name, "c");
	cr_assert_eq(tfs_path_split("top", dir, sizeof(dir), &name), 0);
	cr_assert_str_eq(dir, "");
	cr_assert_str_eq(name, "top");
	cr_assert_eq(tfs_path_split("d/", dir, sizeof(dir), &name), 0);
	cr_assert_str_eq(dir, "d");
	cr_assert_str_eq(name, "");
}

Test(path, a_directory_that_does_not_fit_is_enametoolong_never_cut)
{
	char dir[4];
	const char *name;
	/* "abc" fits (3 + NUL), "abcd" does not: no silent truncation. */
	cr_assert_eq(tfs_path_split("abc/x", dir, sizeof(dir), &name), 0);
	cr_assert_str_eq(dir, "abc");
	cr_assert_eq(tfs_path_split("abcd/x", dir, sizeof(dir), &name), ENAMETOOLONG);
	cr_assert_str_eq(dir, "");
	cr_assert_str_eq(name, "x");
}
