/* local_internal.h - what the local backend's files share: local.c (keys,
 * resolving paths inside the root, objects) and local_list.c (listings).
 * Not for use outside backends/local*.c.  The functions are pure or work
 * on descriptors the caller owns; none keeps state.
 */
#ifndef TFS_LOCAL_INTERNAL_H
#define TFS_LOCAL_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "backend.h"
#include "log.h"

#define TMP_PREFIX ".tierfs-tmp."
/* Temporary files live in one directory at the root (its name starts
 * with TMP_PREFIX, so it is never a key and never listed): a write cut
 * short by kill -9 leaves its file there, and the next start removes
 * what is old enough not to belong to a running writer. */
#define TMP_DIR TMP_PREFIX "d"
#define TMP_STALE_S 3600
/* A directory marker ("dir/") is the directory plus this empty file in
 * it (never a key, never listed): it keeps a directory made by mkdir when
 * its last file is deleted, as a marker object does on S3. */
#define MARKER_FILE TMP_PREFIX "dir"
#define XATTR_PREFIX "user.tierfs.meta."
#define COPY_CHUNK (1u << 20)

struct local {
	char *root;
	int root_fd;
	bool openat2; /* resolve with openat2(); else walk with O_NOFOLLOW */
	const struct tfs_log *log;
};

/* A key made printable for a log line (keys are untrusted): control bytes,
 * DEL, '\\' and '\'' as \xNN, cut after KEY_LOG_MAX bytes with "...".
 * Used as esc(key).s, valid to the end of the full expression. */
#define KEY_LOG_MAX 256

struct key_esc {
	char s[KEY_LOG_MAX * 4 + 4];
};

/* `key` made printable for a log line (above). */
struct key_esc local_esc(const char *key);
/* Whether s[0..n) is a segment a key may hold: not empty, not "." or "..",
 * at most NAME_MAX bytes, not starting with TMP_PREFIX. */
bool local_segment_ok(const char *s, size_t n);
/* Open `name` in `dfd` without following it (O_NOFOLLOW | O_CLOEXEC are
 * added): 0 and *fd_out (the caller's), or the errno (ELOOP for a
 * symlink). */
int local_open_last(int dfd, const char *name, int flags, mode_t mode, int *fd_out);
/* The ETag of a file or directory: size, mtime and inode. */
void local_make_etag(const struct stat *st, char etag[TFS_ETAG_MAX]);
/* The ETag of a symlink with target[0..n): its length, ctime, inode and a
 * hash of the target (its mtime comes from metadata, so it could repeat). */
void local_make_link_etag(const struct stat *st, const char *target, size_t n,
			  char etag[TFS_ETAG_MAX]);
/* The target of the symlink `name` in `dfd` ("" with an O_PATH |
 * O_NOFOLLOW descriptor of the link itself): 0 with target[] NUL-ended
 * and *n its length, ENAMETOOLONG when it does not fit PATH_MAX, else
 * readlinkat()'s errno.  Not logged. */
int local_read_link(int dfd, const char *name, char target[PATH_MAX], size_t *n);

/* The backend's list operation (struct tfs_backend_ops): one page of the
 * keys under `prefix` in S3's order, local_list.c. */
int local_list(void *priv, const char *prefix, const char *delimiter, const char *token,
	       size_t max_keys, struct tfs_list_page *out);

#endif
