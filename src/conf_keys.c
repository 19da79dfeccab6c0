/* conf_keys.c - the configuration's option table (every key: section,
 * name, type, range, default, the field it fills) and the accessors over
 * it.  A new key is one entry here (and its documentation: tierfs.conf(5),
 * etc/tierfs.conf.example). */
#include "config.h"

#include "conf_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "units.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define SEC UINT64_C(1000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)

/* path_style: "auto", or any spelling of a boolean (true is path-style) */
static const struct opt_name path_style_names[] = {
	{ "auto", TFS_S3_PATH_AUTO }, { "true", TFS_S3_PATH_ON },
	{ "false", TFS_S3_PATH_OFF }, { "yes", TFS_S3_PATH_ON },
	{ "no", TFS_S3_PATH_OFF },    { "on", TFS_S3_PATH_ON },
	{ "off", TFS_S3_PATH_OFF },   { "1", TFS_S3_PATH_ON },
	{ "0", TFS_S3_PATH_OFF },     { NULL, 0 },
};

static const struct opt_name policy_names[] = {
	{ "lru", TFS_POLICY_LRU },
	{ "epoch", TFS_POLICY_EPOCH },
	{ NULL, 0 },
};

static const struct opt_name headers_names[] = {
	{ "false", TFS_HEADERS_NONE },
	{ "small", TFS_HEADERS_SMALL },
	{ "true", TFS_HEADERS_ALL },
	{ NULL, 0 },
};

static const struct opt_name when_full_names[] = {
	{ "write", TFS_SSD_FULL_WRITE },
	{ "drop", TFS_SSD_FULL_DROP },
	{ NULL, 0 },
};

static const struct opt_name wb_names[] = {
	{ "async", TFS_WB_ASYNC },
	{ "sync", TFS_WB_SYNC },
	{ "off", TFS_WB_OFF },
	{ NULL, 0 },
};

#define KEY(s, k, t) .section = (s), .key = (k), .type = (t)
#define FIELD(f) \
	.off = offsetof(struct tfs_config, f), .size = sizeof(((struct tfs_config *)NULL)->f)
#define RANGE(lo, hi) .min = (lo), .max = (hi)

const struct opt tfs_conf_options[] = {
	{ KEY("backend", "endpoint", OPT_URL), FIELD(backend.endpoint), .def = "" },
	/* unset: AWS_REGION, AWS_DEFAULT_REGION (tfs_config_load()), then
	 * us-east-1 (tfs_s3_create()) */
	{ KEY("backend", "region", OPT_STR), FIELD(backend.region), .flags = OPTF_TOKEN,
	  .def = "" },
	{ KEY("backend", "path_style", OPT_ENUM), FIELD(backend.path_style),
	  .names = path_style_names, .def = "auto" },
	{ KEY("backend", "credentials_file", OPT_PATH), FIELD(backend.credentials_file),
	  .def = "" },
	{ KEY("backend", "profile", OPT_STR), FIELD(backend.profile), .def = "" },
	{ KEY("backend", "ca_file", OPT_PATH), FIELD(backend.ca_file), .def = "" },
	{ KEY("backend", "connect_timeout", OPT_DURATION), FIELD(backend.connect_timeout_ms),
	  RANGE(100, 5 * MIN), .scale = 1, .def = "10s" },
	{ KEY("backend", "low_speed_time", OPT_DURATION), FIELD(backend.low_speed_time_s),
	  RANGE(SEC, HOUR), .scale = SEC, .def = "30s" },
	{ KEY("backend", "low_speed_limit", OPT_SIZE), FIELD(backend.low_speed_limit),
	  RANGE(1, GIB), .def = "1K" },
	{ KEY("backend", "retries", OPT_UINT), FIELD(backend.retries), RANGE(0, 100), .def = "5" },
	{ KEY("backend", "retry_base", OPT_DURATION), FIELD(backend.retry_base_ms), RANGE(1, MIN),
	  .scale = 1, .def = "100ms" },
	{ KEY("backend", "retry_max", OPT_DURATION), FIELD(backend.retry_max_ms), RANGE(1, HOUR),
	  .scale = 1, .def = "20s" },
	{ KEY("backend", "multipart_threshold", OPT_SIZE), FIELD(backend.multipart_threshold),
	  RANGE(5 * MIB, 5 * GIB), .def = "64M" },
	{ KEY("backend", "part_size", OPT_SIZE), FIELD(backend.part_size), RANGE(5 * MIB, 5 * GIB),
	  .def = "16M" },
	{ KEY("backend", "upload_parallel", OPT_UINT), FIELD(backend.upload_parallel), RANGE(1, 64),
	  .def = "4" },
	{ KEY("backend", "copy_part_size", OPT_SIZE), FIELD(backend.copy_part_size),
	  RANGE(5 * MIB, 5 * GIB), .def = "5G" },
	{ KEY("backend", "max_connections", OPT_UINT), FIELD(backend.max_connections),
	  RANGE(1, 1024), .def = "64" },
	{ KEY("backend", "bucket", OPT_SOURCE), FIELD(backend.bucket),
	  .hint = "the bucket comes from the mount source (s3://BUCKET[/PREFIX])" },
	{ KEY("backend", "prefix", OPT_SOURCE), FIELD(backend.prefix),
	  .hint = "the prefix comes from the mount source (s3://BUCKET[/PREFIX])" },

	/* [near]: a copy in the cluster (backends/near.h); off while bucket
	 * is empty.  The store's own settings, then the copies'. */
	{ KEY("near", "bucket", OPT_STR), FIELD(near_store.bucket), .flags = OPTF_TOKEN,
	  .def = "" },
	{ KEY("near", "prefix", OPT_STR), FIELD(near_store.prefix), .def = "" },
	{ KEY("near", "endpoint", OPT_URL), FIELD(near_store.endpoint), .def = "" },
	{ KEY("near", "region", OPT_STR), FIELD(near_store.region),
	  .flags = OPTF_REQUIRED | OPTF_TOKEN, .def = "us-east-1" },
	{ KEY("near", "path_style", OPT_ENUM), FIELD(near_store.path_style),
	  .names = path_style_names, .def = "auto" },
	{ KEY("near", "credentials_file", OPT_PATH), FIELD(near_store.credentials_file),
	  .def = "" },
	{ KEY("near", "profile", OPT_STR), FIELD(near_store.profile), .def = "" },
	{ KEY("near", "ca_file", OPT_PATH), FIELD(near_store.ca_file), .def = "" },
	{ KEY("near", "connect_timeout", OPT_DURATION), FIELD(near_store.connect_timeout_ms),
	  RANGE(100, 5 * MIN), .scale = 1, .def = "1s" },
	{ KEY("near", "low_speed_time", OPT_DURATION), FIELD(near_store.low_speed_time_s),
	  RANGE(SEC, HOUR), .scale = SEC, .def = "5s" },
	{ KEY("near", "retries", OPT_UINT), FIELD(near_store.retries), RANGE(0, 100), .def = "1" },
	{ KEY("near", "copiers", OPT_UINT), FIELD(near.copiers), RANGE(1, 64), .def = "16" },
	{ KEY("near", "copy_budget", OPT_SIZE), FIELD(near.copy_budget), RANGE(MIB, 64 * GIB),
	  .def = "256M" },
	{ KEY("near", "breaker_errors", OPT_UINT), FIELD(near.breaker_errors), RANGE(1, 1000),
	  .def = "3" },
	{ KEY("near", "retry_after", OPT_DURATION), FIELD(near.breaker_ms), RANGE(100, HOUR),
	  .scale = 1, .def = "30s" },
	{ KEY("near", "write_through", OPT_BOOL), FIELD(near.write_through), .def = "false" },
	{ KEY("near", "spool_size", OPT_SIZE), FIELD(near.spool_size), RANGE(0, UINT64_MAX),
	  .def = "4G" },
	{ KEY("near", "key", OPT_STR), FIELD(near.key), .flags = OPTF_SECRET, .def = "" },

	{ KEY("ram", "size", OPT_SIZE), FIELD(ram.size), RANGE(16 * MIB, UINT64_MAX),
	  .flags = OPTF_RELOAD, .def = "1G" },

	{ KEY("ssd", "dir", OPT_PATH), FIELD(ssd.dir), .flags = OPTF_REQUIRED,
	  .def = "/var/cache/tierfs" },
	{ KEY("ssd", "size", OPT_SIZE_PCT), FIELD(ssd.size),
	  .pct_off = offsetof(struct tfs_config, ssd.size_pct), RANGE(16 * MIB, UINT64_MAX),
	  .flags = OPTF_RELOAD, .def = "80%" },
	{ KEY("ssd", "pin_max", OPT_SIZE_PCT), FIELD(ssd.pin_max),
	  .pct_off = offsetof(struct tfs_config, ssd.pin_max_pct), RANGE(0, UINT64_MAX),
	  .flags = OPTF_RELOAD, .def = "50%" },
	{ KEY("ssd", "high_watermark", OPT_PERCENT), FIELD(ssd.high_watermark), RANGE(1, 100),
	  .flags = OPTF_RELOAD, .def = "90" },
	{ KEY("ssd", "low_watermark", OPT_PERCENT), FIELD(ssd.low_watermark), RANGE(1, 100),
	  .flags = OPTF_RELOAD, .def = "80" },
	{ KEY("ssd", "direct_io", OPT_BOOL), FIELD(ssd.direct_io), .def = "true" },
	/* 4M: bench/fill_queue.sh, docs/benchmarks.md (issue 32) */
	{ KEY("ssd", "fill_queue", OPT_SIZE), FIELD(ssd.fill_queue), RANGE(0, 4 * GIB),
	  .def = "4M" },
	{ KEY("ssd", "fill_when_full", OPT_ENUM), FIELD(ssd.fill_when_full),
	  .names = when_full_names, .def = "write" },

	{ KEY("cache", "block_size", OPT_SIZE), FIELD(cache.block_size), .flags = OPTF_POW2,
	  RANGE(64 * KIB, 64 * MIB), .def = "1M" },
	{ KEY("cache", "policy", OPT_ENUM), FIELD(cache.policy), .names = policy_names,
	  .def = "epoch" },
	{ KEY("cache", "metadata_ttl", OPT_DURATION), FIELD(cache.metadata_ttl_ms),
	  .flags = OPTF_FOREVER | OPTF_RELOAD, RANGE(0, TFS_DURATION_FOREVER), .scale = 1,
	  .def = "5m" },
	{ KEY("cache", "fetch_headers", OPT_ENUM), FIELD(cache.fetch_headers),
	  .names = headers_names, .def = "small" },
	{ KEY("cache", "list_ahead", OPT_BOOL), FIELD(cache.list_ahead), .def = "true" },

	{ KEY("writeback", "mode", OPT_ENUM), FIELD(writeback.mode), .names = wb_names,
	  .def = "async" },
	{ KEY("writeback", "delay", OPT_DURATION), FIELD(writeback.delay_ms), RANGE(0, HOUR),
	  .scale = 1, .def = "0s" },
	{ KEY("writeback", "rewrite_delay", OPT_DURATION), FIELD(writeback.rewrite_delay_ms),
	  RANGE(0, HOUR), .scale = 1, .def = "5s" },
	{ KEY("writeback", "uploaders", OPT_UINT), FIELD(writeback.uploaders),
	  RANGE(1, TFS_WB_MAX_UPLOADERS), .flags = OPTF_RELOAD, .def = "4" },
	{ KEY("writeback", "max_retries", OPT_UINT), FIELD(writeback.max_retries),
	  RANGE(0, 1000000), .def = "0" },
	{ KEY("writeback", "retry_base", OPT_DURATION), FIELD(writeback.retry_base_ms),
	  RANGE(1, HOUR), .scale = 1, .def = "1s" },
	{ KEY("writeback", "retry_max", OPT_DURATION), FIELD(writeback.retry_max_ms),
	  RANGE(1, HOUR), .scale = 1, .def = "5m" },
	{ KEY("writeback", "stream", OPT_BOOL), FIELD(writeback.stream), .def = "false" },
	{ KEY("writeback", "staging_size", OPT_SIZE_PCT), FIELD(writeback.staging_size),
	  .pct_off = offsetof(struct tfs_config, writeback.staging_size_pct),
	  RANGE(MIB, UINT64_MAX), .def = "20%" },
	{ KEY("writeback", "drain_timeout", OPT_DURATION), FIELD(writeback.drain_timeout_ms),
	  RANGE(0, 24 * HOUR), .scale = 1, .def = "1m" },

	{ KEY("prefetch", "workers", OPT_UINT), FIELD(prefetch.workers),
	  RANGE(0, TFS_PREFETCH_MAX_WORKERS), .flags = OPTF_RELOAD, .def = "32" },
	{ KEY("prefetch", "readahead", OPT_SIZE), FIELD(prefetch.readahead), RANGE(0, GIB),
	  .def = "16M" },
	{ KEY("prefetch", "stream_gets", OPT_UINT), FIELD(prefetch.stream_gets),
	  RANGE(1, TFS_PREFETCH_MAX_WORKERS), .def = "4" },
	{ KEY("prefetch", "order_max", OPT_SIZE), FIELD(prefetch.order_max),
	  RANGE(4 * KIB, 4 * GIB), .def = "512M" },
	{ KEY("prefetch", "order_max_uid", OPT_SIZE), FIELD(prefetch.order_max_uid),
	  RANGE(0, 4 * GIB), .def = "0" },
	{ KEY("prefetch", "stall", OPT_DURATION), FIELD(prefetch.stall_ms), RANGE(0, HOUR),
	  .scale = 1, .def = "10s" },

	{ KEY("log", "level", OPT_LOGLEVEL), FIELD(log.level), .flags = OPTF_RELOAD,
	  .def = "info" },
	{ KEY("log", "file", OPT_PATH), FIELD(log.file), .def = "" },

	{ KEY("metrics", "listen", OPT_LISTEN), FIELD(metrics.listen), .def = "" },

	{ KEY("mount", "trusted", OPT_BOOL), FIELD(mount.trusted), .def = "false" },
	{ KEY("mount", "max_inodes", OPT_UINT), FIELD(mount.max_inodes), RANGE(0, UINT64_MAX),
	  .def = "262144" },
};

#define NOPTS (sizeof(tfs_conf_options) / sizeof(tfs_conf_options[0]))

const size_t tfs_conf_nopts = NOPTS;

_Static_assert(NOPTS <= TFS_CONFIG_MAX_OPTIONS, "raise TFS_CONFIG_MAX_OPTIONS");
_Static_assert(sizeof(enum tfs_policy) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum tfs_wb_mode) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum tfs_log_level) == sizeof(int), "enums are stored as int");

/* ---- accessors ---- */

void *tfs_conf_field(struct tfs_config *cfg, size_t off)
{
	return (char *)cfg + off;
}

const void *tfs_conf_cfield(const struct tfs_config *cfg, size_t off)
{
	return (const char *)cfg + off;
}

uint64_t tfs_conf_load_uint(const struct tfs_config *cfg, const struct opt *o)
{
	const void *p = tfs_conf_cfield(cfg, o->off);
	uint64_t v;

	if (o->size == sizeof(unsigned)) {
		unsigned u;

		memcpy(&u, p, sizeof(u));
		v = u;
	} else {
		memcpy(&v, p, sizeof(v));
	}
	if (o->type == OPT_DURATION && o->scale != 1)
		v *= o->scale;
	return v;
}

/* Store v (already checked against the range, so it fits the field). */
void tfs_conf_store_uint(struct tfs_config *cfg, const struct opt *o, uint64_t v)
{
	void *p = tfs_conf_field(cfg, o->off);

	if (o->type == OPT_DURATION && o->scale != 1)
		v /= o->scale;
	if (o->size == sizeof(unsigned)) {
		unsigned u = (unsigned)v;

		memcpy(p, &u, sizeof(u));
	} else {
		memcpy(p, &v, sizeof(v));
	}
}

double tfs_conf_load_double(const struct tfs_config *cfg, size_t off)
{
	double d;

	memcpy(&d, tfs_conf_cfield(cfg, off), sizeof(d));
	return d;
}

int tfs_conf_load_int(const struct tfs_config *cfg, const struct opt *o)
{
	int v;

	memcpy(&v, tfs_conf_cfield(cfg, o->off), sizeof(v));
	return v;
}

const char *tfs_conf_load_str(const struct tfs_config *cfg, const struct opt *o)
{
	const char *s;

	memcpy(&s, tfs_conf_cfield(cfg, o->off), sizeof(s));
	return s;
}

bool tfs_conf_is_string(const struct opt *o)
{
	return o->type == OPT_STR || o->type == OPT_PATH || o->type == OPT_URL ||
	       o->type == OPT_LISTEN;
}

size_t tfs_conf_opt_index(const struct opt *o)
{
	return (size_t)(o - tfs_conf_options);
}

const struct opt *tfs_conf_opt_by_field(size_t off)
{
	for (size_t i = 0; i < NOPTS; i++) {
		if (tfs_conf_options[i].type != OPT_SOURCE && tfs_conf_options[i].off == off)
			return &tfs_conf_options[i];
	}
	return NULL;
}

bool tfs_conf_section_known(const char *section)
{
	for (size_t i = 0; i < NOPTS; i++) {
		if (strcasecmp(tfs_conf_options[i].section, section) == 0)
			return true;
	}
	return false;
}

const struct opt *tfs_conf_find_opt(const char *section, const char *key)
{
	for (size_t i = 0; i < NOPTS; i++) {
		if (strcasecmp(tfs_conf_options[i].section, section) == 0 &&
		    strcasecmp(tfs_conf_options[i].key, key) == 0)
			return &tfs_conf_options[i];
	}
	return NULL;
}

/* "backend, ram, ..." (sections) or the keys of `section`, into buf. */
const char *tfs_conf_list_names(char *buf, size_t cap, const char *section)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt *op = &tfs_conf_options[i];
		const char *name;

		if (section) {
			if (strcasecmp(op->section, section) != 0 || op->type == OPT_SOURCE)
				continue;
			name = op->key;
		} else {
			if (i > 0 && strcmp(tfs_conf_options[i - 1].section, op->section) == 0)
				continue;
			name = op->section;
		}
		int n = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", name);
		if (n < 0 || (size_t)n >= cap - o)
			break;
		o += (size_t)n;
	}
	return buf;
}

const char *tfs_conf_enum_name(const struct opt_name *names, int v)
{
	for (const struct opt_name *n = names; n->name; n++) {
		if (n->value == v)
			return n->name;
	}
	return NULL;
}
