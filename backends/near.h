/* near.h - two stores as one backend: a copy in the cluster (near) in
 * front of the source of truth (far, usually the cloud bucket).
 *
 * Every request but a read goes to far: HEAD, LIST, PUT, DELETE, COPY and
 * multipart uploads, so far stays the truth and the tiers above see one
 * ordinary backend.  A read (get_range) that knows the version it wants
 * (the caller's if_match: far's ETag, from a HEAD or a listing) first asks
 * near for the copy of that version, named (near_key.h)
 *
 *	<32 hex digits of HMAC(cluster secret, far's endpoint, bucket,
 *	 prefix, key, ETag)>/<key>
 *
 * under near's own bucket and prefix.  Naming the copy by the version
 * means a copy can never be served for another version: an object
 * rewritten in far has a new ETag, so its reads miss near until the new
 * version is copied; the old copy is left to near's expiry (an S3
 * lifecycle rule, or `tierfs near gc`).  Naming it by far's source means
 * another far (or bucket, or prefix) that reports the same key and ETag
 * neither reads nor plants this source's copies.  The copy's user metadata
 * tags it (x-amz-meta-tierfs-copy) and records far's key and ETag
 * (x-amz-meta-tierfs-key, x-amz-meta-tierfs-etag).
 *
 * Read permission: a copy is served only once this mount's own
 * credentials have read that version from far (near_check.h: a HEAD that
 * answered its ETag, or a GET, within check_ttl_ms; else a HEAD first).
 * When far refuses (EACCES, ENOENT, EIO), the read fails with far's
 * error, as it would without near; when far has another version, the read
 * goes to far.
 *
 * A miss reads far for the reader, then queues a copy to near, done by
 * background copiers, never on the reader's path:
 *   - when the reader's read returned the whole object (it started at 0
 *     and ended before the length asked for), the copy is made from those
 *     bytes, with no second far read;
 *   - otherwise, with a spool directory, the bytes read are written into
 *     the object's spool file (near_spool.h: on the reader's path, a write
 *     into the page cache) and a copier asks far for the object's size;
 *     once the readers' ranges cover the object, a copier uploads the file.
 *     An object given up by the spool (idle, or beyond its bounds), and
 *     every such object without a spool, is copied by reading it from far
 *     again (conditional on the ETag: a version that changed meanwhile is
 *     not copied).
 * Before it reads or writes, a copier asks near (HEAD) whether another
 * node made the copy already.  Queued and running copies hold at most
 * copy_budget bytes; a copy that does not fit is dropped (counted), and an
 * object larger than copy_budget is never copied.  Each version is queued
 * at most once while it is among the last 4096 queued.
 *
 * Failures: a near read that fails for another reason than a missing copy
 * (the store down, slow past its own timeouts, an error) is retried on far
 * with no error to the reader, and counted; breaker_errors such failures
 * in a row stop all use of near (reads and copies) for breaker_ms, after
 * which one read tries again (the others keep reading far until it
 * succeeds; if it fails, the breaker opens for breaker_ms again).  A near
 * copy shorter than the bytes asked for is not served: the read goes to
 * far.  With far down, a read whose version the caller knows
 * (metadata_ttl) and that this mount read or HEADed from far within
 * check_ttl_ms is still served from a copy in near; other reads fail with
 * far's error.
 *
 * The secret: near.key's, or the one kept in near (near_key.h), read at
 * creation; when near cannot give it, the breaker opens (reads go to far)
 * and the first read after breaker_ms tries again.
 *
 * Integrity (docs/cluster.md): the bytes a copy is made of are taken from
 * the reader's buffers as the far read reports each one (before the
 * caller may reuse it), with a digest of each range (near_verify.h); a
 * copier uploads a copy only after checking its whole content against
 * far's MD5 or multipart ETag, or else those range digests, and writes
 * its block digests with it (near_sums.h).  A near read checks every
 * block against them: a copy that differs is deleted and the read goes
 * to far (counted: verify_failed); a copy without digests is not served.
 *
 * Trust: near is the operator's own store.  Whoever can write its bucket
 * can change what every node reads (docs/security.md).
 *
 * Thread safety: as backend.h (any thread).  The copiers are the
 * instance's own threads, stopped by tfs_backend_destroy(), which waits
 * for the copies running and drops those queued.
 */
#ifndef TFS_NEAR_H
#define TFS_NEAR_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "log.h"
#include "near_key.h"

struct json_object;

struct tfs_stattab;

/* The rows of the near copy's stats (statdef.h): "backend.near", and the
 * metric over far's GET bytes (a member of far's own backend stats). */
extern const struct tfs_stattab tfs_near_stattab;
extern const struct tfs_stattab tfs_near_far_stattab;

struct tfs_near_config {
	unsigned copiers;        /* background copies at once (1..64) */
	uint64_t copy_budget;    /* bytes of queued and running copies (>= 1 MiB) */
	unsigned breaker_errors; /* failed near reads in a row that stop its use (>= 1) */
	unsigned breaker_ms;     /* ...for this long */
	bool write_through;      /* a PUT to far also queues the file's copy to near */
	/* Assembling copies from the readers' ranges (near_spool.h): the
	 * spool directory (NULL: off; every copy of an object read in parts
	 * then reads it from far again), the bytes its files may hold, and
	 * how long an object may wait for its next range (0: 10 minutes). */
	const char *spool_dir;
	uint64_t spool_size;
	unsigned spool_idle_ms;
	/* Copy names (near_key.h): far as the names record it (canonical
	 * endpoint, bucket, prefix), and near.key: the secret's text (NULL:
	 * the secret kept in near; else at least TFS_NEAR_KEY_TEXT_MIN
	 * bytes).  Set by the caller, copied. */
	struct tfs_near_source source;
	char *key;
	/* How long a far check holds (near_check.h): the metadata TTL
	 * (UINT64_MAX: forever; 0: every near read asks far first). */
	uint64_t check_ttl_ms;
};

/* Compose `near` and `far`.  Returns 0 and *out, EINVAL (a field out of
 * range, or near == far) or ENOMEM; the cause is logged.  On success the
 * new instance owns both (destroyed with it); on failure the caller still
 * does.  `log` must outlive the instance.  `cfg` is copied. */
int tfs_near_create(const struct tfs_near_config *cfg, struct tfs_backend *near,
		    struct tfs_backend *far, const struct tfs_log *log, struct tfs_backend **out);

#endif
