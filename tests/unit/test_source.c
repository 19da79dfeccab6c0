/* test_source.c - SOURCE argument parsing. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>

#include "source.h"

static void check_s3(const char *arg, const char *bucket, const char *prefix)
{
	struct tfs_source s;
	char err[256] = "";
	cr_assert_eq(tfs_source_parse(arg, &s, err, sizeof(err)), 0, "%s: %s", arg, err);
	cr_assert_eq(s.kind, TFS_SOURCE_S3);
	cr_assert_str_eq(s.bucket, bucket);
	cr_assert_str_eq(s.prefix, prefix);
	tfs_source_clear(&s);
}

Test(source, s3_forms)
{
	check_s3("s3://bucket", "bucket", "");
	check_s3("s3://bucket/", "bucket", "");
	check_s3("s3://bucket/data", "bucket", "data/");
	check_s3("s3://bucket/data/train/", "bucket", "data/train/");
}

Test(source, local_directory)
{
	struct tfs_source s;
	char err[256];
	cr_assert_eq(tfs_source_parse("/srv/data", &s, err, sizeof(err)), 0);
	cr_assert_eq(s.kind, TFS_SOURCE_LOCAL);
	cr_assert_str_eq(s.path, "/srv/data");
	tfs_source_clear(&s);
}

Test(source, errors)
{
	struct tfs_source s;
	char err[256];
	cr_assert_eq(tfs_source_parse("s3://", &s, err, sizeof(err)), EINVAL);
	cr_assert_str_eq(err, "SOURCE 's3://': no bucket name");
	cr_assert_eq(tfs_source_parse("gs://b/x", &s, err, sizeof(err)), EINVAL);
	cr_assert_str_eq(err, "SOURCE 'gs://b/x': unsupported scheme (use s3://bucket[/prefix] or "
			      "a directory)");
	cr_assert_eq(tfs_source_parse("s3://b//x", &s, err, sizeof(err)), EINVAL);
	cr_assert_str_eq(err, "SOURCE 's3://b//x': the prefix has an empty path segment");
	cr_assert_eq(tfs_source_parse("", &s, err, sizeof(err)), EINVAL);
}
