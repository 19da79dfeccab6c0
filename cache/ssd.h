/* ssd.h - the SSD tier: blocks cached as files in a local directory,
 * between the RAM tier and the backend.
 *
 * For now this header holds only the configuration; the tier's API comes
 * with a later milestone.  struct tfs_ssd_config is filled and validated by
 * src/conf.c ([ssd] section) at start-up and is read-only afterwards.
 */
#ifndef TFS_SSD_H
#define TFS_SSD_H

#include <stdint.h>

struct tfs_ssd_config {
	char *dir;             /* absolute path of the cache directory */
	/* Capacity: either absolute (size > 0, size_pct == 0) or relative
	 * (size == 0, 0 < size_pct <= 100: percent of the filesystem holding
	 * dir, resolved by the tier at start-up with statvfs()). */
	uint64_t size;
	double size_pct;
	/* Eviction starts when usage exceeds high_watermark percent of the
	 * capacity and stops below low_watermark percent (low < high). */
	double high_watermark;
	double low_watermark;
};

#endif
