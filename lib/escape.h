/* escape.h - a value shown in a message: control characters escaped, long
 * values cut.  Both configurations' messages use it (src/conf*.c for
 * tierfs.conf and -o, node/node_opts.c for the drivers' volume options and
 * node config), so a bad value reads the same in each.
 */
#ifndef TFS_ESCAPE_H
#define TFS_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* The size of a buffer that holds any s for a given max. */
#define TFS_ESCAPE_BUFLEN(max) (4 * (max) + 8)

/* Write s into buf (cap bytes, at least 8) for a message: control
 * characters (below 0x20, and 0x7f) as \xNN, cut after `max` bytes with
 * "...", in single quotes when `quote`.  Returns buf; never fails (a
 * smaller buffer cuts sooner).  No state, thread safe. */
const char *tfs_escape(char *buf, size_t cap, const char *s, size_t max, bool quote);

#endif
