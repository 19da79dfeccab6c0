/* tierfs-flexvolume.c - the Kubernetes FlexVolume driver: the kubelet runs
 * it as <plugindir>/tierfs~tierfs/tierfs with one call per process.
 *
 *	init                      capabilities, at once, without I/O
 *	mount TARGET JSON         mount the volume (node_mount.h); JSON, which
 *	                          holds the Secret's keys, is copied and
 *	                          zeroed in argv before anything else
 *	unmount TARGET            unmount it, from the path alone
 *	anything else             {"status":"Not supported"}, exit 0
 *
 * The kubelet reads stdout and stderr together as one JSON object, so the
 * reply is the only thing ever written to either: both are pointed at
 * /dev/null first, the reply goes to a saved copy of stdout (close-on-exec,
 * so nothing we start can hold the kubelet's pipe), and logs go to the
 * node config's log_file or syslog.  Exit status 0 for Success and Not
 * supported, 1 for Failure.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "dbuf.h"
#include "fv_json.h"
#include "node_mount.h"
#include "node_conf.h"
#include "log.h"

#define EXIT_SUCCESS_REPLY 0
#define EXIT_FAILURE_REPLY 1

/* ---- the reply ---- */

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Write `o` and a newline to fd, and release `o`. */
static void reply(int fd, struct json_object *o)
{
	const char *s = o ? json_object_to_json_string_ext(
				    o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
			  : NULL;

	if (s == NULL)
		s = "{\"status\":\"Failure\",\"message\":\"out of memory\"}";
	write_all(fd, s, strlen(s));
	write_all(fd, "\n", 1);
	json_object_put(o);
}

static int reply_status(int fd, const char *status, const char *message)
{
	struct json_object *o = json_object_new_object();

	if (o) {
		json_object_object_add(o, "status", json_object_new_string(status));
		if (message)
			json_object_object_add(o, "message", json_object_new_string(message));
	}
	reply(fd, o);
	return strcmp(status, "Failure") == 0 ? EXIT_FAILURE_REPLY : EXIT_SUCCESS_REPLY;
}

/* Every capability explicit: a missing one defaults to true, and fsGroup
 * would chown the bucket while selinuxRelabel breaks FUSE mounts.  The
 * kubelet passes the pod's fsGroup all the same; the driver maps it to the
 * mount's gid (tfs_node_volume_mount_opts()), and [node] selinux_context gives
 * SELinux nodes their context= option. */
static int reply_init(int fd)
{
	static const char *const caps[] = {
		"attach", "selinuxRelabel", "fsGroup", "supportsMetrics", "requiresFSResize",
	};
	struct json_object *o = json_object_new_object();
	struct json_object *c = json_object_new_object();

	if (o == NULL || c == NULL) {
		json_object_put(o);
		json_object_put(c);
		reply(fd, NULL);
		return EXIT_FAILURE_REPLY;
	}
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		json_object_object_add(c, caps[i], json_object_new_boolean(0));
	json_object_object_add(o, "status", json_object_new_string("Success"));
	json_object_object_add(o, "capabilities", c);
	reply(fd, o);
	return EXIT_SUCCESS_REPLY;
}

/* ---- the driver's log ---- */

struct tfs_node_logfile {
	FILE *f;
};

static void file_sink(void *ctx, enum tfs_log_level level, const char *line)
{
	struct tfs_node_logfile *lf = ctx;
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(lf->f, "%s.%03ldZ tierfs-flexvolume[%ld] %s: %s\n", stamp, ts.tv_nsec / 1000000L,
		(long)getpid(), tfs_log_level_name(level), line);
	fflush(lf->f);
}

/* Log to node.log_file, or to syslog when it is unset or cannot be
 * opened.  Never to the terminal. */
static void open_log(const struct tfs_node_conf *node, struct tfs_log *log,
		     struct tfs_node_logfile *lf)
{
	enum tfs_log_level level = node ? node->log_level : TFS_LOG_INFO;

	if (node && node->log_file) {
		int fd = open(node->log_file,
			      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

		lf->f = fd >= 0 ? fdopen(fd, "a") : NULL;
		if (lf->f) {
			tfs_log_init(log, file_sink, lf, level);
			return;
		}
		if (fd >= 0)
			close(fd);
		tfs_log_init_syslog(log, level);
		tfs_warn(log, "flexvolume: cannot open the log file %s; logging to syslog",
			 node->log_file);
		return;
	}
	tfs_log_init_syslog(log, level);
}

static void close_log(struct tfs_node_logfile *lf)
{
	if (lf->f)
		fclose(lf->f);
	lf->f = NULL;
}

/* ---- main ---- */

/* Point stdin, stdout and stderr at /dev/null and return a close-on-exec
 * copy of the original stdout for the reply (-1 if there was none). */
static int take_stdio(void)
{
	int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		dup2(nul, STDERR_FILENO);
		if (nul > STDERR_FILENO)
			close(nul);
	}
	return out;
}

/* Move the mount call's JSON out of argv: it holds the Secret's keys, and
 * argv is what /proc/PID/cmdline shows every process on the node for as
 * long as the call runs.  `arg` (argv's own memory) is zeroed in place,
 * whatever happens; returns a heap copy for drop_json(), or NULL when out
 * of memory. */
static char *take_json(char *arg)
{
	size_t n = strlen(arg);
	char *copy = malloc(n + 1);

	if (copy)
		memcpy(copy, arg, n + 1);
	explicit_bzero(arg, n);
	return copy;
}

static void drop_json(char *json)
{
	if (json == NULL)
		return;
	explicit_bzero(json, strlen(json));
	free(json);
}

int main(int argc, char **argv)
{
	int out = take_stdio();
	const char *call = argc >= 2 ? argv[1] : "";

	/* init: no configuration, no I/O, no network. */
	if (strcmp(call, "init") == 0)
		return reply_init(out);
	bool is_mount = strcmp(call, "mount") == 0;
	bool is_unmount = strcmp(call, "unmount") == 0;
	if (argc < 2)
		return reply_status(out, "Failure",
				    "usage: tierfs-flexvolume init | mount TARGET "
				    "JSON | unmount TARGET");
	if (!is_mount && !is_unmount)
		return reply_status(out, "Not supported", NULL);
	if ((is_mount && argc != 4) || (is_unmount && argc != 3))
		return reply_status(out, "Failure",
				    is_mount ? "usage: mount TARGET JSON"
					     : "usage: unmount TARGET");
	char *json = NULL;
	if (is_mount) {
		json = take_json(argv[3]);
		if (json == NULL)
			return reply_status(out, "Failure", "out of memory");
	}

	umask(077);
	struct tfs_node_conf node;
	struct tfs_log log;
	struct tfs_node_logfile lf = { NULL };
	struct tfs_dbuf msg;
	bool must_exist;
	const char *path = tfs_node_conf_path(TFS_NODE_DRIVER_FLEXVOLUME, &must_exist);
	int rc;

	tfs_dbuf_init(&msg, 16 * 1024);
	rc = tfs_node_conf_load(&node, TFS_NODE_DRIVER_FLEXVOLUME, path, must_exist, &msg);
	if (rc) {
		open_log(NULL, &log, &lf);
		if (tfs_dbuf_len(&msg) == 0)
			tfs_dbuf_addf(&msg, "%s: %s", path, strerror(rc));
		tfs_err(&log, "flexvolume: %s %s: %s", call, argv[2], tfs_dbuf_str(&msg));
		rc = reply_status(out, "Failure", tfs_dbuf_str(&msg));
		tfs_dbuf_free(&msg);
		drop_json(json);
		return rc;
	}
	open_log(&node, &log, &lf);
	if (is_mount)
		rc = fv_mount(&node, &log, argv[2], json, &msg);
	else
		rc = tfs_node_unmount(&node, &log, argv[2], &msg);
	if (rc && tfs_dbuf_len(&msg) == 0)
		tfs_dbuf_adds(&msg, strerror(rc));
	rc = rc ? reply_status(out, "Failure", tfs_dbuf_str(&msg))
		: reply_status(out, "Success", NULL);
	tfs_dbuf_free(&msg);
	drop_json(json);
	close_log(&lf);
	tfs_node_conf_clear(&node);
	return rc;
}
