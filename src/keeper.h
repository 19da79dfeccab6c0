/* keeper.h - the keeper: a small process per mount that holds the
 * /dev/fuse descriptor for the life of the mount and runs the daemon as
 * its child, so that a daemon that dies (a crash, the OOM killer, kill -9)
 * or hands over (`tierfs upgrade`) leaves the kernel connection alive and
 * a new daemon serves it.
 *
 * What the keeper does, and nothing else (no other I/O, no threads):
 *   - at the start, closes every descriptor it was given but stdin,
 *     stdout, stderr and `tierfs mount`'s status pipe
 *     (tfs_keeper_close_fds()), so that no caller's pipe or socket stays
 *     open for the life of the mount, and refuses a binary that another
 *     user could replace (tfs_keeper_check_binary());
 *   - mounts with libfuse (fuse_session_new() + fuse_session_mount(): as
 *     root mount(2) with fd=N and the options libfuse builds, otherwise
 *     through fusermount3 and SCM_RIGHTS, both as libfuse does them), and
 *     creates the session record (a memfd: session_io.h);
 *   - starts the daemon: fork, then fexecve() of the binary the keeper
 *     opened at the start (/proc/self/exe: the very file `tierfs mount`
 *     runs, whatever is at its path now) after a crash, an OOM kill or a
 *     failed start, and of the binary now at the recorded path (an
 *     absolute path, symlinks not resolved, checked again as below) after
 *     `tierfs upgrade`; that binary's descriptor is the one later
 *     crashes restart.  The daemon gets the `tierfs mount` command line
 *     with TFS_KEEPER_LINK_ARG after "mount", and inherits the /dev/fuse
 *     descriptor, the record, a status pipe and the link: a memfd that
 *     holds the keeper's values (struct tfs_keeper_link, as JSON).  No
 *     value of the keeper is in the daemon's environment.  A restart by
 *     descriptor finds its libraries as a start by path does: the
 *     dynamic loader takes $ORIGIN from /proc/self/exe, which names the
 *     file's place on disk (with " (deleted)" once it was replaced), and
 *     an absolute run path (the CSI image's /opt/tierfs/current/lib) is
 *     unchanged;
 *   - reads the daemon's status pipe ("ok" once it serves, or the reason
 *     it could not start); the first daemon's verdict goes to `tierfs
 *     mount` (then the keeper closes that pipe), a later one's only to the
 *     log;
 *   - when the daemon ends: exit 0 (the filesystem was unmounted, or the
 *     daemon asked to end the mount) ends the keeper; TFS_DAEMON_EXIT_UPGRADE
 *     starts the new daemon at once; anything else (a signal, another
 *     status, TFS_DAEMON_EXIT_RESUME) is a crash: logged with its cause,
 *     and the next daemon starts after the backoff (0, then 100 ms
 *     doubling to 10 s; back to 0 after a daemon served for 60 s),
 *     unless the connection has ended meanwhile (unmounted or aborted:
 *     the descriptor polls POLLERR), which ends the keeper;
 *   - SIGTERM and SIGINT: unmount (libfuse's fuse_session_unmount(), a
 *     lazy unmount), pass SIGTERM to the daemon, wait for it, exit 0;
 *     SIGHUP is passed to the daemon (a reload); SIGUSR1 from the daemon
 *     marks the moment it stopped reading before an upgrade (the start of
 *     the pause the next daemon reports).
 * While no daemon runs, the kernel queues the requests; a process waiting
 * on one waits (docs/architecture.md, "The keeper").
 */
#ifndef TFS_KEEPER_H
#define TFS_KEEPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fuse_args;
struct tfs_log;

/* Exit statuses of a daemon under a keeper (besides 0 and the usual
 * TFS_EXIT_* of a failed start). */
#define TFS_DAEMON_EXIT_UPGRADE \
	90 /* handed over (`tierfs upgrade`): start the
				    * binary on disk now */
#define TFS_DAEMON_EXIT_RESUME \
	91 /* the replayed FUSE_INIT got another reply:
				    * this binary cannot resume the session */

/* How a daemon learns that it runs under a keeper: the argument after
 * "mount" is TFS_KEEPER_LINK_ARG followed by the number of a descriptor
 * (a memfd) that holds the link as a JSON object
 * (tfs_keeper_link_encode(), tfs_keeper_link_take()).  None of it is
 * secret; none of it is in an environment, where /proc/PID/environ would
 * show it after unsetenv() too. */
#define TFS_KEEPER_LINK_ARG "--keeper-link="
#define TFS_KEEPER_LINK_MAX 65536 /* the most a link may hold, in bytes */

/* Test hooks, read from the environment by a daemon under a keeper only
 * in a build configured with --enable-test-hooks (TFS_TEST_HOOKS; check.sh
 * does, a package build does not).  Elsewhere they are ignored. */
/* A daemon never sends FUSE_NOTIFY_RESEND. */
#define TFS_TEST_ENV_NO_RESEND "TIERFS_TEST_NO_RESEND"
/* A restarted daemon takes its INIT reply for another one (as a binary
 * that negotiates differently would) and refuses to resume. */
#define TFS_TEST_ENV_RESUME_MISMATCH "TIERFS_TEST_RESUME_MISMATCH"

#define TFS_KEEPER_CAUSE_MAX 160

/* What a daemon learns from its keeper (tfs_keeper_link_take()). */
struct tfs_keeper_link {
	int fuse_fd; /* -1: not under a keeper */
	int record_fd;
	int status_fd; /* -1 when the keeper gave none */
	int keeper_pid;
	uint32_t generation; /* 0 for the first daemon of the mount */
	uint64_t restarts, crashes, upgrades;
	uint64_t stopped_ns;              /* CLOCK_MONOTONIC when the last daemon
				    * ended (0: none did) */
	uint64_t backoff_ms;              /* the delay before this daemon started */
	bool no_resend;                   /* TFS_TEST_ENV_NO_RESEND=1 (test hooks) */
	bool test_mismatch;               /* TFS_TEST_ENV_RESUME_MISMATCH=1 (test hooks) */
	char cause[TFS_KEEPER_CAUSE_MAX]; /* why the last daemon ended, or "" */
	char cwd[4096];                   /* `tierfs mount`'s working directory, or "" */
	char mountpoint[4096];            /* absolute, resolved by `tierfs mount` */
};

/* The link of a daemon: when argv[1] (argv[0] is "mount") is
 * TFS_KEEPER_LINK_ARG N, read the JSON in descriptor N (at most
 * TFS_KEEPER_LINK_MAX bytes from offset 0), close N, fill `l`, mark the
 * descriptors it names close-on-exec (no program the daemon runs inherits
 * them) and remove the argument (argv[1..] move down, *argc drops by
 * one).  With a test-hooks build, also read TFS_TEST_ENV_*.  Returns 0
 * with l->fuse_fd == -1 when the argument is absent (no keeper), 0 with
 * the link filled, or EINVAL when it is malformed (message on stderr). */
int tfs_keeper_link_take(int *argc, char **argv, struct tfs_keeper_link *l);

/* A new memfd (close-on-exec) holding `l` as JSON, at offset 0 (the test
 * hooks are not in it).  Returns 0 with *fd set, or an errno. */
int tfs_keeper_link_encode(const struct tfs_keeper_link *l, int *fd);

/* Close every descriptor of this process but the `n` in `keep` (negative
 * entries are ignored): close_range(2), or a walk of /proc/self/fd where
 * the kernel lacks it.  Returns 0 or an errno. */
int tfs_keeper_close_fds(const int *keep, size_t n);

/* Whether a mount owned by `owner` (its effective uid) may run the binary
 * at `path` (absolute) as a root-capable daemon: the file `fd` (open on
 * it, O_PATH is enough; -1 to stat `path`) is a regular file owned by root
 * or `owner` and not writable by group or others, and every directory on
 * the way to it, both as `path` names it and with its symlinks resolved,
 * is owned by root or `owner` and is not writable by group or others
 * unless it is sticky (/tmp: only the owner of an entry may replace it).
 * Returns 0, or EPERM (or the errno of a stat()) with the reason in `err`. */
int tfs_keeper_check_binary(const char *path, int fd, uid_t owner, char *err, size_t errlen);

/* The absolute path of the tierfs binary from argv[0]: as is when
 * absolute, against `cwd` (the absolute working directory the command
 * was started in: a keeper has done chdir("/") by then) when it holds a
 * '/', else the first executable match in $PATH.  Symlinks are not
 * resolved, so a package upgrade that replaces the file behind the path
 * is seen by `tierfs upgrade`.  Returns 0 or ENOENT/ENAMETOOLONG. */
int tfs_keeper_binary_path(const char *argv0, const char *cwd, char *out, size_t outlen);

struct tfs_keeper_opts {
	const char *binary;      /* absolute (tfs_keeper_binary_path()): what
				 * `tierfs upgrade` runs; a crash restart runs
				 * the binary of the running process
				 * (/proc/self/exe) or of the last upgrade */
	char *const *argv;       /* the `tierfs mount` arguments, argv[0]
				 * "mount", NULL-terminated; the daemon gets
				 * `binary`, then these with the link after
				 * "mount" */
	const char *cwd;         /* for the daemons' link (cwd) */
	const char *mountpoint;  /* absolute, resolved */
	struct fuse_args *fargs; /* the kernel mount options (fuse_session_new()) */
	int status_fd;           /* `tierfs mount`'s pipe, or -1 (foreground) */
	const struct tfs_log *log;
};

/* Check the binaries (tfs_keeper_check_binary() of /proc/self/exe at
 * `binary`, for the effective uid), mount, run daemons until the mount
 * ends (see above), unmount.  Blocks
 * SIGCHLD, SIGTERM, SIGINT, SIGHUP and SIGUSR1 in the calling process (the
 * daemons get the caller's mask back).  Returns TFS_EXIT_OK after the
 * mount ended, TFS_EXIT_FAIL when the mount or the first daemon failed
 * (the reason reported on status_fd and logged). */
int tfs_keeper_run(const struct tfs_keeper_opts *o);

#endif
