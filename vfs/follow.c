/* follow.c - sliding windows of prefetches ahead of readers that follow
 * known orders, one window per stream, under one budget.  The model
 * (orders, streams, windows, crediting opens, bounds) is follow.h's.
 *
 * The file reads top to bottom in the life of an order: the opener's
 * process from /proc (owner and ancestry); an order's arrays (positions,
 * keys stored once with the chain of their positions, the hash table);
 * streams and the order memory counted per uid (drop the quietest
 * beyond a bound); the reader's position and its window (reader_at(),
 * crediting an open: tfs_follow_opened()); the fetch threads (take a
 * file from the streams in turn within each one's share, size it, fetch
 * it through the RAM tier); the builder thread (parse and build the
 * orders written into the control file); stats; and the scope
 * of the manifests the `follow` control command loads (src/follow_ctl.c).  One mutex (f->lock) guards the streams and counts;
 * it is never held across /proc, a fetch or the parse of an order. */
#include "config.h"

#include "follow.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "path.h"
#include "ram.h"
#include "statdef.h"
#include "workers.h"

/* A fetch thread with nothing to take because of the shares looks again
 * this often (a stream going idle grows the others' shares). */
#define RETRY_MS 100
/* Cached answers "which stream owns this thread's process or its nearest
 * ancestor". */
#define CREDIT_SLOTS 256

/* No position (the end of a chain of positions). */
#define NONE UINT32_MAX
/* The most occurrences behind the reader an open skips to credit a later
 * occurrence of the same key (bounds the work of one open). */
#define SKIP_MAX 64
/* The most uids whose order memory is counted at once. */
#define MAX_UIDS 64
/* The order builder thread's name (/proc/PID/task/TID/comm). */
#define BUILDER_NAME "tierfs-order"

/* A distinct key of an order. */
struct okey {
	uint32_t off;    /* of its name in the pool */
	uint32_t head;   /* its first position */
	uint32_t tail;   /* its last position */
	uint32_t cursor; /* its next position not opened in this pass, + 1;
			  * 0: every one was opened */
};

/* A position of an order. */
struct opos {
	uint32_t key;  /* index in keys[] */
	uint32_t next; /* the key's next position, or NONE */
};

/* An order: n positions in reading order, each naming one of nk distinct
 * keys.  A key named at several positions (sampling with replacement) is
 * stored once, with the chain of its positions, so repeats cost linear
 * time and memory.  Four arrays, each one allocation; `bytes` is what
 * they allocate, the memory counted against the bounds. */
struct order {
	struct opos *pos;
	size_t n, ncap;
	struct okey *keys;
	size_t nk, kcap;
	char *pool; /* the keys' names with their NULs */
	size_t pool_len, pool_cap;
	uint32_t *slots; /* open addressing: key index + 1, 0 empty */
	size_t nslots;   /* power of two, > 4/3 nk; 0: none yet */
	uint64_t bytes;
};

/* The bytes orders take, of one uid. */
struct uid_use {
	uid_t uid;
	uint64_t bytes;
};

enum stream_kind {
	STREAM_PROCESS, /* owned by the process that wrote the order */
	STREAM_UNKNOWN, /* written by a process the daemon cannot see (pid 0) */
	STREAM_COMMAND, /* the follow control command */
};

struct stream {
	uint64_t id; /* > 0, never reused */
	enum stream_kind kind;
	struct tfs_follow_owner owner; /* STREAM_PROCESS */
	uid_t uid;                     /* whose share holds its order */
	struct order o;
	uint64_t gen;     /* bumped by every new order: stale jobs are dropped */
	uint64_t wgen;    /* bumped when the window starts over */
	size_t pos;       /* highest index opened in this pass (+1); 0 none */
	size_t cur;       /* where the reader is (+1): the window starts here */
	size_t back;      /* last open far behind the window (+1); 0 none */
	size_t next;      /* the window's end: files before it may be fetched */
	size_t take;      /* next index a fetch thread takes; cur <= take <= next */
	uint64_t *sizes;  /* window entries: sizes[i % window], i in [cur, take) */
	uint64_t ahead;   /* sum of those: bytes prefetched, not yet opened */
	uint64_t last_ms; /* the order set or the last open credited to it */
	uint64_t fetched, failed, opened;
};

struct credit {
	pid_t tid;
	uint64_t version; /* of the streams when answered */
	uint64_t stream;  /* 0: no stream owns the process or an ancestor */
};

struct tfs_follow {
	struct tfs_layer *ram;
	struct tfs_meta *meta;
	const struct tfs_log *log;
	const struct tfs_manifest_scope *scope; /* tfs_follow_set_scope() */
	unsigned window;
	uint64_t stall_ms;
	uint64_t (*clock_ms)(void);
	uint64_t budget;      /* 0: half the RAM tier's size */
	uint64_t max_bytes;   /* of all order memory; 0: no bound */
	uint64_t uid_max;     /* of one uid's; 0: no bound */
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t work;  /* CLOCK_MONOTONIC */
	uint64_t bytes;       /* order memory counted now (texts, builds, orders) */
	struct uid_use uids[MAX_UIDS];
	size_t nuids;
	/* The order builder: one thread, requests in turn. */
	pthread_t builder;
	bool builder_started, builder_stop;
	pthread_cond_t built; /* the builder has a request, or stops */
	struct tfs_follow_request *bq, **bq_tail;
	size_t queued;
	uint64_t orders_built, orders_refused;
	struct stream *s[TFS_FOLLOW_MAX_STREAMS];
	size_t ns;
	size_t rr; /* the stream served next */
	uint64_t next_id;
	uint64_t version; /* bumped when a stream comes, goes or gets an order */
	struct credit credits[CREDIT_SLOTS];
	bool stop;
	struct tfs_workers pool;
	uint64_t fetched, failed, opened_in_order, realigned, skipped_errors, dropped;
};

static uint64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static uint64_t hash(const char *s)
{
	return tfs_fnv1a_str(TFS_FNV1A_INIT, s);
}

/* ---- the policy ---- */

uint64_t tfs_follow_share(uint64_t budget, size_t active)
{
	return active > 1 ? budget / active : budget;
}

bool tfs_follow_stalled(uint64_t last_ms, uint64_t now_ms, uint64_t stall_ms)
{
	return stall_ms > 0 && now_ms >= last_ms && now_ms - last_ms >= stall_ms;
}

size_t tfs_follow_closest(const size_t *idx, const size_t *cur, size_t n)
{
	size_t best = 0;
	bool best_ahead = false;
	size_t best_d = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		bool ahead = idx[i] >= cur[i];
		size_t d = ahead ? idx[i] - cur[i] : cur[i] - idx[i];
		if ((ahead && !best_ahead) || (ahead == best_ahead && d < best_d)) {
			best = i;
			best_ahead = ahead;
			best_d = d;
		}
	}
	return best;
}

/* ---- /proc ---- */

/* Read /proc/PID/NAME into buf (NUL-terminated).  Returns 0 or an errno
 * (ENOENT: no such process). */
static int proc_read(pid_t pid, const char *name, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/%s", (long)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	ssize_t r = read(fd, buf, cap - 1);
	int err = errno;
	close(fd);
	if (r < 0)
		return err == ESRCH ? ENOENT : err;
	buf[r] = '\0';
	return 0;
}

/* The number after "\n<field>:" in a /proc/PID/status text. */
static int status_field(const char *buf, const char *field, pid_t *out)
{
	char pat[16];
	snprintf(pat, sizeof(pat), "\n%s:", field);
	const char *p = strstr(buf, pat);
	if (p == NULL)
		return EINVAL;
	p += strlen(pat);
	char *end;
	errno = 0;
	unsigned long v = strtoul(p, &end, 10);
	if (errno || end == p || v > INT_MAX)
		return EINVAL;
	*out = (pid_t)v;
	return 0;
}

/* The parent and the start time (clock ticks after boot) of process
 * `pid`, from /proc/PID/stat.  Returns 0, ENOENT (gone) or EINVAL. */
static int proc_stat(pid_t pid, pid_t *ppid, uint64_t *start)
{
	char buf[1024];
	int rc = proc_read(pid, "stat", buf, sizeof(buf));
	if (rc)
		return rc;
	/* "pid (comm) state ppid ... starttime(22) ...": comm may hold
	 * anything, so fields are counted after its last ')'. */
	const char *p = strrchr(buf, ')');
	if (p == NULL || p[1] != ' ' || p[2] == '\0')
		return EINVAL;
	p += 2; /* field 3, the state: one character */
	if (*p == '\0' || p[1] != ' ')
		return EINVAL;
	p += 2;
	for (int field = 4; field <= 22; field++) {
		char *end;
		errno = 0;
		/* strtoll: a few fields (priority, nice, tty) may be negative. */
		long long v = strtoll(p, &end, 10);
		if (errno || end == p)
			return EINVAL;
		if (field == 4)
			*ppid = (pid_t)v;
		if (field == 22) {
			*start = (uint64_t)v;
			return 0;
		}
		p = end;
	}
	return EINVAL;
}

void tfs_follow_owner_of(pid_t tid, struct tfs_follow_owner *out)
{
	char buf[4096];
	pid_t tgid, ppid;
	uint64_t start;
	out->pid = tid > 0 ? tid : 0;
	out->start = 0;
	if (tid <= 0 || proc_read(tid, "status", buf, sizeof(buf)) != 0 ||
	    status_field(buf, "Tgid", &tgid) != 0 || tgid <= 0)
		return;
	out->pid = tgid;
	if (proc_stat(tgid, &ppid, &start) == 0)
		out->start = start;
}

/* Whether the process `o` names still runs (when /proc cannot tell, it
 * is taken as running). */
static bool owner_alive(const struct tfs_follow_owner *o)
{
	pid_t ppid;
	uint64_t start;
	if (o->start == 0)
		return !(kill(o->pid, 0) != 0 && errno == ESRCH);
	int rc = proc_stat(o->pid, &ppid, &start);
	if (rc == ENOENT)
		return false;
	return rc != 0 || start == o->start;
}

/* The opener's process and its ancestors, nearest first. */
struct ancestry {
	size_t n;
	struct tfs_follow_owner v[TFS_FOLLOW_ANCESTRY + 1];
};

static void ancestry_of(pid_t tid, struct ancestry *a)
{
	char buf[4096];
	pid_t p, ppid;
	uint64_t start;
	a->n = 0;
	if (tid <= 0 || proc_read(tid, "status", buf, sizeof(buf)) != 0 ||
	    status_field(buf, "Tgid", &p) != 0)
		return;
	while (a->n < TFS_FOLLOW_ANCESTRY + 1 && p > 1 && proc_stat(p, &ppid, &start) == 0) {
		a->v[a->n++] = (struct tfs_follow_owner){ .pid = p, .start = start };
		p = ppid;
	}
}

static bool same_owner(const struct tfs_follow_owner *a, const struct tfs_follow_owner *b)
{
	return a->pid == b->pid && (a->start == 0 || b->start == 0 || a->start == b->start);
}

/* ---- streams (lock held) ---- */

static void order_free(struct order *o)
{
	free(o->pos);
	free(o->keys);
	free(o->pool);
	free(o->slots);
	memset(o, 0, sizeof(*o));
}

static const char *key_name(const struct order *o, uint32_t k)
{
	return o->pool + o->keys[k].off;
}

/* The slot of `key` (hash h) in o->slots: the one holding it, else the
 * empty one where it would go.  o->nslots > 0. */
static size_t order_slot(const struct order *o, const char *key, uint64_t h)
{
	size_t mask = o->nslots - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		uint32_t s = o->slots[i];
		if (s == 0 || strcmp(key_name(o, s - 1), key) == 0)
			return i;
	}
}

/* The key index of `key` (hash h) in the order, or NONE. */
static uint32_t order_find(const struct order *o, const char *key, uint64_t h)
{
	if (o->nslots == 0)
		return NONE;
	uint32_t s = o->slots[order_slot(o, key, h)];
	return s ? s - 1 : NONE;
}

/* The position an open of key `k` stands for, with the reader at `cur`
 * (+1) and `window` files fetched ahead: its next occurrence not yet
 * opened in this pass, passing over those far behind the reader (it
 * skipped them) when a later one exists; when every occurrence was
 * opened, the first if it opens the order or the reader is far past the
 * last (the order read again), else the last (a reopen). */
static size_t order_pick(const struct order *o, uint32_t k, size_t cur, size_t window)
{
	const struct okey *e = &o->keys[k];
	if (e->cursor == 0)
		return e->head == 0 || (size_t)e->tail + 1 + window < cur ? e->head : e->tail;
	uint32_t p = e->cursor - 1;
	for (int i = 0; i < SKIP_MAX && o->pos[p].next != NONE && (size_t)p + 1 + 2 * window < cur;
	     i++)
		p = o->pos[p].next;
	return p;
}

/* Whether position `idx` was opened in this pass (or passed over). */
static bool order_opened(const struct order *o, size_t idx)
{
	const struct okey *e = &o->keys[o->pos[idx].key];
	return e->cursor == 0 || idx + 1 < e->cursor;
}

/* Position `idx` is opened: its key's next occurrence is the one after. */
static void order_mark(struct order *o, size_t idx)
{
	struct okey *e = &o->keys[o->pos[idx].key];
	if (e->cursor != 0 && idx + 1 >= e->cursor)
		e->cursor = o->pos[idx].next == NONE ? 0 : o->pos[idx].next + 1;
}

/* A new pass: no occurrence is opened.  O(keys). */
static void order_new_pass(struct order *o)
{
	for (size_t k = 0; k < o->nk; k++)
		o->keys[k].cursor = o->keys[k].head + 1;
}

static void stream_free(struct stream *s)
{
	if (s == NULL)
		return;
	order_free(&s->o);
	free(s->sizes);
	free(s);
}

static struct stream *stream_alloc(unsigned window)
{
	struct stream *s = calloc(1, sizeof(*s));
	if (s)
		s->sizes = calloc(window, sizeof(*s->sizes));
	if (s && s->sizes == NULL) {
		free(s);
		return NULL;
	}
	return s;
}

static struct stream *by_id(struct tfs_follow *f, uint64_t id)
{
	for (size_t i = 0; i < f->ns; i++)
		if (f->s[i]->id == id)
			return f->s[i];
	return NULL;
}

/* ---- order memory (lock held) ---- */

/* uid's entry in the table of counted memory, made when `make` (NULL:
 * none, or the table is full). */
static struct uid_use *uid_use(struct tfs_follow *f, uid_t uid, bool make)
{
	for (size_t i = 0; i < f->nuids; i++)
		if (f->uids[i].uid == uid)
			return &f->uids[i];
	if (!make || f->nuids == MAX_UIDS)
		return NULL;
	f->uids[f->nuids] = (struct uid_use){ .uid = uid };
	return &f->uids[f->nuids++];
}

static void uncharge_locked(struct tfs_follow *f, uid_t uid, uint64_t bytes)
{
	struct uid_use *u = uid_use(f, uid, false);
	if (u == NULL || bytes == 0)
		return;
	u->bytes -= bytes < u->bytes ? bytes : u->bytes;
	f->bytes -= bytes < f->bytes ? bytes : f->bytes;
	if (u->bytes == 0)
		*u = f->uids[--f->nuids];
}

/* Whether `bytes` more fit beside `used` under `max` (0: no bound). */
static bool within(uint64_t used, uint64_t bytes, uint64_t max)
{
	return max == 0 || (used <= max && bytes <= max - used);
}

static bool drop_quietest(struct tfs_follow *f, bool all, uid_t uid, const char *why);

/* Count `bytes` more of uid's order memory, within both bounds.  With
 * `drop`, while they do not fit but `own` (the bytes of the order being
 * built, these included) would alone, drop the uid's streams quiet
 * longest (never another uid's).  Returns 0 or EFBIG. */
static int charge_locked(struct tfs_follow *f, uid_t uid, uint64_t bytes, uint64_t own, bool drop)
{
	if (bytes == 0)
		return 0; /* (a uid's entry never holds 0 bytes) */
	for (;;) {
		struct uid_use *u = uid_use(f, uid, true);
		if (u == NULL)
			return EFBIG; /* MAX_UIDS uids hold order memory */
		if (within(f->bytes, bytes, f->max_bytes) && within(u->bytes, bytes, f->uid_max)) {
			u->bytes += bytes;
			f->bytes += bytes;
			return 0;
		}
		if (u->bytes == 0)
			f->nuids--; /* made above: nothing counted */
		if (!drop || !within(0, own, f->max_bytes) || !within(0, own, f->uid_max) ||
		    !drop_quietest(f, false, uid, "order memory beyond its bound"))
			return EFBIG;
	}
}

int tfs_follow_charge(struct tfs_follow *f, uid_t uid, uint64_t bytes)
{
	pthread_mutex_lock(&f->lock);
	int rc = charge_locked(f, uid, bytes, bytes, false);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

void tfs_follow_uncharge(struct tfs_follow *f, uid_t uid, uint64_t bytes)
{
	pthread_mutex_lock(&f->lock);
	uncharge_locked(f, uid, bytes);
	pthread_mutex_unlock(&f->lock);
}

static void drop_at(struct tfs_follow *f, size_t i)
{
	struct stream *s = f->s[i];
	memmove(&f->s[i], &f->s[i + 1], (f->ns - i - 1) * sizeof(f->s[0]));
	f->ns--;
	uncharge_locked(f, s->uid, s->o.bytes);
	if (f->rr > i)
		f->rr--;
	if (f->rr >= f->ns)
		f->rr = 0;
	f->version++;
	stream_free(s);
}

/* Drop the stream whose reader has been quiet longest, of uid `uid` (any
 * uid: `all`), saying `why`.  Returns false when there is none. */
static bool drop_quietest(struct tfs_follow *f, bool all, uid_t uid, const char *why)
{
	size_t old = SIZE_MAX;
	for (size_t i = 0; i < f->ns; i++)
		if ((all || f->s[i]->uid == uid) &&
		    (old == SIZE_MAX || f->s[i]->last_ms < f->s[old]->last_ms))
			old = i;
	if (old == SIZE_MAX)
		return false;
	tfs_warn(f->log, "follow: %s: dropping stream %" PRIu64 " (owner %ld)", why, f->s[old]->id,
		 (long)f->s[old]->owner.pid);
	f->dropped++;
	drop_at(f, old);
	return true;
}

/* Enter `s` (its id set here), dropping the stream whose reader has been
 * quiet longest when the table is full. */
static void enter(struct tfs_follow *f, struct stream *s)
{
	if (f->ns == TFS_FOLLOW_MAX_STREAMS)
		(void)drop_quietest(f, true, 0, "too many streams");
	s->id = ++f->next_id;
	f->s[f->ns++] = s;
	f->version++;
}

/* Extend the window to `window` files after the reader, and wake a fetch
 * thread per file added. */
static void refill(struct tfs_follow *f, struct stream *s)
{
	size_t end = s->cur + f->window;
	if (end > s->o.n)
		end = s->o.n;
	for (; s->next < end; s->next++)
		pthread_cond_signal(&f->work);
}

/* The window starts over at `to`: nothing is ahead of the reader. */
static void restart_window(struct stream *s, size_t to)
{
	s->cur = s->take = s->next = to;
	s->ahead = 0;
	s->wgen++;
}

/* The reader moved forward to `to`: what it passed is no longer ahead. */
static void advance(struct tfs_follow *f, struct stream *s, size_t to)
{
	for (size_t i = s->cur; i < to && i < s->take; i++) {
		s->ahead -= s->sizes[i % f->window];
		s->sizes[i % f->window] = 0;
	}
	s->cur = to;
	if (s->take < to)
		s->take = to; /* passed before it was fetched: not wanted now */
}

/* The reader of `s` opened index `idx`: move its window. */
static void reader_at(struct tfs_follow *f, struct stream *s, size_t idx)
{
	f->opened_in_order++;
	s->opened++;
	s->last_ms = f->clock_ms();
	/* Readers in several threads open slightly out of order, and a
	 * stalled thread may open its file long after the others moved on.
	 * So a jump beyond the window realigns forward at once, but going
	 * back needs more than one late open:
	 * - a file well behind the reader opened again in this pass is a new
	 *   epoch in the same order, and the pass starts over (loaders that
	 *   open a file twice reopen it at once, not a window later);
	 * - two first opens in a row far behind the window, close together,
	 *   mean the reader went back to files it skipped. */
	bool again = order_opened(&s->o, idx);
	bool behind = idx + 1 + 2 * (size_t)f->window < s->next;
	if (again && (idx == 0 || idx + 1 + f->window < s->cur)) {
		order_new_pass(&s->o);
		f->realigned++;
		s->pos = idx + 1;
		restart_window(s, idx + 1);
	} else if (idx + 1 > s->next ||
		   (behind && s->back && idx + 1 > s->back && idx + 1 <= s->back + f->window)) {
		f->realigned++;
		restart_window(s, idx + 1); /* what was fetched is behind or far ahead */
	} else if (idx + 1 > s->cur) {
		advance(f, s, idx + 1);
	}
	s->back = behind ? idx + 1 : 0;
	order_mark(&s->o, idx);
	if (idx + 1 > s->pos)
		s->pos = idx + 1;
	refill(f, s);
}

/* The stream owning the nearest process of `a`, or 0. */
static uint64_t nearest_owner(struct tfs_follow *f, const struct ancestry *a)
{
	for (size_t l = 0; l < a->n; l++)
		for (size_t i = 0; i < f->ns; i++)
			if (f->s[i]->kind == STREAM_PROCESS &&
			    same_owner(&f->s[i]->owner, &a->v[l]))
				return f->s[i]->id;
	return 0;
}

static struct credit *credit_slot(struct tfs_follow *f, pid_t tid)
{
	return &f->credits[(size_t)tid % CREDIT_SLOTS];
}

void tfs_follow_opened(struct tfs_follow *f, const char *key, pid_t tid)
{
	uint64_t h = hash(key);
	struct ancestry a = { 0 };
	bool have_ancestry = tid <= 0;
	struct stream *cand[TFS_FOLLOW_MAX_STREAMS];
	size_t idx[TFS_FOLLOW_MAX_STREAMS], cur[TFS_FOLLOW_MAX_STREAMS];
	pthread_mutex_lock(&f->lock);
	for (;;) {
		size_t nc = 0;
		for (size_t i = 0; i < f->ns; i++) {
			uint32_t k = order_find(&f->s[i]->o, key, h);
			if (k != NONE) {
				cand[nc] = f->s[i];
				idx[nc] = order_pick(&f->s[i]->o, k, f->s[i]->cur, f->window);
				cur[nc++] = f->s[i]->cur;
			}
		}
		if (nc == 0)
			break;
		if (nc == 1) {
			reader_at(f, cand[0], idx[0]);
			break;
		}
		/* Several orders hold it: the opener's stream, or its nearest
		 * ancestor's. */
		struct credit *c = credit_slot(f, tid);
		bool known = tid > 0 && c->tid == tid && c->version == f->version;
		if (!known && !have_ancestry) {
			pthread_mutex_unlock(&f->lock);
			ancestry_of(tid, &a);
			have_ancestry = true;
			pthread_mutex_lock(&f->lock);
			continue; /* the streams may have changed meanwhile */
		}
		if (!known && tid > 0)
			*c = (struct credit){ .tid = tid,
					      .version = f->version,
					      .stream = nearest_owner(f, &a) };
		size_t pick = nc;
		for (size_t i = 0; tid > 0 && i < nc; i++)
			if (cand[i]->id == c->stream)
				pick = i;
		if (pick == nc)
			pick = tfs_follow_closest(idx, cur, nc);
		reader_at(f, cand[pick], idx[pick]);
		break;
	}
	pthread_mutex_unlock(&f->lock);
}

/* ---- fetching ---- */

static uint64_t budget_of(struct tfs_follow *f)
{
	if (f->budget || f->ram == NULL)
		return f->budget;
	return tfs_ram_size(f->ram) / 2;
}

static size_t active_count(struct tfs_follow *f, uint64_t now)
{
	size_t active = 0;
	for (size_t i = 0; i < f->ns; i++)
		active += f->s[i]->o.n > 0 &&
			  !tfs_follow_stalled(f->s[i]->last_ms, now, f->stall_ms);
	return active;
}

static int take_locked(struct tfs_follow *f, uint64_t budget, uint64_t now,
		       struct tfs_follow_job *job)
{
	uint64_t share = tfs_follow_share(budget, active_count(f, now));
	bool spent = false;
	for (size_t k = 0; k < f->ns; k++) {
		size_t i = (f->rr + k) % f->ns;
		struct stream *s = f->s[i];
		if (tfs_follow_stalled(s->last_ms, now, f->stall_ms))
			continue;
		if (s->take >= s->next)
			continue;
		if (s->ahead >= share) {
			spent = true;
			continue;
		}
		char *key = strdup(key_name(&s->o, s->o.pos[s->take].key));
		if (key == NULL)
			return ENOMEM;
		*job = (struct tfs_follow_job){
			.stream = s->id, .gen = s->gen, .wgen = s->wgen, .idx = s->take, .key = key
		};
		s->sizes[s->take % f->window] = 0;
		s->take++;
		f->rr = (i + 1) % f->ns;
		return 0;
	}
	return spent ? EAGAIN : ENOENT;
}

int tfs_follow_take(struct tfs_follow *f, struct tfs_follow_job *job)
{
	uint64_t budget = budget_of(f);
	pthread_mutex_lock(&f->lock);
	int rc = take_locked(f, budget, f->clock_ms(), job);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static bool sized_locked(struct tfs_follow *f, const struct tfs_follow_job *job, uint64_t size)
{
	struct stream *s = by_id(f, job->stream);
	if (f->stop || s == NULL || s->gen != job->gen)
		return false;
	if (s->wgen == job->wgen && job->idx >= s->cur && job->idx < s->take) {
		s->sizes[job->idx % f->window] = size;
		s->ahead += size;
	}
	return true;
}

bool tfs_follow_sized(struct tfs_follow *f, const struct tfs_follow_job *job, uint64_t size)
{
	pthread_mutex_lock(&f->lock);
	bool ok = sized_locked(f, job, size);
	pthread_mutex_unlock(&f->lock);
	return ok;
}

static void done_locked(struct tfs_follow *f, struct tfs_follow_job *job, int rc)
{
	struct stream *s = by_id(f, job->stream);
	if (s && s->gen != job->gen)
		s = NULL;
	if (rc == 0) {
		f->fetched++;
		if (s)
			s->fetched++;
	} else if (rc != ECANCELED) {
		f->failed++;
		if (s)
			s->failed++;
	}
	free(job->key);
	job->key = NULL;
}

void tfs_follow_done(struct tfs_follow *f, struct tfs_follow_job *job, int rc)
{
	pthread_mutex_lock(&f->lock);
	done_locked(f, job, rc);
	pthread_mutex_unlock(&f->lock);
}

/* Whether `job` is still wanted: its stream has the same order. */
static bool wanted(struct tfs_follow *f, const struct tfs_follow_job *job)
{
	pthread_mutex_lock(&f->lock);
	struct stream *s = by_id(f, job->stream);
	bool ok = !f->stop && s && s->gen == job->gen;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

/* Fetch the file of `job` into RAM.  Returns 0, ECANCELED (stale) or the
 * error. */
static int fetch(struct tfs_follow *f, const struct tfs_follow_job *job)
{
	char dir[PATH_MAX];
	const char *name;
	if (tfs_path_split(job->key, dir, sizeof(dir), &name) != 0)
		return ENAMETOOLONG;
	struct tfs_attr a;
	int rc = tfs_meta_lookup(f->meta, dir, name, &a, NULL);
	if (rc)
		return rc;
	bool file = a.type == TFS_FT_FILE;
	if (!tfs_follow_sized(f, job, file ? a.size : 0))
		return ECANCELED;
	if (!file || a.size == 0)
		return 0;
	struct tfs_obj obj;
	tfs_obj_init(&obj, job->key, a.etag, a.size);
	uint64_t nb = tfs_obj_blocks(&obj, f->ram->block_size);
	for (uint64_t i = 0; i < nb;) {
		if (!wanted(f, job))
			return ECANCELED;
		unsigned want = nb - i < TFS_MAX_RUN ? (unsigned)(nb - i) : TFS_MAX_RUN, got = 0;
		rc = tfs_ram_fill_run(f->ram, &obj, i, want, TFS_RAM_ONCE | TFS_RAM_LINGER, &got);
		if (rc == 0)
			i += got;
		else if (rc == EAGAIN && tfs_ram_has(f->ram, &obj, i))
			i++;
		else if (rc == EAGAIN)
			sleep_ms(2); /* no free budget: the reader comes first */
		else
			return rc;
	}
	return 0;
}

static void wait_ms(struct tfs_follow *f, long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&f->work, &f->lock, &ts);
}

static void *worker(void *arg)
{
	struct tfs_worker *self = arg;
	struct tfs_follow *f = self->ctx;
	pthread_mutex_lock(&f->lock);
	while (!f->stop && !tfs_workers_retire(self)) {
		/* The budget comes from the RAM tier's lock: not under ours. */
		pthread_mutex_unlock(&f->lock);
		uint64_t budget = budget_of(f);
		pthread_mutex_lock(&f->lock);
		if (f->stop)
			break;
		struct tfs_follow_job job;
		int rc = take_locked(f, budget, f->clock_ms(), &job);
		if (rc == ENOENT) {
			pthread_cond_wait(&f->work, &f->lock);
			continue;
		}
		if (rc) {
			wait_ms(f, RETRY_MS); /* shares spent, or ENOMEM */
			continue;
		}
		pthread_mutex_unlock(&f->lock);
		rc = fetch(f, &job);
		pthread_mutex_lock(&f->lock);
		done_locked(f, &job, rc);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* ---- setting orders ---- */

/* Drop the streams whose owner process is gone. */
static void reap(struct tfs_follow *f)
{
	struct {
		uint64_t id;
		struct tfs_follow_owner owner;
	} v[TFS_FOLLOW_MAX_STREAMS];
	size_t n = 0;
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->ns; i++)
		if (f->s[i]->kind == STREAM_PROCESS) {
			v[n].id = f->s[i]->id;
			v[n++].owner = f->s[i]->owner;
		}
	pthread_mutex_unlock(&f->lock);
	for (size_t k = 0; k < n; k++) {
		if (owner_alive(&v[k].owner))
			continue;
		pthread_mutex_lock(&f->lock);
		for (size_t i = 0; i < f->ns; i++)
			if (f->s[i]->id == v[k].id) {
				tfs_info(f->log,
					 "follow: process %ld is gone: stream %" PRIu64 " dropped",
					 (long)v[k].owner.pid, v[k].id);
				drop_at(f, i);
				break;
			}
		pthread_mutex_unlock(&f->lock);
	}
}

/* Give `s` the order `o` (taken, counted to `uid`), from the start. */
static void install(struct tfs_follow *f, struct stream *s, uid_t uid, struct order *o)
{
	uncharge_locked(f, s->uid, s->o.bytes);
	order_free(&s->o);
	s->o = *o;
	s->uid = uid;
	memset(o, 0, sizeof(*o));
	s->gen++;
	f->version++; /* its owner may be another process of the same pid */
	s->pos = s->back = 0;
	restart_window(s, 0);
	s->last_ms = f->clock_ms();
	refill(f, s); /* the reader's first files, before it opens any */
}

static bool owns(const struct stream *s, const struct tfs_follow_owner *owner)
{
	if (owner->pid <= 0)
		return s->kind == STREAM_UNKNOWN;
	return s->kind == STREAM_PROCESS && s->owner.pid == owner->pid;
}

/* ---- building orders (no lock held) ---- */

/* The most entries of one order (as the manifests of warm-ups). */
#define MAX_ENTRIES (50u * 1000u * 1000u)

/* An order being built for `uid`, its memory counted as it grows. */
struct build {
	struct tfs_follow *f;
	uid_t uid;
	struct order o;
	size_t entries, errors; /* lines with an entry; those rejected */
	uint64_t error_line;    /* the first rejected line */
	char error[128];        /* and why */
};

static int build_charge(struct build *b, uint64_t bytes)
{
	pthread_mutex_lock(&b->f->lock);
	int rc = charge_locked(b->f, b->uid, bytes, b->o.bytes + bytes, true);
	pthread_mutex_unlock(&b->f->lock);
	if (rc == 0)
		b->o.bytes += bytes;
	return rc;
}

static void build_uncharge(struct build *b, uint64_t bytes)
{
	tfs_follow_uncharge(b->f, b->uid, bytes);
	b->o.bytes -= bytes;
}

/* Free what `b` built and give its memory back. */
static void build_free(struct build *b)
{
	build_uncharge(b, b->o.bytes);
	order_free(&b->o);
}

/* Resize the array *p of `cap` items of `elem` bytes to `ncap` items,
 * counted.  Returns 0, EFBIG (beyond the bounds) or ENOMEM (unchanged). */
static int build_resize(struct build *b, void **p, size_t *cap, size_t ncap, size_t elem)
{
	if (ncap == *cap)
		return 0;
	if (ncap == 0 || ncap > SIZE_MAX / elem)
		return EFBIG;
	int rc = ncap > *cap ? build_charge(b, (uint64_t)(ncap - *cap) * elem) : 0;
	if (rc)
		return rc;
	void *np = realloc(*p, ncap * elem);
	if (np == NULL) {
		if (ncap > *cap)
			build_uncharge(b, (uint64_t)(ncap - *cap) * elem);
		return ncap > *cap ? ENOMEM : 0;
	}
	if (ncap < *cap)
		build_uncharge(b, (uint64_t)(*cap - ncap) * elem);
	*p = np;
	*cap = ncap;
	return 0;
}

/* Make room for `need` items (doubling). */
static int build_grow(struct build *b, void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 16;
	while (nc < need)
		nc = nc > SIZE_MAX / 2 ? need : 2 * nc;
	return build_resize(b, p, cap, nc, elem);
}

/* Index the keys in a table of `nslots` slots (a power of two). */
static int build_rehash(struct build *b, size_t nslots)
{
	struct order *o = &b->o;
	int rc = build_charge(b, (uint64_t)nslots * sizeof(*o->slots));
	if (rc)
		return rc;
	uint32_t *ns = calloc(nslots, sizeof(*ns));
	if (ns == NULL) {
		build_uncharge(b, (uint64_t)nslots * sizeof(*o->slots));
		return ENOMEM;
	}
	uint64_t old = (uint64_t)o->nslots * sizeof(*o->slots);
	free(o->slots);
	o->slots = ns;
	o->nslots = nslots;
	for (uint32_t k = 0; k < o->nk; k++)
		o->slots[order_slot(o, key_name(o, k), hash(key_name(o, k)))] = k + 1;
	build_uncharge(b, old);
	return 0;
}

/* Append `key` at the next position: a new key is stored and indexed, a
 * known one gets this position at the end of its chain.  Linear in the
 * key's length, whatever the repeats.  Returns 0, EFBIG or ENOMEM. */
static int build_add(struct build *b, const char *key)
{
	struct order *o = &b->o;
	if (o->n >= NONE - 1)
		return EFBIG;
	void *p = o->pos;
	int rc = build_grow(b, &p, &o->ncap, o->n + 1, sizeof(*o->pos));
	o->pos = p;
	if (rc)
		return rc;
	uint64_t h = hash(key);
	uint32_t k = order_find(o, key, h);
	if (k == NONE) {
		size_t len = strlen(key) + 1;
		if (o->pool_len + len > NONE)
			return EFBIG;
		if ((o->nk + 1) * 4 > o->nslots * 3 &&
		    (rc = build_rehash(b, o->nslots ? 2 * o->nslots : 16)) != 0)
			return rc;
		p = o->keys;
		rc = build_grow(b, &p, &o->kcap, o->nk + 1, sizeof(*o->keys));
		o->keys = p;
		if (rc)
			return rc;
		p = o->pool;
		rc = build_grow(b, &p, &o->pool_cap, o->pool_len + len, 1);
		o->pool = p;
		if (rc)
			return rc;
		k = (uint32_t)o->nk++;
		o->keys[k] = (struct okey){ .off = (uint32_t)o->pool_len,
					    .head = (uint32_t)o->n,
					    .tail = (uint32_t)o->n,
					    .cursor = (uint32_t)o->n + 1 };
		memcpy(o->pool + o->pool_len, key, len);
		o->pool_len += len;
		o->slots[order_slot(o, key, h)] = k + 1;
	} else {
		o->pos[o->keys[k].tail].next = (uint32_t)o->n;
		o->keys[k].tail = (uint32_t)o->n;
	}
	o->pos[o->n++] = (struct opos){ .key = k, .next = NONE };
	return 0;
}

/* One manifest entry (tfs_manifest_fn). */
static int build_entry(void *ctx, uint64_t line, const char *key, const char *error)
{
	struct build *b = ctx;
	if (++b->entries > MAX_ENTRIES)
		return EFBIG;
	if (key)
		return build_add(b, key);
	if (b->errors++ == 0) {
		b->error_line = line;
		snprintf(b->error, sizeof(b->error), "%s", error);
	}
	return 0;
}

/* The arrays to their sizes: what stays counted is what the order keeps. */
static void build_trim(struct build *b)
{
	struct order *o = &b->o;
	if (o->n == 0) {
		build_free(b);
		return;
	}
	void *p = o->pos;
	(void)build_resize(b, &p, &o->ncap, o->n, sizeof(*o->pos));
	o->pos = p;
	p = o->keys;
	(void)build_resize(b, &p, &o->kcap, o->nk, sizeof(*o->keys));
	o->keys = p;
	p = o->pool;
	(void)build_resize(b, &p, &o->pool_cap, o->pool_len, 1);
	o->pool = p;
}

/* Log why the order of `owner` was refused. */
static void build_refused(struct build *b, const struct tfs_follow_owner *owner, int rc)
{
	struct tfs_follow *f = b->f;
	if (rc == EFBIG)
		tfs_warn(f->log,
			 "follow: the order of process %ld (uid %lu) is beyond the bounds of order "
			 "memory (prefetch.order_max %" PRIu64 ", %" PRIu64 " per uid; "
			 "%" PRIu64 " bytes built, %zu entries); EFBIG",
			 (long)owner->pid, (unsigned long)b->uid, f->max_bytes, f->uid_max,
			 b->o.bytes, b->entries);
	else
		tfs_warn(f->log, "follow: the order of process %ld: %s", (long)owner->pid,
			 strerror(rc));
}

/* Set the order of `owner`'s stream (a new stream when none), or remove
 * the stream when the order is empty, from what `b` built (taken). */
static void set_built(struct tfs_follow *f, const struct tfs_follow_owner *owner, struct build *b,
		      struct stream *fresh)
{
	size_t n = b->o.n;
	pthread_mutex_lock(&f->lock);
	f->skipped_errors += b->errors;
	size_t i = 0;
	while (i < f->ns && !owns(f->s[i], owner))
		i++;
	if (n == 0) {
		if (i < f->ns)
			drop_at(f, i);
	} else {
		struct stream *s = i < f->ns ? f->s[i] : fresh;
		if (s == fresh) {
			s->kind = owner->pid > 0 ? STREAM_PROCESS : STREAM_UNKNOWN;
			enter(f, s);
			fresh = NULL;
		}
		s->owner = *owner;
		install(f, s, b->uid, &b->o);
	}
	pthread_mutex_unlock(&f->lock);
	stream_free(fresh);
	if (n == 0)
		tfs_info(f->log, "follow: process %ld has no order now", (long)owner->pid);
	else
		tfs_info(f->log,
			 "follow: order of %zu files set by process %ld (%zu bad lines skipped)", n,
			 (long)owner->pid, b->errors);
}

/* Build from `m` (or, m NULL, from the manifest text of `r`) and set the
 * order of `owner`.  Returns 0, EINVAL (text with no valid entry),
 * EFBIG or ENOMEM; on failure the old order stays. */
static int set_order(struct tfs_follow *f, const struct tfs_follow_owner *owner, uid_t uid,
		     const struct tfs_manifest *m, const struct tfs_follow_request *r)
{
	reap(f);
	struct build b = { .f = f, .uid = uid };
	int rc = 0;
	if (m) {
		b.errors = m->errors;
		for (size_t i = 0; rc == 0 && i < m->n; i++)
			if (m->v[i].key)
				rc = build_add(&b, m->v[i].key);
	} else {
		/* A position a line, at most: reserved at once when it fits
		 * (else grown as needed), so the positions are not copied. */
		size_t lines = 1;
		for (const char *p = r->text, *e = r->text + r->len;
		     (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
			lines++;
		void *p = NULL;
		if (lines <= MAX_ENTRIES &&
		    build_grow(&b, &p, &b.o.ncap, lines, sizeof(*b.o.pos)) == 0)
			b.o.pos = p;
		rc = tfs_manifest_scan(r->text, r->len, r->scope, build_entry, &b);
		if (rc == 0 && b.entries > 0 && b.entries == b.errors) {
			tfs_warn(f->log, "%s: no valid entry (line %llu: %s); order unchanged",
				 TFS_FOLLOW_FILE, (unsigned long long)b.error_line, b.error);
			rc = EINVAL;
		}
	}
	struct stream *fresh = NULL;
	if (rc == 0 && b.o.n && (fresh = stream_alloc(f->window)) == NULL)
		rc = ENOMEM;
	if (rc) {
		if (rc != EINVAL)
			build_refused(&b, owner, rc);
		build_free(&b);
		return rc;
	}
	build_trim(&b);
	set_built(f, owner, &b, fresh);
	return 0;
}

int tfs_follow_set(struct tfs_follow *f, const struct tfs_follow_owner *owner, uid_t uid,
		   const struct tfs_manifest *m)
{
	return set_order(f, owner, uid, m, NULL);
}

int tfs_follow_add(struct tfs_follow *f, const struct tfs_manifest *m, uid_t uid, uint64_t *id)
{
	struct build b = { .f = f, .uid = uid };
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < m->n; i++)
		if (m->v[i].key)
			rc = build_add(&b, m->v[i].key);
	struct stream *s = rc == 0 ? stream_alloc(f->window) : NULL;
	if (rc == 0 && s == NULL)
		rc = ENOMEM;
	if (rc) {
		struct tfs_follow_owner none = { 0 };
		build_refused(&b, &none, rc);
		build_free(&b);
		return rc;
	}
	build_trim(&b);
	s->kind = STREAM_COMMAND;
	size_t n = b.o.n;
	pthread_mutex_lock(&f->lock);
	f->skipped_errors += m->errors;
	enter(f, s);
	install(f, s, uid, &b.o);
	*id = s->id;
	pthread_mutex_unlock(&f->lock);
	tfs_info(f->log, "follow: order of %zu files followed (%zu bad lines skipped)", n,
		 m->errors);
	return 0;
}

/* ---- the order builder thread ---- */

static void *builder_main(void *arg)
{
	struct tfs_follow *f = arg;
	(void)pthread_setname_np(pthread_self(), BUILDER_NAME);
	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (f->bq == NULL && !f->builder_stop)
			pthread_cond_wait(&f->built, &f->lock);
		struct tfs_follow_request *r = f->bq;
		if (r == NULL)
			break; /* stopping, every request answered */
		f->bq = r->next;
		if (f->bq == NULL)
			f->bq_tail = &f->bq;
		pthread_mutex_unlock(&f->lock);
		int rc = set_order(f, &r->owner, r->uid, NULL, r);
		pthread_mutex_lock(&f->lock);
		f->queued--;
		if (rc)
			f->orders_refused++;
		else
			f->orders_built++;
		pthread_mutex_unlock(&f->lock);
		r->done(r, rc); /* r may be gone after this */
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int tfs_follow_submit(struct tfs_follow *f, struct tfs_follow_request *r)
{
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (!f->builder_started || f->builder_stop)
		rc = ESHUTDOWN;
	if (rc == 0) {
		r->next = NULL;
		*f->bq_tail = r;
		f->bq_tail = &r->next;
		f->queued++;
		pthread_cond_signal(&f->built);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

void tfs_follow_remove(struct tfs_follow *f, uint64_t id)
{
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->ns; i++)
		if (f->s[i]->id == id) {
			drop_at(f, i);
			break;
		}
	pthread_mutex_unlock(&f->lock);
}

void tfs_follow_position(struct tfs_follow *f, uint64_t id, uint64_t *pos, uint64_t *len,
			 uint64_t *fetched)
{
	pthread_mutex_lock(&f->lock);
	struct stream *s = by_id(f, id);
	*pos = s ? s->pos : 0;
	*len = s ? s->o.n : 0;
	*fetched = s ? s->fetched : 0;
	pthread_mutex_unlock(&f->lock);
}

/* ---- stats ---- */

static struct json_object *stream_json(struct tfs_follow *f, const struct stream *s, uint64_t now)
{
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return NULL;
	json_object_object_add(o, "id", json_object_new_uint64(s->id));
	json_object_object_add(
		o, "owner", s->kind == STREAM_PROCESS ? json_object_new_int64(s->owner.pid) : NULL);
	json_object_object_add(o, "uid", json_object_new_uint64(s->uid));
	json_object_object_add(o, "bytes", json_object_new_uint64(s->o.bytes));
	json_object_object_add(o, "files", json_object_new_uint64(s->o.n));
	json_object_object_add(o, "position", json_object_new_uint64(s->pos));
	json_object_object_add(o, "files_ahead", json_object_new_uint64(s->take - s->cur));
	json_object_object_add(o, "bytes_ahead", json_object_new_uint64(s->ahead));
	bool idle = tfs_follow_stalled(s->last_ms, now, f->stall_ms);
	json_object_object_add(o, "state", json_object_new_string(idle ? "idle" : "active"));
	json_object_object_add(o, "prefetched_files", json_object_new_uint64(s->fetched));
	json_object_object_add(o, "failed_files", json_object_new_uint64(s->failed));
	json_object_object_add(o, "opened_in_order", json_object_new_uint64(s->opened));
	return o;
}

struct follow_snap {
	uint64_t order_files, position, window, workers, prefetched_files, failed_files,
		opened_in_order, realigned, bad_lines, active_streams, share_bytes, dropped_streams,
		order_bytes, order_max, order_max_uid;
	struct json_object *uid_bytes;
	uint64_t orders_queued, orders_built, orders_refused;
	struct json_object *streams;
};

#define ROW(f, ...) TFS_STAT(struct follow_snap, f, __VA_ARGS__)
static const struct tfs_statdef follow_rows[] = {
	ROW(order_files, TFS_GAUGE, "tierfs_follow_order_files",
	    "Files in the orders being followed (all streams)."),
	ROW(position, TFS_GAUGE, "tierfs_follow_position",
	    "Files of the orders their readers have opened."),
	ROW(window, TFS_GAUGE, "tierfs_follow_window",
	    "Files kept in flight ahead of each reader, at most."),
	ROW(workers, TFS_GAUGE, "tierfs_follow_workers", "Threads fetching files of the order."),
	ROW(prefetched_files, TFS_COUNTER, "tierfs_follow_prefetched_files_total",
	    "Files of the order prefetched."),
	ROW(failed_files, TFS_COUNTER, "tierfs_follow_failed_files_total",
	    "Files of the order that failed to prefetch."),
	ROW(opened_in_order, TFS_COUNTER, "tierfs_follow_opened_in_order_total",
	    "Opens of files in the order."),
	ROW(realigned, TFS_COUNTER, "tierfs_follow_realigned_total",
	    "Times the window moved because the reader jumped."),
	ROW(bad_lines, TFS_JSON_ONLY, NULL, "a diagnostic: order lines skipped"),
	ROW(active_streams, TFS_GAUGE, "tierfs_follow_active_streams",
	    "Orders followed whose reader opened a file within prefetch.stall."),
	ROW(share_bytes, TFS_JSON_ONLY, NULL,
	    "a diagnostic: each active stream's share of the budget"),
	ROW(dropped_streams, TFS_COUNTER, "tierfs_follow_dropped_streams_total",
	    "Orders dropped for a new one beyond the most streams or the order memory."),
	ROW(order_bytes, TFS_GAUGE, "tierfs_follow_order_bytes",
	    "Order memory counted: texts of open control-file handles and orders built."),
	ROW(order_max, TFS_JSON_ONLY, NULL, "a bound from the configuration"),
	ROW(order_max_uid, TFS_JSON_ONLY, NULL, "a bound from the configuration"),
	ROW(uid_bytes, TFS_JSON_ONLY, NULL, "order memory per uid: a label per uid is unbounded"),
	ROW(orders_queued, TFS_GAUGE, "tierfs_follow_orders_queued",
	    "Orders handed to the order builder by a close, not yet set or refused."),
	ROW(orders_built, TFS_JSON_ONLY, NULL, "a diagnostic of the order builder"),
	ROW(orders_refused, TFS_COUNTER, "tierfs_follow_orders_refused_total",
	    "Orders the builder refused (no valid line, beyond the memory bounds)."),
	ROW(streams, TFS_JSON_ONLY, NULL, "per stream: a label per stream is unbounded"),
};
#undef ROW

const struct tfs_stattab tfs_follow_stattab = TFS_STATTAB("follow", follow_rows);

void tfs_follow_stats(struct tfs_follow *f, struct json_object *out)
{
	struct follow_snap s = { .streams = json_object_new_array() };
	if (s.streams == NULL)
		return;
	uint64_t budget = budget_of(f), now = f->clock_ms();
	pthread_mutex_lock(&f->lock);
	for (size_t i = 0; i < f->ns; i++) {
		s.order_files += f->s[i]->o.n;
		s.position += f->s[i]->pos;
		struct json_object *so = stream_json(f, f->s[i], now);
		if (so)
			json_object_array_add(s.streams, so);
	}
	s.active_streams = active_count(f, now);
	s.window = f->window;
	s.workers = tfs_workers_count(&f->pool);
	s.prefetched_files = f->fetched;
	s.failed_files = f->failed;
	s.opened_in_order = f->opened_in_order;
	s.realigned = f->realigned;
	s.bad_lines = f->skipped_errors;
	s.share_bytes = tfs_follow_share(budget, s.active_streams);
	s.dropped_streams = f->dropped;
	s.order_bytes = f->bytes;
	s.order_max = f->max_bytes;
	s.order_max_uid = f->uid_max;
	s.uid_bytes = json_object_new_object();
	for (size_t i = 0; s.uid_bytes && i < f->nuids; i++) {
		char name[32];
		snprintf(name, sizeof(name), "%lu", (unsigned long)f->uids[i].uid);
		json_object_object_add(s.uid_bytes, name, json_object_new_uint64(f->uids[i].bytes));
	}
	s.orders_queued = f->queued;
	s.orders_built = f->orders_built;
	s.orders_refused = f->orders_refused;
	pthread_mutex_unlock(&f->lock);
	(void)tfs_stat_add_section(out, &tfs_follow_stattab, &s);
}

/* ---- life ---- */

int tfs_follow_create(struct tfs_layer *ram, struct tfs_meta *meta,
		      const struct tfs_follow_config *cfg, const struct tfs_log *log,
		      struct tfs_follow **out)
{
	struct tfs_follow *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return ENOMEM;
	f->ram = ram;
	f->meta = meta;
	f->log = log;
	f->window = cfg->window ? cfg->window : 1;
	f->stall_ms = cfg->stall_ms;
	f->budget = cfg->budget;
	f->max_bytes = cfg->max_bytes;
	f->uid_max = cfg->uid_max;
	f->bq_tail = &f->bq;
	f->clock_ms = cfg->clock_ms ? cfg->clock_ms : monotonic_ms;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->work, &ca);
	pthread_cond_init(&f->built, NULL);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&f->builder, NULL, builder_main, f) != 0) {
		tfs_follow_destroy(f);
		return EAGAIN;
	}
	f->builder_started = true;
	if (tfs_workers_init(&f->pool, TFS_FOLLOW_MAX_WORKERS, worker, f)) {
		tfs_follow_destroy(f);
		return ENOMEM;
	}
	int rc = tfs_workers_set(&f->pool, &f->lock, &f->work, cfg->workers, NULL, NULL);
	if (rc) {
		tfs_follow_destroy(f);
		return rc;
	}
	*out = f;
	return 0;
}

int tfs_follow_set_workers(struct tfs_follow *f, unsigned workers)
{
	int rc = tfs_workers_set(&f->pool, &f->lock, &f->work, workers, NULL, NULL);
	if (rc)
		tfs_err(f->log, "follow: cannot start workers: %s", strerror(rc));
	return rc;
}

void tfs_follow_destroy(struct tfs_follow *f)
{
	if (f == NULL)
		return;
	pthread_mutex_lock(&f->lock);
	f->builder_stop = true; /* after the requests queued: each is answered */
	pthread_cond_signal(&f->built);
	pthread_mutex_unlock(&f->lock);
	if (f->builder_started)
		pthread_join(f->builder, NULL);
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	tfs_workers_stop(&f->pool);
	for (size_t i = 0; i < f->ns; i++)
		stream_free(f->s[i]);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->work);
	pthread_cond_destroy(&f->built);
	free(f);
}

void tfs_follow_set_scope(struct tfs_follow *f, const struct tfs_manifest_scope *scope)
{
	f->scope = scope;
}

const struct tfs_manifest_scope *tfs_follow_scope(const struct tfs_follow *f)
{
	return f->scope;
}
