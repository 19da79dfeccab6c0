/* source.c - parsing of the SOURCE argument (S3 URL or local directory). */
#include "config.h"

#include "source.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tfs_source_clear(struct tfs_source *s)
{
	free(s->bucket);
	free(s->prefix);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

int tfs_source_parse(const char *arg, struct tfs_source *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (arg == NULL || *arg == '\0') {
		snprintf(err, errlen, "SOURCE is empty");
		return EINVAL;
	}
	if (strncmp(arg, "s3://", 5) != 0) {
		const char *colon = strstr(arg, "://");
		if (colon != NULL) {
			snprintf(err, errlen,
				 "SOURCE '%s': unsupported scheme (use s3://bucket[/prefix] "
				 "or a directory)",
				 arg);
			return EINVAL;
		}
		out->kind = TFS_SOURCE_LOCAL;
		out->path = strdup(arg);
		return out->path ? 0 : ENOMEM;
	}
	const char *b = arg + 5;
	const char *slash = strchr(b, '/');
	size_t blen = slash ? (size_t)(slash - b) : strlen(b);
	if (blen == 0) {
		snprintf(err, errlen, "SOURCE '%s': no bucket name", arg);
		return EINVAL;
	}
	out->kind = TFS_SOURCE_S3;
	out->bucket = strndup(b, blen);
	const char *p = slash ? slash + 1 : "";
	size_t plen = strlen(p);
	bool add_slash = plen > 0 && p[plen - 1] != '/';
	out->prefix = malloc(plen + 2);
	if (out->bucket == NULL || out->prefix == NULL) {
		tfs_source_clear(out);
		return ENOMEM;
	}
	memcpy(out->prefix, p, plen);
	if (add_slash)
		out->prefix[plen++] = '/';
	out->prefix[plen] = '\0';
	if (strstr(out->prefix, "//") != NULL || out->prefix[0] == '/') {
		snprintf(err, errlen, "SOURCE '%s': the prefix has an empty path segment", arg);
		tfs_source_clear(out);
		return EINVAL;
	}
	return 0;
}
