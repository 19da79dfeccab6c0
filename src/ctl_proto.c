/* ctl_proto.c - what the control socket's server and client share: the
 * parsing of a protocol line, and small helpers both sides use. */
#include "config.h"

#include "ctl_proto.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dbuf.h"

/* Remove the first `n` bytes of `d` (n <= len). */
void ctl_drop_front(struct tfs_dbuf *d, size_t n)
{
	if (n == 0)
		return;
	memmove(d->buf, d->buf + n, d->len - n);
	d->len -= n;
	d->buf[d->len] = '\0';
}

bool ctl_is_errno(int e)
{
	return e > 0 && e < 4096;
}

bool ctl_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isspace((unsigned char)s[i]))
			return false;
	return true;
}

/* Parse one line into a JSON object.  EINVAL with a message for anything
 * else; ENOMEM. */
int ctl_parse_line(const char *line, size_t len, struct json_object **out, char *msg, size_t msglen)
{
	*out = NULL;
	if (memchr(line, '\0', len) != NULL) {
		snprintf(msg, msglen, "malformed JSON: NUL byte");
		return EINVAL;
	}
	if (len > INT_MAX) {
		snprintf(msg, msglen, "line too long");
		return EINVAL;
	}
	struct json_tokener *tok = json_tokener_new();
	if (tok == NULL) {
		snprintf(msg, msglen, "out of memory");
		return ENOMEM;
	}
	struct json_object *o = json_tokener_parse_ex(tok, line, (int)len);
	enum json_tokener_error je = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (o == NULL && je != json_tokener_success) {
		snprintf(msg, msglen, "malformed JSON: %s",
			 je == json_tokener_continue ? "incomplete" : json_tokener_error_desc(je));
		return EINVAL;
	}
	for (size_t i = end; i < len; i++) {
		if (!isspace((unsigned char)line[i])) {
			json_object_put(o);
			snprintf(msg, msglen, "malformed JSON: trailing characters");
			return EINVAL;
		}
	}
	if (!json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		snprintf(msg, msglen, "not a JSON object");
		return EINVAL;
	}
	*out = o;
	return 0;
}
