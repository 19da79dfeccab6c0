/* fuzz_conf.c - libFuzzer harness for the configuration (src/conf.h):
 * the INI file parser (tfs_config_load), the -o override parser
 * (tfs_config_set), validation and the dump.
 *
 * Input: the text of a tierfs.conf, optionally followed by a line "--" and
 * then one -o assignment per line ("section.key=value"; at most 16):
 *
 *	[ram]
 *	size = 2G
 *	--
 *	ssd.size=50%
 *
 * The file goes through a memfd (/proc/self/fd/N), so nothing touches the
 * disk.  Invariants checked besides "no crash, no leak, no UB":
 *  - errors are 0, EINVAL or ENOMEM; a failure leaves exactly one line
 *    without control characters, starting with "FILE:" (file) or
 *    "command line: -o " (override); a success leaves no message;
 *  - loading the same file twice gives the same values;
 *  - a refused -o leaves the configuration unchanged (the dump with
 *    origins is byte-identical);
 *  - tfs_config_dump() "reads back to the same values" (conf.h): the dump,
 *    with and without origins, loads without error into a fresh
 *    configuration whose dump is identical, and tfs_config_validate()
 *    gives the same verdict before and after the round trip;
 *  - tfs_config_clear() zeroes the struct and may be called twice.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf.h"
#include "fuzz_common.h"

#define MARKER "\n--\n"
#define MAX_SETS 16

static int conf_fd = -1;
static char conf_path[64];
static char conf_prefix[80]; /* "/proc/self/fd/N:" */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	conf_fd = memfd_create("tierfs.conf", MFD_CLOEXEC);
	if (conf_fd < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(conf_path, sizeof(conf_path), "/proc/self/fd/%d", conf_fd);
	snprintf(conf_prefix, sizeof(conf_prefix), "%s:", conf_path);
	return 0;
}

static void put_file(const void *data, size_t len)
{
	size_t off = 0;

	if (ftruncate(conf_fd, 0) != 0)
		abort();
	while (off < len) {
		ssize_t n = pwrite(conf_fd, (const char *)data + off, len - off, (off_t)off);

		if (n <= 0)
			abort();
		off += (size_t)n;
	}
}

static void check_rc(const char *what, int rc)
{
	CHECK("conf_errno", rc == 0 || rc == EINVAL || rc == ENOMEM, "%s returned %d (%s)", what,
	      rc, strerror(rc));
}

/* The message contract of conf.h.  prefix: what a failure must start
 * with (NULL: anything). */
static void check_msg(const char *what, int rc, const struct tfs_dbuf *err, const char *prefix)
{
	const char *m = tfs_dbuf_str(err);
	const char *bad;

	if (rc == 0) {
		CHECK("conf_message", *m == '\0', "%s succeeded but left a message: %s", what, m);
		return;
	}
	if (rc == ENOMEM)
		return;
	bad = fuzz_bad_message(m);
	CHECK("conf_message", bad == NULL, "%s failed with a message that has %s: '%s'", what,
	      bad ? bad : "", m);
	CHECK("conf_message", prefix == NULL || strncmp(m, prefix, strlen(prefix)) == 0,
	      "%s: the message does not start with '%s': %s", what, prefix ? prefix : "", m);
	CHECK("conf_message", strlen(m) < 4096, "%s: a message of %zu bytes", what, strlen(m));
}

static char *dump(const struct tfs_config *cfg, bool origins)
{
	struct tfs_dbuf d;
	int rc;
	char *s;

	tfs_dbuf_init(&d, 1 << 20);
	rc = tfs_config_dump(cfg, origins, &d);
	CHECK("conf_dump", rc == 0, "tfs_config_dump failed: %s", strerror(rc));
	s = tfs_dbuf_steal(&d);
	if (s == NULL)
		abort();
	tfs_dbuf_free(&d);
	return s;
}

/* The first line where a and b differ, for messages. */
static void first_difference(const char *a, const char *b, char *out, size_t cap)
{
	const char *la = a, *lb = b;

	while (*la && *lb) {
		size_t na = strcspn(la, "\n"), nb = strcspn(lb, "\n");

		if (na != nb || memcmp(la, lb, na) != 0)
			break;
		la += na + (la[na] == '\n');
		lb += nb + (lb[nb] == '\n');
	}
	snprintf(out, cap, "before: '%.*s' / after: '%.*s'", (int)strcspn(la, "\n"), la,
		 (int)strcspn(lb, "\n"), lb);
}

/* Load `text` into a fresh configuration: it must load, dump to `expect`
 * and validate as before (`valid`). */
static void round_trip(const char *text, const char *what, const char *expect, bool valid)
{
	struct tfs_config c2;
	struct tfs_dbuf err;
	char diff[1024];
	int rc;

	tfs_dbuf_init(&err, 65536);
	put_file(text, strlen(text));
	rc = tfs_config_defaults(&c2);
	CHECK("conf_defaults", rc == 0, "tfs_config_defaults: %s", strerror(rc));
	rc = tfs_config_load(&c2, conf_path, true, &err);
	CHECK("conf_dump_reloads", rc == 0 || rc == ENOMEM,
	      "the %s does not load back: %s\n--- the %s:\n%s", what, tfs_dbuf_str(&err), what,
	      text);
	if (rc == 0) {
		char *d2 = dump(&c2, false);

		first_difference(expect, d2, diff, sizeof(diff));
		CHECK("conf_dump_roundtrip", strcmp(d2, expect) == 0,
		      "the %s loads back to other values: %s", what, diff);
		free(d2);
		rc = tfs_config_validate(&c2, &err);
		CHECK("conf_validate_stable", (rc == 0) == valid,
		      "tfs_config_validate %s before the round trip through the %s and %s after: "
		      "%s",
		      valid ? "passes" : "fails", what, rc == 0 ? "passes" : "fails",
		      tfs_dbuf_str(&err));
	}
	tfs_config_clear(&c2);
	tfs_dbuf_free(&err);
}

static void check_cleared(const struct tfs_config *cfg)
{
	static const struct tfs_config zero;

	CHECK("conf_clear", memcmp(cfg, &zero, sizeof(zero)) == 0, "%s",
	      "tfs_config_clear left a non-zero struct");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a line "--" (the first line or after a newline) ends the file */
	const uint8_t *mark = memmem(data, size, MARKER, strlen(MARKER));
	size_t flen = mark ? (size_t)(mark + 1 - data) : size;
	const char *opts = mark ? (const char *)mark + strlen(MARKER) : NULL;

	if (size >= 3 && memcmp(data, &MARKER[1], 3) == 0) {
		flen = 0;
		opts = (const char *)data + 3;
	}
	struct tfs_config cfg;
	struct tfs_dbuf err;
	bool valid;
	int rc;

	tfs_dbuf_init(&err, 65536);
	rc = tfs_config_defaults(&cfg);
	CHECK("conf_defaults", rc == 0, "tfs_config_defaults: %s", strerror(rc));

	/* the file */
	put_file(data, flen);
	rc = tfs_config_load(&cfg, conf_path, true, &err);
	check_rc("tfs_config_load", rc);
	check_msg("tfs_config_load", rc, &err, conf_prefix);
	if (rc == 0) {
		char *a, *b;

		CHECK("conf_path", cfg.path && strcmp(cfg.path, conf_path) == 0, "cfg.path is %s",
		      cfg.path ? cfg.path : "NULL");
		a = dump(&cfg, false);
		rc = tfs_config_load(&cfg, conf_path, true, &err);
		CHECK("conf_load_idempotent", rc == 0, "the same file fails the second time: %s",
		      tfs_dbuf_str(&err));
		b = dump(&cfg, false);
		CHECK("conf_load_idempotent", strcmp(a, b) == 0, "%s",
		      "loading the same file twice changes the values");
		free(a);
		free(b);
	} else {
		/* go on with the overrides on the defaults */
		tfs_config_clear(&cfg);
		rc = tfs_config_defaults(&cfg);
		CHECK("conf_defaults", rc == 0, "tfs_config_defaults: %s", strerror(rc));
	}

	/* the -o overrides */
	if (opts) {
		const char *p = opts;
		const char *end = (const char *)data + size;

		for (int i = 0; i < MAX_SETS; i++) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
			char *line = fuzz_strndup((const uint8_t *)p, len);
			char *before = dump(&cfg, true);

			rc = tfs_config_set(&cfg, line, NULL, &err);
			check_rc("tfs_config_set", rc);
			check_msg("tfs_config_set", rc, &err, "command line: -o ");
			if (rc == EINVAL) {
				char *after = dump(&cfg, true);
				char diff[1024];

				first_difference(before, after, diff, sizeof(diff));
				CHECK("conf_set_atomic", strcmp(before, after) == 0,
				      "a refused -o changed the configuration: %s", diff);
				free(after);
			}
			free(before);
			free(line);
			if (nl == NULL)
				break;
			p = nl + 1;
		}
	}

	/* validation, and the dump read back */
	rc = tfs_config_validate(&cfg, &err);
	CHECK("conf_errno", rc == 0 || rc == EINVAL, "tfs_config_validate returned %d", rc);
	check_msg("tfs_config_validate", rc, &err, NULL);
	valid = rc == 0;
	{
		char *plain = dump(&cfg, false);
		char *origins = dump(&cfg, true);

		round_trip(plain, "dump", plain, valid);
		round_trip(origins, "dump with origins", plain, valid);
		free(plain);
		free(origins);
	}

	tfs_config_clear(&cfg);
	check_cleared(&cfg);
	tfs_config_clear(&cfg);
	check_cleared(&cfg);
	tfs_dbuf_free(&err);
	return 0;
}
