/* writeback.h - the write-back layer: uploads files written through the
 * mount from the SSD tier to the backend.
 *
 * For now this header holds only the configuration; the layer's API comes
 * with a later milestone.  struct tfs_writeback_config is filled and
 * validated by src/conf.c ([writeback] section) at start-up and is
 * read-only afterwards.
 */
#ifndef TFS_WRITEBACK_H
#define TFS_WRITEBACK_H

#include <stdint.h>

enum tfs_wb_mode {
	TFS_WB_ASYNC, /* close() returns at once; upload after delay_ms */
	TFS_WB_SYNC,  /* close() and fsync() return after the upload */
	TFS_WB_OFF,   /* no writes: the mount is read-only */
};

struct tfs_writeback_config {
	enum tfs_wb_mode mode;
	uint64_t delay_ms;  /* async: wait this long after the last close() */
	unsigned uploaders; /* concurrent uploads (1 .. 256) */
};

#endif
