/* main.c - the tierfs command line: dispatch to subcommands. */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <expat.h>
#include <fuse_lowlevel.h>
#include <json-c/json_c_version.h>
#include <lmdb.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "dbuf.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tierfs [--version] [--help] COMMAND [ARGS]\n"
		"\n"
		"commands:\n"
		"  mount   [-c CONF] [-o OPTIONS] [-f] SOURCE MOUNTPOINT\n"
		"          mount a bucket (see tierfs mount --help)\n"
		"  umount  MOUNTPOINT\n"
		"          upload pending writes, unmount, wait for the daemon to finish\n"
		"  flush   MOUNTPOINT\n"
		"          upload every pending write now and wait for it\n"
		"  warmup  [-j N] [--tier ssd|ram] [--pin] [--manifest FILE] MOUNTPOINT [PATH...]\n"
		"          fill the cache with files before training (with progress)\n"
		"  warmup  --follow MANIFEST MOUNTPOINT\n"
		"          prefetch ahead of a reader that follows MANIFEST's order\n"
		"  pin     PATH...   /   unpin PATH...\n"
		"          keep files in the SSD tier whatever the eviction (or stop)\n"
		"  evict   MOUNTPOINT PATH...\n"
		"          drop clean cached data of files\n"
		"  backend [-c CONF] [-o SECTION.KEY=VALUE]... SOURCE OP [ARGS]\n"
		"          talk to the bucket directly (ls, stat, get, put, rm, cp)\n"
		"  config  [-c CONF] [-o SECTION.KEY=VALUE]...\n"
		"          print the effective configuration\n"
		"  stats   [--json] MOUNTPOINT\n"
		"          statistics of the daemon serving MOUNTPOINT\n"
		"\n"
		"SOURCE is s3://bucket[/prefix] or a local directory.\n"
		"See tierfs(1) and tierfs.conf(5).\n");
}

static void version(void)
{
	curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	printf("tierfs %s\n", PACKAGE_VERSION);
	printf("libfuse %s, libcurl %s, %s, LMDB %d.%d.%d, expat %d.%d.%d, json-c %s\n",
	       fuse_pkgversion(), cv->version, OpenSSL_version(OPENSSL_VERSION), MDB_VERSION_MAJOR,
	       MDB_VERSION_MINOR, MDB_VERSION_PATCH, XML_MAJOR_VERSION, XML_MINOR_VERSION,
	       XML_MICRO_VERSION, json_c_version());
}

int tfs_cli_load_config(struct tfs_config *cfg, const char *path, char **overrides,
			size_t n_overrides)
{
	struct tfs_dbuf err;
	int rc;

	tfs_dbuf_init(&err, 4096);
	rc = tfs_config_defaults(cfg);
	if (rc == 0)
		rc = tfs_config_load(cfg, path, path != NULL, &err);
	for (size_t i = 0; rc == 0 && i < n_overrides; i++)
		rc = tfs_config_set(cfg, overrides[i], NULL, &err);
	if (rc == 0)
		rc = tfs_config_validate(cfg, &err);
	if (rc) {
		if (tfs_dbuf_len(&err))
			fprintf(stderr, "tierfs: %s\n", tfs_dbuf_str(&err));
		else
			fprintf(stderr, "tierfs: configuration: %s\n", strerror(rc));
		tfs_config_clear(cfg);
	}
	tfs_dbuf_free(&err);
	return rc ? TFS_EXIT_CONFIG : 0;
}

/* `tierfs config [-c CONF] [-o K=V]...`: print the effective config. */
static int cmd_config(int argc, char **argv)
{
	const char *conf = NULL;
	char **ovr = calloc((size_t)argc, sizeof(*ovr));
	size_t n_ovr = 0;
	struct tfs_config cfg;
	struct tfs_dbuf out;

	if (ovr == NULL)
		return TFS_EXIT_FAIL;
	for (int i = 1; i < argc; i++) {
		if ((strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "-o") == 0) && i + 1 < argc) {
			if (argv[i][1] == 'c')
				conf = argv[++i];
			else
				ovr[n_ovr++] = argv[++i];
		} else {
			fprintf(stderr, "tierfs config: unexpected argument '%s'\n", argv[i]);
			free(ovr);
			return TFS_EXIT_CONFIG;
		}
	}
	int rc = tfs_cli_load_config(&cfg, conf, ovr, n_ovr);
	free(ovr);
	if (rc)
		return rc;
	tfs_dbuf_init(&out, 1u << 20);
	rc = tfs_config_dump(&cfg, true, &out);
	if (rc == 0)
		fputs(tfs_dbuf_str(&out), stdout);
	tfs_dbuf_free(&out);
	tfs_config_clear(&cfg);
	return rc ? TFS_EXIT_FAIL : TFS_EXIT_OK;
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
		rc = tfs_cmd_mount(argc - 1, argv + 1);
	} else if (strcmp(cmd, "umount") == 0 || strcmp(cmd, "unmount") == 0) {
		rc = tfs_cmd_umount(argc - 1, argv + 1);
	} else if (strcmp(cmd, "backend") == 0) {
		rc = tfs_cmd_backend(argc - 1, argv + 1);
	} else if (strcmp(cmd, "config") == 0) {
		rc = cmd_config(argc - 1, argv + 1);
	} else if (strcmp(cmd, "warmup") == 0) {
		rc = tfs_cmd_warmup(argc - 1, argv + 1);
	} else if (strcmp(cmd, "pin") == 0 || strcmp(cmd, "unpin") == 0 || strcmp(cmd, "evict") == 0) {
		rc = tfs_cmd_pin(argc - 1, argv + 1);
	} else if (strcmp(cmd, "flush") == 0) {
		rc = tfs_cmd_flush(argc - 1, argv + 1);
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
