/* cache.h - the [cache] settings shared by the RAM and SSD tiers and the
 * metadata cache: block size, admission/eviction policy, metadata TTL.
 *
 * This header holds only the configuration; the tiers' interface is
 * layer.h, the metadata cache's meta.h.  struct tfs_cache_config is filled
 * and validated by src/conf.c ([cache] section) at start-up and is
 * read-only afterwards (a reload hands the layers a new copy).
 */
#ifndef TFS_CACHE_H
#define TFS_CACHE_H

#include <stdbool.h>
#include <stdint.h>

/* Which cached blocks make room for new ones.  See tierfs.conf(5). */
enum tfs_policy {
	/* Least recently used: evict the block read longest ago. */
	TFS_POLICY_LRU,
	/* Training epochs read every sample once, in a new random order each
	 * epoch.  Under LRU a dataset larger than the tier evicts every block
	 * before it is read again, so the hit ratio drops to ~0.  "epoch"
	 * admits data while there is room and does not evict cached data to
	 * make room for data of the same epoch, which keeps a hit ratio of
	 * about tier size / dataset size. */
	TFS_POLICY_EPOCH,
};

/* Which listed objects are HEADed for their x-amz-meta-* attributes
 * (cache.fetch_headers); directories (their markers) unless NONE. */
enum tfs_fetch_headers {
	TFS_HEADERS_NONE,  /* false: listed objects show as regular files, and
			    * listed directories with the mount's modes */
	TFS_HEADERS_SMALL, /* small: on lookup, those under TFS_META_PROBE_SIZE
			    * (could be symlinks or special files) */
	TFS_HEADERS_ALL,   /* true: every one, when it is listed */
};

struct tfs_cache_config {
	uint64_t block_size; /* bytes; a power of two, 64 KiB .. 64 MiB */
	enum tfs_policy policy;
	uint64_t metadata_ttl_ms; /* how long HEAD/LIST results are trusted;
				   * UINT64_MAX (TFS_DURATION_FOREVER): forever */
	enum tfs_fetch_headers fetch_headers;
	bool list_ahead; /* a lookup miss lists its directory in the
				   * background (meta_list.c) */
};

#endif
