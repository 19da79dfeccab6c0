/* near_verify.c - checks that a near copy holds far's bytes
 * (near_verify.h). */
#include "config.h"

#include "near_verify.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "fdio.h"

#define CHUNK TFS_NV_BLOCK /* bytes read at a time from a file */

void tfs_nv_digest(const void *buf, size_t len, uint8_t d[TFS_NV_DIGEST])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(d, c.digest, TFS_NV_DIGEST);
}

static void state_digest(XXH3_state_t *st, uint8_t d[TFS_NV_DIGEST])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	memcpy(d, c.digest, TFS_NV_DIGEST);
}

void tfs_nv_piece_make(struct tfs_nv_piece *p, uint64_t off, struct tfs_io src, uint64_t len)
{
	p->off = off;
	p->len = len;
	if (src.kind == TFS_IO_BUF) {
		tfs_nv_digest(src.cbuf, len, p->d);
		return;
	}
	XXH3_state_t st;
	XXH3_128bits_reset(&st);
	uint64_t at = 0;
	for (int i = 0; src.kind == TFS_IO_IOV && i < src.iovcnt && at < len; i++) {
		uint64_t k = src.iov[i].iov_len < len - at ? src.iov[i].iov_len : len - at;
		XXH3_128bits_update(&st, src.iov[i].iov_base, k);
		at += k;
	}
	state_digest(&st, p->d);
}

void tfs_nv_sums_clear(struct tfs_nv_sums *s)
{
	free(s->d);
	memset(s, 0, sizeof(*s));
}

/* Bytes [at, at + len) of src into buf (a file), or a pointer into it (a
 * buffer). */
static int src_bytes(struct tfs_io src, uint64_t at, uint64_t len, char *buf, const char **out)
{
	if (src.kind == TFS_IO_BUF) {
		*out = (const char *)src.cbuf + at;
		return 0;
	}
	if (src.kind != TFS_IO_FD)
		return EINVAL;
	ssize_t r = tfs_pread_full(src.fd, buf, len, src.off + (off_t)at);
	if (r < 0)
		return (int)-r;
	if ((uint64_t)r != len)
		return EIO; /* the file is shorter than its content */
	*out = buf;
	return 0;
}

bool tfs_nv_etag_multipart(const char *etag, unsigned *parts)
{
	const char *e = etag[0] == '"' ? etag + 1 : etag;
	size_t hex = strspn(e, "0123456789abcdefABCDEF");
	if (hex != 32 || e[32] != '-')
		return false;
	char *end;
	errno = 0;
	unsigned long n = strtoul(e + 33, &end, 10);
	if (errno || end == e + 33 || n < 1 || n > 10000 ||
	    !(*end == '\0' || (*end == '"' && end[1] == '\0' && etag[0] == '"')))
		return false;
	*parts = (unsigned)n;
	return true;
}

/* Whether etag is 32 hex digits (quotes allowed): an MD5's shape. */
static bool etag_plain(const char *etag)
{
	const char *e = etag[0] == '"' ? etag + 1 : etag;
	if (strspn(e, "0123456789abcdefABCDEF") != 32)
		return false;
	return e[32] == '\0' || (e[32] == '"' && e[33] == '\0' && etag[0] == '"');
}

static void hex(const uint8_t *d, size_t n, char *out)
{
	static const char x[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = x[d[i] >> 4];
		out[2 * i + 1] = x[d[i] & 15];
	}
	out[2 * n] = '\0';
}

/* Whether `want` (an ETag, quotes allowed, any case) is `got`. */
static bool etag_is(const char *want, const char *got)
{
	const char *e = want[0] == '"' ? want + 1 : want;
	size_t n = strlen(got);
	return strncasecmp(e, got, n) == 0 && (e[n] == '\0' || (e[n] == '"' && e[n + 1] == '\0'));
}

/* ---- full-object checksums (far's x-amz-checksum-*) ----
 * The CRCs are the reflected ones S3 names: CRC32 (polynomial 0x04C11DB7,
 * zlib's), CRC32C (Castagnoli, 0x1EDC6F41) and CRC64NVME (0xAD93D23594C93659),
 * each with all-ones initial value and final xor; S3 sends them, and the
 * SHA digests, as the base64 of their big-endian bytes. */

enum cksum_alg {
	CK_NONE,
	CK_CRC32,
	CK_CRC32C,
	CK_CRC64NVME,
	CK_SHA1,
	CK_SHA256
};

struct cksum {
	enum cksum_alg alg;
	uint32_t t32[256];
	uint64_t t64[256];
	uint64_t crc;
	EVP_MD_CTX *md;
};

static enum cksum_alg cksum_alg(const char *name)
{
	static const char *const names[] = { "", "crc32", "crc32c", "crc64nvme", "sha1", "sha256" };
	for (int i = 1; name && i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(name, names[i]) == 0)
			return (enum cksum_alg)i;
	return CK_NONE;
}

/* Start a checksum of `alg`.  Returns 0 or ENOMEM. */
static int cksum_init(struct cksum *c, enum cksum_alg alg)
{
	memset(c, 0, sizeof(*c));
	c->alg = alg;
	if (alg == CK_SHA1 || alg == CK_SHA256) {
		c->md = EVP_MD_CTX_new();
		if (c->md == NULL)
			return ENOMEM;
		EVP_DigestInit_ex(c->md, alg == CK_SHA1 ? EVP_sha1() : EVP_sha256(), NULL);
		return 0;
	}
	uint32_t p32 = alg == CK_CRC32 ? 0xEDB88320u : 0x82F63B78u; /* reflected */
	uint64_t p64 = 0x9A6C9329AC4BC9B5ull;                       /* CRC64NVME, reflected */
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t a = i;
		uint64_t b = i;
		for (int k = 0; k < 8; k++) {
			a = a & 1 ? (a >> 1) ^ p32 : a >> 1;
			b = b & 1 ? (b >> 1) ^ p64 : b >> 1;
		}
		c->t32[i] = a;
		c->t64[i] = b;
	}
	c->crc = alg == CK_CRC64NVME ? UINT64_MAX : 0xFFFFFFFFu;
	return 0;
}

static void cksum_update(struct cksum *c, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	if (c->alg == CK_NONE)
		return;
	if (c->md) {
		EVP_DigestUpdate(c->md, buf, len);
	} else if (c->alg == CK_CRC64NVME) {
		for (size_t i = 0; i < len; i++)
			c->crc = c->t64[(c->crc ^ p[i]) & 0xff] ^ (c->crc >> 8);
	} else {
		uint32_t crc = (uint32_t)c->crc;
		for (size_t i = 0; i < len; i++)
			crc = c->t32[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
		c->crc = crc;
	}
}

/* Whether the checksum is `want` (base64); frees c. */
static bool cksum_is(struct cksum *c, const char *want)
{
	unsigned char v[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (c->md) {
		EVP_DigestFinal_ex(c->md, v, &n);
		EVP_MD_CTX_free(c->md);
		c->md = NULL;
	} else {
		uint64_t x = c->alg == CK_CRC64NVME ? ~c->crc : (~c->crc) & 0xFFFFFFFFu;
		n = c->alg == CK_CRC64NVME ? 8 : 4;
		for (unsigned i = 0; i < n; i++)
			v[i] = (unsigned char)(x >> (8 * (n - 1 - i)));
	}
	char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	EVP_EncodeBlock((unsigned char *)b64, v, (int)n);
	return strcmp(b64, want) == 0;
}

static void cksum_free(struct cksum *c)
{
	EVP_MD_CTX_free(c->md);
	c->md = NULL;
}

/* One pass over the content: its MD5 (and its parts' MD5s, with
 * part_size), and the block digests.  etag_out gets the ETag these bytes
 * would have ("" when part_size gives more than 10,000 parts). */
static int scan(struct tfs_io src, uint64_t size, uint64_t part_size, struct cksum *ck,
		struct tfs_nv_sums *sums, char etag_out[TFS_ETAG_MAX])
{
	int rc = 0;
	uint64_t nblocks = (size + TFS_NV_BLOCK - 1) / TFS_NV_BLOCK;
	uint64_t nparts = part_size ? (size + part_size - 1) / part_size : 0;
	char *buf = src.kind == TFS_IO_FD ? malloc(CHUNK) : NULL;
	sums->d = malloc(nblocks ? nblocks * TFS_NV_DIGEST : 1);
	EVP_MD_CTX *whole = EVP_MD_CTX_new(), *part = EVP_MD_CTX_new(), *top = EVP_MD_CTX_new();
	if (sums->d == NULL || whole == NULL || part == NULL || top == NULL ||
	    (src.kind == TFS_IO_FD && buf == NULL)) {
		rc = ENOMEM;
		goto out;
	}
	if (nparts > 10000)
		nparts = part_size = 0;
	sums->block = TFS_NV_BLOCK;
	sums->size = size;
	sums->n = nblocks;
	EVP_DigestInit_ex(whole, EVP_md5(), NULL);
	EVP_DigestInit_ex(top, EVP_md5(), NULL);
	EVP_DigestInit_ex(part, EVP_md5(), NULL);
	uint64_t in_part = 0;
	for (uint64_t at = 0, b = 0; at < size; at += CHUNK, b++) {
		uint64_t k = size - at < CHUNK ? size - at : CHUNK;
		const char *p = NULL;
		rc = src_bytes(src, at, k, buf, &p);
		if (rc)
			goto out;
		tfs_nv_digest(p, k, sums->d + b * TFS_NV_DIGEST);
		EVP_DigestUpdate(whole, p, k);
		cksum_update(ck, p, k);
		while (part_size && k) {
			uint64_t take = part_size - in_part < k ? part_size - in_part : k;
			EVP_DigestUpdate(part, p, take);
			in_part += take;
			p += take;
			k -= take;
			if (in_part == part_size || (k == 0 && at + CHUNK >= size)) {
				unsigned char md[EVP_MAX_MD_SIZE];
				unsigned int mdlen = 0;
				EVP_DigestFinal_ex(part, md, &mdlen);
				EVP_DigestUpdate(top, md, mdlen);
				EVP_DigestInit_ex(part, EVP_md5(), NULL);
				in_part = 0;
			}
		}
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char h[2 * 16 + 1];
	if (part_size) {
		EVP_DigestFinal_ex(top, md, &mdlen);
		hex(md, mdlen > 16 ? 16 : mdlen, h);
		snprintf(etag_out, TFS_ETAG_MAX, "%s-%u", h, (unsigned)nparts);
	} else {
		EVP_DigestFinal_ex(whole, md, &mdlen);
		hex(md, mdlen > 16 ? 16 : mdlen, h);
		snprintf(etag_out, TFS_ETAG_MAX, "%s", h);
	}
out:
	EVP_MD_CTX_free(whole);
	EVP_MD_CTX_free(part);
	EVP_MD_CTX_free(top);
	free(buf);
	if (rc)
		tfs_nv_sums_clear(sums);
	return rc;
}

/* Check each piece against the content. */
static int check_pieces(struct tfs_io src, uint64_t size, const struct tfs_nv_piece *pieces,
			size_t n)
{
	char *buf = src.kind == TFS_IO_FD ? malloc(CHUNK) : NULL;
	if (src.kind == TFS_IO_FD && buf == NULL)
		return ENOMEM;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct tfs_nv_piece *pc = &pieces[i];
		if (pc->off > size || pc->len > size - pc->off) {
			rc = EBADMSG; /* a range beyond the object: not this version */
			break;
		}
		XXH3_state_t st;
		XXH3_128bits_reset(&st);
		for (uint64_t at = 0; rc == 0 && at < pc->len; at += CHUNK) {
			uint64_t k = pc->len - at < CHUNK ? pc->len - at : CHUNK;
			const char *p = NULL;
			rc = src_bytes(src, pc->off + at, k, buf, &p);
			if (rc == 0)
				XXH3_128bits_update(&st, p, k);
		}
		uint8_t d[TFS_NV_DIGEST];
		state_digest(&st, d);
		if (rc == 0 && memcmp(d, pc->d, TFS_NV_DIGEST) != 0)
			rc = EBADMSG;
	}
	free(buf);
	return rc;
}

int tfs_nv_verify(struct tfs_io src, uint64_t size, const struct tfs_nv_far *far,
		  const struct tfs_nv_piece *pieces, size_t n, bool complete,
		  struct tfs_nv_sums *sums, enum tfs_nv_how *how)
{
	unsigned parts = 0;
	bool multi = tfs_nv_etag_multipart(far->etag, &parts);
	bool plain = !multi && etag_plain(far->etag) && !far->encrypted;
	uint64_t part_size = 0;
	*how = TFS_NV_NONE;
	memset(sums, 0, sizeof(*sums));
	if (size != far->size)
		return EBADMSG;
	if (multi && !far->encrypted && far->part_size &&
	    (size + far->part_size - 1) / far->part_size == parts)
		part_size = far->part_size;
	char etag[TFS_ETAG_MAX];
	struct cksum ck;
	enum cksum_alg alg = far->checksum && *far->checksum ? cksum_alg(far->checksum_alg)
							     : CK_NONE;
	int rc = cksum_init(&ck, alg);
	if (rc == 0)
		rc = scan(src, size, part_size, &ck, sums, etag);
	if (rc) {
		cksum_free(&ck);
		return rc;
	}
	if (n)
		rc = check_pieces(src, size, pieces, n);
	if (rc == 0 && (plain || part_size)) {
		if (etag_is(far->etag, etag))
			*how = part_size ? TFS_NV_MULTIPART : TFS_NV_MD5;
		else
			rc = EBADMSG;
	} else if (rc == 0 && alg != CK_NONE) {
		if (cksum_is(&ck, far->checksum))
			*how = TFS_NV_CHECKSUM;
		else
			rc = EBADMSG;
	} else if (rc == 0 && n && complete) {
		*how = TFS_NV_PIECES;
	} else if (rc == 0) {
		rc = ENOTSUP;
	}
	cksum_free(&ck);
	if (rc)
		tfs_nv_sums_clear(sums);
	return rc;
}

int tfs_nv_sums_encode(const struct tfs_nv_sums *s, char **buf, size_t *len)
{
	size_t cap = 16 + 2 * TFS_NV_DIGEST * s->n + 1;
	char *p = malloc(cap);
	if (p == NULL)
		return ENOMEM;
	int w = snprintf(p, cap, "%u:", (unsigned)s->block);
	for (size_t i = 0; i < s->n; i++)
		hex(s->d + i * TFS_NV_DIGEST, TFS_NV_DIGEST, p + w + 2 * TFS_NV_DIGEST * i);
	*len = (size_t)w + 2 * TFS_NV_DIGEST * s->n;
	p[*len] = '\0';
	*buf = p;
	return 0;
}

int tfs_nv_sums_decode(const char *text, size_t len, uint64_t size, struct tfs_nv_sums *s)
{
	memset(s, 0, sizeof(*s));
	if (len > TFS_NV_TEXT_MAX)
		return EBADMSG;
	uint64_t block = 0;
	size_t i = 0;
	for (; i < len && i < 11 && text[i] >= '0' && text[i] <= '9'; i++)
		block = block * 10 + (uint64_t)(text[i] - '0');
	if (i == 0 || i == len || text[i] != ':' || block < 4096 || block > (1u << 30))
		return EBADMSG;
	i++;
	uint64_t n = (size + block - 1) / block;
	if ((len - i) != n * 2 * TFS_NV_DIGEST)
		return EBADMSG;
	s->d = malloc(n ? n * TFS_NV_DIGEST : 1);
	if (s->d == NULL)
		return ENOMEM;
	for (uint64_t k = 0; k < n * TFS_NV_DIGEST; k++) {
		int hi = OPENSSL_hexchar2int((unsigned char)text[i + 2 * k]);
		int lo = OPENSSL_hexchar2int((unsigned char)text[i + 2 * k + 1]);
		if (hi < 0 || lo < 0) {
			tfs_nv_sums_clear(s);
			return EBADMSG;
		}
		s->d[k] = (uint8_t)(hi << 4 | lo);
	}
	s->block = (uint32_t)block;
	s->size = size;
	s->n = n;
	return 0;
}

int tfs_nv_sums_check(const struct tfs_nv_sums *s, uint64_t off, const void *buf, uint64_t len)
{
	if (s->block == 0 || off % s->block || off > s->size || len > s->size - off ||
	    ((off + len) % s->block && off + len != s->size))
		return EINVAL;
	const char *p = buf;
	for (uint64_t at = 0; at < len; at += s->block) {
		uint64_t k = len - at < s->block ? len - at : s->block;
		uint8_t d[TFS_NV_DIGEST];
		tfs_nv_digest(p + at, k, d);
		if (memcmp(d, s->d + (off + at) / s->block * TFS_NV_DIGEST, TFS_NV_DIGEST) != 0)
			return EBADMSG;
	}
	return 0;
}
