/* near_spool.c - copies to near assembled from their readers' bytes
 * (near_spool.h). */
#include "config.h"

#include "near_spool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fdio.h"

struct spool {
	char *key;
	char etag[TFS_ETAG_MAX];
	int fd;
	uint64_t size;               /* UINT64_MAX until known */
	uint64_t bytes;              /* written (counted in the budget) */
	uint64_t r[SPOOL_RANGES][2]; /* disjoint [start, end), sorted */
	unsigned nr;
	unsigned writers;         /* adds writing into fd now */
	struct tfs_nv_piece *pcs; /* the ranges' digests, in the order added */
	size_t npcs, cappcs;
	bool pcs_lost; /* a range's digest was not kept (SPOOL_PIECES) */
	uint64_t last_ms;
	bool gone; /* done or given up: the slot frees with the last writer */
};

struct tfs_near_spools {
	char *dir;
	uint64_t budget, used;
	unsigned idle_ms;
	tfs_spool_abandoned_fn abandoned;
	void *ctx;
	pthread_mutex_t lock;
	struct spool *s[SPOOL_OBJECTS];
};

static uint64_t now_ms(void)
{
	return tfs_mono_ns() / 1000000;
}

int tfs_near_spools_create(const char *dir, uint64_t budget, unsigned idle_ms,
			   tfs_spool_abandoned_fn abandoned, void *ctx,
			   struct tfs_near_spools **out)
{
	if (dir == NULL)
		return EINVAL;
	struct tfs_near_spools *s = calloc(1, sizeof(*s));
	if (s == NULL || (s->dir = strdup(dir)) == NULL) {
		free(s);
		return ENOMEM;
	}
	s->budget = budget;
	s->idle_ms = idle_ms;
	s->abandoned = abandoned;
	s->ctx = ctx;
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

static void spool_free(struct spool *p)
{
	if (p->fd >= 0)
		close(p->fd);
	free(p->pcs);
	free(p->key);
	free(p);
}

/* Take slot i's object out: its bytes leave the budget; freed now or by
 * its last writer.  Lock held. */
static void retire(struct tfs_near_spools *s, int i)
{
	struct spool *p = s->s[i];
	s->used -= p->bytes;
	p->bytes = 0;
	s->s[i] = NULL;
	if (p->writers)
		p->gone = true;
	else
		spool_free(p);
}

void tfs_near_spools_destroy(struct tfs_near_spools *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < SPOOL_OBJECTS; i++)
		if (s->s[i])
			spool_free(s->s[i]);
	pthread_mutex_destroy(&s->lock);
	free(s->dir);
	free(s);
}

static int find(struct tfs_near_spools *s, const char *key, const char *etag)
{
	for (int i = 0; i < SPOOL_OBJECTS; i++)
		if (s->s[i] && strcmp(s->s[i]->key, key) == 0 && strcmp(s->s[i]->etag, etag) == 0)
			return i;
	return -1;
}

/* Add [a, b) to the object's ranges, merging neighbours.  Returns the
 * bytes not covered before, or -1 when the list is full.  Lock held. */
static int64_t add_range(struct spool *p, uint64_t a, uint64_t b)
{
	uint64_t covered = 0;
	unsigned i = 0, j;
	while (i < p->nr && p->r[i][1] < a)
		i++;
	/* p->r[i..j) touch or overlap [a, b): merge them */
	for (j = i; j < p->nr && p->r[j][0] <= b; j++) {
		uint64_t lo = p->r[j][0] > a ? p->r[j][0] : a;
		uint64_t hi = p->r[j][1] < b ? p->r[j][1] : b;
		if (hi > lo)
			covered += hi - lo;
	}
	uint64_t na = a, nb = b;
	if (j > i) {
		na = p->r[i][0] < a ? p->r[i][0] : a;
		nb = p->r[j - 1][1] > b ? p->r[j - 1][1] : b;
	} else if (p->nr == SPOOL_RANGES) {
		return -1;
	}
	/* replace r[i..j) by one range */
	unsigned remove = j - i;
	if (remove == 0) {
		memmove(&p->r[i + 1], &p->r[i], (p->nr - i) * sizeof(p->r[0]));
		p->nr++;
	} else if (remove > 1) {
		memmove(&p->r[i + 1], &p->r[j], (p->nr - j) * sizeof(p->r[0]));
		p->nr -= remove - 1;
	}
	p->r[i][0] = na;
	p->r[i][1] = nb;
	return (int64_t)(b - a - covered);
}

/* Keep a range's digest (growing the list by doubling); one that cannot
 * be kept marks the list incomplete.  Lock held. */
static void keep_piece(struct spool *p, const struct tfs_nv_piece *pc)
{
	if (p->pcs_lost)
		return;
	if (p->npcs == p->cappcs) {
		size_t cap = p->cappcs ? 2 * p->cappcs : 16;
		struct tfs_nv_piece *np = cap <= SPOOL_PIECES ? realloc(p->pcs, cap * sizeof(*np))
							      : NULL;
		if (np == NULL) {
			p->pcs_lost = true;
			return;
		}
		p->pcs = np;
		p->cappcs = cap;
	}
	p->pcs[p->npcs++] = *pc;
}

/* Whether the object is whole: hand its file over.  Lock held. */
static void check_done(struct tfs_near_spools *s, int i, struct tfs_spool_result *res)
{
	struct spool *p = s->s[i];
	if (p->size == UINT64_MAX || p->writers)
		return;
	bool whole = p->size == 0 ? p->nr == 0 || (p->nr == 1 && p->r[0][1] == 0)
				  : p->nr == 1 && p->r[0][0] == 0 && p->r[0][1] >= p->size;
	if (!whole)
		return;
	res->done_fd = p->fd;
	res->size = p->size;
	res->pieces = p->pcs;
	res->npieces = p->npcs;
	res->pieces_complete = !p->pcs_lost;
	p->pcs = NULL;
	p->fd = -1;
	retire(s, i);
}

/* Give up the objects idle for idle_ms; their keys go to *gone (the
 * caller calls the callback once unlocked).  Lock held. */
static unsigned give_up_idle(struct tfs_near_spools *s, char *keys[SPOOL_OBJECTS],
			     char etags[SPOOL_OBJECTS][TFS_ETAG_MAX])
{
	unsigned n = 0;
	uint64_t now = now_ms();
	for (int i = 0; i < SPOOL_OBJECTS; i++) {
		struct spool *p = s->s[i];
		if (p == NULL || p->writers || now - p->last_ms < s->idle_ms)
			continue;
		keys[n] = strdup(p->key);
		memcpy(etags[n], p->etag, TFS_ETAG_MAX);
		if (keys[n])
			n++;
		retire(s, i);
	}
	return n;
}

static int write_src(int fd, uint64_t off, struct tfs_io src, uint64_t len)
{
	if (src.kind == TFS_IO_BUF)
		return tfs_pwrite_all(fd, src.cbuf, len, (off_t)off);
	uint64_t at = 0;
	for (int i = 0; i < src.iovcnt && at < len; i++) {
		uint64_t k = src.iov[i].iov_len < len - at ? src.iov[i].iov_len : len - at;
		int rc = tfs_pwrite_all(fd, src.iov[i].iov_base, k, (off_t)(off + at));
		if (rc)
			return rc;
		at += k;
	}
	return at == len ? 0 : EINVAL;
}

int tfs_near_spool_add(struct tfs_near_spools *s, const char *key, const char *etag, uint64_t off,
		       struct tfs_io src, uint64_t len, struct tfs_spool_result *res)
{
	char *idle_keys[SPOOL_OBJECTS];
	char idle_etags[SPOOL_OBJECTS][TFS_ETAG_MAX];
	unsigned n_idle;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	res->done_fd = -1;
	if ((src.kind != TFS_IO_BUF && src.kind != TFS_IO_IOV) || !key || !*key || !etag ||
	    !*etag || off + len < off)
		return EINVAL;
	pthread_mutex_lock(&s->lock);
	n_idle = give_up_idle(s, idle_keys, idle_etags);
	int i = find(s, key, etag);
	if (i < 0) {
		for (i = 0; i < SPOOL_OBJECTS && s->s[i]; i++)
			;
		struct spool *p = i < SPOOL_OBJECTS ? calloc(1, sizeof(*p)) : NULL;
		if (i == SPOOL_OBJECTS) {
			rc = ENFILE;
		} else if (p == NULL || (p->key = strdup(key)) == NULL) {
			free(p);
			rc = ENOMEM;
		} else {
			p->fd = open(s->dir, O_TMPFILE | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (p->fd < 0) {
				rc = ENFILE; /* no file: not spooled */
				free(p->key);
				free(p);
			} else {
				snprintf(p->etag, sizeof(p->etag), "%s", etag);
				p->size = UINT64_MAX;
				s->s[i] = p;
				res->first = true;
			}
		}
	}
	struct spool *p = rc ? NULL : s->s[i];
	if (p && s->used + len > s->budget) {
		rc = EDQUOT;
	} else if (p) {
		/* Reserve the whole length now; what was already covered is
		 * given back below. */
		s->used += len;
		p->bytes += len;
		p->writers++;
		p->last_ms = now_ms();
	}
	pthread_mutex_unlock(&s->lock);
	for (unsigned k = 0; k < n_idle; k++) {
		if (s->abandoned)
			s->abandoned(s->ctx, idle_keys[k], idle_etags[k]);
		free(idle_keys[k]);
	}
	if (rc)
		return rc;

	/* The digest of the caller's bytes, taken before they are written. */
	struct tfs_nv_piece pc;
	tfs_nv_piece_make(&pc, off, src, len);
	int wrc = write_src(p->fd, off, src, len);

	pthread_mutex_lock(&s->lock);
	p->writers--;
	if (p->gone) {
		/* given up meanwhile (idle, or the size showed another version) */
		if (p->writers == 0)
			spool_free(p);
		pthread_mutex_unlock(&s->lock);
		return ESTALE;
	}
	i = find(s, key, etag);
	int64_t fresh = wrc ? -1 : add_range(p, off, off + len);
	if (fresh < 0) {
		retire(s, i);
		pthread_mutex_unlock(&s->lock);
		return wrc ? wrc : E2BIG;
	}
	s->used -= len - (uint64_t)fresh;
	p->bytes -= len - (uint64_t)fresh;
	keep_piece(p, &pc);
	check_done(s, i, res);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void tfs_near_spool_sized(struct tfs_near_spools *s, const char *key, const char *etag,
			  uint64_t size, struct tfs_spool_result *res)
{
	memset(res, 0, sizeof(*res));
	res->done_fd = -1;
	pthread_mutex_lock(&s->lock);
	int i = find(s, key, etag);
	if (i >= 0) {
		if (size == UINT64_MAX) {
			retire(s, i);
		} else {
			s->s[i]->size = size;
			check_done(s, i, res);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

uint64_t tfs_near_spool_bytes(struct tfs_near_spools *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t used = s->used;
	pthread_mutex_unlock(&s->lock);
	return used;
}
