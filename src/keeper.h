/* keeper.h - the keeper: a small process per mount that holds the
 * /dev/fuse descriptor for the life of the mount and runs the daemon as
 * its child, so that a daemon that dies (a crash, the OOM killer, kill -9)
 * or hands over (`tierfs upgrade`) leaves the kernel connection alive and
 * a new daemon serves it.
 *
 * What the keeper does, and nothing else (no other I/O, no threads):
 *   - mounts with libfuse (fuse_session_new() + fuse_session_mount(): as
 *     root mount(2) with fd=N and the options libfuse builds, otherwise
 *     through fusermount3 and SCM_RIGHTS, both as libfuse does them), and
 *     creates the session record (a memfd: session_io.h);
 *   - starts the daemon: fork, then execv() of the tierfs binary recorded
 *     at the start (an absolute path, never /proc/self/exe, so an upgrade
 *     runs the binary now on disk) with the `tierfs mount` command line,
 *     the /dev/fuse descriptor, the record and a status pipe inherited,
 *     and the TFS_KEEPER_ENV_* variables below;
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

/* The environment of a daemon under a keeper.  None of it is secret. */
#define TFS_KEEPER_ENV_FUSE_FD "TIERFS_KEEPER_FUSE_FD"
#define TFS_KEEPER_ENV_RECORD_FD "TIERFS_KEEPER_RECORD_FD"
#define TFS_KEEPER_ENV_STATUS_FD "TIERFS_KEEPER_STATUS_FD"
#define TFS_KEEPER_ENV_PID "TIERFS_KEEPER_PID"
#define TFS_KEEPER_ENV_CWD "TIERFS_KEEPER_CWD"
#define TFS_KEEPER_ENV_MOUNTPOINT "TIERFS_KEEPER_MOUNTPOINT"
#define TFS_KEEPER_ENV_GENERATION "TIERFS_KEEPER_GENERATION"
#define TFS_KEEPER_ENV_RESTARTS "TIERFS_KEEPER_RESTARTS"
#define TFS_KEEPER_ENV_CRASHES "TIERFS_KEEPER_CRASHES"
#define TFS_KEEPER_ENV_UPGRADES "TIERFS_KEEPER_UPGRADES"
#define TFS_KEEPER_ENV_CAUSE "TIERFS_KEEPER_LAST_CAUSE"
#define TFS_KEEPER_ENV_STOPPED_NS "TIERFS_KEEPER_STOPPED_NS"
#define TFS_KEEPER_ENV_BACKOFF_MS "TIERFS_KEEPER_BACKOFF_MS"
/* Test only: a daemon never sends FUSE_NOTIFY_RESEND. */
#define TFS_KEEPER_ENV_NO_RESEND "TIERFS_TEST_NO_RESEND"
/* Test only: a restarted daemon takes its INIT reply for another one (as
 * a binary that negotiates differently would) and refuses to resume. */
#define TFS_KEEPER_ENV_TEST_MISMATCH "TIERFS_TEST_RESUME_MISMATCH"

#define TFS_KEEPER_CAUSE_MAX 160

/* What a daemon learns from its keeper (tfs_keeper_link_from_env()). */
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
	bool no_resend;                   /* TFS_KEEPER_ENV_NO_RESEND=1 */
	bool test_mismatch;               /* TFS_KEEPER_ENV_TEST_MISMATCH=1 */
	char cause[TFS_KEEPER_CAUSE_MAX]; /* why the last daemon ended, or "" */
	char cwd[4096];                   /* `tierfs mount`'s working directory, or "" */
	char mountpoint[4096];            /* absolute, resolved by `tierfs mount` */
};

/* Fill `l` from the environment and remove the variables from it (so no
 * program the daemon runs sees them).  Returns 0 with l->fuse_fd == -1
 * when they are absent (no keeper), 0 with the link filled, or EINVAL
 * when one is malformed (message on stderr). */
int tfs_keeper_link_from_env(struct tfs_keeper_link *l);

/* The absolute path of the tierfs binary from argv[0]: as is when
 * absolute, against `cwd` (the absolute working directory the command
 * was started in: a keeper has done chdir("/") by then) when it holds a
 * '/', else the first executable match in $PATH.  Symlinks are not
 * resolved, so a package upgrade that replaces the file behind the path
 * is seen.  Returns 0 or ENOENT/ENAMETOOLONG. */
int tfs_keeper_binary_path(const char *argv0, const char *cwd, char *out, size_t outlen);

struct tfs_keeper_opts {
	const char *binary;      /* absolute (tfs_keeper_binary_path()) */
	char *const *argv;       /* the daemon's argv (argv[0] is replaced by
				 * `binary`), NULL-terminated */
	const char *cwd;         /* for the daemons' TFS_KEEPER_ENV_CWD */
	const char *mountpoint;  /* absolute, resolved */
	struct fuse_args *fargs; /* the kernel mount options (fuse_session_new()) */
	int status_fd;           /* `tierfs mount`'s pipe, or -1 (foreground) */
	const struct tfs_log *log;
};

/* Mount, run daemons until the mount ends (see above), unmount.  Blocks
 * SIGCHLD, SIGTERM, SIGINT, SIGHUP and SIGUSR1 in the calling process (the
 * daemons get the caller's mask back).  Returns TFS_EXIT_OK after the
 * mount ended, TFS_EXIT_FAIL when the mount or the first daemon failed
 * (the reason reported on status_fd and logged). */
int tfs_keeper_run(const struct tfs_keeper_opts *o);

#endif
