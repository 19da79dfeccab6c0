/* test_s3_endpoint.c - how the S3 backend names the bucket
 * (tfs_s3_path_style_effective(), s3_endpoint.h). */
#include "config.h"

#include "s3_endpoint.h"

#include <criterion/criterion.h>

/* auto: path-style with an endpoint; on AWS virtual-hosted, unless the
 * bucket's name has a dot (the SDKs' rule: *.s3.<region>.amazonaws.com
 * covers one label). */
Test(s3_endpoint, path_style_auto)
{
	cr_assert(tfs_s3_path_style_effective(TFS_S3_PATH_AUTO, "http://127.0.0.1:9000", "data"));
	cr_assert(tfs_s3_path_style_effective(TFS_S3_PATH_AUTO, "http://127.0.0.1:9000", "a.b"));
	cr_assert(!tfs_s3_path_style_effective(TFS_S3_PATH_AUTO, NULL, "data"));
	cr_assert(!tfs_s3_path_style_effective(TFS_S3_PATH_AUTO, "", "data-set_1"));
	cr_assert(tfs_s3_path_style_effective(TFS_S3_PATH_AUTO, NULL, "data.example.com"));
}

/* An explicit setting wins, endpoint or not. */
Test(s3_endpoint, path_style_explicit)
{
	cr_assert(tfs_s3_path_style_effective(TFS_S3_PATH_ON, NULL, "data"));
	cr_assert(tfs_s3_path_style_effective(TFS_S3_PATH_ON, "http://h", "data"));
	cr_assert(!tfs_s3_path_style_effective(TFS_S3_PATH_OFF, "http://h", "data"));
	cr_assert(!tfs_s3_path_style_effective(TFS_S3_PATH_OFF, NULL, "a.b"));
}
