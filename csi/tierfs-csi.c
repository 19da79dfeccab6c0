/* tierfs-csi.c - the Kubernetes CSI node plugin: serves the Identity and
 * Node services (csi_node.h) over gRPC on a unix socket until SIGTERM or
 * SIGINT, which end the plugin and leave every mount alive.
 *
 *	tierfs-csi [--endpoint=unix:///csi/csi.sock] [--node-id=NAME]
 *	           [--config=FILE] [--version]
 *
 * Defaults: $CSI_ENDPOINT, else unix:///csi/csi.sock; $KUBE_NODE_NAME, else
 * the host name; $TIERFS_CSI_CONF (must exist), else
 * /etc/tierfs/csi.conf (may be missing).  The node config is the FlexVolume
 * driver's format (node_conf.h).  Logs go to its log_file, else to
 * standard error.  Exit status 0 after a signal, 1 when it cannot start.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csi_grpc.h"
#include "csi_node.h"
#include "dbuf.h"
#include "node_conf.h"
#include "node_sys.h"
#include "log.h"

#define UNIX_SCHEME "unix://"

struct args {
	const char *endpoint;
	const char *node_id;
	const char *config;
	bool config_must_exist;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: tierfs-csi [--endpoint=unix:///PATH] [--node-id=NAME] "
		   "[--config=FILE] [--version]\n");
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct args *a, char *host, size_t hcap)
{
	static const struct option opts[] = {
		{ "endpoint", required_argument, NULL, 'e' },
		{ "node-id", required_argument, NULL, 'n' },
		{ "config", required_argument, NULL, 'c' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	a->endpoint = getenv("CSI_ENDPOINT");
	a->node_id = getenv("KUBE_NODE_NAME");
	a->config = tfs_node_conf_path(TFS_NODE_DRIVER_CSI, &a->config_must_exist);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			a->endpoint = optarg;
			break;
		case 'n':
			a->node_id = optarg;
			break;
		case 'c':
			a->config = optarg;
			a->config_must_exist = true;
			break;
		case 'V':
			printf("tierfs-csi %s\n", PACKAGE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (a->endpoint == NULL || a->endpoint[0] == '\0')
		a->endpoint = "unix:///csi/csi.sock";
	if (a->node_id == NULL || a->node_id[0] == '\0') {
		if (gethostname(host, hcap - 1) != 0) {
			fprintf(stderr, "tierfs-csi: no --node-id and no host name: %s\n",
				strerror(errno));
			return 1;
		}
		host[hcap - 1] = '\0';
		a->node_id = host;
	}
	if (strncmp(a->endpoint, UNIX_SCHEME, strlen(UNIX_SCHEME)) != 0 ||
	    a->endpoint[strlen(UNIX_SCHEME)] != '/') {
		fprintf(stderr, "tierfs-csi: --endpoint %s: expected unix:///ABSOLUTE/PATH\n",
			a->endpoint);
		return 2;
	}
	return -1;
}

/* The thread that turns SIGTERM and SIGINT (blocked everywhere else) into
 * csi_server_stop(). */
struct sigwaiter {
	sigset_t set;
	struct csi_server *srv;
	const struct tfs_log *log;
};

static void *sig_main(void *arg)
{
	struct sigwaiter *w = arg;
	int sig = 0;

	while (sigwait(&w->set, &sig) != 0)
		;
	tfs_info(w->log, "tierfs-csi: signal %d: stopping; every mount stays", sig);
	csi_server_stop(w->srv);
	return NULL;
}

int main(int argc, char **argv)
{
	struct args a;
	char host[256];
	struct tfs_node_conf node;
	struct tfs_log log;
	struct tfs_dbuf err;
	struct csi_server *srv = NULL;
	int rc;

	rc = parse_args(argc, argv, &a, host, sizeof(host));
	if (rc >= 0)
		return rc;
	umask(077);
	tfs_dbuf_init(&err, 8192);
	rc = tfs_node_conf_load(&node, TFS_NODE_DRIVER_CSI, a.config, a.config_must_exist, &err);
	if (rc) {
		fprintf(stderr, "tierfs-csi: %s\n",
			tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		tfs_dbuf_free(&err);
		return 1;
	}
	tfs_dbuf_free(&err);
	if (node.log_file) {
		rc = tfs_log_init_file(&log, node.log_file, node.log_level);
		if (rc) {
			fprintf(stderr, "tierfs-csi: log_file %s: %s\n", node.log_file,
				strerror(rc));
			tfs_node_conf_clear(&node);
			return 1;
		}
	} else {
		tfs_log_init_stderr(&log, node.log_level);
	}
	/* Block the signals before gRPC starts its threads, which inherit
	 * the mask: only sig_main() takes them. */
	struct sigwaiter w = { .log = &log };
	sigemptyset(&w.set);
	sigaddset(&w.set, SIGTERM);
	sigaddset(&w.set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &w.set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct csi_node cn = { .node = &node, .log = &log, .node_id = a.node_id };
	const char *sock = a.endpoint + strlen(UNIX_SCHEME);
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", sock);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		rc = tfs_node_mkdirs(dir, 0750);
		if (rc)
			tfs_warn(&log, "tierfs-csi: cannot create %s: %s", dir, strerror(rc));
	}
	csi_node_reconcile(&cn);
	size_t n;
	const struct csi_method *m = csi_node_methods(&n);
	rc = csi_server_start(sock, m, n, &cn, &log, &srv);
	if (rc) {
		tfs_err(&log, "tierfs-csi: cannot serve on %s: %s", sock, strerror(rc));
		tfs_node_conf_clear(&node);
		tfs_log_close(&log);
		return 1;
	}
	w.srv = srv;
	pthread_t sig_thread;
	rc = pthread_create(&sig_thread, NULL, sig_main, &w);
	if (rc) {
		tfs_err(&log, "tierfs-csi: cannot start the signal thread: %s", strerror(rc));
		csi_server_free(srv);
		tfs_node_conf_clear(&node);
		tfs_log_close(&log);
		return 1;
	}
	tfs_info(&log, "tierfs-csi %s: driver %s, node %s, serving on %s (config %s)",
		 PACKAGE_VERSION, CSI_DRIVER_NAME, a.node_id, sock,
		 node.path ? node.path : "built-in");
	csi_server_run(srv);
	tfs_debug(&log, "tierfs-csi: the server has shut down");
	pthread_join(sig_thread, NULL);
	csi_server_free(srv);
	tfs_info(&log, "tierfs-csi: stopped");
	tfs_node_conf_clear(&node);
	tfs_log_close(&log);
	return 0;
}
