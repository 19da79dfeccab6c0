/* near_check.h - the far checks a near copy waits for: which versions
 * this mount's credentials were allowed to read from far, lately.
 *
 * A near copy is served to a mount only once its own credentials have
 * read that version from far (a HEAD answering its ETag, or a GET
 * conditional on it), within the metadata TTL: near holds one copy for
 * every mount of the source, whatever each may read, and a listing is no
 * permission to read (a bucket policy may let a user LIST but not GET).
 * near.c asks far (HEAD) when this memo has no answer, and notes every
 * HEAD and GET of far that passed through it.
 *
 * The memo is a fixed table (slots given at creation) of 16-byte digests
 * (SHA-256 of the credential identity, key and ETag) with the time they
 * were noted; a newer note replaces whatever shared its slot, so a version
 * forgotten early is merely checked again.  Thread safe (one mutex).
 */
#ifndef TFS_NEAR_CHECK_H
#define TFS_NEAR_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tfs_near_checks;

/* A memo of `slots` entries (a power of two, >= 1) whose notes are good
 * for ttl_ms (UINT64_MAX: forever; 0: never).  Returns 0 and *out, EINVAL
 * or ENOMEM. */
int tfs_near_checks_create(size_t slots, uint64_t ttl_ms, struct tfs_near_checks **out);
void tfs_near_checks_destroy(struct tfs_near_checks *c);

/* Note that credential identity `who` ("" for none) read version `etag`
 * of `key` from far at now_ms (monotonic).  Cannot fail. */
void tfs_near_checks_note(struct tfs_near_checks *c, const char *who, const char *key,
			  const char *etag, uint64_t now_ms);

/* Whether `who` read that version from far within the TTL before now_ms. */
bool tfs_near_checks_passed(struct tfs_near_checks *c, const char *who, const char *key,
			    const char *etag, uint64_t now_ms);

#endif
