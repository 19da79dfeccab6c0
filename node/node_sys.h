/* node_sys.h - what the driver asks of the system: running a program with a
 * deadline, the mount table, finding and stopping its daemons, and safe
 * file and directory handling.
 *
 * Every function returns 0 or a positive errno unless it says otherwise,
 * keeps no state and logs nothing (callers log).
 */
#ifndef TFS_NODE_SYS_H
#define TFS_NODE_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dbuf.h"

/* Sleep `ms` milliseconds (restarted after signals).  Cannot fail. */
void tfs_node_sleep_ms(unsigned ms);

/* Run argv[0] (an absolute path) with argv and envp, detached from us: in
 * a new session, stdin from /dev/null, stdout and stderr into one pipe
 * whose bytes are appended to `output` (may be NULL; bytes beyond its
 * maximum are read and dropped), and no other descriptor inherited.
 * Waits at most `timeout_ms` for the program to exit.
 *
 * Returns 0 with its wait status in *status; ETIMEDOUT after killing its
 * process group with SIGKILL and reaping it (a grandchild that left the
 * group survives: see tfs_node_kill_by_arg()); the errno of pipe(), open() or
 * fork(); ENOENT/EACCES... when exec fails (status 127, reported as the
 * errno the child wrote back). */
int tfs_node_run(char *const argv[], char *const envp[], uint64_t timeout_ms,
		 struct tfs_dbuf *output, int *status);

/* tfs_node_run(), with the child joining a cgroup first: it writes "0" to
 * `cgroup_fd` (an open cgroup.procs, or -1 for none) before exec, so the
 * program and everything it starts are charged there; a failed write is
 * reported as an exec failure (its errno). */
int tfs_node_run_in(char *const argv[], char *const envp[], int cgroup_fd, uint64_t timeout_ms,
		    struct tfs_dbuf *output, int *status);

/* What /proc/self/mountinfo says about the mount point `path` (absolute,
 * canonical: tfs_ctl_canonical_path()). */
struct tfs_node_mount_entry {
	bool mounted;
	char fstype[64];   /* of the top-most mount there, e.g. "fuse.tierfs" */
	char source[1024]; /* its source field, e.g. "s3://bucket/prefix" */
	char devno[32];    /* "major:minor" of its filesystem: a bind mount shares it */
	bool read_only;    /* its per-mount options say ro */
};

/* Returns 0 and fills *out (mounted false when nothing is mounted there);
 * the errno of opening or reading /proc/self/mountinfo; ENOMEM. */
int tfs_node_mount_lookup(const char *path, struct tfs_node_mount_entry *out);

/* The number of mounts of the filesystem `devno` ("major:minor", from
 * tfs_node_mount_lookup()) whose mount point is not `skip`: the bind mounts of a
 * mount, when skip is the mount itself.  Returns 0, or the errno of
 * reading /proc/self/mountinfo. */
int tfs_node_mount_users(const char *devno, const char *skip, unsigned *n);

/* statfs() the mount point (which always reaches a FUSE daemon, unlike a
 * stat() the kernel may answer from its cache): 0 when it answers; ENOTCONN or ESTALE for a FUSE
 * mount whose daemon is gone (still mounted, but dead); another errno
 * otherwise. */
int tfs_node_mount_probe(const char *path);

/* Send SIGTERM to every process but us whose command line has an argument
 * equal to `arg` (the driver passes the volume's own config path, which
 * nothing else has), wait up to `grace_ms` for them to exit, then SIGKILL
 * those left.  Sets *found (may be NULL) to the number signalled.  Returns
 * 0, or the errno of opening /proc. */
int tfs_node_kill_by_arg(const char *arg, uint64_t grace_ms, unsigned *found);

/* True when process `pid` no longer exists or is a zombie (exited, not
 * reaped yet).  Cannot fail. */
bool tfs_node_pid_gone(pid_t pid);

/* Remove `path` and everything below it, without following symbolic links
 * and without entering another filesystem (a mount below `path` makes this
 * fail with EBUSY, ENOTEMPTY or EXDEV instead of emptying it).  A missing
 * path is success.  Returns 0 or the errno of the first failure. */
int tfs_node_rmtree(const char *path);

/* Create `path` and missing parents with `mode` (like mkdir -p -m).  An
 * existing component must be a directory (ENOTDIR).  Returns 0 or errno. */
int tfs_node_mkdirs(const char *path, mode_t mode);

/* Replace `path` with `len` bytes of `data`, mode `mode`: written to
 * "path.tmp", fsync'd and renamed.  Returns 0 or errno. */
int tfs_node_write_file(const char *path, const void *data, size_t len, mode_t mode);

/* Read `path` (at most out's maximum) into out.  Returns 0, errno, or
 * EFBIG when it is larger. */
int tfs_node_read_file(const char *path, struct tfs_dbuf *out);

/* The first 32 hex digits of the SHA-256 of `s`, NUL-terminated, into
 * out[0..len) (len >= 33).  Returns 0, ERANGE, or EIO if OpenSSL fails. */
#define TFS_NODE_HASH_LEN 32
int tfs_node_hash(const char *s, char *out, size_t len);

/* The secret key in the file `path`: exactly `len` random bytes, created
 * once (RAND_bytes(), mode 0600, written whole under another name and
 * linked into place, so concurrent callers agree on one key) and read
 * back by every later call.  A file that is not a regular file (a
 * symbolic link is not followed), is not owned by us, is readable or
 * writable by anyone else, or is not `len` bytes long is refused (EPERM)
 * and left alone.  Returns 0 with the key in key[0..len); EPERM, EIO
 * (OpenSSL), or the errno of the file system. */
int tfs_node_key_file(const char *path, unsigned char *key, size_t len);

#endif
