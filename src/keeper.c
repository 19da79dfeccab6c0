/* keeper.c - the keeper: holds /dev/fuse, runs and restarts the daemon
 * (see keeper.h). */
#include "config.h"

#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "commands.h"
#include "log.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 10000
#define HEALTHY_NS (60ull * 1000000000ull)
#define STATUS_MAX 1100

/* ---- the daemon's side: the link ---- */

static int env_u64(const char *name, uint64_t max, uint64_t *out)
{
	const char *s = getenv(name);
	char *end;
	if (s == NULL) {
		*out = 0;
		return 0;
	}
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end != '\0' || v > max) {
		fprintf(stderr, "tierfs: %s=%s: not a number\n", name, s);
		return EINVAL;
	}
	*out = v;
	return 0;
}

static int env_fd(const char *name, int *out)
{
	uint64_t v;
	if (getenv(name) == NULL) {
		*out = -1;
		return 0;
	}
	if (env_u64(name, INT_MAX, &v) != 0)
		return EINVAL;
	*out = (int)v;
	/* Not passed on to what the daemon runs. */
	if (fcntl(*out, F_SETFD, FD_CLOEXEC) != 0) {
		fprintf(stderr, "tierfs: %s=%d: %s\n", name, *out, strerror(errno));
		return EINVAL;
	}
	return 0;
}

static void env_str(const char *name, char *out, size_t outlen)
{
	const char *s = getenv(name);
	snprintf(out, outlen, "%s", s ? s : "");
}

int tfs_keeper_link_from_env(struct tfs_keeper_link *l)
{
	static const char *const names[] = {
		TFS_KEEPER_ENV_FUSE_FD,    TFS_KEEPER_ENV_RECORD_FD, TFS_KEEPER_ENV_STATUS_FD,
		TFS_KEEPER_ENV_PID,        TFS_KEEPER_ENV_CWD,       TFS_KEEPER_ENV_MOUNTPOINT,
		TFS_KEEPER_ENV_GENERATION, TFS_KEEPER_ENV_RESTARTS,  TFS_KEEPER_ENV_CRASHES,
		TFS_KEEPER_ENV_UPGRADES,   TFS_KEEPER_ENV_CAUSE,     TFS_KEEPER_ENV_STOPPED_NS,
		TFS_KEEPER_ENV_BACKOFF_MS,
	};
	uint64_t v = 0;
	int rc = 0;

	memset(l, 0, sizeof(*l));
	l->fuse_fd = l->record_fd = l->status_fd = -1;
	if (getenv(TFS_KEEPER_ENV_FUSE_FD) == NULL)
		return 0;
	if (env_fd(TFS_KEEPER_ENV_FUSE_FD, &l->fuse_fd) ||
	    env_fd(TFS_KEEPER_ENV_RECORD_FD, &l->record_fd) ||
	    env_fd(TFS_KEEPER_ENV_STATUS_FD, &l->status_fd))
		rc = EINVAL;
	if (rc == 0 && (env_u64(TFS_KEEPER_ENV_PID, INT_MAX, &v) != 0 || v == 0))
		rc = EINVAL;
	l->keeper_pid = (int)v;
	if (rc == 0 && env_u64(TFS_KEEPER_ENV_GENERATION, UINT32_MAX, &v) != 0)
		rc = EINVAL;
	l->generation = (uint32_t)v;
	if (rc == 0 && (env_u64(TFS_KEEPER_ENV_RESTARTS, UINT64_MAX, &l->restarts) ||
			env_u64(TFS_KEEPER_ENV_CRASHES, UINT64_MAX, &l->crashes) ||
			env_u64(TFS_KEEPER_ENV_UPGRADES, UINT64_MAX, &l->upgrades) ||
			env_u64(TFS_KEEPER_ENV_STOPPED_NS, UINT64_MAX, &l->stopped_ns) ||
			env_u64(TFS_KEEPER_ENV_BACKOFF_MS, UINT64_MAX, &l->backoff_ms)))
		rc = EINVAL;
	if (rc == 0 && l->record_fd < 0)
		rc = EINVAL;
	env_str(TFS_KEEPER_ENV_CAUSE, l->cause, sizeof(l->cause));
	env_str(TFS_KEEPER_ENV_CWD, l->cwd, sizeof(l->cwd));
	env_str(TFS_KEEPER_ENV_MOUNTPOINT, l->mountpoint, sizeof(l->mountpoint));
	if (rc == 0 && l->mountpoint[0] != '/')
		rc = EINVAL;
	const char *nr = getenv(TFS_KEEPER_ENV_NO_RESEND);
	l->no_resend = nr && strcmp(nr, "1") == 0;
	const char *tm = getenv(TFS_KEEPER_ENV_TEST_MISMATCH);
	l->test_mismatch = tm && strcmp(tm, "1") == 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unsetenv(names[i]);
	if (rc)
		fprintf(stderr, "tierfs: the keeper's environment is malformed\n");
	return rc;
}

int tfs_keeper_binary_path(const char *argv0, const char *cwd, char *out, size_t outlen)
{
	int n;

	if (argv0[0] == '/') {
		n = snprintf(out, outlen, "%s", argv0);
		return n < 0 || (size_t)n >= outlen ? ENAMETOOLONG : 0;
	}
	if (strchr(argv0, '/') != NULL) {
		if (cwd == NULL || cwd[0] != '/')
			return ENOENT;
		n = snprintf(out, outlen, "%s/%s", cwd, argv0);
		return n < 0 || (size_t)n >= outlen ? ENAMETOOLONG : 0;
	}
	const char *path = getenv("PATH");
	if (path == NULL)
		return ENOENT;
	while (*path) {
		size_t len = strcspn(path, ":");
		if (len > 0 && path[0] == '/') {
			n = snprintf(out, outlen, "%.*s/%s", (int)len, path, argv0);
			if (n > 0 && (size_t)n < outlen && access(out, X_OK) == 0)
				return 0;
		}
		path += len;
		if (*path == ':')
			path++;
	}
	return ENOENT;
}

/* ---- the keeper ---- */

struct keeper {
	const struct tfs_keeper_opts *o;
	struct fuse_session *se;
	int fuse_fd;
	int record_fd;
	int sfd; /* signalfd: SIGCHLD, SIGTERM, SIGINT, SIGHUP */
	int status_fd;
	sigset_t oldmask;
	bool stopping;
	uint64_t handover_ns; /* when the daemon said it stopped reading
			       * (SIGUSR1 from it before an upgrade), or 0 */
	/* Health, passed to each daemon. */
	uint32_t generation;
	uint64_t restarts, crashes, upgrades, stopped_ns, backoff_ms;
	uint64_t next_backoff_ms;
	char cause[TFS_KEEPER_CAUSE_MAX];
};

/* One daemon's run. */
struct run {
	pid_t pid;
	int st; /* read end of its status pipe, or -1 at EOF */
	char msg[STATUS_MAX];
	size_t len;
	uint64_t ok_ns; /* when it said "ok", or 0 */
	int wstatus;
	bool exited;
};

static void report(int *fd, const char *msg)
{
	if (*fd < 0)
		return;
	size_t n = strlen(msg);
	while (n) {
		ssize_t w = write(*fd, msg, n);
		if (w <= 0)
			break;
		msg += w;
		n -= (size_t)w;
	}
	close(*fd);
	*fd = -1;
}

static void setenv_u64(const char *name, uint64_t v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	setenv(name, buf, 1);
}

/* In the forked child: the environment, the descriptors, exec. */
static void exec_daemon(struct keeper *k, int st_write)
{
	const struct tfs_keeper_opts *o = k->o;
	sigprocmask(SIG_SETMASK, &k->oldmask, NULL);
	if (fcntl(k->fuse_fd, F_SETFD, 0) != 0 || fcntl(k->record_fd, F_SETFD, 0) != 0 ||
	    fcntl(st_write, F_SETFD, 0) != 0)
		_exit(TFS_EXIT_FAIL);
	setenv_u64(TFS_KEEPER_ENV_FUSE_FD, (uint64_t)k->fuse_fd);
	setenv_u64(TFS_KEEPER_ENV_RECORD_FD, (uint64_t)k->record_fd);
	setenv_u64(TFS_KEEPER_ENV_STATUS_FD, (uint64_t)st_write);
	setenv_u64(TFS_KEEPER_ENV_PID, (uint64_t)getppid());
	setenv(TFS_KEEPER_ENV_CWD, o->cwd ? o->cwd : "/", 1);
	setenv(TFS_KEEPER_ENV_MOUNTPOINT, o->mountpoint, 1);
	setenv_u64(TFS_KEEPER_ENV_GENERATION, k->generation);
	setenv_u64(TFS_KEEPER_ENV_RESTARTS, k->restarts);
	setenv_u64(TFS_KEEPER_ENV_CRASHES, k->crashes);
	setenv_u64(TFS_KEEPER_ENV_UPGRADES, k->upgrades);
	setenv_u64(TFS_KEEPER_ENV_STOPPED_NS, k->stopped_ns);
	setenv_u64(TFS_KEEPER_ENV_BACKOFF_MS, k->backoff_ms);
	setenv(TFS_KEEPER_ENV_CAUSE, k->cause, 1);
	execv(o->binary, o->argv);
	_exit(127);
}

/* Start a daemon.  Returns 0 or an errno (logged). */
static int start_daemon(struct keeper *k, struct run *r)
{
	int p[2];
	memset(r, 0, sizeof(*r));
	r->st = -1;
	if (pipe2(p, O_CLOEXEC) != 0) {
		tfs_err(k->o->log, "keeper: pipe: %s", strerror(errno));
		return errno;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		tfs_err(k->o->log, "keeper: fork: %s", strerror(e));
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (pid == 0) {
		close(p[0]);
		exec_daemon(k, p[1]);
	}
	close(p[1]);
	r->pid = pid;
	r->st = p[0];
	return 0;
}

/* SIGTERM or SIGINT: end the mount. */
static void stop(struct keeper *k, struct run *r, pid_t sender)
{
	if (k->stopping)
		return;
	k->stopping = true;
	tfs_info(k->o->log, "keeper: unmounting %s", k->o->mountpoint);
	fuse_session_unmount(k->se);
	/* A daemon that asked for the unmount is ending already. */
	if (r && !r->exited && r->pid > 0 && sender != r->pid)
		kill(r->pid, SIGTERM);
}

/* Read what the daemon says on its status pipe. */
static void read_status(struct keeper *k, struct run *r)
{
	ssize_t n = read(r->st, r->msg + r->len, sizeof(r->msg) - 1 - r->len);
	if (n > 0) {
		r->len += (size_t)n;
		if (r->len < sizeof(r->msg) - 1)
			return;
	} else if (n < 0 && errno == EINTR) {
		return;
	}
	r->msg[r->len] = '\0';
	close(r->st);
	r->st = -1;
	if (strcmp(r->msg, "ok") == 0) {
		r->ok_ns = tfs_mono_ns();
		if (k->generation == 0)
			report(&k->status_fd, "ok");
	}
}

/* Handle one signal from the signalfd. */
static void take_signal(struct keeper *k, struct run *r)
{
	struct signalfd_siginfo si;
	if (read(k->sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return;
	switch (si.ssi_signo) {
	case SIGCHLD:
		if (r && !r->exited && waitpid(r->pid, &r->wstatus, WNOHANG) == r->pid)
			r->exited = true;
		break;
	case SIGTERM:
	case SIGINT:
		stop(k, r, (pid_t)si.ssi_pid);
		break;
	case SIGHUP:
		if (r && !r->exited)
			kill(r->pid, SIGHUP);
		break;
	case SIGUSR1:
		if (r && (pid_t)si.ssi_pid == r->pid)
			k->handover_ns = tfs_mono_ns();
		break;
	default:
		break;
	}
}

/* Wait until the daemon has exited and its status pipe is closed. */
static void watch(struct keeper *k, struct run *r)
{
	while (!r->exited || r->st >= 0) {
		struct pollfd p[2] = { { .fd = k->sfd, .events = POLLIN },
				       { .fd = r->st, .events = POLLIN } };
		int n = poll(p, r->st >= 0 ? 2 : 1, -1);
		if (n < 0)
			continue; /* EINTR */
		if (r->st >= 0 && p[1].revents)
			read_status(k, r);
		if (p[0].revents & POLLIN)
			take_signal(k, r);
		/* A SIGCHLD may be merged with another: look again. */
		if (!r->exited && waitpid(r->pid, &r->wstatus, WNOHANG) == r->pid)
			r->exited = true;
	}
}

/* Wait `ms` milliseconds, or until SIGTERM/SIGINT. */
static void pause_ms(struct keeper *k, uint64_t ms)
{
	uint64_t end = tfs_mono_ms() + ms;
	for (;;) {
		uint64_t now = tfs_mono_ms();
		if (k->stopping || now >= end)
			return;
		struct pollfd p = { .fd = k->sfd, .events = POLLIN };
		if (poll(&p, 1, (int)(end - now)) > 0)
			take_signal(k, NULL);
	}
}

/* Whether the kernel connection has ended (unmounted, or aborted through
 * /sys/fs/fuse/connections): the descriptor then polls POLLERR, as
 * libfuse's unmount checks it.  A daemon started on it could only fail. */
static bool connection_ended(const struct keeper *k)
{
	struct pollfd p = { .fd = k->fuse_fd, .events = 0 };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/* Why the daemon ended, for the log and the next daemon.  Returns true
 * when a new daemon must start, with *delay_ms set. */
static bool classify(struct keeper *k, const struct run *r, uint64_t *delay_ms)
{
	int ws = r->wstatus;
	*delay_ms = 0;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return false;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == TFS_DAEMON_EXIT_UPGRADE) {
		snprintf(k->cause, sizeof(k->cause), "upgrade");
		k->upgrades++;
		return true;
	}
	if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)
		snprintf(k->cause, sizeof(k->cause),
			 "killed by SIGKILL: the OOM killer or kill -9");
	else if (WIFSIGNALED(ws))
		snprintf(k->cause, sizeof(k->cause), "killed by signal %d (%s)%s", WTERMSIG(ws),
			 strsignal(WTERMSIG(ws)), WCOREDUMP(ws) ? ", core dumped" : "");
	else if (WEXITSTATUS(ws) == TFS_DAEMON_EXIT_RESUME)
		snprintf(k->cause, sizeof(k->cause),
			 "resume refused: the daemon negotiates other FUSE parameters than the "
			 "kernel agreed to (exit status %d)",
			 TFS_DAEMON_EXIT_RESUME);
	else
		snprintf(
			k->cause, sizeof(k->cause), "exit status %d%s%.80s", WEXITSTATUS(ws),
			r->ok_ns || r->len == 0 ? "" : " before serving: ", r->ok_ns ? "" : r->msg);
	k->crashes++;
	if (r->ok_ns && k->stopped_ns - r->ok_ns >= HEALTHY_NS)
		k->next_backoff_ms = 0;
	*delay_ms = k->next_backoff_ms;
	k->next_backoff_ms = k->next_backoff_ms == 0                   ? BACKOFF_FIRST_MS
			     : k->next_backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
								       : k->next_backoff_ms * 2;
	return true;
}

/* The first daemon failed: tell `tierfs mount` why. */
static void first_failed(struct keeper *k, const struct run *r)
{
	char msg[STATUS_MAX + 64];
	int ws = r->wstatus;
	if (r->len)
		snprintf(msg, sizeof(msg), "%s", r->msg);
	else if (WIFSIGNALED(ws))
		snprintf(msg, sizeof(msg), "the daemon died of signal %d", WTERMSIG(ws));
	else
		snprintf(msg, sizeof(msg), "the daemon exited with status %d",
			 WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
	tfs_err(k->o->log, "keeper: %s", msg);
	report(&k->status_fd, msg);
}

/* Mount with libfuse, and create the record and the signalfd.  Returns
 * 0, or an errno with the message reported. */
static int keeper_open(struct keeper *k)
{
	static const struct fuse_lowlevel_ops no_ops;
	const struct tfs_keeper_opts *o = k->o;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, &k->oldmask);
	k->sfd = signalfd(-1, &set, SFD_CLOEXEC);
	k->record_fd = memfd_create("tierfs-session", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (k->sfd < 0 || k->record_fd < 0) {
		char msg[128];
		snprintf(msg, sizeof(msg), "keeper: %s", strerror(errno));
		tfs_err(o->log, "%s", msg);
		report(&k->status_fd, msg);
		return EIO;
	}
	k->se = fuse_session_new(o->fargs, &no_ops, sizeof(no_ops), NULL);
	if (k->se == NULL) {
		report(&k->status_fd, "invalid FUSE options");
		return EINVAL;
	}
	if (fuse_session_mount(k->se, o->mountpoint) != 0) {
		report(&k->status_fd, "the kernel refused the mount (see above; is the mountpoint "
				      "busy?)");
		return EIO;
	}
	k->fuse_fd = fuse_session_fd(k->se);
	return 0;
}

int tfs_keeper_run(const struct tfs_keeper_opts *o)
{
	struct keeper k = {
		.o = o,
		.fuse_fd = -1,
		.record_fd = -1,
		.sfd = -1,
		.status_fd = o->status_fd,
	};
	struct run r = { .pid = -1, .st = -1 };
	int rc = TFS_EXIT_OK;

	if (keeper_open(&k) != 0) {
		rc = TFS_EXIT_FAIL;
		goto out;
	}
	tfs_info(o->log, "keeper: mounted %s (binary %s)", o->mountpoint, o->binary);
	for (;;) {
		if (start_daemon(&k, &r) != 0) {
			if (k.generation == 0) {
				report(&k.status_fd, "cannot start the daemon");
				rc = TFS_EXIT_FAIL;
				break;
			}
			r.exited = true; /* retried after the backoff below */
			r.wstatus = TFS_EXIT_FAIL << 8;
		} else {
			watch(&k, &r);
		}
		k.stopped_ns = k.handover_ns ? k.handover_ns : tfs_mono_ns();
		k.handover_ns = 0;
		if (k.generation == 0 && r.ok_ns == 0) {
			first_failed(&k, &r);
			rc = TFS_EXIT_FAIL;
			break;
		}
		uint64_t delay;
		if (k.stopping || !classify(&k, &r, &delay))
			break;
		if (connection_ended(&k)) {
			tfs_info(o->log, "keeper: the connection of %s has ended (%s)",
				 o->mountpoint, k.cause);
			break;
		}
		k.generation++;
		k.restarts++;
		k.backoff_ms = delay;
		tfs_warn(o->log,
			 "keeper: the daemon (pid %d) of %s ended: %s; starting generation %" PRIu32
			 " in %" PRIu64 " ms",
			 (int)r.pid, o->mountpoint, k.cause, k.generation, delay);
		pause_ms(&k, delay);
		if (k.stopping || connection_ended(&k))
			break;
	}
	if (r.pid > 0 && !r.exited)
		kill(r.pid, SIGTERM);
	tfs_info(o->log, "keeper: %s ended after %" PRIu64 " restart(s)", o->mountpoint,
		 k.restarts);
out:
	report(&k.status_fd, "the keeper failed");
	if (k.se) {
		fuse_session_unmount(k.se);
		fuse_session_destroy(k.se);
	}
	if (k.record_fd >= 0)
		close(k.record_fd);
	if (k.sfd >= 0)
		close(k.sfd);
	sigprocmask(SIG_SETMASK, &k.oldmask, NULL);
	return rc;
}
