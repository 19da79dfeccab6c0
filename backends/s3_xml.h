/* s3_xml.h - parsers for the XML bodies S3 returns, built on expat.
 *
 * Each parser takes a complete response body (not NUL-terminated; `len`
 * bytes) and fills an output struct that owns its strings.  Entity and
 * character references are decoded by expat; keys come back exactly as
 * stored (spaces, unicode, '+', '%' intact).  When a ListObjectsV2 reply
 * says <EncodingType>url</EncodingType>, Key, Prefix, StartAfter and
 * Delimiter values are percent-decoded as well ('+' is NOT turned into a
 * space: S3 encodes a space as %20).
 *
 * Errors: 0 on success; EIO for malformed XML or a document of the wrong
 * kind (root element mismatch); ENOMEM.  Unknown elements are ignored.
 * No external entities or DTDs are processed (billion-laughs safe: expat
 * >= 2.4 protections apply and DOCTYPE declarations are rejected).
 * Thread safe; no global state.
 */
#ifndef TFS_S3_XML_H
#define TFS_S3_XML_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* <ListBucketResult> from ListObjectsV2.  Fills `out` (zeroed by the
 * caller): entries with key (with the listing's `strip` prefix removed, see
 * below), size, etag and mtime (LastModified parsed as ISO-8601 UTC); common
 * prefixes; and next_token from NextContinuationToken, set only when
 * IsTruncated is true.  Keys and prefixes that do not start with `strip`,
 * or longer than TFS_S3_KEY_MAX bytes (whole, before `strip` is removed),
 * are dropped and counted in out->n_dropped; `strip` may be "" or NULL.
 * A <Size> above INT64_MAX, or IsTruncated without a token, is EIO. */
/* The longest key S3 stores (bytes, UTF-8). */
#define TFS_S3_KEY_MAX 1024u

int tfs_s3_xml_parse_list(const char *body, size_t len, const char *strip,
			  struct tfs_list_page *out);

/* <Error><Code>..</Code><Message>..</Message></Error>.  Copies at most
 * code_len-1 / msg_len-1 bytes (NUL-terminated; "" when absent). */
int tfs_s3_xml_parse_error(const char *body, size_t len, char *code, size_t code_len, char *msg,
			   size_t msg_len);

/* The <Code> and <Region> of an <Error> (AWS names the bucket's region in
 * AuthorizationHeaderMalformed and PermanentRedirect errors).  Copies at
 * most code_len-1 / region_len-1 bytes ("" when absent).  Returns 0, or
 * EIO for a body that is not an <Error> document. */
int tfs_s3_xml_parse_error_region(const char *body, size_t len, char *code, size_t code_len,
				  char *region, size_t region_len);

/* <InitiateMultipartUploadResult><UploadId>.  *upload_id is malloc'd. */
int tfs_s3_xml_parse_upload_id(const char *body, size_t len, char **upload_id);

/* <ListMultipartUploadsResult>: *count is the number of <Upload> elements
 * under the root (0 on error).  Truncation is not reported: callers want
 * the first page only. */
int tfs_s3_xml_parse_uploads(const char *body, size_t len, size_t *count);
/* The same, calling fn(ctx, key, upload_id) for each <Upload> (key as
 * sent, with the bucket's prefix; the strings are borrowed for the call).
 * fn's non-zero return stops the parse and is returned. */
typedef int (*tfs_s3_upload_fn)(void *ctx, const char *key, const char *upload_id);
int tfs_s3_xml_each_upload(const char *body, size_t len, tfs_s3_upload_fn fn, void *ctx,
			   size_t *count);

/* <CompleteMultipartUploadResult><ETag> or <CopyObjectResult><ETag> (the
 * same extractor serves both: the first ETag element under the root).  A
 * 200 reply to CompleteMultipartUpload may still carry an <Error> root: that
 * returns EIO and fills code/msg when they are non-NULL.  etag is "" when
 * the element is empty (Ceph RGW 16 sends an empty ETag). */
int tfs_s3_xml_parse_etag(const char *body, size_t len, char etag[TFS_ETAG_MAX], char *code,
			  size_t code_len, char *msg, size_t msg_len);

/* Parse an ISO-8601 UTC time as S3 writes it ("2024-01-02T03:04:05.000Z")
 * or an RFC 7231 HTTP date ("Tue, 02 Jan 2024 03:04:05 GMT").  Returns 0
 * and seconds since the epoch, or EINVAL. */
int tfs_s3_parse_time(const char *s, int64_t *out);

#endif
