/* manifest.c - parse dataset manifests (paths or JSON lines) into keys. */
#include "config.h"

#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINE (64u * 1024u)

static int add(struct tfs_manifest *m, size_t *cap, uint64_t line, char *key, char *error)
{
	if (m->n == *cap) {
		size_t nc = *cap ? 2 * *cap : 256;
		struct tfs_manifest_entry *nv = realloc(m->v, nc * sizeof(*nv));
		if (nv == NULL) {
			free(key);
			free(error);
			return ENOMEM;
		}
		m->v = nv;
		*cap = nc;
	}
	m->v[m->n++] = (struct tfs_manifest_entry){ .line = line, .key = key, .error = error };
	if (error)
		m->errors++;
	return 0;
}

/* `f` with its one "%s" (if any) replaced by `a`. */
static char *fmt(const char *f, const char *a)
{
	const char *pct = strstr(f, "%s");
	if (pct == NULL)
		return strdup(f);
	size_t n = strlen(f) + (a ? strlen(a) : 0) + 1;
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "%.*s%s%s", (int)(pct - f), f, a ? a : "", pct + 2);
	return s;
}

/* A key is a relative path of non-empty segments, none "." or "..". */
static bool key_ok(const char *k)
{
	if (*k == '\0' || *k == '/')
		return false;
	const char *p = k;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += n;
		if (*p == '/')
			p++;
		if (e && *p == '\0')
			return false; /* trailing slash: a directory */
	}
	return true;
}

/* Turn one reference (path or URL) into a key (a suffix of `ref`), or an
 * error text (malloc'd; NULL with no key: ENOMEM). */
static void resolve(const char *ref, const struct tfs_manifest_scope *sc, const char **key,
		    char **err)
{
	const char *k = ref;
	*key = NULL;
	*err = NULL;
	if (strncmp(ref, "s3://", 5) == 0) {
		if (sc->bucket == NULL) {
			*err = fmt("an s3:// URL, but the mount serves a local directory", NULL);
			return;
		}
		const char *b = ref + 5, *slash = strchr(b, '/');
		size_t bl = slash ? (size_t)(slash - b) : strlen(b);
		if (bl != strlen(sc->bucket) || strncmp(b, sc->bucket, bl) != 0) {
			*err = fmt("the URL names another bucket than '%s'", sc->bucket);
			return;
		}
		k = slash ? slash + 1 : "";
		size_t pl = strlen(sc->prefix);
		if (pl) {
			if (strncmp(k, sc->prefix, pl) != 0 || k[pl] != '/') {
				*err = fmt("the URL is outside the mounted prefix '%s'",
					   sc->prefix);
				return;
			}
			k += pl + 1;
		}
	} else if (strstr(ref, "://")) {
		*err = fmt("unsupported URL scheme (only s3:// URLs and paths)", NULL);
		return;
	} else if (ref[0] == '/') {
		size_t ml = strlen(sc->mountpoint);
		if (strncmp(ref, sc->mountpoint, ml) != 0 || ref[ml] != '/') {
			*err = fmt("an absolute path outside the mountpoint %s", sc->mountpoint);
			return;
		}
		k = ref + ml + 1;
	} else if (strncmp(ref, "./", 2) == 0) {
		k = ref + 2;
	}
	if (!key_ok(k)) {
		*err = fmt("not a file path (empty, '.', '..' or a trailing '/')", NULL);
		return;
	}
	*key = k;
}

/* Hand line `lineno` (`s`, NUL-terminated, may be changed) to `fn`. */
static int scan_line(uint64_t lineno, char *s, const struct tfs_manifest_scope *sc,
		     tfs_manifest_fn fn, void *ctx)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = '\0';
	if (n == 0 || s[0] == '#')
		return 0;
	const char *key = NULL;
	char *err = NULL;
	struct json_object *o = NULL;
	if (s[0] == '{') {
		enum json_tokener_error je;
		o = json_tokener_parse_verbose(s, &je);
		if (o == NULL || !json_object_is_type(o, json_type_object)) {
			err = fmt("invalid JSON: %s",
				  o ? "not an object" : json_tokener_error_desc(je));
		} else {
			static const char *const fields[] = { "key", "path", "url", "uri" };
			const char *ref = NULL;
			for (size_t i = 0; i < 4 && ref == NULL; i++) {
				struct json_object *f;
				if (json_object_object_get_ex(o, fields[i], &f) &&
				    json_object_is_type(f, json_type_string))
					ref = json_object_get_string(f);
			}
			if (ref == NULL)
				err = fmt("no \"key\", \"path\", \"url\" or \"uri\" string field",
					  NULL);
			else
				resolve(ref, sc, &key, &err);
		}
	} else {
		resolve(s, sc, &key, &err);
	}
	int rc = key == NULL && err == NULL ? ENOMEM : fn(ctx, lineno, key, err);
	json_object_put(o); /* after fn: `key` may point into it */
	free(err);
	return rc;
}

int tfs_manifest_scan(const char *text, size_t len, const struct tfs_manifest_scope *scope,
		      tfs_manifest_fn fn, void *ctx)
{
	uint64_t lineno = 0;
	char *line = malloc(MAX_LINE + 1);
	if (line == NULL)
		return ENOMEM;
	size_t pos = 0;
	int rc = 0;
	while (rc == 0 && pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		lineno++;
		if (n > MAX_LINE || memchr(text + pos, '\0', n)) {
			rc = fn(ctx, lineno, NULL,
				n > MAX_LINE ? "line longer than 64 KiB" : "NUL byte in the line");
		} else {
			memcpy(line, text + pos, n);
			line[n] = '\0';
			rc = scan_line(lineno, line, scope, fn, ctx);
		}
		pos += n + 1;
	}
	free(line);
	return rc;
}

struct parse_ctx {
	struct tfs_manifest *m;
	size_t cap;
	size_t max_entries;
};

static int parse_entry(void *vctx, uint64_t line, const char *key, const char *error)
{
	struct parse_ctx *c = vctx;
	char *k = key ? strdup(key) : NULL;
	char *e = error ? strdup(error) : NULL;
	if ((key && k == NULL) || (error && e == NULL)) {
		free(k);
		free(e);
		return ENOMEM;
	}
	int rc = add(c->m, &c->cap, line, k, e);
	if (rc == 0 && c->m->n > c->max_entries)
		rc = EFBIG;
	return rc;
}

int tfs_manifest_parse(const char *text, size_t len, const struct tfs_manifest_scope *scope,
		       size_t max_entries, struct tfs_manifest *out)
{
	memset(out, 0, sizeof(*out));
	struct parse_ctx c = { .m = out, .max_entries = max_entries };
	int rc = tfs_manifest_scan(text, len, scope, parse_entry, &c);
	if (rc)
		tfs_manifest_free(out);
	return rc;
}

int tfs_manifest_load(const char *path, const struct tfs_manifest_scope *scope, size_t max_entries,
		      struct tfs_manifest *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int rc = errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
	}
	size_t len = (size_t)st.st_size;
	char *buf = malloc(len + 1);
	if (buf == NULL) {
		close(fd);
		return ENOMEM;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t r = read(fd, buf + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	int rc = tfs_manifest_parse(buf, got, scope, max_entries, out);
	free(buf);
	return rc;
}

void tfs_manifest_free(struct tfs_manifest *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].key);
		free(m->v[i].error);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}
