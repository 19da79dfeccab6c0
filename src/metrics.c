/* metrics.c - the Prometheus exposition of the stats JSON, and its HTTP
 * server (libmicrohttpd, one internal thread). */
#include "config.h"

#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "unix_listen.h"
#include "dbuf.h"
#include "hist.h"
#include "stats_schema.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define MAX_EXPOSITION (16u << 20)
#define MAX_CONNECTIONS 16
#define CONNECTION_TIMEOUT_S 10
#define LISTEN_BACKLOG 16

/* ---- listen addresses ---- */

int tfs_metrics_parse_listen(const char *spec, struct tfs_listen *out, char *why, size_t cap)
{
	struct tfs_listen l;
	char host[64];
	const char *colon;
	size_t hlen;
	unsigned long port;
	char *end;

	memset(&l, 0, sizeof(l));
	if (strncmp(spec, "unix:", 5) == 0) {
		struct sockaddr_un *sun = (struct sockaddr_un *)&l.sa;
		const char *path = spec + 5;
		size_t plen = strlen(path);

		if (path[0] != '/') {
			snprintf(why, cap, "a unix socket needs an absolute path");
			return EINVAL;
		}
		if (plen >= sizeof(sun->sun_path)) {
			snprintf(why, cap, "the socket path is longer than %zu bytes",
				 sizeof(sun->sun_path) - 1);
			return EINVAL;
		}
		sun->sun_family = AF_UNIX;
		memcpy(sun->sun_path, path, plen + 1);
		l.len = (socklen_t)sizeof(*sun);
		goto ok;
	}
	colon = strrchr(spec, ':');
	if (colon == NULL || colon == spec || colon[1] == '\0') {
		snprintf(why, cap, "expected HOST:PORT or unix:PATH");
		return EINVAL;
	}
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end != '\0' || port > 65535 || colon[1] < '0' || colon[1] > '9') {
		snprintf(why, cap, "invalid port");
		return EINVAL;
	}
	hlen = (size_t)(colon - spec);
	if (hlen >= sizeof(host)) {
		snprintf(why, cap, "the host is too long");
		return EINVAL;
	}
	memcpy(host, spec, hlen);
	host[hlen] = '\0';
	if (host[0] == '[' && hlen > 2 && host[hlen - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&l.sa;

		host[hlen - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1) {
			snprintf(why, cap, "invalid IPv6 address");
			return EINVAL;
		}
		if (!IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr)) {
			snprintf(why, cap, "%s] is not a loopback address", host);
			return EINVAL;
		}
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		l.len = (socklen_t)sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&l.sa;

		if (strcmp(host, "localhost") == 0) {
			s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		} else if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) {
			snprintf(why, cap,
				 "'%s' is not an IPv4 address, [IPv6] address or localhost", host);
			return EINVAL;
		} else if ((ntohl(s4->sin_addr.s_addr) >> 24) != 127) {
			snprintf(why, cap, "%s is not a loopback address", host);
			return EINVAL;
		}
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		l.len = (socklen_t)sizeof(*s4);
	}
ok:
	if (out)
		*out = l;
	return 0;
}

/* ---- exposition ---- */

/* The member at "a.b.c" of `o`, or NULL. */
static struct json_object *at(struct json_object *o, const char *path)
{
	char part[64];

	while (o && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);
		struct json_object *v = NULL;

		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		if (!json_object_is_type(o, json_type_object) ||
		    !json_object_object_get_ex(o, part, &v))
			return NULL;
		o = v;
		path += n + (dot != NULL);
	}
	return o;
}

/* A label value: \ " and newline escaped. */
static int add_label(struct tfs_dbuf *out, const char *name, const char *v, bool first)
{
	int rc = tfs_dbuf_addf(out, "%s%s=\"", first ? "" : ",", name);

	for (; rc == 0 && *v; v++) {
		if (*v == '\\' || *v == '"')
			rc = tfs_dbuf_addf(out, "\\%c", *v);
		else if (*v == '\n')
			rc = tfs_dbuf_adds(out, "\\n");
		else
			rc = tfs_dbuf_addc(out, *v);
	}
	return rc ? rc : tfs_dbuf_addc(out, '"');
}

/* "NAME{mount="...",L="V"[,le="B"]} " */
static int add_series(struct tfs_dbuf *out, const char *name, const char *suffix, const char *mount,
		      const char *label, const char *lv, const char *le)
{
	int rc = tfs_dbuf_addf(out, "%s%s{", name, suffix);

	if (rc == 0)
		rc = add_label(out, "mount", mount, true);
	if (rc == 0 && label && lv)
		rc = add_label(out, label, lv, false);
	if (rc == 0 && le)
		rc = add_label(out, "le", le, false);
	return rc ? rc : tfs_dbuf_adds(out, "} ");
}

static int add_double(struct tfs_dbuf *out, double d)
{
	if (isnan(d))
		return tfs_dbuf_adds(out, "NaN\n");
	if (isinf(d))
		return tfs_dbuf_adds(out, d > 0 ? "+Inf\n" : "-Inf\n");
	return tfs_dbuf_addf(out, "%.15g\n", d);
}

static uint64_t as_u64(struct json_object *v)
{
	int64_t i = json_object_get_int64(v);

	/* json-c saturates get_int64 above INT64_MAX */
	return i == INT64_MAX ? json_object_get_uint64(v) : i < 0 ? 0 : (uint64_t)i;
}

static bool is_number(struct json_object *v)
{
	return json_object_is_type(v, json_type_boolean) || json_object_is_type(v, json_type_int) ||
	       json_object_is_type(v, json_type_double);
}

/* The value of a number (is_number()), milliseconds shown in seconds
 * when ms_to_s. */
static int add_value(struct tfs_dbuf *out, struct json_object *v, bool ms_to_s)
{
	switch (json_object_get_type(v)) {
	case json_type_boolean:
		return tfs_dbuf_adds(out, json_object_get_boolean(v) ? "1\n" : "0\n");
	case json_type_int: {
		uint64_t u = as_u64(v);

		if (ms_to_s)
			return add_double(out, u == UINT64_MAX ? INFINITY : (double)u / 1000.0);
		if (json_object_get_int64(v) < 0)
			return tfs_dbuf_addf(out, "%" PRId64 "\n", json_object_get_int64(v));
		return tfs_dbuf_addf(out, "%" PRIu64 "\n", u);
	}
	case json_type_double:
		return add_double(out, json_object_get_double(v));
	default:
		return tfs_dbuf_adds(out, "NaN\n");
	}
}

/* A histogram {"sum_us","buckets":[...]} as _bucket/_sum/_count,
 * or -EINVAL (nothing written) when it does not have that shape. */
static int add_histogram(struct tfs_dbuf *out, const char *name, const char *mount,
			 const char *label, const char *lv, struct json_object *h)
{
	struct json_object *b = at(h, "buckets"), *sum = at(h, "sum_us");
	uint64_t cum = 0;
	char le[32];
	int rc = 0;

	if (b == NULL || sum == NULL || !json_object_is_type(b, json_type_array) ||
	    json_object_array_length(b) != TFS_HIST_BUCKETS)
		return -EINVAL;
	for (unsigned i = 0; rc == 0 && i < TFS_HIST_BUCKETS; i++) {
		cum += as_u64(json_object_array_get_idx(b, i));
		if (i < TFS_HIST_NBOUNDS)
			snprintf(le, sizeof(le), "%.15g", (double)tfs_hist_bound_us(i) / 1e6);
		else
			snprintf(le, sizeof(le), "+Inf");
		rc = add_series(out, name, "_bucket", mount, label, lv, le);
		if (rc == 0)
			rc = tfs_dbuf_addf(out, "%" PRIu64 "\n", cum);
	}
	if (rc == 0)
		rc = add_series(out, name, "_sum", mount, label, lv, NULL);
	if (rc == 0)
		rc = add_double(out, (double)as_u64(sum) / 1e6);
	if (rc == 0)
		rc = add_series(out, name, "_count", mount, label, lv, NULL);
	if (rc == 0)
		rc = tfs_dbuf_addf(out, "%" PRIu64 "\n", cum);
	return rc;
}

/* tierfs_info: 1, labelled with the row's string and the member it names
 * (TFS_INFO). */
static int add_info(struct tfs_dbuf *out, const struct tfs_statdef *r, const char *mount,
		    struct json_object *sec)
{
	struct json_object *v = at(sec, r->key);
	struct json_object *other = r->label_value ? at(sec, r->label_value) : NULL;
	int rc = tfs_dbuf_addf(out, "%s{", r->metric);

	if (rc == 0)
		rc = add_label(out, "mount", mount, true);
	if (rc == 0)
		rc = add_label(out, r->label, v ? json_object_get_string(v) : "", false);
	if (rc == 0 && r->label_value)
		rc = add_label(out, r->label_value, other ? json_object_get_string(other) : "",
			       false);
	return rc ? rc : tfs_dbuf_adds(out, "} 1\n");
}

/* One sample (or a histogram's series) of row `r` into `out`.  Returns 0,
 * -EINVAL when the member is missing or not a number (skipped, nothing
 * written), or a dbuf error. */
static int add_sample(struct tfs_dbuf *out, const struct tfs_statdef *r, const char *mount,
		      const char *label, const char *lv, struct json_object *v)
{
	int rc;

	if (v == NULL)
		return -EINVAL;
	if (r->kind == TFS_HISTOGRAM)
		return add_histogram(out, r->metric, mount, label, lv, v);
	if (!is_number(v))
		return -EINVAL;
	rc = add_series(out, r->metric, "", mount, label, lv, NULL);
	return rc ? rc : add_value(out, v, r->ms_to_s);
}

/* The samples of row `r` of table `t`. */
static int render_row(struct json_object *stats, const struct tfs_stattab *t,
		      const struct tfs_statdef *r, const char *mount, struct tfs_dbuf *body)
{
	struct json_object *sec = at(stats, t->section);
	int rc = 0;

	if (sec == NULL || !json_object_is_type(sec, json_type_object))
		return 0;
	if (r->kind == TFS_INFO)
		return add_info(body, r, mount, sec);
	if (t->each == NULL) {
		rc = add_sample(body, r, mount, r->label, r->label_value, at(sec, r->key));
		return rc > 0 ? rc : 0;
	}
	json_object_object_foreach(sec, name, child)
	{
		if (!json_object_is_type(child, json_type_object))
			continue;
		rc = add_sample(body, r, mount, t->each, name, at(child, r->key));
		if (rc > 0)
			return rc;
	}
	return 0;
}

/* Every sample of family `name`: the rows of every table that feed it. */
static int render_family(struct json_object *stats, const char *name, const char *mount,
			 struct tfs_dbuf *body)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < tfs_stats_schema_len; i++) {
		const struct tfs_stattab *t = tfs_stats_schema[i];

		for (size_t j = 0; rc == 0 && j < t->n; j++)
			if (t->rows[j].metric && strcmp(t->rows[j].metric, name) == 0)
				rc = render_row(stats, t, &t->rows[j], mount, body);
	}
	return rc;
}

int tfs_metrics_render(struct json_object *stats, const char *mount, struct tfs_dbuf *out)
{
	static const char *const types[] = {
		[TFS_COUNTER] = "counter",
		[TFS_GAUGE] = "gauge",
		[TFS_HISTOGRAM] = "histogram",
		[TFS_INFO] = "gauge",
	};
	struct tfs_dbuf body;
	int rc = 0;

	tfs_dbuf_init(&body, MAX_EXPOSITION);
	/* a family where its row with the help text is */
	for (size_t i = 0; rc == 0 && i < tfs_stats_schema_len; i++) {
		const struct tfs_stattab *t = tfs_stats_schema[i];

		for (size_t j = 0; rc == 0 && j < t->n; j++) {
			const struct tfs_statdef *r = &t->rows[j];

			if (r->kind == TFS_JSON_ONLY || r->help == NULL)
				continue;
			tfs_dbuf_reset(&body);
			rc = render_family(stats, r->metric, mount, &body);
			if (rc == 0 && tfs_dbuf_len(&body) > 0)
				rc = tfs_dbuf_addf(out, "# HELP %s %s\n# TYPE %s %s\n%s", r->metric,
						   r->help, r->metric, types[r->kind],
						   tfs_dbuf_str(&body));
		}
	}
	tfs_dbuf_free(&body);
	return rc;
}

/* ---- the server ---- */

struct tfs_metrics {
	struct MHD_Daemon *mhd;
	char *mount;
	char *unix_path; /* NULL for TCP */
	struct stat sock_st;
	char address[160];
	tfs_metrics_collect_fn collect;
	void *ctx;
	const struct tfs_log *log;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, char *body, size_t len,
			     const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ok;

	if (r == NULL) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ok = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	char *body = strdup(msg);

	return body ? reply(conn, status, body, strlen(body), "text/plain; charset=utf-8") : MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct tfs_metrics *m = cls;
	(void)version;
	(void)upload_data;

	/* MHD calls once for the headers, then (for a body) again: answer
	 * at the first call, after refusing bodies. */
	if (*upload_data_size != 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	(void)req_cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, "/") == 0)
		return text(conn, MHD_HTTP_OK, "tierfs metrics: see /metrics\n");
	if (strcmp(url, "/metrics") != 0)
		return text(conn, MHD_HTTP_NOT_FOUND, "not found; the metrics are at /metrics\n");

	struct json_object *stats = m->collect(m->ctx);
	struct tfs_dbuf out;
	int rc = stats ? 0 : ENOMEM;

	tfs_dbuf_init(&out, MAX_EXPOSITION);
	if (rc == 0)
		rc = tfs_metrics_render(stats, m->mount, &out);
	json_object_put(stats);
	size_t len = tfs_dbuf_len(&out);
	char *body = rc == 0 ? tfs_dbuf_steal(&out) : NULL;
	tfs_dbuf_free(&out);
	if (body == NULL) {
		tfs_warn(m->log, "metrics: cannot build the exposition: %s",
			 strerror(rc ? rc : ENOMEM));
		return text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot build the metrics\n");
	}
	return reply(conn, MHD_HTTP_OK, body, len, CONTENT_TYPE);
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	const struct tfs_metrics *m = cls;
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	tfs_debug(m->log, "metrics: %s", msg);
}

/* A TCP listening socket bound to `l`; fills m->address. */
static int tcp_listen(struct tfs_metrics *m, const char *spec, const struct tfs_listen *l, int *fdp)
{
	struct sockaddr_storage got;
	socklen_t glen = sizeof(got);
	char host[INET6_ADDRSTRLEN];
	int one = 1, rc;
	int fd = socket(l->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&l->sa, l->len) != 0 ||
	    listen(fd, LISTEN_BACKLOG) != 0 || getsockname(fd, (struct sockaddr *)&got, &glen) != 0)
		goto fail;
	if (got.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&got;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(m->address, sizeof(m->address), "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&got;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(m->address, sizeof(m->address), "%s:%u", host, ntohs(s4->sin_port));
	}
	*fdp = fd;
	return 0;
fail:
	rc = errno;
	if (fd >= 0)
		close(fd);
	tfs_err(m->log, "metrics: cannot listen on %s: %s", spec, strerror(rc));
	return rc;
}

static void metrics_free(struct tfs_metrics *m)
{
	free(m->mount);
	free(m->unix_path);
	free(m);
}

int tfs_metrics_start(const char *listen_spec, const char *mount, tfs_metrics_collect_fn collect,
		      void *ctx, const struct tfs_log *log, struct tfs_metrics **out)
{
	struct tfs_listen l;
	char why[160];
	int fd = -1, rc;

	*out = NULL;
	if (tfs_metrics_parse_listen(listen_spec, &l, why, sizeof(why)) != 0) {
		tfs_err(log, "metrics: listen '%s': %s", listen_spec, why);
		return EINVAL;
	}
	struct tfs_metrics *m = calloc(1, sizeof(*m));
	if (m == NULL || (m->mount = strdup(mount)) == NULL) {
		free(m);
		return ENOMEM;
	}
	m->collect = collect;
	m->ctx = ctx;
	m->log = log;
	if (l.sa.ss_family == AF_UNIX) {
		const char *path = ((const struct sockaddr_un *)&l.sa)->sun_path;

		m->unix_path = strdup(path);
		if (m->unix_path == NULL) {
			metrics_free(m);
			return ENOMEM;
		}
		rc = tfs_unix_listen(path, 0600, LISTEN_BACKLOG, log, "metrics", &m->sock_st, &fd);
		if (rc == EADDRINUSE)
			tfs_err(log, "metrics: another server listens on %s", path);
		if (rc == 0) {
			/* MHD wants a blocking listening socket it polls itself */
			int fl = fcntl(fd, F_GETFL);
			if (fl >= 0)
				fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		}
		snprintf(m->address, sizeof(m->address), "unix:%s", path);
	} else {
		rc = tcp_listen(m, listen_spec, &l, &fd);
	}
	if (rc) {
		free(m->unix_path);
		m->unix_path = NULL;
		metrics_free(m);
		return rc;
	}

	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	m->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		on_request, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
		m, /* first: for every message */
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (m->mhd == NULL) {
		tfs_err(log, "metrics: cannot start the HTTP server on %s", m->address);
		close(fd);
		if (m->unix_path)
			unlink(m->unix_path);
		metrics_free(m);
		return EIO;
	}
	tfs_info(log, "metrics: serving /metrics on %s", m->address);
	*out = m;
	return 0;
}

const char *tfs_metrics_address(const struct tfs_metrics *m)
{
	return m->address;
}

void tfs_metrics_stop(struct tfs_metrics *m)
{
	struct stat st;

	if (m == NULL)
		return;
	MHD_stop_daemon(m->mhd); /* closes the listening socket */
	/* Remove the socket file only if it is still the one we made. */
	if (m->unix_path && lstat(m->unix_path, &st) == 0 && st.st_dev == m->sock_st.st_dev &&
	    st.st_ino == m->sock_st.st_ino)
		unlink(m->unix_path);
	metrics_free(m);
}
