/* test_near_verify.c - near copies hold far's bytes (backends/near_verify.h,
 * near_sums.h, near.c): each check is shown catching a corrupted byte,
 * range or copy.  Far's ETag (plain MD5, multipart with its part size),
 * the range digests of a spool file with a range at the wrong offset, the
 * block digests of a copy in near with a byte changed, a copy without
 * digests, and a far read whose caller reuses each buffer as soon as it
 * is reported. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "local.h"
#include "log.h"
#include "near.h"
#include "near_fixture.h"
#include "near_key.h"
#include "near_spool.h"
#include "near_verify.h"

#define MIB (1u << 20)

/* Bytes unique at every offset: each 8-byte word holds its own offset
 * mixed with a seed. */
static void fill(char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = (i + seed) * 0x9e3779b97f4a7c15ull;
		memcpy(p + i, &v, n - i < 8 ? n - i : 8);
	}
}

static void md5_hex(const void *p, size_t n, char out[33])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	EVP_Digest(p, n, md, &len, EVP_md5(), NULL);
	for (unsigned i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The multipart ETag S3 gives parts of part_size bytes. */
static void multipart_etag(const char *p, size_t n, size_t part_size, char out[TFS_ETAG_MAX])
{
	unsigned char all[16 * 64];
	unsigned parts = 0;
	for (size_t at = 0; at < n; at += part_size, parts++) {
		unsigned int len = 0;
		EVP_Digest(p + at, n - at < part_size ? n - at : part_size, all + 16 * parts, &len,
			   EVP_md5(), NULL);
	}
	char h[33];
	md5_hex(all, 16 * parts, h);
	snprintf(out, TFS_ETAG_MAX, "\"%s-%u\"", h, parts);
}

static int verify(const char *p, size_t n, const struct tfs_nv_far *far,
		  const struct tfs_nv_piece *pcs, size_t npcs, bool complete, enum tfs_nv_how *how)
{
	struct tfs_nv_sums sums;
	int rc = tfs_nv_verify(tfs_io_cbuf(p), n, far, pcs, npcs, complete, &sums, how);
	if (rc == 0)
		cr_assert_eq(sums.n, (n + TFS_NV_BLOCK - 1) / TFS_NV_BLOCK);
	tfs_nv_sums_clear(&sums);
	return rc;
}

Test(near_verify, a_plain_md5_etag_catches_a_changed_byte)
{
	size_t n = 3 * MIB + 123;
	char *p = malloc(n), h[33], etag[40];
	fill(p, n, 1);
	md5_hex(p, n, h);
	snprintf(etag, sizeof(etag), "\"%s\"", h);
	struct tfs_nv_far far = { .etag = etag, .size = n };
	enum tfs_nv_how how;
	cr_assert_eq(verify(p, n, &far, NULL, 0, false, &how), 0);
	cr_assert_eq(how, TFS_NV_MD5);
	p[2 * MIB + 5] ^= 1;
	cr_assert_eq(verify(p, n, &far, NULL, 0, false, &how), EBADMSG);
	/* A size that differs from far's is not the version either. */
	p[2 * MIB + 5] ^= 1;
	far.size = n + 1;
	cr_assert_eq(verify(p, n, &far, NULL, 0, false, &how), EBADMSG);
	free(p);
}

Test(near_verify, a_multipart_etag_catches_a_block_one_mib_away)
{
	size_t n = 13 * MIB + 777, part = 5 * MIB;
	char *p = malloc(n), etag[TFS_ETAG_MAX];
	fill(p, n, 2);
	multipart_etag(p, n, part, etag);
	struct tfs_nv_far far = { .etag = etag, .size = n, .part_size = part };
	enum tfs_nv_how how;
	cr_assert_eq(verify(p, n, &far, NULL, 0, false, &how), 0);
	cr_assert_eq(how, TFS_NV_MULTIPART);
	/* issue 31: the MiB at 9 MiB holds the bytes of the MiB at 10 */
	char *saved = malloc(MIB);
	memcpy(saved, p + 9 * MIB, MIB);
	memcpy(p + 9 * MIB, p + 10 * MIB, MIB);
	cr_assert_eq(verify(p, n, &far, NULL, 0, false, &how), EBADMSG);
	memcpy(p + 9 * MIB, saved, MIB);
	/* Without part 1's size (Ceph RGW 16.2), or with one that does not
	 * give the ETag's count of parts, nothing vouches for the bytes. */
	far.part_size = 0;
	cr_assert_eq(verify(p, n, &far, NULL, 0, false, &how), ENOTSUP);
	far.part_size = 8 * MIB;
	cr_assert_eq(verify(p, n, &far, NULL, 0, false, &how), ENOTSUP);
	free(saved);
	free(p);
}

Test(near_verify, without_an_md5_etag_the_range_digests_decide)
{
	size_t n = 2 * MIB + 10;
	char *p = malloc(n);
	fill(p, n, 3);
	/* SSE-KMS: an ETag of MD5 shape that is not the bytes' MD5 */
	struct tfs_nv_far far = { .etag = "\"0123456789abcdef0123456789abcdef\"",
				  .size = n,
				  .encrypted = true };
	struct tfs_nv_piece pcs[2];
	tfs_nv_piece_make(&pcs[0], 0, tfs_io_cbuf(p), MIB);
	tfs_nv_piece_make(&pcs[1], MIB, tfs_io_cbuf(p + MIB), n - MIB);
	enum tfs_nv_how how;
	cr_assert_eq(verify(p, n, &far, pcs, 2, true, &how), 0);
	cr_assert_eq(how, TFS_NV_PIECES);
	cr_assert_eq(verify(p, n, &far, pcs, 2, false, &how), ENOTSUP, "incomplete pieces");
	p[MIB + 1] ^= 0x80;
	cr_assert_eq(verify(p, n, &far, pcs, 2, true, &how), EBADMSG);
	/* A piece is checked even when far's ETag vouches: a local ETag */
	p[MIB + 1] ^= 0x80;
	far.etag = "\"1700000000-123\"";
	far.encrypted = false;
	cr_assert_eq(verify(p, n, &far, pcs, 2, true, &how), 0);
	p[0] ^= 1;
	cr_assert_eq(verify(p, n, &far, pcs, 2, true, &how), EBADMSG);
	free(p);
}

/* Far's full-object checksums, with the standard check input: each
 * vouches for the bytes when no ETag can, and a changed byte fails it. */
Test(near_verify, a_full_object_checksum_catches_a_changed_byte)
{
	static const char *const v[][2] = {
		{ "crc32", "y/Q5Jg==" },
		{ "crc32c", "4waSgw==" },
		{ "crc64nvme", "rosUhgp5mIg=" },
		{ "sha1", "98O8HYCOBHMq32eZZczDTKeuNEE=" },
		{ "sha256", "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU=" },
	};
	char p[] = "123456789";
	/* a multipart ETag without its part size: it cannot vouch */
	struct tfs_nv_far far = { .etag = "\"0123456789abcdef0123456789abcdef-2\"", .size = 9 };
	enum tfs_nv_how how;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		far.checksum_alg = v[i][0];
		far.checksum = v[i][1];
		cr_assert_eq(verify(p, 9, &far, NULL, 0, false, &how), 0, "%s", v[i][0]);
		cr_assert_eq(how, TFS_NV_CHECKSUM);
		p[4] ^= 1;
		cr_assert_eq(verify(p, 9, &far, NULL, 0, false, &how), EBADMSG, "%s", v[i][0]);
		p[4] ^= 1;
	}
	/* An algorithm it does not know is no checksum */
	far.checksum_alg = "md4";
	cr_assert_eq(verify(p, 9, &far, NULL, 0, false, &how), ENOTSUP);
}

/* The spool's own logic: a range that lands at the wrong offset of the
 * file is caught by the digest taken from the reader's bytes. */
Test(near_verify, a_spool_range_written_at_the_wrong_offset_is_caught)
{
	char dir[] = "/tmp/test_near_verify.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	struct tfs_near_spools *sp = NULL;
	cr_assert_eq(tfs_near_spools_create(dir, 64 * MIB, 600000, NULL, NULL, &sp), 0);
	size_t n = 3 * MIB;
	char *p = malloc(n);
	fill(p, n, 4);
	struct tfs_spool_result res;
	cr_assert_eq(tfs_near_spool_add(sp, "k", "\"e\"", MIB, tfs_io_cbuf(p + MIB), 2 * MIB, &res),
		     0);
	cr_assert(res.first);
	tfs_near_spool_sized(sp, "k", "\"e\"", n, &res);
	cr_assert_lt(res.done_fd, 0);
	cr_assert_eq(tfs_near_spool_add(sp, "k", "\"e\"", 0, tfs_io_cbuf(p), MIB, &res), 0);
	cr_assert_geq(res.done_fd, 0, "whole");
	cr_assert_eq(res.npieces, 2);
	cr_assert(res.pieces_complete);
	struct tfs_nv_far far = { .etag = "\"no-md5\"", .size = n };
	struct tfs_nv_sums sums;
	enum tfs_nv_how how;
	cr_assert_eq(tfs_nv_verify(tfs_io_fd(res.done_fd, 0), n, &far, res.pieces, res.npieces,
				   true, &sums, &how),
		     0);
	cr_assert_eq(how, TFS_NV_PIECES);
	tfs_nv_sums_clear(&sums);
	/* The file as the bug left it: the MiB at 1 MiB holds the next one */
	cr_assert_eq(tfs_pwrite_all(res.done_fd, p + 2 * MIB, MIB, MIB), 0);
	cr_assert_eq(tfs_nv_verify(tfs_io_fd(res.done_fd, 0), n, &far, res.pieces, res.npieces,
				   true, &sums, &how),
		     EBADMSG);
	close(res.done_fd);
	free(res.pieces);
	tfs_near_spools_destroy(sp);
	rmdir(dir);
	free(p);
}

Test(near_verify, block_digests_round_trip_and_catch_a_changed_byte)
{
	size_t n = 2 * MIB + 1;
	char *p = malloc(n), h[33], etag[40];
	fill(p, n, 5);
	md5_hex(p, n, h);
	snprintf(etag, sizeof(etag), "%s", h);
	struct tfs_nv_far far = { .etag = etag, .size = n };
	struct tfs_nv_sums s, d;
	enum tfs_nv_how how;
	cr_assert_eq(tfs_nv_verify(tfs_io_cbuf(p), n, &far, NULL, 0, false, &s, &how), 0);
	char *text;
	size_t len;
	cr_assert_eq(tfs_nv_sums_encode(&s, &text, &len), 0);
	cr_assert_eq(tfs_nv_sums_decode(text, len, n, &d), 0);
	cr_assert_eq(d.block, TFS_NV_BLOCK);
	cr_assert_eq(d.n, 3);
	cr_assert_eq(memcmp(d.d, s.d, 3 * TFS_NV_DIGEST), 0);
	cr_assert_eq(tfs_nv_sums_check(&d, 0, p, n), 0);
	cr_assert_eq(tfs_nv_sums_check(&d, 2 * MIB, p + 2 * MIB, 1), 0, "the short last block");
	cr_assert_eq(tfs_nv_sums_check(&d, 1, p + 1, MIB), EINVAL, "not block-aligned");
	p[MIB + 77] ^= 4;
	cr_assert_eq(tfs_nv_sums_check(&d, MIB, p + MIB, MIB), EBADMSG);
	/* Malformed texts: for another size, a bad digit, a tiny block */
	struct tfs_nv_sums bad;
	cr_assert_eq(tfs_nv_sums_decode(text, len, n + MIB, &bad), EBADMSG);
	text[len - 1] = 'g';
	cr_assert_eq(tfs_nv_sums_decode(text, len, n, &bad), EBADMSG);
	cr_assert_eq(tfs_nv_sums_decode("512:00", 6, 1, &bad), EBADMSG);
	cr_assert_eq(tfs_nv_sums_decode(":", 1, 1, &bad), EBADMSG);
	free(text);
	tfs_nv_sums_clear(&s);
	tfs_nv_sums_clear(&d);
	free(p);
}

/* ---- through the near backend, two local stores ---- */

static void compose(bool spool)
{
	char sp[160];
	struct tfs_near_config c = near_test_cfg;
	c.copy_budget = 64 * MIB;
	if (spool) {
		snprintf(sp, sizeof(sp), "%s/spool", base);
		cr_assert_eq(mkdir(sp, 0700), 0);
		c.spool_dir = sp;
		c.spool_size = 64 * MIB;
	}
	cr_assert_eq(tfs_near_create(&c, local_at(near_dir), local_at(far_dir), &tlog, &be), 0);
}

static void put_far(const char *key, const char *data, size_t n, char etag[TFS_ETAG_MAX])
{
	cr_assert_eq(tfs_backend_put(be, key, tfs_io_cbuf(data), n, NULL, NULL), 0);
	struct tfs_obj_meta m = { 0 };
	cr_assert_eq(tfs_backend_head(be, key, &m), 0);
	memcpy(etag, m.etag, TFS_ETAG_MAX);
	tfs_obj_meta_clear(&m);
}

static void copy_path(const char *key, const char *etag, char *path, size_t cap)
{
	char nk[512];
	copy_name(key, etag, nk, sizeof(nk));
	snprintf(path, cap, "%s/%s", near_dir, nk);
}

/* The near copy's bytes equal want. */
static void assert_copy(const char *key, const char *etag, const char *want, size_t n)
{
	char path[700];
	copy_path(key, etag, path, sizeof(path));
	char *got = malloc(n + 1);
	int fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(tfs_pread_full(fd, got, n + 1, 0), (ssize_t)n);
	close(fd);
	cr_assert_eq(memcmp(got, want, n), 0, "the near copy differs from far");
	free(got);
}

static size_t read_at(const char *key, const char *etag, uint64_t off, size_t len, char *buf)
{
	size_t got = 0;
	char e[TFS_ETAG_MAX];
	cr_assert_eq(tfs_backend_get_range(be, key, off, len, etag, tfs_io_buf(buf), &got, e), 0);
	return got;
}

Test(near_verify, a_changed_byte_in_a_near_copy_is_never_served, .init = near_setup,
     .fini = near_teardown)
{
	compose(false);
	size_t n = 3 * MIB;
	char *p = malloc(n), *buf = malloc(n), etag[TFS_ETAG_MAX], path[700];
	fill(p, n, 6);
	put_far("obj", p, n, etag);
	cr_assert_eq(read_at("obj", etag, 0, n, buf), n);
	wait_for("copies", 1);
	cr_assert_eq(stat_of("copies_verified_ranges"), 1, "a local ETag: the range digests");
	/* flip a byte of the copy in near */
	copy_path("obj", etag, path, sizeof(path));
	int fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "\xff", 1, 2 * MIB + 9), 1);
	close(fd);
	memset(buf, 0, n);
	cr_assert_eq(read_at("obj", etag, MIB, 2 * MIB, buf), 2 * MIB);
	cr_assert_eq(memcmp(buf, p + MIB, 2 * MIB), 0, "far's bytes");
	cr_assert_eq(stat_of("verify_failed"), 1);
	cr_assert_eq(stat_of("hits"), 0);
	cr_assert_neq(access(path, F_OK), 0, "the bad copy stays in near");
	/* The block before it was fine, but the copy is gone: far again,
	 * and a new copy is made. */
	wait_for("copies", 2);
	cr_assert_eq(read_at("obj", etag, 0, MIB, buf), MIB);
	cr_assert_eq(memcmp(buf, p, MIB), 0);
	cr_assert_eq(stat_of("hits"), 1);
	assert_copy("obj", etag, p, n);
	free(p);
	free(buf);
}

Test(near_verify, a_copy_without_digests_is_not_served_and_is_replaced, .init = near_setup,
     .fini = near_teardown)
{
	compose(false);
	size_t n = 100000;
	char *p = malloc(n), *buf = malloc(n), etag[TFS_ETAG_MAX], path[700];
	fill(p, n, 7);
	put_far("old", p, n, etag);
	/* a copy as made before digests (and wrong, to see it is not read) */
	copy_path("old", etag, path, sizeof(path));
	char dir[700];
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	cr_assert_eq(mkdir(dir, 0755), 0);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	cr_assert_eq(tfs_pwrite_all(fd, p + 1, n - 1, 0), 0);
	cr_assert_eq(tfs_pwrite_all(fd, "x", 1, n - 1), 0);
	close(fd);
	cr_assert_eq(read_at("old", etag, 0, n, buf), n);
	cr_assert_eq(memcmp(buf, p, n), 0);
	cr_assert_eq(stat_of("misses"), 1);
	wait_for("copies", 1);
	assert_copy("old", etag, p, n);
	cr_assert_eq(read_at("old", etag, 0, n, buf), n);
	cr_assert_eq(stat_of("hits"), 1);
	free(p);
	free(buf);
}

/* issue 31: the caller may reuse each buffer as soon as it is reported
 * (cache/ram.c): here it overwrites it at once.  The copy is still far's. */
static void scribble(void *ctx, int i)
{
	const struct iovec *iov = ctx;
	memset(iov[i].iov_base, 0xee, iov[i].iov_len);
}

static void read_scribbled(const char *key, const char *etag, uint64_t off, unsigned nbuf,
			   size_t each)
{
	struct iovec iov[8];
	for (unsigned i = 0; i < nbuf; i++) {
		iov[i].iov_base = malloc(each);
		iov[i].iov_len = each;
	}
	struct tfs_io_progress pr = { .done = scribble, .ctx = iov };
	struct tfs_io dst = tfs_io_iov(iov, (int)nbuf);
	dst.progress = &pr;
	size_t got = 0;
	cr_assert_eq(tfs_backend_get_range(be, key, off, nbuf * each, etag, dst, &got, NULL), 0);
	cr_assert_eq(pr.ndone, (int)nbuf, "every buffer reported");
	for (unsigned i = 0; i < nbuf; i++)
		free(iov[i].iov_base);
}

Test(near_verify, a_buffer_reused_once_reported_never_reaches_the_copy, .init = near_setup,
     .fini = near_teardown)
{
	compose(false);
	size_t n = 4 * 65536;
	char *p = malloc(n), etag[TFS_ETAG_MAX];
	fill(p, n, 8);
	put_far("whole", p, n, etag);
	read_scribbled("whole", etag, 0, 4, 65536); /* exactly the object: copied from it */
	wait_for("copies", 1);
	assert_copy("whole", etag, p, n);
	free(p);
}

Test(near_verify, a_spooled_buffer_reused_once_reported_never_reaches_the_copy, .init = near_setup,
     .fini = near_teardown)
{
	compose(true);
	size_t n = 6 * 65536;
	char *p = malloc(n), etag[TFS_ETAG_MAX];
	fill(p, n, 9);
	put_far("parts", p, n, etag);
	read_scribbled("parts", etag, 3 * 65536, 3, 65536);
	read_scribbled("parts", etag, 0, 3, 65536);
	wait_for("copies", 1);
	cr_assert_eq(stat_of("copies_spooled"), 1);
	assert_copy("parts", etag, p, n);
	free(p);
}

/* A copy whose digest text is too long for its metadata (past 48 MiB at
 * 1 MiB blocks) has them in a sidecar, written first and deleted with it. */
Test(near_verify, a_big_copy_keeps_its_digests_in_a_sidecar, .init = near_setup,
     .fini = near_teardown)
{
	compose(false);
	size_t n = 50 * MIB + 3;
	char *p = malloc(n), *buf = malloc(2 * MIB), etag[TFS_ETAG_MAX], path[700], side[800];
	fill(p, n, 10);
	put_far("big", p, n, etag);
	read_scribbled("big", etag, 0, 1, n); /* exactly the object */
	wait_for("copies", 1);
	assert_copy("big", etag, p, n);
	copy_path("big", etag, path, sizeof(path));
	snprintf(side, sizeof(side), "%s.tierfs-sums", path);
	cr_assert_eq(access(side, F_OK), 0, "no sidecar %s", side);
	cr_assert_eq(read_at("big", etag, 49 * MIB, MIB + 3, buf), MIB + 3);
	cr_assert_eq(memcmp(buf, p + 49 * MIB, MIB + 3), 0);
	cr_assert_eq(stat_of("hits"), 1);
	/* a byte of its last block changed: caught with the sidecar's digests */
	int fd = open(path, O_WRONLY);
	cr_assert_eq(pwrite(fd, "\x01", 1, n - 1), 1);
	close(fd);
	tfs_backend_destroy(be); /* a new node: no digests cached */
	be = NULL;
	compose(false);
	cr_assert_eq(read_at("big", etag, 50 * MIB, 3, buf), 3);
	cr_assert_eq(memcmp(buf, p + 50 * MIB, 3), 0);
	cr_assert_eq(stat_of("verify_failed"), 1);
	cr_assert_neq(access(path, F_OK), 0, "the bad copy stays");
	cr_assert_neq(access(side, F_OK), 0, "its sidecar stays");
	/* copied again; then a copy whose sidecar is lost is replaced */
	wait_for("copies", 1);
	assert_copy("big", etag, p, n);
	cr_assert_eq(unlink(side), 0);
	tfs_backend_destroy(be);
	be = NULL;
	compose(false);
	cr_assert_eq(read_at("big", etag, 0, 3, buf), 3);
	cr_assert_eq(stat_of("misses"), 1, "served without its digests");
	wait_for("copies", 1);
	cr_assert_eq(access(side, F_OK), 0, "the copy was not replaced");
	free(p);
	free(buf);
}
