/* node_sys.c - processes, the mount table and files, for the driver. */
#include "config.h"

#include "node_sys.h"
#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

void tfs_node_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- running a program ---- */

/* In the child, between fork() and exec: async-signal-safe calls only.
 * If exec fails, its errno goes back through `errfd` (close-on-exec, so
 * a successful exec closes it and the parent reads nothing). */
static void child(char *const argv[], char *const envp[], int out, int errfd, int cgroup_fd)
{
	int nul = open("/dev/null", O_RDONLY);

	/* Into the cgroup first: whatever it starts is charged there. */
	if (cgroup_fd >= 0 && write(cgroup_fd, "0\n", 2) != 2)
		goto fail;

	if (setsid() < 0 || nul < 0 || dup2(nul, STDIN_FILENO) < 0 ||
	    dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0)
		goto fail;
	if (chdir("/") != 0)
		goto fail;
	/* Everything else is closed: the kubelet's pipe (our reply) above
	 * all, which it waits on until every holder has closed it. */
	if (errfd > STDERR_FILENO + 1)
		(void)close_range(STDERR_FILENO + 1, (unsigned)errfd - 1, 0);
	(void)close_range((unsigned)errfd + 1, ~0U, 0);
	execve(argv[0], argv, envp);
fail:;
	int e = errno;
	ssize_t w = write(errfd, &e, sizeof(e));
	(void)w;
	_exit(127);
}

/* Append what can be read from fd now to output.  Returns false at end of
 * file or on an error other than EAGAIN. */
static bool drain(int fd, struct tfs_dbuf *output)
{
	char buf[4096];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN;
		if (n == 0)
			return false;
		if (output)
			(void)tfs_dbuf_add(output, buf, (size_t)n); /* EOVERFLOW: drop */
	}
}

int tfs_node_run(char *const argv[], char *const envp[], uint64_t timeout_ms,
		 struct tfs_dbuf *output, int *status)
{
	return tfs_node_run_in(argv, envp, -1, timeout_ms, output, status);
}

int tfs_node_run_in(char *const argv[], char *const envp[], int cgroup_fd, uint64_t timeout_ms,
		    struct tfs_dbuf *output, int *status)
{
	int pfd[2], efd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) != 0)
		return errno;
	if (pipe2(efd, O_CLOEXEC) != 0) {
		int e = errno;

		close(pfd[0]);
		close(pfd[1]);
		return e;
	}
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(pfd[0]);
		close(pfd[1]);
		close(efd[0]);
		close(efd[1]);
		return e;
	}
	if (pid == 0) {
		close(pfd[0]);
		close(efd[0]);
		child(argv, envp, pfd[1], efd[1], cgroup_fd);
	}
	close(pfd[1]);
	close(efd[1]);
	(void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);

	uint64_t deadline = tfs_mono_ms() + timeout_ms;
	bool open_pipe = true, exited = false;
	int st = 0, rc = 0;

	while (!exited) {
		uint64_t now = tfs_mono_ms();

		if (now >= deadline) {
			/* setsid() made it a group leader; if it had not got
			 * there yet, the pid alone is enough. */
			if (kill(-pid, SIGKILL) != 0)
				kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			rc = ETIMEDOUT;
			break;
		}
		if (open_pipe) {
			struct pollfd p = { .fd = pfd[0], .events = POLLIN };
			uint64_t wait = deadline - now < 100 ? deadline - now : 100;

			if (poll(&p, 1, (int)wait) > 0)
				open_pipe = drain(pfd[0], output);
		} else {
			tfs_node_sleep_ms(20);
		}
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			exited = true;
		else if (w < 0 && errno != EINTR)
			exited = true;
	}
	/* What it wrote before exiting is in the pipe; a grandchild that
	 * still holds the pipe must not keep us waiting. */
	if (open_pipe)
		(void)drain(pfd[0], output);
	close(pfd[0]);
	if (rc == 0) {
		int e = 0;
		ssize_t n;

		while ((n = read(efd[0], &e, sizeof(e))) < 0 && errno == EINTR)
			;
		if (n == (ssize_t)sizeof(e) && e != 0)
			rc = e;
		else
			*status = st;
	}
	close(efd[0]);
	return rc;
}

/* ---- the mount table ---- */

/* Undo mountinfo's octal escapes (\040 for a blank, \011, \012, \134) in
 * place. */
static void unescape(char *s)
{
	char *o = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
}

/* Split one mountinfo line into `e` and its mount point *mnt (pointing
 * into `line`, unescaped).  Returns false for a line of another shape. */
static bool parse_mountinfo(char *line, struct tfs_node_mount_entry *e, char **mnt)
{
	char *save = NULL, *field[6] = { NULL };
	char *tok = strtok_r(line, " \n", &save);
	int i = 0;

	for (; tok && i < 6; i++, tok = strtok_r(NULL, " \n", &save))
		field[i] = tok;
	if (i < 6)
		return false;
	unescape(field[4]);
	*mnt = field[4];
	/* optional fields, then "-", fstype, source */
	while (tok && strcmp(tok, "-") != 0)
		tok = strtok_r(NULL, " \n", &save);
	char *fstype = tok ? strtok_r(NULL, " \n", &save) : NULL;
	char *source = fstype ? strtok_r(NULL, " \n", &save) : NULL;
	memset(e, 0, sizeof(*e));
	e->mounted = true;
	snprintf(e->fstype, sizeof(e->fstype), "%s", fstype ? fstype : "");
	if (source)
		unescape(source);
	snprintf(e->source, sizeof(e->source), "%s", source ? source : "");
	snprintf(e->devno, sizeof(e->devno), "%s", field[2]);
	e->read_only = strncmp(field[5], "ro", 2) == 0 &&
		       (field[5][2] == '\0' || field[5][2] == ',');
	return true;
}

/* Call fn for every mount, in the order of the table (later lines are
 * mounted later); stop early when fn returns false. */
static int each_mount(bool (*fn)(const struct tfs_node_mount_entry *e, const char *mnt, void *arg),
		      void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	if (f == NULL)
		return errno;
	while (getline(&line, &cap, f) > 0) {
		struct tfs_node_mount_entry e;
		char *mnt;

		if (parse_mountinfo(line, &e, &mnt) && !fn(&e, mnt, arg))
			break;
	}
	int rc = ferror(f) ? EIO : 0;
	free(line);
	fclose(f);
	return rc;
}

struct lookup_arg {
	const char *path;
	struct tfs_node_mount_entry *out;
};

static bool lookup_one(const struct tfs_node_mount_entry *e, const char *mnt, void *arg)
{
	struct lookup_arg *a = arg;

	if (strcmp(mnt, a->path) == 0)
		*a->out = *e; /* the last match is the top */
	return true;
}

int tfs_node_mount_lookup(const char *path, struct tfs_node_mount_entry *out)
{
	struct lookup_arg a = { path, out };

	memset(out, 0, sizeof(*out));
	return each_mount(lookup_one, &a);
}

struct users_arg {
	const char *devno;
	const char *skip;
	unsigned n;
};

static bool count_user(const struct tfs_node_mount_entry *e, const char *mnt, void *arg)
{
	struct users_arg *a = arg;

	if (strcmp(e->devno, a->devno) == 0 && strcmp(mnt, a->skip) != 0)
		a->n++;
	return true;
}

int tfs_node_mount_users(const char *devno, const char *skip, unsigned *n)
{
	struct users_arg a = { devno, skip, 0 };
	int rc = each_mount(count_user, &a);

	*n = a.n;
	return rc;
}

int tfs_node_mount_probe(const char *path)
{
	struct statfs sf;

	/* Not stat(): the kernel answers it from cached attributes even
	 * when the daemon is gone.  statfs always asks the daemon. */
	return statfs(path, &sf) == 0 ? 0 : errno;
}

/* ---- daemons ---- */

/* Does /proc/<pid>/cmdline have an argument equal to arg? */
static bool has_arg(const char *pid, const char *arg)
{
	char path[64], buf[16384];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
		if (strcmp(p, arg) == 0)
			return true;
	}
	return false;
}

bool tfs_node_pid_gone(pid_t pid)
{
	char path[64], buf[512];
	int fd;
	ssize_t n;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] == 'Z';
}

#define MAX_VICTIMS 64

int tfs_node_kill_by_arg(const char *arg, uint64_t grace_ms, unsigned *found)
{
	pid_t victims[MAX_VICTIMS];
	unsigned n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;

	if (found)
		*found = 0;
	if (d == NULL)
		return errno;
	while ((e = readdir(d)) != NULL && n < MAX_VICTIMS) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end != '\0' || pid <= 0 || pid == (long)getpid())
			continue;
		if (has_arg(e->d_name, arg))
			victims[n++] = (pid_t)pid;
	}
	closedir(d);
	for (unsigned i = 0; i < n; i++)
		kill(victims[i], SIGTERM);
	uint64_t deadline = tfs_mono_ms() + grace_ms;
	for (unsigned i = 0; i < n; i++) {
		while (!tfs_node_pid_gone(victims[i]) && tfs_mono_ms() < deadline)
			tfs_node_sleep_ms(20);
		if (!tfs_node_pid_gone(victims[i]))
			kill(victims[i], SIGKILL);
	}
	if (found)
		*found = n;
	return 0;
}

/* ---- files ---- */

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	int rc = type == FTW_DP ? rmdir(path) : unlink(path);

	if (rc != 0 && errno != ENOENT)
		return errno;
	return 0;
}

int tfs_node_rmtree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) == 0 ? 0 : errno;
	/* FTW_PHYS: symbolic links are removed, not followed.  FTW_MOUNT:
	 * another filesystem's entries are not visited, so the rmdir() of
	 * the directory holding its mount point fails. */
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (rc < 0)
		return errno ? errno : EIO;
	return rc;
}

int tfs_node_mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	struct stat st;
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return n ? ENAMETOOLONG : EINVAL;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, mode) != 0) {
			if (errno != EEXIST)
				return errno;
			if (stat(buf, &st) != 0)
				return errno;
			if (!S_ISDIR(st.st_mode))
				return ENOTDIR;
		}
		*p = c;
		if (c == '\0')
			break;
	}
	return 0;
}

int tfs_node_write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd, rc = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return ENAMETOOLONG;
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return errno;
	if (fchmod(fd, mode) != 0)
		rc = errno;
	while (rc == 0 && len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = errno;
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (rc == 0 && fsync(fd) != 0)
		rc = errno;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = errno;
	if (rc)
		(void)unlink(tmp);
	return rc;
}

int tfs_node_read_file(const char *path, struct tfs_dbuf *out)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return errno;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : 0;

			close(fd);
			return e;
		}
		int rc = tfs_dbuf_add(out, buf, (size_t)n);
		if (rc) {
			close(fd);
			return rc == EOVERFLOW ? EFBIG : rc;
		}
	}
}

int tfs_node_hash(const char *s, char *out, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	static const char hex[] = "0123456789abcdef";

	if (len < TFS_NODE_HASH_LEN + 1)
		return ERANGE;
	if (!EVP_Digest(s, strlen(s), md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen * 2 < TFS_NODE_HASH_LEN)
		return EIO;
	for (int i = 0; i < TFS_NODE_HASH_LEN / 2; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[TFS_NODE_HASH_LEN] = '\0';
	return 0;
}

/* Read exactly `len` bytes of the open key file into key. */
static int read_key(int fd, unsigned char *key, size_t len)
{
	struct stat st;
	size_t got = 0;

	if (fstat(fd, &st) != 0)
		return errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
	    st.st_size != (off_t)len)
		return EPERM;
	while (got < len) {
		ssize_t n = read(fd, key + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EPERM;
		got += (size_t)n;
	}
	return 0;
}

int tfs_node_key_file(const char *path, unsigned char *key, size_t len)
{
	char tmp[PATH_MAX];
	int fd, rc;

	for (int tries = 0; tries < 3; tries++) {
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			rc = read_key(fd, key, len);
			close(fd);
			return rc;
		}
		if (errno != ENOENT)
			return errno;
		/* Created whole under a name of our own, then linked into
		 * place: a racing creator's link fails and both read the
		 * winner's key. */
		if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%ld.new", path, (long)gettid()) >=
		    sizeof(tmp))
			return ENAMETOOLONG;
		if (RAND_bytes(key, (int)len) != 1)
			return EIO;
		rc = tfs_node_write_file(tmp, key, len, 0600);
		explicit_bzero(key, len);
		if (rc)
			return rc;
		rc = link(tmp, path) == 0 || errno == EEXIST ? 0 : errno;
		(void)unlink(tmp);
		if (rc)
			return rc;
	}
	return EAGAIN;
}
