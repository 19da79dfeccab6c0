/* ctl_path.h - where the control socket of the daemon serving a mountpoint
 * lives, computed the same way by the daemon, the CLI and the FlexVolume
 * driver. */
#ifndef TFS_CTL_PATH_H
#define TFS_CTL_PATH_H

#include <stddef.h>

/* Size of sockaddr_un.sun_path: a buffer of this size fits every socket
 * path tfs_ctl_socket_path() produces. */
#define TFS_CTL_SOCK_PATH_MAX 108

/* The canonical absolute form of a mountpoint, the string both the daemon
 * and the CLI hash.  It must not depend on whether a FUSE filesystem is
 * mounted there (the daemon computes it before mounting; the CLI while the
 * mount is live, or dead: stat() on a dead FUSE mount fails with
 * ENOTCONN), so the mountpoint itself is never stat()ed or resolved:
 *
 *   1. A relative path is made absolute with getcwd().  Trailing slashes
 *      and trailing "." components are dropped.  If the last component is
 *      "..", the whole path is first normalised lexically (see below).
 *   2. The parent directory is resolved with realpath(3).  If that fails
 *      (the parent does not exist, or itself lies in a dead FUSE mount...)
 *      it is normalised lexically instead: "//" and "." removed, ".."
 *      removes the previous component, without looking at the filesystem.
 *   3. The last component is appended.  If it is a symbolic link
 *      (readlink(2), which does not enter a mounted filesystem's root),
 *      its target replaces the path and the steps are repeated (at most
 *      40 times, then ELOOP).  A last component that does not exist is
 *      fine.
 *
 * So "/mnt/x", "/mnt/x/", "/mnt/./x", "/mnt/y/../x", "L/x" with L a link
 * to /mnt, and a link to /mnt/x all give "/mnt/x".
 *
 * Returns 0 and writes a NUL-terminated path to out[0..len); EINVAL for an
 * empty or NULL mountpoint; ENAMETOOLONG when a path exceeds PATH_MAX;
 * ERANGE when `len` is too small (PATH_MAX always suffices); ELOOP;
 * ENOMEM; the errno of getcwd() for a relative path.  Thread safe. */
int tfs_ctl_canonical_path(const char *mountpoint, char *out, size_t len);

/* The control socket of the daemon serving `mountpoint`:
 *
 *   RUNDIR/HHHHHHHHHHHHHHHH.sock
 *
 * where H... are the first 16 hex digits of the SHA-256 of
 * tfs_ctl_canonical_path(mountpoint), and RUNDIR is "/run/tierfs" when the
 * effective uid is 0, else "$XDG_RUNTIME_DIR/tierfs" when that variable
 * holds an absolute path, else "/tmp/tierfs-UID".  RUNDIR is created with
 * mode 0700 if missing (by the CLI too: it is harmless); an existing RUNDIR
 * must be a directory (not a symlink) owned by the effective uid that
 * neither group nor others may write to, below directories that only
 * root or the effective uid can change (tfs_dir_secure(), lib/dirs.h), and
 * is chmod'ed to 0700 if group or others may read it.
 *
 * Returns 0 and writes the path to out[0..len); the errors of
 * tfs_ctl_canonical_path(); ENAMETOOLONG when the socket path does not
 * fit in TFS_CTL_SOCK_PATH_MAX (a very long $XDG_RUNTIME_DIR); ERANGE when
 * `len` is too small (TFS_CTL_SOCK_PATH_MAX suffices); ENOTDIR or EPERM
 * for an unsafe RUNDIR; the errno of mkdir(2) or chmod(2); EIO if the
 * hash fails.  Thread safe (reads the environment). */
int tfs_ctl_socket_path(const char *mountpoint, char *out, size_t len);

#endif
