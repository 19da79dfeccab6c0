/* test_keeper.c - what the keeper and its daemon exchange: the session
 * record (session_io.h), the environment (tfs_keeper_link_from_env()) and
 * the binary a restart runs (tfs_keeper_binary_path()). */
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

Test(keeper, link_from_env)
{
	struct tfs_keeper_link l;
	unsetenv(TFS_KEEPER_ENV_FUSE_FD);
	cr_assert_eq(tfs_keeper_link_from_env(&l), 0);
	cr_assert_eq(l.fuse_fd, -1);

	int fd = record();
	char num[16];
	snprintf(num, sizeof(num), "%d", fd);
	setenv(TFS_KEEPER_ENV_FUSE_FD, num, 1);
	setenv(TFS_KEEPER_ENV_RECORD_FD, num, 1);
	setenv(TFS_KEEPER_ENV_PID, "1234", 1);
	setenv(TFS_KEEPER_ENV_MOUNTPOINT, "/mnt/x", 1);
	setenv(TFS_KEEPER_ENV_GENERATION, "3", 1);
	setenv(TFS_KEEPER_ENV_RESTARTS, "3", 1);
	setenv(TFS_KEEPER_ENV_CRASHES, "2", 1);
	setenv(TFS_KEEPER_ENV_UPGRADES, "1", 1);
	setenv(TFS_KEEPER_ENV_CAUSE, "upgrade", 1);
	setenv(TFS_KEEPER_ENV_BACKOFF_MS, "200", 1);
	cr_assert_eq(tfs_keeper_link_from_env(&l), 0);
	cr_assert_eq(l.fuse_fd, fd);
	cr_assert_eq(l.status_fd, -1);
	cr_assert_eq(l.keeper_pid, 1234);
	cr_assert_eq(l.generation, 3);
	cr_assert_eq(l.crashes, 2);
	cr_assert_eq(l.upgrades, 1);
	cr_assert_eq(l.backoff_ms, 200);
	cr_assert_str_eq(l.cause, "upgrade");
	cr_assert_str_eq(l.mountpoint, "/mnt/x");
	/* removed from the environment, and not inherited by what it runs */
	cr_assert_null(getenv(TFS_KEEPER_ENV_FUSE_FD));
	cr_assert_null(getenv(TFS_KEEPER_ENV_CAUSE));
	cr_assert_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);

	setenv(TFS_KEEPER_ENV_FUSE_FD, num, 1);
	setenv(TFS_KEEPER_ENV_RECORD_FD, num, 1);
	setenv(TFS_KEEPER_ENV_PID, "12x", 1);
	setenv(TFS_KEEPER_ENV_MOUNTPOINT, "/mnt/x", 1);
	cr_assert_eq(tfs_keeper_link_from_env(&l), EINVAL);
	setenv(TFS_KEEPER_ENV_FUSE_FD, num, 1);
	setenv(TFS_KEEPER_ENV_RECORD_FD, num, 1);
	setenv(TFS_KEEPER_ENV_PID, "12", 1);
	setenv(TFS_KEEPER_ENV_MOUNTPOINT, "relative", 1);
	cr_assert_eq(tfs_keeper_link_from_env(&l), EINVAL);
	close(fd);
}
