/* near_key.c - the names of near copies and the cluster secret
 * (near_key.h). */
#include "config.h"

#include "near_key.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "dbuf.h"

#define LOAD_ROUNDS 3 /* reads of the secret object, each after a write */

void tfs_near_secret_from_text(const char *text, size_t len, uint8_t out[TFS_NEAR_SECRET_LEN])
{
	unsigned int n = 0;
	EVP_Digest(text, len, out, &n, EVP_sha256(), NULL);
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Read the secret object: 0 (*out set), ENOENT, EINVAL (malformed) or
 * near's error. */
static int read_secret(struct tfs_backend *near, const struct tfs_log *log,
		       uint8_t out[TFS_NEAR_SECRET_LEN])
{
	char text[TFS_NEAR_SECRET_TEXT + 2];
	size_t got = 0;
	int rc = tfs_backend_get_range(near, TFS_NEAR_SECRET_OBJECT, 0, sizeof(text), NULL,
				       tfs_io_buf(text), &got, NULL);
	if (rc)
		return rc;
	if (got == TFS_NEAR_SECRET_TEXT + 1 && text[TFS_NEAR_SECRET_TEXT] == '\n')
		got--;
	if (got != TFS_NEAR_SECRET_TEXT || !is_hex(text, got)) {
		tfs_err(log,
			"near: %s in %s is not %d lowercase hex digits: near is not used "
			"(delete it to make a new one; every copy is then made again)",
			TFS_NEAR_SECRET_OBJECT, tfs_backend_describe(near), TFS_NEAR_SECRET_TEXT);
		return EINVAL;
	}
	tfs_near_secret_from_text(text, got, out);
	return 0;
}

int tfs_near_secret_load(struct tfs_backend *near, const struct tfs_log *log,
			 uint8_t out[TFS_NEAR_SECRET_LEN])
{
	int rc = ENOENT;
	for (int round = 0; round < LOAD_ROUNDS && rc == ENOENT; round++) {
		rc = read_secret(near, log, out);
		if (rc != ENOENT)
			break;
		uint8_t r[TFS_NEAR_SECRET_TEXT / 2];
		char text[TFS_NEAR_SECRET_TEXT + 1];
		if (RAND_bytes(r, sizeof(r)) != 1) {
			tfs_err(log, "near: no random bytes for the secret");
			return EIO;
		}
		for (size_t i = 0; i < sizeof(r); i++)
			snprintf(text + 2 * i, 3, "%02x", r[i]);
		struct tfs_io src = tfs_io_cbuf(text);
		int w = tfs_backend_put_new(near, TFS_NEAR_SECRET_OBJECT, src, TFS_NEAR_SECRET_TEXT,
					    NULL);
		if (w == ENOTSUP)
			w = tfs_backend_put(near, TFS_NEAR_SECRET_OBJECT, src, TFS_NEAR_SECRET_TEXT,
					    NULL, NULL);
		if (w == 0)
			tfs_info(log, "near: made the cluster secret %s in %s",
				 TFS_NEAR_SECRET_OBJECT, tfs_backend_describe(near));
		else if (w != ESTALE) /* ESTALE: another node made it first */
			return w;
		rc = ENOENT; /* read back what was kept */
	}
	if (rc != ENOENT)
		return rc;
	rc = read_secret(near, log, out);
	if (rc == ENOENT)
		tfs_err(log, "near: %s in %s vanished after each write", TFS_NEAR_SECRET_OBJECT,
			tfs_backend_describe(near));
	return rc;
}

static int add_field(struct tfs_dbuf *d, const char *s)
{
	uint64_t n = strlen(s);
	uint8_t len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)(n >> (56 - 8 * i));
	int rc = tfs_dbuf_add(d, len, sizeof(len));
	return rc ? rc : tfs_dbuf_add(d, s, n);
}

int tfs_near_copy_name(const uint8_t secret[TFS_NEAR_SECRET_LEN], const struct tfs_near_source *src,
		       const char *key, const char *etag, char *buf, size_t cap)
{
	if (key == NULL || *key == '\0' || etag == NULL || *etag == '\0')
		return EINVAL;
	struct tfs_dbuf m;
	tfs_dbuf_init(&m, 16384);
	int rc = add_field(&m, src->endpoint ? src->endpoint : "");
	if (rc == 0)
		rc = add_field(&m, src->bucket ? src->bucket : "");
	if (rc == 0)
		rc = add_field(&m, src->prefix ? src->prefix : "");
	if (rc == 0)
		rc = add_field(&m, key);
	if (rc == 0)
		rc = add_field(&m, etag);
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	if (rc == 0 &&
	    HMAC(EVP_sha256(), secret, TFS_NEAR_SECRET_LEN, (const uint8_t *)tfs_dbuf_str(&m),
		 tfs_dbuf_len(&m), md, &mdlen) == NULL)
		rc = ENOMEM;
	tfs_dbuf_free(&m);
	if (rc)
		return rc == EOVERFLOW ? ENAMETOOLONG : rc;
	char hex[TFS_NEAR_NAME_HEX + 1];
	for (int i = 0; i < TFS_NEAR_NAME_HEX / 2; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	int w = snprintf(buf, cap, "%s/%s", hex, key);
	return w < 0 || (size_t)w >= cap ? ENAMETOOLONG : 0;
}

/* The hex digits before the name's first '/' (0: none, or not hex). */
static size_t hex_dir(const char *name)
{
	const char *slash = strchr(name, '/');
	if (slash == NULL || slash[1] == '\0' || !is_hex(name, (size_t)(slash - name)))
		return 0;
	return (size_t)(slash - name);
}

bool tfs_near_is_copy_name(const char *name)
{
	size_t n = hex_dir(name);
	return n == TFS_NEAR_NAME_HEX || n == 16;
}

bool tfs_near_copy_tagged(const char *name, const struct tfs_obj_meta *m)
{
	size_t n = hex_dir(name);
	if (n == TFS_NEAR_NAME_HEX) {
		const char *tag = tfs_obj_meta_get(m, TFS_NEAR_COPY_TAG);
		return tag && strcmp(tag, TFS_NEAR_COPY_TAG_VALUE) == 0;
	}
	if (n == 16) {
		const char *key = tfs_obj_meta_get(m, "tierfs-key");
		return key && tfs_obj_meta_get(m, "tierfs-etag") && strcmp(key, name + 17) == 0;
	}
	return false;
}
