/* cmd_stats.c - `tierfs stats [--json] MOUNTPOINT`: ask the daemon serving
 * MOUNTPOINT for its statistics over the control socket and print them. */
#include "config.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ctl_client.h"
#include "ctl_path.h"
#include "dbuf.h"
#include "stats_render.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: tierfs stats [--json] MOUNTPOINT\n"
		   "\n"
		   "  --json    print the statistics as JSON\n");
}

int tfs_cmd_stats(int argc, char **argv)
{
	const char *mountpoint = NULL;
	bool json = false, opts = true;
	char sock[TFS_CTL_SOCK_PATH_MAX];
	struct json_object *req = NULL, *cmd = NULL, *result = NULL;
	struct tfs_dbuf err, out;
	int rc, status = TFS_EXIT_FAIL;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (opts && strcmp(a, "--") == 0) {
			opts = false;
		} else if (opts && strcmp(a, "--json") == 0) {
			json = true;
		} else if (opts && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			usage(stdout);
			return TFS_EXIT_OK;
		} else if (opts && a[0] == '-' && a[1] != '\0') {
			fprintf(stderr, "tierfs stats: unknown option '%s'\n", a);
			usage(stderr);
			return TFS_EXIT_CONFIG;
		} else if (mountpoint == NULL) {
			mountpoint = a;
		} else {
			fprintf(stderr, "tierfs stats: unexpected argument '%s'\n", a);
			usage(stderr);
			return TFS_EXIT_CONFIG;
		}
	}
	if (mountpoint == NULL) {
		usage(stderr);
		return TFS_EXIT_CONFIG;
	}

	rc = tfs_ctl_socket_path(mountpoint, sock, sizeof(sock));
	if (rc) {
		fprintf(stderr, "tierfs stats: %s: cannot locate the control socket: %s\n",
			mountpoint, strerror(rc));
		return TFS_EXIT_FAIL;
	}
	req = json_object_new_object();
	cmd = json_object_new_string("stats");
	if (req == NULL || cmd == NULL || json_object_object_add(req, "cmd", cmd) != 0) {
		fprintf(stderr, "tierfs stats: out of memory\n");
		json_object_put(cmd); /* not owned by req when the add failed */
		json_object_put(req);
		return TFS_EXIT_FAIL;
	}

	tfs_dbuf_init(&err, 4096);
	tfs_dbuf_init(&out, 64u << 20);
	rc = tfs_ctl_call(sock, req, &result, &err);
	if (rc) {
		fprintf(stderr, "tierfs stats: %s: %s\n", mountpoint,
			tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		goto out;
	}
	if (json) {
		const char *s = json_object_to_json_string_ext(
			result, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					JSON_C_TO_STRING_NOSLASHESCAPE);
		if (s == NULL) {
			fprintf(stderr, "tierfs stats: out of memory\n");
			goto out;
		}
		fputs(s, stdout);
		fputc('\n', stdout);
	} else {
		if (!json_object_is_type(result, json_type_object)) {
			fprintf(stderr, "tierfs stats: %s: the daemon's result is not an object\n",
				mountpoint);
			goto out;
		}
		rc = tfs_stats_render(result, &out);
		if (rc) {
			fprintf(stderr, "tierfs stats: %s\n", strerror(rc));
			goto out;
		}
		fputs(tfs_dbuf_str(&out), stdout);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "tierfs stats: writing the output: %s\n", strerror(errno));
		goto out;
	}
	status = TFS_EXIT_OK;
out:
	json_object_put(result);
	json_object_put(req);
	tfs_dbuf_free(&out);
	tfs_dbuf_free(&err);
	return status;
}
