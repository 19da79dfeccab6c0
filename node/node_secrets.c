/* node_secrets.c - decoding the Secret's keys and writing the credentials
 * file.  Nothing here logs: a message names a key, never its value. */
#include "config.h"

#include <assert.h>
#include "node_secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

/* The credentials file's name for each key. */
static const char *file_key(const char *name)
{
	if (strcmp(name, "accessKey") == 0)
		return "aws_access_key_id";
	if (strcmp(name, "secretKey") == 0)
		return "aws_secret_access_key";
	return "aws_session_token";
}

static void wipe_free(char *s, size_t n)
{
	if (s) {
		explicit_bzero(s, n);
		free(s);
	}
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_b64(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

__attribute__((format(printf, 3, 4))) static int fail(struct tfs_dbuf *err, const char *name,
						      const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		tfs_dbuf_reset(err);
		tfs_dbuf_addf(err, "secret %s: %s", name, msg);
	}
	return EINVAL;
}

/* The rules every key's value follows, decoded or given plain: printable
 * ASCII without blanks, not empty, and short enough for the credentials
 * file and the requests the daemon signs. */
static int check_value(const char *name, const unsigned char *buf, size_t len, bool decoded,
		       struct tfs_dbuf *err)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] <= 0x20 || buf[i] >= 0x7f)
			return fail(err, name,
				    "%s a byte that is not printable ASCII (at offset %zu); a key "
				    "has no blanks or newlines%s",
				    decoded ? "decodes to" : "has", i,
				    decoded ? ": encode it with 'printf %s KEY | base64 -w0'" : "");
	}
	if (len == 0)
		return fail(err, name, "empty");
	size_t max = TFS_NODE_CREDS_MAX_LINE - strlen(file_key(name)) - 1;
	if (strcmp(name, "sessionToken") == 0 && max > TFS_NODE_SESSION_TOKEN_MAX)
		max = TFS_NODE_SESSION_TOKEN_MAX;
	else if (strcmp(name, "accessKey") == 0 && max > TFS_NODE_ACCESS_KEY_MAX)
		max = TFS_NODE_ACCESS_KEY_MAX;
	if (len > max)
		return fail(err, name, "%s%zu characters long; at most %zu are accepted",
			    len > TFS_NODE_CREDS_MAX_LINE ? "more than " : "",
			    len > TFS_NODE_CREDS_MAX_LINE ? (size_t)TFS_NODE_CREDS_MAX_LINE : len,
			    max);
	return 0;
}

int tfs_node_secret_decode(const char *name, const char *b64, char **out, struct tfs_dbuf *err)
{
	const char *s = b64, *e;
	size_t n, pad = 0;

	*out = NULL;
	if (err)
		tfs_dbuf_reset(err);
	while (is_space(*s))
		s++;
	e = s + strlen(s);
	while (e > s && is_space(e[-1]))
		e--;
	n = (size_t)(e - s);
	if (n == 0)
		return fail(err, name, "empty");
	/* EVP_DecodeBlock takes whole quanta and knows nothing of padding or
	 * stray characters: check the alphabet and the padding here. */
	if (n % 4 != 0)
		return fail(err, name, "not base64 (the length is not a multiple of 4)");
	while (pad < 2 && s[n - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < n - pad; i++) {
		if (!is_b64(s[i]))
			return fail(err, name,
				    "not base64 (a character outside A-Z a-z 0-9 + / at "
				    "offset %zu)",
				    i);
	}
	size_t cap = n / 4 * 3 + 1;
	unsigned char *buf = malloc(cap);
	if (buf == NULL)
		return ENOMEM;
	int len = EVP_DecodeBlock(buf, (const unsigned char *)s, (int)n);
	if (len < 0 || (size_t)len < pad) {
		wipe_free((char *)buf, cap);
		return fail(err, name, "not base64");
	}
	len -= (int)pad; /* EVP_DecodeBlock counts the padding as zero bytes */
	buf[len] = '\0';
	int rc = check_value(name, buf, (size_t)len, true, err);
	if (rc) {
		wipe_free((char *)buf, cap);
		return rc;
	}
	*out = (char *)buf;
	return 0;
}

int tfs_node_secret_plain(const char *name, const char *value, char **out, struct tfs_dbuf *err)
{
	size_t len = strnlen(value, TFS_NODE_CREDS_MAX_LINE + 1);
	int rc;

	*out = NULL;
	if (err)
		tfs_dbuf_reset(err);
	rc = check_value(name, (const unsigned char *)value, len, false, err);
	if (rc)
		return rc;
	*out = strndup(value, len);
	return *out ? 0 : ENOMEM;
}

void tfs_node_creds_clear(struct tfs_node_creds *c)
{
	if (c->access_key)
		wipe_free(c->access_key, strlen(c->access_key));
	if (c->secret_key)
		wipe_free(c->secret_key, strlen(c->secret_key));
	if (c->session_token)
		wipe_free(c->session_token, strlen(c->session_token));
	memset(c, 0, sizeof(*c));
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int tfs_node_creds_write(const char *path, const struct tfs_node_creds *c, struct tfs_dbuf *err)
{
	/* Each line fits TFS_NODE_CREDS_MAX_LINE (tfs_node_secret_decode() checked), so
	 * the text fits here: no heap copy of a key is left behind. */
	static_assert(TFS_NODE_CREDS_MAX_LINE < 65536, "the text buffer is on the stack");
	char text[16 + 3 * (TFS_NODE_CREDS_MAX_LINE + 2)];
	char tmp[4096];
	int rc = 0, fd, n;

	if (err)
		tfs_dbuf_reset(err);
	if (c->access_key == NULL || c->secret_key == NULL)
		return EINVAL;
	n = snprintf(text, sizeof(text),
		     "[default]\naws_access_key_id=%s\naws_secret_access_key=%s\n%s%s%s",
		     c->access_key, c->secret_key, c->session_token ? "aws_session_token=" : "",
		     c->session_token ? c->session_token : "", c->session_token ? "\n" : "");
	if (n < 0 || (size_t)n >= sizeof(text)) {
		rc = E2BIG;
		goto out;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		rc = ENAMETOOLONG;
		goto out;
	}
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = errno;
		goto out;
	}
	/* open() applied the umask; make the mode exactly 0600 anyway. */
	if (fchmod(fd, 0600) != 0)
		rc = errno;
	if (rc == 0)
		rc = write_all(fd, text, (size_t)n);
	if (rc == 0 && fsync(fd) != 0)
		rc = errno;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = errno;
	if (rc)
		(void)unlink(tmp);
out:
	explicit_bzero(text, sizeof(text));
	if (rc && err)
		tfs_dbuf_addf(err, "cannot write the credentials file %s: %s", path, strerror(rc));
	return rc;
}
