/* near_sums.c - near copies with their block digests (near_sums.h). */
#include "config.h"

#include "near_sums.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdio.h"
#include "hash.h"

#define SUMS_CACHE 1024              /* copies whose digests are kept */
#define SUMS_CACHE_BYTES (16u << 20) /* bytes of digests kept */
#define KEY_MAX (1024 + 64)          /* longest copy key, sidecar suffix included */
#define SIDECAR_KEY_MAX (KEY_MAX + 16)

struct entry {
	char *nk;   /* NULL: free */
	uint64_t h; /* hash of nk */
	char netag[TFS_ETAG_MAX];
	struct tfs_nv_sums sums;
	uint64_t used; /* tick of the last use */
};

struct tfs_near_sums {
	struct tfs_backend *near;
	const struct tfs_log *log;
	pthread_mutex_t lock;
	struct entry e[SUMS_CACHE];
	uint64_t bytes, tick;
};

int tfs_near_sums_create(struct tfs_backend *near, const struct tfs_log *log,
			 struct tfs_near_sums **out)
{
	struct tfs_near_sums *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return ENOMEM;
	s->near = near;
	s->log = log;
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

static void entry_free(struct tfs_near_sums *s, struct entry *e)
{
	s->bytes -= e->sums.n * TFS_NV_DIGEST;
	free(e->nk);
	tfs_nv_sums_clear(&e->sums);
	memset(e, 0, sizeof(*e));
}

void tfs_near_sums_destroy(struct tfs_near_sums *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < SUMS_CACHE; i++)
		if (s->e[i].nk)
			entry_free(s, &s->e[i]);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int sidecar_key(const char *nk, char *buf, size_t cap)
{
	int w = snprintf(buf, cap, "%s%s", nk, TFS_NEAR_SIDECAR);
	return w < 0 || (size_t)w >= cap ? ENAMETOOLONG : 0;
}

/* The digests of copy nk, from its HEAD reply m (and its sidecar):
 * 0, ENOENT (none, or unreadable: the copy is not served) or near's
 * errno. */
static int fetch(struct tfs_near_sums *s, const char *nk, const struct tfs_obj_meta *m,
		 struct tfs_nv_sums *out)
{
	const char *v = tfs_obj_meta_get(m, "tierfs-sums");
	if (v == NULL)
		return ENOENT;
	if (strcmp(v, "sidecar") != 0)
		return tfs_nv_sums_decode(v, strlen(v), m->size, out) ? ENOENT : 0;
	char sk[SIDECAR_KEY_MAX];
	if (sidecar_key(nk, sk, sizeof(sk)))
		return ENOENT;
	/* Its longest text: 4 KiB blocks, the smallest accepted. */
	uint64_t cap = 16 + (m->size / 4096 + 1) * 2 * TFS_NV_DIGEST;
	if (cap > TFS_NV_TEXT_MAX)
		cap = TFS_NV_TEXT_MAX;
	char *text = malloc(cap);
	if (text == NULL)
		return ENOMEM;
	size_t got = 0;
	int rc = tfs_backend_get_range(s->near, sk, 0, cap, NULL, tfs_io_buf(text), &got, NULL);
	if (rc == 0 && tfs_nv_sums_decode(text, got, m->size, out) != 0) {
		tfs_warn(s->log, "near: '%s': its digests are malformed; not served", nk);
		rc = ENOENT;
	}
	free(text);
	return rc;
}

int tfs_near_sums_has(struct tfs_near_sums *s, const char *nk)
{
	struct tfs_obj_meta m = { 0 };
	int rc = tfs_backend_head(s->near, nk, &m);
	const char *v = rc == 0 ? tfs_obj_meta_get(&m, "tierfs-sums") : NULL;
	if (rc == 0 && v == NULL)
		rc = ENOENT; /* a copy from before digests: replace it */
	char sk[SIDECAR_KEY_MAX];
	if (rc == 0 && strcmp(v, "sidecar") == 0 && sidecar_key(nk, sk, sizeof(sk)) == 0) {
		/* a copy whose sidecar is gone (gc) is replaced too */
		struct tfs_obj_meta sm = { 0 };
		rc = tfs_backend_head(s->near, sk, &sm);
		tfs_obj_meta_clear(&sm);
	}
	tfs_obj_meta_clear(&m);
	return rc;
}

int tfs_near_sums_put(struct tfs_near_sums *s, const char *nk, const struct tfs_obj_meta *tags,
		      struct tfs_io src, uint64_t len, const struct tfs_nv_sums *sums)
{
	char *text = NULL;
	size_t tlen = 0;
	struct tfs_obj_meta m = { 0 };
	int rc = tfs_nv_sums_encode(sums, &text, &tlen);
	for (size_t i = 0; rc == 0 && i < tags->n_user; i++)
		rc = tfs_obj_meta_set(&m, tags->user[i].name, tags->user[i].value);
	if (rc == 0 && tlen > TFS_NV_INLINE_MAX) {
		char sk[SIDECAR_KEY_MAX];
		rc = sidecar_key(nk, sk, sizeof(sk));
		if (rc == 0)
			rc = tfs_obj_meta_set(&m, "tierfs-sums-of", "1");
		if (rc == 0)
			rc = tfs_backend_put(s->near, sk, tfs_io_cbuf(text), tlen, &m, NULL);
		if (rc == 0) {
			tfs_obj_meta_clear(&m);
			for (size_t i = 0; rc == 0 && i < tags->n_user; i++)
				rc = tfs_obj_meta_set(&m, tags->user[i].name, tags->user[i].value);
		}
		if (rc == 0)
			rc = tfs_obj_meta_set(&m, "tierfs-sums", "sidecar");
	} else if (rc == 0) {
		rc = tfs_obj_meta_set(&m, "tierfs-sums", text);
	}
	if (rc == 0)
		rc = tfs_backend_put(s->near, nk, src, len, &m, NULL);
	tfs_obj_meta_clear(&m);
	free(text);
	return rc;
}

/* The cached entry of nk, or -1.  Lock held. */
static int find(struct tfs_near_sums *s, const char *nk)
{
	uint64_t h = tfs_fnv1a_str(TFS_FNV1A_INIT, nk);
	for (int i = 0; i < SUMS_CACHE; i++)
		if (s->e[i].nk && s->e[i].h == h && strcmp(s->e[i].nk, nk) == 0)
			return i;
	return -1;
}

/* Keep nk's digests (taken from *sums, which is left empty), evicting the
 * least recently used entries to make room.  Lock held. */
static void keep(struct tfs_near_sums *s, const char *nk, const char *netag,
		 struct tfs_nv_sums *sums)
{
	uint64_t bytes = sums->n * TFS_NV_DIGEST;
	if (bytes > SUMS_CACHE_BYTES || find(s, nk) >= 0)
		return;
	char *k = strdup(nk);
	if (k == NULL)
		return;
	for (;;) {
		int victim = -1, free_slot = -1;
		for (int i = 0; i < SUMS_CACHE; i++) {
			if (s->e[i].nk == NULL)
				free_slot = free_slot < 0 ? i : free_slot;
			else if (victim < 0 || s->e[i].used < s->e[victim].used)
				victim = i;
		}
		if (free_slot >= 0 && s->bytes + bytes <= SUMS_CACHE_BYTES) {
			struct entry *e = &s->e[free_slot];
			e->nk = k;
			e->h = tfs_fnv1a_str(TFS_FNV1A_INIT, nk);
			snprintf(e->netag, sizeof(e->netag), "%s", netag);
			e->sums = *sums;
			memset(sums, 0, sizeof(*sums));
			e->used = ++s->tick;
			s->bytes += bytes;
			return;
		}
		entry_free(s, &s->e[victim]);
	}
}

/* Forget nk's digests. */
static void forget(struct tfs_near_sums *s, const char *nk)
{
	pthread_mutex_lock(&s->lock);
	int i = find(s, nk);
	if (i >= 0)
		entry_free(s, &s->e[i]);
	pthread_mutex_unlock(&s->lock);
}

/* A copy of nk's digests and near ETag into *sums and netag, fetched
 * when not cached.  0, ENOENT or near's errno. */
static int lookup(struct tfs_near_sums *s, const char *nk, struct tfs_nv_sums *sums,
		  char netag[TFS_ETAG_MAX])
{
	memset(sums, 0, sizeof(*sums));
	pthread_mutex_lock(&s->lock);
	int i = find(s, nk);
	if (i >= 0) {
		struct entry *e = &s->e[i];
		size_t bytes = e->sums.n * TFS_NV_DIGEST;
		sums->d = malloc(bytes ? bytes : 1);
		if (sums->d) {
			memcpy(sums->d, e->sums.d, bytes);
			sums->n = e->sums.n;
			sums->block = e->sums.block;
			sums->size = e->sums.size;
			memcpy(netag, e->netag, TFS_ETAG_MAX);
			e->used = ++s->tick;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (i >= 0)
		return sums->d ? 0 : ENOMEM;
	struct tfs_obj_meta m = { 0 };
	int rc = tfs_backend_head(s->near, nk, &m);
	if (rc == 0)
		rc = fetch(s, nk, &m, sums);
	if (rc == 0) {
		memcpy(netag, m.etag, TFS_ETAG_MAX);
		struct tfs_nv_sums keepme = { .block = sums->block,
					      .size = sums->size,
					      .n = sums->n };
		size_t bytes = sums->n * TFS_NV_DIGEST;
		keepme.d = malloc(bytes ? bytes : 1);
		if (keepme.d) {
			memcpy(keepme.d, sums->d, bytes);
			pthread_mutex_lock(&s->lock);
			keep(s, nk, netag, &keepme);
			pthread_mutex_unlock(&s->lock);
		}
		tfs_nv_sums_clear(&keepme);
	}
	tfs_obj_meta_clear(&m);
	return rc;
}

/* Deliver len bytes of buf to dst, as a backend read would. */
static int deliver(struct tfs_io dst, const char *buf, uint64_t len)
{
	if (dst.kind == TFS_IO_BUF) {
		memcpy(dst.buf, buf, len);
	} else if (dst.kind == TFS_IO_FD) {
		return tfs_pwrite_all(dst.fd, buf, len, dst.off);
	} else {
		tfs_io_iov_copy(&dst, 0, buf, len);
		tfs_io_iov_filled(&dst, len);
	}
	return 0;
}

int tfs_near_sums_read(struct tfs_near_sums *s, const char *nk, uint64_t off, uint64_t len,
		       struct tfs_io dst)
{
	struct tfs_nv_sums sums;
	char netag[TFS_ETAG_MAX];
	int rc = lookup(s, nk, &sums, netag);
	if (rc)
		return rc;
	if (off > sums.size || len > sums.size - off) {
		tfs_nv_sums_clear(&sums);
		return ERANGE;
	}
	/* The blocks the range touches, whole */
	uint64_t a = off - off % sums.block;
	uint64_t b = off + len;
	if (b % sums.block)
		b = b - b % sums.block + sums.block;
	if (b > sums.size)
		b = sums.size;
	char *buf = malloc(b - a ? b - a : 1);
	if (buf == NULL) {
		tfs_nv_sums_clear(&sums);
		return ENOMEM;
	}
	size_t got = 0;
	rc = tfs_backend_get_range(s->near, nk, a, b - a, netag, tfs_io_buf(buf), &got, NULL);
	if (rc == ESTALE || (rc == 0 && got != b - a)) {
		forget(s, nk); /* replaced meanwhile: fetch its digests again */
		rc = ENOENT;
	} else if (rc == 0 && tfs_nv_sums_check(&sums, a, buf, b - a) != 0) {
		tfs_err(s->log,
			"near: copy '%s' differs from its digests in [%llu, %llu): deleted, "
			"reading far",
			nk, (unsigned long long)a, (unsigned long long)b);
		forget(s, nk);
		char sk[SIDECAR_KEY_MAX];
		(void)tfs_backend_delete(s->near, nk);
		if (sidecar_key(nk, sk, sizeof(sk)) == 0)
			(void)tfs_backend_delete(s->near, sk);
		rc = EBADMSG;
	}
	if (rc == 0)
		rc = deliver(dst, buf + (off - a), len);
	free(buf);
	tfs_nv_sums_clear(&sums);
	return rc;
}
