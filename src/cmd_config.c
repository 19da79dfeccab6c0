/* cmd_config.c - the configuration as the CLI loads it: for every
 * subcommand that reads tierfs.conf, and for `tierfs config`, which prints
 * the effective configuration. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "dbuf.h"

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

int tfs_cmd_config(int argc, char **argv)
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
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			printf("usage: tierfs config [-c CONF] [-o SECTION.KEY=VALUE]...\n"
			       "\n"
			       "Print the effective configuration: the defaults, then CONF "
			       "(default\n"
			       "%s), then each -o in order, with the origin of\n"
			       "every value that is not a default.  See tierfs.conf(5).\n",
			       tfs_config_default_path());
			free(ovr);
			return TFS_EXIT_OK;
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
