/* path.c - splitting an object path into directory and name (path.h). */
#include "config.h"

#include "path.h"

#include <errno.h>
#include <string.h>

int tfs_path_split(const char *path, char *dir, size_t dlen, const char **name)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	*name = slash ? slash + 1 : path;
	if (n >= dlen) {
		if (dlen > 0)
			dir[0] = '\0';
		return ENAMETOOLONG;
	}
	memcpy(dir, path, n);
	dir[n] = '\0';
	return 0;
}
