/* node_secrets.h - the volume's S3 keys: decoding them from the kubelet's
 * base64 and writing them to the credentials file the daemon reads.
 *
 * The kubelet passes each key of the volume's Secret (type tierfs/tierfs)
 * as "kubernetes.io/secret/<key>", base64-encoded: accessKey, secretKey
 * and optionally sessionToken.  They go to a file of mode 0600 in the
 * volume's 0700 state directory, in the AWS format that
 * backends/s3_creds.c reads (profile [default]), and the daemon gets only
 * the file's path (backend.credentials_file).  They never appear on a
 * command line, in an environment, in a log or in a message: errors name
 * the key, never its value.  Decoded copies are wiped before they are
 * freed.
 */
#ifndef TFS_NODE_SECRETS_H
#define TFS_NODE_SECRETS_H

#include <stdbool.h>

#include "dbuf.h"

struct tfs_node_creds {
	char *access_key; /* NULL: the volume has no Secret */
	char *secret_key;
	char *session_token; /* NULL: none */
};

/* The longest credentials line the driver writes.  s3_creds.c reads lines
 * of any length (STS session tokens run to a few KiB); this bound only
 * keeps a hostile Secret from making a huge file. */
#define TFS_NODE_CREDS_MAX_LINE 16383

/* The longest keys the daemon can sign with (backends/s3.c, sign()): it
 * sends "x-amz-security-token: TOKEN" as a header line of at most 16384
 * bytes, and the Authorization value, which holds the access key with the
 * credential scope, the signed header names and the signature, is at most
 * 4096 bytes.  A longer key would pass here and fail every request of the
 * daemon with "cannot sign the request"; refusing it here names the key.
 * AWS access key IDs have at most 128 characters. */
#define TFS_NODE_SESSION_TOKEN_MAX (16384 - 22) /* strlen("x-amz-security-token: ") */
#define TFS_NODE_ACCESS_KEY_MAX 1024

/* Decode the base64 `b64` of secret key `name` ("secretKey") into a new
 * NUL-terminated string *out (the caller wipes it: tfs_node_creds_clear() or
 * explicit_bzero() then free()).  The key must be standard base64 with
 * padding (blanks and newlines around it are ignored) and decode to
 * printable ASCII without blanks, "aws_..._key=VALUE" must fit in
 * TFS_NODE_CREDS_MAX_LINE, a sessionToken in TFS_NODE_SESSION_TOKEN_MAX and an
 * accessKey in TFS_NODE_ACCESS_KEY_MAX characters.  Returns 0; EINVAL with
 * "secret NAME: why" in err (may be NULL; never the value); ENOMEM. */
int tfs_node_secret_decode(const char *name, const char *b64, char **out, struct tfs_dbuf *err);

/* Check the plain-text `value` of secret key `name` (the CSI plugin gets
 * the Secret's values as they are) with the rules of tfs_node_secret_decode()
 * for a decoded value, and copy it into a new string *out (the caller
 * wipes it).  Returns 0; EINVAL with "secret NAME: why" in err (may be
 * NULL; never the value); ENOMEM. */
int tfs_node_secret_plain(const char *name, const char *value, char **out, struct tfs_dbuf *err);

/* Write `c` (access_key and secret_key set) to `path`, mode 0600, via a
 * temporary file in the same directory, fsync'd and renamed into place.
 * The directory must exist.  Returns 0 or errno (the message, naming the
 * path, in err). */
int tfs_node_creds_write(const char *path, const struct tfs_node_creds *c, struct tfs_dbuf *err);

/* Wipe and free the strings; zero *c.  Safe on a zeroed struct. */
void tfs_node_creds_clear(struct tfs_node_creds *c);

#endif
