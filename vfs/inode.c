/* inode.c - the inode table: two chained hash tables (by number, by path)
 * under one mutex. */
#include "config.h"

#include "inode.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#define FUSE_ROOT 1

struct tfs_itable {
	pthread_mutex_t lock;
	struct tfs_inode **by_ino, **by_path;
	size_t nbuckets; /* power of two; grows with count */
	uint64_t count;
	uint64_t next_ino;
	struct tfs_inode *root;
	void (*release)(void *ctx, void *staged);
	void *release_ctx;
	/* Persistence (NULL store: none).  `queue` lists the node IDs whose
	 * record changed (inodes made, moved or freed) since the last
	 * persist(), under `lock`; `plock` serializes persist() so that a
	 * change committed by one thread is in LMDB before any later
	 * persist() returns. */
	struct tfs_nodes *store;
	const struct tfs_log *log;
	pthread_mutex_t plock;
	uint64_t *queue;
	size_t nqueue, capqueue;
	bool queue_lost; /* out of memory queueing: persist everything */
	uint64_t persist_errors;
	/* Ghosts (with a store only): node IDs the kernel forgot whose record
	 * stays persisted, by hash of (path, type, fmt), so that a lookup of
	 * the same name takes its old ID back and writes nothing (a warm
	 * epoch whose nodes the kernel dropped).  GHOST_MAX slots reused in
	 * turn; a slot's old ghost is then retired (its record deleted). */
	struct ghost *ghosts;  /* GHOST_MAX, allocated at the first forget */
	uint32_t *ghost_heads; /* GHOST_MAX buckets: slot + 1, 0 none */
	uint32_t ghost_clock;
	uint64_t ghost_reused, ghost_retired;
	/* The bound (tfs_itable_set_max(); 0 none), the trim clock's next
	 * by_ino bucket, and inodes picked so far. */
	uint64_t max;
	size_t trim_hand;
	uint64_t trimmed;
};

struct ghost {
	uint64_t h, ino; /* ino 0: free slot */
	uint32_t next;   /* next slot + 1 in the bucket, 0 none */
};

/* Ghost slots: 256 Ki x 24 bytes + the buckets, 7 MiB at most. */
#define GHOST_MAX (1u << 18)

/* Freed node IDs queued before a persist of their own: the forgets of an
 * epoch are written in batches of this many. */
#define FORGET_BATCH 1024

/* Free an inode (lock held). */
static void free_inode(struct tfs_itable *t, struct tfs_inode *in)
{
	if (in->staged && t->release)
		t->release(t->release_ctx, in->staged);
	free(in->snap);
	free(in->path);
	free(in);
}

static uint64_t hash_str(const char *s)
{
	return tfs_fnv1a_str(TFS_FNV1A_INIT, s);
}

static size_t ino_bucket(const struct tfs_itable *t, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 17) & (t->nbuckets - 1);
}

static size_t path_bucket(const struct tfs_itable *t, const char *path)
{
	return (size_t)hash_str(path) & (t->nbuckets - 1);
}

static uint64_t ghost_hash(const char *path, enum tfs_ftype type, uint32_t fmt)
{
	uint64_t h = hash_str(path) ^ ((uint64_t)type << 56) ^ ((uint64_t)fmt << 24);
	return h * 0x9E3779B97F4A7C15ull;
}

/* Unlink ghost slot `i` from its bucket (lock held). */
static void ghost_unlink(struct tfs_itable *t, uint32_t i)
{
	uint32_t *pp = &t->ghost_heads[t->ghosts[i].h & (GHOST_MAX - 1)];
	while (*pp && *pp != i + 1)
		pp = &t->ghosts[*pp - 1].next;
	if (*pp)
		*pp = t->ghosts[i].next;
	t->ghosts[i].ino = 0;
}

/* Queue the record of node `ino` for the next persist() (lock held). */
static void queue_ino(struct tfs_itable *t, uint64_t ino)
{
	if (t->store == NULL)
		return;
	if (t->nqueue == t->capqueue) {
		size_t nc = t->capqueue ? 2 * t->capqueue : 64;
		uint64_t *nq = realloc(t->queue, nc * sizeof(*nq));
		if (nq == NULL) {
			t->queue_lost = true;
			return;
		}
		t->queue = nq;
		t->capqueue = nc;
	}
	t->queue[t->nqueue++] = ino;
}

static void queue_inode(struct tfs_itable *t, struct tfs_inode *in)
{
	if (!in->queued) {
		in->queued = true;
		queue_ino(t, in->ino);
	}
}

static void link_in(struct tfs_itable *t, struct tfs_inode *in)
{
	size_t bi = ino_bucket(t, in->ino), bp = path_bucket(t, in->path);
	in->next_ino = t->by_ino[bi];
	t->by_ino[bi] = in;
	in->next_path = t->by_path[bp];
	t->by_path[bp] = in;
}

static void grow(struct tfs_itable *t)
{
	size_t n = t->nbuckets * 2;
	struct tfs_inode **bi = calloc(n, sizeof(*bi)), **bp = calloc(n, sizeof(*bp));
	if (bi == NULL || bp == NULL) {
		free(bi);
		free(bp);
		return; /* keep the old, longer chains */
	}
	struct tfs_inode **old = t->by_ino;
	size_t oldn = t->nbuckets;
	free(t->by_path);
	t->by_ino = bi;
	t->by_path = bp;
	t->nbuckets = n;
	for (size_t i = 0; i < oldn; i++) {
		struct tfs_inode *in = old[i];
		while (in) {
			struct tfs_inode *next = in->next_ino;
			link_in(t, in);
			in = next;
		}
	}
	free(old);
}

static void unlink_out(struct tfs_itable *t, struct tfs_inode *in)
{
	struct tfs_inode **pp = &t->by_ino[ino_bucket(t, in->ino)];
	while (*pp && *pp != in)
		pp = &(*pp)->next_ino;
	if (*pp)
		*pp = in->next_ino;
	pp = &t->by_path[path_bucket(t, in->path)];
	while (*pp && *pp != in)
		pp = &(*pp)->next_path;
	if (*pp)
		*pp = in->next_path;
}

static struct tfs_inode *find_locked(struct tfs_itable *t, uint64_t ino)
{
	struct tfs_inode *in = t->by_ino[ino_bucket(t, ino)];
	while (in && in->ino != ino)
		in = in->next_ino;
	return in;
}

int tfs_itable_create(struct tfs_itable **out)
{
	struct tfs_itable *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return ENOMEM;
	t->nbuckets = 1024;
	t->by_ino = calloc(t->nbuckets, sizeof(*t->by_ino));
	t->by_path = calloc(t->nbuckets, sizeof(*t->by_path));
	t->root = calloc(1, sizeof(*t->root));
	if (t->root)
		t->root->path = strdup("");
	if (t->by_ino == NULL || t->by_path == NULL || t->root == NULL || t->root->path == NULL) {
		if (t->root)
			free(t->root->path);
		free(t->root);
		t->root = NULL;
		tfs_itable_destroy(t);
		return ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->plock, NULL);
	t->root->ino = FUSE_ROOT;
	t->root->type = TFS_FT_DIR;
	t->root->nlookup = 1;
	link_in(t, t->root);
	t->count = 1;
	t->next_ino = FUSE_ROOT + 1;
	*out = t;
	return 0;
}

void tfs_itable_destroy(struct tfs_itable *t)
{
	if (t == NULL)
		return;
	if (t->store && t->by_ino)
		(void)tfs_itable_persist(t); /* forgets not written yet */
	free(t->queue);
	free(t->ghosts);
	free(t->ghost_heads);
	for (size_t i = 0; t->by_ino && i < t->nbuckets; i++) {
		struct tfs_inode *in = t->by_ino[i];
		while (in) {
			struct tfs_inode *n = in->next_ino;
			free_inode(t, in);
			in = n;
		}
	}
	if (t->by_ino == NULL)
		free(t->root);
	free(t->by_ino);
	free(t->by_path);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->plock);
	free(t);
}

/* Resurrect one persisted node (tfs_nodes_load() callback). */
static int resurrect(void *ctx, const struct tfs_node_rec *r)
{
	struct tfs_itable *t = ctx;
	if (r->ino == FUSE_ROOT || find_locked(t, r->ino))
		return 0;
	struct tfs_inode *in = calloc(1, sizeof(*in));
	char *p = strdup(r->path);
	if (in == NULL || p == NULL) {
		free(in);
		free(p);
		return ENOMEM;
	}
	in->ino = r->ino;
	in->type = r->type;
	in->fmt = r->fmt;
	in->path = p;
	in->resurrected = true;
	link_in(t, in);
	if (++t->count > 2 * t->nbuckets)
		grow(t);
	if (r->ino >= t->next_ino)
		t->next_ino = r->ino + 1;
	return 0;
}

int tfs_itable_open(struct tfs_nodes *store, bool resumed, const struct tfs_log *log,
		    struct tfs_itable **out)
{
	struct tfs_itable *t;
	int rc = tfs_itable_create(&t);
	if (rc)
		return rc;
	t->log = log;
	if (resumed) {
		uint64_t next = 0;
		pthread_mutex_lock(&t->lock);
		rc = tfs_nodes_load(store, resurrect, t, &next);
		if (next > t->next_ino)
			t->next_ino = next;
		pthread_mutex_unlock(&t->lock);
		if (rc) {
			tfs_itable_destroy(t);
			return rc;
		}
		tfs_info(log,
			 "fuse: %" PRIu64 " node ID(s) of the earlier daemon resolved; "
			 "new ones from %" PRIu64,
			 t->count - 1, t->next_ino);
	}
	t->store = store;
	*out = t;
	return 0;
}

int tfs_itable_persist(struct tfs_itable *t)
{
	if (t->store == NULL)
		return 0;
	pthread_mutex_lock(&t->plock);
	pthread_mutex_lock(&t->lock);
	if (t->queue_lost) {
		/* A change was not queued: write every inode. */
		t->queue_lost = false;
		for (size_t i = 0; i < t->nbuckets; i++)
			for (struct tfs_inode *in = t->by_ino[i]; in; in = in->next_ino)
				if (in != t->root) {
					in->queued = false;
					queue_inode(t, in);
				}
	}
	size_t n = t->nqueue;
	uint64_t *q = t->queue, next = t->next_ino;
	t->queue = NULL;
	t->nqueue = t->capqueue = 0;
	struct tfs_node_rec *recs = n ? calloc(n, sizeof(*recs)) : NULL;
	int rc = n && recs == NULL ? ENOMEM : 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct tfs_inode *in = find_locked(t, q[i]);
		recs[i].ino = q[i];
		if (in == NULL)
			continue; /* freed: delete its record */
		in->queued = false;
		recs[i].type = in->type;
		recs[i].fmt = in->fmt;
		recs[i].path = strdup(in->path);
		if (recs[i].path == NULL)
			rc = ENOMEM;
	}
	if (rc)
		t->queue_lost = true; /* out of memory: all again next time */
	pthread_mutex_unlock(&t->lock);
	if (rc == 0 && n)
		rc = tfs_nodes_write(t->store, recs, n, next);
	for (size_t i = 0; recs && i < n; i++)
		free((char *)recs[i].path);
	free(recs);
	free(q);
	if (rc) {
		pthread_mutex_lock(&t->lock);
		t->queue_lost = true; /* written again by the next persist */
		t->persist_errors++;
		pthread_mutex_unlock(&t->lock);
	}
	pthread_mutex_unlock(&t->plock);
	return rc;
}

/* Keep the persisted record of forgotten node `in` as a ghost (lock
 * held).  Returns false when it cannot (no store, no memory, or its record
 * is not written yet): then the caller has it deleted. */
static bool ghost_add(struct tfs_itable *t, const struct tfs_inode *in)
{
	if (t->store == NULL || in->queued)
		return false;
	if (t->ghosts == NULL) {
		t->ghosts = calloc(GHOST_MAX, sizeof(*t->ghosts));
		t->ghost_heads = calloc(GHOST_MAX, sizeof(*t->ghost_heads));
		if (t->ghosts == NULL || t->ghost_heads == NULL) {
			free(t->ghosts);
			free(t->ghost_heads);
			t->ghosts = NULL;
			t->ghost_heads = NULL;
			return false;
		}
	}
	uint32_t i = t->ghost_clock++ & (GHOST_MAX - 1);
	struct ghost *g = &t->ghosts[i];
	if (g->ino) {
		queue_ino(t, g->ino); /* retired: its record goes */
		ghost_unlink(t, i);
		t->ghost_retired++;
	}
	g->h = ghost_hash(in->path, in->type, in->fmt);
	g->ino = in->ino;
	uint32_t *head = &t->ghost_heads[g->h & (GHOST_MAX - 1)];
	g->next = *head;
	*head = i + 1;
	return true;
}

/* The ID of a ghost of (path, type, fmt) whose persisted record says so,
 * taken out of the ghosts, or 0 (lock held).  A ghost whose record says
 * something else (a hash collision) is retired. */
static uint64_t ghost_take(struct tfs_itable *t, const char *path, enum tfs_ftype type,
			   uint32_t fmt)
{
	if (t->ghosts == NULL)
		return 0;
	uint64_t h = ghost_hash(path, type, fmt);
	for (uint32_t s = t->ghost_heads[h & (GHOST_MAX - 1)]; s; s = t->ghosts[s - 1].next) {
		struct ghost *g = &t->ghosts[s - 1];
		if (g->h != h)
			continue;
		uint64_t ino = g->ino;
		ghost_unlink(t, s - 1);
		if (tfs_nodes_match(t->store, ino, type, fmt, path) == 0) {
			t->ghost_reused++;
			return ino;
		}
		queue_ino(t, ino);
		t->ghost_retired++;
		return 0;
	}
	return 0;
}

static int lookup(struct tfs_itable *t, const char *path, enum tfs_ftype type, uint32_t fmt,
		  bool sync, struct tfs_inode **out)
{
	pthread_mutex_lock(&t->lock);
	struct tfs_inode *in = t->by_path[path_bucket(t, path)];
	while (in && !(in->type == type && in->fmt == fmt && strcmp(in->path, path) == 0))
		in = in->next_path;
	if (in == NULL) {
		in = calloc(1, sizeof(*in));
		char *p = strdup(path);
		if (in == NULL || p == NULL) {
			free(in);
			free(p);
			pthread_mutex_unlock(&t->lock);
			return ENOMEM;
		}
		in->path = p;
		in->ino = ghost_take(t, path, type, fmt);
		in->type = type;
		in->fmt = fmt;
		if (in->ino == 0) {
			in->ino = t->next_ino++;
			queue_inode(t, in); /* a new record */
		}
		link_in(t, in);
		if (++t->count > 2 * t->nbuckets)
			grow(t);
	}
	in->nlookup++;
	in->referenced = true;
	bool made = in->queued;
	pthread_mutex_unlock(&t->lock);
	*out = in;
	if (made && sync)
		(void)tfs_itable_persist(t);
	return 0;
}

int tfs_itable_lookup(struct tfs_itable *t, const char *path, enum tfs_ftype type, uint32_t fmt,
		      struct tfs_inode **out)
{
	return lookup(t, path, type, fmt, true, out);
}

int tfs_itable_lookup_nosync(struct tfs_itable *t, const char *path, enum tfs_ftype type,
			     uint32_t fmt, struct tfs_inode **out)
{
	return lookup(t, path, type, fmt, false, out);
}

struct tfs_inode *tfs_itable_find(struct tfs_itable *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct tfs_inode *in = t->by_ino[ino_bucket(t, ino)];
	while (in && in->ino != ino)
		in = in->next_ino;
	if (in)
		in->referenced = true;
	pthread_mutex_unlock(&t->lock);
	return in;
}

void tfs_itable_forget(struct tfs_itable *t, uint64_t ino, uint64_t n)
{
	if (ino == FUSE_ROOT)
		return;
	pthread_mutex_lock(&t->lock);
	struct tfs_inode *in = t->by_ino[ino_bucket(t, ino)];
	while (in && in->ino != ino)
		in = in->next_ino;
	bool gone = false;
	if (in && in->resurrected) {
		/* The kernel held it before this daemon, with a count this
		 * daemon does not know.  Its FORGET at eviction carries its
		 * whole count, earlier lookups included, so more than this
		 * daemon gave; a smaller one returns lookups of this daemon
		 * (a reply the kernel could not use), and the inode stays. */
		gone = n > in->nlookup;
		in->nlookup = gone ? 0 : in->nlookup - n;
	} else if (in) {
		in->nlookup = n >= in->nlookup ? 0 : in->nlookup - n;
		gone = in->nlookup == 0;
	}
	if (gone) {
		unlink_out(t, in);
		t->count--;
		if (!ghost_add(t, in) && !in->queued)
			queue_ino(t, ino);
		free_inode(t, in);
	}
	bool batch = t->nqueue >= FORGET_BATCH;
	pthread_mutex_unlock(&t->lock);
	if (batch)
		(void)tfs_itable_persist(t);
}

bool tfs_itable_swap_kernel_etag(struct tfs_itable *t, struct tfs_inode *in, const char *etag)
{
	uint64_t h = hash_str(etag) | 1; /* never 0, which means "none" */
	pthread_mutex_lock(&t->lock);
	bool same = in->kernel_etag == h;
	in->kernel_etag = h;
	pthread_mutex_unlock(&t->lock);
	return same;
}

/* attr_etag: nothing sent yet, and the attributes of no clean version
 * (hash_str() | 1 is odd). */
#define ATTR_NONE 0
#define ATTR_NOT_CLEAN 2

void tfs_itable_set_attr_etag(struct tfs_itable *t, struct tfs_inode *in, const char *etag)
{
	uint64_t h = etag[0] ? hash_str(etag) | 1 : ATTR_NOT_CLEAN;
	pthread_mutex_lock(&t->lock);
	if (in->attr_etag != ATTR_NONE && in->attr_etag != h)
		in->attr_mixed = true;
	in->attr_etag = h;
	pthread_mutex_unlock(&t->lock);
}

bool tfs_itable_swap_attr_etag(struct tfs_itable *t, struct tfs_inode *in, const char *etag)
{
	uint64_t h = hash_str(etag) | 1;
	pthread_mutex_lock(&t->lock);
	bool same = in->attr_etag == h && !in->attr_mixed;
	in->attr_etag = h;
	in->attr_mixed = false;
	pthread_mutex_unlock(&t->lock);
	return same;
}

void tfs_itable_set_max(struct tfs_itable *t, uint64_t max)
{
	pthread_mutex_lock(&t->lock);
	t->max = max;
	pthread_mutex_unlock(&t->lock);
}

uint64_t tfs_itable_excess(struct tfs_itable *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t n = t->max && t->count > t->max ? t->count - t->max : 0;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* The directory inode at `dir` (lock held), or NULL. */
static struct tfs_inode *dir_locked(struct tfs_itable *t, const char *dir)
{
	if (dir[0] == '\0')
		return t->root;
	for (struct tfs_inode *in = t->by_path[path_bucket(t, dir)]; in; in = in->next_path)
		if (in->type == TFS_FT_DIR && strcmp(in->path, dir) == 0)
			return in;
	return NULL;
}

/* Fill `v` with the parent and name of `in` (lock held); false when it
 * has none the kernel could look up. */
static bool victim_of(struct tfs_itable *t, const struct tfs_inode *in, struct tfs_itable_victim *v)
{
	char dir[4096];
	const char *slash = strrchr(in->path, '/');
	const char *name = slash ? slash + 1 : in->path;
	size_t dlen = slash ? (size_t)(slash - in->path) : 0;
	if (tfs_itable_path_is_detached(in->path) || name[0] == '\0' || dlen >= sizeof(dir) ||
	    strlen(name) >= sizeof(v->name))
		return false;
	memcpy(dir, in->path, dlen);
	dir[dlen] = '\0';
	const struct tfs_inode *p = dir_locked(t, dir);
	if (p == NULL)
		return false;
	v->parent = p->ino;
	snprintf(v->name, sizeof(v->name), "%s", name);
	return true;
}

size_t tfs_itable_pick_trim(struct tfs_itable *t, struct tfs_itable_victim *v, size_t n)
{
	size_t got = 0;
	pthread_mutex_lock(&t->lock);
	/* Two turns at most: the first may only clear referenced bits. */
	for (size_t seen = 0; got < n && seen < 2 * t->nbuckets; seen++) {
		size_t b = t->trim_hand++ & (t->nbuckets - 1);
		for (struct tfs_inode *in = t->by_ino[b]; in && got < n; in = in->next_ino) {
			if (in == t->root)
				continue;
			if (in->referenced) {
				in->referenced = false;
				continue;
			}
			if (victim_of(t, in, &v[got]))
				got++;
		}
	}
	t->trimmed += got;
	pthread_mutex_unlock(&t->lock);
	return got;
}

uint64_t tfs_itable_trim_count(struct tfs_itable *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t n = t->trimmed;
	pthread_mutex_unlock(&t->lock);
	return n;
}

uint64_t tfs_itable_count(struct tfs_itable *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tfs_itable_ghost_counts(struct tfs_itable *t, uint64_t *reused, uint64_t *retired)
{
	pthread_mutex_lock(&t->lock);
	*reused = t->ghost_reused;
	*retired = t->ghost_retired;
	pthread_mutex_unlock(&t->lock);
}

uint64_t tfs_itable_persist_errors(struct tfs_itable *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t n = t->persist_errors;
	pthread_mutex_unlock(&t->lock);
	return n;
}

int tfs_itable_path(struct tfs_itable *t, const struct tfs_inode *in, char *buf, size_t len)
{
	pthread_mutex_lock(&t->lock);
	size_t n = strlen(in->path);
	int rc = n < len ? 0 : ENAMETOOLONG;
	if (rc == 0)
		memcpy(buf, in->path, n + 1);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Does `path` equal `base` or lie below it?  Returns the suffix or NULL. */
static const char *below(const char *path, const char *base)
{
	size_t n = strlen(base);
	if (n == 0)
		return path; /* everything lies below the root */
	if (strncmp(path, base, n) != 0 || (path[n] != '\0' && path[n] != '/'))
		return NULL;
	return path + n;
}

/* Give `in` a new path (owned string), re-hashed.  Lock held. */
static void repath(struct tfs_itable *t, struct tfs_inode *in, char *p)
{
	unlink_out(t, in);
	free(in->path);
	in->path = p;
	link_in(t, in);
}

/* Collect the inodes at or below `base` (lock held).  Returns a malloc'd
 * array (NULL with *n 0 when there are none) or NULL with *n SIZE_MAX. */
static struct tfs_inode **collect(struct tfs_itable *t, const char *base, size_t *n)
{
	struct tfs_inode **v = NULL;
	size_t cnt = 0, cap = 0;
	for (size_t i = 0; i < t->nbuckets; i++) {
		for (struct tfs_inode *in = t->by_ino[i]; in; in = in->next_ino) {
			if (in == t->root || below(in->path, base) == NULL)
				continue;
			if (cnt == cap) {
				size_t nc = cap ? 2 * cap : 16;
				struct tfs_inode **nv = realloc(v, nc * sizeof(*nv));
				if (nv == NULL) {
					free(v);
					*n = SIZE_MAX;
					return NULL;
				}
				v = nv;
				cap = nc;
			}
			v[cnt++] = in;
		}
	}
	*n = cnt;
	return v;
}

static int detach_locked(struct tfs_itable *t, const char *path)
{
	size_t n;
	struct tfs_inode **v = collect(t, path, &n);
	if (n == SIZE_MAX)
		return ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char *p = malloc(48);
		if (p == NULL) {
			free(v);
			return ENOMEM;
		}
		/* No lookup can produce a path with an empty segment. */
		snprintf(p, 48, TFS_ITABLE_DETACHED "%llu", (unsigned long long)v[i]->ino);
		repath(t, v[i], p);
		queue_inode(t, v[i]);
	}
	free(v);
	return 0;
}

int tfs_itable_detach_keep(struct tfs_itable *t, const char *path, const struct tfs_attr *snap,
			   void *staged)
{
	pthread_mutex_lock(&t->lock);
	struct tfs_inode *at = NULL;
	for (struct tfs_inode *in = t->by_path[path_bucket(t, path)]; in; in = in->next_path)
		if (strcmp(in->path, path) == 0 && in->type == snap->type && in->fmt == snap->fmt)
			at = in;
	struct tfs_attr *copy = at ? malloc(sizeof(*copy)) : NULL;
	if (at && copy && at->snap == NULL && at->staged == NULL) {
		*copy = *snap;
		at->snap = copy;
		at->staged = staged;
		copy = NULL;
		staged = NULL;
	}
	free(copy);
	if (staged && t->release)
		t->release(t->release_ctx, staged);
	int rc = detach_locked(t, path);
	pthread_mutex_unlock(&t->lock);
	(void)tfs_itable_persist(t);
	return rc;
}

void tfs_itable_set_release(struct tfs_itable *t, void (*fn)(void *ctx, void *staged), void *ctx)
{
	/* Under the lock: free_inode() reads them, in a FORGET on another
	 * FUSE thread, while an unlink sets them (ThreadSanitizer). */
	pthread_mutex_lock(&t->lock);
	t->release = fn;
	t->release_ctx = ctx;
	pthread_mutex_unlock(&t->lock);
}

bool tfs_itable_detached(struct tfs_itable *t, const struct tfs_inode *in, struct tfs_attr *a,
			 void **staged)
{
	pthread_mutex_lock(&t->lock);
	bool d = in->snap != NULL;
	if (d) {
		*a = *in->snap;
		*staged = in->staged;
	}
	pthread_mutex_unlock(&t->lock);
	return d;
}

bool tfs_itable_path_is_detached(const char *path)
{
	return strncmp(path, TFS_ITABLE_DETACHED, sizeof(TFS_ITABLE_DETACHED) - 1) == 0;
}

int tfs_itable_detach(struct tfs_itable *t, const char *path)
{
	pthread_mutex_lock(&t->lock);
	int rc = detach_locked(t, path);
	pthread_mutex_unlock(&t->lock);
	(void)tfs_itable_persist(t);
	return rc;
}

int tfs_itable_rename(struct tfs_itable *t, const char *from, const char *to)
{
	pthread_mutex_lock(&t->lock);
	int rc = detach_locked(t, to);
	size_t n = 0;
	struct tfs_inode **v = rc ? NULL : collect(t, from, &n);
	if (rc == 0 && n == SIZE_MAX)
		rc = ENOMEM;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const char *rest = below(v[i]->path, from);
		size_t len = strlen(to) + strlen(rest) + 1;
		char *p = malloc(len);
		if (p == NULL) {
			rc = ENOMEM;
			break;
		}
		snprintf(p, len, "%s%s", to, rest);
		repath(t, v[i], p);
		queue_inode(t, v[i]);
	}
	free(v);
	pthread_mutex_unlock(&t->lock);
	(void)tfs_itable_persist(t);
	return rc;
}
