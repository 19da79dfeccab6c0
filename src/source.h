/* source.h - the SOURCE argument: "s3://bucket[/prefix]" or a directory. */
#ifndef TFS_SOURCE_H
#define TFS_SOURCE_H

#include <stddef.h>

enum tfs_source_kind {
	TFS_SOURCE_S3,
	TFS_SOURCE_LOCAL
};

struct tfs_source {
	enum tfs_source_kind kind;
	char *bucket; /* S3 only */
	char *prefix; /* S3 only: "" or ending in '/' */
	char *path;   /* local only: the directory as given */
};

/* Parse `arg`.  "s3://b", "s3://b/", "s3://b/p", "s3://b/p/" give bucket b
 * and prefix "" or "p/"; anything without a scheme is a local directory
 * (not checked here).  Other schemes ("gs://", "http://") are refused.
 * Returns 0; EINVAL with a message in err[0..errlen) for a malformed
 * SOURCE; ENOMEM.  Release with tfs_source_clear(). */
int tfs_source_parse(const char *arg, struct tfs_source *out, char *err, size_t errlen);
void tfs_source_clear(struct tfs_source *s);

#endif
