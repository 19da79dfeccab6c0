/* fdio.c - whole-buffer pread/pwrite. */
#include "config.h"

#include "fdio.h"

#include <errno.h>
#include <unistd.h>

int tfs_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return ENOSPC;
		done += (size_t)n;
	}
	return 0;
}

ssize_t tfs_pread_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}
