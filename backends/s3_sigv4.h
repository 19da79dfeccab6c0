/* s3_sigv4.h - AWS Signature Version 4 for S3, computed with OpenSSL.
 *
 * S3 flavour: the canonical URI is the path URI-encoded once, segment by
 * segment, with '/' kept and NO normalisation ("//", "." and ".." are
 * signed as they are).  Query names and values are URI-encoded (RFC 3986
 * unreserved characters kept) and sorted by encoded name, then value.
 * Header names are lower-cased, values trimmed with inner runs of spaces
 * collapsed, duplicate names joined with ',' in the order given, and
 * headers sorted by name.
 *
 * All functions are pure (no global state) and thread safe.  On failure
 * the output dbufs are left exactly as they were.
 * Secrets: nothing here logs; callers must not log the outputs except the
 * canonical request and string to sign, which hold no secret.
 */
#ifndef TFS_S3_SIGV4_H
#define TFS_S3_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "dbuf.h"

struct tfs_sigv4_creds {
	const char *access_key;
	const char *secret_key;
	const char *session_token; /* NULL or "" when none */
};

struct tfs_kv {
	const char *name;
	const char *value; /* NULL is treated as "" */
};

struct tfs_sigv4_request {
	const char *method;         /* "GET", "PUT", ... */
	const char *path;           /* raw (not encoded) absolute path, e.g. "/bucket/a b" */
	const struct tfs_kv *query; /* raw (not encoded) query parameters */
	size_t n_query;
	const struct tfs_kv *headers; /* every header to sign; must include "host" */
	size_t n_headers;
	const char *payload_hash; /* lower-case hex SHA-256, or "UNSIGNED-PAYLOAD" */
};

/* Append the URI encoding of `s` to `out`: every byte except A-Z a-z 0-9
 * '-' '.' '_' '~' becomes %XX (upper-case hex); '/' is kept when
 * `keep_slash`.  Returns 0 or the dbuf error. */
int tfs_uri_encode(struct tfs_dbuf *out, const char *s, bool keep_slash);

/* Lower-case hex SHA-256 of `len` bytes into out[65].  Cannot fail. */
void tfs_sha256_hex(const void *data, size_t len, char out[65]);

/* Format `t` as the x-amz-date value "YYYYMMDDTHHMMSSZ" into out[17]. */
void tfs_sigv4_amz_date(time_t t, char out[17]);

/* Build the canonical request (AWS's "CanonicalRequest") into `out` and the
 * ';'-joined signed header names into `signed_headers`.  Both dbufs are
 * appended to.  Returns 0, ENOMEM/EOVERFLOW, or EINVAL when `host` is
 * missing or the request is malformed (method not a token, path not
 * starting with '/', no payload hash, header name not a token, or a control
 * character other than TAB -- e.g. CR/LF -- in a header value). */
int tfs_sigv4_canonical_request(const struct tfs_sigv4_request *req, struct tfs_dbuf *out,
				struct tfs_dbuf *signed_headers);

/* Build the string to sign for `canonical_request` at `amz_date` into `out`.
 * The scope is <date>/<region>/<service>/aws4_request.  Returns 0,
 * ENOMEM/EOVERFLOW, or EINVAL for a malformed date, region or service. */
int tfs_sigv4_string_to_sign(const char *amz_date, const char *region, const char *service,
			     const char *canonical_request, struct tfs_dbuf *out);

/* Compute the full Authorization header value into `authorization`:
 * "AWS4-HMAC-SHA256 Credential=AK/scope, SignedHeaders=..., Signature=hex".
 * `amz_date` must be the same value sent as the x-amz-date header (and
 * included in req->headers when signing; the caller adds it).  Likewise a
 * non-empty creds->session_token must be in req->headers as
 * x-amz-security-token.  Returns 0, EINVAL for missing credentials or host
 * or when either of those headers is absent or differs, or ENOMEM/EOVERFLOW. */
int tfs_sigv4_sign(const struct tfs_sigv4_creds *creds, const char *region, const char *service,
		   const char *amz_date, const struct tfs_sigv4_request *req,
		   struct tfs_dbuf *authorization);

#endif
