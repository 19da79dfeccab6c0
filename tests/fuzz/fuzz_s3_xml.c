/* fuzz_s3_xml.c - libFuzzer harness for the S3 XML reply parsers and the
 * time parser (backends/s3_xml.h).
 *
 * Input: one response body, as S3 would send it.  Every parser runs on
 * every input (each checks its root element first, so this is cheap and
 * the corpus is plain XML): ListObjectsV2 (three times, with different
 * strip prefixes), Error (with several buffer sizes),
 * InitiateMultipartUpload, ListMultipartUploads, Complete/Copy ETag, and
 * tfs_s3_parse_time() on the body as a string.
 *
 * Invariants checked besides "no crash, no leak, no UB":
 *  - return codes are 0, EIO or ENOMEM; outputs are untouched/empty on
 *    failure (the page stays zeroed, strings "", upload id NULL, count 0);
 *  - a listing's keys, prefixes and token are NUL-terminated strings no
 *    longer than the parser's text limit, ETags NUL-terminated inside their
 *    array, next_token non-empty when set, and the counts are no more
 *    than the "Contents" / "Prefix" tags in the body;
 *  - strip: the page parsed with strip S is exactly the page parsed
 *    without, filtered to names starting with S, with S removed, in the
 *    same order; strip "" is the same as NULL;
 *  - Error: code/msg truncated into a small buffer are a prefix of the
 *    full values and never end in the middle of a UTF-8 sequence;
 *  - the ETag parser on an <Error> document returns EIO with the same
 *    code/message as the Error parser; at most one parser accepts a body;
 *  - a time tfs_s3_parse_time() accepts converts back (gmtime) to the
 *    date and time written (ISO 8601 with Z or an offset, IMF-fixdate).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "s3_xml.h"
#include "fuzz_common.h"

#define TEXT_MAX (64u * 1024u) /* XP_TEXT_MAX in s3_xml.c */
#define BIG (TEXT_MAX + 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rc(const char *what, int rc)
{
	CHECK("xml_errno", rc == 0 || rc == EIO || rc == ENOMEM, "%s returned %d (%s)", what, rc,
	      strerror(rc));
}

/* Occurrences of needle in data[0..size). */
static size_t count(const uint8_t *data, size_t size, const char *needle)
{
	size_t n = 0, nl = strlen(needle);
	const uint8_t *p = data, *end = data + size;

	while (p < end) {
		const uint8_t *hit = memmem(p, (size_t)(end - p), needle, nl);

		if (hit == NULL)
			break;
		n++;
		p = hit + 1;
	}
	return n;
}

static bool is_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

/* ---- ListObjectsV2 ---- */

static void check_page(const struct tfs_list_page *pg, const uint8_t *data, size_t size)
{
	CHECK("xml_list_counts", pg->n_entries <= count(data, size, "Contents"),
	      "%zu entries from %zu 'Contents' in the body", pg->n_entries,
	      count(data, size, "Contents"));
	CHECK("xml_list_counts", pg->n_prefixes <= count(data, size, "Prefix"),
	      "%zu prefixes from %zu 'Prefix' in the body", pg->n_prefixes,
	      count(data, size, "Prefix"));
	CHECK("xml_list_arrays", pg->n_entries == 0 || pg->entries != NULL, "%s", "entries NULL");
	CHECK("xml_list_arrays", pg->n_prefixes == 0 || pg->prefixes != NULL, "%s",
	      "prefixes NULL");
	for (size_t i = 0; i < pg->n_entries; i++) {
		const struct tfs_list_entry *e = &pg->entries[i];

		CHECK("xml_list_key", e->key != NULL, "entry %zu has no key", i);
		CHECK("xml_list_key", strlen(e->key) <= TEXT_MAX, "entry %zu: a key of %zu bytes",
		      i, strlen(e->key));
		CHECK("xml_list_etag", memchr(e->etag, '\0', sizeof(e->etag)) != NULL,
		      "entry %zu: ETag not NUL-terminated", i);
	}
	for (size_t i = 0; i < pg->n_prefixes; i++) {
		CHECK("xml_list_prefix", pg->prefixes[i] != NULL, "prefix %zu is NULL", i);
		CHECK("xml_list_prefix", strlen(pg->prefixes[i]) <= TEXT_MAX,
		      "prefix %zu: %zu bytes", i, strlen(pg->prefixes[i]));
	}
	CHECK("xml_list_token", pg->next_token == NULL || pg->next_token[0] != '\0', "%s",
	      "an empty next_token");
}

/* pg parsed with strip `s` must be `all` filtered and stripped. */
static void check_stripped(const struct tfs_list_page *all, const struct tfs_list_page *pg,
			   const char *s)
{
	size_t sl = strlen(s), j = 0;

	for (size_t i = 0; i < all->n_entries; i++) {
		const struct tfs_list_entry *a = &all->entries[i];

		if (strncmp(a->key, s, sl) != 0)
			continue;
		CHECK("xml_list_strip", j < pg->n_entries,
		      "strip '%s': entry '%s' missing (%zu entries)", s, a->key, pg->n_entries);
		const struct tfs_list_entry *b = &pg->entries[j++];
		CHECK("xml_list_strip", strcmp(b->key, a->key + sl) == 0,
		      "strip '%s': key '%s' became '%s'", s, a->key, b->key);
		CHECK("xml_list_strip",
		      b->size == a->size && b->mtime == a->mtime && strcmp(b->etag, a->etag) == 0,
		      "strip '%s': the attributes of '%s' differ", s, a->key);
	}
	CHECK("xml_list_strip", j == pg->n_entries, "strip '%s': %zu entries, expected %zu", s,
	      pg->n_entries, j);
	j = 0;
	for (size_t i = 0; i < all->n_prefixes; i++) {
		const char *a = all->prefixes[i];

		if (strncmp(a, s, sl) != 0)
			continue;
		CHECK("xml_list_strip", j < pg->n_prefixes, "strip '%s': prefix '%s' missing", s,
		      a);
		CHECK("xml_list_strip", strcmp(pg->prefixes[j], a + sl) == 0,
		      "strip '%s': prefix '%s' became '%s'", s, a, pg->prefixes[j]);
		j++;
	}
	CHECK("xml_list_strip", j == pg->n_prefixes, "strip '%s': %zu prefixes, expected %zu", s,
	      pg->n_prefixes, j);
	CHECK("xml_list_strip",
	      (all->next_token == NULL) == (pg->next_token == NULL) &&
		      (all->next_token == NULL || strcmp(all->next_token, pg->next_token) == 0),
	      "strip '%s': next_token differs", s);
}

/* Returns true when the body is a listing. */
static bool fuzz_list(const uint8_t *data, size_t size)
{
	struct tfs_list_page all, pg;
	char strip[64];
	int rc, rc2;

	memset(&all, 0, sizeof(all));
	rc = tfs_s3_xml_parse_list((const char *)data, size, NULL, &all);
	check_rc("tfs_s3_xml_parse_list", rc);
	if (rc) {
		CHECK("xml_list_untouched", is_zero(&all, sizeof(all)), "%s",
		      "a failed parse wrote the page");
		return false;
	}
	check_page(&all, data, size);

	/* strip "": the same page */
	memset(&pg, 0, sizeof(pg));
	rc2 = tfs_s3_xml_parse_list((const char *)data, size, "", &pg);
	CHECK("xml_list_strip", rc2 == 0 || rc2 == ENOMEM, "strip '' fails (%d) where NULL works",
	      rc2);
	if (rc2 == 0)
		check_stripped(&all, &pg, "");
	tfs_list_page_clear(&pg);

	/* strip half of the first name (or "pre/") */
	const char *name = all.n_entries    ? all.entries[0].key
			   : all.n_prefixes ? all.prefixes[0]
					    : "pre/";
	size_t n = strlen(name) / 2 + (strlen(name) == 1);
	if (n >= sizeof(strip))
		n = sizeof(strip) - 1;
	memcpy(strip, name, n);
	strip[n] = '\0';
	memset(&pg, 0, sizeof(pg));
	rc2 = tfs_s3_xml_parse_list((const char *)data, size, strip, &pg);
	CHECK("xml_list_strip", rc2 == 0 || rc2 == ENOMEM, "strip '%s' fails (%d) where NULL works",
	      strip, rc2);
	if (rc2 == 0) {
		check_page(&pg, data, size);
		check_stripped(&all, &pg, strip);
	}
	tfs_list_page_clear(&pg);
	tfs_list_page_clear(&all);
	CHECK("xml_list_clear", is_zero(&all, sizeof(all)), "%s",
	      "tfs_list_page_clear left entries");
	return true;
}

/* ---- Error ---- */

/* small must be a prefix of full that ends on a UTF-8 boundary. */
static void check_trunc(const char *what, const char *full, const char *small, size_t cap)
{
	size_t n = strlen(small);

	CHECK("xml_error_trunc", cap == 0 || n < cap, "%s: %zu bytes in a buffer of %zu", what, n,
	      cap);
	CHECK("xml_error_trunc", strncmp(full, small, n) == 0, "%s: '%s' is not a prefix of '%s'",
	      what, small, full);
	if (full[n] != '\0')
		CHECK("xml_error_trunc", ((unsigned char)full[n] & 0xC0) != 0x80,
		      "%s: cut inside a UTF-8 sequence after %zu bytes", what, n);
}

/* Returns true when the body is an <Error>; fills code/msg (BIG each). */
static bool fuzz_error(const uint8_t *data, size_t size, char *code, char *msg)
{
	static const size_t sizes[] = { 1, 2, 3, 8, 33 };
	int rc = tfs_s3_xml_parse_error((const char *)data, size, code, BIG, msg, BIG);

	check_rc("tfs_s3_xml_parse_error", rc);
	if (rc) {
		CHECK("xml_error_cleared", code[0] == '\0' && msg[0] == '\0', "%s",
		      "a failed parse left code or message");
		return false;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t cl = sizes[i], ml = sizes[(i + 2) % 5];
		/* exact-size heap buffers: ASan sees every byte past the end */
		char *c = malloc(cl), *m = malloc(ml);

		if (c == NULL || m == NULL)
			abort();
		rc = tfs_s3_xml_parse_error((const char *)data, size, c, cl, m, ml);
		CHECK("xml_error_trunc", rc == 0 || rc == ENOMEM,
		      "buffers of %zu/%zu bytes make the parse fail (%d)", cl, ml, rc);
		if (rc == 0) {
			check_trunc("code", code, c, cl);
			check_trunc("message", msg, m, ml);
		}
		free(c);
		free(m);
	}
	rc = tfs_s3_xml_parse_error((const char *)data, size, NULL, 0, NULL, 0);
	CHECK("xml_error_trunc", rc == 0 || rc == ENOMEM, "NULL buffers make the parse fail (%d)",
	      rc);
	return true;
}

/* ---- multipart ---- */

static bool fuzz_upload_id(const uint8_t *data, size_t size)
{
	char *id = (char *)"sentinel";
	int rc = tfs_s3_xml_parse_upload_id((const char *)data, size, &id);

	check_rc("tfs_s3_xml_parse_upload_id", rc);
	if (rc) {
		CHECK("xml_upload_id", id == NULL, "%s", "a failed parse left an upload id");
		return false;
	}
	CHECK("xml_upload_id", id != NULL && id[0] != '\0', "%s", "success without an upload id");
	size_t n = strlen(id);
	CHECK("xml_upload_id", n <= TEXT_MAX, "an upload id of %zu bytes", n);
	CHECK("xml_upload_id", !strchr(" \t\r\n", id[0]) && !strchr(" \t\r\n", id[n - 1]),
	      "upload id '%s' is not trimmed", id);
	free(id);
	return true;
}

static bool fuzz_uploads(const uint8_t *data, size_t size)
{
	size_t n = 12345;
	int rc = tfs_s3_xml_parse_uploads((const char *)data, size, &n);

	check_rc("tfs_s3_xml_parse_uploads", rc);
	if (rc) {
		CHECK("xml_uploads", n == 0, "a failed parse says %zu uploads", n);
		return false;
	}
	CHECK("xml_uploads", n <= count(data, size, "Upload"), "%zu uploads from %zu 'Upload'", n,
	      count(data, size, "Upload"));
	return true;
}

/* Returns true when the ETag parser accepts the body. */
static bool fuzz_etag(const uint8_t *data, size_t size, bool is_error, const char *ecode,
		      const char *emsg)
{
	char *etag = malloc(TFS_ETAG_MAX);
	char *code = malloc(BIG), *msg = malloc(BIG);
	int rc;

	if (etag == NULL || code == NULL || msg == NULL)
		abort();
	memset(etag, 'x', TFS_ETAG_MAX);
	rc = tfs_s3_xml_parse_etag((const char *)data, size, etag, code, BIG, msg, BIG);
	check_rc("tfs_s3_xml_parse_etag", rc);
	CHECK("xml_etag", memchr(etag, '\0', TFS_ETAG_MAX) != NULL, "%s",
	      "ETag not NUL-terminated");
	if (rc == 0) {
		size_t n = strlen(etag);

		CHECK("xml_etag",
		      n == 0 || (!strchr(" \t\r\n", etag[0]) && !strchr(" \t\r\n", etag[n - 1])),
		      "ETag '%s' is not trimmed", etag);
	} else {
		CHECK("xml_etag", etag[0] == '\0', "a failed parse left ETag '%s'", etag);
	}
	/* An <Error> document: EIO with what the Error parser reads. */
	if (is_error)
		CHECK("xml_etag_error",
		      rc == EIO && strcmp(code, ecode) == 0 && strcmp(msg, emsg) == 0,
		      "an <Error> gives rc %d, code '%s' (Error parser: '%s')", rc, code, ecode);
	else if (rc == EIO && (code[0] || msg[0]))
		CHECK("xml_etag_error", false, "code '%s' from a body the Error parser refuses",
		      code);
	free(etag);
	free(code);
	free(msg);
	return rc == 0;
}

/* ---- time ---- */

static bool digits(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

static void check_tm(const char *s, int64_t t, int64_t shift, int y, int mo, int d, int h, int mi,
		     int sec)
{
	time_t tt = (time_t)(t + shift);
	struct tm tm;

	if (sec == 60) /* a leap second rolls over into the next minute */
		return;
	CHECK("xml_time", gmtime_r(&tt, &tm) != NULL, "gmtime of %lld", (long long)t);
	CHECK("xml_time",
	      tm.tm_year + 1900 == y && tm.tm_mon + 1 == mo && tm.tm_mday == d && tm.tm_hour == h &&
		      tm.tm_min == mi && tm.tm_sec == sec,
	      "'%s' parsed to %lld = %04d-%02d-%02d %02d:%02d:%02d UTC", s, (long long)t,
	      tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void fuzz_time(const uint8_t *data, size_t size)
{
	static const char *const months[12] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
						"Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	char *s = fuzz_strndup(data, size < 256 ? size : 256);
	const char *p = s;
	int64_t t = 0;
	int y, mo, d, h, mi, sec;

	if (tfs_s3_parse_time(s, &t) != 0) {
		free(s);
		return;
	}
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	/* ISO 8601: YYYY-MM-DDTHH:MM:SS[.f](Z|+hh[:]mm|-hh[:]mm) */
	if (strlen(p) >= 20 && digits(p, 4, &y) && digits(p + 5, 2, &mo) && digits(p + 8, 2, &d) &&
	    digits(p + 11, 2, &h) && digits(p + 14, 2, &mi) && digits(p + 17, 2, &sec)) {
		const char *z = p + 19;
		int64_t off = 0;
		int oh, om;

		if (*z == '.' || *z == ',')
			for (z++; *z >= '0' && *z <= '9'; z++)
				;
		if ((*z == '+' || *z == '-') && digits(z + 1, 2, &oh)) {
			const char *m = z + 3 + (z[3] == ':');

			if (digits(m, 2, &om))
				off = (*z == '-' ? -1 : 1) * (oh * 3600 + om * 60);
		}
		check_tm(s, t, off, y, mo, d, h, mi, sec);
	} else if (strlen(p) >= 29 && p[3] == ',' && digits(p + 5, 2, &d) &&
		   digits(p + 12, 4, &y) && digits(p + 17, 2, &h) && digits(p + 20, 2, &mi) &&
		   digits(p + 23, 2, &sec)) {
		/* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
		for (mo = 0; mo < 12 && strncmp(p + 8, months[mo], 3) != 0; mo++)
			;
		CHECK("xml_time", mo < 12, "month of '%s'", s);
		check_tm(s, t, 0, y, mo + 1, d, h, mi, sec);
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *code = malloc(BIG), *msg = malloc(BIG);
	int accepted = 0;
	bool is_error;

	if (code == NULL || msg == NULL)
		abort();
	accepted += fuzz_list(data, size);
	is_error = fuzz_error(data, size, code, msg);
	accepted += is_error;
	accepted += fuzz_upload_id(data, size);
	accepted += fuzz_uploads(data, size);
	accepted += fuzz_etag(data, size, is_error, code, msg);
	CHECK("xml_one_root", accepted <= 1, "%d parsers accept the same body", accepted);
	fuzz_time(data, size);
	free(code);
	free(msg);
	return 0;
}
