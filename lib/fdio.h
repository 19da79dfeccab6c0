/* fdio.h - whole-buffer positioned I/O on file descriptors, retrying
 * short transfers and EINTR. */
#ifndef TFS_FDIO_H
#define TFS_FDIO_H

#include <stddef.h>
#include <sys/types.h>

/* Write all `len` bytes at `off`.  Returns 0 or an errno (ENOSPC when the
 * file system accepts no more bytes). */
int tfs_pwrite_all(int fd, const void *buf, size_t len, off_t off);

/* Read up to `len` bytes at `off`; returns the count (short only at end of
 * file) or -errno. */
ssize_t tfs_pread_full(int fd, void *buf, size_t len, off_t off);

#endif
