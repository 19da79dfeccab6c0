/* keeper.c - the keeper: holds /dev/fuse, runs and restarts the daemon
 * (see keeper.h). */
#include "config.h"

#include "keeper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <json-c/json.h>
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

int tfs_keeper_link_encode(const struct tfs_keeper_link *l, int *fd)
{
	struct json_object *o = json_object_new_object();
	int rc = ENOMEM;

	*fd = -1;
	if (o == NULL)
		return ENOMEM;
	json_object_object_add(o, "fuse_fd", json_object_new_int64(l->fuse_fd));
	json_object_object_add(o, "record_fd", json_object_new_int64(l->record_fd));
	json_object_object_add(o, "status_fd", json_object_new_int64(l->status_fd));
	json_object_object_add(o, "keeper_pid", json_object_new_int64(l->keeper_pid));
	json_object_object_add(o, "generation", json_object_new_uint64(l->generation));
	json_object_object_add(o, "restarts", json_object_new_uint64(l->restarts));
	json_object_object_add(o, "crashes", json_object_new_uint64(l->crashes));
	json_object_object_add(o, "upgrades", json_object_new_uint64(l->upgrades));
	json_object_object_add(o, "stopped_ns", json_object_new_uint64(l->stopped_ns));
	json_object_object_add(o, "backoff_ms", json_object_new_uint64(l->backoff_ms));
	json_object_object_add(o, "cause", json_object_new_string(l->cause));
	json_object_object_add(o, "cwd", json_object_new_string(l->cwd));
	json_object_object_add(o, "mountpoint", json_object_new_string(l->mountpoint));
	size_t len = 0;
	const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
	if (text == NULL || len > TFS_KEEPER_LINK_MAX)
		goto out;
	int m = memfd_create("tierfs-keeper-link", MFD_CLOEXEC);
	if (m < 0) {
		rc = errno;
		goto out;
	}
	if (write(m, text, len) != (ssize_t)len || lseek(m, 0, SEEK_SET) != 0) {
		rc = errno ? errno : EIO;
		close(m);
		goto out;
	}
	*fd = m;
	rc = 0;
out:
	json_object_put(o);
	return rc;
}

/* An integer member of the link within [min, max]. */
static int link_int(struct json_object *o, const char *name, int64_t min, uint64_t max,
		    uint64_t *out)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_int)) {
		fprintf(stderr, "tierfs: the keeper's link lacks %s\n", name);
		return EINVAL;
	}
	int64_t i = json_object_get_int64(v);
	uint64_t u = json_object_get_uint64(v);
	if (i < min || (i >= 0 && u > max)) {
		fprintf(stderr, "tierfs: the keeper's link: %s out of range\n", name);
		return EINVAL;
	}
	*out = i < 0 ? (uint64_t)i : u;
	return 0;
}

/* A string member of the link, shorter than outlen, without NUL. */
static int link_str(struct json_object *o, const char *name, char *out, size_t outlen)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_string)) {
		fprintf(stderr, "tierfs: the keeper's link lacks %s\n", name);
		return EINVAL;
	}
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	if (len >= outlen || strlen(s) != len) {
		fprintf(stderr, "tierfs: the keeper's link: %s is too long\n", name);
		return EINVAL;
	}
	memcpy(out, s, len + 1);
	return 0;
}

/* A descriptor of the link: -1, or open (then made close-on-exec). */
static int link_fd(struct json_object *o, const char *name, int *out)
{
	uint64_t v;
	if (link_int(o, name, -1, INT_MAX, &v) != 0)
		return EINVAL;
	*out = (int)(int64_t)v;
	if (*out >= 0 && fcntl(*out, F_SETFD, FD_CLOEXEC) != 0) {
		fprintf(stderr, "tierfs: the keeper's %s %d: %s\n", name, *out, strerror(errno));
		return EINVAL;
	}
	return 0;
}

/* Read the link's JSON from `fd` (from offset 0) and fill `l`. */
static int link_read(int fd, struct tfs_keeper_link *l)
{
	char *buf = malloc(TFS_KEEPER_LINK_MAX + 1);
	size_t len = 0;
	uint64_t v;
	int rc = EINVAL;

	if (buf == NULL)
		return ENOMEM;
	for (;;) {
		ssize_t n = pread(fd, buf + len, TFS_KEEPER_LINK_MAX + 1 - len, (off_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "tierfs: the keeper's link: %s\n", strerror(errno));
			free(buf);
			return EINVAL;
		}
		if (n == 0 || (len += (size_t)n) > TFS_KEEPER_LINK_MAX)
			break;
	}
	if (len > TFS_KEEPER_LINK_MAX) {
		fprintf(stderr, "tierfs: the keeper's link is longer than %d bytes\n",
			TFS_KEEPER_LINK_MAX);
		free(buf);
		return EINVAL;
	}
	buf[len] = '\0';
	struct json_object *o = json_tokener_parse(buf);
	free(buf);
	if (o == NULL || !json_object_is_type(o, json_type_object)) {
		fprintf(stderr, "tierfs: the keeper's link is not a JSON object\n");
		goto out;
	}
	if (link_fd(o, "fuse_fd", &l->fuse_fd) || link_fd(o, "record_fd", &l->record_fd) ||
	    link_fd(o, "status_fd", &l->status_fd))
		goto out;
	if (link_int(o, "keeper_pid", 1, INT_MAX, &v))
		goto out;
	l->keeper_pid = (int)v;
	if (link_int(o, "generation", 0, UINT32_MAX, &v))
		goto out;
	l->generation = (uint32_t)v;
	if (link_int(o, "restarts", 0, UINT64_MAX, &l->restarts) ||
	    link_int(o, "crashes", 0, UINT64_MAX, &l->crashes) ||
	    link_int(o, "upgrades", 0, UINT64_MAX, &l->upgrades) ||
	    link_int(o, "stopped_ns", 0, UINT64_MAX, &l->stopped_ns) ||
	    link_int(o, "backoff_ms", 0, UINT64_MAX, &l->backoff_ms) ||
	    link_str(o, "cause", l->cause, sizeof(l->cause)) ||
	    link_str(o, "cwd", l->cwd, sizeof(l->cwd)) ||
	    link_str(o, "mountpoint", l->mountpoint, sizeof(l->mountpoint)))
		goto out;
	if (l->fuse_fd < 0 || l->record_fd < 0 || l->mountpoint[0] != '/') {
		fprintf(stderr, "tierfs: the keeper's link names no descriptor or mountpoint\n");
		goto out;
	}
	rc = 0;
out:
	json_object_put(o);
	return rc;
}

int tfs_keeper_link_take(int *argc, char **argv, struct tfs_keeper_link *l)
{
	static const size_t pre = sizeof(TFS_KEEPER_LINK_ARG) - 1;
	char *end;

	memset(l, 0, sizeof(*l));
	l->fuse_fd = l->record_fd = l->status_fd = -1;
	if (*argc < 2 || strncmp(argv[1], TFS_KEEPER_LINK_ARG, pre) != 0)
		return 0;
	errno = 0;
	long fd = strtol(argv[1] + pre, &end, 10);
	if (errno || end == argv[1] + pre || *end != '\0' || fd < 0 || fd > INT_MAX) {
		fprintf(stderr, "tierfs: %s: not a descriptor\n", argv[1]);
		return EINVAL;
	}
	memmove(&argv[1], &argv[2], (size_t)(*argc - 1) * sizeof(*argv));
	(*argc)--;
	int rc = link_read((int)fd, l);
	close((int)fd);
	if (rc) {
		fprintf(stderr, "tierfs: the keeper's link is malformed\n");
		l->fuse_fd = -1;
		return EINVAL;
	}
#ifdef TFS_TEST_HOOKS
	const char *nr = getenv(TFS_TEST_ENV_NO_RESEND);
	l->no_resend = nr && strcmp(nr, "1") == 0;
	const char *tm = getenv(TFS_TEST_ENV_RESUME_MISMATCH);
	l->test_mismatch = tm && strcmp(tm, "1") == 0;
#endif
	return 0;
}

/* ---- descriptors and the binary ---- */

int tfs_keeper_close_fds(const int *keep, size_t n)
{
	int sorted[16];
	size_t m = 0;

	if (n > sizeof(sorted) / sizeof(sorted[0]))
		return EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (keep[i] < 0)
			continue;
		size_t j = m++;
		while (j > 0 && sorted[j - 1] > keep[i]) {
			sorted[j] = sorted[j - 1];
			j--;
		}
		sorted[j] = keep[i];
	}
	unsigned lo = 0;
	bool walk = false;
	for (size_t i = 0; i <= m && !walk; i++) {
		unsigned hi = i < m ? (unsigned)sorted[i] : ~0u;
		if (hi > lo && close_range(lo, hi - 1, 0) != 0) {
			if (errno != ENOSYS)
				return errno;
			walk = true; /* a kernel before 5.9 */
		}
		if (i < m)
			lo = hi + 1;
	}
	if (!walk)
		return 0;
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		return errno;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end != '\0' || end == e->d_name || fd == dirfd(d))
			continue;
		bool kept = false;
		for (size_t i = 0; i < m; i++)
			kept |= sorted[i] == fd;
		if (!kept)
			close((int)fd);
	}
	closedir(d);
	return 0;
}

/* Whether `st` (of `what`) may be trusted by a mount owned by `owner`. */
static int check_owner(const struct stat *st, const char *what, uid_t owner, bool dir, char *err,
		       size_t errlen)
{
	if (st->st_uid != 0 && st->st_uid != owner) {
		snprintf(err, errlen,
			 "%s is owned by uid %u, neither root nor the mount's owner (%u)", what,
			 (unsigned)st->st_uid, (unsigned)owner);
		return EPERM;
	}
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(dir && (st->st_mode & S_ISVTX))) {
		snprintf(err, errlen, "%s is writable by its group or others (mode %04o%s)", what,
			 (unsigned)(st->st_mode & 07777), dir ? ", not sticky" : "");
		return EPERM;
	}
	return 0;
}

/* Each directory on the way to `path` (absolute). */
static int check_dirs(const char *path, uid_t owner, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct stat st;
	size_t n = strlen(path);

	for (size_t i = 0; i < n; i++) {
		if (path[i] != '/')
			continue;
		size_t len = i == 0 ? 1 : i;
		if (len >= sizeof(dir))
			return ENAMETOOLONG;
		memcpy(dir, path, len);
		dir[len] = '\0';
		if (stat(dir, &st) != 0) {
			int e = errno;
			snprintf(err, errlen, "%s: %s", dir, strerror(e));
			return e;
		}
		char what[PATH_MAX + 16];
		snprintf(what, sizeof(what), "the directory %s", dir);
		int rc = check_owner(&st, what, owner, true, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

int tfs_keeper_check_binary(const char *path, int fd, uid_t owner, char *err, size_t errlen)
{
	struct stat st;
	char what[PATH_MAX + 16];

	err[0] = '\0';
	if (path[0] != '/') {
		snprintf(err, errlen, "%s: not an absolute path", path);
		return EINVAL;
	}
	if ((fd >= 0 ? fstat(fd, &st) : stat(path, &st)) != 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return e;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is not a regular file", path);
		return EPERM;
	}
	snprintf(what, sizeof(what), "the file %s", path);
	int rc = check_owner(&st, what, owner, false, err, errlen);
	if (rc == 0)
		rc = check_dirs(path, owner, err, errlen);
	char *real = rc == 0 ? realpath(path, NULL) : NULL;
	if (rc == 0 && real == NULL) {
		rc = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(rc));
	}
	if (rc == 0 && strcmp(real, path) != 0)
		rc = check_dirs(real, owner, err, errlen);
	free(real);
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
	int exe_fd; /* the binary a restart runs (O_PATH, close-on-exec) */
	sigset_t oldmask;
	bool stopping;
	bool upgrade;         /* the next daemon runs the binary at o->binary */
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

/* In the forked child: the descriptors, the argv, exec.  `exe` is the
 * binary to run, `link` the link's memfd. */
static void exec_daemon(struct keeper *k, int exe, int st_write, int link)
{
	const struct tfs_keeper_opts *o = k->o;
	char arg[sizeof(TFS_KEEPER_LINK_ARG) + 16];
	size_t n = 0;

	sigprocmask(SIG_SETMASK, &k->oldmask, NULL);
	/* The binary's descriptor too: a script (#!) is read through
	 * /dev/fd/N by its interpreter; the daemon closes it. */
	if (fcntl(k->fuse_fd, F_SETFD, 0) != 0 || fcntl(k->record_fd, F_SETFD, 0) != 0 ||
	    fcntl(st_write, F_SETFD, 0) != 0 || fcntl(link, F_SETFD, 0) != 0 ||
	    fcntl(exe, F_SETFD, 0) != 0)
		_exit(TFS_EXIT_FAIL);
	while (o->argv[n])
		n++;
	/* binary, "mount", the link, the rest, NULL */
	char **argv = calloc(n + 3, sizeof(*argv));
	if (argv == NULL || n == 0)
		_exit(TFS_EXIT_FAIL);
	snprintf(arg, sizeof(arg), "%s%d", TFS_KEEPER_LINK_ARG, link);
	argv[0] = (char *)o->binary;
	argv[1] = o->argv[0];
	argv[2] = arg;
	for (size_t i = 1; i < n; i++)
		argv[i + 2] = o->argv[i];
	fexecve(exe, argv, environ);
	_exit(127);
}

/* The binary the next daemon runs: the one of the last start, or after
 * `tierfs upgrade` the one now at o->binary, if it passes the check
 * (otherwise the last one again, logged). */
static int next_binary(struct keeper *k)
{
	char err[PATH_MAX + 200];
	if (!k->upgrade)
		return k->exe_fd;
	k->upgrade = false;
	int fd = open(k->o->binary, O_PATH | O_CLOEXEC);
	int rc = fd < 0 ? errno
			: tfs_keeper_check_binary(k->o->binary, fd, geteuid(), err, sizeof(err));
	if (fd < 0)
		snprintf(err, sizeof(err), "%s: %s", k->o->binary, strerror(rc));
	if (rc) {
		tfs_err(k->o->log, "keeper: upgrade refused: %s; starting the binary that ran",
			err);
		if (fd >= 0)
			close(fd);
		return k->exe_fd;
	}
	close(k->exe_fd);
	k->exe_fd = fd;
	return fd;
}

/* Start a daemon.  Returns 0 or an errno (logged). */
static int start_daemon(struct keeper *k, struct run *r)
{
	int p[2];
	int link = -1;
	memset(r, 0, sizeof(*r));
	r->st = -1;
	if (pipe2(p, O_CLOEXEC) != 0) {
		tfs_err(k->o->log, "keeper: pipe: %s", strerror(errno));
		return errno;
	}
	struct tfs_keeper_link l = {
		.fuse_fd = k->fuse_fd,
		.record_fd = k->record_fd,
		.status_fd = p[1],
		.keeper_pid = (int)getpid(),
		.generation = k->generation,
		.restarts = k->restarts,
		.crashes = k->crashes,
		.upgrades = k->upgrades,
		.stopped_ns = k->stopped_ns,
		.backoff_ms = k->backoff_ms,
	};
	snprintf(l.cause, sizeof(l.cause), "%s", k->cause);
	snprintf(l.cwd, sizeof(l.cwd), "%s", k->o->cwd ? k->o->cwd : "/");
	snprintf(l.mountpoint, sizeof(l.mountpoint), "%s", k->o->mountpoint);
	int rc = tfs_keeper_link_encode(&l, &link);
	if (rc) {
		tfs_err(k->o->log, "keeper: the daemon's link: %s", strerror(rc));
		close(p[0]);
		close(p[1]);
		return rc;
	}
	int exe = next_binary(k);
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		tfs_err(k->o->log, "keeper: fork: %s", strerror(e));
		close(p[0]);
		close(p[1]);
		close(link);
		return e;
	}
	if (pid == 0) {
		close(p[0]);
		exec_daemon(k, exe, p[1], link);
	}
	close(p[1]);
	close(link);
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
		k->upgrade = true;
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

/* Open the binary this process runs (what a crash restart runs), and
 * check it and the one at o->binary (what `tierfs upgrade` runs).
 * Returns 0, or EPERM with the message reported. */
static int check_start(struct keeper *k)
{
	const struct tfs_keeper_opts *o = k->o;
	char err[PATH_MAX + 200];
	struct stat a, b;
	int rc;

	k->exe_fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
	if (k->exe_fd < 0) /* no /proc: the file at the path, checked */
		k->exe_fd = open(o->binary, O_PATH | O_CLOEXEC);
	if (k->exe_fd < 0) {
		rc = errno;
		snprintf(err, sizeof(err), "%s: %s", o->binary, strerror(rc));
	} else {
		rc = tfs_keeper_check_binary(o->binary, k->exe_fd, geteuid(), err, sizeof(err));
	}
	if (rc == 0 && (fstat(k->exe_fd, &a) != 0 || stat(o->binary, &b) != 0 ||
			a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		rc = tfs_keeper_check_binary(o->binary, -1, geteuid(), err, sizeof(err));
	if (rc == 0)
		return 0;
	char msg[sizeof(err) + 300];
	snprintf(msg, sizeof(msg),
		 "refusing to run the daemon of %s: %s; another user could replace the binary "
		 "the keeper restarts as uid %u (install tierfs where only root or uid %u can "
		 "write)",
		 o->mountpoint, err, (unsigned)geteuid(), (unsigned)geteuid());
	tfs_err(o->log, "keeper: %s", msg);
	report(&k->status_fd, msg);
	return EPERM;
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
	if (check_start(k) != 0)
		return EPERM;
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
		.exe_fd = -1,
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
	if (k.exe_fd >= 0)
		close(k.exe_fd);
	sigprocmask(SIG_SETMASK, &k.oldmask, NULL);
	return rc;
}
