/* fuzz_manifest.c - libFuzzer harness for the dataset manifest parser of
 * `tierfs warmup --manifest` / `--follow` (vfs/manifest.h).
 *
 * Input: manifest text (paths, s3:// URLs or JSON lines), parsed under
 * three scopes: an S3 mount with a prefix, an S3 mount without one, and a
 * local directory.
 *
 * Invariants checked besides "no crash, no leak, no UB":
 *  - tfs_manifest_parse returns 0, EFBIG or ENOMEM; on failure *out is all
 *    zero;
 *  - every non-empty line that is not a comment gives exactly one entry,
 *    in order, with its 1-based line number; empty and '#' lines give none;
 *    each entry has either a key or an error; `errors` counts the errors;
 *  - a key is a relative path of non-empty segments, none "." or "..",
 *    without a trailing '/' (nothing escapes the mount), and a plain
 *    relative path line is its own key (after "./");
 *  - max_entries: one less than the entries found gives EFBIG, exactly as
 *    many gives the same entries.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "fuzz_common.h"

#define MAX_LINE (64u * 1024u) /* manifest.c */

static const struct tfs_manifest_scope scopes[] = {
	{ .mountpoint = "/mnt/data", .bucket = "datasets", .prefix = "imagenet" },
	{ .mountpoint = "/mnt/ckpt", .bucket = "ckpt", .prefix = "" },
	{ .mountpoint = "/mnt/local", .bucket = NULL, .prefix = "" },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool is_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

static bool key_ok(const char *k)
{
	const char *p = k;

	if (*k == '\0' || *k == '/' || k[strlen(k) - 1] == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n + (p[n] == '/');
	}
	return true;
}

/* What line [s, s+n) should give: 0 no entry, 1 an entry; *plain gets the
 * key a plain relative path line must have (malloc'd) or NULL. */
static int expect_line(const char *s, size_t n, char **plain)
{
	*plain = NULL;
	if (n > MAX_LINE || memchr(s, '\0', n))
		return 1;
	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	if (n == 0 || s[0] == '#')
		return 0;
	if (s[0] != '{' && s[0] != '/' && !memmem(s, n, "://", 3)) {
		if (n >= 2 && s[0] == '.' && s[1] == '/') {
			s += 2;
			n -= 2;
		}
		*plain = strndup(s, n);
		if (*plain == NULL)
			abort();
	}
	return 1;
}

static void check_manifest(const uint8_t *data, size_t size, const struct tfs_manifest *m,
			   const struct tfs_manifest_scope *sc)
{
	size_t pos = 0, i = 0, errors = 0;
	uint64_t lineno = 0;

	while (pos < size) {
		const uint8_t *nl = memchr(data + pos, '\n', size - pos);
		size_t n = nl ? (size_t)(nl - (data + pos)) : size - pos;
		char *plain;
		int want = expect_line((const char *)data + pos, n, &plain);

		lineno++;
		if (want) {
			CHECK("manifest_entries", i < m->n, "line %llu has no entry (%zu entries)",
			      (unsigned long long)lineno, m->n);
			const struct tfs_manifest_entry *e = &m->v[i++];

			CHECK("manifest_entries", e->line == lineno,
			      "entry %zu is for line %llu, not %llu", i - 1,
			      (unsigned long long)e->line, (unsigned long long)lineno);
			CHECK("manifest_entries", (e->key == NULL) != (e->error == NULL),
			      "line %llu: key %s, error %s", (unsigned long long)lineno,
			      e->key ? "set" : "NULL", e->error ? "set" : "NULL");
			if (e->error) {
				errors++;
				CHECK("manifest_entries", e->error[0] != '\0',
				      "line %llu: an empty error", (unsigned long long)lineno);
			} else {
				CHECK("manifest_key", key_ok(e->key),
				      "line %llu (mount %s): key '%s' is not a clean relative path",
				      (unsigned long long)lineno, sc->mountpoint, e->key);
				if (plain)
					CHECK("manifest_key", strcmp(e->key, plain) == 0,
					      "line %llu: the path '%s' became key '%s'",
					      (unsigned long long)lineno, plain, e->key);
			}
		}
		free(plain);
		pos += n + 1;
	}
	CHECK("manifest_entries", i == m->n, "%zu entries for %zu lines that should have one", m->n,
	      i);
	CHECK("manifest_entries", errors == m->errors, "errors says %zu, %zu entries have one",
	      m->errors, errors);
}

static bool same(const struct tfs_manifest *a, const struct tfs_manifest *b)
{
	if (a->n != b->n || a->errors != b->errors)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct tfs_manifest_entry *x = &a->v[i], *y = &b->v[i];

		if (x->line != y->line || (x->key == NULL) != (y->key == NULL) ||
		    (x->key && strcmp(x->key, y->key) != 0) ||
		    (x->error == NULL) != (y->error == NULL) ||
		    (x->error && strcmp(x->error, y->error) != 0))
			return false;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (size_t s = 0; s < sizeof(scopes) / sizeof(scopes[0]); s++) {
		struct tfs_manifest m, m2;
		int rc;

		memset(&m, 0xa5, sizeof(m));
		rc = tfs_manifest_parse((const char *)data, size, &scopes[s], SIZE_MAX, &m);
		CHECK("manifest_errno", rc == 0 || rc == ENOMEM, "tfs_manifest_parse returned %d",
		      rc);
		if (rc) {
			CHECK("manifest_cleared", is_zero(&m, sizeof(m)), "%s",
			      "a failed parse left data in *out");
			continue;
		}
		check_manifest(data, size, &m, &scopes[s]);

		if (m.n > 0) {
			rc = tfs_manifest_parse((const char *)data, size, &scopes[s], m.n - 1, &m2);
			CHECK("manifest_max", rc == EFBIG || rc == ENOMEM,
			      "%zu entries with max_entries %zu: %d", m.n, m.n - 1, rc);
			CHECK("manifest_cleared", is_zero(&m2, sizeof(m2)), "%s",
			      "a failed parse left data in *out");
			rc = tfs_manifest_parse((const char *)data, size, &scopes[s], m.n, &m2);
			CHECK("manifest_max", rc == 0 || rc == ENOMEM,
			      "%zu entries with max_entries %zu: %d", m.n, m.n, rc);
			if (rc == 0)
				CHECK("manifest_max", same(&m, &m2), "%s",
				      "max_entries changes the entries");
			tfs_manifest_free(&m2);
		}
		tfs_manifest_free(&m);
		CHECK("manifest_cleared", is_zero(&m, sizeof(m)), "%s",
		      "tfs_manifest_free left data");
		tfs_manifest_free(&m);
	}
	return 0;
}
