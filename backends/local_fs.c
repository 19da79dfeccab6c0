/* local_fs.c - the local backend's file-system primitives, shared by
 * local.c and local_list.c (local_internal.h): key segments, keys made
 * printable for logs, opening a name without following it, ETags, and
 * reading a symlink.  Calls nothing of the backend; no state.
 */
#include "config.h"

#include "local_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"

struct key_esc local_esc(const char *key)
{
	struct key_esc e;
	size_t o = 0, i;

	for (i = 0; key[i] != '\0' && i < KEY_LOG_MAX; i++) {
		unsigned char c = (unsigned char)key[i];
		if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
			snprintf(e.s + o, sizeof(e.s) - o, "\\x%02x", c);
			o += 4;
		} else {
			e.s[o++] = (char)c;
		}
	}
	if (key[i] != '\0') {
		memcpy(e.s + o, "...", 3);
		o += 3;
	}
	e.s[o] = '\0';
	return e;
}

bool local_segment_ok(const char *s, size_t n)
{
	if (n == 0 || n > NAME_MAX)
		return false;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	if (n >= sizeof(TMP_PREFIX) - 1 && memcmp(s, TMP_PREFIX, sizeof(TMP_PREFIX) - 1) == 0)
		return false;
	return true;
}

/* Open `name`, a single component, in directory `dfd` with `flags` and
 * O_NOFOLLOW.  0 and *fd_out, or the errno, ELOOP for a symlink (which
 * O_DIRECTORY reports as ENOTDIR).  O_PATH only with O_DIRECTORY (O_PATH |
 * O_NOFOLLOW alone would open the symlink itself). */
int local_open_last(int dfd, const char *name, int flags, mode_t mode, int *fd_out)
{
	int fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd >= 0) {
		*fd_out = fd;
		return 0;
	}
	int e = errno;
	struct stat st;
	if (e == ENOTDIR && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		e = ELOOP;
	return e;
}

void local_make_etag(const struct stat *st, char etag[TFS_ETAG_MAX])
{
	uint64_t ns = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
	snprintf(etag, TFS_ETAG_MAX, "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "\"",
		 (uint64_t)st->st_size, ns, (uint64_t)st->st_ino);
}

void local_make_link_etag(const struct stat *st, const char *target, size_t n,
			  char etag[TFS_ETAG_MAX])
{
	/* FNV-1a from its standard offset basis (kept: the ETag is stored) */
	uint64_t h = tfs_fnv1a_mem(0xcbf29ce484222325u, target, n);
	uint64_t ns = (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec;
	snprintf(etag, TFS_ETAG_MAX, "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-l%016" PRIx64 "\"",
		 (uint64_t)n, ns, (uint64_t)st->st_ino, h);
}

/* The target of the symlink `name` in `dfd` ("" with an O_PATH |
 * O_NOFOLLOW descriptor of the link itself): 0 with target[] NUL-ended
 * and *n its length, ENAMETOOLONG when it does not fit PATH_MAX, else
 * readlinkat()'s errno.  Not logged. */
int local_read_link(int dfd, const char *name, char target[PATH_MAX], size_t *n)
{
	ssize_t r = readlinkat(dfd, name, target, PATH_MAX);
	if (r < 0)
		return errno;
	if (r >= PATH_MAX)
		return ENAMETOOLONG;
	target[r] = '\0';
	*n = (size_t)r;
	return 0;
}
