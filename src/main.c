/* main.c - the tierfs command line: dispatch to subcommands. */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <expat.h>
#include <fuse_lowlevel.h>
#include <json-c/json_c_version.h>
#include <lmdb.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "commands.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: tierfs [--version] [--help] COMMAND [ARGS]\n"
		   "\n"
		   "commands:\n"
		   "  mount   [-c CONF] [-o OPTIONS] [-f] SOURCE MOUNTPOINT\n"
		   "          mount a bucket (see tierfs mount --help)\n"
		   "  umount  MOUNTPOINT\n"
		   "          upload pending writes, unmount, wait for the daemon to finish\n"
		   "  flush   MOUNTPOINT\n"
		   "          upload every pending write now and wait for it\n"
		   "  reload  MOUNTPOINT\n"
		   "          re-read the configuration and apply it without a remount\n"
		   "  warmup  [-j N] [--tier ssd|ram] [--pin] [--manifest FILE] MOUNTPOINT "
		   "[PATH...]\n"
		   "          fill the cache with files before training (with progress)\n"
		   "  warmup  --follow MANIFEST MOUNTPOINT\n"
		   "          prefetch ahead of a reader that follows MANIFEST's order\n"
		   "  pin     PATH...   /   unpin PATH...\n"
		   "          keep files in the SSD tier whatever the eviction (or stop)\n"
		   "  evict   MOUNTPOINT PATH...\n"
		   "          drop clean cached data of files\n"
		   "  backend [-c CONF] [-o SECTION.KEY=VALUE]... SOURCE OP [ARGS]\n"
		   "          talk to the bucket directly (ls, stat, get, put, rm, cp)\n"
		   "  near    [-c CONF] [-o SECTION.KEY=VALUE]... gc --max-size SIZE [--dry-run]\n"
		   "          [--whole-bucket]\n"
		   "          delete the oldest [near] copies until they take at most SIZE\n"
		   "  config  [-c CONF] [-o SECTION.KEY=VALUE]...\n"
		   "          print the effective configuration\n"
		   "  upgrade MOUNTPOINT\n"
		   "          hand the mount over to the tierfs binary now on disk, without "
		   "unmounting\n"
		   "  stats   [--json] MOUNTPOINT\n"
		   "          statistics of the daemon serving MOUNTPOINT\n"
		   "\n"
		   "SOURCE is s3://bucket[/prefix] or a local directory.\n"
		   "See tierfs(1) and tierfs.conf(5).\n");
}

/* `tierfs --version`: our version, then the version of each library as
 * linked at run time (inih has no version call: the one built against). */
static void version(void)
{
	curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	const XML_Expat_Version xv = XML_ExpatVersionInfo();
	unsigned xx = XXH_versionNumber();
	int lmaj = 0, lmin = 0, lpatch = 0;

	(void)mdb_version(&lmaj, &lmin, &lpatch);
	printf("tierfs %s\n", PACKAGE_VERSION);
	printf("libfuse3 %s (API %d)\n", fuse_pkgversion(), FUSE_USE_VERSION);
	printf("libcurl %s%s%s\n", cv->version, cv->ssl_version ? " with " : "",
	       cv->ssl_version ? cv->ssl_version : "");
	printf("OpenSSL %s\n", OpenSSL_version(OPENSSL_VERSION_STRING));
	printf("LMDB %d.%d.%d\n", lmaj, lmin, lpatch);
	printf("expat %d.%d.%d\n", xv.major, xv.minor, xv.micro);
	printf("json-c %s\n", json_c_version());
	printf("libmicrohttpd %s\n", MHD_get_version());
#ifdef TFS_INIH_VERSION
	printf("inih %s\n", TFS_INIH_VERSION);
#endif
	printf("xxhash %u.%u.%u\n", xx / 10000, xx / 100 % 100, xx % 100);
#ifdef TFS_TEST_HOOKS
	printf("test hooks: compiled in (--enable-test-hooks; not for production)\n");
#endif
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return TFS_EXIT_CONFIG;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		version();
		return TFS_EXIT_OK;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return TFS_EXIT_OK;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "tierfs: libcurl initialisation failed\n");
		return TFS_EXIT_FAIL;
	}
	int rc;
	if (strcmp(cmd, "mount") == 0) {
		rc = tfs_cmd_mount(argc - 1, argv + 1, argv[0]);
	} else if (strcmp(cmd, "umount") == 0 || strcmp(cmd, "unmount") == 0) {
		rc = tfs_cmd_umount(argc - 1, argv + 1);
	} else if (strcmp(cmd, "backend") == 0) {
		rc = tfs_cmd_backend(argc - 1, argv + 1);
	} else if (strcmp(cmd, "near") == 0) {
		rc = tfs_cmd_near(argc - 1, argv + 1);
	} else if (strcmp(cmd, "config") == 0) {
		rc = tfs_cmd_config(argc - 1, argv + 1);
	} else if (strcmp(cmd, "warmup") == 0) {
		rc = tfs_cmd_warmup(argc - 1, argv + 1);
	} else if (strcmp(cmd, "pin") == 0 || strcmp(cmd, "unpin") == 0 ||
		   strcmp(cmd, "evict") == 0) {
		rc = tfs_cmd_pin(argc - 1, argv + 1);
	} else if (strcmp(cmd, "flush") == 0) {
		rc = tfs_cmd_flush(argc - 1, argv + 1);
	} else if (strcmp(cmd, "reload") == 0) {
		rc = tfs_cmd_reload(argc - 1, argv + 1);
	} else if (strcmp(cmd, "upgrade") == 0) {
		rc = tfs_cmd_upgrade(argc - 1, argv + 1);
	} else if (strcmp(cmd, "stats") == 0) {
		rc = tfs_cmd_stats(argc - 1, argv + 1);
	} else {
		fprintf(stderr, "tierfs: unknown command '%s'\n", cmd);
		usage(stderr);
		rc = TFS_EXIT_CONFIG;
	}
	curl_global_cleanup();
	return rc;
}
