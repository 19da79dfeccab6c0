/* s3_creds.h - where the S3 backend finds its access keys.
 *
 * Order (first complete source wins):
 *   1. the credentials_file named in the config (AWS INI format: a profile
 *      section with aws_access_key_id, aws_secret_access_key and optionally
 *      aws_session_token); it must not be readable by group or others;
 *   2. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN;
 *   3. the profile ($AWS_PROFILE, the configured profile, or "default") in
 *      $AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials.
 * Secrets never reach a log line: messages name files and profiles only.
 */
#ifndef TFS_S3_CREDS_H
#define TFS_S3_CREDS_H

#include "log.h"

struct tfs_s3_creds {
	char *access_key;
	char *secret_key;
	char *session_token; /* NULL when none */
	char source[256];    /* where they came from, for logs */
};

/* Resolve credentials.  `credentials_file` and `profile` may be NULL.
 * Returns 0; EACCES when a file is group/other-readable or when no source
 * has a complete key pair; ENOENT when the named credentials_file does not
 * exist; EINVAL when a file is malformed; ENOMEM.  The cause is logged. */
int tfs_s3_creds_load(const char *credentials_file, const char *profile, const struct tfs_log *log,
		      struct tfs_s3_creds *out);

/* Wipe and free the strings. */
void tfs_s3_creds_clear(struct tfs_s3_creds *c);

#endif
