/* test_metrics.c - the Prometheus endpoint: listen addresses, the
 * exposition built from a stats object, latency histograms, and the HTTP
 * server on a unix socket. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dbuf.h"
#include "clock.h"
#include "hist.h"
#include "metrics.h"

static struct tfs_log tlog;

TestSuite(metrics, .timeout = 30);

/* ---- listen addresses ---- */

static void listen_ok(const char *spec, int family)
{
	struct tfs_listen l;
	char why[160] = "";
	cr_assert_eq(tfs_metrics_parse_listen(spec, &l, why, sizeof(why)), 0, "%s: %s", spec, why);
	cr_assert_eq(l.sa.ss_family, family, "%s", spec);
}

static void listen_bad(const char *spec, const char *reason)
{
	char why[160] = "";
	cr_assert_eq(tfs_metrics_parse_listen(spec, NULL, why, sizeof(why)), EINVAL, "%s", spec);
	cr_assert(strstr(why, reason), "%s: '%s' lacks '%s'", spec, why, reason);
}

Test(metrics, listen_addresses)
{
	listen_ok("127.0.0.1:9464", AF_INET);
	listen_ok("127.1.2.3:0", AF_INET);
	listen_ok("localhost:9464", AF_INET);
	listen_ok("[::1]:9464", AF_INET6);
	listen_ok("unix:/run/tierfs/metrics.sock", AF_UNIX);
	listen_bad("0.0.0.0:9464", "not a loopback address");
	listen_bad("10.1.2.3:80", "not a loopback address");
	listen_bad("[::]:9464", "not a loopback address");
	listen_bad("example.com:9464", "not an IPv4 address");
	listen_bad("127.0.0.1", "HOST:PORT");
	listen_bad("127.0.0.1:", "HOST:PORT");
	listen_bad("127.0.0.1:65536", "invalid port");
	listen_bad("127.0.0.1:-1", "invalid port");
	listen_bad("127.0.0.1:9x", "invalid port");
	listen_bad("unix:relative.sock", "absolute path");
	char longpath[200];
	memset(longpath, 'a', sizeof(longpath));
	memcpy(longpath, "unix:/", 6);
	longpath[sizeof(longpath) - 1] = '\0';
	listen_bad(longpath, "longer than");
}

/* ---- exposition ---- */

static char *render(struct json_object *stats, const char *mount)
{
	struct tfs_dbuf out;
	tfs_dbuf_init(&out, 1 << 20);
	cr_assert_eq(tfs_metrics_render(stats, mount, &out), 0);
	char *s = strdup(tfs_dbuf_str(&out));
	tfs_dbuf_free(&out);
	return s;
}

/* `text` has the line made of fmt (a whole line). */
__attribute__((format(printf, 2, 3))) static void has(const char *text, const char *fmt, ...)
{
	char line[512], want[520];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	snprintf(want, sizeof(want), "\n%s\n", line);
	cr_assert(strstr(text, want), "missing line: %s\n---\n%s", line, text);
}

static struct json_object *sample_stats(struct tfs_hist *h)
{
	const char *json = "{\"source\":\"s3://b/p\",\"version\":\"9.9\",\"uptime_s\":12,"
			   "\"ram\":{\"hits\":5,\"misses\":2,\"used_bytes\":1024,\"capacity_"
			   "bytes\":4096,"
			   "\"policy\":\"epoch\"},"
			   "\"ssd\":{\"hits\":1,\"misses\":1,\"disabled\":true,\"used_bytes\":"
			   "18446744073709551615,\"fill_written\":7,\"fill_refused_policy\":"
			   "0,\"fill_refused_capacity\":2,\"fill_failed\":1,"
			   "\"fill_superseded\":0},"
			   "\"metadata\":{\"ttl_ms\":18446744073709551615},"
			   "\"backend\":{\"get\":{\"requests\":3,\"errors\":1,\"payload_bytes\":"
			   "300},"
			   "\"head\":{\"requests\":4,\"errors\":0,\"payload_bytes\":0},\"source\":"
			   "\"s3://b/p\"},"
			   "\"reload\":{\"ok\":2,\"failed\":1},"
			   "\"keeper\":{\"generation\":3,\"crashes\":2,\"upgrades\":1,"
			   "\"last_pause_s\":0.25,\"last_restart_cause\":\"upgrade\"}}";
	struct json_object *o = json_tokener_parse(json);
	cr_assert_not_null(o);
	struct json_object *get;
	cr_assert(json_object_object_get_ex(json_object_object_get(o, "backend"), "get", &get));
	json_object_object_add(get, "latency", tfs_hist_json(h));
	return o;
}

Test(metrics, exposition_from_stats)
{
	struct tfs_hist h = { 0 };
	tfs_hist_add(&h, 5000);        /* 5 us: first bucket */
	tfs_hist_add(&h, 3000000);     /* 3 ms: le 0.005 */
	tfs_hist_add(&h, 20000000000); /* 20 s: +Inf only */
	struct json_object *o = sample_stats(&h);
	char *t = render(o, "/mnt/a \"b\"\\c");
	const char *m = "mount=\"/mnt/a \\\"b\\\"\\\\c\"";

	cr_assert(strncmp(t, "# HELP tierfs_info ", 19) == 0, "%s", t);
	/* '@' stands for the mount label */
	static const char *const want[] = {
		"tierfs_info{@,version=\"9.9\",source=\"s3://b/p\"} 1",
		"# TYPE tierfs_cache_hits_total counter",
		"tierfs_cache_hits_total{@,tier=\"ram\"} 5",
		"tierfs_cache_hits_total{@,tier=\"ssd\"} 1",
		"tierfs_cache_used_bytes{@,tier=\"ssd\"} 18446744073709551615",
		"tierfs_ssd_disabled{@} 1",
		"# TYPE tierfs_ssd_fills_total counter",
		"tierfs_ssd_fills_total{@,outcome=\"written\"} 7",
		"tierfs_ssd_fills_total{@,outcome=\"refused_policy\"} 0",
		"tierfs_ssd_fills_total{@,outcome=\"refused_capacity\"} 2",
		"tierfs_ssd_fills_total{@,outcome=\"failed\"} 1",
		"tierfs_ssd_fills_total{@,outcome=\"superseded\"} 0",
		"tierfs_metadata_ttl_seconds{@} +Inf",
		"tierfs_config_reloads_total{@,result=\"failed\"} 1",
		"tierfs_daemon_restarts_total{@,cause=\"crash\"} 2",
		"tierfs_daemon_restarts_total{@,cause=\"upgrade\"} 1",
		"tierfs_daemon_generation{@} 3",
		"tierfs_daemon_last_pause_seconds{@} 0.25",
		"tierfs_backend_requests_total{@,op=\"head\"} 4",
		"tierfs_backend_bytes_total{@,op=\"get\"} 300",
		/* the histogram: cumulative buckets, sum in seconds, count */
		"# TYPE tierfs_backend_request_duration_seconds histogram",
		"tierfs_backend_request_duration_seconds_bucket{@,op=\"get\",le=\"1e-05\"} 1",
		"tierfs_backend_request_duration_seconds_bucket{@,op=\"get\",le=\"0.0025\"} 1",
		"tierfs_backend_request_duration_seconds_bucket{@,op=\"get\",le=\"0.005\"} 2",
		"tierfs_backend_request_duration_seconds_bucket{@,op=\"get\",le=\"10\"} 2",
		"tierfs_backend_request_duration_seconds_bucket{@,op=\"get\",le=\"+Inf\"} 3",
		"tierfs_backend_request_duration_seconds_sum{@,op=\"get\"} 20.003005",
		"tierfs_backend_request_duration_seconds_count{@,op=\"get\"} 3",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *at = strchr(want[i], '@');
		if (at)
			has(t, "%.*s%s%s", (int)(at - want[i]), want[i], m, at + 1);
		else
			has(t, "%s", want[i]);
	}
	/* head has no histogram; non-object members ("source") are no op */
	cr_assert_null(strstr(t, "op=\"head\",le="));
	cr_assert_null(strstr(t, "op=\"source\""));
	/* an outcome the stats do not have (dropped: only with
	 * ssd.fill_when_full = drop) has no sample */
	cr_assert_null(strstr(t, "outcome=\"dropped\""));
	/* absent sections give no family at all; strings are not numbers */
	cr_assert_null(strstr(t, "tierfs_writeback_"));
	cr_assert_null(strstr(t, "epoch"));
	/* each family once: HELP and TYPE lines are not repeated */
	const char *first = strstr(t, "# TYPE tierfs_cache_hits_total");
	cr_assert_null(strstr(first + 1, "# TYPE tierfs_cache_hits_total"));
	free(t);
	json_object_put(o);
}

Test(metrics, histogram_json)
{
	struct tfs_hist h = { 0 };
	tfs_hist_add(&h, 10000); /* 10 us: le 10us (inclusive) */
	tfs_hist_add(&h, 10001); /* 10.001 us: still 10 (whole us) */
	tfs_hist_add(&h, 11000); /* 11 us: le 25 */
	uint64_t t0 = tfs_mono_ns();
	tfs_hist_observe(&h, t0);
	struct json_object *j = tfs_hist_json(&h), *b;
	cr_assert(json_object_object_get_ex(j, "buckets", &b));
	cr_assert_eq(json_object_array_length(b), TFS_HIST_BUCKETS);
	int64_t count = 0;
	for (unsigned i = 0; i < TFS_HIST_BUCKETS; i++)
		count += json_object_get_int64(json_object_array_get_idx(b, i));
	cr_assert_eq(count, 4);
	cr_assert_geq(json_object_get_int64(json_object_array_get_idx(b, 0)), 2);
	cr_assert_eq(json_object_get_int64(json_object_array_get_idx(b, 1)), 1);
	cr_assert_eq(tfs_hist_bound_us(0), 10);
	cr_assert_eq(tfs_hist_bound_us(TFS_HIST_NBOUNDS - 1), 10000000);
	json_object_put(j);
}

/* ---- the server ---- */

static int collected;

static struct json_object *collect(void *ctx)
{
	(void)ctx;
	collected++;
	return json_tokener_parse("{\"uptime_s\":7,\"fuse\":{\"read\":{\"count\":9,\"errors\":0}}"
				  "}");
}

/* One HTTP/1.0 exchange over the unix socket; returns the whole reply. */
static char *http(const char *path, const char *request)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	cr_assert_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	return buf;
}

Test(metrics, serves_get_metrics_on_a_unix_socket)
{
	char dir[] = "/tmp/tierfs-test-metrics.XXXXXX", sock[64], spec[80];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/m.sock", dir);
	snprintf(spec, sizeof(spec), "unix:%s", sock);
	tfs_log_init_stderr(&tlog, TFS_LOG_WARN);

	struct tfs_metrics *m, *m2;
	cr_assert_eq(tfs_metrics_start(spec, "/mnt/x", collect, NULL, &tlog, &m), 0);
	cr_assert_str_eq(tfs_metrics_address(m), spec);
	struct stat st;
	cr_assert_eq(stat(sock, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(tfs_metrics_start(spec, "/mnt/x", collect, NULL, &tlog, &m2), EADDRINUSE,
		     "a live socket is not taken over");

	char *r = http(sock, "GET /metrics HTTP/1.0\r\n\r\n");
	cr_assert(strncmp(r, "HTTP/1.0 200", 12) == 0 || strncmp(r, "HTTP/1.1 200", 12) == 0, "%s",
		  r);
	cr_assert(strstr(r, "text/plain; version=0.0.4"), "%s", r);
	cr_assert(strstr(r, "\ntierfs_uptime_seconds{mount=\"/mnt/x\"} 7\n"), "%s", r);
	cr_assert(strstr(r, "\ntierfs_fuse_requests_total{mount=\"/mnt/x\",op=\"read\"} 9\n"), "%s",
		  r);
	free(r);
	cr_assert_eq(collected, 1);
	r = http(sock, "GET /other HTTP/1.0\r\n\r\n");
	cr_assert(strstr(r, " 404 "), "%s", r);
	free(r);
	r = http(sock, "DELETE /metrics HTTP/1.0\r\n\r\n");
	cr_assert(strstr(r, " 405 "), "%s", r);
	free(r);

	tfs_metrics_stop(m);
	cr_assert_neq(stat(sock, &st), 0, "the socket is removed");
	/* a stale socket file (nobody listens) is replaced */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	cr_assert_eq(tfs_metrics_start(spec, "/mnt/x", collect, NULL, &tlog, &m), 0);
	tfs_metrics_stop(m);
	rmdir(dir);
}

Test(metrics, tcp_port_zero_reports_the_real_port)
{
	struct tfs_metrics *m;
	tfs_log_init_stderr(&tlog, TFS_LOG_WARN);
	cr_assert_eq(tfs_metrics_start("127.0.0.1:0", "/mnt/x", collect, NULL, &tlog, &m), 0);
	const char *a = tfs_metrics_address(m);
	cr_assert(strncmp(a, "127.0.0.1:", 10) == 0, "%s", a);
	char *end;
	unsigned long port = strtoul(a + 10, &end, 10);
	cr_assert(*end == '\0' && port > 0 && port < 65536, "%s", a);
	tfs_metrics_stop(m);
	cr_assert_eq(tfs_metrics_start("0.0.0.0:0", "/mnt/x", collect, NULL, &tlog, &m), EINVAL);
}
