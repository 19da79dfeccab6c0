/* test_s3_xml.c - Criterion tests for the S3 XML reply parsers and time parsing (s3_xml.c). */
#include "config.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbuf.h"
#include "s3_xml.h"

/* A string literal as (body, len). */
#define BODY(s) (s), (sizeof(s) - 1)

#define NS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""
#define XMLDECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
#define HELLO_ETAG "\"5d41402abc4b2a76b9719d911017c592\""
#define MOTO_MTIME INT64_C(1795298378) /* 2026-11-21T21:59:38Z */

/* ---- ListObjectsV2 samples ---- */

/* Captured from moto_server: list-type=2&prefix=pre/&delimiter=/ */
static const char moto_delim[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	"<ListBucketResult " NS "><IsTruncated>false</IsTruncated>"
	"<Contents><Key>pre/a&amp;b&lt;c&gt;.txt</Key><LastModified>2026-11-21T21:59:38.000Z</"
	"LastModified>"
	"<ETag>" HELLO_ETAG "</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>pre/café "
	"日本.bin</Key><LastModified>2026-11-21T21:59:38.000Z</LastModified>"
	"<ETag>" HELLO_ETAG "</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>pre/x+y%20z</Key><LastModified>2026-11-21T21:59:38.000Z</LastModified>"
	"<ETag>" HELLO_ETAG "</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Name>tfs-test</Name><Prefix>pre/</Prefix><Delimiter>/</Delimiter><MaxKeys>1000</MaxKeys>"
	"<CommonPrefixes><Prefix>pre/d2/</Prefix></CommonPrefixes>"
	"<CommonPrefixes><Prefix>pre/dir/</Prefix></CommonPrefixes>"
	"<KeyCount>5</KeyCount></ListBucketResult>";

/* Captured from moto_server: list-type=2&prefix=pre/&max-keys=2 */
static const char moto_trunc[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	"<ListBucketResult " NS "><IsTruncated>true</IsTruncated>"
	"<Contents><Key>pre/a&amp;b&lt;c&gt;.txt</Key><LastModified>2026-11-21T21:59:38.000Z</"
	"LastModified>"
	"<ETag>" HELLO_ETAG "</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>pre/café "
	"日本.bin</Key><LastModified>2026-11-21T21:59:38.000Z</LastModified>"
	"<ETag>" HELLO_ETAG "</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5</Size>"
	"<StorageClass>STANDARD</StorageClass></Contents>"
	"<Name>tfs-test</Name><Prefix>pre/</Prefix><MaxKeys>2</MaxKeys><KeyCount>2</KeyCount>"
	"<NextContinuationToken>772affddfeb5ce88c32f3c4df769eb32</NextContinuationToken>"
	"</ListBucketResult>";

/* Captured from moto_server: list-type=2&encoding-type=url (EncodingType
 * comes after the Contents it applies to). */
#define MOTO_URL_ENTRY(k)                                                                       \
	"<Contents><Key>" k "</Key><LastModified>2026-11-21T21:59:38.000Z</LastModified>"       \
	"<ETag>" HELLO_ETAG "</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><Size>5</Size>" \
	"<StorageClass>STANDARD</StorageClass></Contents>"
static const char moto_url[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
			       "<ListBucketResult " NS "><IsTruncated>false</IsTruncated>" //
	MOTO_URL_ENTRY("pre/a%26b%3Cc%3E.txt")                                             //
	MOTO_URL_ENTRY("pre/caf%C3%A9%20%E6%97%A5%E6%9C%AC.bin")                           //
	MOTO_URL_ENTRY("pre/d2/q")                                                         //
	MOTO_URL_ENTRY("pre/dir/one")                                                      //
	MOTO_URL_ENTRY("pre/dir/two")                                                      //
	MOTO_URL_ENTRY("pre/x%2By%2520z")                                                  //
	MOTO_URL_ENTRY("top")                                                              //
	"<Name>tfs-test</Name><Prefix/><MaxKeys>1000</MaxKeys>"
	"<EncodingType>url</EncodingType><KeyCount>7</KeyCount>"
	"</ListBucketResult>";

/* Captured from moto_server: empty bucket. */
static const char moto_empty[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
				 "<ListBucketResult " NS "><IsTruncated>false</"
				 "IsTruncated><Name>tfs-empty</Name>"
				 "<Prefix/><MaxKeys>1000</MaxKeys><KeyCount>0</KeyCount></"
				 "ListBucketResult>";

/* AWS documentation style: pretty-printed, Owner, ContinuationToken. */
static const char aws_pretty[] = XMLDECL
	"\n"
	"<ListBucketResult " NS ">\n"
	"    <Name>bucket</Name>\n"
	"    <Prefix/>\n"
	"    <ContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</ContinuationToken>\n"
	"    <KeyCount>2</KeyCount>\n"
	"    <MaxKeys>2</MaxKeys>\n"
	"    <IsTruncated>true</IsTruncated>\n"
	"    "
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</"
	"NextContinuationToken>\n"
	"    <Contents>\n"
	"        <Key>happyface.jpg</Key>\n"
	"        <LastModified>2014-11-21T19:40:05.000Z</LastModified>\n"
	"        <ETag>\"70ee1738b6b21e2c8a43f3a5ab0eee71\"</ETag>\n"
	"        <Size>11</Size>\n"
	"        <Owner>\n"
	"            <ID>75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a</ID>\n"
	"            <DisplayName>mtd@amazon.com</DisplayName>\n"
	"        </Owner>\n"
	"        <StorageClass>STANDARD</StorageClass>\n"
	"    </Contents>\n"
	"    <Contents>\n"
	"        <Key>multi part/big.bin</Key>\n"
	"        <LastModified>2024-01-02T03:04:05.000Z</LastModified>\n"
	"        <ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>\n"
	"        <Size>\n 47185920 \n</Size>\n"
	"        <StorageClass>STANDARD_IA</StorageClass>\n"
	"    </Contents>\n"
	"</ListBucketResult>\n";

/* Ceph RGW style: one line, &quot; in ETags, Type, Marker, a fractional
 * LastModified, and a namespace prefix instead of a default namespace. */
static const char ceph_rgw[] = XMLDECL
	"<s3:ListBucketResult xmlns:s3=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<s3:Name>tfs</s3:Name><s3:Prefix>data/</s3:Prefix><s3:MaxKeys>1000</s3:MaxKeys>"
	"<s3:Delimiter>/</s3:Delimiter><s3:IsTruncated>true</s3:IsTruncated>"
	"<s3:Contents><s3:Key>data/file1</s3:Key>"
	"<s3:LastModified>2024-01-02T03:04:05.123Z</s3:LastModified>"
	"<s3:ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</s3:ETag><s3:Size>0</s3:Size>"
	"<s3:StorageClass>STANDARD</s3:StorageClass><s3:Owner><s3:ID>tester</s3:ID>"
	"<s3:DisplayName>Tester</s3:DisplayName></s3:Owner><s3:Type>Normal</s3:Type></s3:Contents>"
	"<s3:CommonPrefixes><s3:Prefix>data/sub/</s3:Prefix></s3:CommonPrefixes>"
	"<s3:KeyCount>2</s3:KeyCount><s3:NextContinuationToken>data/file1</"
	"s3:NextContinuationToken>"
	"</s3:ListBucketResult>";

/* Ceph RGW style without any namespace. */
static const char ceph_plain[] = XMLDECL
	"<ListBucketResult><Name>tfs</Name><Prefix></Prefix><KeyCount>1</KeyCount>"
	"<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
	"<Contents><Key>only</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
	"<ETag>&quot;x&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass>"
	"<Owner><ID>t</ID><DisplayName>T</DisplayName></Owner><Type>Normal</Type>"
	"</Contents><Marker></Marker></ListBucketResult>";

static void list_ok(const char *body, size_t len, const char *strip, struct tfs_list_page *pg)
{
	memset(pg, 0, sizeof(*pg));
	int rc = tfs_s3_xml_parse_list(body, len, strip, pg);
	cr_assert_eq(rc, 0, "parse_list returned %d", rc);
}

static int list_rc(const char *body, size_t len, const char *strip)
{
	struct tfs_list_page pg;
	memset(&pg, 0, sizeof(pg));
	int rc = tfs_s3_xml_parse_list(body, len, strip, &pg);
	if (rc != 0) {
		/* On failure the page is left empty. */
		cr_assert_null(pg.entries);
		cr_assert_null(pg.prefixes);
		cr_assert_null(pg.next_token);
		cr_assert_eq(pg.n_entries, 0);
		cr_assert_eq(pg.n_prefixes, 0);
	}
	tfs_list_page_clear(&pg);
	return rc;
}

/* A ListBucketResult with a single key whose raw XML text is `k`. */
static int one_key(const char *k, struct tfs_list_page *pg)
{
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 1u << 24);
	cr_assert_eq(tfs_dbuf_addf(&d,
				   "<ListBucketResult " NS "><Contents><Key>%s</Key>"
				   "<Size>1</Size></Contents></ListBucketResult>",
				   k),
		     0);
	memset(pg, 0, sizeof(*pg));
	int rc = tfs_s3_xml_parse_list(d.buf, d.len, NULL, pg);
	tfs_dbuf_free(&d);
	return rc;
}

Test(list, moto_delimiter_strip)
{
	struct tfs_list_page pg;
	list_ok(BODY(moto_delim), "pre/", &pg);
	cr_assert_eq(pg.n_entries, 3);
	cr_assert_str_eq(pg.entries[0].key, "a&b<c>.txt");
	cr_assert_str_eq(pg.entries[1].key, "café 日本.bin");
	cr_assert_str_eq(pg.entries[2].key, "x+y%20z"); /* verbatim: no decoding */
	for (size_t i = 0; i < pg.n_entries; i++) {
		cr_assert_eq(pg.entries[i].size, 5);
		cr_assert_str_eq(pg.entries[i].etag, HELLO_ETAG);
		cr_assert_eq(pg.entries[i].mtime, MOTO_MTIME);
	}
	cr_assert_eq(pg.n_prefixes, 2);
	cr_assert_str_eq(pg.prefixes[0], "d2/");
	cr_assert_str_eq(pg.prefixes[1], "dir/");
	cr_assert_null(pg.next_token);
	tfs_list_page_clear(&pg);
}

Test(list, moto_delimiter_no_strip)
{
	struct tfs_list_page pg;
	list_ok(BODY(moto_delim), NULL, &pg);
	cr_assert_eq(pg.n_entries, 3);
	cr_assert_str_eq(pg.entries[0].key, "pre/a&b<c>.txt");
	cr_assert_str_eq(pg.entries[2].key, "pre/x+y%20z");
	cr_assert_eq(pg.n_prefixes, 2);
	cr_assert_str_eq(pg.prefixes[1], "pre/dir/");
	tfs_list_page_clear(&pg);

	list_ok(BODY(moto_delim), "", &pg);
	cr_assert_eq(pg.n_entries, 3);
	cr_assert_str_eq(pg.entries[1].key, "pre/café 日本.bin");
	tfs_list_page_clear(&pg);
}

Test(list, strip_drops_foreign_names)
{
	struct tfs_list_page pg;
	/* Nothing in the listing starts with "pre/d": only the prefixes do. */
	list_ok(BODY(moto_delim), "pre/d", &pg);
	cr_assert_eq(pg.n_entries, 0);
	cr_assert_eq(pg.n_prefixes, 2);
	cr_assert_str_eq(pg.prefixes[0], "2/");
	cr_assert_str_eq(pg.prefixes[1], "ir/");
	tfs_list_page_clear(&pg);

	list_ok(BODY(moto_delim), "other/", &pg);
	cr_assert_eq(pg.n_entries, 0);
	cr_assert_eq(pg.n_prefixes, 0);
	cr_assert_null(pg.next_token);
	tfs_list_page_clear(&pg);
}

Test(list, key_equal_to_strip_becomes_empty)
{
	static const char body[] = "<ListBucketResult " NS "><Contents><Key>dir/</Key><Size>0</"
				   "Size></Contents>"
				   "<Contents><Key>dir/f</Key><Size>3</Size></Contents></"
				   "ListBucketResult>";
	struct tfs_list_page pg;
	list_ok(BODY(body), "dir/", &pg);
	cr_assert_eq(pg.n_entries, 2);
	cr_assert_str_eq(pg.entries[0].key, "");
	cr_assert_str_eq(pg.entries[1].key, "f");
	cr_assert_eq(pg.entries[1].size, 3);
	tfs_list_page_clear(&pg);
}

Test(list, moto_truncated)
{
	struct tfs_list_page pg;
	list_ok(BODY(moto_trunc), "pre/", &pg);
	cr_assert_eq(pg.n_entries, 2);
	cr_assert_str_eq(pg.entries[0].key, "a&b<c>.txt");
	cr_assert_str_eq(pg.entries[1].key, "café 日本.bin");
	cr_assert_eq(pg.n_prefixes, 0);
	cr_assert_not_null(pg.next_token);
	cr_assert_str_eq(pg.next_token, "772affddfeb5ce88c32f3c4df769eb32");
	tfs_list_page_clear(&pg);
}

Test(list, moto_url_encoded)
{
	struct tfs_list_page pg;
	list_ok(BODY(moto_url), NULL, &pg);
	cr_assert_eq(pg.n_entries, 7);
	cr_assert_str_eq(pg.entries[0].key, "pre/a&b<c>.txt");
	cr_assert_str_eq(pg.entries[1].key, "pre/café 日本.bin");
	cr_assert_str_eq(pg.entries[2].key, "pre/d2/q");
	cr_assert_str_eq(pg.entries[3].key, "pre/dir/one");
	cr_assert_str_eq(pg.entries[4].key, "pre/dir/two");
	cr_assert_str_eq(pg.entries[5].key, "pre/x+y%20z");
	cr_assert_str_eq(pg.entries[6].key, "top");
	cr_assert_eq(pg.entries[6].size, 5);
	cr_assert_eq(pg.entries[6].mtime, MOTO_MTIME);
	tfs_list_page_clear(&pg);

	/* Stripping applies to the decoded key. */
	list_ok(BODY(moto_url), "pre/", &pg);
	cr_assert_eq(pg.n_entries, 6);
	cr_assert_str_eq(pg.entries[0].key, "a&b<c>.txt");
	cr_assert_str_eq(pg.entries[5].key, "x+y%20z");
	tfs_list_page_clear(&pg);

	list_ok(BODY(moto_url), "pre/caf\xc3\xa9 ", &pg);
	cr_assert_eq(pg.n_entries, 1);
	cr_assert_str_eq(pg.entries[0].key, "日本.bin");
	tfs_list_page_clear(&pg);
}

Test(list, url_encoded_plus_and_prefixes)
{
	/* EncodingType first this time; '+' is literal, %20 is a space,
	 * lower-case hex works, common prefixes are decoded too. */
	static const char body[] = XMLDECL
		"<ListBucketResult " NS "><EncodingType>url</EncodingType>"
		"<Prefix>sp%20ace/</Prefix><Delimiter>%2F</Delimiter>"
		"<Contents><Key>sp%20ace/a+b%20c</Key><Size>1</Size></Contents>"
		"<Contents><Key>sp%20ace/%c3%a9t%c3%A9%25</Key><Size>2</Size></Contents>"
		"<CommonPrefixes><Prefix>sp%20ace/d%2Bir/</Prefix></CommonPrefixes>"
		"<IsTruncated>false</IsTruncated></ListBucketResult>";
	struct tfs_list_page pg;
	list_ok(BODY(body), "sp ace/", &pg);
	cr_assert_eq(pg.n_entries, 2);
	cr_assert_str_eq(pg.entries[0].key, "a+b c");
	cr_assert_str_eq(pg.entries[1].key, "été%");
	cr_assert_eq(pg.n_prefixes, 1);
	cr_assert_str_eq(pg.prefixes[0], "d+ir/");
	tfs_list_page_clear(&pg);
}

Test(list, url_encoding_errors)
{
#define URL_DOC(k)                                                                       \
	"<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>" k "</Key></" \
	"Contents></"                                                                    \
	"ListBucketResult>"
	cr_assert_eq(list_rc(BODY(URL_DOC("a%zz")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(URL_DOC("a%2")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(URL_DOC("a%")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(URL_DOC("a%00b")), NULL), EIO); /* no embedded NUL */
	cr_assert_eq(list_rc(BODY(URL_DOC("a%41")), NULL), 0);
	/* An encoding we do not know cannot be undone. */
	cr_assert_eq(list_rc(BODY("<ListBucketResult><EncodingType>base64</EncodingType>"
				  "</ListBucketResult>"),
			     NULL),
		     EIO);
	/* Without EncodingType the same text is taken verbatim. */
	struct tfs_list_page pg;
	list_ok(BODY("<ListBucketResult><Contents><Key>a%zz%</Key></Contents></ListBucketResult>"),
		NULL, &pg);
	cr_assert_str_eq(pg.entries[0].key, "a%zz%");
	tfs_list_page_clear(&pg);
#undef URL_DOC
}

Test(list, moto_empty_bucket)
{
	struct tfs_list_page pg;
	list_ok(BODY(moto_empty), NULL, &pg);
	cr_assert_eq(pg.n_entries, 0);
	cr_assert_eq(pg.n_prefixes, 0);
	cr_assert_null(pg.next_token);
	tfs_list_page_clear(&pg);

	/* Self-closing root, no declaration. */
	list_ok(BODY("<ListBucketResult/>"), "x/", &pg);
	cr_assert_eq(pg.n_entries, 0);
	tfs_list_page_clear(&pg);
}

Test(list, aws_pretty_printed)
{
	struct tfs_list_page pg;
	list_ok(BODY(aws_pretty), "", &pg);
	cr_assert_eq(pg.n_entries, 2);
	cr_assert_str_eq(pg.entries[0].key, "happyface.jpg");
	cr_assert_eq(pg.entries[0].size, 11);
	cr_assert_str_eq(pg.entries[0].etag, "\"70ee1738b6b21e2c8a43f3a5ab0eee71\"");
	cr_assert_eq(pg.entries[0].mtime, INT64_C(1416598805));
	cr_assert_str_eq(pg.entries[1].key, "multi part/big.bin");
	cr_assert_eq(pg.entries[1].size, 47185920);
	cr_assert_str_eq(pg.entries[1].etag, "\"3858f62230ac3c915f300c664312c11f-9\"");
	cr_assert_eq(pg.entries[1].mtime, INT64_C(1704164645));
	cr_assert_eq(pg.n_prefixes, 0);
	/* The top-level <Prefix/> is the request's, not a common prefix. */
	cr_assert_str_eq(pg.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	tfs_list_page_clear(&pg);
}

Test(list, ceph_rgw_prefixed_namespace)
{
	struct tfs_list_page pg;
	list_ok(BODY(ceph_rgw), "data/", &pg);
	cr_assert_eq(pg.n_entries, 1);
	cr_assert_str_eq(pg.entries[0].key, "file1");
	cr_assert_eq(pg.entries[0].size, 0);
	cr_assert_str_eq(pg.entries[0].etag, "\"d41d8cd98f00b204e9800998ecf8427e\"");
	cr_assert_eq(pg.entries[0].mtime, INT64_C(1704164645));
	cr_assert_eq(pg.n_prefixes, 1);
	cr_assert_str_eq(pg.prefixes[0], "sub/");
	cr_assert_str_eq(pg.next_token, "data/file1");
	tfs_list_page_clear(&pg);
}

Test(list, ceph_no_namespace)
{
	struct tfs_list_page pg;
	list_ok(BODY(ceph_plain), NULL, &pg);
	cr_assert_eq(pg.n_entries, 1);
	cr_assert_str_eq(pg.entries[0].key, "only");
	cr_assert_str_eq(pg.entries[0].etag, "\"x\"");
	cr_assert_eq(pg.entries[0].size, 1);
	cr_assert_null(pg.next_token);
	tfs_list_page_clear(&pg);
}

Test(list, entities_split_character_data)
{
	struct tfs_list_page pg;
	/* expat reports the text around each reference separately. */
	cr_assert_eq(one_key("a&amp;b&#x20;c&#233;&lt;d&gt;&quot;&apos;e&#x1F600;f", &pg), 0);
	cr_assert_str_eq(pg.entries[0].key, "a&b cé<d>\"'e\xf0\x9f\x98\x80"
					    "f");
	tfs_list_page_clear(&pg);

	cr_assert_eq(one_key("<![CDATA[x<y&z]]>&amp;<![CDATA[]]>tail", &pg), 0);
	cr_assert_str_eq(pg.entries[0].key, "x<y&z&tail");
	tfs_list_page_clear(&pg);

	/* Leading/trailing spaces and line breaks in keys are kept. */
	cr_assert_eq(one_key("  sp &#13;&#10;nl\t ", &pg), 0);
	cr_assert_str_eq(pg.entries[0].key, "  sp \r\nnl\t ");
	tfs_list_page_clear(&pg);

	/* A 1024-byte key (the S3 maximum) made of many small pieces. */
	struct tfs_dbuf k, want;
	tfs_dbuf_init(&k, 1u << 20);
	tfs_dbuf_init(&want, 1u << 20);
	for (int i = 0; i < 256; i++) {
		cr_assert_eq(tfs_dbuf_adds(&k, "ab&amp;"), 0);
		cr_assert_eq(tfs_dbuf_adds(&want, "ab&"), 0);
		cr_assert_eq(tfs_dbuf_adds(&k, (i & 1) ? "&#x25;" : "%"), 0);
		cr_assert_eq(tfs_dbuf_addc(&want, '%'), 0);
	}
	cr_assert_eq(want.len, 1024);
	cr_assert_eq(one_key(tfs_dbuf_str(&k), &pg), 0);
	cr_assert_str_eq(pg.entries[0].key, tfs_dbuf_str(&want));
	tfs_list_page_clear(&pg);
	tfs_dbuf_free(&k);
	tfs_dbuf_free(&want);
}

Test(list, sizes)
{
#define SIZE_DOC(s) \
	"<ListBucketResult><Contents><Key>k</Key><Size>" s "</Size></Contents></ListBucketResult>"
	struct tfs_list_page pg;
	list_ok(BODY(SIZE_DOC("9223372036854775807")), NULL, &pg);
	cr_assert_eq(pg.entries[0].size, (uint64_t)INT64_MAX);
	tfs_list_page_clear(&pg);
	/* Sizes are off_t above the backend: larger ones are refused. */
	cr_assert_eq(list_rc(BODY(SIZE_DOC("9223372036854775808")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(SIZE_DOC("18446744073709551615")), NULL), EIO);
	list_ok(BODY("<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>"),
		NULL, &pg);
	cr_assert_eq(pg.entries[0].size, 0); /* absent: 0 */
	cr_assert_str_eq(pg.entries[0].etag, "");
	cr_assert_eq(pg.entries[0].mtime, 0);
	tfs_list_page_clear(&pg);

	cr_assert_eq(list_rc(BODY(SIZE_DOC("18446744073709551616")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(SIZE_DOC("-1")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(SIZE_DOC("12abc")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(SIZE_DOC("")), NULL), EIO);
	cr_assert_eq(list_rc(BODY(SIZE_DOC("1 2")), NULL), EIO);
#undef SIZE_DOC
}

Test(list, etag_and_mtime_limits)
{
	char etag[TFS_ETAG_MAX + 1];
	memset(etag, 'e', sizeof(etag));
	etag[0] = '"';
	etag[TFS_ETAG_MAX - 2] = '"';
	etag[TFS_ETAG_MAX - 1] = '\0'; /* 127 chars: fits */
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 4096);
	cr_assert_eq(tfs_dbuf_addf(&d,
				   "<ListBucketResult><Contents><Key>k</Key><ETag>%s</ETag>"
				   "</Contents></ListBucketResult>",
				   etag),
		     0);
	struct tfs_list_page pg;
	list_ok(d.buf, d.len, NULL, &pg);
	cr_assert_str_eq(pg.entries[0].etag, etag);
	tfs_list_page_clear(&pg);

	etag[TFS_ETAG_MAX - 2] = 'e';
	etag[TFS_ETAG_MAX - 1] = '"';
	etag[TFS_ETAG_MAX] = '\0'; /* 128 chars: too long */
	tfs_dbuf_reset(&d);
	cr_assert_eq(tfs_dbuf_addf(&d,
				   "<ListBucketResult><Contents><Key>k</Key><ETag>%s</ETag>"
				   "</Contents></ListBucketResult>",
				   etag),
		     0);
	cr_assert_eq(list_rc(d.buf, d.len, NULL), EIO);
	tfs_dbuf_free(&d);

	/* An unreadable date does not fail the listing. */
	list_ok(BODY("<ListBucketResult><Contents><Key>k</Key><LastModified>yesterday"
		     "</LastModified><Size>4</Size></Contents></ListBucketResult>"),
		NULL, &pg);
	cr_assert_eq(pg.entries[0].mtime, 0);
	cr_assert_eq(pg.entries[0].size, 4);
	tfs_list_page_clear(&pg);
}

Test(list, truncation_rules)
{
	struct tfs_list_page pg;
	/* IsTruncated false: a stray token is not a next page. */
	list_ok(BODY("<ListBucketResult><IsTruncated>false</IsTruncated>"
		     "<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>"),
		NULL, &pg);
	cr_assert_null(pg.next_token);
	tfs_list_page_clear(&pg);
	/* Token before IsTruncated, odd case and whitespace. */
	list_ok(BODY("<ListBucketResult><NextContinuationToken>t+/=</NextContinuationToken>"
		     "<IsTruncated> True\n</IsTruncated></ListBucketResult>"),
		NULL, &pg);
	cr_assert_str_eq(pg.next_token, "t+/=");
	tfs_list_page_clear(&pg);
	/* Truncated with no way to continue would silently lose keys. */
	cr_assert_eq(list_rc(BODY("<ListBucketResult><IsTruncated>true</IsTruncated>"
				  "</ListBucketResult>"),
			     NULL),
		     EIO);
	cr_assert_eq(list_rc(BODY("<ListBucketResult><IsTruncated>true</IsTruncated>"
				  "<NextContinuationToken/></ListBucketResult>"),
			     NULL),
		     EIO);
}

Test(list, structure_errors)
{
	/* Wrong document kinds. */
	cr_assert_eq(list_rc(BODY(XMLDECL "<Error><Code>NoSuchBucket</Code></Error>"), NULL), EIO);
	cr_assert_eq(list_rc(BODY("<ListAllMyBucketsResult/>"), NULL), EIO);
	/* A Contents without a Key. */
	cr_assert_eq(list_rc(BODY("<ListBucketResult><Contents><Size>1</Size></Contents>"
				  "</ListBucketResult>"),
			     NULL),
		     EIO);
	/* Unknown elements, in and out of Contents, are ignored; Key below
	 * Owner is not the entry's key. */
	struct tfs_list_page pg;
	list_ok(BODY("<ListBucketResult><Foo><Key>no</Key><Contents><Key>no</Key></Contents></Foo>"
		     "<Contents><Owner><Key>no</Key></Owner><Key>yes</Key><Bar a='1'/></Contents>"
		     "<Prefix>not/a/common/prefix/</Prefix></ListBucketResult>"),
		NULL, &pg);
	cr_assert_eq(pg.n_entries, 1);
	cr_assert_str_eq(pg.entries[0].key, "yes");
	cr_assert_eq(pg.n_prefixes, 0);
	tfs_list_page_clear(&pg);
}

Test(list, errors_after_partial_results_do_not_leak)
{
	/* Entries and prefixes collected before the failure are freed (ASan
	 * checks); the page stays empty. */
	cr_assert_eq(list_rc(BODY("<ListBucketResult><Contents><Key>a</Key></Contents>"
				  "<CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes>"
				  "<NextContinuationToken>t</NextContinuationToken>"
				  "<Contents><Key>b</Key><Size>x</Size></Contents></"
				  "ListBucketResult>"),
			     NULL),
		     EIO);
	cr_assert_eq(list_rc(BODY("<ListBucketResult><EncodingType>url</EncodingType>"
				  "<Contents><Key>ok</Key></Contents>"
				  "<Contents><Key>drop</Key></Contents>"
				  "<Contents><Key>ok2</Key></Contents>"
				  "<CommonPrefixes><Prefix>ok/</Prefix></CommonPrefixes>"
				  "<CommonPrefixes><Prefix>bad%</Prefix></CommonPrefixes>"
				  "</ListBucketResult>"),
			     "ok"),
		     EIO);
	cr_assert_eq(list_rc(BODY("<ListBucketResult><Contents><Key>a</Key></Contents>"
				  "<Contents><Key>b</Key>"),
			     NULL),
		     EIO);
}

Test(list, bounded_text)
{
	struct tfs_list_page pg;
	struct tfs_dbuf k;
	tfs_dbuf_init(&k, 1u << 20);
	for (int i = 0; i < 64 * 1024; i++)
		cr_assert_eq(tfs_dbuf_addc(&k, 'k'), 0);
	cr_assert_eq(one_key(tfs_dbuf_str(&k), &pg), 0); /* exactly 64 KiB */
	/* read, but longer than any S3 key: dropped and counted */
	cr_assert_eq(pg.n_entries, 0);
	cr_assert_eq(pg.n_dropped, 1);
	tfs_list_page_clear(&pg);
	cr_assert_eq(tfs_dbuf_addc(&k, 'k'), 0);
	cr_assert_eq(one_key(tfs_dbuf_str(&k), &pg), EIO); /* one more byte */
	tfs_list_page_clear(&pg);

	/* Big text in elements we ignore is not collected, so it is fine. */
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 1u << 22);
	cr_assert_eq(tfs_dbuf_addf(&d,
				   "<ListBucketResult><Contents><Key>k</Key><Owner>"
				   "<DisplayName>%s%s%s</DisplayName></Owner></Contents>",
				   k.buf, k.buf, k.buf),
		     0);
	for (int i = 0; i < 200; i++)
		cr_assert_eq(tfs_dbuf_adds(&d, "<x>"), 0);
	for (int i = 0; i < 200; i++)
		cr_assert_eq(tfs_dbuf_adds(&d, "</x>"), 0);
	cr_assert_eq(tfs_dbuf_adds(&d, "</ListBucketResult>"), 0);
	list_ok(d.buf, d.len, NULL, &pg);
	cr_assert_eq(pg.n_entries, 1);
	cr_assert_str_eq(pg.entries[0].key, "k");
	tfs_list_page_clear(&pg);
	tfs_dbuf_free(&d);
	tfs_dbuf_free(&k);
}

Test(list, many_entries)
{
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 1u << 24);
	cr_assert_eq(tfs_dbuf_adds(&d, XMLDECL "<ListBucketResult " NS ">"), 0);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(tfs_dbuf_addf(&d,
					   "<Contents><Key>p/k%04d</Key><Size>%d</Size></Contents>",
					   i, i),
			     0);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(tfs_dbuf_addf(&d,
					   "<CommonPrefixes><Prefix>p/d%03d/</Prefix>"
					   "</CommonPrefixes>",
					   i),
			     0);
	cr_assert_eq(tfs_dbuf_adds(&d, "</ListBucketResult>"), 0);
	struct tfs_list_page pg;
	list_ok(d.buf, d.len, "p/", &pg);
	cr_assert_eq(pg.n_entries, 1000);
	cr_assert_eq(pg.n_prefixes, 100);
	cr_assert_str_eq(pg.entries[999].key, "k0999");
	cr_assert_eq(pg.entries[999].size, 999);
	cr_assert_str_eq(pg.prefixes[42], "d042/");
	tfs_list_page_clear(&pg);
	tfs_dbuf_free(&d);
}

/* ---- malformed input and DTDs (shared by all parsers) ---- */

/* Every parser must reject `body` with EIO. */
static void all_reject(const char *body, size_t len)
{
	char code[64] = "x", msg[64] = "x", etag[TFS_ETAG_MAX] = "x";
	char *id = (char *)"sentinel";
	cr_assert_eq(list_rc(body, len, NULL), EIO, "list accepted <%.*s>", (int)len, body);
	cr_assert_eq(tfs_s3_xml_parse_error(body, len, code, sizeof(code), msg, sizeof(msg)), EIO);
	cr_assert_str_eq(code, "");
	cr_assert_str_eq(msg, "");
	cr_assert_eq(tfs_s3_xml_parse_upload_id(body, len, &id), EIO);
	cr_assert_null(id);
	cr_assert_eq(tfs_s3_xml_parse_etag(body, len, etag, code, sizeof(code), msg, sizeof(msg)),
		     EIO);
	cr_assert_str_eq(etag, "");
}

Test(malformed, garbage)
{
	all_reject(BODY(""));
	all_reject(NULL, 0);
	all_reject(BODY(" \r\n\t "));
	all_reject(BODY("not xml at all"));
	all_reject(BODY(XMLDECL));
	all_reject(BODY("<ListBucketResult><Contents><Key>a</Key>")); /* truncated */
	all_reject(BODY("<Error><Code>x</Code></Eror>"));             /* mismatched */
	all_reject(BODY("<Error><Code>x</Error></Code>"));            /* bad nesting */
	all_reject(BODY("<Error/><Error/>"));                         /* two roots */
	all_reject(BODY("<Error><Code>a &foo; b</Code></Error>"));    /* undefined entity */
	all_reject(BODY("<Error><Code>&#0;</Code></Error>"));         /* NUL reference */
	all_reject(BODY("<Error><Code>a\0b</Code></Error>"));         /* raw NUL */
	all_reject(BODY("<Error><Code>\xff\xfe</Code></Error>"));     /* bad UTF-8 */
	all_reject(BODY("<Error><Code a=1>x</Code></Error>"));        /* unquoted attr */
	all_reject(BODY("<Error><Code>x</Code></Error>garbage"));     /* trailing junk */
	all_reject(BODY("<Error>\n<Code>x<</Code></Error>"));         /* stray '<' */
	all_reject("<Error><Code>x</Code></Error>", 10);              /* cut short */
	/* What moto sends when it crashes. */
	all_reject(BODY("<!doctype html>\n<html lang=en>\n<title>500 Internal Server "
			"Error</title>\n"
			"<h1>Internal Server Error</h1>\n<p>The server encountered an internal "
			"error.</p>\n"));
	/* HTML without a DOCTYPE is well-formed but of the wrong kind. */
	all_reject(BODY("<html><body>Bad Gateway</body></html>"));
}

Test(malformed, doctype_rejected)
{
	/* Billion laughs. */
	all_reject(BODY(
		"<?xml version=\"1.0\"?>\n"
		"<!DOCTYPE lolz [\n"
		" <!ENTITY lol \"lol\">\n"
		" <!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n"
		" <!ENTITY lol2 \"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;\">\n"
		" <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">\n"
		" <!ENTITY lol4 \"&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;\">\n"
		" <!ENTITY lol5 \"&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;\">\n"
		" <!ENTITY lol6 \"&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;\">\n"
		" <!ENTITY lol7 \"&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;\">\n"
		" <!ENTITY lol8 \"&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;\">\n"
		" <!ENTITY lol9 \"&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;\">\n"
		"]>\n"
		"<ListBucketResult><Contents><Key>&lol9;</Key></Contents></ListBucketResult>"));
	/* External entity (XXE). */
	all_reject(BODY("<?xml version=\"1.0\"?>\n"
			"<!DOCTYPE Error [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>\n"
			"<Error><Code>&xxe;</Code></Error>"));
	/* External DTD, and even a harmless empty DOCTYPE. */
	all_reject(BODY("<!DOCTYPE Error SYSTEM \"http://example.com/x.dtd\"><Error/>"));
	all_reject(BODY("<!DOCTYPE Error><Error><Code>x</Code></Error>"));
	all_reject(BODY("<!DOCTYPE ListBucketResult []><ListBucketResult/>"));
}

Test(malformed, misc_xml_features_ok)
{
	/* Comments, processing instructions, attributes, a BOM and UTF-16 are
	 * all fine. */
	char code[32], msg[32];
	cr_assert_eq(tfs_s3_xml_parse_error(BODY("\xef\xbb\xbf" XMLDECL "<!-- hi --><?pi x?>"
						 "<Error "
						 "lang=\"en\"><Code>A<!--c-->B</Code></Error>"),
					    code, sizeof(code), msg, sizeof(msg)),
		     0);
	cr_assert_str_eq(code, "AB");
	cr_assert_str_eq(msg, "");

	static const char utf16[] = "\xff\xfe<\0E\0r\0r\0o\0r\0>\0<\0C\0o\0d\0e\0>\0\xe9\0"
				    "<\0/\0C\0o\0d\0e\0>\0<\0/\0E\0r\0r\0o\0r\0>\0";
	cr_assert_eq(tfs_s3_xml_parse_error(BODY(utf16), code, sizeof(code), msg, sizeof(msg)), 0);
	cr_assert_str_eq(code, "é");
}

/* ---- Error ---- */

Test(error, moto_no_such_key)
{
	static const char body[] =
		"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
		"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
		"<Key>nokey</Key><RequestId>fRGHCDVDL8JojtKb68vTCVEbeMl555kOeFZYPBrwYqFFGiF97m7b"
		"</RequestId><HostId>9Gjjt1m+cjU4OPvX9O9/8RuvnG41MRb/18Oux2o5H5MY7ISNTlXN+Dz9IG62/"
		"ILVxhAGI0qyPfg=</HostId></Error>";
	char code[64], msg[128];
	cr_assert_eq(tfs_s3_xml_parse_error(BODY(body), code, sizeof(code), msg, sizeof(msg)), 0);
	cr_assert_str_eq(code, "NoSuchKey");
	cr_assert_str_eq(msg, "The specified key does not exist.");
}

Test(error, aws_signature_does_not_match)
{
	static const char body[] = XMLDECL
		"\n"
		"<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we "
		"calculated does not match the signature you provided. Check your key and "
		"signing method.</Message><AWSAccessKeyId>AKIAIOSFODNN7EXAMPLE</AWSAccessKeyId>"
		"<StringToSign>AWS4-HMAC-SHA256\n20240102T030405Z\n"
		"20240102/us-east-1/s3/aws4_request\n"
		"9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d</StringToSign>"
		"<SignatureProvided>"
		"aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
		"</SignatureProvided><StringToSignBytes>41 57 53 34 2d 48 4d 41 "
		"43</StringToSignBytes>"
		"<CanonicalRequest>GET\n/\nlist-type=2&amp;prefix=a%2Fb\nhost:s3.amazonaws.com\n"
		"</CanonicalRequest><CanonicalRequestBytes>47 45 54 0a</CanonicalRequestBytes>"
		"<RequestId>4442587FB7D0A2F9</RequestId><HostId>x</HostId></Error>";
	char code[64], msg[256];
	cr_assert_eq(tfs_s3_xml_parse_error(BODY(body), code, sizeof(code), msg, sizeof(msg)), 0);
	cr_assert_str_eq(code, "SignatureDoesNotMatch");
	cr_assert_str_eq(msg, "The request signature we calculated does not match the signature "
			      "you provided. Check your key and signing method.");
}

Test(error, slow_down_pretty)
{
	static const char body[] = XMLDECL
		"\n"
		"<Error>\n"
		"  <Code>SlowDown</Code>\n"
		"  <Message>Please reduce your request rate.</Message>\n"
		"  <RequestId>656c76696e6727732072657175657374</RequestId>\n"
		"  <HostId>Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7</HostId>\n"
		"</Error>\n";
	char code[64], msg[64];
	cr_assert_eq(tfs_s3_xml_parse_error(BODY(body), code, sizeof(code), msg, sizeof(msg)), 0);
	cr_assert_str_eq(code, "SlowDown");
	cr_assert_str_eq(msg, "Please reduce your request rate.");
}

Test(error, missing_fields_truncation_and_null_buffers)
{
	char code[5], msg[4];
	/* Ceph RGW sends no Message for NoSuchKey. */
	cr_assert_eq(tfs_s3_xml_parse_error(BODY(XMLDECL "<Error><Code>NoSuchKey</Code>"
							 "<BucketName>b</BucketName><RequestId>tx0"
							 "</RequestId></Error>"),
					    code, sizeof(code), msg, sizeof(msg)),
		     0);
	cr_assert_str_eq(code, "NoSu"); /* code_len-1 bytes */
	cr_assert_str_eq(msg, "");

	/* Truncation never splits a UTF-8 sequence: "hé" needs 3 bytes + NUL. */
	char m3[3];
	cr_assert_eq(tfs_s3_xml_parse_error(BODY("<Error><Message>h\xc3\xa9llo</Message></Error>"),
					    code, sizeof(code), m3, sizeof(m3)),
		     0);
	cr_assert_str_eq(code, "");
	cr_assert_str_eq(m3, "h");
	cr_assert_eq(tfs_s3_xml_parse_error(BODY("<Error><Message>h\xc3\xa9llo</Message></Error>"),
					    code, sizeof(code), msg, sizeof(msg)),
		     0);
	cr_assert_str_eq(msg, "h\xc3\xa9");
	cr_assert_eq(tfs_s3_xml_parse_error(BODY("<Error><Message>\xe6\x97\xa5</Message></Error>"),
					    code, sizeof(code), m3, sizeof(m3)),
		     0);
	cr_assert_str_eq(m3, "");

	cr_assert_eq(tfs_s3_xml_parse_error(BODY("<Error><Code>Busy</Code></Error>"), NULL, 0, NULL,
					    0),
		     0);
	cr_assert_eq(tfs_s3_xml_parse_error(BODY("<Error/>"), code, sizeof(code), msg, sizeof(msg)),
		     0);
	cr_assert_str_eq(code, "");

	/* Code inside a child is not the error code; entities decode. */
	char c2[64], m2[64];
	cr_assert_eq(tfs_s3_xml_parse_error(BODY("<Error><Details><Code>no</Code></Details>"
						 "<Code>A&amp;B</Code><Message> a &lt; b </Message>"
						 "</Error>"),
					    c2, sizeof(c2), m2, sizeof(m2)),
		     0);
	cr_assert_str_eq(c2, "A&B");
	cr_assert_str_eq(m2, "a < b");
}

Test(error, wrong_root)
{
	char code[16] = "x", msg[16] = "x";
	cr_assert_eq(tfs_s3_xml_parse_error(BODY(moto_empty), code, sizeof(code), msg, sizeof(msg)),
		     EIO);
	cr_assert_str_eq(code, "");
	cr_assert_str_eq(msg, "");
}

/* ---- InitiateMultipartUploadResult ---- */

Test(upload_id, moto)
{
	static const char body[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
				   "<InitiateMultipartUploadResult " NS "><Bucket>tfs-test</"
				   "Bucket><Key>mp2</Key>"
				   "<UploadId>"
				   "UZZANOP8r6GM5MPzeGq5H8juhB0qZIHXwnYrpFmQGBWRI97C98aC9sGpA</"
				   "UploadId>"
				   "</InitiateMultipartUploadResult>";
	char *id = NULL;
	cr_assert_eq(tfs_s3_xml_parse_upload_id(BODY(body), &id), 0);
	cr_assert_str_eq(id, "UZZANOP8r6GM5MPzeGq5H8juhB0qZIHXwnYrpFmQGBWRI97C98aC9sGpA");
	free(id);
}

Test(upload_id, aws_pretty_and_ceph)
{
	static const char aws[] = XMLDECL
		"\n<InitiateMultipartUploadResult " NS ">\n"
		"  <Bucket>example-bucket</Bucket>\n  <Key>example-object</Key>\n"
		"  <UploadId>\n    VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA\n"
		"  </UploadId>\n</InitiateMultipartUploadResult>";
	char *id = NULL;
	cr_assert_eq(tfs_s3_xml_parse_upload_id(BODY(aws), &id), 0);
	cr_assert_str_eq(id, "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA");
	free(id);

	static const char ceph[] = XMLDECL "<InitiateMultipartUploadResult><Tenant></"
					   "Tenant><Bucket>b</Bucket><Key>k</Key>"
					   "<UploadId>2~iCw_lDY8VoNYo6mQ3vJbB2vXEY5rj4W</"
					   "UploadId></InitiateMultipartUploadResult>";
	cr_assert_eq(tfs_s3_xml_parse_upload_id(BODY(ceph), &id), 0);
	cr_assert_str_eq(id, "2~iCw_lDY8VoNYo6mQ3vJbB2vXEY5rj4W");
	free(id);
}

Test(upload_id, errors)
{
	char *id = (char *)"sentinel";
	cr_assert_eq(tfs_s3_xml_parse_upload_id(BODY("<InitiateMultipartUploadResult><Key>k</Key>"
						     "</InitiateMultipartUploadResult>"),
						&id),
		     EIO);
	cr_assert_null(id);
	cr_assert_eq(tfs_s3_xml_parse_upload_id(BODY("<InitiateMultipartUploadResult><UploadId>"
						     " </UploadId></"
						     "InitiateMultipartUploadResult>"),
						&id),
		     EIO);
	cr_assert_eq(tfs_s3_xml_parse_upload_id(BODY("<Error><Code>AccessDenied</Code>"
						     "<UploadId>x</UploadId></Error>"),
						&id),
		     EIO);
	cr_assert_null(id);
	/* UploadId nested deeper is not the one. */
	cr_assert_eq(tfs_s3_xml_parse_upload_id(BODY("<InitiateMultipartUploadResult><X><UploadId>u"
						     "</UploadId></X></"
						     "InitiateMultipartUploadResult>"),
						&id),
		     EIO);
}

/* ---- ListMultipartUploadsResult ---- */

/* Captured from moto_server: ?uploads&prefix=pre/ */
static const char moto_uploads[] =
	"<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	"<ListMultipartUploadsResult " NS "><Bucket>tierfs-test</Bucket><KeyMarker/"
	"><UploadIdMarker/>"
	"<MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>"
	"<Upload><UploadId>aV9GKIe4l2hF2uF3yrCFXjJMv4eJ3R6CPfQImyLY0JiZQaQ5BbfGnGg</UploadId>"
	"<Key>pre/a&amp;b</Key><Initiated>2010-11-10T20:48:33.000Z</Initiated>"
	"<StorageClass>STANDARD</StorageClass><Owner><DisplayName>webfile</DisplayName>"
	"<ID>75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a</ID></Owner>"
	"<Initiator><ID>arn:aws:iam::123456789012:user/user1</ID><DisplayName>user1</DisplayName>"
	"</Initiator></Upload>"
	"<Upload><UploadId>HTT1gS8m6c46lfq4GmLTh4S2Os025xhBKQTwZlpubz1gWA1WAo1EwgQ</UploadId>"
	"<Key>pre/x y</Key><Initiated>2010-11-10T20:48:33.000Z</Initiated>"
	"<StorageClass>STANDARD</StorageClass><Owner><DisplayName>webfile</DisplayName>"
	"<ID>75aa57f09aa0c8caeab4f8c24e99d10f8e7faeebf76c078efc7c6caea54ba06a</ID></Owner>"
	"<Initiator><ID>arn:aws:iam::123456789012:user/user1</ID><DisplayName>user1</DisplayName>"
	"</Initiator></Upload></ListMultipartUploadsResult>";

/* Captured from Ceph RGW 16.2: ?uploads&prefix=pre/ */
static const char rgw_uploads[] = XMLDECL
	"<ListMultipartUploadsResult " NS "><Bucket>tierfs-test</Bucket><Prefix>pre/</Prefix>"
	"<NextKeyMarker>pre/x y</NextKeyMarker>"
	"<NextUploadIdMarker>2~fssMRVYp9TmxfrTmfX6ne-BYXRFTVat</NextUploadIdMarker>"
	"<MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>"
	"<Upload><Key>pre/a&amp;b</Key><UploadId>2~0FDd1y-XE_RYxg_1Z6g12wpu93LODUs</UploadId>"
	"<Initiator><ID>tierfs</ID><DisplayName>tierfs tests</DisplayName></Initiator>"
	"<Owner><ID>tierfs</ID><DisplayName>tierfs tests</DisplayName></Owner>"
	"<StorageClass>STANDARD</StorageClass><Initiated>2026-11-22T00:04:49.228Z</Initiated></"
	"Upload>"
	"<Upload><Key>pre/x y</Key><UploadId>2~fssMRVYp9TmxfrTmfX6ne-BYXRFTVat</UploadId>"
	"<Initiator><ID>tierfs</ID><DisplayName>tierfs tests</DisplayName></Initiator>"
	"<Owner><ID>tierfs</ID><DisplayName>tierfs tests</DisplayName></Owner>"
	"<StorageClass>STANDARD</StorageClass><Initiated>2026-11-22T00:04:49.235Z</Initiated></"
	"Upload>"
	"</ListMultipartUploadsResult>";

static void expect_uploads(const char *body, size_t len, size_t want)
{
	size_t n = 99;
	cr_assert_eq(tfs_s3_xml_parse_uploads(body, len, &n), 0, "%.60s", body);
	cr_assert_eq(n, want, "%zu uploads, expected %zu: %.60s", n, want, body);
}

Test(uploads, moto_and_rgw)
{
	expect_uploads(BODY(moto_uploads), 2);
	expect_uploads(BODY(rgw_uploads), 2);
}

Test(uploads, none)
{
	/* Captured from moto_server and Ceph RGW 16.2 with no upload. */
	static const char moto[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
				   "<ListMultipartUploadsResult " NS "><Bucket>tierfs-test</"
				   "Bucket><KeyMarker/>"
				   "<UploadIdMarker/><MaxUploads>1000</"
				   "MaxUploads><IsTruncated>false</IsTruncated>"
				   "</ListMultipartUploadsResult>";
	static const char rgw[] = XMLDECL "<ListMultipartUploadsResult " NS "><Bucket>tierfs-test</"
					  "Bucket>"
					  "<Prefix>pre/</Prefix><MaxUploads>1000</MaxUploads>"
					  "<IsTruncated>false</IsTruncated></"
					  "ListMultipartUploadsResult>";
	expect_uploads(BODY(moto), 0);
	expect_uploads(BODY(rgw), 0);
	expect_uploads(BODY("<ListMultipartUploadsResult/>"), 0);
}

Test(uploads, aws_pretty_truncated_and_nested)
{
	/* The AWS documentation's example, shortened; only <Upload> directly
	 * under the root counts. */
	static const char aws[] = XMLDECL
		"\n<ListMultipartUploadsResult " NS ">\n"
		"  <Bucket>bucket</Bucket>\n  <KeyMarker></KeyMarker>\n"
		"  <NextKeyMarker>my-movie.m2ts</NextKeyMarker>\n  <MaxUploads>3</MaxUploads>\n"
		"  <IsTruncated>true</IsTruncated>\n"
		"  <Upload>\n    <Key>my-divisor</Key>\n"
		"    <UploadId>XMgbGlrZSBlbHZpbmcncyBub3QgaGF2aW5nIG11Y2ggbHVjaw</UploadId>\n"
		"  </Upload>\n"
		"  <Upload>\n    <Key>my-movie.m2ts</Key>\n"
		"    "
		"<UploadId>VXBsb2FkIElEIGZvciBlbHZpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>\n"
		"  </Upload>\n"
		"  <Upload>\n    <Key>my-movie.m2ts</Key>\n"
		"    <UploadId>YW55IGlkZWEgd2h5IGVsdmluZydzIHVwbG9hZCBmYWlsZWQ</UploadId>\n"
		"  </Upload>\n"
		"  <CommonPrefixes><Upload>not one</Upload></CommonPrefixes>\n"
		"</ListMultipartUploadsResult>\n";
	expect_uploads(BODY(aws), 3);
	expect_uploads(BODY("<s3:ListMultipartUploadsResult xmlns:s3=\"x\">"
			    "<s3:Upload/><s3:Upload/></s3:ListMultipartUploadsResult>"),
		       2);
}

Test(uploads, errors)
{
	size_t n = 99;
	cr_assert_eq(tfs_s3_xml_parse_uploads(BODY("<Error><Code>NoSuchBucket</Code></Error>"), &n),
		     EIO);
	cr_assert_eq(n, 0);
	n = 99;
	cr_assert_eq(tfs_s3_xml_parse_uploads(BODY("<ListBucketResult><Upload/></"
						   "ListBucketResult>"),
					      &n),
		     EIO);
	cr_assert_eq(n, 0);
	n = 99;
	cr_assert_eq(tfs_s3_xml_parse_uploads(BODY("<ListMultipartUploadsResult><Upload>"), &n),
		     EIO);
	cr_assert_eq(n, 0, "a truncated reply must not report a count");
	cr_assert_eq(tfs_s3_xml_parse_uploads(BODY(""), &n), EIO);
	cr_assert_eq(tfs_s3_xml_parse_uploads(NULL, 0, &n), EIO);
}

/* ---- CompleteMultipartUploadResult / CopyObjectResult ---- */

Test(etag, complete_aws)
{
	static const char body[] = XMLDECL
		"\n<CompleteMultipartUploadResult " NS ">\n"
		"  <Location>https://example-bucket.s3.amazonaws.com/big%20file</Location>\n"
		"  <Bucket>example-bucket</Bucket>\n  <Key>big file</Key>\n"
		"  <ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>\n"
		"  <ChecksumCRC32>NhCmhg==</ChecksumCRC32>\n"
		"</CompleteMultipartUploadResult>";
	char etag[TFS_ETAG_MAX], code[32] = "x", msg[32] = "x";
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, code, sizeof(code), msg, sizeof(msg)),
		     0);
	cr_assert_str_eq(etag, "\"3858f62230ac3c915f300c664312c11f-9\"");
	cr_assert_str_eq(code, "");
	cr_assert_str_eq(msg, "");
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, NULL, 0, NULL, 0), 0);
	cr_assert_str_eq(etag, "\"3858f62230ac3c915f300c664312c11f-9\"");
}

Test(etag, complete_moto_response_root)
{
	/* moto 5 answers with <CompleteMultipartUploadResponse>. */
	static const char body[] = XMLDECL "\n<CompleteMultipartUploadResponse " NS
					   "><Location>http://b.s3.amazonaws.com/big"
					   "</Location><Bucket>b</Bucket><Key>big</"
					   "Key><ETag>\"60ce2c61d0c584ae56059abe75e344ec-4\""
					   "</ETag></CompleteMultipartUploadResponse>";
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, NULL, 0, NULL, 0), 0);
	cr_assert_str_eq(etag, "\"60ce2c61d0c584ae56059abe75e344ec-4\"");
}

Test(etag, complete_with_keepalive_whitespace)
{
	/* AWS trickles whitespace while a slow CompleteMultipartUpload runs. */
	static const char body[] = "   \n  \n" XMLDECL "\n\n"
				   "<CompleteMultipartUploadResult " NS "><ETag>&quot;abc-2&quot;</"
				   "ETag>"
				   "</CompleteMultipartUploadResult>";
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, NULL, 0, NULL, 0), 0);
	cr_assert_str_eq(etag, "\"abc-2\"");
}

Test(etag, complete_without_or_empty_etag)
{
	char etag[TFS_ETAG_MAX] = "junk";
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY("<CompleteMultipartUploadResult " NS "><Bucket>b"
						"</Bucket><Key>k</Key></"
						"CompleteMultipartUploadResult>"),
					   etag, NULL, 0, NULL, 0),
		     0);
	cr_assert_str_eq(etag, "");
	/* Ceph RGW 16 sends an empty ETag. */
	memcpy(etag, "junk", 5);
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(XMLDECL "<CompleteMultipartUploadResult " NS ">"
							"<Location>l</Location><Bucket>b</Bucket>"
							"<Key>k</Key><ETag></ETag>"
							"</CompleteMultipartUploadResult>"),
					   etag, NULL, 0, NULL, 0),
		     0);
	cr_assert_str_eq(etag, "");
	memcpy(etag, "junk", 5);
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY("<CompleteMultipartUploadResult><ETag/>"
						"</CompleteMultipartUploadResult>"),
					   etag, NULL, 0, NULL, 0),
		     0);
	cr_assert_str_eq(etag, "");
}

Test(etag, first_etag_under_root)
{
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY("<CopyObjectResult><Part><ETag>\"deep\"</ETag></"
						"Part>"
						"<ETag>\"one\"</ETag><ETag>\"two\"</ETag>"
						"</CopyObjectResult>"),
					   etag, NULL, 0, NULL, 0),
		     0);
	cr_assert_str_eq(etag, "\"one\"");
}

Test(etag, error_root_in_200)
{
	static const char body[] = XMLDECL
		"\n\n<Error>\n  <Code>InternalError</Code>\n"
		"  <Message>We encountered an internal error. Please try again.</Message>\n"
		"  <RequestId>656c76696e6727732072657175657374</RequestId>\n"
		"  <HostId>Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==</HostId>\n"
		"</Error>";
	char etag[TFS_ETAG_MAX] = "x", code[32], msg[128];
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, code, sizeof(code), msg, sizeof(msg)),
		     EIO);
	cr_assert_str_eq(etag, "");
	cr_assert_str_eq(code, "InternalError");
	cr_assert_str_eq(msg, "We encountered an internal error. Please try again.");
	/* NULL code/msg are allowed. */
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, NULL, 0, NULL, 0), EIO);
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, code, 9, NULL, 0), EIO);
	cr_assert_str_eq(code, "Internal");
	/* An ETag inside an Error is not a result. */
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY("<Error><ETag>\"e\"</ETag></Error>"), etag, code,
					   sizeof(code), msg, sizeof(msg)),
		     EIO);
	cr_assert_str_eq(etag, "");
	cr_assert_str_eq(code, "");
}

Test(etag, copy_object_moto)
{
	static const char body[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
				   "<CopyObjectResult " NS "><ETag>" HELLO_ETAG "</ETag>"
				   "<LastModified>2026-11-21T21:59:38.000Z</LastModified>"
				   "<ChecksumCRC32>NhCmhg==</ChecksumCRC32></CopyObjectResult>";
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(body), etag, NULL, 0, NULL, 0), 0);
	cr_assert_str_eq(etag, HELLO_ETAG);

	/* UploadPartCopy replies the same way. */
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY("<CopyPartResult><LastModified>x</LastModified>"
						"<ETag>\"p\"</ETag></CopyPartResult>"),
					   etag, NULL, 0, NULL, 0),
		     0);
	cr_assert_str_eq(etag, "\"p\"");
}

Test(etag, wrong_root_and_too_long)
{
	char etag[TFS_ETAG_MAX] = "x";
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY(moto_empty), etag, NULL, 0, NULL, 0), EIO);
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY("<InitiateMultipartUploadResult><ETag>\"e\"</ETag>"
						"</InitiateMultipartUploadResult>"),
					   etag, NULL, 0, NULL, 0),
		     EIO);
	cr_assert_str_eq(etag, "");

	char big[TFS_ETAG_MAX + 1];
	memset(big, 'a', sizeof(big) - 1);
	big[0] = big[sizeof(big) - 2] = '"';
	big[sizeof(big) - 1] = '\0';
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 4096);
	cr_assert_eq(tfs_dbuf_addf(&d, "<CopyObjectResult><ETag>%s</ETag></CopyObjectResult>", big),
		     0);
	cr_assert_eq(tfs_s3_xml_parse_etag(d.buf, d.len, etag, NULL, 0, NULL, 0), EIO);
	tfs_dbuf_reset(&d);
	big[TFS_ETAG_MAX - 2] = '"';
	big[TFS_ETAG_MAX - 1] = '\0';
	cr_assert_eq(tfs_dbuf_addf(&d, "<CopyObjectResult><ETag>%s</ETag></CopyObjectResult>", big),
		     0);
	cr_assert_eq(tfs_s3_xml_parse_etag(d.buf, d.len, etag, NULL, 0, NULL, 0), 0);
	cr_assert_str_eq(etag, big);
	/* Without its quotes it gets them, and must still fit with them. */
	tfs_dbuf_reset(&d);
	cr_assert_eq(tfs_dbuf_addf(&d, "<CopyObjectResult><ETag>%.*s</ETag></CopyObjectResult>",
				   TFS_ETAG_MAX - 3, big + 1),
		     0);
	cr_assert_eq(tfs_s3_xml_parse_etag(d.buf, d.len, etag, NULL, 0, NULL, 0), 0);
	cr_assert_str_eq(etag, big);
	tfs_dbuf_reset(&d);
	cr_assert_eq(tfs_dbuf_addf(&d, "<CopyObjectResult><ETag>a%.*s</ETag></CopyObjectResult>",
				   TFS_ETAG_MAX - 3, big + 1),
		     0);
	cr_assert_eq(tfs_s3_xml_parse_etag(d.buf, d.len, etag, NULL, 0, NULL, 0), EIO);
	tfs_dbuf_free(&d);
}

/* Ceph RGW completes an upload of copied parts with an ETag without its
 * quotes; HEAD and listings quote it, so the parsers add them. */
Test(etag, unquoted_gets_quotes)
{
	char etag[TFS_ETAG_MAX];
	cr_assert_eq(tfs_s3_xml_parse_etag(BODY("<CompleteMultipartUploadResult><ETag>"
						"44d40951fde7bf277f713fc5b1736b78-3</ETag>"
						"</CompleteMultipartUploadResult>"),
					   etag, NULL, 0, NULL, 0),
		     0);
	cr_assert_str_eq(etag, "\"44d40951fde7bf277f713fc5b1736b78-3\"");
	struct tfs_list_page pg;
	list_ok(BODY("<ListBucketResult><Contents><Key>k</Key><ETag>abc</ETag>"
		     "</Contents></ListBucketResult>"),
		NULL, &pg);
	cr_assert_str_eq(pg.entries[0].etag, "\"abc\"");
	tfs_list_page_clear(&pg);
}

/* ---- time ---- */

static int64_t t_ok(const char *s)
{
	int64_t t = -12345;
	int rc = tfs_s3_parse_time(s, &t);
	cr_assert_eq(rc, 0, "parse_time(\"%s\") returned %d", s, rc);
	return t;
}

static int t_rc(const char *s)
{
	int64_t t = -12345;
	int rc = tfs_s3_parse_time(s, &t);
	if (rc)
		cr_assert_eq(t, -12345, "parse_time(\"%s\") wrote output on failure", s);
	return rc;
}

Test(time, iso8601)
{
	cr_assert_eq(t_ok("2024-01-02T03:04:05.000Z"), INT64_C(1704164645));
	cr_assert_eq(t_ok("2024-01-02T03:04:05Z"), INT64_C(1704164645));
	cr_assert_eq(t_ok("2024-01-02T03:04:05.999999Z"), INT64_C(1704164645)); /* truncated */
	cr_assert_eq(t_ok("2024-01-02T03:04:05.5Z"), INT64_C(1704164645));
	cr_assert_eq(t_ok("2024-01-02T05:04:05+02:00"), INT64_C(1704164645));
	cr_assert_eq(t_ok("2024-01-01T22:34:05.000-0430"), INT64_C(1704164645));
	cr_assert_eq(t_ok("1970-01-01T00:00:00.000Z"), 0);
	cr_assert_eq(t_ok("1969-12-31T23:59:59Z"), -1);
	cr_assert_eq(t_ok("2024-02-29T23:59:59Z"), INT64_C(1709251199));
	cr_assert_eq(t_ok("2000-03-01T00:00:00Z"), INT64_C(951868800));
	cr_assert_eq(t_ok("2100-03-01T00:00:00Z"), INT64_C(4107542400));
	cr_assert_eq(t_ok("1900-01-01T00:00:00Z"), INT64_C(-2208988800));
	cr_assert_eq(t_ok("9999-12-31T23:59:59Z"), INT64_C(253402300799));
	cr_assert_eq(t_ok("2016-12-31T23:59:60Z"), INT64_C(1483228800)); /* leap second */
	cr_assert_eq(t_ok(" 2014-11-21T19:40:05.000Z\n"), INT64_C(1416598805));
	cr_assert_eq(t_ok("2024-01-02T03:04:05.0000000000000000000000000000000000000000000000000"
			  "000000000000000000000000000000000000000000000001Z"),
		     INT64_C(1704164645));
}

Test(time, http_date)
{
	cr_assert_eq(t_ok("Tue, 02 Jan 2024 03:04:05 GMT"), INT64_C(1704164645));
	cr_assert_eq(t_ok("Sun, 06 Nov 1994 08:49:37 GMT"), INT64_C(784111777));
	cr_assert_eq(t_ok("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
	cr_assert_eq(t_ok("Thu, 29 Feb 2024 23:59:59 GMT"), INT64_C(1709251199));
	/* The obsolete forms RFC 7231 requires recipients to accept. */
	cr_assert_eq(t_ok("Sunday, 06-Nov-94 08:49:37 GMT"), INT64_C(784111777));
	cr_assert_eq(t_ok("Sun Nov  6 08:49:37 1994"), INT64_C(784111777));
	cr_assert_eq(t_ok("Tue Jan 02 03:04:05 2024"), INT64_C(1704164645));
	cr_assert_eq(t_ok("Tuesday, 02-Jan-24 03:04:05 GMT"), INT64_C(1704164645));
}

Test(time, independent_of_tz)
{
	setenv("TZ", "America/New_York", 1);
	tzset();
	cr_assert_eq(t_ok("Tue, 02 Jan 2024 03:04:05 GMT"), INT64_C(1704164645));
	cr_assert_eq(t_ok("2024-07-02T03:04:05Z"), INT64_C(1719889445));
	setenv("TZ", "Asia/Kolkata", 1);
	tzset();
	cr_assert_eq(t_ok("2024-01-02T03:04:05.000Z"), INT64_C(1704164645));
	cr_assert_eq(t_ok("Tue, 02 Jul 2024 03:04:05 GMT"), INT64_C(1719889445));
}

Test(time, garbage)
{
	static const char *const bad[] = {
		"",
		"   ",
		"yesterday",
		"2024",
		"2024-01-02",
		"2024-01-02T03:04:05",       /* no zone */
		"2024-01-02 03:04:05Z",      /* space instead of T */
		"2024-1-2T3:4:5Z",           /* short fields */
		"2024-13-02T03:04:05Z",      /* month */
		"2024-00-02T03:04:05Z",      /* month */
		"2024-01-00T03:04:05Z",      /* day */
		"2023-02-29T03:04:05Z",      /* not a leap year */
		"1900-02-29T03:04:05Z",      /* not a leap year */
		"2024-04-31T03:04:05Z",      /* day */
		"2024-01-02T24:00:00Z",      /* hour */
		"2024-01-02T03:60:05Z",      /* minute */
		"2024-01-02T03:04:61Z",      /* second */
		"2024-01-02T03:04:05.Z",     /* empty fraction */
		"2024-01-02T03:04:05ZZ",     /* trailing junk */
		"2024-01-02T03:04:05+2",     /* bad offset */
		"2024-01-02T03:04:05+24:00", /* bad offset */
		"+2024-01-02T03:04:05Z",     /* sign */
		"Tue, 02 Jan 2024 03:04:05", /* no GMT */
		"Tue, 02 Jan 2024 03:04:05 PST",
		"Tue, 02 Jan 2024 03:04:05 GMT junk",
		"Tue, 2 Jan 2024 03:04:05 GMT", /* fixdate day has 2 digits */
		"Tue, 02 Foo 2024 03:04:05 GMT",
		"Xyz, 02 Jan 2024 03:04:05 GMT",
		"tue, 02 jan 2024 03:04:05 GMT", /* case-sensitive */
		"Tue, 31 Feb 2024 03:04:05 GMT",
		"Tue, 02 Jan 24 03:04:05 GMT",
		"Tue,02 Jan 2024 03:04:05 GMT",
		"Tuesday, 02-Jan-2024 03:04:05 GMT",
		"Tuesdax, 02-Jan-24 03:04:05 GMT",
		"Sun Nov 6 08:49:37 1994",
		"Sun Nov  6 08:49:37 1994 GMT",
		"\xff\xfe",
		"2024-01-02T03:04:05Z\n2024",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(t_rc(bad[i]), EINVAL, "accepted \"%s\"", bad[i]);
	int64_t t;
	cr_assert_eq(tfs_s3_parse_time(NULL, &t), EINVAL);
}

/* Keys longer than S3 allows (1024 bytes, bucket prefix included) and names
 * outside the bucket prefix are dropped and counted; 1024 bytes is kept. */
Test(list, overlong_and_foreign_names_dropped_and_counted)
{
	struct tfs_list_page pg;
	char k[TFS_S3_KEY_MAX + 2];
	memset(k, 'k', sizeof(k));
	memcpy(k, "pre/", 4);
	k[TFS_S3_KEY_MAX] = '\0';
	cr_assert_eq(one_key(k, &pg), 0);
	cr_assert_eq(pg.n_entries, 1);
	cr_assert_eq(pg.n_dropped, 0);
	tfs_list_page_clear(&pg);
	k[TFS_S3_KEY_MAX] = 'k';
	k[TFS_S3_KEY_MAX + 1] = '\0';
	cr_assert_eq(one_key(k, &pg), 0);
	cr_assert_eq(pg.n_entries, 0);
	cr_assert_eq(pg.n_dropped, 1);
	tfs_list_page_clear(&pg);

	list_ok(BODY("<ListBucketResult><Contents><Key>pre/a</Key></Contents>"
		     "<Contents><Key>other/b</Key></Contents>"
		     "<CommonPrefixes><Prefix>pre/d/</Prefix></CommonPrefixes>"
		     "<CommonPrefixes><Prefix>x/</Prefix></CommonPrefixes></ListBucketResult>"),
		"pre/", &pg);
	cr_assert_eq(pg.n_entries, 1);
	cr_assert_str_eq(pg.entries[0].key, "a");
	cr_assert_eq(pg.n_prefixes, 1);
	cr_assert_str_eq(pg.prefixes[0], "d/");
	cr_assert_eq(pg.n_dropped, 2);
	tfs_list_page_clear(&pg);
}
