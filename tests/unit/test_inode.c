/* test_inode.c - unit tests for src/inode.c: which version's attributes
 * the kernel may hold (tfs_itable_set_attr_etag, tfs_itable_swap_attr_etag). */
#include "config.h"

#include <criterion/criterion.h>

#include "inode.h"

static struct tfs_itable *t;
static struct tfs_inode *in;

static void setup(void)
{
	cr_assert_eq(tfs_itable_create(&t), 0);
	cr_assert_eq(tfs_itable_lookup(t, "d/f", TFS_FT_FILE, 0, &in), 0);
}

static void teardown(void)
{
	tfs_itable_destroy(t);
}

TestSuite(attr_etag, .init = setup, .fini = teardown);

Test(attr_etag, open_after_lookup_of_same_version_sends_nothing)
{
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
}

Test(attr_etag, open_of_another_version_than_sent)
{
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
	/* Recorded: the next open of v2 sends nothing. */
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
}

Test(attr_etag, nothing_sent_yet)
{
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
}

Test(attr_etag, replies_of_two_versions_are_ambiguous)
{
	/* The kernel keeps the first applied of racing replies: after v1 and
	 * v2 it may hold v1, although v2 was sent last. */
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	tfs_itable_set_attr_etag(t, in, "\"v2\"");
	tfs_itable_set_attr_etag(t, in, "\"v2\"");
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
	tfs_itable_set_attr_etag(t, in, "\"v2\"");
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
}

Test(attr_etag, staged_or_changed_size_is_never_a_version)
{
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
	tfs_itable_set_attr_etag(t, in, ""); /* written, truncated: the kernel's own size */
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
}
