/* ram.h - the RAM tier: a bounded in-memory cache of blocks in front of
 * the SSD tier.
 *
 * For now this header holds only the configuration; the tier's API comes
 * with a later milestone.  struct tfs_ram_config is filled and validated by
 * src/conf.c ([ram] section) at start-up and is read-only afterwards.
 */
#ifndef TFS_RAM_H
#define TFS_RAM_H

#include <stdint.h>

struct tfs_ram_config {
	uint64_t size; /* bytes of block data held in memory (>= 16 MiB) */
};

#endif
