/* test_s3_retry.c - the S3 backend's retries, error mapping and request
 * shape, against a scripted HTTP server on loopback. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "backend.h"
#include "log.h"
#include "mini_http.h"

/* S3 sends an ETag with every object reply; one without was cut short. */
#define ETAG "ETag: \"e\"\r\n"
/* ... and a 206 says which bytes it holds. */
#define RANGE(a, b, t) "Content-Range: bytes " #a "-" #b "/" #t "\r\n"
#include "s3.h"

static struct tfs_log tlog;
static struct mini_http *srv;
static struct tfs_backend *be;

#define R(...) ((struct mini_resp){ .content_length = -1, .truncate_after = -1, __VA_ARGS__ })

static void setup(void)
{
	int port;
	char endpoint[64];
	tfs_log_init_stderr(&tlog, TFS_LOG_ERROR);
	setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	unsetenv("AWS_SESSION_TOKEN");
	srv = mini_http_start(&port);
	cr_assert_not_null(srv);
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
	struct tfs_s3_config c = {
		.endpoint = endpoint,
		.region = "eu-west-3",
		.path_style = TFS_S3_PATH_ON,
		.bucket = "bkt",
		.prefix = "pre/",
		.connect_timeout_ms = 1000,
		.low_speed_time_s = 5,
		.low_speed_limit = 1,
		.retries = 3,
		.retry_base_ms = 1,
		.retry_max_ms = 4,
		.multipart_threshold = 64u << 20,
		.part_size = 8u << 20,
		.upload_parallel = 1, /* parts in a fixed order, for the scripts */
		.copy_part_size = 5u << 20,
		.max_connections = 4,
	};
	cr_assert_eq(tfs_s3_create(&c, &tlog, &be), 0);
}

/* Bodies built by a test: the server reads them until it stops. */
static char *owned_body;

static void teardown(void)
{
	tfs_backend_destroy(be);
	mini_http_stop(srv);
	free(owned_body);
	owned_body = NULL;
}

TestSuite(s3_retry, .init = setup, .fini = teardown, .timeout = 30);

Test(s3_retry, server_error_is_retried_then_succeeds)
{
	mini_http_push(srv, R(.status = 500, .body = "<Error><Code>InternalError</Code></Error>"));
	mini_http_push(srv, R(.status = 503, .body = "<Error><Code>SlowDown</Code></Error>"));
	mini_http_push(srv, R(.status = 206, .headers = "ETag: \"abc\"\r\n" RANGE(0, 4, 5),
			      .body = "hello"));
	char buf[16], etag[TFS_ETAG_MAX];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 5, NULL, tfs_io_buf(buf), &got, etag), 0);
	cr_assert_eq(got, 5);
	cr_assert_eq(memcmp(buf, "hello", 5), 0);
	cr_assert_str_eq(etag, "\"abc\"");
	cr_assert_eq(mini_http_count(srv), 3);
}

Test(s3_retry, retries_are_bounded_then_eio)
{
	for (int i = 0; i < 4; i++)
		mini_http_push(srv, R(.status = 503, .body = "<Error><Code>SlowDown</Code></"
							     "Error>"));
	mini_http_push(srv, R(.status = 200, .body = "too late"));
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "k", &m), EIO);
	cr_assert_eq(mini_http_count(srv), 4, "1 try + 3 retries expected");
}

Test(s3_retry, client_errors_are_not_retried)
{
	mini_http_push(srv, R(.status = 404, .body = "<Error><Code>NoSuchKey</Code></Error>"));
	mini_http_push(srv, R(.status = 403, .body = "<Error><Code>AccessDenied</Code></Error>"));
	mini_http_push(srv, R(.status = 412, .body = "<Error><Code>PreconditionFailed</Code></"
						     "Error>"));
	char buf[4];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "a", 0, 4, NULL, tfs_io_buf(buf), &got, NULL),
		     ENOENT);
	cr_assert_eq(tfs_backend_get_range(be, "b", 0, 4, NULL, tfs_io_buf(buf), &got, NULL),
		     EACCES);
	cr_assert_eq(tfs_backend_get_range(be, "c", 0, 4, "\"x\"", tfs_io_buf(buf), &got, NULL),
		     ESTALE);
	cr_assert_eq(mini_http_count(srv), 3);
	cr_assert_not_null(strcasestr(mini_http_request(srv, 2), "\r\nif-match: \"x\"\r\n"));
}

Test(s3_retry, request_timeout_is_retried)
{
	mini_http_push(srv, R(.status = 400, .body = "<Error><Code>RequestTimeout</Code></Error>"));
	mini_http_push(srv, R(.status = 200, .headers = "ETag: \"e\"\r\n", .body = ""));
	cr_assert_eq(tfs_backend_put(be, "k", tfs_io_cbuf("data"), 4, NULL, NULL), 0);
	cr_assert_eq(mini_http_count(srv), 2);
}

Test(s3_retry, truncated_body_is_retried_never_served)
{
	mini_http_push(srv, R(.status = 206, .headers = ETAG RANGE(0, 9, 10), .body = "0123456789",
			      .truncate_after = 4));
	mini_http_push(srv,
		       R(.status = 206, .headers = ETAG RANGE(0, 9, 10), .body = "0123456789"));
	char buf[10];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 10, NULL, tfs_io_buf(buf), &got, NULL), 0);
	cr_assert_eq(got, 10);
	cr_assert_eq(memcmp(buf, "0123456789", 10), 0);
	cr_assert_eq(mini_http_count(srv), 2);
}

struct seen {
	char order[8];
	int n;
	char *bufs[3];
};

/* Report callback: record the order, then scribble over the buffer, as a
 * reader could not, to show a retry never writes into it again. */
static void on_done(void *ctx, int i)
{
	struct seen *s = ctx;
	s->order[s->n++] = (char)('0' + i);
	memset(s->bufs[i], '#', 4);
}

Test(s3_retry, scattered_get_reports_buffers_as_they_fill_and_a_retry_spares_them)
{
	/* 3 buffers of 4 bytes; the first reply is cut after 6 bytes: buffer
	 * 0 is whole (reported), buffer 1 is not. */
	mini_http_push(srv, R(.status = 206, .headers = ETAG RANGE(0, 11, 12),
			      .body = "abcdefghijkl", .truncate_after = 6));
	mini_http_push(srv,
		       R(.status = 206, .headers = ETAG RANGE(0, 11, 12), .body = "abcdefghijkl"));
	char b0[4], b1[4], b2[4];
	struct iovec iov[3] = { { b0, 4 }, { b1, 4 }, { b2, 4 } };
	struct seen seen = { .bufs = { b0, b1, b2 } };
	struct tfs_io_progress prog = { .done = on_done, .ctx = &seen };
	struct tfs_io dst = tfs_io_iov(iov, 3);
	dst.progress = &prog;
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 12, "\"e\"", dst, &got, NULL), 0);
	cr_assert_eq(got, 12);
	cr_assert_eq(mini_http_count(srv), 2);
	cr_assert_eq(seen.n, 3);
	cr_assert_eq(memcmp(seen.order, "012", 3), 0, "each buffer once, in order");
	cr_assert_eq(prog.ndone, 3);
	cr_assert_eq(prog.done_bytes, 12);
	cr_assert_eq(memcmp(b0, "####", 4), 0, "the retry rewrote a reported buffer");
	cr_assert_eq(memcmp(b1, "####", 4), 0);
}

Test(s3_retry, scattered_get_error_reports_nothing_it_did_not_get)
{
	mini_http_push(srv, R(.status = 412, .body = "<Error><Code>PreconditionFailed</Code></"
						     "Error>"));
	char b0[4], b1[4];
	struct iovec iov[2] = { { b0, 4 }, { b1, 4 } };
	struct seen seen = { .bufs = { b0, b1 } };
	struct tfs_io_progress prog = { .done = on_done, .ctx = &seen };
	struct tfs_io dst = tfs_io_iov(iov, 2);
	dst.progress = &prog;
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 8, "\"e\"", dst, &got, NULL), ESTALE);
	cr_assert_eq(seen.n, 0, "an error body must not count as data");
}

/* A ListObjectsV2 page of `n` keys of about 200 characters (prefix pre/). */
static char *big_listing(int n)
{
	size_t cap = (size_t)n * 400 + 512, len = 0;
	char *x = malloc(cap);
	cr_assert_not_null(x);
	len += (size_t)snprintf(x + len, cap - len,
				"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult "
				"xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
				"<IsTruncated>false</IsTruncated>");
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(x + len, cap - len,
					"<Contents><Key>pre/%0200d</Key><ETag>\"e\"</"
					"ETag><Size>%d</Size>"
					"<LastModified>2026-11-21T21:59:38.000Z</LastModified></"
					"Contents>",
					i, i);
	snprintf(x + len, cap - len, "<KeyCount>%d</KeyCount></ListBucketResult>", n);
	return x;
}

Test(s3_retry, a_listing_page_of_long_keys_is_read_whole)
{
	/* 1000 keys of 200 characters: about 250 KiB of XML, which the
	 * 64 KiB cap for error bodies used to cut (then: malformed, EIO). */
	char *body = owned_body = big_listing(1000);
	mini_http_push(srv, R(.status = 200, .body = body));
	struct tfs_list_page page = { 0 };
	cr_assert_eq(tfs_backend_list(be, "", NULL, NULL, 0, &page), 0);
	cr_assert_eq(page.n_entries, 1000);
	cr_assert_eq(page.entries[999].size, 999);
	cr_assert_eq(strlen(page.entries[999].key), 200);
	tfs_list_page_clear(&page);
}

Test(s3_retry, a_reply_over_the_limit_fails_and_is_not_cut)
{
	char *body = owned_body = malloc((17u << 20) + 1);
	cr_assert_not_null(body);
	memset(body, ' ', 17u << 20);
	body[17u << 20] = '\0';
	mini_http_push(srv, R(.status = 200, .body = body));
	struct tfs_list_page page = { 0 };
	cr_assert_eq(tfs_backend_list(be, "", NULL, NULL, 0, &page), EIO);
	cr_assert_eq(mini_http_count(srv), 1, "not a server fault: not retried");
}

Test(s3_retry, reply_cut_in_its_headers_is_retried)
{
	/* A connection closed inside the header block looks complete to curl:
	 * no ETag means the reply was cut, so it is retried, not read as
	 * "0 bytes: the object changed". */
	mini_http_push(srv, R(.status = 206, .headers = RANGE(0, 9, 10), .body = "0123456789"));
	mini_http_push(srv,
		       R(.status = 206, .headers = ETAG RANGE(0, 9, 10), .body = "0123456789"));
	char buf[10];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 10, NULL, tfs_io_buf(buf), &got, NULL), 0);
	cr_assert_eq(got, 10);
	cr_assert_eq(mini_http_count(srv), 2);
}

Test(s3_retry, truncated_body_after_retries_is_eio)
{
	for (int i = 0; i < 4; i++)
		mini_http_push(srv, R(.status = 206, .headers = ETAG RANGE(0, 9, 10),
				      .body = "0123456789", .truncate_after = 3));
	char buf[10];
	size_t got = 77;
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 10, NULL, tfs_io_buf(buf), &got, NULL), EIO);
	cr_assert_eq(got, 0);
}

Test(s3_retry, ignored_range_header_still_gives_the_right_bytes)
{
	/* A server that ignores Range replies 200 with the whole object. */
	mini_http_push(srv, R(.status = 200, .headers = ETAG, .body = "abcdefghijklmnop"));
	char buf[4];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "k", 5, 4, NULL, tfs_io_buf(buf), &got, NULL), 0);
	cr_assert_eq(got, 4);
	cr_assert_eq(memcmp(buf, "fghi", 4), 0);
}

Test(s3_retry, request_is_signed_and_path_encoded)
{
	mini_http_push(srv, R(.status = 200,
			      .headers = "ETag: \"e\"\r\nx-amz-meta-mode: 33188\r\n"
					 "Last-Modified: Tue, 02 Jan 2024 03:04:05 GMT\r\n",
			      .content_length = 42));
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "a b/+%/\xc3\xa9", &m), 0);
	cr_assert_eq(m.size, 42);
	cr_assert_eq(m.mtime, 1704164645);
	cr_assert_str_eq(tfs_obj_meta_get(&m, "mode") ?: "", "33188");
	tfs_obj_meta_clear(&m);
	const char *req = mini_http_request(srv, 0);
	cr_assert_not_null(req);
	cr_assert_eq(strncmp(req, "HEAD /bkt/pre/a%20b/%2B%25/%C3%A9 HTTP/1.1\r\n", 44), 0, "%s",
		     req);
	cr_assert_not_null(strstr(req, "Authorization: AWS4-HMAC-SHA256 Credential=AKIDTEST/"));
	cr_assert_not_null(strstr(req, "/eu-west-3/s3/aws4_request, "
				       "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
				       "Signature="));
	cr_assert_not_null(strstr(req, "x-amz-content-sha256: "
				       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b785"
				       "2b855\r\n"));
	cr_assert_null(strstr(req, "secret"), "the secret key was sent");
}

Test(s3_retry, connection_is_reused)
{
	mini_http_push(srv, R(.status = 200, .headers = "ETag: \"e\"\r\n", .content_length = 1));
	mini_http_push(srv, R(.status = 200, .headers = "ETag: \"e\"\r\n", .content_length = 1));
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "a", &m), 0);
	tfs_obj_meta_clear(&m);
	cr_assert_eq(tfs_backend_head(be, "b", &m), 0);
	tfs_obj_meta_clear(&m);
	cr_assert_eq(mini_http_connections(srv), 1, "the second request opened a new connection");
	cr_assert_eq(mini_http_count(srv), 2);
}

/* Hostile replies (issue 16): a 206 must hold the range asked for. */
Test(s3_retry, a_206_of_another_range_is_refused)
{
	char buf[10];
	size_t got;
	/* shifted by one byte, same length */
	mini_http_push(srv,
		       R(.status = 206, .headers = ETAG RANGE(1, 10, 100), .body = "0123456789"));
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 10, NULL, tfs_io_buf(buf), &got, NULL), EIO);
	cr_assert_eq(got, 0);
	/* shorter, though the object does not end there */
	mini_http_push(srv, R(.status = 206, .headers = ETAG RANGE(0, 4, 100), .body = "01234"));
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 10, NULL, tfs_io_buf(buf), &got, NULL), EIO);
	/* no Content-Range at all */
	mini_http_push(srv, R(.status = 206, .headers = ETAG, .body = "0123456789"));
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 10, NULL, tfs_io_buf(buf), &got, NULL), EIO);
	/* a total beyond 2^63-1 */
	mini_http_push(srv, R(.status = 206, .headers = ETAG RANGE(0, 9, 18446744073709551615),
			      .body = "0123456789"));
	cr_assert_eq(tfs_backend_get_range(be, "k", 0, 10, NULL, tfs_io_buf(buf), &got, NULL), EIO);
	cr_assert_eq(mini_http_count(srv), 4, "a refused reply is not retried");

	/* shorter because the object ends there: fine */
	mini_http_push(srv, R(.status = 206, .headers = ETAG RANGE(5, 9, 10), .body = "56789"));
	cr_assert_eq(tfs_backend_get_range(be, "k", 5, 10, NULL, tfs_io_buf(buf), &got, NULL), 0);
	cr_assert_eq(got, 5);
	cr_assert_eq(memcmp(buf, "56789", 5), 0);
}

Test(s3_retry, a_whole_object_200_must_cover_the_range)
{
	/* A 200 to a ranged GET is the whole object: its Content-Length says
	 * how many bytes of the range there must be. */
	mini_http_push(srv, R(.status = 200, .headers = ETAG, .body = "abcdefghij"));
	char buf[4];
	size_t got;
	cr_assert_eq(tfs_backend_get_range(be, "k", 8, 4, NULL, tfs_io_buf(buf), &got, NULL), 0);
	cr_assert_eq(got, 2);
	cr_assert_eq(memcmp(buf, "ij", 2), 0);
}

Test(s3_retry, a_size_beyond_int64_is_refused_not_retried)
{
	struct tfs_obj_meta m = { 0 };
	mini_http_push(srv, R(.status = 200, .headers = ETAG,
			      .content_length_text = "18446744073709551615"));
	mini_http_push(srv, R(.status = 200, .headers = ETAG,
			      .content_length_text = "9223372036854775808"));
	mini_http_push(srv, R(.status = 200, .headers = ETAG, .content_length = 7));
	cr_assert_eq(tfs_backend_head(be, "k", &m), EIO);
	cr_assert_eq(mini_http_count(srv), 1, "a refused size is not retried");
	cr_assert_eq(tfs_backend_head(be, "k", &m), EIO);
	cr_assert_eq(tfs_backend_head(be, "k", &m), 0);
	cr_assert_eq(m.size, 7);
	tfs_obj_meta_clear(&m);
	/* In a listing. */
	mini_http_push(srv, R(.status = 200, .body = "<ListBucketResult><Contents><Key>pre/a</Key>"
						     "<Size>9223372036854775808</Size></Contents></"
						     "ListBucketResult>"));
	struct tfs_list_page page = { 0 };
	cr_assert_eq(tfs_backend_list(be, "", NULL, NULL, 0, &page), EIO);
}

/* Listings: foreign names are dropped and counted, a listing that does not
 * end is cut off. */
Test(s3_retry, foreign_listing_names_are_dropped_and_counted)
{
	mini_http_push(
		srv,
		R(.status = 200,
		  .body = "<ListBucketResult><Contents><Key>pre/d/</Key></Contents>"
			  "<Contents><Key>pre/d/a</Key></Contents>"
			  "<Contents><Key>pre/d/x/y</Key></Contents>" /* should be a common prefix */
			  "<Contents><Key>pre/e</Key></Contents>"     /* outside d/ */
			  "<Contents><Key>pre/</Key></Contents>"      /* shorter than d/ */
			  "<CommonPrefixes><Prefix>pre/d/s/</Prefix></CommonPrefixes>"
			  "<CommonPrefixes><Prefix>pre/d/s/t/</Prefix></CommonPrefixes>" /* two levels */
			  "<CommonPrefixes><Prefix>pre/d/u</Prefix></CommonPrefixes>" /* no delimiter */
			  "<CommonPrefixes><Prefix>pre/x/</Prefix></CommonPrefixes>" /* outside */
			  "<CommonPrefixes><Prefix>other/d/v/</Prefix></CommonPrefixes>" /* outside pre/ */
			  "</ListBucketResult>"));
	struct tfs_list_page page = { 0 };
	cr_assert_eq(tfs_backend_list(be, "d/", "/", NULL, 0, &page), 0);
	cr_assert_eq(page.n_entries, 2);
	cr_assert_str_eq(page.entries[0].key, "d/");
	cr_assert_str_eq(page.entries[1].key, "d/a");
	cr_assert_eq(page.n_prefixes, 1);
	cr_assert_str_eq(page.prefixes[0], "d/s/");
	cr_assert_eq(page.n_dropped, 7);
	cr_assert_eq(atomic_load(&tfs_backend_stats(be)->list_foreign_dropped), 7);
	tfs_list_page_clear(&page);
}

#define PAGE(tok)                                                                     \
	"<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>pre/k</Key>" \
	"</Contents><NextContinuationToken>" tok "</NextContinuationToken></ListBucketResult>"

static int walk_all(int *pages)
{
	struct tfs_list_walk w = { 0 };
	int rc = 0;
	*pages = 0;
	while (!w.done) {
		struct tfs_list_page p = { 0 };
		rc = tfs_backend_list_walk(be, &tlog, &w, "", "/", 0, &p);
		tfs_list_page_clear(&p);
		if (rc)
			break;
		(*pages)++;
	}
	tfs_list_walk_clear(&w);
	return rc;
}

Test(s3_retry, a_listing_that_ends_is_walked_whole)
{
	int pages;
	mini_http_push(srv, R(.status = 200, .body = PAGE("A")));
	mini_http_push(srv, R(.status = 200, .body = PAGE("B")));
	mini_http_push(srv, R(.status = 200, .body = "<ListBucketResult><Contents><Key>pre/z</Key>"
						     "</Contents></ListBucketResult>"));
	cr_assert_eq(walk_all(&pages), 0);
	cr_assert_eq(pages, 3);
	cr_assert_eq(mini_http_count(srv), 3);
	cr_assert_eq(atomic_load(&tfs_backend_stats(be)->list_loops), 0);
}

Test(s3_retry, a_listing_that_loops_is_cut_off)
{
	int pages;
	/* the same token again and again */
	for (int i = 0; i < 3; i++)
		mini_http_push(srv, R(.status = 200, .body = PAGE("A")));
	cr_assert_eq(walk_all(&pages), EIO);
	cr_assert_eq(mini_http_count(srv), 2);
	cr_assert_eq(pages, 1);
	/* a longer loop: A B C B C B C ... */
	static const char *const cyc[] = { PAGE("A"), PAGE("B"), PAGE("C") };
	mini_http_push(srv, R(.status = 200, .body = cyc[0]));
	for (int i = 0; i < 20; i++)
		mini_http_push(srv, R(.status = 200, .body = cyc[1 + i % 2]));
	cr_assert_eq(walk_all(&pages), EIO);
	cr_assert_lt(mini_http_count(srv), 2 + 12, "the loop was not noticed soon");
	cr_assert_eq(atomic_load(&tfs_backend_stats(be)->list_loops), 2);
}

/* ---- copies of objects too large for one CopyObject ---- */

#define COPY_PART_OK \
	R(.status = 200, .body = "<CopyPartResult><ETag>&quot;p&quot;</ETag></CopyPartResult>")
#define HEAD_11M                                                                        \
	R(.status = 200, .headers = "ETag: \"src-etag\"\r\nx-amz-meta-mode: 33188\r\n", \
	  .content_length = 11u << 20)
#define CREATED                                                                            \
	R(.status = 200, .body = "<InitiateMultipartUploadResult><UploadId>up1</UploadId>" \
				 "</InitiateMultipartUploadResult>")

/* S3 refuses one CopyObject of more than 5 GiB with 400 InvalidRequest.
 * A rename that believed the object small (it grew since) still copies
 * it: a HEAD gives the real size, then the parts are copied from the
 * version the HEAD saw, with its metadata. */
Test(s3_retry, a_copy_refused_as_too_large_is_made_in_parts)
{
	mini_http_push(srv, R(.status = 400, .body = "<Error><Code>InvalidRequest</Code><Message>"
						     "The specified copy source is larger than "
						     "the maximum allowable size for a copy "
						     "source: 5368709120</Message></Error>"));
	mini_http_push(srv, HEAD_11M);
	mini_http_push(srv, CREATED);
	for (int i = 0; i < 3; i++)
		mini_http_push(srv, COPY_PART_OK);
	mini_http_push(srv, R(.status = 200, .body = "<CompleteMultipartUploadResult><ETag>"
						     "&quot;whole-3&quot;</ETag>"
						     "</CompleteMultipartUploadResult>"));
	char etag[TFS_ETAG_MAX] = "";
	cr_assert_eq(tfs_backend_copy(be, "src", "dst", 100, NULL, etag), 0);
	cr_assert_str_eq(etag, "\"whole-3\"");
	cr_assert_eq(mini_http_count(srv), 7);
	cr_assert_eq(strncmp(mini_http_request(srv, 1), "HEAD /bkt/pre/src ", 18), 0);
	const char *create = mini_http_request(srv, 2);
	cr_assert_eq(strncmp(create, "POST /bkt/pre/dst?uploads", 25), 0, "%s", create);
	cr_assert_not_null(strcasestr(create, "\r\nx-amz-meta-mode: 33188\r\n"),
			   "the source's metadata is not kept: %s", create);
	const char *range[3] = { "bytes=0-5242879", "bytes=5242880-10485759",
				 "bytes=10485760-11534335" };
	for (int i = 0; i < 3; i++) {
		const char *req = mini_http_request(srv, 3 + i);
		char want[64];
		snprintf(want, sizeof(want), "\r\nx-amz-copy-source-range: %s\r\n", range[i]);
		cr_assert_eq(strncmp(req, "PUT /bkt/pre/dst?", 17), 0, "%s", req);
		cr_assert_not_null(strcasestr(req, want), "part %d: %s", i + 1, req);
		cr_assert_not_null(strcasestr(req, "\r\nx-amz-copy-source: /bkt/pre/src\r\n"), "%s",
				   req);
		cr_assert_not_null(strcasestr(req, "\r\nx-amz-copy-source-if-match: "
						   "\"src-etag\"\r\n"),
				   "part %d may copy another version: %s", i + 1, req);
	}
	cr_assert_eq(strncmp(mini_http_request(srv, 6), "POST /bkt/pre/dst?uploadId=up1", 30), 0);
}

/* The source replaced during a copy in parts: the part copy fails its
 * x-amz-copy-source-if-match (412), the copy fails with ESTALE instead of
 * joining two versions, and the upload is aborted. */
Test(s3_retry, a_source_replaced_during_a_copy_in_parts_is_estale)
{
	mini_http_push(srv, HEAD_11M);
	mini_http_push(srv, CREATED);
	mini_http_push(srv, COPY_PART_OK);
	mini_http_push(srv, R(.status = 412, .body = "<Error><Code>PreconditionFailed</Code>"
						     "</Error>"));
	mini_http_push(srv, R(.status = 204, .body = ""));
	cr_assert_eq(tfs_backend_copy(be, "src", "dst", TFS_SIZE_UNKNOWN, NULL, NULL), ESTALE);
	cr_assert_eq(mini_http_count(srv), 5);
	cr_assert_eq(strncmp(mini_http_request(srv, 4), "DELETE /bkt/pre/dst?uploadId=up1", 32), 0,
		     "%s", mini_http_request(srv, 4));
}

/* An object the caller knows to be small is one CopyObject, no HEAD. */
Test(s3_retry, a_small_copy_is_one_request)
{
	mini_http_push(srv, R(.status = 200, .body = "<CopyObjectResult><ETag>&quot;c&quot;</ETag>"
						     "</CopyObjectResult>"));
	char etag[TFS_ETAG_MAX] = "";
	cr_assert_eq(tfs_backend_copy(be, "src", "dst", 5u << 20, NULL, etag), 0);
	cr_assert_str_eq(etag, "\"c\"");
	cr_assert_eq(mini_http_count(srv), 1);
	const char *req = mini_http_request(srv, 0);
	cr_assert_eq(strncmp(req, "PUT /bkt/pre/dst ", 17), 0, "%s", req);
	cr_assert_null(strcasestr(req, "x-amz-copy-source-range"), "%s", req);
}

/* tfs_backend_head_check() (near copies' checks, backends/near_verify.h):
 * part 1's size from HEAD ?partNumber=1 when the reply names the ETag's
 * count of parts; SSE-KMS and SSE-C mark the ETag as no MD5. */
Test(s3_retry, head_check_reads_part_size_and_encryption)
{
#define MP_ETAG "ETag: \"0123456789abcdef0123456789abcdef-3\"\r\n"
	mini_http_push(srv, R(.status = 200, .headers = MP_ETAG, .content_length = 12582912));
	mini_http_push(srv, R(.status = 200,
			      .headers = "ETag: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\r\n"
					 "x-amz-mp-parts-count: 3\r\n",
			      .content_length = 5242880));
	struct tfs_obj_check c;
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert_eq(c.size, 12582912);
	cr_assert_eq(c.part_size, 5242880);
	cr_assert_not(c.encrypted);
	cr_assert_not_null(strstr(mini_http_request(srv, 1), "?partNumber=1 "), "%s",
			   mini_http_request(srv, 1));
	/* A server that ignores partNumber (no parts count), or names
	 * another count of parts: the size stays unknown. */
	mini_http_push(srv, R(.status = 200, .headers = MP_ETAG, .content_length = 12582912));
	mini_http_push(srv, R(.status = 200, .headers = MP_ETAG, .content_length = 12582912));
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert_eq(c.part_size, 0);
	mini_http_push(srv, R(.status = 200, .headers = MP_ETAG, .content_length = 12582912));
	mini_http_push(srv, R(.status = 200, .headers = MP_ETAG "x-amz-mp-parts-count: 2\r\n",
			      .content_length = 5242880));
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert_eq(c.part_size, 0);
	/* A plain ETag: one HEAD; SSE-S3 keeps it an MD5, SSE-KMS and
	 * SSE-C do not. */
	int before = mini_http_count(srv);
	mini_http_push(srv, R(.status = 200,
			      .headers = "ETag: \"0123456789abcdef0123456789abcdef\"\r\n"
					 "x-amz-server-side-encryption: AES256\r\n",
			      .content_length = 10));
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert_not(c.encrypted);
	cr_assert_eq(mini_http_count(srv), before + 1);
	mini_http_push(srv, R(.status = 200,
			      .headers = "ETag: \"0123456789abcdef0123456789abcdef\"\r\n"
					 "x-amz-server-side-encryption: aws:kms\r\n",
			      .content_length = 10));
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert(c.encrypted);
	mini_http_push(srv, R(.status = 200,
			      .headers = "ETag: \"0123456789abcdef0123456789abcdef\"\r\n"
					 "x-amz-server-side-encryption-customer-algorithm: "
					 "AES256\r\n",
			      .content_length = 10));
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert(c.encrypted);
	cr_assert_str_eq(c.checksum_alg, "");
	/* Far's checksum, asked for: a full-object one is kept, a composite
	 * one (of the parts' checksums) is not. */
	mini_http_push(srv, R(.status = 200,
			      .headers = "ETag: \"e\"\r\nx-amz-checksum-crc64nvme: rosUhgp5mIg=\r\n"
					 "x-amz-checksum-type: FULL_OBJECT\r\n",
			      .content_length = 9));
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert_str_eq(c.checksum_alg, "crc64nvme");
	cr_assert_str_eq(c.checksum, "rosUhgp5mIg=");
	cr_assert_not_null(strcasestr(mini_http_request(srv, mini_http_count(srv) - 1), "\r\nx-amz-"
											"checksum-"
											"mode: "
											"ENABLED\r"
											"\n"));
	mini_http_push(srv, R(.status = 200,
			      .headers = "ETag: \"e\"\r\nx-amz-checksum-sha256: AAAA-3\r\n"
					 "x-amz-checksum-type: COMPOSITE\r\n",
			      .content_length = 9));
	cr_assert_eq(tfs_backend_head_check(be, "k", &c), 0);
	cr_assert_str_eq(c.checksum_alg, "");
#undef MP_ETAG
}

/* ---- a bucket in another region ---- */

/* Whether request i was signed for `region` (its credential scope). */
static bool signed_for(int i, const char *region)
{
	char scope[96];
	snprintf(scope, sizeof(scope), "/%s/s3/aws4_request", region);
	const char *r = mini_http_request(srv, i);
	return r && strstr(r, scope) != NULL;
}

#define HEAD_OK                                                                                    \
	R(.status = 200, .headers = ETAG "Content-Length: 3\r\n", .body = "", .content_length = 3, \
	  .truncate_after = 0)

/* A 301 with x-amz-bucket-region (what AWS sends, to a HEAD too): the
 * request is signed again for that region, once, and so is every later
 * one. */
Test(s3_retry, a_redirect_to_another_region_is_followed_once_and_kept)
{
	mini_http_push(srv, R(.status = 301, .headers = "x-amz-bucket-region: eu-north-1\r\n",
			      .body = "<Error><Code>PermanentRedirect</Code></Error>"));
	mini_http_push(srv, HEAD_OK);
	mini_http_push(srv, HEAD_OK);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "k", &m), 0);
	tfs_obj_meta_clear(&m);
	cr_assert_eq(tfs_backend_head(be, "k2", &m), 0);
	tfs_obj_meta_clear(&m);
	cr_assert_eq(mini_http_count(srv), 3);
	cr_assert(signed_for(0, "eu-west-3"));
	cr_assert(signed_for(1, "eu-north-1"), "%s", mini_http_request(srv, 1));
	cr_assert(signed_for(2, "eu-north-1"));
}

/* AWS's 400 AuthorizationHeaderMalformed names the region in its body. */
Test(s3_retry, authorization_header_malformed_names_the_region)
{
	mini_http_push(srv, R(.status = 400, .body = "<Error><Code>AuthorizationHeaderMalformed</"
						     "Code><Message>the region 'eu-west-3' is "
						     "wrong; expecting 'ap-south-1'</"
						     "Message><Region>ap-south-1</Region></"
						     "Error>"));
	mini_http_push(srv, R(.status = 200, .headers = "ETag: \"e\"\r\n", .body = ""));
	cr_assert_eq(tfs_backend_put(be, "k", tfs_io_cbuf("data"), 4, NULL, NULL), 0);
	cr_assert_eq(mini_http_count(srv), 2);
	cr_assert(signed_for(1, "ap-south-1"));
}

/* A store that names another region at each answer is not chased: one
 * switch a call, then the redirect is the call's error. */
Test(s3_retry, redirects_never_loop)
{
	mini_http_push(srv, R(.status = 301, .headers = "x-amz-bucket-region: eu-north-1\r\n",
			      .body = "<Error><Code>PermanentRedirect</Code></Error>"));
	mini_http_push(srv, R(.status = 301, .headers = "x-amz-bucket-region: us-west-2\r\n",
			      .body = "<Error><Code>PermanentRedirect</Code></Error>"));
	mini_http_push(srv, HEAD_OK);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "k", &m), EIO);
	cr_assert_eq(mini_http_count(srv), 2);
}

/* A redirect to the region already in use, a 400 of another code that
 * names a region, and a region that is no region name are errors, not
 * switches. */
Test(s3_retry, only_a_new_valid_region_switches)
{
	mini_http_push(srv, R(.status = 301, .headers = "x-amz-bucket-region: eu-west-3\r\n",
			      .body = ""));
	mini_http_push(srv, R(.status = 400, .body = "<Error><Code>InvalidRequest</"
						     "Code><Region>ap-south-1</Region></Error>"));
	mini_http_push(srv,
		       R(.status = 301, .headers = "x-amz-bucket-region: ../x y\r\n", .body = ""));
	mini_http_push(srv, HEAD_OK);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, "a", &m), EIO);
	cr_assert_eq(tfs_backend_head(be, "b", &m), EINVAL);
	cr_assert_eq(tfs_backend_head(be, "c", &m), EIO);
	cr_assert_eq(tfs_backend_head(be, "d", &m), 0);
	tfs_obj_meta_clear(&m);
	cr_assert_eq(mini_http_count(srv), 4);
	cr_assert(signed_for(3, "eu-west-3"));
}

/* An instance switches at most S3_MAX_REGION_SWITCHES (4) times. */
Test(s3_retry, region_switches_are_bounded)
{
	static const char *const regions[] = { "r-1", "r-2", "r-3", "r-4", "r-5" };
	static char hdr[5][64];
	for (int i = 0; i < 5; i++) {
		snprintf(hdr[i], sizeof(hdr[i]), "x-amz-bucket-region: %s\r\n", regions[i]);
		mini_http_push(srv, R(.status = 301, .headers = hdr[i], .body = ""));
		if (i < 4)
			mini_http_push(srv, HEAD_OK);
	}
	struct tfs_obj_meta m = { 0 };
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(tfs_backend_head(be, "k", &m), 0, "switch %d", i + 1);
		tfs_obj_meta_clear(&m);
	}
	cr_assert_eq(tfs_backend_head(be, "k", &m), EIO, "a fifth switch");
	cr_assert_eq(mini_http_count(srv), 9);
	cr_assert(signed_for(7, "r-4"));
}
