/* test_keeper.c - what the keeper and its daemon exchange: the session
 * record (session_io.h), the link (tfs_keeper_link_take()), the test
 * hooks, the descriptors a keeper keeps, and the binary a restart runs
 * (tfs_keeper_binary_path(), tfs_keeper_check_binary()). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper.h"
#include "log.h"
#include "session_io.h"

static struct tfs_log quiet;

static int record(void)
{
	int fd = memfd_create("test-record", MFD_CLOEXEC);
	cr_assert(fd >= 0);
	return fd;
}

/* A record as session_io.c writes it: header, INIT at 64, reply after. */
static void write_record(int fd, const char *magic, uint32_t opcode, bool reply)
{
	struct {
		struct fuse_in_header h;
		struct fuse_init_in a;
	} req = { .h = { .len = sizeof(req), .opcode = opcode, .unique = 42 },
		  .a = { .major = 7, .minor = 45 } };
	struct {
		struct fuse_out_header h;
		struct fuse_init_out a;
	} rep = { .h = { .len = sizeof(rep), .unique = 42 },
		  .a = { .major = 7, .minor = 38, .max_write = 1 << 20 } };
	struct {
		char magic[8];
		uint32_t req_len, reply_len;
	} hdr = { .req_len = sizeof(req), .reply_len = reply ? sizeof(rep) : 0 };
	memcpy(hdr.magic, magic, 8);
	cr_assert_eq(pwrite(fd, &hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	cr_assert_eq(pwrite(fd, &req, sizeof(req), 64), (ssize_t)sizeof(req));
	if (reply)
		cr_assert_eq(pwrite(fd, &rep, sizeof(rep), 64 + TFS_SESSION_MAX_MSG),
			     (ssize_t)sizeof(rep));
}

Test(session_io, empty_record_is_a_first_daemon)
{
	struct tfs_session_io io;
	int fd = record();
	tfs_log_init_stderr(&quiet, TFS_LOG_ERROR);
	cr_assert_eq(tfs_session_io_open(&io, 99, fd, false, &quiet), 0);
	cr_assert(!tfs_session_io_resumed(&io));
	cr_assert(!io.replay);
	close(fd);
}

Test(session_io, full_record_resumes)
{
	struct tfs_session_io io;
	int fd = record();
	tfs_log_init_stderr(&quiet, TFS_LOG_ERROR);
	write_record(fd, "TFSSESS1", FUSE_INIT, true);
	cr_assert_eq(tfs_session_io_open(&io, 99, fd, true, &quiet), 0);
	cr_assert(tfs_session_io_resumed(&io));
	cr_assert(io.replay && io.no_resend);
	cr_assert_eq(io.init_unique, 42);
	cr_assert_eq(tfs_session_io_serving_ns(&io), 0);
	close(fd);
}

Test(session_io, unanswered_init_is_replayed_not_resumed)
{
	struct tfs_session_io io;
	int fd = record();
	tfs_log_init_stderr(&quiet, TFS_LOG_ERROR);
	write_record(fd, "TFSSESS1", FUSE_INIT, false);
	cr_assert_eq(tfs_session_io_open(&io, 99, fd, false, &quiet), 0);
	cr_assert(!tfs_session_io_resumed(&io));
	cr_assert(io.replay);
	close(fd);
}

Test(session_io, malformed_records_are_refused)
{
	struct tfs_session_io io;
	int fd = record();
	tfs_log_init_stderr(&quiet, TFS_LOG_ERROR);
	write_record(fd, "NOTASESS", FUSE_INIT, true);
	cr_assert_eq(tfs_session_io_open(&io, 99, fd, false, &quiet), EIO);
	close(fd);
	fd = record();
	write_record(fd, "TFSSESS1", FUSE_LOOKUP, true);
	cr_assert_eq(tfs_session_io_open(&io, 99, fd, false, &quiet), EIO);
	close(fd);
	fd = record();
	struct {
		char magic[8];
		uint32_t req_len, reply_len;
	} big = { .req_len = TFS_SESSION_MAX_MSG + 1 };
	memcpy(big.magic, "TFSSESS1", 8);
	cr_assert_eq(pwrite(fd, &big, sizeof(big), 0), (ssize_t)sizeof(big));
	cr_assert_eq(tfs_session_io_open(&io, 99, fd, false, &quiet), EIO);
	close(fd);
}

Test(keeper, binary_path)
{
	char out[PATH_MAX], cwd[PATH_MAX], want[PATH_MAX + 16];
	cr_assert_eq(tfs_keeper_binary_path("/usr/bin/tierfs", "/", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "/usr/bin/tierfs");
	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "%s/build/tierfs", cwd);
	/* Against the directory the command started in, not the one the
	 * process is in now (a keeper is in / by then). */
	cr_assert_eq(chdir("/"), 0);
	cr_assert_eq(tfs_keeper_binary_path("build/tierfs", cwd, out, sizeof(out)), 0);
	cr_assert_eq(chdir(cwd), 0);
	cr_assert_str_eq(out, want);
	cr_assert_eq(tfs_keeper_binary_path("build/tierfs", NULL, out, sizeof(out)), ENOENT);
	setenv("PATH", "relative:/nonexistent:/bin:/usr/bin", 1);
	cr_assert_eq(tfs_keeper_binary_path("sh", cwd, out, sizeof(out)), 0);
	cr_assert(strcmp(out, "/bin/sh") == 0 || strcmp(out, "/usr/bin/sh") == 0, "%s", out);
	cr_assert_eq(tfs_keeper_binary_path("no-such-tierfs-binary", cwd, out, sizeof(out)),
		     ENOENT);
	cr_assert_eq(tfs_keeper_binary_path("/usr/bin/tierfs", cwd, out, 8), ENAMETOOLONG);
}

/* The argv a keeper gives its daemon, with the link in descriptor `fd`. */
static int daemon_argv(char **argv, char *arg, size_t arglen, int fd)
{
	snprintf(arg, arglen, "%s%d", TFS_KEEPER_LINK_ARG, fd);
	argv[0] = "mount";
	argv[1] = arg;
	argv[2] = "s3://b";
	argv[3] = "/mnt/x";
	argv[4] = NULL;
	return 4;
}

/* A memfd holding `json`. */
static int link_of(const char *json)
{
	int fd = memfd_create("test-link", MFD_CLOEXEC);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	return fd;
}

Test(keeper, link_round_trip)
{
	struct tfs_keeper_link in = {
		.fuse_fd = record(),
		.status_fd = -1,
		.keeper_pid = 1234,
		.generation = 3,
		.restarts = 3,
		.crashes = 2,
		.upgrades = 1,
		.stopped_ns = UINT64_MAX - 1,
		.backoff_ms = 200,
	};
	struct tfs_keeper_link l;
	char *argv[5], arg[64];
	int lfd;

	in.record_fd = in.fuse_fd;
	snprintf(in.cause, sizeof(in.cause), "upgrade \"quoted\"\n");
	snprintf(in.mountpoint, sizeof(in.mountpoint), "/mnt/x");
	snprintf(in.cwd, sizeof(in.cwd), "/home/u");
	cr_assert_eq(fcntl(in.fuse_fd, F_SETFD, 0), 0);

	/* absent: not under a keeper, argv untouched */
	int argc = daemon_argv(argv, arg, sizeof(arg), 0);
	argv[1] = "s3://b";
	argv[2] = "/mnt/x";
	argv[3] = NULL;
	argc = 3;
	cr_assert_eq(tfs_keeper_link_take(&argc, argv, &l), 0);
	cr_assert_eq(l.fuse_fd, -1);
	cr_assert_eq(argc, 3);

	cr_assert_eq(tfs_keeper_link_encode(&in, &lfd), 0);
	argc = daemon_argv(argv, arg, sizeof(arg), lfd);
	cr_assert_eq(tfs_keeper_link_take(&argc, argv, &l), 0);
	cr_assert_eq(argc, 3);
	cr_assert_str_eq(argv[0], "mount");
	cr_assert_str_eq(argv[1], "s3://b");
	cr_assert_str_eq(argv[2], "/mnt/x");
	cr_assert_null(argv[3]);
	cr_assert_eq(l.fuse_fd, in.fuse_fd);
	cr_assert_eq(l.record_fd, in.fuse_fd);
	cr_assert_eq(l.status_fd, -1);
	cr_assert_eq(l.keeper_pid, 1234);
	cr_assert_eq(l.generation, 3);
	cr_assert_eq(l.restarts, 3);
	cr_assert_eq(l.crashes, 2);
	cr_assert_eq(l.upgrades, 1);
	cr_assert_eq(l.stopped_ns, UINT64_MAX - 1);
	cr_assert_eq(l.backoff_ms, 200);
	cr_assert_str_eq(l.cause, in.cause);
	cr_assert_str_eq(l.cwd, "/home/u");
	cr_assert_str_eq(l.mountpoint, "/mnt/x");
	/* the link is closed, and what the daemon runs inherits nothing */
	cr_assert_eq(fcntl(lfd, F_GETFD), -1);
	cr_assert_eq(fcntl(in.fuse_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(in.fuse_fd);
}

Test(keeper, malformed_links_are_refused)
{
	static const char *const bad[] = {
		"not json",
		"[1]",
		"{\"fuse_fd\":500,\"record_fd\":500,\"status_fd\":-1,\"keeper_pid\":0,"
		"\"generation\":0,\"restarts\":0,\"crashes\":0,\"upgrades\":0,\"stopped_ns\":0,"
		"\"backoff_ms\":0,\"cause\":\"\",\"cwd\":\"/\",\"mountpoint\":\"/m\"}",
		"{\"fuse_fd\":500,\"record_fd\":500,\"status_fd\":-1,\"keeper_pid\":9,"
		"\"generation\":0,\"restarts\":0,\"crashes\":0,\"upgrades\":0,\"stopped_ns\":0,"
		"\"backoff_ms\":0,\"cause\":\"\",\"cwd\":\"/\",\"mountpoint\":\"relative\"}",
		"{\"fuse_fd\":500,\"record_fd\":500,\"status_fd\":-1,\"keeper_pid\":9,"
		"\"generation\":-1,\"restarts\":0,\"crashes\":0,\"upgrades\":0,\"stopped_ns\":0,"
		"\"backoff_ms\":0,\"cause\":\"\",\"cwd\":\"/\",\"mountpoint\":\"/m\"}",
		"{\"fuse_fd\":500,\"record_fd\":500,\"status_fd\":-1,\"keeper_pid\":9,"
		"\"generation\":0,\"restarts\":0,\"crashes\":0,\"upgrades\":0,\"stopped_ns\":0,"
		"\"backoff_ms\":0,\"cause\":7,\"cwd\":\"/\",\"mountpoint\":\"/m\"}",
		"{\"fuse_fd\":999,\"record_fd\":500,\"status_fd\":-1,\"keeper_pid\":9,"
		"\"generation\":0,\"restarts\":0,\"crashes\":0,\"upgrades\":0,\"stopped_ns\":0,"
		"\"backoff_ms\":0,\"cause\":\"\",\"cwd\":\"/\",\"mountpoint\":\"/m\"}",
	};
	struct tfs_keeper_link l;
	char *argv[5], arg[64];
	int fd = dup2(record(), 500); /* the descriptor the links name */
	cr_assert_eq(fd, 500);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int lfd = link_of(bad[i]);
		int argc = daemon_argv(argv, arg, sizeof(arg), lfd);
		cr_assert_eq(tfs_keeper_link_take(&argc, argv, &l), EINVAL, "%s", bad[i]);
		cr_assert_eq(l.fuse_fd, -1);
		cr_assert_eq(fcntl(lfd, F_GETFD), -1);
	}
	int argc = daemon_argv(argv, arg, sizeof(arg), 0);
	argv[1] = TFS_KEEPER_LINK_ARG "x";
	cr_assert_eq(tfs_keeper_link_take(&argc, argv, &l), EINVAL);
	/* longer than TFS_KEEPER_LINK_MAX */
	int lfd = memfd_create("big", MFD_CLOEXEC);
	cr_assert_eq(ftruncate(lfd, TFS_KEEPER_LINK_MAX + 1), 0);
	argc = daemon_argv(argv, arg, sizeof(arg), lfd);
	cr_assert_eq(tfs_keeper_link_take(&argc, argv, &l), EINVAL);
	close(fd);
}

/* The test hooks work in a test-hooks build only: a build without
 * --enable-test-hooks (a package, `make distcheck`) ignores them. */
Test(keeper, test_hooks_only_in_test_builds)
{
	struct tfs_keeper_link in = { .status_fd = -1, .keeper_pid = 9 }, l;
	char *argv[5], arg[64];
	int lfd;

	in.fuse_fd = in.record_fd = record();
	snprintf(in.mountpoint, sizeof(in.mountpoint), "/m");
	setenv(TFS_TEST_ENV_NO_RESEND, "1", 1);
	setenv(TFS_TEST_ENV_RESUME_MISMATCH, "1", 1);
	cr_assert_eq(tfs_keeper_link_encode(&in, &lfd), 0);
	int argc = daemon_argv(argv, arg, sizeof(arg), lfd);
	cr_assert_eq(tfs_keeper_link_take(&argc, argv, &l), 0);
#ifdef TFS_TEST_HOOKS
	cr_assert(l.no_resend && l.test_mismatch);
#else
	cr_assert(!l.no_resend && !l.test_mismatch, "a build without test hooks obeyed them");
#endif
	close(in.fuse_fd);
}

/* A directory of mode `mode` under a fresh one in /tmp, owned by root. */
static void mkdir_mode(const char *path, mode_t mode)
{
	cr_assert_eq(mkdir(path, 0700), 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(chmod(path, mode), 0);
}

static void file_mode(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0700);
	cr_assert(fd >= 0);
	close(fd);
	cr_assert_eq(chmod(path, mode), 0);
}

Test(keeper, binary_check)
{
	char top[] = "/tmp/tierfs-keeper-XXXXXX", p[PATH_MAX], q[PATH_MAX], err[PATH_MAX + 200];
	uid_t me = geteuid();
	cr_assert_not_null(mkdtemp(top));
	cr_assert_eq(chmod(top, 0755), 0);

	/* owned by this user, not writable by others: allowed */
	snprintf(p, sizeof(p), "%s/ok", top);
	mkdir_mode(p, 0755);
	snprintf(p, sizeof(p), "%s/ok/tierfs", top);
	file_mode(p, 0755);
	cr_assert_eq(tfs_keeper_check_binary(p, -1, me, err, sizeof(err)), 0, "%s", err);
	int fd = open(p, O_PATH | O_CLOEXEC);
	cr_assert_eq(tfs_keeper_check_binary(p, fd, me, err, sizeof(err)), 0, "%s", err);
	close(fd);

	/* a group-writable file */
	cr_assert_eq(chmod(p, 0775), 0);
	cr_assert_eq(tfs_keeper_check_binary(p, -1, me, err, sizeof(err)), EPERM);
	cr_assert(strstr(err, "writable by its group or others") != NULL, "%s", err);
	cr_assert_eq(chmod(p, 0755), 0);

	/* a group-writable directory on the way */
	snprintf(q, sizeof(q), "%s/gw", top);
	mkdir_mode(q, 0775);
	snprintf(q, sizeof(q), "%s/gw/tierfs", top);
	file_mode(q, 0755);
	cr_assert_eq(tfs_keeper_check_binary(q, -1, me, err, sizeof(err)), EPERM);
	cr_assert(strstr(err, "/gw is writable by its group or others (mode 0775, not sticky)"),
		  "%s", err);

	/* ... reached through a symlink from a good directory */
	snprintf(p, sizeof(p), "%s/ok/link", top);
	snprintf(q, sizeof(q), "%s/gw", top);
	cr_assert_eq(symlink(q, p), 0);
	snprintf(p, sizeof(p), "%s/ok/link/tierfs", top);
	cr_assert_eq(tfs_keeper_check_binary(p, -1, me, err, sizeof(err)), EPERM);
	cr_assert(strstr(err, "/ok/link is writable") != NULL, "%s", err);

	/* a sticky world-writable directory (as /tmp) is allowed */
	snprintf(q, sizeof(q), "%s/sticky", top);
	mkdir_mode(q, 01777);
	snprintf(q, sizeof(q), "%s/sticky/tierfs", top);
	file_mode(q, 0755);
	cr_assert_eq(tfs_keeper_check_binary(q, -1, me, err, sizeof(err)), 0, "%s", err);

	/* owned by another user, neither root nor the mount's owner */
	if (me == 0) {
		cr_assert_eq(chown(q, 65534, 65534), 0);
		cr_assert_eq(tfs_keeper_check_binary(q, -1, 0, err, sizeof(err)), EPERM);
		cr_assert(strstr(err, "owned by uid 65534") != NULL, "%s", err);
		/* ... unless that user mounts */
		cr_assert_eq(tfs_keeper_check_binary(q, -1, 65534, err, sizeof(err)), 0, "%s", err);
	}
	/* not a regular file; missing */
	snprintf(q, sizeof(q), "%s/ok", top);
	cr_assert_eq(tfs_keeper_check_binary(q, -1, me, err, sizeof(err)), EPERM);
	snprintf(q, sizeof(q), "%s/none", top);
	cr_assert_eq(tfs_keeper_check_binary(q, -1, me, err, sizeof(err)), ENOENT);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	cr_assert_eq(system(cmd), 0);
}

Test(keeper, close_fds_keeps_only_what_is_named)
{
	int p[2], q[2];
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(pipe(q), 0);
	int high = dup2(p[0], 900);
	cr_assert_eq(high, 900);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		const int keep[] = { 0, 1, 2, q[1], -1 };
		if (tfs_keeper_close_fds(keep, 5) != 0)
			_exit(2);
		/* p[0], p[1], q[0] and 900 are closed; q[1] stays */
		_exit(fcntl(p[0], F_GETFD) == -1 && fcntl(p[1], F_GETFD) == -1 &&
				      fcntl(q[0], F_GETFD) == -1 && fcntl(900, F_GETFD) == -1 &&
				      fcntl(q[1], F_GETFD) != -1
			      ? 0
			      : 1);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	close(p[0]);
	close(p[1]);
	close(q[0]);
	close(q[1]);
	close(900);
}
