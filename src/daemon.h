/* daemon.h - the tierfs daemon: everything between a parsed `tierfs mount`
 * command line and the end of the mount.
 *
 * tfs_daemon_run() runs in the process that serves the mount (the forked
 * child, or the foreground process with -f), in this order:
 *   set-up    block SIGHUP (before any thread exists), open the logger
 *             (log.file, else stderr with -f, else syslog), open the cache
 *             stack, probe the bucket (unreachable is a warning, missing
 *             or forbidden an error), create the FUSE state, start the
 *             control socket (stats, drain, reload, warm-up, follow), the
 *             metrics endpoint ([metrics] listen) and the reload thread;
 *   session   create the FUSE session, mount, report "ok" to the parent,
 *             run the multithreaded loop until unmounted or SIGINT/SIGTERM,
 *             then drain the write-back for up to writeback.drain_timeout
 *             (what is left stays in the journal);
 *   teardown  stop everything in the reverse order.
 * Under a keeper (o->keeper) the session step differs: no mount; the
 * session runs on the keeper's /dev/fuse descriptor through the hooks of
 * session_io.h (FUSE_INIT recorded by the first daemon, replayed by the
 * later ones, then FUSE_NOTIFY_RESEND), with clone_fd off; "ok" goes to
 * the keeper; the end decides the exit status (*o->exit_status):
 *   unmounted (ENODEV)    drain as above, 0;
 *   SIGINT/SIGTERM        SIGTERM to the keeper (it unmounts), drain, 0;
 *   `tierfs upgrade`      stop reading, finish the requests in flight,
 *                         close the stack (LMDB, journal), no drain,
 *                         TFS_DAEMON_EXIT_UPGRADE;
 *   INIT reply mismatch   TFS_DAEMON_EXIT_RESUME;
 *   a session error       TFS_EXIT_FAIL (the keeper restarts it).
 * While mounted, SIGHUP and the control command `reload` re-read the
 * configuration and apply what can change without a remount
 * (tierfs.conf(5) RELOAD).
 */
#ifndef TFS_DAEMON_H
#define TFS_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

struct fuse_args;
struct tfs_config;
struct tfs_keeper_link;
struct tfs_fs_config;
struct tfs_source;

/* What the `tierfs mount` command line and configuration decided.  All of
 * it is borrowed for the duration of tfs_daemon_run(). */
struct tfs_daemon_opts {
	/* The validated configuration in force.  A reload replaces its
	 * contents (the old values are cleared); the caller clears it after
	 * tfs_daemon_run() returns. */
	struct tfs_config *cfg;
	const struct tfs_source *src;    /* the parsed SOURCE */
	const struct tfs_fs_config *fsc; /* ownership, modes, TTLs of the FUSE layer */
	struct fuse_args *fargs;         /* the arguments for fuse_session_new(),
					  * with the kernel mount options */
	const char *source;              /* SOURCE as given, for the log */
	const char *mountpoint;          /* absolute, resolved */
	const char *conf_path;           /* -c as an absolute path (a reload reads
					  * it again after chdir("/")), or NULL: the
					  * default file */
	char **overrides;                /* -o section.key=value, applied again at
					  * each reload */
	size_t n_overrides;
	bool foreground; /* -f or -d: log to stderr (unless log.file) */
	bool debug;      /* -d: log at debug level, kept across reloads */
	bool ro;         /* -o ro */
	/* Under a keeper (keeper.h): the inherited /dev/fuse descriptor and
	 * session record, and the keeper's health counters.  NULL: the daemon
	 * mounts and unmounts itself. */
	const struct tfs_keeper_link *keeper;
	/* Under a keeper: the exit status the process must end with
	 * (0, TFS_EXIT_FAIL, TFS_DAEMON_EXIT_UPGRADE, TFS_DAEMON_EXIT_RESUME),
	 * written by tfs_daemon_run(). */
	int *exit_status;
};

/* Run the daemon for one mount, from set-up to teardown (see above);
 * returns when the filesystem is unmounted or the start failed.
 *
 * `status_fd` is the write end of a pipe to the waiting parent, or -1: it
 * gets "ok" once the mount is live, or the error message ("WHAT: strerror;
 * last error logged") if the start fails, and is closed either way.
 *
 * Returns 0 after a mount and its unmount (uploads not drained in time
 * stay in the journal: not an error); or the errno of the step that failed
 * to start (logged, and reported on status_fd).  Changes the process's
 * malloc tuning (mallopt) and, while it runs, blocks SIGHUP in the calling
 * thread; libfuse's handlers for SIGINT and SIGTERM are installed while
 * mounted.  Call it once per process. */
int tfs_daemon_run(const struct tfs_daemon_opts *o, int status_fd);

#endif
