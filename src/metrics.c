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

enum kind {
	COUNTER,
	GAUGE,
	HISTOGRAM,
	INFO
};
enum conv {
	AS_IS,
	MS_TO_S, /* milliseconds to seconds; UINT64_MAX ("forever") is +Inf */
};

/* The most samples of a family with a fixed label set (struct family). */
#define MAX_SRC 6

/* One JSON member ("a.b.c") giving one sample, with the value of the
 * family's label (NULL: no label). */
struct src {
	const char *path;
	const char *lv;
};

struct family {
	const char *name;
	enum kind kind;
	const char *help;
	const char *label; /* the samples' own label name, or NULL */
	const char *each;  /* one sample per member object of this path, the
			    * label taking the member's name; src[0].path is
			    * then relative to the member */
	enum conv conv;
	struct src src[MAX_SRC];
};

#define F(n, k, h, p)                                                           \
	{                                                                       \
		.name = (n), .kind = (k), .help = (h), .src = { { (p), NULL } } \
	}
#define TIER(n, k, h, ram, ssd)                                         \
	{                                                               \
		.name = (n), .kind = (k), .help = (h), .label = "tier", \
		.src = { { (ram), "ram" },                              \
			 { (ssd), "ssd" } }                             \
	}
#define PER_OP(n, k, h, obj, p)                                                      \
	{                                                                            \
		.name = (n), .kind = (k), .help = (h), .label = "op", .each = (obj), \
		.src = { { (p), NULL } }                                             \
	}

/* Every family; docs/metrics.md documents each of them (same order). */
static const struct family families[] = {
	{ .name = "tierfs_info",
	  .kind = INFO,
	  .help = "Always 1; the labels give the tierfs version and the mount source." },
	F("tierfs_uptime_seconds", GAUGE, "Seconds since the daemon started.", "uptime_s"),
	{ .name = "tierfs_config_reloads_total",
	  .kind = COUNTER,
	  .label = "result",
	  .help = "Configuration reloads (SIGHUP or tierfs reload), by result (ok, failed).",
	  .src = { { "reload.ok", "ok" }, { "reload.failed", "failed" } } },
	F("tierfs_log_suppressed_total", COUNTER,
	  "Error and warning lines dropped by the log rate limiter.", "log.suppressed"),
	{ .name = "tierfs_daemon_restarts_total",
	  .kind = COUNTER,
	  .label = "cause",
	  .help = "Daemons the keeper started after the first, by cause (crash: a signal or a "
		  "failure; upgrade: tierfs upgrade).",
	  .src = { { "keeper.crashes", "crash" }, { "keeper.upgrades", "upgrade" } } },
	F("tierfs_daemon_generation", GAUGE,
	  "The daemon's generation: 0 for the first of the mount, +1 at each restart or upgrade.",
	  "keeper.generation"),
	F("tierfs_daemon_last_pause_seconds", GAUGE,
	  "Seconds the mount went unserved before this daemon served (0 for the first daemon).",
	  "keeper.last_pause_s"),

	TIER("tierfs_cache_hits_total", COUNTER, "Block reads served by the tier.", "ram.hits",
	     "ssd.hits"),
	TIER("tierfs_cache_misses_total", COUNTER, "Block reads the tier passed to the tier below.",
	     "ram.misses", "ssd.misses"),
	TIER("tierfs_cache_hit_bytes_total", COUNTER, "Bytes served by the tier.", "ram.hit_bytes",
	     "ssd.hit_bytes"),
	TIER("tierfs_cache_fill_bytes_total", COUNTER, "Bytes filled into the tier from below.",
	     "ram.fill_bytes", "ssd.fill_bytes"),
	TIER("tierfs_cache_evictions_total", COUNTER,
	     "Evictions (RAM: blocks; SSD: objects) to make room or to shrink the tier.",
	     "ram.evictions", "ssd.evictions"),
	TIER("tierfs_cache_not_admitted_total", COUNTER,
	     "Blocks served without being kept (admission policy, full tier).", "ram.not_admitted",
	     "ssd.bypassed"),
	TIER("tierfs_cache_used_bytes", GAUGE, "Bytes held by the tier.", "ram.used_bytes",
	     "ssd.used_bytes"),
	TIER("tierfs_cache_capacity_bytes", GAUGE, "The tier's size (ram.size, ssd.size).",
	     "ram.capacity_bytes", "ssd.capacity_bytes"),
	F("tierfs_ram_cached_bytes", GAUGE, "Bytes of cached (admitted) blocks in RAM.",
	  "ram.cached_bytes"),
	F("tierfs_ram_budget_waits_total", COUNTER, "Reads that waited for RAM budget.",
	  "ram.budget_waits"),
	F("tierfs_ram_background_yields_total", COUNTER,
	  "Warm-up fetches held back while training reads waited for data.",
	  "ram.background_yields"),
	F("tierfs_ram_fill_errors_total", COUNTER,
	  "RAM fills that failed (the read got the error).", "ram.fill_errors"),
	F("tierfs_ssd_evicted_bytes_total", COUNTER, "Bytes evicted from the SSD tier.",
	  "ssd.evicted_bytes"),
	F("tierfs_ssd_high_watermark_bytes", GAUGE, "SSD usage above which eviction starts.",
	  "ssd.high_watermark_bytes"),
	F("tierfs_ssd_low_watermark_bytes", GAUGE, "SSD usage eviction goes down to.",
	  "ssd.low_watermark_bytes"),
	F("tierfs_ssd_objects", GAUGE, "Objects with data in the SSD tier.", "ssd.objects"),
	F("tierfs_ssd_pinned_bytes", GAUGE, "Bytes of pinned objects (tierfs pin).",
	  "ssd.pinned_bytes"),
	F("tierfs_ssd_pin_max_bytes", GAUGE, "The most bytes that may be pinned (ssd.pin_max).",
	  "ssd.pin_max_bytes"),
	F("tierfs_ssd_corrupt_blocks_total", COUNTER,
	  "Cached blocks found damaged (checksum, short read) and fetched again.", "ssd.corrupt"),
	F("tierfs_ssd_write_errors_total", COUNTER, "Failed writes into the SSD tier.",
	  "ssd.write_errors"),
	F("tierfs_ssd_fill_queued_total", COUNTER,
	  "Blocks queued to be written into the SSD tier after a reader got them.",
	  "ssd.fill_queued"),
	{ .name = "tierfs_ssd_fills_total",
	  .kind = COUNTER,
	  .label = "outcome",
	  .help = "Blocks offered to the SSD tier, by outcome (written; refused_policy, "
		  "refused_capacity: not admitted; failed: memory, I/O or index error; "
		  "superseded: a newer version took its place; dropped: the fill queue was "
		  "full, only with ssd.fill_when_full = drop).",
	  .src = { { "ssd.fill_written", "written" },
		   { "ssd.fill_refused_policy", "refused_policy" },
		   { "ssd.fill_refused_capacity", "refused_capacity" },
		   { "ssd.fill_failed", "failed" },
		   { "ssd.fill_superseded", "superseded" },
		   { "ssd.fill_dropped", "dropped" } } },
	F("tierfs_ssd_fill_queue_bytes", GAUGE, "Bytes of blocks in the SSD tier's fill queue.",
	  "ssd.fill_queue_bytes"),
	F("tierfs_ssd_disabled", GAUGE,
	  "1 when a damaged index disabled the SSD tier until restart.", "ssd.disabled"),

	F("tierfs_metadata_hits_total", COUNTER, "Lookups answered from the metadata cache.",
	  "metadata.hits"),
	F("tierfs_metadata_negative_hits_total", COUNTER,
	  "Lookups of missing names answered from a cached listing.", "metadata.negative_hits"),
	F("tierfs_metadata_backend_lookups_total", COUNTER,
	  "Lookups that asked the backend (HEAD).", "metadata.backend_lookups"),
	F("tierfs_metadata_listings_total", COUNTER, "Directory listings fetched from the backend.",
	  "metadata.listings"),
	F("tierfs_metadata_list_pages_total", COUNTER, "LIST pages fetched for those listings.",
	  "metadata.list_pages"),
	F("tierfs_metadata_listed_ahead_total", COUNTER,
	  "Directories listed in the background because a lookup missed in them "
	  "(cache.list_ahead).",
	  "metadata.listed_ahead"),
	F("tierfs_metadata_listed_ahead_partial_total", COUNTER,
	  "Listings ahead of lookups that stopped early because few lookups came "
	  "(cache.list_ahead).",
	  "metadata.listed_ahead_partial"),
	F("tierfs_metadata_stale_served_total", COUNTER,
	  "Stale entries served because the backend could not be reached.",
	  "metadata.stale_served"),
	F("tierfs_metadata_errors_total", COUNTER, "Metadata operations that failed.",
	  "metadata.errors"),
	{ .name = "tierfs_metadata_ttl_seconds",
	  .kind = GAUGE,
	  .conv = MS_TO_S,
	  .help = "cache.metadata_ttl in seconds (+Inf: forever).",
	  .src = { { "metadata.ttl_ms" } } },

	PER_OP("tierfs_backend_requests_total", COUNTER, "Backend requests, by operation.",
	       "backend", "requests"),
	PER_OP("tierfs_backend_errors_total", COUNTER,
	       "Backend requests that failed after retries, by operation.", "backend", "errors"),
	PER_OP("tierfs_backend_bytes_total", COUNTER,
	       "Payload bytes read (get) or written (put), by operation.", "backend",
	       "payload_bytes"),
	PER_OP("tierfs_backend_request_duration_seconds", HISTOGRAM,
	       "Backend request latency, retries included, by operation.", "backend", "latency"),
	F("tierfs_backend_list_foreign_dropped_total", COUNTER,
	  "Listing names dropped because they lie outside the listing asked for.",
	  "backend.list_foreign_dropped"),
	F("tierfs_backend_list_loops_total", COUNTER,
	  "Listings cut off with EIO because they did not end (a token came back, too many pages).",
	  "backend.list_loops"),

	/* [near] (docs/cluster.md): only when the mount has a near copy */
	F("tierfs_near_hits_total", COUNTER, "Reads served by the near copy.", "backend.near.hits"),
	F("tierfs_near_misses_total", COUNTER,
	  "Reads the near copy had no copy for (read from far).", "backend.near.misses"),
	F("tierfs_near_errors_total", COUNTER,
	  "Near reads that failed otherwise (read from far, no error to the reader).",
	  "backend.near.errors"),
	F("tierfs_near_skipped_total", COUNTER, "Reads not asked of near: its breaker was open.",
	  "backend.near.skipped_breaker_open"),
	F("tierfs_near_breaker_opens_total", COUNTER, "Times the near breaker opened.",
	  "backend.near.breaker_opens"),
	F("tierfs_near_copies_total", COUNTER, "Copies written to near.", "backend.near.copies"),
	F("tierfs_near_copy_bytes_total", COUNTER, "Bytes of the copies written to near.",
	  "backend.near.copy_bytes"),
	F("tierfs_near_copies_dropped_total", COUNTER,
	  "Copies dropped (budget, size, breaker open, unmount).", "backend.near.copies_dropped"),
	F("tierfs_near_copies_failed_total", COUNTER, "Copies that failed.",
	  "backend.near.copies_failed"),
	F("tierfs_near_copy_far_rereads_total", COUNTER,
	  "Copies that read their object from far again.", "backend.near.copy_far_rereads"),
	F("tierfs_near_spool_bytes", GAUGE,
	  "Bytes in the spool files assembling copies of objects read in parts.",
	  "backend.near.spool_bytes"),
	F("tierfs_near_far_bytes_total", COUNTER, "Bytes read from far (the cloud bucket).",
	  "backend.near.far.get.payload_bytes"),
	F("tierfs_near_far_checks_total", COUNTER,
	  "HEADs of far before a near read: this mount's credentials had not read that version "
	  "lately.",
	  "backend.near.far_checks"),
	F("tierfs_near_far_refused_total", COUNTER,
	  "Near reads failed with far's error: far refused this mount the version.",
	  "backend.near.far_refused"),
	F("tierfs_near_verify_failed_total", COUNTER,
	  "Near reads whose block digests differed (read from far; the copy deleted).",
	  "backend.near.verify_failed"),
	F("tierfs_near_copies_mismatched_total", COUNTER,
	  "Copies not uploaded: their bytes differed from far's ETag or range digests.",
	  "backend.near.copies_mismatched"),
	F("tierfs_near_copies_unverified_total", COUNTER,
	  "Copies not uploaded: nothing from far could vouch for their bytes.",
	  "backend.near.copies_unverified"),

	F("tierfs_writeback_pending_files", GAUGE, "Changes waiting to be uploaded (files).",
	  "writeback.pending_files"),
	F("tierfs_writeback_dirty_bytes", GAUGE, "Bytes waiting to be uploaded.",
	  "writeback.dirty_bytes"),
	F("tierfs_writeback_failed_files", GAUGE,
	  "Changes whose upload gave up (writeback.max_retries); kept in the journal.",
	  "writeback.failed_files"),
	F("tierfs_writeback_uploading", GAUGE, "Uploads in progress.", "writeback.uploading"),
	F("tierfs_writeback_open_files", GAUGE, "Dirty files open for writing.",
	  "writeback.open_files"),
	F("tierfs_writeback_uploads_total", COUNTER, "Files uploaded.", "writeback.uploads"),
	F("tierfs_writeback_upload_bytes_total", COUNTER, "Bytes uploaded.",
	  "writeback.upload_bytes"),
	F("tierfs_writeback_deletes_total", COUNTER, "Deletes done in the bucket.",
	  "writeback.deletes"),
	F("tierfs_writeback_mkdirs_total", COUNTER, "Directory markers created in the bucket.",
	  "writeback.mkdirs"),
	F("tierfs_writeback_attr_updates_total", COUNTER,
	  "Attribute changes (chmod, utimens) done in the bucket.", "writeback.attr_updates"),
	F("tierfs_writeback_attempt_failures_total", COUNTER, "Upload attempts that failed.",
	  "writeback.attempt_failures"),
	F("tierfs_writeback_reuploads_total", COUNTER,
	  "Uploads repeated because the file changed meanwhile.", "writeback.reuploads"),
	F("tierfs_writeback_recovered_total", COUNTER,
	  "Changes found in the journal at start-up and queued again.", "writeback.recovered"),
	F("tierfs_writeback_staged_bytes", GAUGE, "Bytes in staged files.",
	  "writeback.staged_bytes"),
	F("tierfs_writeback_staging_capacity_bytes", GAUGE,
	  "The most bytes that may be staged (writeback.staging_size).",
	  "writeback.staging_capacity_bytes"),
	F("tierfs_writeback_uploaders", GAUGE, "Upload threads (writeback.uploaders).",
	  "writeback.uploaders"),

	F("tierfs_prefetch_workers", GAUGE, "Read-ahead threads (prefetch.workers).",
	  "prefetch.workers"),
	F("tierfs_prefetch_queued_total", COUNTER, "Read-ahead runs queued.", "prefetch.queued"),
	F("tierfs_prefetch_done_total", COUNTER, "Read-ahead runs fetched.", "prefetch.done"),
	F("tierfs_prefetch_dropped_total", COUNTER,
	  "Read-ahead runs dropped (queue full, no free RAM budget).", "prefetch.dropped"),
	F("tierfs_prefetch_failed_total", COUNTER, "Read-ahead runs that failed.",
	  "prefetch.failed"),
	F("tierfs_prefetch_pending", GAUGE, "Read-ahead runs waiting in the queue.",
	  "prefetch.pending"),
	F("tierfs_prefetch_active", GAUGE, "Read-ahead runs being fetched now.", "prefetch.active"),
	F("tierfs_prefetch_active_max", GAUGE,
	  "Most read-ahead runs fetched at once since the start.", "prefetch.active_max"),
	F("tierfs_follow_order_files", GAUGE, "Files in the orders being followed (all streams).",
	  "follow.order_files"),
	F("tierfs_follow_position", GAUGE, "Files of the orders their readers have opened.",
	  "follow.position"),
	F("tierfs_follow_window", GAUGE, "Files kept in flight ahead of each reader, at most.",
	  "follow.window"),
	F("tierfs_follow_active_streams", GAUGE,
	  "Orders followed whose reader opened a file within prefetch.stall.",
	  "follow.active_streams"),
	F("tierfs_follow_dropped_streams_total", COUNTER,
	  "Orders dropped for a new one beyond the most streams or the order memory.",
	  "follow.dropped_streams"),
	F("tierfs_follow_workers", GAUGE, "Threads fetching files of the order.", "follow.workers"),
	F("tierfs_follow_prefetched_files_total", COUNTER, "Files of the order prefetched.",
	  "follow.prefetched_files"),
	F("tierfs_follow_failed_files_total", COUNTER,
	  "Files of the order that failed to prefetch.", "follow.failed_files"),
	F("tierfs_follow_opened_in_order_total", COUNTER, "Opens of files in the order.",
	  "follow.opened_in_order"),
	F("tierfs_follow_realigned_total", COUNTER,
	  "Times the window moved because the reader jumped.", "follow.realigned"),
	F("tierfs_follow_order_bytes", GAUGE,
	  "Order memory counted: texts of open control-file handles and orders built.",
	  "follow.order_bytes"),
	F("tierfs_follow_orders_queued", GAUGE,
	  "Orders handed to the order builder by a close, not yet set or refused.",
	  "follow.orders_queued"),
	F("tierfs_follow_orders_refused_total", COUNTER,
	  "Orders the builder refused (no valid line, beyond the memory bounds).",
	  "follow.orders_refused"),

	PER_OP("tierfs_fuse_requests_total", COUNTER, "FUSE requests, by operation.", "fuse",
	       "count"),
	PER_OP("tierfs_fuse_errors_total", COUNTER, "FUSE requests answered with an error.", "fuse",
	       "errors"),
	PER_OP("tierfs_fuse_request_duration_seconds", HISTOGRAM,
	       "FUSE request latency (handler entry to reply), by operation.", "fuse", "latency"),
	F("tierfs_fuse_read_bytes_total", COUNTER, "Bytes returned by read().", "fuse.read_bytes"),
	F("tierfs_fuse_write_bytes_total", COUNTER, "Bytes accepted by write().",
	  "fuse.write_bytes"),
	F("tierfs_fuse_inodes", GAUGE, "Inodes the kernel holds a reference to.", "fuse.inodes"),
	F("tierfs_fuse_inodes_trimmed_total", COUNTER,
	  "Names the kernel was asked to drop to keep the inodes within mount.max_inodes.",
	  "fuse.inodes_trimmed"),
};

#define NFAMILIES (sizeof(families) / sizeof(families[0]))

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

/* The value of a number (is_number()). */
static int add_value(struct tfs_dbuf *out, struct json_object *v, enum conv conv)
{
	switch (json_object_get_type(v)) {
	case json_type_boolean:
		return tfs_dbuf_adds(out, json_object_get_boolean(v) ? "1\n" : "0\n");
	case json_type_int: {
		uint64_t u = as_u64(v);

		if (conv == MS_TO_S)
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
static int add_histogram(struct tfs_dbuf *out, const struct family *f, const char *mount,
			 const char *lv, struct json_object *h)
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
		rc = add_series(out, f->name, "_bucket", mount, f->label, lv, le);
		if (rc == 0)
			rc = tfs_dbuf_addf(out, "%" PRIu64 "\n", cum);
	}
	if (rc == 0)
		rc = add_series(out, f->name, "_sum", mount, f->label, lv, NULL);
	if (rc == 0)
		rc = add_double(out, (double)as_u64(sum) / 1e6);
	if (rc == 0)
		rc = add_series(out, f->name, "_count", mount, f->label, lv, NULL);
	if (rc == 0)
		rc = tfs_dbuf_addf(out, "%" PRIu64 "\n", cum);
	return rc;
}

/* One sample (or a histogram's series) into `out`.  Returns 0, -EINVAL
 * when the member is missing or not a number (skipped, nothing written),
 * or a dbuf error. */
static int add_sample(struct tfs_dbuf *out, const struct family *f, const char *mount,
		      const char *lv, struct json_object *v)
{
	int rc;

	if (v == NULL)
		return -EINVAL;
	if (f->kind == HISTOGRAM)
		return add_histogram(out, f, mount, lv, v);
	if (!is_number(v))
		return -EINVAL;
	rc = add_series(out, f->name, "", mount, f->label, lv, NULL);
	return rc ? rc : add_value(out, v, f->conv);
}

static int add_info(struct tfs_dbuf *out, const struct family *f, const char *mount,
		    struct json_object *stats)
{
	struct json_object *ver = at(stats, "version"), *src = at(stats, "source");
	int rc = tfs_dbuf_addf(out, "%s{", f->name);

	if (rc == 0)
		rc = add_label(out, "mount", mount, true);
	if (rc == 0)
		rc = add_label(out, "version", ver ? json_object_get_string(ver) : "", false);
	if (rc == 0)
		rc = add_label(out, "source", src ? json_object_get_string(src) : "", false);
	return rc ? rc : tfs_dbuf_adds(out, "} 1\n");
}

static int render_family(struct json_object *stats, const struct family *f, const char *mount,
			 struct tfs_dbuf *body)
{
	int rc = 0;

	if (f->kind == INFO)
		return add_info(body, f, mount, stats);
	if (f->each) {
		struct json_object *parent = at(stats, f->each);

		if (parent == NULL || !json_object_is_type(parent, json_type_object))
			return 0;
		json_object_object_foreach(parent, name, child)
		{
			if (!json_object_is_type(child, json_type_object))
				continue;
			rc = add_sample(body, f, mount, name, at(child, f->src[0].path));
			if (rc > 0)
				return rc;
		}
		return 0;
	}
	for (size_t i = 0; i < MAX_SRC && f->src[i].path; i++) {
		rc = add_sample(body, f, mount, f->src[i].lv, at(stats, f->src[i].path));
		if (rc > 0)
			return rc;
	}
	return 0;
}

int tfs_metrics_render(struct json_object *stats, const char *mount, struct tfs_dbuf *out)
{
	static const char *const types[] = { "counter", "gauge", "histogram", "gauge" };
	struct tfs_dbuf body;
	int rc = 0;

	tfs_dbuf_init(&body, MAX_EXPOSITION);
	for (size_t i = 0; rc == 0 && i < NFAMILIES; i++) {
		const struct family *f = &families[i];

		tfs_dbuf_reset(&body);
		rc = render_family(stats, f, mount, &body);
		if (rc == 0 && tfs_dbuf_len(&body) > 0)
			rc = tfs_dbuf_addf(out, "# HELP %s %s\n# TYPE %s %s\n%s", f->name, f->help,
					   f->name, types[f->kind], tfs_dbuf_str(&body));
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
