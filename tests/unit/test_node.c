/* test_node.c - unit tests for the node core's pure parts (node/, both
 * Kubernetes drivers):
 * option checks (node_opts.c), the node config (node_conf.c), the
 * kubelet's options under the node's policy and the daemon's config
 * (node_volume.c), the Secret's keys (node_secrets.c) and the file
 * helpers of node_sys.c.  Mounting is tests/integration/test_flexvolume.py
 * and test_csi.py. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "conf.h"
#include "clock.h"
#include "fv_json.h"
#include "node_conf.h"
#include "node_opts.h"
#include "node_secrets.h"
#include "node_sys.h"
#include "node_volume.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

/* Per-test state (each Criterion test runs in its own process). */
static char tmpdir[200];
static char path[256];
static struct tfs_dbuf err;
static struct tfs_node_conf node;

static void setup(void)
{
	const char *base = getenv("TMPDIR");

	if (base == NULL || strlen(base) > 150)
		base = "/tmp";
	snprintf(tmpdir, sizeof(tmpdir), "%s/tierfs-test-fv.XXXXXX", base);
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/flexvolume.conf", tmpdir);
	tfs_dbuf_init(&err, 8192);
}

static void teardown(void)
{
	tfs_node_conf_clear(&node);
	tfs_dbuf_free(&err);
	tfs_node_rmtree(tmpdir);
}

TestSuite(opts, .init = setup, .fini = teardown);
TestSuite(nodeconf, .init = setup, .fini = teardown);
TestSuite(volume, .init = setup, .fini = teardown);
TestSuite(secrets, .init = setup, .fini = teardown);
TestSuite(sys, .init = setup, .fini = teardown);

static void write_text(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");

	cr_assert_not_null(f, "%s: %s", p, strerror(errno));
	cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
	cr_assert_eq(fclose(f), 0);
}

static void node_ok(const char *text)
{
	write_text(path, text);
	int rc = tfs_node_conf_load(&node, TFS_NODE_DRIVER_FLEXVOLUME, path, true, &err);
	cr_assert_eq(rc, 0, "load: %d: %s", rc, tfs_dbuf_str(&err));
}

/* Load `text` and expect EINVAL with "<path>:" + the formatted tail. */
__attribute__((format(printf, 2, 3))) static void node_fails(const char *text, const char *fmt, ...)
{
	char want[2048], tail[1536];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tail, sizeof(tail), fmt, ap);
	va_end(ap);
	snprintf(want, sizeof(want), "%s:%s", path, tail);
	write_text(path, text);
	cr_assert_eq(tfs_node_conf_load(&node, TFS_NODE_DRIVER_FLEXVOLUME, path, true, &err),
		     EINVAL, "for:\n%s", text);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

static void check_fails(enum tfs_node_opt o, const char *value, bool pod, const char *want)
{
	cr_assert_eq(tfs_node_opt_check(o, value, "option x", pod, NULL, &err), EINVAL, "%s",
		     value);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

/* ---- tfs_node_opts ---- */

Test(opts, names_and_keys)
{
	enum tfs_node_opt o;

	cr_assert_eq(tfs_node_opt_find("ramSize", false, &o), 0);
	cr_assert_eq(o, TFS_NODE_OPT_RAM_SIZE);
	cr_assert_str_eq(tfs_node_opt_tierfs_key(o), "ram.size");
	cr_assert_eq(tfs_node_opt_find("ramsize", false, &o), ENOENT, "pod options are exact");
	cr_assert_eq(tfs_node_opt_find("RAMSIZE", true, &o), 0);
	cr_assert_null(tfs_node_opt_tierfs_key(TFS_NODE_OPT_SOURCE));
	cr_assert_eq(tfs_node_opt_find_limit("maxssdsize", &o), 0);
	cr_assert_eq(o, TFS_NODE_OPT_SSD_SIZE);
	cr_assert_eq(tfs_node_opt_limit_kind(TFS_NODE_OPT_METADATA_TTL), TFS_NODE_LIMIT_MIN);
	cr_assert_eq(tfs_node_opt_limit_kind(TFS_NODE_OPT_POLICY), TFS_NODE_LIMIT_NONE);
	/* Every tierfs key named in the table is one conf.c knows. */
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		const char *k = tfs_node_opt_tierfs_key((enum tfs_node_opt)i);
		struct tfs_config cfg;
		char a[128];

		if (k == NULL)
			continue;
		cr_assert_eq(tfs_config_defaults(&cfg), 0);
		snprintf(a, sizeof(a), "%s=", k);
		int rc = tfs_config_set(&cfg, a, NULL, &err);
		cr_assert(rc == 0 || strstr(tfs_dbuf_str(&err), "unknown") == NULL, "%s: %s", k,
			  tfs_dbuf_str(&err));
		tfs_config_clear(&cfg);
	}
}

Test(opts, values)
{
	struct tfs_node_value v;

	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_RAM_SIZE, "2G", "o", true, &v, &err), 0);
	cr_assert_eq(v.num, 2 * GIB);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_SSD_SIZE, "50%", "o", false, &v, &err), 0);
	cr_assert(v.pct);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_METADATA_TTL, "forever", "o", true, &v, &err),
		     0);
	cr_assert_eq(v.num, UINT64_MAX);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_METADATA_TTL, "90s", "o", true, &v, &err), 0);
	cr_assert_eq(v.num, 90000);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_READ_ONLY, "yes", "o", true, &v, &err), 0);
	cr_assert(v.flag);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_SOURCE, "s3://b/p/q", "o", true, &v, &err), 0);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_ENDPOINT, "https://s3.example:8443", "o", true,
					&v, &err),
		     0);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_WRITEBACK, "off", "o", true, &v, &err), 0);
	cr_assert_eq(tfs_node_opt_check(TFS_NODE_OPT_PREFIX, "", "o", true, &v, &err), 0);
}

Test(opts, messages)
{
	check_fails(TFS_NODE_OPT_RAM_SIZE, "8K", true,
		    "option x: '8K' is out of range (allowed: 16M or more)");
	check_fails(TFS_NODE_OPT_RAM_SIZE, "lots", true,
		    "option x: invalid size 'lots' (allowed: bytes with K/M/G/T suffix)");
	check_fails(TFS_NODE_OPT_SSD_SIZE, "50%", true,
		    "option x: '50%': a volume must give an absolute size (every volume's cache "
		    "shares the node's disk; only the node config may use N%)");
	check_fails(TFS_NODE_OPT_POLICY, "fifo", true,
		    "option x: invalid value 'fifo' (allowed: lru, epoch)");
	check_fails(TFS_NODE_OPT_BLOCK_SIZE, "3M", true,
		    "option x: '3M' is not a power of two (allowed: 64K to 64M, a power of two)");
	check_fails(TFS_NODE_OPT_SOURCE, "/etc", true,
		    "option x: '/etc' is not an S3 source (allowed: s3://BUCKET[/PREFIX])");
	check_fails(TFS_NODE_OPT_SOURCE, "s3://", true, "option x: SOURCE 's3://': no bucket name");
	check_fails(TFS_NODE_OPT_SOURCE, "s3://b\n", true,
		    "option x: 's3://b\\x0a' contains a control character");
	check_fails(TFS_NODE_OPT_BUCKET, "a b", true,
		    "option x: 'a b' is not a bucket name (allowed: letters, digits, '.', '-' and "
		    "'_'; put the path in prefix)");
	check_fails(TFS_NODE_OPT_PREFIX, "/abs", true,
		    "option x: '/abs' has an empty path segment (write a/b, not /a/b or a//b)");
	check_fails(TFS_NODE_OPT_READ_ONLY, "maybe", true,
		    "option x: 'maybe' is not a boolean (allowed: true/false, yes/no, on/off, "
		    "1/0)");
	check_fails(TFS_NODE_OPT_REGION, "us east", true,
		    "option x: invalid value 'us east' (allowed: letters, digits, '-', '_' and "
		    "'.', or empty)");
}

Test(opts, limits)
{
	struct tfs_node_value v = { .num = 4 * GIB };
	uint64_t n;
	char buf[32];

	cr_assert(tfs_node_opt_within(TFS_NODE_OPT_RAM_SIZE, &v, 4 * GIB));
	v.num++;
	cr_assert_not(tfs_node_opt_within(TFS_NODE_OPT_RAM_SIZE, &v, 4 * GIB));
	v.pct = true;
	cr_assert(tfs_node_opt_within(TFS_NODE_OPT_SSD_SIZE, &v, 1), "N%% cannot be compared");
	v = (struct tfs_node_value){ .num = 500 };
	cr_assert_not(tfs_node_opt_within(TFS_NODE_OPT_METADATA_TTL, &v, 1000));
	v.num = UINT64_MAX;
	cr_assert(tfs_node_opt_within(TFS_NODE_OPT_METADATA_TTL, &v, 1000), "forever is long "
									    "enough");
	cr_assert_eq(tfs_node_opt_check_limit(TFS_NODE_OPT_METADATA_TTL, "10s", "l", &n, &err), 0);
	cr_assert_eq(n, 10000);
	cr_assert_eq(tfs_node_opt_check_limit(TFS_NODE_OPT_SSD_SIZE, "10%", "l", &n, &err), EINVAL);
	cr_assert_str_eq(tfs_dbuf_str(&err), "l: '10%' is not a size (allowed: bytes with K/M/G/T "
					     "suffix; N% cannot be a limit)");
	tfs_node_opt_format_limit(TFS_NODE_OPT_RAM_SIZE, 4 * GIB, buf, sizeof(buf));
	cr_assert_str_eq(buf, "4G");
	tfs_node_opt_format_limit(TFS_NODE_OPT_METADATA_TTL, 10000, buf, sizeof(buf));
	cr_assert_str_eq(buf, "10s");
}

/* ---- tfs_node_nodeconf ---- */

Test(nodeconf, csi_builtin_without_file)
{
	snprintf(path, sizeof(path), "%s/missing.conf", tmpdir);
	cr_assert_eq(tfs_node_conf_load(&node, TFS_NODE_DRIVER_CSI, path, false, &err), 0);
	cr_assert_eq(node.driver, TFS_NODE_DRIVER_CSI);
	cr_assert_str_eq(node.state_dir, "/run/tierfs/csi");
	cr_assert_str_eq(node.cache_root, "/var/cache/tierfs/csi");
	cr_assert_null(node.log_file);
	cr_assert_str_eq(tfs_node_driver_name(node.driver), "tierfs-csi");
	tfs_node_conf_clear(&node);
}

Test(nodeconf, builtin_without_file)
{
	snprintf(path, sizeof(path), "%s/missing.conf", tmpdir);
	cr_assert_eq(tfs_node_conf_load(&node, TFS_NODE_DRIVER_FLEXVOLUME, path, false, &err), 0);
	cr_assert_null(node.path);
	cr_assert_str_eq(node.state_dir, "/run/tierfs/flexvolume");
	cr_assert_str_eq(node.cache_root, "/var/cache/tierfs/flexvolume");
	cr_assert_eq(node.mount_timeout_ms, 60000);
	cr_assert_eq(node.systemd, TFS_NODE_SYSTEMD_AUTO);
	cr_assert_null(node.credentials_file);
	cr_assert(node.allow[TFS_NODE_OPT_SOURCE] && node.allow[TFS_NODE_OPT_READ_ONLY]);
	cr_assert_not(node.allow[TFS_NODE_OPT_ENDPOINT] || node.allow[TFS_NODE_OPT_RAM_SIZE]);
	tfs_node_conf_clear(&node);
	cr_assert_eq(tfs_node_conf_load(&node, TFS_NODE_DRIVER_FLEXVOLUME, path, true, &err),
		     ENOENT);
	char want[512];
	snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

Test(nodeconf, full_file)
{
	node_ok("# node config\n"
		"[node]\n"
		"tierfs = /opt/tierfs/bin/tierfs\n"
		"  cache_root = /srv/cache   ; indented\n"
		"log_file =\n"
		"mount_timeout = 2m\n"
		"SYSTEMD = no\n"
		"[defaults]\n"
		"ramSize = 512M\n"
		"ssdsize = 80%\n"
		"bucket = datasets\n"
		"[limits]\n"
		"maxRamSize = 1G\n"
		"minMetadataTTL = 30s\n"
		"[pod]\n"
		"allow = prefix,ramSize  readOnly\n");
	cr_assert_str_eq(node.path, path);
	cr_assert_str_eq(node.tierfs, "/opt/tierfs/bin/tierfs");
	cr_assert_str_eq(node.cache_root, "/srv/cache");
	cr_assert_null(node.log_file);
	cr_assert_eq(node.mount_timeout_ms, 120000);
	cr_assert_eq(node.systemd, TFS_NODE_SYSTEMD_NO);
	cr_assert_str_eq(node.def[TFS_NODE_OPT_RAM_SIZE].value, "512M");
	cr_assert_eq(node.def[TFS_NODE_OPT_RAM_SIZE].line, 9);
	cr_assert(node.def[TFS_NODE_OPT_SSD_SIZE].parsed.pct);
	cr_assert(node.limit[TFS_NODE_OPT_RAM_SIZE].set);
	cr_assert_eq(node.limit[TFS_NODE_OPT_RAM_SIZE].value, GIB);
	cr_assert_eq(node.limit[TFS_NODE_OPT_METADATA_TTL].value, 30000);
	cr_assert(node.allow[TFS_NODE_OPT_PREFIX] && node.allow[TFS_NODE_OPT_RAM_SIZE] &&
		  node.allow[TFS_NODE_OPT_READ_ONLY]);
	cr_assert_not(node.allow[TFS_NODE_OPT_SOURCE] || node.allow[TFS_NODE_OPT_BUCKET]);
	cr_assert_eq(node.allow_line, 16);
}

Test(nodeconf, errors)
{
	node_fails("[node]\nfoo = 1\n", "2: [node]: unknown key 'foo' (known: tierfs, tierfs_conf, "
					"cache_root, state_dir, log_file, log_level, daemon_log, "
					"credentials_file, "
					"mount_timeout, unmount_timeout, systemd, systemd_run, "
					"fsgroup, fsgroup_dir_mode, fsgroup_file_mode, "
					"selinux_context, kubelet_dir, max_daemons, "
					"max_total_ram, max_total_ssd, memory_margin, "
					"cgroup_dir)");
	node_fails("[node]\ncache_root = var/cache\n", "2: [node] cache_root: 'var/cache' is not "
						       "an absolute path");
	node_fails("[node]\nstate_dir =\n", "2: [node] state_dir: a path is required");
	node_fails("[node]\nmount_timeout = 2h\n", "2: [node] mount_timeout: '2h' is not a "
						   "duration from 1s to 1h");
	node_fails("[node]\nsystemd = maybe\n", "2: [node] systemd: 'maybe' is not one of auto, "
						"yes, no");
	node_fails("\n[defaults]\nramSize = 1K\n", "3: [defaults] ramSize: '1K' is out of range "
						   "(allowed: 16M or more)");
	node_fails("[defaults]\nram = 1G\n", "2: [defaults]: unknown option 'ram' (known: source, "
					     "bucket, prefix, endpoint, region, pathStyle, "
					     "ramSize, ssdSize, blockSize, "
					     "readahead, policy, metadataTTL, writeback, "
					     "nearBucket, nearPrefix, nearEndpoint, "
					     "nearWriteThrough, readOnly)");
	node_fails("[limits]\nmaxPolicy = lru\n", "2: [limits]: unknown key 'maxPolicy' (known: "
						  "maxRamSize, maxSsdSize, maxBlockSize, "
						  "maxReadahead, minMetadataTTL)");
	node_fails("[limits]\nmaxRamSize = 4X\n", "2: [limits] maxRamSize: '4X' is not a size "
						  "(allowed: bytes with K/M/G/T suffix; N%% cannot "
						  "be a limit)");
	node_fails("[pod]\nallow = source, everything\n", "2: [pod] allow: unknown option "
							  "'everything' (known: source, bucket, "
							  "prefix, "
							  "endpoint, region, pathStyle, ramSize, "
							  "ssdSize, blockSize, readahead, policy, "
							  "metadataTTL, writeback, nearBucket, "
							  "nearPrefix, nearEndpoint, "
							  "nearWriteThrough, readOnly)");
	node_fails("[pod]\ndeny = x\n", "2: [pod]: unknown key 'deny' (known: allow)");
	node_fails("[extra]\nx = 1\n", "2: unknown section [extra] (known: node, defaults, limits, "
				       "pod)");
	node_fails("[node]\nthis is not ini\n", "2: syntax error (expected [section] or key = "
						"value)");
	node_fails("[defaults]\nramSize = 2G\n[limits]\nmaxRamSize = 1G\n", "2: [defaults] "
									    "ramSize: '2G' is "
									    "above the limit "
									    "maxRamSize = 1G (line "
									    "4)");
	node_fails("[limits]\nminMetadataTTL = 1m\n[defaults]\nmetadataTTL = 5s\n", "4: [defaults] "
										    "metadataTTL: "
										    "'5s' is below "
										    "the limit "
										    "minMetadataTTL"
										    " = 1m (line "
										    "2)");
	node_fails("[defaults]\nsource = s3://a/b\nprefix = c\n", "3: [defaults] source and prefix "
								  "exclude each other (source is "
								  "s3://BUCKET[/PREFIX])");
	char longline[300];
	memset(longline, 'x', sizeof(longline) - 2);
	longline[sizeof(longline) - 2] = '\n';
	longline[sizeof(longline) - 1] = '\0';
	node_fails(longline, "1: line too long (more than 199 characters)");
	/* The reader tierfs.conf uses (ini_reader.h): a long comment is no
	 * error and the lines after it keep their numbers; so is a long line
	 * whose inline comment is what makes it long. */
	char text[700];
	memset(longline, 'c', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	snprintf(text, sizeof(text), "# %s\n[node]\nlog_level = info ; %s\nfoo = 1\n", longline,
		 longline);
	node_fails(text, "4: [node]: unknown key 'foo' (known: tierfs, tierfs_conf, "
			 "cache_root, state_dir, log_file, log_level, daemon_log, "
			 "credentials_file, mount_timeout, unmount_timeout, systemd, "
			 "systemd_run, fsgroup, fsgroup_dir_mode, fsgroup_file_mode, "
			 "selinux_context, kubelet_dir, max_daemons, max_total_ram, "
			 "max_total_ssd, memory_margin, cgroup_dir)");
}

Test(nodeconf, node_limits_and_kubelet_dir)
{
	snprintf(path, sizeof(path), "%s/missing.conf", tmpdir);
	cr_assert_eq(tfs_node_conf_load(&node, TFS_NODE_DRIVER_CSI, path, false, &err), 0);
	cr_assert_str_eq(node.kubelet_dir, "/var/lib/kubelet");
	cr_assert_eq(node.max_daemons, 32);
	cr_assert_eq(node.max_total_ram, 0, "no bound by default");
	cr_assert_eq(node.max_total_ssd, 0, "no bound by default");
	cr_assert_eq(node.memory_margin, 256 * MIB);
	cr_assert_null(node.cgroup_dir);
	tfs_node_conf_clear(&node);
	node_ok("[node]\nkubelet_dir = /srv/kubelet\nmax_daemons = 3\nmax_total_ram = 2G\n"
		"max_total_ssd = 1T\nmemory_margin = 0\ncgroup_dir = /sys/fs/cgroup/memory/x\n");
	cr_assert_str_eq(node.kubelet_dir, "/srv/kubelet");
	cr_assert_eq(node.max_daemons, 3);
	cr_assert_eq(node.max_total_ram, 2 * GIB);
	cr_assert_eq(node.max_total_ssd, 1024 * GIB);
	cr_assert_eq(node.memory_margin, 0);
	cr_assert_str_eq(node.cgroup_dir, "/sys/fs/cgroup/memory/x");
	tfs_node_conf_clear(&node);
	node_fails("[node]\nmax_daemons = 0\n", "2: [node] max_daemons: '0' is not a number "
						"from 1 to 100000");
	node_fails("[node]\nmax_daemons = -1\n", "2: [node] max_daemons: '-1' is not a number "
						 "from 1 to 100000");
	node_fails("[node]\nmax_total_ram = lots\n", "2: [node] max_total_ram: 'lots' is not a "
						     "size (bytes with K/M/G/T suffix, or empty "
						     "for no bound)");
	node_fails("[node]\nmax_total_ssd = 0\n", "2: [node] max_total_ssd: 0 bounds nothing "
						  "(leave it empty for no bound)");
	node_fails("[node]\nmemory_margin =\n", "2: [node] memory_margin: '' is not a size "
						"(bytes with K/M/G/T suffix)");
	node_fails("[node]\nkubelet_dir = var/lib/kubelet\n", "2: [node] kubelet_dir: "
							      "'var/lib/kubelet' is not an "
							      "absolute path");
}

Test(nodeconf, fsgroup_and_selinux_keys)
{
	node_ok("[node]\n");
	cr_assert(node.fsgroup);
	cr_assert_eq(node.fsgroup_dir_mode, 0775);
	cr_assert_eq(node.fsgroup_file_mode, 0664);
	cr_assert_null(node.selinux_context);
	tfs_node_conf_clear(&node);
	node_ok("[node]\nfsgroup = no\nfsgroup_dir_mode = 770\nfsgroup_file_mode = 0640\n"
		"selinux_context = system_u:object_r:container_file_t:s0:c1,c2\n");
	cr_assert_not(node.fsgroup);
	cr_assert_eq(node.fsgroup_dir_mode, 0770);
	cr_assert_eq(node.fsgroup_file_mode, 0640);
	cr_assert_str_eq(node.selinux_context, "system_u:object_r:container_file_t:s0:c1,c2");
	tfs_node_conf_clear(&node);
	node_fails("[node]\nfsgroup = perhaps\n", "2: [node] fsgroup: 'perhaps' is not a "
						  "boolean (allowed: yes/no, true/false, on/off, "
						  "1/0)");
	static const char *const bad_modes[] = { "0777", "2775", "4775",  "1775", "0o775",
						 "775x", "",     "00775", "-775" };
	for (size_t i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++) {
		char text[128];

		snprintf(text, sizeof(text), "[node]\nfsgroup_dir_mode = %s\n", bad_modes[i]);
		node_fails(text,
			   "2: [node] fsgroup_dir_mode: '%s' is not an octal mode within 0775 "
			   "(no set-id, sticky or world-write bit)",
			   bad_modes[i]);
	}
	static const char *const bad_ctx[] = {
		"container_file_t",
		"a:b",
		"system_u:object_r:container_file_t:s0\"",
		"system_u:object_r:container_file_t:s0 ,x",
		"system_u:object_r:x:s0,defcontext=y",
		":object_r:x:s0",
		"a::b:c",
		"a:b:c:",
	};
	for (size_t i = 0; i < sizeof(bad_ctx) / sizeof(bad_ctx[0]); i++) {
		char text[512];

		snprintf(text, sizeof(text), "[node]\nselinux_context = %s\n", bad_ctx[i]);
		node_fails(text,
			   "2: [node] selinux_context: '%s' is not an SELinux context "
			   "(user:role:type[:level], at most 160 characters of letters, digits, "
			   "_ . - : ,)",
			   bad_ctx[i]);
	}
	/* TFS_NODE_CONTEXT_MAX bytes pass, one more does not. */
	char ctx[200] = "u:r:";
	char text[400];
	memset(ctx + 4, 't', TFS_NODE_CONTEXT_MAX - 4);
	ctx[TFS_NODE_CONTEXT_MAX] = '\0';
	snprintf(text, sizeof(text), "[node]\nselinux_context = %s\n", ctx);
	node_ok(text);
	cr_assert_eq(strlen(node.selinux_context), TFS_NODE_CONTEXT_MAX);
	tfs_node_conf_clear(&node);
	ctx[TFS_NODE_CONTEXT_MAX] = 't';
	ctx[TFS_NODE_CONTEXT_MAX + 1] = '\0';
	snprintf(text, sizeof(text), "[node]\nselinux_context = %s\n", ctx);
	write_text(path, text);
	cr_assert_eq(tfs_node_conf_load(&node, TFS_NODE_DRIVER_FLEXVOLUME, path, true, &err),
		     EINVAL);
	cr_assert(strstr(tfs_dbuf_str(&err), "is not an SELinux context"), "%s",
		  tfs_dbuf_str(&err));
}

/* ---- tfs_node_volume ---- */

static const char *SECRET = "\"kubernetes.io/secret/accessKey\":\"QUtJQUVYQU1QTEU=\","
			    "\"kubernetes.io/secret/secretKey\":\"c2VjcmV0L2tleStzZWNyZXQ=\"";

static void node_std(void)
{
	node_ok("[defaults]\nendpoint = http://127.0.0.1:9000\nramSize = 256M\n"
		"[limits]\nmaxRamSize = 1G\nminMetadataTTL = 10s\n"
		"[pod]\nallow = source bucket prefix ramSize metadataTTL readOnly writeback\n");
}

/* Parse {SECRET, json_tail}; expect success. */
static void vol_ok(struct tfs_node_volume *v, const char *json_tail)
{
	char json[4096];

	snprintf(json, sizeof(json), "{%s%s%s}", SECRET, *json_tail ? "," : "", json_tail);
	int rc = fv_volume_parse(json, &node, v, &err);
	cr_assert_eq(rc, 0, "%s: %d: %s", json, rc, tfs_dbuf_str(&err));
}

static void vol_fails(const char *json, const char *want)
{
	struct tfs_node_volume v;

	cr_assert_eq(fv_volume_parse(json, &node, &v, &err), EINVAL, "%s", json);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

Test(volume, kubelet_json)
{
	struct tfs_node_volume v;

	node_std();
	vol_ok(&v, "\"kubernetes.io/fsType\":\"\",\"kubernetes.io/pod.name\":\"p\","
		   "\"kubernetes.io/pod.namespace\":\"ns\",\"kubernetes.io/pod.uid\":\"u\","
		   "\"kubernetes.io/pvOrVolumeName\":\"data\",\"kubernetes.io/readwrite\":\"rw\","
		   "\"kubernetes.io/serviceAccount.name\":\"default\","
		   "\"kubernetes.io/mounterArgs.FsGroup\":\"1000\",\"kubernetes.io/future\":\"x\","
		   "\"ramSize\":\" 512M \",\"source\":\"s3://bucket/ds/train\"");
	cr_assert_str_eq(v.source, "s3://bucket/ds/train");
	cr_assert_str_eq(v.value[TFS_NODE_OPT_RAM_SIZE], "512M");
	cr_assert(v.from_pod[TFS_NODE_OPT_RAM_SIZE]);
	cr_assert_str_eq(v.value[TFS_NODE_OPT_ENDPOINT], "http://127.0.0.1:9000");
	cr_assert_not(v.from_pod[TFS_NODE_OPT_ENDPOINT]);
	cr_assert_null(v.value[TFS_NODE_OPT_POLICY]);
	cr_assert_not(v.read_only);
	cr_assert_str_eq(v.pod, "ns/p");
	cr_assert_str_eq(v.pv, "data");
	cr_assert_str_eq(v.creds.access_key, "AKIAEXAMPLE");
	cr_assert_str_eq(v.creds.secret_key, "secret/key+secret");
	cr_assert_null(v.creds.session_token);
	tfs_node_volume_clear(&v);
}

Test(volume, source_rules)
{
	struct tfs_node_volume v;

	node_ok("[defaults]\nbucket = pinned\nprefix = base\n"
		"[pod]\nallow = source bucket prefix\n");
	vol_ok(&v, "");
	cr_assert_str_eq(v.source, "s3://pinned/base");
	tfs_node_volume_clear(&v);
	vol_ok(&v, "\"prefix\":\"team/a/\"");
	cr_assert_str_eq(v.source, "s3://pinned/team/a",
			 "a pod's prefix applies to the default bucket");
	tfs_node_volume_clear(&v);
	vol_ok(&v, "\"bucket\":\"mine\"");
	cr_assert_str_eq(v.source, "s3://mine", "a pod's bucket brings its own prefix");
	tfs_node_volume_clear(&v);
	vol_ok(&v, "\"bucket\":\"mine\",\"prefix\":\"x\"");
	cr_assert_str_eq(v.source, "s3://mine/x");
	tfs_node_volume_clear(&v);
	vol_ok(&v, "\"source\":\"s3://other/\"");
	cr_assert_str_eq(v.source, "s3://other");
	tfs_node_volume_clear(&v);
	vol_fails("{\"source\":\"s3://a\",\"bucket\":\"b\"}", "options source and bucket exclude "
							      "each other (source is "
							      "s3://BUCKET[/PREFIX])");
	tfs_node_conf_clear(&node);

	node_ok("[defaults]\nsource = s3://pinned/p\n[pod]\nallow = prefix\n");
	vol_ok(&v, "\"prefix\":\"q\"");
	cr_assert_str_eq(v.source, "s3://pinned/q");
	tfs_node_volume_clear(&v);
	tfs_node_conf_clear(&node);

	node_ok("[pod]\nallow = prefix\n");
	char json[1024];
	snprintf(json, sizeof(json), "{%s,\"prefix\":\"x\"}", SECRET);
	vol_fails(json, "missing bucket: set the option source (s3://BUCKET[/PREFIX]) or bucket");
}

Test(volume, policy)
{
	char json[2048];

	node_std();
	snprintf(json, sizeof(json), "{%s,\"source\":\"s3://b\",\"ramSize\":\"2G\"}", SECRET);
	char want[1024];
	snprintf(want, sizeof(want),
		 "option ramSize: '2G' is above this node's limit maxRamSize = "
		 "1G (%s:5)",
		 path);
	vol_fails(json, want);
	snprintf(json, sizeof(json), "{%s,\"source\":\"s3://b\",\"metadataTTL\":\"1s\"}", SECRET);
	snprintf(want, sizeof(want),
		 "option metadataTTL: '1s' is below this node's limit "
		 "minMetadataTTL = 10s (%s:6)",
		 path);
	vol_fails(json, want);
	snprintf(json, sizeof(json), "{%s,\"source\":\"s3://b\",\"policy\":\"lru\"}", SECRET);
	snprintf(want, sizeof(want),
		 "option policy: not allowed on this node (a volume may set: "
		 "source, bucket, prefix, ramSize, metadataTTL, writeback, readOnly; [pod] allow, "
		 "%s:8)",
		 path);
	vol_fails(json, want);
	snprintf(json, sizeof(json), "{%s,\"source\":\"s3://b\",\"ramSizes\":\"1G\"}", SECRET);
	vol_fails(json, "unknown option 'ramSizes' (known: source, bucket, prefix, endpoint, "
			"region, "
			"pathStyle, ramSize, ssdSize, blockSize, readahead, policy, metadataTTL, "
			"writeback, nearBucket, nearPrefix, nearEndpoint, nearWriteThrough, "
			"readOnly)");
	snprintf(json, sizeof(json), "{%s,\"source\":\"s3://b\",\"ramSize\":512}", SECRET);
	vol_fails(json, "option ramSize: expected a string value");
}

Test(volume, read_only)
{
	struct tfs_node_volume v;
	char json[2048];

	node_std();
	vol_ok(&v, "\"source\":\"s3://b\",\"kubernetes.io/readwrite\":\"ro\"");
	cr_assert(v.read_only);
	tfs_node_volume_clear(&v);
	vol_ok(&v, "\"source\":\"s3://b\",\"readOnly\":\"true\",\"kubernetes.io/"
		   "readwrite\":\"rw\"");
	cr_assert(v.read_only);
	tfs_node_volume_clear(&v);
	vol_ok(&v, "\"source\":\"s3://b\",\"readOnly\":\"false\",\"writeback\":\"async\"");
	cr_assert_not(v.read_only);
	tfs_node_volume_clear(&v);
	snprintf(json, sizeof(json),
		 "{%s,\"source\":\"s3://b\",\"readOnly\":\"1\","
		 "\"writeback\":\"async\"}",
		 SECRET);
	vol_fails(json, "option writeback: 'async' on a read-only volume (readOnly or "
			"kubernetes.io/readwrite=ro); use writeback=off or a read-write volume");
	snprintf(json, sizeof(json), "{%s,\"source\":\"s3://b\",\"kubernetes.io/readwrite\":\"r\"}",
		 SECRET);
	vol_fails(json, "kubernetes.io/readwrite: 'r' is neither ro nor rw");
}

/* The -o argument of `tierfs mount` for json_tail under the current node. */
static void mount_opts_are(const char *json_tail, const char *want)
{
	struct tfs_node_volume v;
	struct tfs_dbuf o;

	vol_ok(&v, json_tail);
	tfs_dbuf_init(&o, 4096);
	cr_assert_eq(tfs_node_volume_mount_opts(&v, &node, &o), 0);
	cr_assert_str_eq(tfs_dbuf_str(&o), want, "for %s", json_tail);
	tfs_dbuf_free(&o);
	tfs_node_volume_clear(&v);
}

static const unsigned char fp_key[32] = "0123456789abcdef0123456789abcde";

/* The fingerprint of a request (tfs_node_volume_make(), as the CSI plugin
 * calls it) with one field changed. */
static void fingerprint_of(const char *key, const char *value, const char *secret_key,
			   const char *fsgroup, char *out)
{
	struct tfs_node_kv opt[2] = { { "source", "s3://b/p" }, { key, value } };
	struct tfs_node_kv sec[2] = { { "accessKey", "AKIAEXAMPLE" }, { "secretKey", secret_key } };
	struct tfs_node_request rq = {
		.opt = opt, .n_opt = key ? 2 : 1, .secret = sec, .n_secret = 2, .fsgroup = fsgroup
	};
	struct tfs_node_volume v;

	cr_assert_eq(tfs_node_volume_make(&rq, &node, &v, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(tfs_node_volume_fingerprint(&v, fp_key, sizeof(fp_key), out,
						 TFS_NODE_HASH_LEN + 1),
		     0);
	cr_assert_eq(strlen(out), TFS_NODE_HASH_LEN);
	tfs_node_volume_clear(&v);
}

Test(volume, fingerprint)
{
	char base[TFS_NODE_HASH_LEN + 1], again[TFS_NODE_HASH_LEN + 1],
		other[TFS_NODE_HASH_LEN + 1];

	node_std();
	fingerprint_of(NULL, NULL, "sk1", NULL, base);
	fingerprint_of(NULL, NULL, "sk1", NULL, again);
	cr_assert_str_eq(base, again, "one volume, two fingerprints");
	fingerprint_of(NULL, NULL, "sk2", NULL, other);
	cr_assert_str_neq(base, other, "another secret key, same fingerprint");
	fingerprint_of("ramSize", "512M", "sk1", NULL, other);
	cr_assert_str_neq(base, other, "another option, same fingerprint");
	fingerprint_of("readOnly", "true", "sk1", NULL, other);
	cr_assert_str_neq(base, other, "read-only, same fingerprint");
	fingerprint_of(NULL, NULL, "sk1", "2000", other);
	cr_assert_str_neq(base, other, "an fsGroup, same fingerprint");
	/* An option set to the node's default is the default. */
	fingerprint_of("ramSize", "256M", "sk1", NULL, other);
	cr_assert_str_eq(base, other, "the node's default, given again");
}

/* The fingerprint is keyed: it is not the plain SHA-256 of the text that
 * holds the secret key (which anyone could test guesses against), and
 * another node key gives another fingerprint. */
Test(volume, fingerprint_is_keyed)
{
	struct tfs_node_kv opt[1] = { { "source", "s3://b/p" } };
	struct tfs_node_kv sec[2] = { { "accessKey", "AKIAEXAMPLE" }, { "secretKey", "weak" } };
	struct tfs_node_request rq = { .opt = opt, .n_opt = 1, .secret = sec, .n_secret = 2 };
	char fp[TFS_NODE_HASH_LEN + 1], fp2[TFS_NODE_HASH_LEN + 1], plain[TFS_NODE_HASH_LEN + 1];
	unsigned char other_key[32] = { 1 };
	struct tfs_dbuf text;
	struct tfs_node_volume v;

	node_std();
	cr_assert_eq(tfs_node_volume_make(&rq, &node, &v, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(tfs_node_volume_fingerprint(&v, fp_key, sizeof(fp_key), fp, sizeof(fp)), 0);
	/* The text the unkeyed fingerprint hashed. */
	tfs_dbuf_init(&text, 1 << 16);
	cr_assert_eq(tfs_dbuf_addf(&text,
				   "source=%s\nro=0\nfsgroup=0:0\naccess_key=AKIAEXAMPLE\n"
				   "secret_key=weak\nsession_token=\n",
				   v.source),
		     0);
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		if (v.value[i])
			tfs_dbuf_addf(&text, "%s=%s\n", tfs_node_opt_name((enum tfs_node_opt)i),
				      v.value[i]);
	}
	cr_assert_eq(tfs_node_hash(tfs_dbuf_str(&text), plain, sizeof(plain)), 0);
	cr_assert_str_neq(fp, plain, "the fingerprint is the unkeyed SHA-256 of the settings");
	cr_assert_eq(
		tfs_node_volume_fingerprint(&v, other_key, sizeof(other_key), fp2, sizeof(fp2)), 0);
	cr_assert_str_neq(fp, fp2, "another key, same fingerprint");
	cr_assert_eq(tfs_node_volume_fingerprint(&v, fp_key, 0, fp2, sizeof(fp2)), EIO, "no key");
	tfs_dbuf_free(&text);
	tfs_node_volume_clear(&v);
}

Test(volume, fsgroup)
{
	struct tfs_node_volume v;
	char json[2048];

	node_std();
	vol_ok(&v, "\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":\"2345\"");
	cr_assert(v.has_fsgroup);
	cr_assert_eq(v.fsgroup, 2345);
	tfs_node_volume_clear(&v);
	mount_opts_are("\"source\":\"s3://b\"", "allow_other");
	mount_opts_are("\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":\"2345\"",
		       "allow_other,gid=2345,dir_mode=0775,file_mode=0664");
	mount_opts_are("\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":\"0\","
		       "\"kubernetes.io/readwrite\":\"ro\"",
		       "allow_other,ro,gid=0,dir_mode=0775,file_mode=0664");
	mount_opts_are("\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":"
		       "\"2147483647\"",
		       "allow_other,gid=2147483647,dir_mode=0775,file_mode=0664");
	static const char *const bad[] = { "-1", "2147483648", "99999999999", "12a",
					   "",   " 5",         "0x10",        "+5" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[256];

		snprintf(json, sizeof(json),
			 "{%s,\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":\"%s\"}",
			 SECRET, bad[i]);
		snprintf(want, sizeof(want),
			 "kubernetes.io/mounterArgs.FsGroup: '%s' is not a group id (0 to "
			 "2147483647)",
			 bad[i]);
		vol_fails(json, want);
	}
	snprintf(json, sizeof(json),
		 "{%s,\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":12}", SECRET);
	vol_fails(json, "kubernetes.io/mounterArgs.FsGroup: a non-string is not a group id (0 "
			"to 2147483647)");
	/* The node's modes; fsgroup = no ignores the pod's group. */
	tfs_node_conf_clear(&node);
	node_ok("[node]\nfsgroup_dir_mode = 0750\nfsgroup_file_mode = 0640\n");
	mount_opts_are("\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":\"7\"",
		       "allow_other,gid=7,dir_mode=0750,file_mode=0640");
	tfs_node_conf_clear(&node);
	node_ok("[node]\nfsgroup = no\n");
	mount_opts_are("\"source\":\"s3://b\",\"kubernetes.io/mounterArgs.FsGroup\":\"7\"", "allow_"
											    "othe"
											    "r");
}

Test(volume, selinux_context)
{
	node_ok("[node]\nselinux_context = system_u:object_r:container_file_t:s0\n");
	mount_opts_are("\"source\":\"s3://b\"", "allow_other,context=\"system_u:object_r:container_"
						"file_t:s0\"");
	tfs_node_conf_clear(&node);
	/* The categories' commas are escaped for fuse_opt. */
	node_ok("[node]\nselinux_context = system_u:object_r:container_file_t:s0:c1,c2\n");
	mount_opts_are("\"source\":\"s3://b\",\"readOnly\":\"true\","
		       "\"kubernetes.io/mounterArgs.FsGroup\":\"9\"",
		       "allow_other,ro,gid=9,dir_mode=0775,file_mode=0664,"
		       "context=\"system_u:object_r:container_file_t:s0:c1\\,c2\"");
	/* A pod cannot choose it: it is no volume option. */
	char json[1024];
	snprintf(json, sizeof(json), "{%s,\"source\":\"s3://b\",\"selinux_context\":\"u:r:t:s0\"}",
		 SECRET);
	struct tfs_node_volume v;
	cr_assert_eq(fv_volume_parse(json, &node, &v, &err), EINVAL);
	cr_assert(strstr(tfs_dbuf_str(&err), "selinux_context"), "%s", tfs_dbuf_str(&err));
}

Test(volume, secrets_and_json)
{
	node_std();
	vol_fails("{\"source\":\"s3://b\"", "the options are not valid JSON: unexpected end of "
					    "data");
	vol_fails("[]", "the options are not a JSON object");
	vol_fails("{\"source\":\"s3://b\",\"kubernetes.io/secret/accessKey\":\"QUtJQQ==\"}",
		  "secret: the volume's Secret has accessKey but not secretKey (both are "
		  "required)");
	vol_fails("{\"source\":\"s3://b\",\"kubernetes.io/secret/token\":\"QUtJQQ==\"}",
		  "unknown key 'token' in the volume's Secret (allowed: accessKey, secretKey, "
		  "sessionToken)");
	vol_fails("{\"source\":\"s3://b\",\"kubernetes.io/secret/secretKey\":\"%%%\"}",
		  "secret secretKey: not base64 (the length is not a multiple of 4)");
	/* An unknown key with a value that is no string: its name is quoted
	 * (it may hold a newline), never printed raw (found by fuzz_flexvolume). */
	vol_fails("{\"source\":\"s3://b\",\"kubernetes.io/secret/to\\nken\":null}",
		  "unknown key 'to\\x0aken' in the volume's Secret (allowed: accessKey, secretKey, "
		  "sessionToken)");
	vol_fails("{\"source\":\"s3://b\",\"kubernetes.io/secret/secretKey\":5}", "secret "
										  "secretKey: "
										  "expected a "
										  "base64 string");
	char want[1024];
	snprintf(want, sizeof(want),
		 "no credentials: give the volume a secretRef to a Secret of "
		 "type tierfs/tierfs with accessKey and secretKey (or set credentials_file in "
		 "[node] "
		 "of %s)",
		 path);
	vol_fails("{\"source\":\"s3://b\"}", want);
	tfs_node_conf_clear(&node);
	node_ok("[node]\ncredentials_file = /etc/tierfs/node-credentials\n");
	struct tfs_node_volume v;
	cr_assert_eq(fv_volume_parse("{\"source\":\"s3://b\"}", &node, &v, &err), 0, "%s",
		     tfs_dbuf_str(&err));
	cr_assert_null(v.creds.access_key);
	tfs_node_volume_clear(&v);
}

/* A near copy (docs/cluster.md): the admin's store, a pod's prefix when
 * the node allows it, and never a store of the pod's own choosing unless
 * allowed. */
Test(volume, near_options_under_the_node_policy)
{
	struct tfs_node_volume v;
	struct tfs_dbuf out;
	struct tfs_config cfg;
	char conf[512];

	node_ok("[defaults]\nnearBucket = cache\nnearEndpoint = http://127.0.0.1:7480\n"
		"[pod]\nallow = source nearPrefix\n");
	cr_assert_eq(fv_volume_parse("{\"source\":\"s3://b\",\"nearEndpoint\":\"http://"
				     "evil\"}",
				     &node, &v, &err),
		     EINVAL);
	cr_assert(strstr(tfs_dbuf_str(&err), "nearEndpoint") != NULL, "%s", tfs_dbuf_str(&err));
	vol_ok(&v, "\"source\":\"s3://b/p\",\"nearPrefix\":\"team-a/\"");
	tfs_dbuf_init(&out, 1 << 20);
	bool writable = true;
	cr_assert_eq(tfs_node_volume_tierfs_conf(&v, &node, "/cache/abc", "/state/abc/credentials",
						 &out, &writable, &err),
		     0, "%s", tfs_dbuf_str(&err));
	snprintf(conf, sizeof(conf), "%s/tierfs.conf", tmpdir);
	write_text(conf, tfs_dbuf_str(&out));
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	cr_assert_eq(tfs_config_load(&cfg, conf, true, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_str_eq(cfg.near_store.bucket, "cache");
	cr_assert_str_eq(cfg.near_store.prefix, "team-a/");
	cr_assert_str_eq(cfg.near_store.endpoint, "http://127.0.0.1:7480");
	tfs_config_clear(&cfg);
	tfs_dbuf_free(&out);
	tfs_node_volume_clear(&v);
}

Test(volume, tierfs_conf_round_trip)
{
	struct tfs_node_volume v;
	struct tfs_dbuf out;
	struct tfs_config cfg;
	char conf[512];

	node_ok("[node]\ndaemon_log = /var/log/tierfs/daemons.log\n"
		"[defaults]\nendpoint = http://127.0.0.1:9000\npolicy = lru\n"
		"[pod]\nallow = source ramSize metadataTTL\n");
	vol_ok(&v, "\"source\":\"s3://b/p\",\"ramSize\":\"64M\",\"metadataTTL\":\"forever\","
		   "\"kubernetes.io/readwrite\":\"ro\"");
	tfs_dbuf_init(&out, 1 << 20);
	bool writable = true;
	cr_assert_eq(tfs_node_volume_tierfs_conf(&v, &node, "/cache/abc", "/state/abc/credentials",
						 &out, &writable, &err),
		     0, "%s", tfs_dbuf_str(&err));
	cr_assert_not(writable, "a read-only volume");
	cr_assert_null(strstr(tfs_dbuf_str(&out), "AKIAEXAMPLE"), "a secret in the config");
	snprintf(conf, sizeof(conf), "%s/tierfs.conf", tmpdir);
	write_text(conf, tfs_dbuf_str(&out));
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	cr_assert_eq(tfs_config_load(&cfg, conf, true, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(tfs_config_validate(&cfg, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(cfg.ram.size, 64 * MIB);
	cr_assert_eq(cfg.cache.metadata_ttl_ms, UINT64_MAX);
	cr_assert_eq(cfg.cache.policy, TFS_POLICY_LRU);
	cr_assert_str_eq(cfg.backend.endpoint, "http://127.0.0.1:9000");
	cr_assert_str_eq(cfg.backend.credentials_file, "/state/abc/credentials");
	cr_assert_str_eq(cfg.ssd.dir, "/cache/abc");
	cr_assert_str_eq(cfg.log.file, "/var/log/tierfs/daemons.log");
	cr_assert_eq(cfg.writeback.mode, TFS_WB_OFF, "read-only: no write-back");
	tfs_config_clear(&cfg);
	tfs_dbuf_free(&out);
	tfs_node_volume_clear(&v);
}

Test(volume, tierfs_conf_base_and_cross_rules)
{
	struct tfs_node_volume v;
	struct tfs_dbuf out;
	char base[512], text[1024];

	snprintf(base, sizeof(base), "%s/base.conf", tmpdir);
	write_text(base, "[backend]\nretries = 7\n[cache]\nblock_size = 16M\n");
	snprintf(text, sizeof(text), "[node]\ntierfs_conf = %s\n[pod]\nallow = source ramSize\n",
		 base);
	node_ok(text);
	vol_ok(&v, "\"source\":\"s3://b\",\"ramSize\":\"32M\"");
	tfs_dbuf_init(&out, 1 << 20);
	/* 32M of RAM is 2 blocks of the base's 16M: validate() refuses it. */
	cr_assert_eq(tfs_node_volume_tierfs_conf(&v, &node, "/c", NULL, &out, NULL, &err), EINVAL);
	cr_assert(strncmp(tfs_dbuf_str(&err), "the volume's settings do not fit together: ", 43) ==
			  0,
		  "%s", tfs_dbuf_str(&err));
	tfs_node_volume_clear(&v);
	vol_ok(&v, "\"source\":\"s3://b\",\"ramSize\":\"64M\"");
	tfs_dbuf_reset(&out);
	bool writable = false;
	cr_assert_eq(tfs_node_volume_tierfs_conf(&v, &node, "/c", NULL, &out, &writable, &err), 0,
		     "%s", tfs_dbuf_str(&err));
	cr_assert(writable, "write-back is async by default");
	cr_assert_not_null(strstr(tfs_dbuf_str(&out), "retries = 7\n"), "the base is kept");
	tfs_dbuf_free(&out);
	tfs_node_volume_clear(&v);
}

/* A volume is never trusted: mount.trusted is false in its daemon's
 * config even when the node's base config (tierfs_conf) sets it. */
Test(volume, tierfs_conf_never_trusted)
{
	struct tfs_node_volume v;
	struct tfs_dbuf out;
	struct tfs_config cfg;
	char base[512], text[1024], conf[512];

	snprintf(base, sizeof(base), "%s/base.conf", tmpdir);
	write_text(base, "[mount]\ntrusted = true\n");
	snprintf(text, sizeof(text), "[node]\ntierfs_conf = %s\n", base);
	node_ok(text);
	vol_ok(&v, "\"source\":\"s3://b/x,suid,dev\"");
	tfs_dbuf_init(&out, 1 << 20);
	cr_assert_eq(tfs_node_volume_tierfs_conf(&v, &node, "/c", NULL, &out, NULL, &err), 0, "%s",
		     tfs_dbuf_str(&err));
	cr_assert_not_null(strstr(tfs_dbuf_str(&out), "[mount]\ntrusted = false\n"), "%s",
			   tfs_dbuf_str(&out));
	snprintf(conf, sizeof(conf), "%s/tierfs.conf", tmpdir);
	write_text(conf, tfs_dbuf_str(&out));
	cr_assert_eq(tfs_config_defaults(&cfg), 0);
	cr_assert_eq(tfs_config_load(&cfg, conf, true, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_not(cfg.mount.trusted);
	tfs_config_clear(&cfg);
	tfs_dbuf_free(&out);
	tfs_node_volume_clear(&v);
	/* Nor can a pod name the key: options are the table's, nothing else. */
	for (const char *o = "mount.trusted\0trusted\0suid\0"; *o; o += strlen(o) + 1) {
		char json[512];

		snprintf(json, sizeof(json), "{\"source\":\"s3://b\",\"%s\":\"true\"}", o);
		cr_assert_eq(fv_volume_parse(json, &node, &v, &err), EINVAL, "%s", json);
		cr_assert(strncmp(tfs_dbuf_str(&err), "unknown option '", 16) == 0, "%s",
			  tfs_dbuf_str(&err));
	}
}

/* ---- tfs_node_secrets ---- */

static void decode_fails(const char *b64, const char *want)
{
	char *out = (char *)"unchanged";

	cr_assert_eq(tfs_node_secret_decode("secretKey", b64, &out, &err), EINVAL, "%s", b64);
	cr_assert_null(out);
	cr_assert_str_eq(tfs_dbuf_str(&err), want);
}

Test(secrets, decode)
{
	char *out;

	cr_assert_eq(tfs_node_secret_decode("accessKey", "QUtJQQ==", &out, &err), 0);
	cr_assert_str_eq(out, "AKIA");
	free(out);
	cr_assert_eq(tfs_node_secret_decode("accessKey", " QUtJQUI=\n", &out, &err), 0);
	cr_assert_str_eq(out, "AKIAB");
	free(out);
	cr_assert_eq(tfs_node_secret_decode("accessKey", "QUtJQUJD", &out, &err), 0);
	cr_assert_str_eq(out, "AKIABC");
	free(out);
	decode_fails("", "secret secretKey: empty");
	decode_fails("QUtJQQ=", "secret secretKey: not base64 (the length is not a multiple of 4)");
	decode_fails("QU*JQQ==", "secret secretKey: not base64 (a character outside A-Z a-z 0-9 + "
				 "/ "
				 "at offset 2)");
	decode_fails("QUtJ\nQQ==", "secret secretKey: not base64 (the length is not a multiple of "
				   "4)");
	/* "a b\n" */
	decode_fails("YSBiCg==", "secret secretKey: decodes to a byte that is not printable ASCII "
				 "(at "
				 "offset 1); a key has no blanks or newlines: encode it with "
				 "'printf %s KEY | base64 -w0'");
}

static void encode(const char *plain, char *b64)
{
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)plain, (int)strlen(plain));
}

Test(secrets, length_limit)
{
	/* An STS session token of a few KiB is fine; the bound is 16383
	 * characters per credentials line ("aws_secret_access_key=" is 22). */
	size_t fit = TFS_NODE_CREDS_MAX_LINE - 22;
	char *plain = malloc(fit + 2), *b64 = malloc(2 * fit + 16), *out;

	memset(plain, 'k', fit + 1);
	plain[fit] = '\0';
	encode(plain, b64);
	cr_assert_eq(tfs_node_secret_decode("secretKey", b64, &out, &err), 0, "%s",
		     tfs_dbuf_str(&err));
	free(out);
	plain[fit] = 'k';
	plain[fit + 1] = '\0';
	encode(plain, b64);
	char want[128];
	snprintf(want, sizeof(want),
		 "secret secretKey: %zu characters long; at most %zu are accepted", fit + 1, fit);
	decode_fails(b64, want);
	free(plain);
	free(b64);
}

Test(secrets, session_token_and_access_key_limits)
{
	/* The limits docs/kubernetes.md, tierfs-flexvolume(8) and
	 * deploy/secret.yaml state: what the daemon's signer sends
	 * (tests/integration/test_flexvolume.py mounts at the limit). */
	static const struct {
		const char *name;
		size_t fit;
	} k[] = {
		{ "sessionToken", 16362 },
		{ "accessKey", 1024 },
		{ "secretKey", 16361 },
	};
	char *plain = malloc(16400), *b64 = malloc(2 * 16400), *out;

	cr_assert_eq(TFS_NODE_SESSION_TOKEN_MAX, 16362);
	cr_assert_eq(TFS_NODE_ACCESS_KEY_MAX, 1024);
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		size_t fit = k[i].fit;

		memset(plain, 'T', fit + 1);
		plain[fit] = '\0';
		encode(plain, b64);
		cr_assert_eq(tfs_node_secret_decode(k[i].name, b64, &out, &err), 0, "%s: %s",
			     k[i].name, tfs_dbuf_str(&err));
		cr_assert_eq(strlen(out), fit);
		free(out);
		plain[fit] = 'T';
		plain[fit + 1] = '\0';
		encode(plain, b64);
		out = (char *)"unchanged";
		cr_assert_eq(tfs_node_secret_decode(k[i].name, b64, &out, &err), EINVAL, "%s",
			     k[i].name);
		cr_assert_null(out);
		char want[128];
		snprintf(want, sizeof(want),
			 "secret %s: %zu characters long; at most %zu are accepted", k[i].name,
			 fit + 1, fit);
		cr_assert_str_eq(tfs_dbuf_str(&err), want);
	}
	free(plain);
	free(b64);
}

Test(secrets, credentials_file)
{
	struct tfs_node_creds c = { strdup("AKIA"), strdup("s/k+e"), strdup("tok") };
	char p[512];
	struct stat st;
	struct tfs_dbuf d;

	snprintf(p, sizeof(p), "%s/credentials", tmpdir);
	cr_assert_eq(tfs_node_creds_write(p, &c, &err), 0, "%s", tfs_dbuf_str(&err));
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	tfs_dbuf_init(&d, 4096);
	cr_assert_eq(tfs_node_read_file(p, &d), 0);
	cr_assert_str_eq(tfs_dbuf_str(&d), "[default]\naws_access_key_id=AKIA\n"
					   "aws_secret_access_key=s/k+e\naws_session_token=tok\n");
	tfs_dbuf_free(&d);
	tfs_node_creds_clear(&c);
	cr_assert_null(c.access_key);
}

/* ---- tfs_node_sys ---- */

Test(sys, hash_and_files)
{
	char h1[TFS_NODE_HASH_LEN + 1], h2[TFS_NODE_HASH_LEN + 1], p[512], q[512];

	cr_assert_eq(tfs_node_hash("/var/lib/kubelet/pods/x", h1, sizeof(h1)), 0);
	cr_assert_eq(tfs_node_hash("/var/lib/kubelet/pods/x", h2, sizeof(h2)), 0);
	cr_assert_str_eq(h1, h2);
	cr_assert_eq(strlen(h1), TFS_NODE_HASH_LEN);
	cr_assert_eq(tfs_node_hash("/var/lib/kubelet/pods/y", h2, sizeof(h2)), 0);
	cr_assert_str_neq(h1, h2);
	cr_assert_eq(tfs_node_hash("x", h2, 10), ERANGE);

	snprintf(p, sizeof(p), "%s/a/b/c", tmpdir);
	cr_assert_eq(tfs_node_mkdirs(p, 0700), 0);
	cr_assert_eq(tfs_node_mkdirs(p, 0700), 0, "exists: fine");
	snprintf(q, sizeof(q), "%s/a/b/c/f", tmpdir);
	cr_assert_eq(tfs_node_write_file(q, "data", 4, 0600), 0);
	cr_assert_eq(tfs_node_mkdirs(q, 0700), ENOTDIR);
	/* A link out of the tree is removed, not followed. */
	char outside[512], link[512];
	snprintf(outside, sizeof(outside), "%s/keep", tmpdir);
	cr_assert_eq(tfs_node_write_file(outside, "k", 1, 0600), 0);
	snprintf(link, sizeof(link), "%s/a/b/link", tmpdir);
	cr_assert_eq(symlink(tmpdir, link), 0);
	snprintf(p, sizeof(p), "%s/a", tmpdir);
	cr_assert_eq(tfs_node_rmtree(p), 0);
	cr_assert_eq(access(p, F_OK), -1);
	cr_assert_eq(access(outside, F_OK), 0, "rmtree followed a link");
	cr_assert_eq(tfs_node_rmtree(p), 0, "missing: fine");
}

/* The fingerprint key: created once, 0600, read back the same; a file
 * that others may read, or a link, is refused and left alone. */
Test(sys, key_file)
{
	unsigned char k1[32], k2[32], zero[32] = { 0 };
	char p[512], link[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/fingerprint.key", tmpdir);
	cr_assert_eq(tfs_node_key_file(p, k1, sizeof(k1)), 0);
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	cr_assert_eq(st.st_size, 32);
	cr_assert_neq(memcmp(k1, zero, sizeof(k1)), 0);
	cr_assert_eq(tfs_node_key_file(p, k2, sizeof(k2)), 0);
	cr_assert_eq(memcmp(k1, k2, sizeof(k1)), 0, "a second call made another key");
	cr_assert_eq(chmod(p, 0644), 0);
	cr_assert_eq(tfs_node_key_file(p, k2, sizeof(k2)), EPERM, "a world-readable key was used");
	cr_assert_eq(chmod(p, 0600), 0);
	cr_assert_eq(tfs_node_key_file(p, k2, 16), EPERM, "a key of another length was used");
	snprintf(link, sizeof(link), "%s/link.key", tmpdir);
	cr_assert_eq(symlink(p, link), 0);
	cr_assert_eq(tfs_node_key_file(link, k2, sizeof(k2)), ELOOP, "a link was followed");
}

Test(sys, run_and_mount_table)
{
	char *argv[] = { "/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL };
	char *env[] = { "PATH=/bin:/usr/bin", NULL };
	struct tfs_dbuf out;
	int status = 0;

	tfs_dbuf_init(&out, 4096);
	cr_assert_eq(tfs_node_run(argv, env, 10000, &out, &status), 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	cr_assert_str_eq(tfs_dbuf_str(&out), "out\nerr\n");
	/* A grandchild that keeps the pipe does not hold us up. */
	char *bg[] = { "/bin/sh", "-c", "sleep 3 & echo started", NULL };
	tfs_dbuf_reset(&out);
	uint64_t t0 = tfs_mono_ms();
	cr_assert_eq(tfs_node_run(bg, env, 10000, &out, &status), 0);
	cr_assert_lt(tfs_mono_ms() - t0, 5000);
	char *slow[] = { "/bin/sh", "-c", "sleep 30", NULL };
	t0 = tfs_mono_ms();
	cr_assert_eq(tfs_node_run(slow, env, 300, &out, &status), ETIMEDOUT);
	cr_assert_lt(tfs_mono_ms() - t0, 5000);
	char *missing[] = { "/nonexistent/binary", NULL };
	cr_assert_eq(tfs_node_run(missing, env, 1000, &out, &status), ENOENT);
	tfs_dbuf_free(&out);

	struct tfs_node_mount_entry me;
	cr_assert_eq(tfs_node_mount_lookup("/", &me), 0);
	cr_assert(me.mounted);
	cr_assert_eq(tfs_node_mount_lookup(tmpdir, &me), 0);
	cr_assert_not(me.mounted);
}
