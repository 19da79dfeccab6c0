/* near_verify.h - checks that a near copy holds far's bytes
 * (backends/near.c; docs/cluster.md "Integrity").
 *
 * Before a copy goes to near, its whole content is checked against a value
 * far gave for that version (tfs_nv_verify()):
 *   - far's ETag when it is the MD5 of the bytes (a single-part upload
 *     without SSE-KMS or SSE-C);
 *   - a multipart ETag ("<hex>-N"), recomputed from the bytes with the
 *     part size far reports for part 1 (HEAD ?partNumber=1);
 *   - a full-object checksum far returns (x-amz-checksum-mode: CRC64NVME,
 *     CRC32C, CRC32, SHA-256 or SHA-1);
 *   - failing those, the digests of each range taken when the reader's
 *     bytes arrived, before they were stored (tfs_nv_piece), checked
 *     again against the assembled content.
 * A copy that matches none of them (or that nothing can vouch for) is
 * not uploaded.
 *
 * A copy carries per-block digests (XXH3-128 of each block of
 * `block` bytes, the last one shorter), which a reader checks on every
 * block it reads from near (tfs_nv_sums_check()).  They are written as
 * text, "<block size>:<hex digests>", in the copy's user metadata when
 * short enough, otherwise in a sidecar object beside the copy.
 *
 * Thread safety: the functions hold no state; each object is used by one
 * thread at a time.
 */
#ifndef TFS_NEAR_VERIFY_H
#define TFS_NEAR_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define TFS_NV_BLOCK (1u << 20)     /* block size of the digests of a copy written now */
#define TFS_NV_DIGEST 16            /* bytes of one digest (XXH3-128) */
#define TFS_NV_INLINE_MAX 1536      /* longest digest text kept in the copy's metadata */
#define TFS_NV_TEXT_MAX (64u << 20) /* longest digest text accepted (a sidecar) */

/* The digest of one range [off, off + len) of an object, taken when its
 * bytes arrived from far. */
struct tfs_nv_piece {
	uint64_t off, len;
	uint8_t d[TFS_NV_DIGEST];
};

/* Digest of `len` bytes at `buf` into d. */
void tfs_nv_digest(const void *buf, size_t len, uint8_t d[TFS_NV_DIGEST]);

/* A piece for the bytes [off, off + len) of src (TFS_IO_BUF or TFS_IO_IOV,
 * whose first `len` bytes are taken).  Cannot fail. */
void tfs_nv_piece_make(struct tfs_nv_piece *p, uint64_t off, struct tfs_io src, uint64_t len);

/* What far said of the version, from its HEAD. */
struct tfs_nv_far {
	const char *etag;   /* as far sends it, quotes included */
	uint64_t size;      /* the object's size */
	uint64_t part_size; /* a multipart ETag's part size (HEAD ?partNumber=1); 0: unknown */
	bool encrypted;     /* SSE-KMS or SSE-C: the ETag is not the bytes' MD5 */
	/* A full-object checksum: "crc32", "crc32c", "crc64nvme", "sha1" or
	 * "sha256" (another name, or "", is none) and its base64 value. */
	const char *checksum_alg;
	const char *checksum;
};

/* Per-block digests of a copy.  Owns `d`: tfs_nv_sums_clear(). */
struct tfs_nv_sums {
	uint32_t block;
	uint64_t size; /* the object's size: the blocks are ceil(size / block) */
	uint8_t *d;    /* TFS_NV_DIGEST bytes per block */
	size_t n;
};

void tfs_nv_sums_clear(struct tfs_nv_sums *s);

/* How a copy was verified (tfs_nv_verify()). */
enum tfs_nv_how {
	TFS_NV_NONE,      /* not verified */
	TFS_NV_MD5,       /* far's plain MD5 ETag */
	TFS_NV_MULTIPART, /* far's multipart ETag, with its part size */
	TFS_NV_CHECKSUM,  /* far's full-object checksum */
	TFS_NV_PIECES,    /* the range digests taken as the bytes arrived */
};

/* Check `size` bytes of src (TFS_IO_BUF, or TFS_IO_FD read with pread
 * from src.off) against far's value, then against `pieces` (n of them,
 * NULL for none; `complete`: they cover every byte of the object), and
 * compute the copy's block digests (block TFS_NV_BLOCK) into *sums.  The
 * end-to-end ETag check is used when far's ETag allows it (plain MD5 and
 * not encrypted, or multipart with part_size known); otherwise far's
 * checksum, when it has one; otherwise the pieces, when complete.  Every piece given is checked either way.
 * Returns 0 (*how says how; *sums filled), EBADMSG (the bytes differ
 * from far's value or from a piece: never upload them), ENOTSUP
 * (nothing could vouch for them: not uploaded either), ENOMEM, or a read's
 * errno.  On failure *sums is empty. */
int tfs_nv_verify(struct tfs_io src, uint64_t size, const struct tfs_nv_far *far,
		  const struct tfs_nv_piece *pieces, size_t n, bool complete,
		  struct tfs_nv_sums *sums, enum tfs_nv_how *how);

/* Whether etag has the form of a multipart ETag ("<32 hex>-N", quotes
 * allowed); *parts gets N. */
bool tfs_nv_etag_multipart(const char *etag, unsigned *parts);

/* The digests as text ("<block>:<hex>...") into buf (malloc'd, NUL-
 * terminated; *len its length).  Returns 0 or ENOMEM. */
int tfs_nv_sums_encode(const struct tfs_nv_sums *s, char **buf, size_t *len);

/* Parse the text of `len` bytes (not necessarily NUL-terminated) for an
 * object of `size` bytes.  Returns 0 and *s, or EBADMSG (malformed: a
 * block size outside 4 KiB .. 1 GiB, a digest count that does not fit the
 * size, longer than TFS_NV_TEXT_MAX) or ENOMEM. */
int tfs_nv_sums_decode(const char *text, size_t len, uint64_t size, struct tfs_nv_sums *s);

/* Check `len` bytes at `buf`, which are the object's bytes from
 * `off` (a multiple of s->block) on, block by block: off + len must end
 * on a block boundary or at the object's end.  Returns 0, EBADMSG (a
 * block differs) or EINVAL (not block-aligned, or past the end). */
int tfs_nv_sums_check(const struct tfs_nv_sums *s, uint64_t off, const void *buf, uint64_t len);

#endif
