/* near_check.c - the far checks a near copy waits for (near_check.h). */
#include "config.h"

#include "near_check.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DIGEST 16

struct slot {
	uint8_t digest[DIGEST];
	uint64_t at_ms;
	bool used;
};

struct tfs_near_checks {
	pthread_mutex_t lock;
	uint64_t ttl_ms;
	size_t mask;
	struct slot *slots;
};

int tfs_near_checks_create(size_t slots, uint64_t ttl_ms, struct tfs_near_checks **out)
{
	if (slots == 0 || (slots & (slots - 1)) != 0)
		return EINVAL;
	struct tfs_near_checks *c = calloc(1, sizeof(*c));
	if (c)
		c->slots = calloc(slots, sizeof(*c->slots));
	if (c == NULL || c->slots == NULL) {
		free(c);
		return ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->ttl_ms = ttl_ms;
	c->mask = slots - 1;
	*out = c;
	return 0;
}

void tfs_near_checks_destroy(struct tfs_near_checks *c)
{
	if (c) {
		pthread_mutex_destroy(&c->lock);
		free(c->slots);
		free(c);
	}
}

/* The version's digest and its slot (*i); false when it cannot be made
 * (out of memory): then nothing is noted, and nothing passes.  NUL bytes
 * separate the fields (none holds one). */
static bool digest_of(const struct tfs_near_checks *c, const char *who, const char *key,
		      const char *etag, uint8_t d[DIGEST], size_t *i)
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	bool ok = x && EVP_DigestInit_ex(x, EVP_sha256(), NULL) &&
		  EVP_DigestUpdate(x, who, strlen(who) + 1) &&
		  EVP_DigestUpdate(x, key, strlen(key) + 1) &&
		  EVP_DigestUpdate(x, etag, strlen(etag) + 1) && EVP_DigestFinal_ex(x, md, &n);
	EVP_MD_CTX_free(x);
	if (!ok)
		return false;
	memcpy(d, md, DIGEST);
	size_t at = 0;
	for (int b = 0; b < 8; b++)
		at = (at << 8) | md[DIGEST + b];
	*i = at & c->mask;
	return true;
}

void tfs_near_checks_note(struct tfs_near_checks *c, const char *who, const char *key,
			  const char *etag, uint64_t now_ms)
{
	uint8_t d[DIGEST];
	size_t i;
	if (c->ttl_ms == 0 || !digest_of(c, who ? who : "", key, etag, d, &i))
		return;
	pthread_mutex_lock(&c->lock);
	memcpy(c->slots[i].digest, d, DIGEST);
	c->slots[i].at_ms = now_ms;
	c->slots[i].used = true;
	pthread_mutex_unlock(&c->lock);
}

bool tfs_near_checks_passed(struct tfs_near_checks *c, const char *who, const char *key,
			    const char *etag, uint64_t now_ms)
{
	uint8_t d[DIGEST];
	size_t i;
	if (c->ttl_ms == 0 || !digest_of(c, who ? who : "", key, etag, d, &i))
		return false;
	pthread_mutex_lock(&c->lock);
	const struct slot *s = &c->slots[i];
	bool ok = s->used && memcmp(s->digest, d, DIGEST) == 0 &&
		  (c->ttl_ms == UINT64_MAX || now_ms - s->at_ms < c->ttl_ms);
	pthread_mutex_unlock(&c->lock);
	return ok;
}
