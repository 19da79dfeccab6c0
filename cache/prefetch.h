/* prefetch.h - the prefetcher: reads blocks ahead of sequential readers
 * into the RAM tier.
 *
 * For now this header holds only the configuration; the prefetcher's API
 * comes with a later milestone.  struct tfs_prefetch_config is filled and
 * validated by src/conf.c ([prefetch] section) at start-up and is
 * read-only afterwards.
 */
#ifndef TFS_PREFETCH_H
#define TFS_PREFETCH_H

#include <stdint.h>

struct tfs_prefetch_config {
	unsigned workers;   /* prefetch threads; 0 disables prefetching */
	uint64_t readahead; /* bytes read ahead of a sequential reader */
};

#endif
