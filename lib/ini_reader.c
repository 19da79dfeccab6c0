/* ini_reader.c - inih's line reader for the INI files (ini_reader.h). */
#include "config.h"

#include "ini_reader.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

void tfs_ini_reader_init(struct tfs_ini_reader *r, const char *data, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->data = data;
	r->len = len;
}

char *tfs_ini_read_line(char *str, int num, void *stream)
{
	struct tfs_ini_reader *r = stream;
	const char *start, *nl;
	size_t n;

	if (r->err_line || r->pos >= r->len)
		return NULL;
	start = r->data + r->pos;
	nl = memchr(start, '\n', r->len - r->pos);
	n = nl ? (size_t)(nl - start) : r->len - r->pos;
	r->pos += n + (nl != NULL);
	r->lineno++;

	if (n && start[n - 1] == '\r')
		n--;
	while (n && is_blank(*start)) {
		start++;
		n--;
	}
	if (n && (*start == ';' || *start == '#')) {
		/* A comment: inih would skip it; hand it an empty line, so a
		 * long comment is no error and line numbers stay right. */
		if (num < 1)
			return NULL;
		str[0] = '\0';
		return str;
	}
	if (memchr(start, '\0', n)) {
		snprintf(r->err, sizeof(r->err), "NUL byte in line");
		r->err_line = r->lineno;
		return NULL;
	}
	if (num >= 1 && n >= (size_t)num) {
		/* An inline comment (" ;", as tierfs's dump writes origins) is
		 * dropped by inih anyway: only what precedes it must fit. */
		for (size_t i = 1; i < n; i++) {
			if (start[i] == ';' && is_blank(start[i - 1])) {
				n = i;
				while (n && is_blank(start[n - 1]))
					n--; /* inih strips these too */
				break;
			}
		}
	}
	if (num < 1 || n >= (size_t)num) {
		snprintf(r->err, sizeof(r->err), "line too long (more than %d characters)",
			 num - 1);
		r->err_line = r->lineno;
		return NULL;
	}
	memcpy(str, start, n);
	str[n] = '\0';
	return str;
}
