/* cmd_mount.c - `tierfs mount`: option parsing with fuse_opt, the checks
 * of the configuration, SOURCE and mountpoint, and daemonizing into the
 * keeper (keeper.h), which mounts and runs the daemon (daemon.h); the
 * command reports only once the mount is live and the daemon serves.
 *
 * Start-up order (nothing before the fork creates threads, curl handles
 * or LMDB environments):
 *   parent: parse options, load and validate the config, check the
 *           mountpoint, fork; then wait on a pipe for the keeper's verdict
 *           and exit 0 ("mounted") or 1 (the error message).
 *   keeper: setsid, chdir("/"), stdio to /dev/null, close every other
 *           descriptor but the status pipe, then tfs_keeper_run(): check
 *           the binary, mount, start the daemon (this binary, `tierfs
 *           mount` with the same arguments and the keeper's link:
 *           TFS_KEEPER_LINK_ARG), pass its "ok" on, and restart it when it
 *           dies.
 *   daemon: the same command line again, recognised by the link (and it
 *           closes every descriptor the link does not name):
 *           the checks of the parent (but the mountpoint comes from the
 *           keeper: a stat() of it would wait for this very daemon), then
 *           tfs_daemon_run() in this process: logger, stack, bucket probe,
 *           control socket, the keeper's FUSE connection, "ok", the loop.
 * With -f the keeper runs in the foreground process and the daemons log to
 * stderr.  Signals are the keeper's and the daemon's (keeper.h, daemon.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "daemon.h"
#include "fs.h"
#include "keeper.h"
#include "log.h"
#include "source.h"

struct mount_opts {
	char *conf;
	int foreground;
	int debug;
	int help;
	int allow_other;
	int ro;
	int suid, dev; /* FLAG_*: the last of -o suid/nosuid, -o dev/nodev */
	char *uid, *gid, *file_mode, *dir_mode;
	char **overrides; /* "section.key=value" from -o */
	size_t n_overrides;
	char *source, *mountpoint;
	int bad;
};

enum {
	KEY_HELP,
	KEY_FG,
	KEY_DEBUG
};
enum {
	FLAG_UNSET,
	FLAG_ON,
	FLAG_OFF
};

#define MOPT(t, f, v)                                \
	{                                            \
		t, offsetof(struct mount_opts, f), v \
	}
static const struct fuse_opt mount_opt_spec[] = {
	MOPT("-c %s", conf, 0), MOPT("--config=%s", conf, 0), MOPT("uid=%s", uid, 0),
	MOPT("gid=%s", gid, 0), MOPT("file_mode=%s", file_mode, 0),
	MOPT("dir_mode=%s", dir_mode, 0), MOPT("allow_other", allow_other, 1), MOPT("ro", ro, 1),
	/* Kept here, not passed on: mount_flags() decides them. */
	MOPT("suid", suid, FLAG_ON), MOPT("nosuid", suid, FLAG_OFF), MOPT("dev", dev, FLAG_ON),
	MOPT("nodev", dev, FLAG_OFF), FUSE_OPT_KEY("ro", FUSE_OPT_KEY_KEEP),
	FUSE_OPT_KEY("-f", KEY_FG), FUSE_OPT_KEY("--foreground", KEY_FG),
	FUSE_OPT_KEY("-d", KEY_DEBUG), FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	/* Options mount(8) and fstab pass along that mean nothing here. */
	FUSE_OPT_KEY("rw", FUSE_OPT_KEY_DISCARD), FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD), FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD), FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD), FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

static void mount_usage(FILE *f)
{
	fprintf(f,
		"usage: tierfs mount [-c CONF] [-o OPTION[,OPTION...]] [-f] [-d] SOURCE "
		"MOUNTPOINT\n"
		"\n"
		"SOURCE is s3://bucket[/prefix] or a local directory.\n"
		"options:\n"
		"  -c CONF                configuration file (default %s)\n"
		"  -f                     stay in the foreground, log to stderr\n"
		"  -d                     debug: foreground, debug logging\n"
		"  -o allow_other         let other users read the mount (adds "
		"default_permissions)\n"
		"  -o uid=N,gid=N         owner of objects without x-amz-meta-uid/gid (default: "
		"you)\n"
		"  -o file_mode=0644,dir_mode=0755   modes of objects without x-amz-meta-mode\n"
		"  -o ro                  read-only mount\n"
		"  -o suid,dev            only with [mount] trusted = true (otherwise "
		"nosuid,nodev)\n"
		"  -o SECTION.KEY=VALUE   override a configuration key (see tierfs.conf(5))\n",
		tfs_config_default_path());
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct mount_opts *o = data;
	switch (key) {
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_FG:
		o->foreground = 1;
		return 0;
	case KEY_DEBUG:
		o->debug = 1;
		o->foreground = 1;
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (o->source == NULL) {
			o->source = strdup(arg);
			return 0;
		}
		if (o->mountpoint == NULL) {
			o->mountpoint = strdup(arg);
			return 0;
		}
		fprintf(stderr, "tierfs mount: unexpected argument '%s'\n", arg);
		o->bad = 1;
		return -1;
	case FUSE_OPT_KEY_OPT: {
		const char *eq = strchr(arg, '=');
		const char *dot = strchr(arg, '.');
		if (eq && dot && dot < eq) {
			char **n = realloc(o->overrides, (o->n_overrides + 1) * sizeof(*n));
			if (n == NULL)
				return -1;
			o->overrides = n;
			o->overrides[o->n_overrides] = strdup(arg);
			if (o->overrides[o->n_overrides] == NULL)
				return -1;
			o->n_overrides++;
			return 0;
		}
		if (arg[0] == '-') {
			fprintf(stderr, "tierfs mount: unknown option '%s'\n", arg);
			o->bad = 1;
			return -1;
		}
		return 1; /* a FUSE mount option: pass it on */
	}
	default:
		return 1;
	}
}

/* The suid and dev flags of the kernel mount.  A mount that the
 * configuration does not trust ([mount] trusted = false, the default) is
 * nosuid,nodev, and -o suid or -o dev is refused with a message on stderr
 * (EINVAL).  A trusted mount is suid,dev unless -o nosuid or -o nodev.
 * libfuse would make a mount nosuid,nodev by itself, but any option that
 * reached it could turn that off; here only the configuration can. */
static int mount_flags(const struct mount_opts *o, bool trusted, bool *suid, bool *dev)
{
	if (!trusted && (o->suid == FLAG_ON || o->dev == FLAG_ON)) {
		fprintf(stderr,
			"tierfs mount: -o %s: the mount is not trusted; set [mount] "
			"trusted = true in tierfs.conf to honour setuid bits and devices "
			"(see tierfs.conf(5))\n",
			o->suid == FLAG_ON ? "suid" : "dev");
		return EINVAL;
	}
	*suid = trusted && o->suid != FLAG_OFF;
	*dev = trusted && o->dev != FLAG_OFF;
	return 0;
}

/* Append the options the kernel sees to `args`: fuse.tierfs named SOURCE in
 * /proc/mounts, large reads, the suid and dev flags, and allow_other (with
 * default_permissions).  SOURCE goes through fuse_opt_add_opt_escaped(): a
 * ',' or '\' in it gets a backslash, which fuse_opt takes off again when
 * it splits the options, so mount(2) (or fusermount3, which unescapes
 * fsname= the same way) gets SOURCE whole as the name and no part of it
 * becomes an option.  Returns 0 or ENOMEM. */
static int add_kernel_opts(struct fuse_args *args, const char *source, bool suid, bool dev,
			   bool allow_other)
{
	size_t n = strlen(source) + sizeof("fsname=");
	char *fsname = malloc(n);
	char *opts = NULL;
	char flags[128];
	int rc = ENOMEM;

	if (fsname == NULL)
		return ENOMEM;
	snprintf(fsname, n, "fsname=%s", source);
	snprintf(flags, sizeof(flags), "subtype=tierfs,max_read=%u,%s,%s%s", TFS_MAX_READ,
		 suid ? "suid" : "nosuid", dev ? "dev" : "nodev",
		 allow_other ? ",allow_other,default_permissions" : "");
	if (fuse_opt_add_opt_escaped(&opts, fsname) == 0 && fuse_opt_add_opt(&opts, flags) == 0 &&
	    fuse_opt_add_arg(args, "-o") == 0 && fuse_opt_add_arg(args, opts) == 0)
		rc = 0;
	free(opts);
	free(fsname);
	return rc;
}

static int parse_mode(const char *s, const char *what, mode_t *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 8);
	if (errno || *end != '\0' || end == s || v > 07777) {
		fprintf(stderr, "tierfs mount: %s=%s: expected an octal mode such as 0644\n", what,
			s);
		return EINVAL;
	}
	*out = (mode_t)v;
	return 0;
}

static int parse_id(const char *s, const char *what, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end != '\0' || end == s || v >= UINT32_MAX) {
		fprintf(stderr, "tierfs mount: %s=%s: expected a number\n", what, s);
		return EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

static int wait_for_child(int fd, pid_t pid)
{
	char msg[1100];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, msg + len, sizeof(msg) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(msg) - 1)
			break;
	}
	msg[len] = '\0';
	close(fd);
	if (strcmp(msg, "ok") == 0)
		return TFS_EXIT_OK;
	int status = 0;
	waitpid(pid, &status, 0);
	if (len)
		fprintf(stderr, "tierfs: mount failed: %s\n", msg);
	else if (WIFSIGNALED(status))
		fprintf(stderr, "tierfs: mount failed: the daemon died of signal %d\n",
			WTERMSIG(status));
	else
		fprintf(stderr, "tierfs: mount failed: the daemon exited with status %d\n",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return TFS_EXIT_FAIL;
}

static void free_opts(struct mount_opts *o)
{
	free(o->conf);
	free(o->uid);
	free(o->gid);
	free(o->file_mode);
	free(o->dir_mode);
	for (size_t i = 0; i < o->n_overrides; i++)
		free(o->overrides[i]);
	free(o->overrides);
	free(o->source);
	free(o->mountpoint);
}

/* The keeper's logger: log.file, else stderr in the foreground, else
 * syslog.  Returns 0 or the errno of log.file (the message on stderr and
 * on status_fd, as the daemon reports it). */
static int keeper_log_open(const struct tfs_config *cfg, bool foreground, bool debug, int status_fd,
			   struct tfs_log *log)
{
	enum tfs_log_level level = debug ? TFS_LOG_DEBUG : cfg->log.level;
	if (cfg->log.file && *cfg->log.file) {
		int rc = tfs_log_init_file(log, cfg->log.file, level);
		if (rc) {
			char msg[600];
			int n = snprintf(msg, sizeof(msg), "log.file '%s': %s", cfg->log.file,
					 strerror(rc));
			fprintf(stderr, "tierfs: %s\n", msg);
			if (status_fd >= 0 && n > 0 &&
			    write(status_fd, msg, strnlen(msg, sizeof(msg))) < 0)
				rc = errno ? errno : rc;
		}
		return rc;
	}
	if (foreground)
		tfs_log_init_stderr(log, level);
	else
		tfs_log_init_syslog(log, level);
	return 0;
}

/* Run the keeper in this process (see keeper.h); `status_fd` as there. */
static int run_keeper(const struct tfs_config *cfg, const struct mount_opts *o,
		      struct fuse_args *args, char **argv, const char *argv0, const char *cwd,
		      int status_fd)
{
	char binary[PATH_MAX];
	struct tfs_log log;
	/* Nothing of the caller's stays open for the life of the mount (a
	 * caller that waits for EOF on a pipe would wait that long). */
	const int keep[] = { STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO, status_fd };
	int rc = tfs_keeper_close_fds(keep, sizeof(keep) / sizeof(keep[0]));
	if (rc)
		fprintf(stderr, "tierfs: closing inherited descriptors: %s\n", strerror(rc));
	rc = tfs_keeper_binary_path(argv0, cwd, binary, sizeof(binary));
	if (rc) {
		char msg[PATH_MAX + 64];
		snprintf(msg, sizeof(msg), "cannot find the tierfs binary '%s': %s", argv0,
			 strerror(rc));
		fprintf(stderr, "tierfs: %s\n", msg);
		if (status_fd >= 0 && write(status_fd, msg, strlen(msg)) < 0)
			rc = errno;
		return TFS_EXIT_FAIL;
	}
	if (keeper_log_open(cfg, o->foreground, o->debug, status_fd, &log) != 0)
		return TFS_EXIT_FAIL;
	struct tfs_keeper_opts ko = {
		.binary = binary,
		.argv = argv,
		.cwd = cwd,
		.mountpoint = o->mountpoint,
		.fargs = args,
		.status_fd = status_fd,
		.log = &log,
	};
	rc = tfs_keeper_run(&ko);
	tfs_log_close(&log);
	return rc;
}

int tfs_cmd_mount(int argc, char **argv, const char *argv0)
{
	struct fuse_args args;
	struct mount_opts o = { 0 };
	struct tfs_config cfg;
	struct tfs_source src;
	struct tfs_keeper_link link;
	int rc = TFS_EXIT_CONFIG;
	char err[512];
	char cwd[PATH_MAX];

	if (tfs_keeper_link_take(&argc, argv, &link) != 0)
		return TFS_EXIT_FAIL;
	if (link.fuse_fd >= 0) {
		/* The daemon: only what the keeper gave it (a script binary's
		 * descriptor, say, is not needed any more). */
		const int keep[] = { STDIN_FILENO, STDOUT_FILENO,  STDERR_FILENO,
				     link.fuse_fd, link.record_fd, link.status_fd };
		int e = tfs_keeper_close_fds(keep, sizeof(keep) / sizeof(keep[0]));
		if (e)
			fprintf(stderr, "tierfs: closing inherited descriptors: %s\n", strerror(e));
	}
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	if (link.fuse_fd >= 0 && link.cwd[0] && chdir(link.cwd) != 0)
		fprintf(stderr, "tierfs: cannot enter %s (%s): relative paths are taken from /\n",
			link.cwd, strerror(errno));
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		snprintf(cwd, sizeof(cwd), "/");

	if (fuse_opt_parse(&args, &o, mount_opt_spec, opt_proc) != 0 || o.bad) {
		mount_usage(stderr);
		goto out_args;
	}
	if (o.help) {
		mount_usage(stdout);
		rc = TFS_EXIT_OK;
		goto out_args;
	}
	if (o.source == NULL || o.mountpoint == NULL) {
		mount_usage(stderr);
		goto out_args;
	}
	if (strlen(o.source) >= PATH_MAX) {
		/* mount(2) takes a name of at most PATH_MAX - 1 bytes. */
		fprintf(stderr, "tierfs mount: SOURCE is longer than %d bytes\n", PATH_MAX - 1);
		goto out_args;
	}
	struct tfs_fs_config fsc = {
		.uid = getuid(),
		.gid = getgid(),
		.file_mode = 0644,
		.dir_mode = 0755,
	};
	unsigned id;
	if (o.uid && parse_id(o.uid, "uid", &id) == 0)
		fsc.uid = id;
	else if (o.uid)
		goto out_args;
	if (o.gid && parse_id(o.gid, "gid", &id) == 0)
		fsc.gid = id;
	else if (o.gid)
		goto out_args;
	if ((o.file_mode && parse_mode(o.file_mode, "file_mode", &fsc.file_mode)) ||
	    (o.dir_mode && parse_mode(o.dir_mode, "dir_mode", &fsc.dir_mode)))
		goto out_args;

	rc = tfs_cli_load_config(&cfg, o.conf, o.overrides, o.n_overrides);
	if (rc)
		goto out_args;
	if (o.conf) {
		/* A reload reads it again after the daemon's chdir("/"). */
		char *abs = realpath(o.conf, NULL);
		if (abs) {
			free(o.conf);
			o.conf = abs;
		}
	}
	rc = tfs_source_parse(o.source, &src, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tierfs: %s\n", rc == EINVAL ? err : strerror(rc));
		rc = TFS_EXIT_CONFIG;
		goto out_cfg;
	}
	struct stat st;
	/* A daemon under a keeper takes the mountpoint the keeper mounted:
	 * a stat() of it would wait for this very daemon. */
	char *mp = link.fuse_fd >= 0 ? strdup(link.mountpoint) : realpath(o.mountpoint, NULL);
	if (mp == NULL || (link.fuse_fd < 0 && (stat(mp, &st) != 0 || !S_ISDIR(st.st_mode)))) {
		fprintf(stderr, "tierfs: mountpoint '%s': %s\n", o.mountpoint,
			mp == NULL ? strerror(errno) : "not a directory");
		free(mp);
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}
	free(o.mountpoint);
	o.mountpoint = mp;
	bool suid, dev;
	if (mount_flags(&o, cfg.mount.trusted, &suid, &dev) != 0) {
		rc = TFS_EXIT_CONFIG;
		goto out_src;
	}
	fsc.keep_setid = cfg.mount.trusted;
	fsc.ttl_ms = cfg.cache.metadata_ttl_ms;
	fsc.order_max = cfg.prefetch.order_max;
	fsc.statfs_dir = cfg.ssd.dir;
	fsc.max_inodes = cfg.mount.max_inodes;

	if (add_kernel_opts(&args, o.source, suid, dev, o.allow_other) != 0) {
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}

	int exit_status = TFS_EXIT_FAIL;
	struct tfs_daemon_opts dopts = {
		.cfg = &cfg,
		.src = &src,
		.fsc = &fsc,
		.fargs = &args,
		.source = o.source,
		.mountpoint = o.mountpoint,
		.conf_path = o.conf,
		.overrides = o.overrides,
		.n_overrides = o.n_overrides,
		.foreground = o.foreground != 0,
		.debug = o.debug != 0,
		.ro = o.ro != 0,
		.keeper = link.fuse_fd >= 0 ? &link : NULL,
		.exit_status = &exit_status,
	};
	if (link.fuse_fd >= 0) {
		/* The daemon, started by the keeper. */
		if (chdir("/") != 0)
			goto out_src;
		rc = tfs_daemon_run(&dopts, link.status_fd) ? TFS_EXIT_FAIL : exit_status;
		goto out_src;
	}
	if (o.foreground) {
		rc = run_keeper(&cfg, &o, &args, argv, argv0, cwd, -1);
		goto out_src;
	}
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		perror("tierfs: pipe");
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("tierfs: fork");
		rc = TFS_EXIT_FAIL;
		goto out_src;
	}
	if (pid > 0) {
		close(pfd[1]);
		rc = wait_for_child(pfd[0], pid);
		goto out_src;
	}
	/* The keeper. */
	close(pfd[0]);
	setsid();
	if (chdir("/") != 0)
		_exit(TFS_EXIT_FAIL);
	int nul = open("/dev/null", O_RDWR);
	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		dup2(nul, STDERR_FILENO);
		if (nul > STDERR_FILENO)
			close(nul);
	}
	rc = run_keeper(&cfg, &o, &args, argv, argv0, cwd, pfd[1]);
out_src:
	tfs_source_clear(&src);
out_cfg:
	tfs_config_clear(&cfg);
out_args:
	fuse_opt_free_args(&args);
	free_opts(&o);
	return rc;
}
