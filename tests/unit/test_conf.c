/* test_conf.c - unit tests for src/conf.c: defaults, the INI file,
 * -o overrides, exact error messages, validation, dump, and the example
 * file and man page staying in step with the option table. */
#include "config.h"

#include "conf.h"
#include "escape.h"
#include "ini_reader.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "units.h"

#ifndef TFS_SRCDIR
#define TFS_SRCDIR "."
#endif

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

/* Per-test state (each Criterion test runs in its own process). */
static char tmpdir[200];
static char path[256];
static struct tfs_config cfg;
static struct tfs_dbuf err;

static void setup(void)
{
	const char *base = getenv("TMPDIR");

	if (base == NULL || strlen(base) > 150)
		base = "/tmp";
	snprintf(tmpdir, sizeof(tmpdir), "%s/tierfs-test-config.XXXXXX", base);
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/tierfs.conf", tmpdir);
	/* the environment's defaults (tfs_config_load()) only where a test
	 * sets them */
	unsetenv("AWS_REGION");
	unsetenv("AWS_DEFAULT_REGION");
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_ENDPOINT_URL");
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
}

static void teardown(void)
{
	tfs_config_clear(&cfg);
	tfs_dbuf_free(&err);
	unlink(path);
	rmdir(tmpdir);
}

TestSuite(config, .init = setup, .fini = teardown);

/* Write `text` to the test's config file. */
static void write_conf(const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
	cr_assert_eq(fclose(f), 0);
}

/* Load `text` and expect success. */
static void load_ok(const char *text)
{
	write_conf(text);
	int rc = tfs_config_load(&cfg, path, true, &err);
	cr_assert_eq(rc, 0, "load: %d: %s", rc, tfs_dbuf_str(&err));
	cr_assert_str_empty(tfs_dbuf_str(&err));
}

/* Load `text` and expect EINVAL with the message "<path>:" + fmt. */
__attribute__((format(printf, 2, 3))) static void load_fails(const char *text, const char *fmt, ...)
{
	char want[sizeof(path) + 1536], tail[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tail, sizeof(tail), fmt, ap);
	va_end(ap);
	snprintf(want, sizeof(want), "%s:%s", path, tail);

	write_conf(text);
	int rc = tfs_config_load(&cfg, path, true, &err);
	cr_assert_eq(rc, EINVAL, "load returned %d for:\n%s", rc, text);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

static void set_ok(const char *assignment)
{
	int rc = tfs_config_set(&cfg, assignment, NULL, &err);
	cr_assert_eq(rc, 0, "-o %s: %d: %s", assignment, rc, tfs_dbuf_str(&err));
}

static void set_fails(const char *assignment, const char *want)
{
	int rc = tfs_config_set(&cfg, assignment, NULL, &err);
	cr_assert_eq(rc, EINVAL, "-o %s returned %d", assignment, rc);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

__attribute__((format(printf, 1, 2))) static void validate_fails(const char *fmt, ...)
{
	char want[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	cr_assert_eq(tfs_config_validate(&cfg, &err), EINVAL);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

/* The dump of *c without origins, as a malloc'd string. */
static char *dump(const struct tfs_config *c)
{
	struct tfs_dbuf out;

	tfs_dbuf_init(&out, 1 << 20);
	cr_assert_eq(tfs_config_dump(c, false, &out), 0);
	return tfs_dbuf_steal(&out);
}

static char *read_text(const char *file)
{
	struct tfs_dbuf d;
	char buf[4096];
	size_t n;
	FILE *f = fopen(file, "r");

	cr_assert_not_null(f, "%s: %s", file, strerror(errno));
	tfs_dbuf_init(&d, 1 << 22);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		cr_assert_eq(tfs_dbuf_add(&d, buf, n), 0);
	fclose(f);
	return tfs_dbuf_steal(&d);
}

/* ---- defaults ---- */

Test(config, defaults)
{
	cr_assert_null(cfg.path);
	cr_assert_null(cfg.backend.endpoint);
	cr_assert_null(cfg.backend.region); /* us-east-1: tfs_s3_create() */
	cr_assert_eq(cfg.backend.path_style, TFS_S3_PATH_AUTO);
	cr_assert_null(cfg.backend.bucket);
	cr_assert_null(cfg.backend.prefix);
	cr_assert_null(cfg.backend.credentials_file);
	cr_assert_null(cfg.backend.profile);
	cr_assert_null(cfg.backend.ca_file);
	cr_assert_eq(cfg.backend.connect_timeout_ms, 10000);
	cr_assert_eq(cfg.backend.low_speed_time_s, 30);
	cr_assert_eq(cfg.backend.low_speed_limit, 1024);
	cr_assert_eq(cfg.backend.retries, 5);
	cr_assert_eq(cfg.backend.retry_base_ms, 100);
	cr_assert_eq(cfg.backend.retry_max_ms, 20000);
	cr_assert_eq(cfg.backend.multipart_threshold, 64 * MIB);
	cr_assert_eq(cfg.backend.part_size, 16 * MIB);
	cr_assert_eq(cfg.backend.upload_parallel, 4);
	cr_assert_eq(cfg.backend.copy_part_size, 5 * GIB);
	cr_assert_eq(cfg.backend.max_connections, 64);
	cr_assert_eq(cfg.ram.size, GIB);
	cr_assert_str_eq(cfg.ssd.dir, "/var/cache/tierfs");
	cr_assert_eq(cfg.ssd.size, 0);
	cr_assert_float_eq(cfg.ssd.size_pct, 80.0, 1e-12);
	cr_assert_float_eq(cfg.ssd.high_watermark, 90.0, 1e-12);
	cr_assert_float_eq(cfg.ssd.low_watermark, 80.0, 1e-12);
	cr_assert_eq(cfg.cache.block_size, MIB);
	cr_assert_eq(cfg.cache.policy, TFS_POLICY_EPOCH);
	cr_assert_eq(cfg.cache.metadata_ttl_ms, 5 * 60 * 1000);
	cr_assert_eq(cfg.writeback.mode, TFS_WB_ASYNC);
	cr_assert_eq(cfg.writeback.delay_ms, 0);
	cr_assert_eq(cfg.writeback.uploaders, 4);
	cr_assert_eq(cfg.prefetch.workers, 32);
	cr_assert_eq(cfg.prefetch.readahead, 16 * MIB);
	cr_assert_eq(cfg.prefetch.stream_gets, 4);
	cr_assert_eq(cfg.log.level, TFS_LOG_INFO);
	cr_assert_null(cfg.log.file);
	cr_assert_not(cfg.mount.trusted, "a mount is not trusted unless the admin says so");

	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_str_empty(tfs_dbuf_str(&err));
}

Test(config, default_path)
{
	cr_assert_str_eq(tfs_config_default_path(), SYSCONFDIR "/tierfs/tierfs.conf");
}

/* ---- loading ---- */

Test(config, load_every_type)
{
	load_ok("[backend]\n"
		"endpoint = http://127.0.0.1:9000\n"
		"region = eu-west-3\n"
		"path_style = off\n"
		"credentials_file = /etc/tierfs/credentials\n"
		"profile = training team\n"
		"ca_file = /etc/ssl/minio.pem\n"
		"connect_timeout = 2.5s\n"
		"low_speed_time = 2m\n"
		"low_speed_limit = 64 KiB\n"
		"retries = 0\n"
		"retry_base = 1ms\n"
		"retry_max = 1h\n"
		"multipart_threshold = 5G\n"
		"part_size = 5M\n"
		"upload_parallel = 64\n"
		"copy_part_size = 512M\n"
		"max_connections = 1024\n"
		"[ram]\n"
		"size = 1.5G\n"
		"[ssd]\n"
		"dir = /mnt/nvme/tierfs\n"
		"size = 200G\n"
		"high_watermark = 95%\n"
		"low_watermark = 85.5\n"
		"[cache]\n"
		"block_size = 4M\n"
		"policy = lru\n"
		"metadata_ttl = forever\n"
		"[writeback]\n"
		"mode = sync\n"
		"delay = 0\n"
		"uploaders = 256\n"
		"[prefetch]\n"
		"workers = 0\n"
		"readahead = 0\n"
		"[log]\n"
		"level = debug\n"
		"file = /var/log/tierfs.log\n");

	cr_assert_str_eq(cfg.path, path);
	cr_assert_str_eq(cfg.backend.endpoint, "http://127.0.0.1:9000");
	cr_assert_str_eq(cfg.backend.region, "eu-west-3");
	cr_assert_eq(cfg.backend.path_style, TFS_S3_PATH_OFF);
	cr_assert_str_eq(cfg.backend.credentials_file, "/etc/tierfs/credentials");
	cr_assert_str_eq(cfg.backend.profile, "training team");
	cr_assert_str_eq(cfg.backend.ca_file, "/etc/ssl/minio.pem");
	cr_assert_eq(cfg.backend.connect_timeout_ms, 2500);
	cr_assert_eq(cfg.backend.low_speed_time_s, 120);
	cr_assert_eq(cfg.backend.low_speed_limit, 65536);
	cr_assert_eq(cfg.backend.retries, 0);
	cr_assert_eq(cfg.backend.retry_base_ms, 1);
	cr_assert_eq(cfg.backend.retry_max_ms, 3600000);
	cr_assert_eq(cfg.backend.multipart_threshold, 5 * GIB);
	cr_assert_eq(cfg.backend.part_size, 5 * MIB);
	cr_assert_eq(cfg.backend.upload_parallel, 64);
	cr_assert_eq(cfg.backend.copy_part_size, 512 * MIB);
	cr_assert_eq(cfg.backend.max_connections, 1024);
	cr_assert_eq(cfg.ram.size, GIB + GIB / 2);
	cr_assert_str_eq(cfg.ssd.dir, "/mnt/nvme/tierfs");
	cr_assert_eq(cfg.ssd.size, 200 * GIB);
	cr_assert_float_eq(cfg.ssd.size_pct, 0.0, 1e-12);
	cr_assert_float_eq(cfg.ssd.high_watermark, 95.0, 1e-12);
	cr_assert_float_eq(cfg.ssd.low_watermark, 85.5, 1e-12);
	cr_assert_eq(cfg.cache.block_size, 4 * MIB);
	cr_assert_eq(cfg.cache.policy, TFS_POLICY_LRU);
	cr_assert_eq(cfg.cache.metadata_ttl_ms, TFS_DURATION_FOREVER);
	cr_assert_eq(cfg.writeback.mode, TFS_WB_SYNC);
	cr_assert_eq(cfg.writeback.delay_ms, 0);
	cr_assert_eq(cfg.writeback.uploaders, 256);
	cr_assert_eq(cfg.prefetch.workers, 0);
	cr_assert_eq(cfg.prefetch.readahead, 0);
	cr_assert_eq(cfg.log.level, TFS_LOG_DEBUG);
	cr_assert_str_eq(cfg.log.file, "/var/log/tierfs.log");
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
}

Test(config, syntax_details)
{
	load_ok("; a comment\n"
		"# another comment\n"
		"\n"
		"[ ssd ]\n"
		"\tdir = /a ; inline comment\n"
		"    size = 50%\n" /* indented: not a continuation of dir */
		"[RAM]\r\n"        /* CRLF, case-insensitive names */
		"Size = 2G\r\n"
		"[cache]\n"
		"policy: LRU\n" /* "key: value" and enum case */
		"[ssd]\n"       /* a repeated section is merged */
		"high_watermark = 70\n"
		"low_watermark = 60\n"
		"low_watermark = 50\n" /* a repeated key: the last wins */
		"[backend]\n"
		"endpoint = https://minio.example.com/\n"
		"profile =\n"
		"[log]\n"
		"file =\n");

	cr_assert_str_eq(cfg.ssd.dir, "/a");
	cr_assert_float_eq(cfg.ssd.size_pct, 50.0, 1e-12);
	cr_assert_eq(cfg.ram.size, 2 * GIB);
	cr_assert_eq(cfg.cache.policy, TFS_POLICY_LRU);
	cr_assert_float_eq(cfg.ssd.high_watermark, 70.0, 1e-12);
	cr_assert_float_eq(cfg.ssd.low_watermark, 50.0, 1e-12);
	/* the trailing '/' is dropped */
	cr_assert_str_eq(cfg.backend.endpoint, "https://minio.example.com");
	cr_assert_null(cfg.backend.profile);
	cr_assert_null(cfg.log.file);
}

Test(config, utf8_bom)
{
	load_ok("\xef\xbb\xbf[ram]\nsize = 2G\n");
	cr_assert_eq(cfg.ram.size, 2 * GIB);
}

Test(config, empty_file)
{
	load_ok("");
	cr_assert_str_eq(cfg.path, path);
	cr_assert_eq(cfg.ram.size, GIB);
}

Test(config, no_newline_at_end)
{
	load_ok("[ram]\nsize = 2G");
	cr_assert_eq(cfg.ram.size, 2 * GIB);
}

Test(config, urls)
{
	load_ok("[backend]\nendpoint = http://[::1]:9000\n");
	cr_assert_str_eq(cfg.backend.endpoint, "http://[::1]:9000");
	load_ok("[backend]\nendpoint = HTTPS://s3.eu-west-3.amazonaws.com\n");
	cr_assert_str_eq(cfg.backend.endpoint, "HTTPS://s3.eu-west-3.amazonaws.com");
	load_ok("[backend]\nendpoint =\n");
	cr_assert_null(cfg.backend.endpoint);

	const char *bad[] = {
		"ftp://host",         "host:9000",          "http://",
		"http://host:0",      "http://host:65536",  "http://host:port",
		"http://host/bucket", "http://host?x=1",    "http://us er",
		"http://[::1",        "http://host:123456",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];

		snprintf(text, sizeof(text), "[backend]\nendpoint = %s\n", bad[i]);
		load_fails(text,
			   "2: [backend] endpoint: invalid URL '%s' (allowed: http://HOST[:PORT] "
			   "or "
			   "https://HOST[:PORT], or empty)",
			   bad[i]);
	}
}

/* ---- file errors, with exact messages ---- */

Test(config, unknown_section)
{
	load_fails("[ram]\nsize = 2G\n[sdd]\nsize = 10G\n", "4: [sdd] size: unknown section [sdd] "
							    "(allowed: backend, near, ram, ssd, "
							    "cache, "
							    "writeback, prefetch, log, metrics, "
							    "mount)");
}

Test(config, unknown_key)
{
	load_fails("[ssd]\n\nsise = 10G\n", "3: [ssd] sise: unknown key 'sise' in section [ssd] "
					    "(allowed: dir, size, pin_max, "
					    "high_watermark, low_watermark, direct_io, "
					    "fill_queue, fill_when_full)");
}

Test(config, unknown_key_backend_list)
{
	load_fails("[backend]\nurl = http://x\n", "2: [backend] url: unknown key 'url' in section "
						  "[backend] (allowed: endpoint, "
						  "region, path_style, credentials_file, profile, "
						  "ca_file, connect_timeout, "
						  "low_speed_time, low_speed_limit, retries, "
						  "retry_base, retry_max, "
						  "multipart_threshold, part_size, "
						  "upload_parallel, copy_part_size, "
						  "max_connections)");
}

Test(config, bucket_is_not_a_key)
{
	load_fails("[backend]\nbucket = data\n", "2: [backend] bucket: not a configuration key: "
						 "the bucket comes from the mount "
						 "source (s3://BUCKET[/PREFIX])");
}

Test(config, key_outside_section)
{
	load_fails("; comment\nsize = 1G\n[ram]\n", "2: size: key outside of any section (a "
						    "[section] line must come first)");
}

Test(config, malformed_values)
{
	load_fails("[ssd]\nsize = abc\n", "2: [ssd] size: invalid size 'abc' (allowed: bytes with "
					  "K/M/G/T suffix or N%%)");
	load_fails("[ram]\nsize = 1G # one gig\n", "2: [ram] size: invalid size '1G # one gig' "
						   "(allowed: bytes with K/M/G/T suffix)");
	load_fails("[ram]\nsize =\n", "2: [ram] size: invalid size '' (allowed: bytes with K/M/G/T "
				      "suffix)");
	load_fails("[backend]\nconnect_timeout = 10 seconds\n", "2: [backend] connect_timeout: "
								"invalid duration '10 seconds' "
								"(allowed: a number "
								"with ms/s/m/h suffix)");
	load_fails("[backend]\nretry_max = forever\n", "2: [backend] retry_max: invalid duration "
						       "'forever' (allowed: a number with "
						       "ms/s/m/h suffix)");
	load_fails("[cache]\nmetadata_ttl = always\n", "2: [cache] metadata_ttl: invalid duration "
						       "'always' (allowed: a number with "
						       "ms/s/m/h suffix or forever)");
	load_fails("[ssd]\ndirect_io = maybe\n", "2: [ssd] direct_io: invalid boolean "
						 "'maybe' (allowed: true/false, yes/no, "
						 "on/off, 1/0)");
	load_fails("[backend]\npath_style = maybe\n", "2: [backend] path_style: invalid value "
						      "'maybe' (allowed: auto, true, false, yes, "
						      "no, on, off, 1, 0)");
	load_fails("[backend]\nretries = 3.5\n", "2: [backend] retries: invalid integer '3.5' "
						 "(allowed: 0 to 100)");
	load_fails("[backend]\nretries = -1\n", "2: [backend] retries: invalid integer '-1' "
						"(allowed: 0 to 100)");
	load_fails("[ssd]\nhigh_watermark = high\n", "2: [ssd] high_watermark: invalid percentage "
						     "'high' (allowed: 1 to 100, "
						     "optionally followed by %%)");
	load_fails("[cache]\npolicy = fifo\n", "2: [cache] policy: invalid value 'fifo' (allowed: "
					       "lru, epoch)");
	load_fails("[writeback]\nmode = later\n", "2: [writeback] mode: invalid value 'later' "
						  "(allowed: async, sync, off)");
	load_fails("[log]\nlevel = verbose\n", "2: [log] level: invalid log level 'verbose' "
					       "(allowed: error, warn, info, debug)");
	load_fails("[log]\nfile = tierfs.log\n", "2: [log] file: 'tierfs.log' is not an absolute "
						 "path (allowed: an absolute path, "
						 "or empty)");
	load_fails("[ssd]\ndir =\n", "2: [ssd] dir: a value is required (allowed: an absolute "
				     "path)");
	load_fails("[backend]\nregion = us east 1\n", "2: [backend] region: invalid value 'us east "
						      "1' (allowed: letters, digits, '-', "
						      "'_' and '.', or empty)");
}

/* ---- the environment's defaults ---- */

/* AWS_REGION before AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 before
 * AWS_ENDPOINT_URL, an empty variable skipped; `tierfs config` names the
 * variable. */
Test(config, environment_defaults)
{
	setenv("AWS_DEFAULT_REGION", "eu-north-1", 1);
	setenv("AWS_REGION", "ap-south-2", 1);
	setenv("AWS_ENDPOINT_URL_S3", "", 1);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
	load_ok("[ram]\nsize = 1G\n");
	cr_assert_str_eq(cfg.backend.region, "ap-south-2");
	cr_assert_str_eq(cfg.backend.endpoint, "http://127.0.0.1:9000");
	cr_assert_null(cfg.near_store.endpoint, "the environment is [backend]'s only");

	struct tfs_dbuf out;
	tfs_dbuf_init(&out, 1 << 20);
	cr_assert_eq(tfs_config_dump(&cfg, true, &out), 0);
	cr_assert_not_null(strstr(tfs_dbuf_str(&out), "region = ap-south-2  ; environment "
						      "AWS_REGION\n"),
			   "%s", tfs_dbuf_str(&out));
	cr_assert_not_null(strstr(tfs_dbuf_str(&out), "endpoint = http://127.0.0.1:9000  ; "
						      "environment AWS_ENDPOINT_URL\n"));
	tfs_dbuf_free(&out);

	unsetenv("AWS_REGION");
	tfs_config_clear(&cfg);
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	load_ok("[ram]\nsize = 1G\n");
	cr_assert_str_eq(cfg.backend.region, "eu-north-1");
}

/* The file's value and -o win over the environment; an empty value in
 * the file (as in etc/tierfs.conf.example) does not; without a file the
 * environment still applies. */
Test(config, environment_loses_to_file_and_cmdline)
{
	setenv("AWS_REGION", "ap-south-2", 1);
	setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000", 1);
	load_ok("[backend]\nregion = eu-west-3\nendpoint =\n");
	cr_assert_str_eq(cfg.backend.region, "eu-west-3");
	cr_assert_str_eq(cfg.backend.endpoint, "http://127.0.0.1:9000");
	cr_assert_eq(tfs_config_set(&cfg, "backend.endpoint=http://127.0.0.1:9001", NULL, &err), 0);
	cr_assert_str_eq(cfg.backend.endpoint, "http://127.0.0.1:9001");

	tfs_config_clear(&cfg);
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	cr_assert_eq(tfs_config_load(&cfg, "/nonexistent/tierfs.conf", false, &err), 0);
	cr_assert_str_eq(cfg.backend.region, "ap-south-2");
	cr_assert_str_eq(cfg.backend.endpoint, "http://127.0.0.1:9000");
}

/* A bad value in the environment names the variable and its value. */
Test(config, environment_bad_value)
{
	setenv("AWS_REGION", "us east 1", 1);
	write_conf("[ram]\nsize = 1G\n");
	cr_assert_eq(tfs_config_load(&cfg, path, true, &err), EINVAL);
	cr_assert_str_eq(tfs_dbuf_str(&err), "environment AWS_REGION='us east 1': [backend] "
					     "region: "
					     "invalid value 'us east 1' (allowed: letters, "
					     "digits, '-', '_' and '.', or empty)");
	unsetenv("AWS_REGION");
	setenv("AWS_ENDPOINT_URL", "ftp://h", 1);
	tfs_config_clear(&cfg);
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	cr_assert_eq(tfs_config_load(&cfg, path, true, &err), EINVAL);
	cr_assert_not_null(strstr(tfs_dbuf_str(&err), "environment AWS_ENDPOINT_URL='ftp://h': "
						      "[backend] endpoint: "),
			   "%s", tfs_dbuf_str(&err));
}

/* An empty region in the file means unset: the environment's (none
 * here), then us-east-1. */
Test(config, empty_region_is_unset)
{
	load_ok("[backend]\nregion =\n");
	cr_assert_null(cfg.backend.region);
}

Test(config, out_of_range)
{
	load_fails("[ram]\nsize = 8M\n", "2: [ram] size: '8M' is out of range (allowed: 16M or "
					 "more)");
	load_fails("[ssd]\nsize = 150%\n", "2: [ssd] size: '150%%' is out of range (allowed: 16M "
					   "or more, or N%% with "
					   "0 < N <= 100)");
	load_fails("[ssd]\nsize = 0%\n", "2: [ssd] size: '0%%' is out of range (allowed: 16M or "
					 "more, or N%% with "
					 "0 < N <= 100)");
	load_fails("[backend]\nretries = 101\n", "2: [backend] retries: '101' is out of range "
						 "(allowed: 0 to 100)");
	load_fails("[backend]\nretries = 99999999999999999999\n", "2: [backend] retries: "
								  "'99999999999999999999' is out "
								  "of range (allowed: 0 to 100)");
	load_fails("[backend]\nconnect_timeout = 50ms\n", "2: [backend] connect_timeout: '50ms' is "
							  "out of range (allowed: 100ms to 5m)");
	load_fails("[backend]\npart_size = 4M\n", "2: [backend] part_size: '4M' is out of range "
						  "(allowed: 5M to 5G)");
	load_fails("[backend]\nmultipart_threshold = 6G\n", "2: [backend] multipart_threshold: "
							    "'6G' is out of range (allowed: 5M to "
							    "5G)");
	load_fails("[backend]\ncopy_part_size = 6G\n", "2: [backend] copy_part_size: '6G' is out "
						       "of range (allowed: 5M to 5G)");
	load_fails("[backend]\nupload_parallel = 0\n", "2: [backend] upload_parallel: '0' is out "
						       "of range (allowed: 1 to 64)");
	load_fails("[backend]\nlow_speed_time = 1500ms\n", "2: [backend] low_speed_time: '1500ms' "
							   "is not a whole number of seconds "
							   "(allowed: 1s to 1h)");
	load_fails("[backend]\nlow_speed_time = 2h\n", "2: [backend] low_speed_time: '2h' is out "
						       "of range (allowed: 1s to 1h)");
	load_fails("[cache]\nblock_size = 3M\n", "2: [cache] block_size: '3M' is not a power of "
						 "two (allowed: 64K to 64M, a "
						 "power of two)");
	load_fails("[cache]\nblock_size = 128M\n", "2: [cache] block_size: '128M' is out of range "
						   "(allowed: 64K to 64M, a power "
						   "of two)");
	load_fails("[ssd]\nlow_watermark = 0\n", "2: [ssd] low_watermark: '0' is out of range "
						 "(allowed: 1 to 100, optionally "
						 "followed by %%)");
	load_fails("[ssd]\nhigh_watermark = 101%\n", "2: [ssd] high_watermark: '101%%' is out of "
						     "range (allowed: 1 to 100, optionally "
						     "followed by %%)");
	load_fails("[writeback]\ndelay = 61m\n", "2: [writeback] delay: '61m' is out of range "
						 "(allowed: 0s to 1h)");
	load_fails("[prefetch]\nreadahead = 2G\n", "2: [prefetch] readahead: '2G' is out of range "
						   "(allowed: 0 to 1G)");
	load_fails("[prefetch]\nworkers = 257\n", "2: [prefetch] workers: '257' is out of range "
						  "(allowed: 0 to 256)");
	load_fails("[prefetch]\nstream_gets = 0\n", "2: [prefetch] stream_gets: '0' is out of "
						    "range "
						    "(allowed: 1 to 256)");
}

Test(config, inih_syntax_errors)
{
	load_fails("[ram]\nsize = 2G\njust some words\n[ssd]\n", "3: syntax error: expected "
								 "'[section]' or 'key = value', "
								 "got 'just some words'");
	load_fails("[ram\nsize = 2G\n", "1: syntax error: expected '[section]' or 'key = value', "
					"got '[ram'");
	load_fails("[ram]\r\n  oops  \r\n", "2: syntax error: expected '[section]' or 'key = "
					    "value', got 'oops'");
}

Test(config, first_error_wins)
{
	/* a syntax error before a bad value */
	load_fails("[ram]\nnonsense\nsize = 1M\n", "2: syntax error: expected '[section]' or 'key "
						   "= value', got 'nonsense'");
	/* a bad value before a syntax error */
	load_fails("[ram]\nsize = 1M\nnonsense\n", "2: [ram] size: '1M' is out of range (allowed: "
						   "16M or more)");
}

Test(config, parsing_stops_at_first_error)
{
	write_conf("[ssd]\nsize = 20%\nhigh_watermark = 200\nlow_watermark = 10\n");
	cr_assert_eq(tfs_config_load(&cfg, path, true, &err), EINVAL);
	cr_assert_float_eq(cfg.ssd.size_pct, 20.0, 1e-12);
	cr_assert_float_eq(cfg.ssd.high_watermark, 90.0, 1e-12);
	cr_assert_float_eq(cfg.ssd.low_watermark, 80.0, 1e-12);
}

Test(config, line_numbers_after_long_lines)
{
	char text[1024];
	char value[191];

	memset(value, 'x', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	/* "profile = " + 190 characters = 200: one too many */
	snprintf(text, sizeof(text), "[backend]\nprofile = %.189s\n[ram]\nsize = 1M\n", value);
	load_fails(text, "4: [ram] size: '1M' is out of range (allowed: 16M or more)");
	cr_assert_eq(strlen(cfg.backend.profile), 189);

	snprintf(text, sizeof(text), "[backend]\nprofile = %s\n[ram]\nsize = 1M\n", value);
	load_fails(text, "2: line too long (more than 199 characters)");
}

/* A dump with origins puts "  ; line N" after the longest value: the
 * comment may reach past the limit, only what precedes it counts. */
Test(config, inline_comment_past_the_line_limit)
{
	char text[1024];
	char value[190];

	memset(value, 'x', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	snprintf(text, sizeof(text), "[backend]\nprofile = %s  ; line 2 of a long origin\n", value);
	cr_assert_gt(strlen(strchr(text, '\n') + 1), 210);
	load_ok(text);
	cr_assert_eq(strlen(cfg.backend.profile), 189);
}

Test(config, nul_byte)
{
	static const char text[] = "[ram]\nsize = 2G\0\n";
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fwrite(text, 1, sizeof(text) - 1, f);
	fclose(f);
	cr_assert_eq(tfs_config_load(&cfg, path, true, &err), EINVAL);
	char want[512];
	snprintf(want, sizeof(want), "%s:2: NUL byte in line", path);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

Test(config, control_characters_are_escaped)
{
	load_fails("[cache]\npolicy = lru\x1b[31m\n", "2: [cache] policy: invalid value "
						      "'lru\\x1b[31m' (allowed: lru, epoch)");
}

Test(config, missing_file)
{
	char want[512];
	char missing[sizeof(tmpdir) + 16];

	snprintf(missing, sizeof(missing), "%s/nope.conf", tmpdir);

	cr_assert_eq(tfs_config_load(&cfg, missing, false, &err), 0);
	cr_assert_str_empty(tfs_dbuf_str(&err));
	cr_assert_null(cfg.path);
	cr_assert_eq(cfg.ram.size, GIB);

	cr_assert_eq(tfs_config_load(&cfg, missing, true, &err), ENOENT);
	snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", missing);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
	cr_assert_null(cfg.path);
}

Test(config, unreadable_paths)
{
	char want[512];

	/* a directory fails even when the file is optional */
	cr_assert_eq(tfs_config_load(&cfg, tmpdir, false, &err), EISDIR);
	snprintf(want, sizeof(want), "%s: cannot read: Is a directory", tmpdir);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);

	char below_file[sizeof(path) + 8];

	write_conf("");
	snprintf(below_file, sizeof(below_file), "%s/x", path);
	cr_assert_eq(tfs_config_load(&cfg, below_file, false, &err), ENOTDIR);
	snprintf(want, sizeof(want), "%s: cannot open: Not a directory", below_file);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

Test(config, too_large)
{
	FILE *f = fopen(path, "w");
	char want[512];

	cr_assert_not_null(f);
	for (int i = 0; i < 120000; i++)
		fputs("; padding\n", f);
	fclose(f);
	cr_assert_eq(tfs_config_load(&cfg, path, true, &err), EFBIG);
	snprintf(want, sizeof(want), "%s: file too large (more than 1048576 bytes)", path);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

Test(config, null_err_buffer)
{
	write_conf("[ram]\nsize = x\n");
	cr_assert_eq(tfs_config_load(&cfg, path, true, NULL), EINVAL);
	cr_assert_eq(tfs_config_set(&cfg, "ram.size=x", NULL, NULL), EINVAL);
	cfg.ram.size = 1;
	cr_assert_eq(tfs_config_validate(&cfg, NULL), EINVAL);
}

/* ---- -o ---- */

Test(config, overrides)
{
	load_ok("[ssd]\nsize = 50%\n[ram]\nsize = 2G\n");
	set_ok("ssd.size=100G");
	set_ok(" ram . size = 4G ");
	set_ok("cache.policy=lru");
	set_ok("LOG.Level=Debug");
	set_ok("backend.endpoint=http://minio:9000");
	set_ok("backend.profile=a=b");
	set_ok("log.file=");

	cr_assert_eq(cfg.ssd.size, 100 * GIB);
	cr_assert_float_eq(cfg.ssd.size_pct, 0.0, 1e-12);
	cr_assert_eq(cfg.ram.size, 4 * GIB);
	cr_assert_eq(cfg.cache.policy, TFS_POLICY_LRU);
	cr_assert_eq(cfg.log.level, TFS_LOG_DEBUG);
	cr_assert_str_eq(cfg.backend.endpoint, "http://minio:9000");
	cr_assert_str_eq(cfg.backend.profile, "a=b");
	cr_assert_null(cfg.log.file);
	cr_assert_str_empty(tfs_dbuf_str(&err));
}

Test(config, override_errors)
{
	set_fails("ssd.size=abc", "command line: -o ssd.size=abc: invalid size 'abc' (allowed: "
				  "bytes with K/M/G/T "
				  "suffix or N%)");
	set_fails("ram.size=1M", "command line: -o ram.size=1M: '1M' is out of range (allowed: 16M "
				 "or more)");
	set_fails("sdd.size=1G", "command line: -o sdd.size=1G: unknown section [sdd] (allowed: "
				 "backend, near, ram, "
				 "ssd, cache, writeback, prefetch, log, metrics, mount)");
	set_fails("ram.sise=1G", "command line: -o ram.sise=1G: unknown key 'sise' in section "
				 "[ram] (allowed: "
				 "size)");
	set_fails("ram.size", "command line: -o ram.size: expected section.key=value");
	set_fails("size=1G", "command line: -o size=1G: expected section.key=value");
	set_fails(".size=1G", "command line: -o .size=1G: expected section.key=value");
	set_fails("ram.=1G", "command line: -o ram.=1G: expected section.key=value");
	set_fails("", "command line: -o : expected section.key=value");
	set_fails("backend.prefix=x/", "command line: -o backend.prefix=x/: not a configuration "
				       "key: the prefix comes "
				       "from the mount source (s3://BUCKET[/PREFIX])");
	set_fails("log.file=/tmp/a\tb", "command line: -o log.file=/tmp/a\\x09b: '/tmp/a\\x09b' "
					"contains a control "
					"character (allowed: an absolute path, or empty)");

	/* nothing changed */
	cr_assert_eq(cfg.ram.size, GIB);
	cr_assert_float_eq(cfg.ssd.size_pct, 80.0, 1e-12);
	cr_assert_null(cfg.log.file);
}

Test(config, override_origin_label)
{
	cr_assert_eq(tfs_config_set(&cfg, "ram.size=x", "TIERFS_OPTIONS:", &err), EINVAL);
	cr_assert_str_eq(tfs_dbuf_str(&err), "TIERFS_OPTIONS: ram.size=x: invalid size 'x' "
					     "(allowed: bytes with K/M/G/T "
					     "suffix)");
}

Test(config, long_values_are_cut_in_messages)
{
	char a[300], want[1024];

	snprintf(a, sizeof(a), "cache.policy=%0200d", 0);
	cr_assert_eq(tfs_config_set(&cfg, a, NULL, &err), EINVAL);
	snprintf(want, sizeof(want),
		 "command line: -o %.100s...: invalid value '%.100s...' "
		 "(allowed: lru, epoch)",
		 a, a + strlen("cache.policy="));
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

/* ---- validation ---- */

Test(config, validate_watermarks)
{
	load_ok("[ssd]\nhigh_watermark = 80\n\nlow_watermark = 85\n");
	validate_fails("%s:4: [ssd] low_watermark (85%%) must be below high_watermark (80%%)",
		       path);

	/* the message points at the setting made last */
	load_ok("[ssd]\nlow_watermark = 85\nhigh_watermark = 80\n");
	validate_fails("%s:3: [ssd] low_watermark (85%%) must be below high_watermark (80%%)",
		       path);

	set_ok("ssd.high_watermark=90");
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_str_empty(tfs_dbuf_str(&err));
	set_ok("ssd.low_watermark=90");
	validate_fails("command line: [ssd] low_watermark (90%%) must be below high_watermark "
		       "(90%%)");
}

Test(config, validate_near_rules)
{
	load_ok("[near]\nendpoint = http://127.0.0.1:9000\n");
	validate_fails("%s:2: [near] endpoint and prefix need [near] bucket", path);
	tfs_config_clear(&cfg);
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	load_ok("[near]\nbucket = cache\nprefix = tierfs\n");
	validate_fails("%s:3: [near] prefix 'tierfs' must end with '/' and not start with it",
		       path);
	set_ok("near.prefix=tierfs/");
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
	set_fails("near.bucket=a/b", "command line: -o near.bucket=a/b: invalid value 'a/b' "
				     "(allowed: letters, digits, '-', '_' and '.', or empty)");
}

Test(config, validate_backend_rules)
{
	load_ok("[backend]\nretry_base = 30s\n");
	validate_fails("%s:2: [backend] retry_base (30s) must not exceed retry_max (20s)", path);
	set_ok("backend.retry_max=1m");
	set_ok("backend.part_size=128M");
	validate_fails("command line: [backend] part_size (128M) must not exceed "
		       "multipart_threshold (64M)");
	set_ok("backend.multipart_threshold=128M");
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
}

Test(config, validate_tier_sizes)
{
	load_ok("[ram]\nsize = 128M\n[cache]\nblock_size = 64M\n");
	validate_fails("%s:4: [ram] size (128M) must be at least 4 times [cache] block_size (64M)",
		       path);
	set_ok("ram.size=256M");
	set_ok("ssd.size=100M");
	validate_fails("command line: [ssd] size (100M) must be at least 4 times [cache] "
		       "block_size (64M)");
	set_ok("ssd.size=1%");
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
}

Test(config, validate_fields_changed_directly)
{
	cfg.cache.block_size = 3 * MIB;
	validate_fails("[cache] block_size: 3M is out of range (allowed: 64K to 64M, a power of "
		       "two)");
	cfg.cache.block_size = MIB;

	load_ok("[ram]\n\nsize = 2G\n");
	cfg.ram.size = MIB;
	validate_fails("%s:3: [ram] size: 1M is out of range (allowed: 16M or more)", path);
	cfg.ram.size = GIB;

	cfg.cache.policy = (enum tfs_policy)7;
	validate_fails("[cache] policy: invalid value 7 (allowed: lru, epoch)");
	cfg.cache.policy = TFS_POLICY_LRU;

	free(cfg.ssd.dir);
	cfg.ssd.dir = NULL;
	validate_fails("[ssd] dir: a value is required (allowed: an absolute path)");
	cfg.ssd.dir = strdup("relative");
	validate_fails("[ssd] dir: invalid value 'relative' (allowed: an absolute path)");
	free(cfg.ssd.dir);
	cfg.ssd.dir = strdup("/ok");

	cfg.ssd.size_pct = 120;
	validate_fails("[ssd] size: 120%% is out of range (allowed: 16M or more, or N%% with "
		       "0 < N <= 100)");
	cfg.ssd.size_pct = 80;
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
}

/* ---- dump ---- */

Test(config, dump_round_trip)
{
	load_ok("[backend]\nendpoint = https://s3.local:8443\nprofile = ml\nretry_base = 1.5s\n"
		"low_speed_time = 90s\n[ssd]\nsize = 12.5%\nlow_watermark = 70.25\n"
		"[cache]\nmetadata_ttl = forever\nblock_size = 256K\n[ram]\nsize = 1.5G\n");
	set_ok("writeback.mode=off");
	set_ok("prefetch.readahead=1536K");

	char *first = dump(&cfg);
	write_conf(first);

	struct tfs_config again;
	cr_assert_eq(tfs_config_defaults(&again), 0);
	cr_assert_eq(tfs_config_load(&again, path, true, &err), 0, "%s\n%s", tfs_dbuf_str(&err),
		     first);
	char *second = dump(&again);

	cr_assert_str_eq(second, first);
	cr_assert(strstr(first, "\nretry_base = 1500ms\n"));
	cr_assert(strstr(first, "\nsize = 12.5%\n"));
	cr_assert(strstr(first, "\nmetadata_ttl = forever\n"));
	cr_assert(strstr(first, "\nreadahead = 1536K\n"));
	cr_assert(strstr(first, "\nmode = off\n"));
	cr_assert(strstr(first, "\nprofile = ml\n"));
	cr_assert(strstr(first, "\ncredentials_file =\n"));
	tfs_config_clear(&again);
	free(first);
	free(second);
}

Test(config, dump_with_origins)
{
	struct tfs_dbuf out;
	char head[512];

	load_ok("[ram]\nsize = 2G\n");
	set_ok("cache.policy=lru");
	cfg.backend.bucket = strdup("datasets");
	cfg.backend.prefix = strdup("imagenet/");

	tfs_dbuf_init(&out, 1 << 20);
	cr_assert_eq(tfs_config_dump(&cfg, true, &out), 0);
	snprintf(head, sizeof(head), "# tierfs configuration from %s\n[backend]\n", path);
	cr_assert_eq(strncmp(tfs_dbuf_str(&out), head, strlen(head)), 0, "%s", tfs_dbuf_str(&out));
	cr_assert(strstr(tfs_dbuf_str(&out), "\n[ram]\nsize = 2G  ; line 2\n"));
	cr_assert(strstr(tfs_dbuf_str(&out), "\npolicy = lru  ; -o\n"));
	cr_assert(strstr(tfs_dbuf_str(&out), "\nblock_size = 1M\n"));
	cr_assert(strstr(tfs_dbuf_str(&out), "\n; bucket = datasets (from the mount source)\n"));
	cr_assert(strstr(tfs_dbuf_str(&out), "\n; prefix = imagenet/ (from the mount source)\n"));
	cr_assert(strstr(tfs_dbuf_str(&out), "\nendpoint =\n"));

	/* the annotated dump reads back too, empty values included */
	set_ok("log.level=debug");
	set_ok("backend.profile=");
	tfs_dbuf_reset(&out);
	cr_assert_eq(tfs_config_dump(&cfg, true, &out), 0);
	cr_assert(strstr(tfs_dbuf_str(&out), "\nprofile =  ; -o\n"), "%s", tfs_dbuf_str(&out));
	write_conf(tfs_dbuf_str(&out));

	struct tfs_config again;
	cr_assert_eq(tfs_config_defaults(&again), 0);
	cr_assert_eq(tfs_config_load(&again, path, true, &err), 0, "%s", tfs_dbuf_str(&err));
	char *a = dump(&cfg), *b = dump(&again);
	cr_assert_str_eq(b, a);
	free(a);
	free(b);
	tfs_config_clear(&again);
	tfs_dbuf_free(&out);
	/* bucket and prefix are freed by tfs_config_clear() in teardown */
}

Test(config, clear_twice)
{
	tfs_config_clear(&cfg);
	tfs_config_clear(&cfg);
	cr_assert_null(cfg.ssd.dir);
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
}

/* ---- the example file and the man page follow the option table ---- */

/* The example without comments and blank lines must be exactly the dump of
 * the defaults: every key, in order, with its default. */
Test(config, example_file_is_the_defaults)
{
	const char *example = TFS_SRCDIR "/etc/tierfs.conf.example";
	int rc = tfs_config_load(&cfg, example, true, &err);

	cr_assert_eq(rc, 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));

	char *text = read_text(example);
	struct tfs_dbuf stripped;
	char *p = text;

	tfs_dbuf_init(&stripped, 1 << 20);
	while (*p) {
		char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		if (n && p[0] != '#' && p[0] != ';') {
			if (p[0] == '[' && tfs_dbuf_len(&stripped))
				tfs_dbuf_addc(&stripped, '\n');
			tfs_dbuf_add(&stripped, p, n);
			tfs_dbuf_addc(&stripped, '\n');
		}
		p += n + (nl != NULL);
	}

	struct tfs_config defaults;
	cr_assert_eq(tfs_config_defaults(&defaults), 0);
	char *want = dump(&defaults);
	cr_assert_str_eq(tfs_dbuf_str(&stripped), want);

	char *got = dump(&cfg);
	cr_assert_str_eq(got, want);

	tfs_config_clear(&defaults);
	tfs_dbuf_free(&stripped);
	free(text);
	free(want);
	free(got);
}

Test(config, man_page_lists_every_key)
{
	char *man = read_text(TFS_SRCDIR "/man/tierfs.conf.5");
	char *all = dump(&cfg);
	char *p = all;

	while (*p) {
		char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char *eq = memchr(p, '=', n);
		char want[128];

		if (p[0] == '[') {
			snprintf(want, sizeof(want), ".SS \"[%.*s]\"\n", (int)(n - 2), p + 1);
			cr_assert(strstr(man, want), "man page lacks %s", want);
		} else if (eq) {
			snprintf(want, sizeof(want), "\n.TP\n.B %.*s\n", (int)(eq - p - 1), p);
			cr_assert(strstr(man, want), "man page lacks %s", want);
		}
		p += n + (nl != NULL);
	}
	free(man);
	free(all);
}

/* ---- [metrics] listen ---- */

Test(config, metrics_listen_is_loopback_or_unix)
{
	cr_assert_null(cfg.metrics.listen, "off by default");
	load_ok("[metrics]\nlisten = 127.0.0.1:9464\n");
	cr_assert_str_eq(cfg.metrics.listen, "127.0.0.1:9464");
	set_ok("metrics.listen=unix:/run/tierfs/m.sock");
	set_ok("metrics.listen=[::1]:0");
	set_ok("metrics.listen=");
	cr_assert_null(cfg.metrics.listen);
	load_fails("[metrics]\n\nlisten = 0.0.0.0:9464\n",
		   "3: [metrics] listen: invalid listen address '0.0.0.0:9464': 0.0.0.0 is not a "
		   "loopback address (allowed: 127.0.0.1:PORT (any 127.x.y.z), localhost:PORT, "
		   "[::1]:PORT, unix:/ABSOLUTE/PATH, or empty for none)");
	set_fails("metrics.listen=unix:m.sock", "command line: -o metrics.listen=unix:m.sock: "
						"invalid listen address "
						"'unix:m.sock': a unix socket needs an absolute "
						"path (allowed: 127.0.0.1:PORT "
						"(any 127.x.y.z), localhost:PORT, [::1]:PORT, "
						"unix:/ABSOLUTE/PATH, or empty for "
						"none)");
}

/* ---- reload ---- */

struct seen {
	char applied[512], remount[512];
};

static void on_change(void *ctx, const char *section, const char *key, const char *value,
		      bool reloadable)
{
	struct seen *s = ctx;
	char *buf = reloadable ? s->applied : s->remount;
	size_t n = strlen(buf);
	snprintf(buf + n, 512 - n, "%s%s.%s=%s", n ? " " : "", section, key, value);
}

Test(config, reloadable_keys)
{
	cr_assert(tfs_config_reloadable("ram", "size"));
	cr_assert(tfs_config_reloadable("SSD", "low_watermark"));
	cr_assert(tfs_config_reloadable("cache", "metadata_ttl"));
	cr_assert(tfs_config_reloadable("log", "level"));
	cr_assert_not(tfs_config_reloadable("cache", "block_size"));
	cr_assert_not(tfs_config_reloadable("metrics", "listen"));
	cr_assert_not(tfs_config_reloadable("mount", "trusted"), "the mount flags need a remount");
	cr_assert_not(tfs_config_reloadable("nosuch", "key"));
}

Test(config, merge_keeps_only_reloadable_changes)
{
	struct tfs_config next;
	struct seen s = { "", "" };

	load_ok("[ram]\nsize = 2G\n[ssd]\ndir = /srv/cache\n[cache]\nblock_size = 4M\n");
	cr_assert_eq(tfs_config_defaults(&next), 0);
	write_conf("[ram]\nsize = 3G\n[ssd]\ndir = /other\nhigh_watermark = 95\n"
		   "[cache]\nblock_size = 4M\npolicy = lru\n[log]\nlevel = debug\n");
	cr_assert_eq(tfs_config_load(&next, path, true, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(tfs_config_merge_reload(&next, &cfg, on_change, &s), 0);
	cr_assert_str_eq(s.applied, "ram.size=3G ssd.high_watermark=95 log.level=debug");
	cr_assert_str_eq(s.remount, "ssd.dir=/other cache.policy=lru");
	cr_assert_eq(next.ram.size, 3 * GIB);
	cr_assert_eq(next.ssd.high_watermark, 95.0);
	cr_assert_eq(next.log.level, TFS_LOG_DEBUG);
	cr_assert_str_eq(next.ssd.dir, "/srv/cache", "not reloadable: the value in force stays");
	cr_assert_eq(next.cache.policy, TFS_POLICY_EPOCH);
	cr_assert_eq(tfs_config_validate(&next, &err), 0, "%s", tfs_dbuf_str(&err));
	tfs_config_clear(&next);
}

/* A reloadable value that does not fit a key kept at its old value is
 * found by validating the merged configuration. */
Test(config, merged_config_is_validated_again)
{
	struct tfs_config next;

	load_ok("[cache]\nblock_size = 64M\n[ram]\nsize = 256M\n");
	cr_assert_eq(tfs_config_defaults(&next), 0);
	write_conf("[cache]\nblock_size = 1M\n[ram]\nsize = 32M\n");
	cr_assert_eq(tfs_config_load(&next, path, true, &err), 0);
	cr_assert_eq(tfs_config_validate(&next, &err), 0, "valid on its own");
	cr_assert_eq(tfs_config_merge_reload(&next, &cfg, NULL, NULL), 0);
	cr_assert_eq(tfs_config_validate(&next, &err), EINVAL);
	cr_assert(strstr(tfs_dbuf_str(&err), "must be at least 4 times [cache] block_size (64M)"),
		  "%s", tfs_dbuf_str(&err));
	tfs_config_clear(&next);
}

/* ---- the pieces both INI files use (lib/ini_reader.h, lib/escape.h) ---- */

Test(ini_reader, one_line_per_call_cleaned_and_numbered)
{
	static const char text[] = "  [a]\r\n# a comment longer than the buffer\n"
				   "k = v ; an inline comment that makes the line long\n\tx=1";
	struct tfs_ini_reader r;
	char line[24];

	tfs_ini_reader_init(&r, text, strlen(text));
	cr_assert_str_eq(tfs_ini_read_line(line, sizeof(line), &r), "[a]");
	cr_assert_str_eq(tfs_ini_read_line(line, sizeof(line), &r), "",
			 "a comment is handed on empty");
	cr_assert_str_eq(tfs_ini_read_line(line, sizeof(line), &r), "k = v");
	cr_assert_str_eq(tfs_ini_read_line(line, sizeof(line), &r), "x=1", "no newline at the end");
	cr_assert_eq(r.lineno, 4);
	cr_assert_null(tfs_ini_read_line(line, sizeof(line), &r));
	cr_assert_eq(r.err_line, 0);
	cr_assert_str_eq(r.err, "");
}

Test(ini_reader, refuses_nul_and_long_lines_and_stops)
{
	static const char nul[] = "a=1\nb=\0c\nd=2\n";
	static const char lng[] = "a=1\nkey = a value far too long for the buffer\nd=2\n";
	struct tfs_ini_reader r;
	char line[24];

	tfs_ini_reader_init(&r, nul, sizeof(nul) - 1);
	cr_assert_str_eq(tfs_ini_read_line(line, sizeof(line), &r), "a=1");
	cr_assert_null(tfs_ini_read_line(line, sizeof(line), &r));
	cr_assert_eq(r.err_line, 2);
	cr_assert_str_eq(r.err, "NUL byte in line");
	cr_assert_null(tfs_ini_read_line(line, sizeof(line), &r), "reading stops at an error");
	cr_assert_eq(r.lineno, 2);

	tfs_ini_reader_init(&r, lng, sizeof(lng) - 1);
	cr_assert_str_eq(tfs_ini_read_line(line, sizeof(line), &r), "a=1");
	cr_assert_null(tfs_ini_read_line(line, sizeof(line), &r));
	cr_assert_eq(r.err_line, 2);
	cr_assert_str_eq(r.err, "line too long (more than 23 characters)");

	/* The caller's handler stops it the same way. */
	tfs_ini_reader_init(&r, lng, sizeof(lng) - 1);
	cr_assert_str_eq(tfs_ini_read_line(line, sizeof(line), &r), "a=1");
	r.err_line = r.lineno;
	cr_assert_null(tfs_ini_read_line(line, sizeof(line), &r));
	cr_assert_str_eq(r.err, "");
}

Test(escape, quotes_escapes_and_cuts)
{
	char buf[TFS_ESCAPE_BUFLEN(5)];

	cr_assert_str_eq(tfs_escape(buf, sizeof(buf),
				    "ab\x01"
				    "cdefg",
				    5, true),
			 "'ab\\x01cd...'");
	cr_assert_str_eq(tfs_escape(buf, sizeof(buf), "a\x7f", 5, false), "a\\x7f");
	cr_assert_str_eq(tfs_escape(buf, sizeof(buf), "", 5, true), "''");
	/* Any 5 bytes fit the buffer, escaped. */
	cr_assert_str_eq(tfs_escape(buf, sizeof(buf), "\x01\x02\x03\x04\x05\x06", 5, true), "'\\x01"
											    "\\x02"
											    "\\x03"
											    "\\x04"
											    "\\x05."
											    "..'");
}
