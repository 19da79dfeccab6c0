/* stack.c - assembly of the layer stack from the validated config. */
#include "config.h"

#include "stack.h"

#include "local.h"
#include "s3.h"

int tfs_stack_open_backend(const struct tfs_config *cfg, const struct tfs_source *src,
			   const struct tfs_log *log, struct tfs_backend **out)
{
	if (src->kind == TFS_SOURCE_LOCAL) {
		struct tfs_local_config lc = { .root = src->path };
		return tfs_local_create(&lc, log, out);
	}
	struct tfs_s3_config sc = cfg->backend;
	sc.bucket = src->bucket;
	sc.prefix = src->prefix;
	return tfs_s3_create(&sc, log, out);
}
