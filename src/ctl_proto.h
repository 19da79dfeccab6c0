/* ctl_proto.h - the control socket's wire protocol, for the server (ctl.c)
 * and the client (ctl_client.c) only: its description, and the helpers
 * both sides use.
 *
 * Protocol (one connection may carry any number of requests, one at a time):
 *
 *   request   one JSON object on one line:  {"cmd":"stats", ...arguments}
 *   progress  zero or more lines before the reply, for long commands:
 *             {"progress":{...}}
 *   reply     exactly one line per request:
 *             {"ok":true,"result":{...}}
 *             {"ok":false,"errno":N,"error":"message"}
 *
 * N is a Linux errno value.  A request line longer than
 * TFS_CTL_MAX_REQUEST (ctl.h) bytes is answered with EMSGSIZE and the connection is
 * closed (there is no way to find the next request).  A line that is not a
 * JSON object with a "cmd" string is answered with EINVAL and the
 * connection stays usable; so is an unknown command ("unknown command
 * 'x'").  Blank lines are ignored.  A last request without a newline,
 * followed by the end of the stream, is still answered.  A reply or
 * progress line longer than TFS_CTL_MAX_REPLY (ctl_client.h) fails the
 * call with EMSGSIZE.
 */
#ifndef TFS_CTL_PROTO_H
#define TFS_CTL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct tfs_dbuf;

/* How both sides print a JSON line. */
#define CTL_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
/* Bytes read from a socket at once. */
#define CTL_READ_CHUNK 65536
/* Longest error message sent or reported. */
#define CTL_MSG_MAX 1024

/* Remove the first `n` bytes of `d` (n <= d->len); keeps the NUL. */
void ctl_drop_front(struct tfs_dbuf *d, size_t n);

/* Whether `e` is a plausible errno value (1..4095). */
bool ctl_is_errno(int e);

/* Whether s[0..n) holds only white space (a blank line is ignored). */
bool ctl_blank(const char *s, size_t n);

/* Parse one line s[0..len) (no newline) into a JSON object.  Returns 0
 * and *out (a new reference: the caller puts it); EINVAL for anything
 * but one JSON object (a NUL byte, malformed or incomplete JSON, trailing
 * characters, another type), with the reason in msg[0..msglen); ENOMEM
 * (message too).  *out is NULL on failure.  Thread safe. */
int ctl_parse_line(const char *line, size_t len, struct json_object **out, char *msg,
		   size_t msglen);

#endif
