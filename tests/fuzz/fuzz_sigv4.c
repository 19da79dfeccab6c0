/* fuzz_sigv4.c - libFuzzer harness for SigV4 canonicalization and signing
 * (backends/s3_sigv4.h).
 *
 * Input (tests/fuzz/make_corpus.py writes seeds in this format):
 *
 *	byte 0   flags: 1 add "x-amz-date: DATE", 2 add "host: ...",
 *	         4 add "x-amz-security-token: TOKEN" (when TOKEN is not empty),
 *	         8 small output buffers (max from byte 1), 16 empty values and
 *	         an empty TOKEN are passed as NULL
 *	byte 1   the small maximum (bytes = 4 * value) for flag 8
 *	rest     NUL-separated fields: METHOD, PATH, PAYLOAD_HASH, REGION,
 *	         SERVICE, ACCESS_KEY, SECRET_KEY, TOKEN, DATE, then NAME, VALUE
 *	         pairs (at most 64): a NAME starting with '?' is a query
 *	         parameter, any other a header.  Missing fields are "".
 *
 * Invariants checked besides "no crash, no leak, no UB":
 *  - tfs_uri_encode: only unreserved bytes, '/' (when kept) and %XX with
 *    upper-case hex; the length is exact; decoding gives the input back;
 *  - the canonical request is exactly METHOD, the encoded path, the
 *    sorted encoded query, one "name:value" line per distinct lower-cased
 *    header name in sorted order (values trimmed, blank runs collapsed,
 *    duplicates joined with ',' in the order given), an empty line, the
 *    signed header list (also returned in signed_headers) and the payload
 *    hash; a reference built here must match byte for byte;
 *  - it fails (EINVAL) exactly when the request is malformed as s3_sigv4.h
 *    says, is deterministic, and does not change when the query is
 *    reordered, the header groups are reordered or the header names
 *    change case;
 *  - small output buffers: EOVERFLOW or the same output, never a partial
 *    one; every failure leaves the output dbufs byte-identical (they are
 *    pre-filled);
 *  - the string to sign and the Authorization value match a reference
 *    computed here with OpenSSL's SHA256()/HMAC(); tfs_sigv4_sign
 *    succeeds exactly when its documented preconditions hold;
 *  - tfs_sigv4_amz_date writes a well-formed YYYYMMDDTHHMMSSZ.
 *
 * TFS_FUZZ_VERBOSE=1 prints what each call returned (for reproducers).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "s3_sigv4.h"
#include "fuzz_common.h"

#define MAX_PAIRS 64
#define BIG (1u << 20)
#define OUT_PREFIX "PREFIX\n"
#define SH_PREFIX "SH;"
#define AUTH_PREFIX "Authorization: "
#define HOST_VALUE "examplebucket.s3.amazonaws.com"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The reference's validators are written from the standards' character
 * tables (RFC 3986 section 2.3, RFC 9110 section 5.6.2, the SigV4 scope
 * rules) as sets and C-locale classes, not copied from s3_sigv4.c, so that
 * the harness checks the code against an independent reading. */
#define DIGITS "0123456789"
#define ALPHA "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
static const char UNRESERVED[] = ALPHA DIGITS "-._~";
static const char TCHARS[] = ALPHA DIGITS "!#$%&'*+-.^_`|~";

static bool is_unreserved(unsigned char c)
{
	return c != '\0' && strchr(UNRESERVED, c) != NULL;
}

/* RFC 9110 token: 1*tchar. */
static bool is_token(const char *s)
{
	return s != NULL && *s != '\0' && s[strspn(s, TCHARS)] == '\0';
}

/* field-value on one line: visible bytes, SP, HTAB and obs-text; no other
 * control byte (C locale: iscntrl is 0x00-0x1f and 0x7f). */
static bool is_field_value(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p != '\t' && *p < 0x80 && iscntrl(*p))
			return false;
	return true;
}

/* A scope word: 1*VCHAR (RFC 5234 appendix B.1: 0x21-0x7e) without the
 * Credential field's separators ',' and '/'. */
static const char SCOPE_CHARS[] = ALPHA DIGITS "!\"#$%&'()*+-.:;<=>?@[\\]^_`{|}~";

static bool is_scope_word(const char *s)
{
	return s != NULL && *s != '\0' && s[strspn(s, SCOPE_CHARS)] == '\0';
}

/* YYYYMMDD "T" HHMMSS "Z", digits only (not a calendar check). */
static bool is_amz_date(const char *s)
{
	return s != NULL && strlen(s) == 16 && strspn(s, DIGITS) == 8 && s[8] == 'T' &&
	       strspn(s + 9, DIGITS) == 6 && s[15] == 'Z';
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static char *lower_dup(const char *s)
{
	char *d = strdup(s);

	if (d == NULL)
		abort();
	for (char *p = d; *p; p++)
		*p = lower(*p);
	return d;
}

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char x[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = x[in[i] >> 4];
		out[2 * i + 1] = x[in[i] & 15];
	}
	out[2 * n] = '\0';
}

/* ---- a reference canonical request ---- */

struct pair {
	char *name;
	char *value;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static void encode(struct tfs_dbuf *d, const char *s, bool keep_slash)
{
	CHECK("sigv4_uri", tfs_uri_encode(d, s, keep_slash) == 0, "%s", "tfs_uri_encode failed");
}

/* Append v trimmed, with inner SP/HTAB runs as one space. */
static void add_trimmed(struct tfs_dbuf *d, const char *v)
{
	bool space = false, any = false;

	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = any;
			continue;
		}
		if (space && tfs_dbuf_addc(d, ' '))
			abort();
		space = false;
		any = true;
		if (tfs_dbuf_addc(d, *v))
			abort();
	}
}

/* The canonical request of req, built the simple way, or NULL when req
 * is malformed (EINVAL). */
static char *reference(const struct tfs_sigv4_request *req, char **signed_headers)
{
	struct tfs_dbuf d, sh;
	struct pair *q;
	char **names;
	size_t nn = 0;
	bool host = false;

	if (!is_token(req->method) || req->path[0] != '/' || req->payload_hash == NULL ||
	    req->payload_hash[0] == '\0' || !is_field_value(req->payload_hash) ||
	    req->n_headers == 0)
		return NULL;
	for (size_t i = 0; i < req->n_headers; i++) {
		const char *v = req->headers[i].value ? req->headers[i].value : "";

		if (!is_token(req->headers[i].name) || !is_field_value(v))
			return NULL;
		char *l = lower_dup(req->headers[i].name);
		host |= strcmp(l, "host") == 0;
		free(l);
	}
	if (!host)
		return NULL;

	tfs_dbuf_init(&d, BIG);
	tfs_dbuf_init(&sh, BIG);
	tfs_dbuf_adds(&d, req->method);
	tfs_dbuf_addc(&d, '\n');
	encode(&d, req->path, true);
	tfs_dbuf_addc(&d, '\n');

	q = calloc(req->n_query + 1, sizeof(*q));
	if (q == NULL)
		abort();
	for (size_t i = 0; i < req->n_query; i++) {
		struct tfs_dbuf e;

		tfs_dbuf_init(&e, BIG);
		encode(&e, req->query[i].name, false);
		q[i].name = tfs_dbuf_steal(&e);
		encode(&e, req->query[i].value ? req->query[i].value : "", false);
		q[i].value = tfs_dbuf_steal(&e);
		tfs_dbuf_free(&e);
	}
	qsort(q, req->n_query, sizeof(*q), cmp_pair);
	for (size_t i = 0; i < req->n_query; i++) {
		tfs_dbuf_addf(&d, "%s%s=%s", i ? "&" : "", q[i].name, q[i].value);
		free(q[i].name);
		free(q[i].value);
	}
	free(q);
	tfs_dbuf_addc(&d, '\n');

	/* distinct lower-case names, sorted */
	names = calloc(req->n_headers, sizeof(*names));
	if (names == NULL)
		abort();
	for (size_t i = 0; i < req->n_headers; i++) {
		char *l = lower_dup(req->headers[i].name);
		size_t j;

		for (j = 0; j < nn && strcmp(names[j], l) != 0; j++)
			;
		if (j < nn)
			free(l);
		else
			names[nn++] = l;
	}
	for (size_t i = 1; i < nn; i++) /* insertion sort: nn is small */
		for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (size_t i = 0; i < nn; i++) {
		bool first = true;

		tfs_dbuf_addf(&d, "%s:", names[i]);
		tfs_dbuf_addf(&sh, "%s%s", i ? ";" : "", names[i]);
		for (size_t j = 0; j < req->n_headers; j++) {
			char *l = lower_dup(req->headers[j].name);

			if (strcmp(l, names[i]) == 0) {
				if (!first)
					tfs_dbuf_addc(&d, ',');
				first = false;
				add_trimmed(&d, req->headers[j].value ? req->headers[j].value : "");
			}
			free(l);
		}
		tfs_dbuf_addc(&d, '\n');
		free(names[i]);
	}
	free(names);
	tfs_dbuf_addf(&d, "\n%s\n%s", tfs_dbuf_str(&sh), req->payload_hash);
	*signed_headers = tfs_dbuf_steal(&sh);
	tfs_dbuf_free(&sh);
	char *s = tfs_dbuf_steal(&d);
	tfs_dbuf_free(&d);
	if (s == NULL || *signed_headers == NULL)
		abort();
	return s;
}

/* ---- checks ---- */

static void check_uri(const char *s, bool keep, size_t small)
{
	struct tfs_dbuf d;
	size_t expect = 0;
	const char *e;
	char *dec, *w;
	int rc;

	for (const char *p = s; *p; p++)
		expect += is_unreserved((unsigned char)*p) || (keep && *p == '/') ? 1 : 3;
	tfs_dbuf_init(&d, BIG);
	rc = tfs_uri_encode(&d, s, keep);
	CHECK("sigv4_uri", rc == 0, "tfs_uri_encode: %d", rc);
	e = tfs_dbuf_str(&d);
	CHECK("sigv4_uri", tfs_dbuf_len(&d) == expect, "'%s' encodes to %zu bytes, not %zu", s,
	      tfs_dbuf_len(&d), expect);
	dec = w = malloc(strlen(e) + 1);
	if (dec == NULL)
		abort();
	for (const char *p = e; *p; p++) {
		if (*p == '%') {
			const char *hx = "0123456789ABCDEF";
			const char *a = p[1] ? strchr(hx, p[1]) : NULL;
			const char *b = a && p[2] ? strchr(hx, p[2]) : NULL;

			CHECK("sigv4_uri", a && b, "bad escape in '%s'", e);
			*w++ = (char)((a - hx) * 16 + (b - hx));
			p += 2;
		} else {
			CHECK("sigv4_uri", is_unreserved((unsigned char)*p) || (keep && *p == '/'),
			      "'%c' left unencoded in '%s'", *p, e);
			*w++ = *p;
		}
	}
	*w = '\0';
	CHECK("sigv4_uri", strcmp(dec, s) == 0, "'%s' decodes to '%s'", e, dec);
	free(dec);

	/* a small buffer: all or nothing */
	if (small) {
		struct tfs_dbuf d2;

		tfs_dbuf_init(&d2, small);
		if (small > 3)
			fuzz_dbuf_set(&d2, "PRE");
		char *before = strdup(tfs_dbuf_str(&d2));
		rc = tfs_uri_encode(&d2, s, keep);
		if (rc) {
			CHECK("sigv4_all_or_nothing", rc == EOVERFLOW && fuzz_dbuf_is(&d2, before),
			      "tfs_uri_encode failed with %d and changed its output", rc);
		} else {
			CHECK("sigv4_all_or_nothing",
			      strncmp(tfs_dbuf_str(&d2), before, strlen(before)) == 0 &&
				      strcmp(tfs_dbuf_str(&d2) + strlen(before), e) == 0,
			      "%s", "tfs_uri_encode into a small buffer differs");
		}
		free(before);
		tfs_dbuf_free(&d2);
	}
	tfs_dbuf_free(&d);
}

/* Run the canonical request into fresh pre-filled dbufs of max `max`.
 * Returns rc; *out and *sh get the appended parts (malloc'd) on success. */
static int canonical(const struct tfs_sigv4_request *req, size_t max, char **out, char **sh)
{
	struct tfs_dbuf o, s;
	int rc;

	*out = *sh = NULL;
	tfs_dbuf_init(&o, max);
	tfs_dbuf_init(&s, max);
	fuzz_dbuf_set(&o, max >= strlen(OUT_PREFIX) ? OUT_PREFIX : "");
	fuzz_dbuf_set(&s, max >= strlen(SH_PREFIX) ? SH_PREFIX : "");
	rc = tfs_sigv4_canonical_request(req, &o, &s);
	CHECK("sigv4_errno", rc == 0 || rc == EINVAL || rc == ENOMEM || rc == EOVERFLOW,
	      "tfs_sigv4_canonical_request returned %d", rc);
	if (rc) {
		CHECK("sigv4_all_or_nothing",
		      fuzz_dbuf_is(&o, max >= strlen(OUT_PREFIX) ? OUT_PREFIX : "") &&
			      fuzz_dbuf_is(&s, max >= strlen(SH_PREFIX) ? SH_PREFIX : ""),
		      "tfs_sigv4_canonical_request failed (%d) and changed its outputs", rc);
	} else {
		size_t po = max >= strlen(OUT_PREFIX) ? strlen(OUT_PREFIX) : 0;
		size_t ps = max >= strlen(SH_PREFIX) ? strlen(SH_PREFIX) : 0;

		CHECK("sigv4_all_or_nothing",
		      strncmp(tfs_dbuf_str(&o), OUT_PREFIX, po) == 0 &&
			      strncmp(tfs_dbuf_str(&s), SH_PREFIX, ps) == 0,
		      "%s", "tfs_sigv4_canonical_request overwrote what its outputs held");
		*out = strdup(tfs_dbuf_str(&o) + po);
		*sh = strdup(tfs_dbuf_str(&s) + ps);
		if (*out == NULL || *sh == NULL)
			abort();
	}
	tfs_dbuf_free(&o);
	tfs_dbuf_free(&s);
	return rc;
}

static void toggle_case(char *s)
{
	for (; *s; s++) {
		if (*s >= 'a' && *s <= 'z')
			*s = (char)(*s - 'a' + 'A');
		else if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
	}
}

/* The same request with the query reversed, the header groups (by
 * lower-cased name) in reverse order of first appearance, and the header
 * names' case toggled: the canonical request must not change. */
static void check_permuted(const struct tfs_sigv4_request *req, int rc0, const char *out0)
{
	struct tfs_kv *q = calloc(req->n_query + 1, sizeof(*q));
	struct tfs_kv *h = calloc(req->n_headers + 1, sizeof(*h));
	char **names = calloc(req->n_headers + 1, sizeof(*names));
	bool *done = calloc(req->n_headers + 1, sizeof(*done));
	struct tfs_sigv4_request r2 = *req;
	size_t k = 0;
	char *out, *sh;
	int rc;

	if (q == NULL || h == NULL || names == NULL || done == NULL)
		abort();
	for (size_t i = 0; i < req->n_query; i++)
		q[i] = req->query[req->n_query - 1 - i];
	/* groups in reverse order of their last member, members in order */
	for (size_t i = req->n_headers; i-- > 0;) {
		if (done[i])
			continue;
		char *li = lower_dup(req->headers[i].name);

		for (size_t j = 0; j < req->n_headers; j++) {
			char *lj = lower_dup(req->headers[j].name);

			if (!done[j] && strcmp(li, lj) == 0) {
				done[j] = true;
				names[k] = strdup(req->headers[j].name);
				if (names[k] == NULL)
					abort();
				toggle_case(names[k]);
				h[k].name = names[k];
				h[k].value = req->headers[j].value;
				k++;
			}
			free(lj);
		}
		free(li);
	}
	r2.query = req->n_query ? q : req->query;
	r2.headers = req->n_headers ? h : req->headers;
	rc = canonical(&r2, BIG, &out, &sh);
	CHECK("sigv4_order", rc == rc0, "reordering the request changes the result from %d to %d",
	      rc0, rc);
	if (rc == 0 && rc0 == 0)
		CHECK("sigv4_order", strcmp(out, out0) == 0,
		      "reordering the request changes the canonical request:\n%s\n---\n%s", out0,
		      out);
	free(out);
	free(sh);
	for (size_t i = 0; i < k; i++)
		free(names[i]);
	free(names);
	free(done);
	free(q);
	free(h);
}

static bool has_header_value(const struct tfs_sigv4_request *req, const char *name,
			     const char *value)
{
	for (size_t i = 0; i < req->n_headers; i++) {
		char *l = lower_dup(req->headers[i].name);
		bool hit = strcmp(l, name) == 0 && req->headers[i].value &&
			   strcmp(req->headers[i].value, value) == 0;

		free(l);
		if (hit)
			return true;
	}
	return false;
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int n = 0;

	if (HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n) ==
		    NULL ||
	    n != 32)
		abort();
}

static void check_amz_date(const uint8_t *data, size_t size)
{
	int64_t t = 0;
	char out[17];

	memcpy(&t, data, size < sizeof(t) ? size : sizeof(t));
	memset(out, 'x', sizeof(out));
	tfs_sigv4_amz_date((time_t)t, out);
	CHECK("sigv4_amz_date", memchr(out, '\0', sizeof(out)) != NULL && is_amz_date(out),
	      "tfs_sigv4_amz_date(%lld) wrote '%.17s'", (long long)t, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *f[9] = { "", "", "", "", "", "", "", "", "" };
	struct tfs_kv query[MAX_PAIRS], headers[MAX_PAIRS + 3];
	size_t nq = 0, nh = 0, nf = 0;
	unsigned flags;
	size_t small;
	char *copy, *p, *end;

	if (size < 2)
		return 0;
	check_amz_date(data, size);
	flags = data[0];
	small = (flags & 8) ? 4u * data[1] : 0;
	copy = fuzz_strndup(data + 2, size - 2);
	end = copy + (size - 2);

	/* split on NULs */
	p = copy;
	for (;;) {
		const char *field = p;
		char *nul = memchr(p, '\0', (size_t)(end - p) + 1);

		if (nf < 9) {
			f[nf++] = field;
		} else if (nq + nh < MAX_PAIRS) {
			const char *value = nul < end ? nul + 1 : "";
			bool as_null = (flags & 16) && *value == '\0';

			if (field[0] == '?')
				query[nq++] = (struct tfs_kv){ field + 1, as_null ? NULL : value };
			else
				headers[nh++] = (struct tfs_kv){ field, as_null ? NULL : value };
			if (nul < end)
				nul = memchr(nul + 1, '\0', (size_t)(end - nul - 1) + 1);
		} else {
			break;
		}
		if (nul >= end)
			break;
		p = nul + 1;
	}
	const char *method = f[0], *path = f[1], *payload = f[2], *region = f[3], *service = f[4];
	const char *date = f[8];
	struct tfs_sigv4_creds creds = {
		.access_key = f[5],
		.secret_key = f[6],
		.session_token = f[7][0] || !(flags & 16) ? f[7] : NULL,
	};
	if (flags & 1)
		headers[nh++] = (struct tfs_kv){ "x-amz-date", date };
	if (flags & 2)
		headers[nh++] = (struct tfs_kv){ "host", HOST_VALUE };
	if ((flags & 4) && f[7][0])
		headers[nh++] = (struct tfs_kv){ "x-amz-security-token", f[7] };

	struct tfs_sigv4_request req = {
		.method = method,
		.path = path,
		.query = query,
		.n_query = nq,
		.headers = headers,
		.n_headers = nh,
		.payload_hash = payload,
	};

	/* URI encoding */
	check_uri(path, true, small);
	check_uri(path, false, small);
	for (size_t i = 0; i < nq && i < 4; i++)
		check_uri(query[i].name, false, 0);

	/* the canonical request against the reference */
	char *sh_ref = NULL;
	char *ref = reference(&req, &sh_ref);
	char *out = NULL, *sh = NULL;
	int rc = canonical(&req, BIG, &out, &sh);

	CHECK("sigv4_reject", (rc == 0) == (ref != NULL),
	      "tfs_sigv4_canonical_request returns %d but the request is %s", rc,
	      ref ? "well-formed" : "malformed");
	if (rc == 0 && ref) {
		CHECK("sigv4_canonical", strcmp(out, ref) == 0,
		      "the canonical request differs from the reference:\n%s\n--- reference:\n%s",
		      out, ref);
		CHECK("sigv4_canonical", strcmp(sh, sh_ref) == 0,
		      "signed headers '%s', expected '%s'", sh, sh_ref);
	}
	{
		char *out2, *sh2;
		int rc2 = canonical(&req, BIG, &out2, &sh2);

		CHECK("sigv4_deterministic",
		      rc2 == rc && (rc || (strcmp(out, out2) == 0 && strcmp(sh, sh2) == 0)), "%s",
		      "the same request gives another result the second time");
		free(out2);
		free(sh2);
	}
	check_permuted(&req, rc, out);
	if (small) {
		char *out3, *sh3;
		int rc3 = canonical(&req, small, &out3, &sh3);

		if (rc)
			CHECK("sigv4_small_buffer", rc3 != 0, "%s",
			      "a malformed request passes with a small buffer");
		else
			CHECK("sigv4_small_buffer",
			      rc3 == EOVERFLOW ||
				      (rc3 == 0 && strcmp(out3, out) == 0 && strcmp(sh3, sh) == 0),
			      "a small buffer gives %d and %s", rc3,
			      rc3 ? "not EOVERFLOW" : "another canonical request");
		free(out3);
		free(sh3);
	}

	/* the string to sign */
	const char *creq = out ? out : path;
	struct tfs_dbuf sts;
	bool sts_ok = is_amz_date(date) && is_scope_word(region) && is_scope_word(service);
	unsigned char md[32];
	char md_hex[65];

	tfs_dbuf_init(&sts, BIG);
	fuzz_dbuf_set(&sts, "STS:");
	int rs = tfs_sigv4_string_to_sign(date, region, service, creq, &sts);
	CHECK("sigv4_reject", (rs == 0) == sts_ok, "tfs_sigv4_string_to_sign returns %d for %s", rs,
	      sts_ok ? "a good scope" : "a bad scope");
	if (rs) {
		CHECK("sigv4_all_or_nothing", fuzz_dbuf_is(&sts, "STS:"), "%s",
		      "a failed string to sign changed its output");
	} else {
		struct tfs_dbuf want;

		SHA256((const unsigned char *)creq, strlen(creq), md);
		hex(md, 32, md_hex);
		tfs_dbuf_init(&want, BIG);
		tfs_dbuf_addf(&want, "STS:AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", date,
			      date, region, service, md_hex);
		CHECK("sigv4_string_to_sign", strcmp(tfs_dbuf_str(&sts), tfs_dbuf_str(&want)) == 0,
		      "string to sign:\n%s\n--- expected:\n%s", tfs_dbuf_str(&sts),
		      tfs_dbuf_str(&want));
		tfs_dbuf_free(&want);
	}

	/* the signature */
	bool sign_ok = is_scope_word(creds.access_key) && creds.secret_key[0] &&
		       is_amz_date(date) && has_header_value(&req, "x-amz-date", date) &&
		       (creds.session_token == NULL || creds.session_token[0] == '\0' ||
			has_header_value(&req, "x-amz-security-token", creds.session_token)) &&
		       rc == 0 && sts_ok;
	for (int round = 0; round < (small ? 2 : 1); round++) {
		struct tfs_dbuf auth;
		size_t max = round ? small : BIG;
		const char *pre = max >= strlen(AUTH_PREFIX) ? AUTH_PREFIX : "";

		tfs_dbuf_init(&auth, max);
		fuzz_dbuf_set(&auth, pre);
		int ra = tfs_sigv4_sign(&creds, region, service, date, &req, &auth);

		CHECK("sigv4_errno", ra == 0 || ra == EINVAL || ra == ENOMEM || ra == EOVERFLOW,
		      "tfs_sigv4_sign returned %d", ra);
		if (getenv("TFS_FUZZ_VERBOSE"))
			fprintf(stderr, "canonical %d, string to sign %d, sign %d (max %zu): %s\n",
				rc, rs, ra, max, tfs_dbuf_str(&auth));
		if (round == 0)
			CHECK("sigv4_reject", (ra == 0) == sign_ok,
			      "tfs_sigv4_sign returns %d where the preconditions %s", ra,
			      sign_ok ? "hold" : "do not hold");
		else
			CHECK("sigv4_small_buffer", ra == EOVERFLOW || (ra == 0) == sign_ok,
			      "tfs_sigv4_sign into a small buffer returns %d", ra);
		if (ra) {
			CHECK("sigv4_all_or_nothing", fuzz_dbuf_is(&auth, pre),
			      "tfs_sigv4_sign failed (%d) and changed its output", ra);
		} else if (sign_ok && rs == 0) {
			/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region),
			 * service), "aws4_request"); signature = HMAC(kSigning, sts) */
			size_t sl = strlen(creds.secret_key);
			unsigned char *k0 = malloc(sl + 4), k1[32], k2[32], sig[32];
			char date8[9], sig_hex[65];
			struct tfs_dbuf want;

			if (k0 == NULL)
				abort();
			memcpy(k0, "AWS4", 4);
			memcpy(k0 + 4, creds.secret_key, sl);
			memcpy(date8, date, 8);
			date8[8] = '\0';
			hmac(k0, sl + 4, date8, k1);
			hmac(k1, 32, region, k2);
			hmac(k2, 32, service, k1);
			hmac(k1, 32, "aws4_request", k2);
			hmac(k2, 32, tfs_dbuf_str(&sts) + strlen("STS:"), sig);
			hex(sig, 32, sig_hex);
			free(k0);
			tfs_dbuf_init(&want, BIG);
			tfs_dbuf_addf(&want,
				      "%sAWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
				      "SignedHeaders=%s, Signature=%s",
				      pre, creds.access_key, date8, region, service, sh, sig_hex);
			CHECK("sigv4_signature",
			      strcmp(tfs_dbuf_str(&auth), tfs_dbuf_str(&want)) == 0,
			      "Authorization:\n%s\n--- expected:\n%s", tfs_dbuf_str(&auth),
			      tfs_dbuf_str(&want));
			tfs_dbuf_free(&want);
		}
		tfs_dbuf_free(&auth);
	}

	tfs_dbuf_free(&sts);
	free(ref);
	free(sh_ref);
	free(out);
	free(sh);
	free(copy);
	return 0;
}
