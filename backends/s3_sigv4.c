/* s3_sigv4.c - AWS Signature Version 4 for S3, computed with OpenSSL 3.
 *
 * Builds the canonical request and string to sign exactly as S3 expects
 * (path encoded once, never normalised) and derives the signature with the
 * kDate/kRegion/kService/kSigning HMAC-SHA256 chain.  Nothing here keeps
 * state between calls; secrets are wiped from memory after use.
 */
#include "config.h"

#include "s3_sigv4.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
#define SIGV4_TERMINATOR "aws4_request"
#define SHA256_LEN 32

/* Upper bound for the scratch buffers tfs_sigv4_sign() builds (canonical
 * request, string to sign, signed header list).  S3 caps request headers
 * at 8 KiB, so this is far above anything legitimate. */
#define SIGV4_SCRATCH_MAX (1024 * 1024)

static const char hex_upper[] = "0123456789ABCDEF";
static const char hex_lower[] = "0123456789abcdef";

/* Undo appends made by a failed call so outputs are all-or-nothing. */
static void dbuf_truncate(struct tfs_dbuf *d, size_t len)
{
	d->len = len;
	if (d->buf)
		d->buf[len] = '\0';
}

static bool is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/* RFC 9110 token character (header names and methods). */
static bool is_tchar(unsigned char c)
{
	if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_token(const char *s)
{
	if (s == NULL || *s == '\0')
		return false;
	for (; *s; s++)
		if (!is_tchar((unsigned char)*s))
			return false;
	return true;
}

static char ascii_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* A value that can go on one line: no control characters except TAB.  This
 * rejects CR/LF, which would otherwise let a value forge extra lines of the
 * canonical request. */
static bool is_field_value(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return false;
	}
	return true;
}

/* A scope element (region, service) or access key: printable ASCII without
 * space, ',' or '/', which would make the Credential field ambiguous. */
static bool is_scope_word(const char *s)
{
	if (s == NULL || *s == '\0')
		return false;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c <= 0x20 || c >= 0x7f || c == ',' || c == '/')
			return false;
	}
	return true;
}

static bool is_amz_date(const char *s)
{
	size_t i;

	if (s == NULL || strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
		return false;
	for (i = 0; i < 15; i++) {
		if (i == 8)
			continue;
		if (s[i] < '0' || s[i] > '9')
			return false;
	}
	return true;
}

static void hex_encode_lower(const unsigned char *in, size_t len, char *out)
{
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = hex_lower[in[i] >> 4];
		out[2 * i + 1] = hex_lower[in[i] & 0x0f];
	}
	out[2 * len] = '\0';
}

int tfs_uri_encode(struct tfs_dbuf *out, const char *s, bool keep_slash)
{
	size_t start = out->len;
	const char *run;
	const char *p;
	int rc;

	if (s == NULL)
		return EINVAL;
	run = s;
	for (p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;
		char esc[3];

		if (is_unreserved(c) || (keep_slash && c == '/'))
			continue;
		rc = tfs_dbuf_add(out, run, (size_t)(p - run));
		if (rc)
			goto fail;
		esc[0] = '%';
		esc[1] = hex_upper[c >> 4];
		esc[2] = hex_upper[c & 0x0f];
		rc = tfs_dbuf_add(out, esc, sizeof(esc));
		if (rc)
			goto fail;
		run = p + 1;
	}
	rc = tfs_dbuf_add(out, run, (size_t)(p - run));
	if (rc)
		goto fail;
	return 0;
fail:
	dbuf_truncate(out, start);
	return rc;
}

void tfs_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;

	if (data == NULL)
		data = "";
	/* EVP_Digest() only fails when OpenSSL cannot allocate its context.
	 * The contract is "cannot fail", and a made-up digest would produce
	 * signatures that are wrong in ways nobody could diagnose, so stop. */
	if (!EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) || md_len != SHA256_LEN)
		abort();
	hex_encode_lower(md, SHA256_LEN, out);
}

void tfs_sigv4_amz_date(time_t t, char out[17])
{
	struct tm tm;

	/* Years outside 0..9999 (tm_year counts from 1900) have no 4-digit
	 * form; a negative one would still fit the 16 bytes, so check first. */
	if (gmtime_r(&t, &tm) == NULL || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900 ||
	    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
		memcpy(out, "00000000T000000Z", 17); /* year not representable */
}

/* ---- canonical request ---- */

struct query_ref {
	const char *name; /* encoded, NUL-terminated, inside the scratch dbuf */
	const char *value;
	size_t idx;
};

struct header_ref {
	const char *name; /* as given; compared case-insensitively */
	const char *value;
	size_t idx;
};

static int cmp_query(const void *a, const void *b)
{
	const struct query_ref *x = a;
	const struct query_ref *y = b;
	int c = strcmp(x->name, y->name);

	if (c == 0)
		c = strcmp(x->value, y->value);
	if (c == 0)
		c = (x->idx > y->idx) - (x->idx < y->idx);
	return c;
}

static int strcmp_lower(const char *a, const char *b)
{
	unsigned char ca;
	unsigned char cb;

	do {
		ca = (unsigned char)ascii_lower(*a++);
		cb = (unsigned char)ascii_lower(*b++);
	} while (ca != '\0' && ca == cb);
	return (ca > cb) - (ca < cb);
}

/* Sort by lower-cased name; equal names keep the order they were given in,
 * which is the order their values are joined in. */
static int cmp_header(const void *a, const void *b)
{
	const struct header_ref *x = a;
	const struct header_ref *y = b;
	int c = strcmp_lower(x->name, y->name);

	if (c == 0)
		c = (x->idx > y->idx) - (x->idx < y->idx);
	return c;
}

static int add_lower(struct tfs_dbuf *out, const char *s)
{
	char chunk[64];
	size_t n = 0;
	int rc;

	for (; *s; s++) {
		chunk[n++] = ascii_lower(*s);
		if (n == sizeof(chunk)) {
			rc = tfs_dbuf_add(out, chunk, n);
			if (rc)
				return rc;
			n = 0;
		}
	}
	return tfs_dbuf_add(out, chunk, n);
}

/* Append `v` trimmed of leading/trailing SP/HTAB, with each inner run of
 * SP/HTAB collapsed to one space. */
static int add_trimmed(struct tfs_dbuf *out, const char *v)
{
	const char *p = v;
	int rc;

	while (is_ows(*p))
		p++;
	while (*p) {
		const char *word = p;

		while (*p && !is_ows(*p))
			p++;
		rc = tfs_dbuf_add(out, word, (size_t)(p - word));
		if (rc)
			return rc;
		while (is_ows(*p))
			p++;
		if (*p) {
			rc = tfs_dbuf_addc(out, ' ');
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int add_canonical_query(const struct tfs_sigv4_request *req, struct tfs_dbuf *out)
{
	struct tfs_dbuf enc;
	struct query_ref *refs;
	size_t *offs;
	size_t i;
	int rc = 0;

	if (req->n_query == 0)
		return 0;
	if (req->query == NULL)
		return EINVAL;

	refs = calloc(req->n_query, sizeof(*refs));
	offs = calloc(req->n_query, 2 * sizeof(*offs));
	if (refs == NULL || offs == NULL) {
		rc = ENOMEM;
		goto out;
	}

	/* Encode every name and value into one scratch buffer, each followed
	 * by a NUL, and only take pointers once the buffer stops moving. */
	tfs_dbuf_init(&enc, out->max);
	for (i = 0; i < req->n_query; i++) {
		const struct tfs_kv *kv = &req->query[i];

		if (kv->name == NULL) {
			rc = EINVAL;
			goto out_enc;
		}
		offs[2 * i] = tfs_dbuf_len(&enc);
		rc = tfs_uri_encode(&enc, kv->name, false);
		if (!rc)
			rc = tfs_dbuf_addc(&enc, '\0');
		if (rc)
			goto out_enc;
		offs[2 * i + 1] = tfs_dbuf_len(&enc);
		rc = tfs_uri_encode(&enc, kv->value ? kv->value : "", false);
		if (!rc)
			rc = tfs_dbuf_addc(&enc, '\0');
		if (rc)
			goto out_enc;
	}
	for (i = 0; i < req->n_query; i++) {
		refs[i].name = tfs_dbuf_str(&enc) + offs[2 * i];
		refs[i].value = tfs_dbuf_str(&enc) + offs[2 * i + 1];
		refs[i].idx = i;
	}
	qsort(refs, req->n_query, sizeof(*refs), cmp_query);

	for (i = 0; i < req->n_query && !rc; i++) {
		if (i > 0)
			rc = tfs_dbuf_addc(out, '&');
		if (!rc)
			rc = tfs_dbuf_adds(out, refs[i].name);
		if (!rc)
			rc = tfs_dbuf_addc(out, '=');
		if (!rc)
			rc = tfs_dbuf_adds(out, refs[i].value);
	}
out_enc:
	tfs_dbuf_free(&enc);
out:
	free(offs);
	free(refs);
	return rc;
}

/* Canonical headers ("name:value\n" per distinct name) into `out`, and the
 * ';'-joined names into `signed_headers`. */
static int add_canonical_headers(const struct tfs_sigv4_request *req, struct tfs_dbuf *out,
				 struct tfs_dbuf *signed_headers)
{
	struct header_ref *refs;
	bool have_host = false;
	size_t i;
	int rc = 0;

	if (req->n_headers == 0 || req->headers == NULL)
		return EINVAL; /* no host */

	refs = calloc(req->n_headers, sizeof(*refs));
	if (refs == NULL)
		return ENOMEM;
	for (i = 0; i < req->n_headers; i++) {
		const struct tfs_kv *kv = &req->headers[i];
		const char *value = kv->value ? kv->value : "";

		if (!is_token(kv->name) || !is_field_value(value)) {
			rc = EINVAL;
			goto out;
		}
		if (strcmp_lower(kv->name, "host") == 0)
			have_host = true;
		refs[i].name = kv->name;
		refs[i].value = value;
		refs[i].idx = i;
	}
	if (!have_host) {
		rc = EINVAL;
		goto out;
	}
	qsort(refs, req->n_headers, sizeof(*refs), cmp_header);

	for (i = 0; i < req->n_headers && !rc; i++) {
		bool first = i == 0 || strcmp_lower(refs[i - 1].name, refs[i].name) != 0;
		bool last = i + 1 == req->n_headers ||
			    strcmp_lower(refs[i].name, refs[i + 1].name) != 0;

		if (first) {
			if (i > 0)
				rc = tfs_dbuf_addc(signed_headers, ';');
			if (!rc)
				rc = add_lower(signed_headers, refs[i].name);
			if (!rc)
				rc = add_lower(out, refs[i].name);
			if (!rc)
				rc = tfs_dbuf_addc(out, ':');
		} else {
			rc = tfs_dbuf_addc(out, ',');
		}
		if (!rc)
			rc = add_trimmed(out, refs[i].value);
		if (!rc && last)
			rc = tfs_dbuf_addc(out, '\n');
	}
out:
	free(refs);
	return rc;
}

int tfs_sigv4_canonical_request(const struct tfs_sigv4_request *req, struct tfs_dbuf *out,
				struct tfs_dbuf *signed_headers)
{
	size_t out_start = out->len;
	size_t sh_start = signed_headers->len;
	int rc;

	if (req == NULL || !is_token(req->method) || req->path == NULL || req->path[0] != '/' ||
	    req->payload_hash == NULL || req->payload_hash[0] == '\0' ||
	    !is_field_value(req->payload_hash))
		return EINVAL;

	rc = tfs_dbuf_adds(out, req->method);
	if (!rc)
		rc = tfs_dbuf_addc(out, '\n');
	if (!rc)
		rc = tfs_uri_encode(out, req->path, true);
	if (!rc)
		rc = tfs_dbuf_addc(out, '\n');
	if (!rc)
		rc = add_canonical_query(req, out);
	if (!rc)
		rc = tfs_dbuf_addc(out, '\n');
	if (!rc)
		rc = add_canonical_headers(req, out, signed_headers);
	if (!rc)
		rc = tfs_dbuf_addc(out, '\n');
	if (!rc)
		rc = tfs_dbuf_add(out, tfs_dbuf_str(signed_headers) + sh_start,
				  signed_headers->len - sh_start);
	if (!rc)
		rc = tfs_dbuf_addc(out, '\n');
	if (!rc)
		rc = tfs_dbuf_adds(out, req->payload_hash);
	if (rc) {
		dbuf_truncate(out, out_start);
		dbuf_truncate(signed_headers, sh_start);
	}
	return rc;
}

/* ---- string to sign and signature ---- */

int tfs_sigv4_string_to_sign(const char *amz_date, const char *region, const char *service,
			     const char *canonical_request, struct tfs_dbuf *out)
{
	size_t start = out->len;
	char hash[65];
	int rc;

	if (!is_amz_date(amz_date) || !is_scope_word(region) || !is_scope_word(service) ||
	    canonical_request == NULL)
		return EINVAL;

	tfs_sha256_hex(canonical_request, strlen(canonical_request), hash);
	rc = tfs_dbuf_adds(out, SIGV4_ALGORITHM "\n");
	if (!rc)
		rc = tfs_dbuf_adds(out, amz_date);
	if (!rc)
		rc = tfs_dbuf_addc(out, '\n');
	if (!rc)
		rc = tfs_dbuf_add(out, amz_date, 8);
	if (!rc)
		rc = tfs_dbuf_addc(out, '/');
	if (!rc)
		rc = tfs_dbuf_adds(out, region);
	if (!rc)
		rc = tfs_dbuf_addc(out, '/');
	if (!rc)
		rc = tfs_dbuf_adds(out, service);
	if (!rc)
		rc = tfs_dbuf_adds(out, "/" SIGV4_TERMINATOR "\n");
	if (!rc)
		rc = tfs_dbuf_adds(out, hash);
	if (rc)
		dbuf_truncate(out, start);
	return rc;
}

static int hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
		       unsigned char out[SHA256_LEN])
{
	unsigned int len = 0;

	if (key_len > INT_MAX)
		return EINVAL;
	if (HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &len) == NULL ||
	    len != SHA256_LEN)
		return ENOMEM;
	return 0;
}

/* signature = hex(HMAC(kSigning, string_to_sign)), where kSigning is
 * HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request"). */
static int compute_signature(const char *secret, const char *date8, const char *region,
			     const char *service, const char *sts, char sig_hex[65])
{
	size_t secret_len = strlen(secret);
	unsigned char k1[SHA256_LEN];
	unsigned char k2[SHA256_LEN];
	unsigned char sig[SHA256_LEN];
	unsigned char *k_secret;
	int rc;

	if (secret_len > SIZE_MAX - 4)
		return EINVAL;
	k_secret = malloc(secret_len + 4);
	if (k_secret == NULL)
		return ENOMEM;
	memcpy(k_secret, "AWS4", 4);
	memcpy(k_secret + 4, secret, secret_len);

	rc = hmac_sha256(k_secret, secret_len + 4, date8, 8, k1);
	if (!rc)
		rc = hmac_sha256(k1, sizeof(k1), region, strlen(region), k2);
	if (!rc)
		rc = hmac_sha256(k2, sizeof(k2), service, strlen(service), k1);
	if (!rc)
		rc = hmac_sha256(k1, sizeof(k1), SIGV4_TERMINATOR, strlen(SIGV4_TERMINATOR), k2);
	if (!rc)
		rc = hmac_sha256(k2, sizeof(k2), sts, strlen(sts), sig);
	if (!rc)
		hex_encode_lower(sig, sizeof(sig), sig_hex);

	OPENSSL_cleanse(k_secret, secret_len + 4);
	free(k_secret);
	OPENSSL_cleanse(k1, sizeof(k1));
	OPENSSL_cleanse(k2, sizeof(k2));
	OPENSSL_cleanse(sig, sizeof(sig));
	return rc;
}

/* Is there a header `name` whose value is exactly `value`? */
static bool has_header_value(const struct tfs_sigv4_request *req, const char *name,
			     const char *value)
{
	size_t i;

	if (req->headers == NULL)
		return false;
	for (i = 0; i < req->n_headers; i++) {
		const struct tfs_kv *kv = &req->headers[i];

		if (kv->name && strcmp_lower(kv->name, name) == 0 && kv->value &&
		    strcmp(kv->value, value) == 0)
			return true;
	}
	return false;
}

int tfs_sigv4_sign(const struct tfs_sigv4_creds *creds, const char *region, const char *service,
		   const char *amz_date, const struct tfs_sigv4_request *req,
		   struct tfs_dbuf *authorization)
{
	struct tfs_dbuf creq;
	struct tfs_dbuf signed_headers;
	struct tfs_dbuf sts;
	size_t start = authorization->len;
	char sig_hex[65];
	int rc;

	if (creds == NULL || !is_scope_word(creds->access_key) || creds->secret_key == NULL ||
	    creds->secret_key[0] == '\0' || req == NULL || !is_amz_date(amz_date))
		return EINVAL;
	/* The date signed over must be the one sent, and a session token only
	 * works when S3 receives it as a signed header. */
	if (!has_header_value(req, "x-amz-date", amz_date))
		return EINVAL;
	if (creds->session_token && creds->session_token[0] != '\0' &&
	    !has_header_value(req, "x-amz-security-token", creds->session_token))
		return EINVAL;

	tfs_dbuf_init(&creq, SIGV4_SCRATCH_MAX);
	tfs_dbuf_init(&signed_headers, SIGV4_SCRATCH_MAX);
	tfs_dbuf_init(&sts, SIGV4_SCRATCH_MAX);

	rc = tfs_sigv4_canonical_request(req, &creq, &signed_headers);
	if (!rc)
		rc = tfs_sigv4_string_to_sign(amz_date, region, service, tfs_dbuf_str(&creq), &sts);
	if (!rc)
		rc = compute_signature(creds->secret_key, amz_date, region, service,
				       tfs_dbuf_str(&sts), sig_hex);
	if (rc)
		goto out;

	rc = tfs_dbuf_adds(authorization, SIGV4_ALGORITHM " Credential=");
	if (!rc)
		rc = tfs_dbuf_adds(authorization, creds->access_key);
	if (!rc)
		rc = tfs_dbuf_addc(authorization, '/');
	if (!rc)
		rc = tfs_dbuf_add(authorization, amz_date, 8);
	if (!rc)
		rc = tfs_dbuf_addc(authorization, '/');
	if (!rc)
		rc = tfs_dbuf_adds(authorization, region);
	if (!rc)
		rc = tfs_dbuf_addc(authorization, '/');
	if (!rc)
		rc = tfs_dbuf_adds(authorization, service);
	if (!rc)
		rc = tfs_dbuf_adds(authorization, "/" SIGV4_TERMINATOR ", SignedHeaders=");
	if (!rc)
		rc = tfs_dbuf_adds(authorization, tfs_dbuf_str(&signed_headers));
	if (!rc)
		rc = tfs_dbuf_adds(authorization, ", Signature=");
	if (!rc)
		rc = tfs_dbuf_adds(authorization, sig_hex);
	if (rc)
		dbuf_truncate(authorization, start);
	OPENSSL_cleanse(sig_hex, sizeof(sig_hex));
out:
	tfs_dbuf_free(&sts);
	tfs_dbuf_free(&signed_headers);
	tfs_dbuf_free(&creq);
	return rc;
}
