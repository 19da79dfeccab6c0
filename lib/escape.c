/* escape.c - a value shown in a message (escape.h). */
#include "config.h"

#include "escape.h"

#include <stdio.h>
#include <string.h>

const char *tfs_escape(char *buf, size_t cap, const char *s, size_t max, bool quote)
{
	size_t o = 0;
	size_t i;

	/* the loop stops while there is room for one escape, "...", the quote
	 * and the NUL (TFS_ESCAPE_BUFLEN(max) bytes hold any s) */
	if (quote)
		buf[o++] = '\'';
	for (i = 0; i < max && s[i] && o + 8 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	if (s[i]) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	if (quote)
		buf[o++] = '\'';
	buf[o] = '\0';
	return buf;
}
