/* near_key.h - the names of near copies, and the cluster secret that
 * makes them: only a node that holds the secret can name a copy, and a
 * copy's name says which far source and version it is of.
 *
 * A copy of version `etag` of far object `key` is filed in near under
 *
 *	<32 hex digits of HMAC-SHA-256(secret, source, key, etag)>/<key>
 *
 * where the source is far's canonical endpoint (s3_endpoint.h), bucket and
 * prefix.  Each of the five fields (endpoint, bucket, prefix, key, etag)
 * enters the HMAC after its length (8 bytes, big endian), so no two inputs
 * share a message.  So a far that reports another source's ETag for its
 * own key (a hostile or mistaken endpoint, bucket or prefix) names other
 * copies than that source's: it can neither read them nor plant one that
 * the source's readers would be served; and without the secret nobody can
 * compute a copy's name for any input.  The key after the slash is for
 * people (and `tierfs near gc`'s messages); it is also in the HMAC.
 *
 * The secret (TFS_NEAR_SECRET_LEN bytes) is the SHA-256 of a text: the
 * `near.key` setting when set, else the random text kept in near itself,
 * one object under near's prefix (TFS_NEAR_SECRET_OBJECT), made by the
 * first node that finds none.  Whoever can read that object can already
 * read every copy; whoever can write near can already change every copy.
 *
 * Every copy carries the user metadata TFS_NEAR_COPY_TAG: `tierfs near gc`
 * deletes only objects that do (tfs_near_copy_tagged()).
 */
#ifndef TFS_NEAR_KEY_H
#define TFS_NEAR_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "log.h"

#define TFS_NEAR_SECRET_LEN 32
#define TFS_NEAR_SECRET_OBJECT "tierfs-near-secret" /* under near's prefix */
#define TFS_NEAR_SECRET_TEXT 64                     /* its hex digits */
#define TFS_NEAR_COPY_TAG "tierfs-copy"             /* x-amz-meta-tierfs-copy */
#define TFS_NEAR_COPY_TAG_VALUE "hmac-sha256"       /* the naming scheme */
#define TFS_NEAR_NAME_HEX 32                        /* hex digits before the '/' */
#define TFS_NEAR_KEY_TEXT_MIN 16                    /* near.key's shortest text */

/* Far, as a copy's name records it: canonical endpoint, bucket, prefix
 * ("" for none).  Borrowed strings. */
struct tfs_near_source {
	const char *endpoint;
	const char *bucket;
	const char *prefix;
};

/* The secret of a text (near.key, or the object's): its SHA-256.  Cannot
 * fail. */
void tfs_near_secret_from_text(const char *text, size_t len, uint8_t out[TFS_NEAR_SECRET_LEN]);

/* Read the secret object from `near`, or make it when there is none:
 * 64 random hex digits written with a conditional PUT (If-None-Match: *,
 * tfs_backend_put_new(); a plain PUT where the backend has none), then
 * read back, so nodes that race to make it end with the one that was
 * written first (on a store that ignores the condition, the last one
 * written; a node that read its own back before another's write keeps
 * it until it mounts again: docs/cluster.md).  Returns 0 and *out,
 * EINVAL (the object is not 64 hex digits, an optional newline after:
 * never overwritten), or near's error (ENOENT: it vanished each time it
 * was written).  The cause is logged.  Thread safe. */
int tfs_near_secret_load(struct tfs_backend *near, const struct tfs_log *log,
			 uint8_t out[TFS_NEAR_SECRET_LEN]);

/* The name of the copy of version `etag` of `key` from `src` into buf (cap
 * bytes).  Returns 0, EINVAL (an empty key or etag), ENAMETOOLONG (does
 * not fit) or ENOMEM. */
int tfs_near_copy_name(const uint8_t secret[TFS_NEAR_SECRET_LEN], const struct tfs_near_source *src,
		       const char *key, const char *etag, char *buf, size_t cap);

/* Whether `name` is shaped like a copy: this scheme's
 * <32 hex>/<key>, or the one before it (<16 hex>/<key>, named by a hash
 * of the ETag alone). */
bool tfs_near_is_copy_name(const char *name);

/* Whether the object `name`, with user metadata `m`, is a copy tierfs
 * made: copy-shaped and tagged (TFS_NEAR_COPY_TAG), or a copy of the
 * scheme before (16 hex digits, and its x-amz-meta-tierfs-key is the key
 * after the slash, with an x-amz-meta-tierfs-etag). */
bool tfs_near_copy_tagged(const char *name, const struct tfs_obj_meta *m);

#endif
