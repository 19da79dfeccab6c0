/* metrics.h - the Prometheus endpoint: the daemon's statistics in the
 * Prometheus text exposition format (version 0.0.4), served over HTTP by
 * libmicrohttpd on a loopback TCP port or a unix socket ([metrics]
 * listen; off by default).
 *
 * The exposition is built from the same JSON object `tierfs stats --json`
 * prints (one collect callback builds both), by the rows that built its
 * members (lib/statdef.h; every table is in stats_schema.h), so no
 * counter is kept twice and a member renamed renames its sample's
 * source.  A family comes where its row with the help text is in the
 * schema, with the samples of all its rows.  Every family is named
 * tierfs_* and every sample carries a `mount` label (the mountpoint); the
 * families are listed in docs/metrics.md, which
 * tests/unit/test_stats_schema.c checks against the rows and
 * tests/integration/test_ops.py against a scrape.
 *
 * Only loopback addresses and unix sockets are accepted: the endpoint has
 * no authentication, and the statistics name the bucket and mountpoint.
 */
#ifndef TFS_METRICS_H
#define TFS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "log.h"

struct json_object;
struct tfs_dbuf;

/* Filled and validated by src/conf.c ([metrics]). */
struct tfs_metrics_config {
	char *listen; /* NULL: no endpoint; see tfs_metrics_parse_listen() */
};

/* A parsed [metrics] listen value. */
struct tfs_listen {
	struct sockaddr_storage sa; /* AF_INET, AF_INET6 or AF_UNIX */
	socklen_t len;
};

/* Parse a listen address:
 *   HOST:PORT         HOST a 127.x.y.z address, "localhost" (127.0.0.1)
 *                     or "[::1]"; PORT 0 .. 65535 (0: any free port, see
 *                     tfs_metrics_address())
 *   unix:/ABS/PATH    a unix socket (at most 107 bytes)
 * `out` may be NULL (validation only).  Returns 0, or EINVAL with the
 * reason (e.g. "0.0.0.0 is not a loopback address") in why[0..cap).
 * Thread safe. */
int tfs_metrics_parse_listen(const char *spec, struct tfs_listen *out, char *why, size_t cap);

/* Append the exposition of `stats` (the stats JSON object) to `out`, every
 * sample labelled mount="<mount>".  A row whose member is absent or not a
 * number gives no sample; a family without samples is left out.  Returns 0, or ENOMEM/EOVERFLOW from the buffer. */
int tfs_metrics_render(struct json_object *stats, const char *mount, struct tfs_dbuf *out);

/* Builds a new stats object for a scrape (the caller puts it), or NULL on
 * ENOMEM.  Called on the server's thread. */
typedef struct json_object *(*tfs_metrics_collect_fn)(void *ctx);

struct tfs_metrics;

/* Start serving GET /metrics on `listen` (a valid spec, see above) with
 * one server thread (all signals blocked).  A unix socket is created 0600
 * (replacing a stale one) and removed by tfs_metrics_stop().  `mount`
 * (copied) is the value of the mount label; `collect`, `ctx` and `log`
 * must outlive the server.  Returns 0 and *out; EADDRINUSE (port or socket
 * taken), EINVAL (bad spec), ENOMEM, or the errno of the socket call;
 * errors are logged.  Call after daemonizing. */
int tfs_metrics_start(const char *listen, const char *mount, tfs_metrics_collect_fn collect,
		      void *ctx, const struct tfs_log *log, struct tfs_metrics **out);

/* Where the server listens, e.g. "127.0.0.1:9464" (the real port when 0
 * was asked) or "unix:/run/tierfs/metrics.sock".  Borrowed. */
const char *tfs_metrics_address(const struct tfs_metrics *m);

/* Stop the server (a scrape in progress finishes first), remove its unix
 * socket, free.  NULL is a no-op. */
void tfs_metrics_stop(struct tfs_metrics *m);

#endif
