/* follow.c - sliding windows of prefetches ahead of readers that follow
 * known orders, one window per stream, under one budget. */
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

#include "ctl.h"
#include "hash.h"
#include "path.h"
#include "ram.h"
#include "workers.h"

/* A fetch thread with nothing to take because of the shares looks again
 * this often (a stream going idle grows the others' shares). */
#define RETRY_MS 100
/* Cached answers "which stream owns this thread's process or its nearest
 * ancestor". */
#define CREDIT_SLOTS 256

/* An order: keys in reading order, and an index of them. */
struct order {
	char **keys;
	size_t n;
	uint32_t *slots; /* open addressing: index + 1, 0 empty */
	size_t nslots;   /* power of two, >= 2n */
	uint64_t *seen;  /* bit per index: opened in this pass */
	uint64_t bytes;  /* of the keys, with their NULs */
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
	const struct tfs_manifest_scope *scope; /* for the ctl command */
	unsigned window;
	uint64_t stall_ms;
	uint64_t (*clock_ms)(void);
	uint64_t budget;      /* 0: half the RAM tier's size */
	uint64_t max_bytes;   /* of all orders' keys; 0: no bound */
	uint64_t bytes;       /* of all orders' keys */
	pthread_mutex_t lock; /* everything below */
	pthread_cond_t work;  /* CLOCK_MONOTONIC */
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
	for (size_t i = 0; i < o->n; i++)
		free(o->keys[i]);
	free(o->keys);
	free(o->slots);
	free(o->seen);
	memset(o, 0, sizeof(*o));
}

/* The valid entries of `m`, indexed.  Returns 0, EFBIG or ENOMEM. */
static int order_build(const struct tfs_manifest *m, struct order *o)
{
	memset(o, 0, sizeof(*o));
	size_t n = 0;
	for (size_t i = 0; i < m->n; i++)
		n += m->v[i].key != NULL;
	if (n > UINT32_MAX - 1)
		return EFBIG;
	o->nslots = 16;
	while (o->nslots < 2 * n)
		o->nslots *= 2;
	o->keys = calloc(n ? n : 1, sizeof(*o->keys));
	o->slots = calloc(o->nslots, sizeof(*o->slots));
	o->seen = calloc((n + 63) / 64 + 1, sizeof(*o->seen));
	if (o->keys == NULL || o->slots == NULL || o->seen == NULL) {
		order_free(o);
		return ENOMEM;
	}
	for (size_t i = 0; i < m->n; i++) {
		if (m->v[i].key == NULL)
			continue;
		char *k = strdup(m->v[i].key);
		if (k == NULL) {
			order_free(o);
			return ENOMEM;
		}
		o->keys[o->n] = k;
		o->bytes += strlen(k) + 1;
		size_t j = hash(k) & (o->nslots - 1);
		while (o->slots[j])
			j = (j + 1) & (o->nslots - 1);
		o->slots[j] = (uint32_t)(o->n + 1);
		o->n++;
	}
	return 0;
}

/* Index of `key` (hash h) in the order, or SIZE_MAX. */
static size_t order_find(const struct order *o, const char *key, uint64_t h)
{
	if (o->n == 0)
		return SIZE_MAX;
	for (size_t i = h & (o->nslots - 1);; i = (i + 1) & (o->nslots - 1)) {
		uint32_t s = o->slots[i];
		if (s == 0)
			return SIZE_MAX;
		if (strcmp(o->keys[s - 1], key) == 0)
			return s - 1;
	}
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

static void drop_at(struct tfs_follow *f, size_t i)
{
	struct stream *s = f->s[i];
	memmove(&f->s[i], &f->s[i + 1], (f->ns - i - 1) * sizeof(f->s[0]));
	f->ns--;
	f->bytes -= s->o.bytes;
	if (f->rr > i)
		f->rr--;
	if (f->rr >= f->ns)
		f->rr = 0;
	f->version++;
	stream_free(s);
}

/* Drop the stream other than `keep` whose reader has been quiet longest,
 * saying `why`.  Returns false when there is none. */
static bool drop_quietest(struct tfs_follow *f, const struct stream *keep, const char *why)
{
	size_t old = SIZE_MAX;
	for (size_t i = 0; i < f->ns; i++)
		if (f->s[i] != keep && (old == SIZE_MAX || f->s[i]->last_ms < f->s[old]->last_ms))
			old = i;
	if (old == SIZE_MAX)
		return false;
	tfs_warn(f->log, "follow: %s: dropping stream %" PRIu64 " (owner %ld)", why, f->s[old]->id,
		 (long)f->s[old]->owner.pid);
	f->dropped++;
	drop_at(f, old);
	return true;
}

/* Make room for order `o` replacing that of `s` (NULL: a new stream) in
 * the bound of all orders' bytes.  Returns 0 or EFBIG. */
static int make_room(struct tfs_follow *f, const struct stream *s, const struct order *o)
{
	if (f->max_bytes == 0)
		return 0;
	if (o->bytes > f->max_bytes)
		return EFBIG;
	while (f->bytes - (s ? s->o.bytes : 0) + o->bytes > f->max_bytes)
		if (!drop_quietest(f, s, "orders beyond their byte bound"))
			return EFBIG;
	return 0;
}

/* Enter `s` (its id set here), dropping the stream whose reader has been
 * quiet longest when the table is full. */
static void enter(struct tfs_follow *f, struct stream *s)
{
	if (f->ns == TFS_FOLLOW_MAX_STREAMS)
		(void)drop_quietest(f, NULL, "too many streams");
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
	bool again = (s->o.seen[idx / 64] >> (idx % 64)) & 1;
	bool behind = idx + 1 + 2 * (size_t)f->window < s->next;
	if (again && (idx == 0 || idx + 1 + f->window < s->cur)) {
		memset(s->o.seen, 0, (s->o.n + 63) / 64 * sizeof(*s->o.seen));
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
	s->o.seen[idx / 64] |= 1ull << (idx % 64);
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
			size_t k = order_find(&f->s[i]->o, key, h);
			if (k != SIZE_MAX) {
				cand[nc] = f->s[i];
				idx[nc] = k;
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
		char *key = strdup(s->o.keys[s->take]);
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

/* Give `s` the order `o` (taken), from the start. */
static void install(struct tfs_follow *f, struct stream *s, struct order *o)
{
	f->bytes += o->bytes;
	f->bytes -= s->o.bytes;
	order_free(&s->o);
	s->o = *o;
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

int tfs_follow_set(struct tfs_follow *f, const struct tfs_follow_owner *owner,
		   const struct tfs_manifest *m)
{
	reap(f);
	struct order o;
	int rc = order_build(m, &o);
	if (rc)
		return rc;
	struct stream *fresh = o.n ? stream_alloc(f->window) : NULL;
	if (o.n && fresh == NULL) {
		order_free(&o);
		return ENOMEM;
	}
	size_t n = o.n;
	pthread_mutex_lock(&f->lock);
	f->skipped_errors += m->errors;
	size_t i = 0;
	while (i < f->ns && !owns(f->s[i], owner))
		i++;
	if (o.n == 0) {
		if (i < f->ns)
			drop_at(f, i);
	} else if ((rc = make_room(f, i < f->ns ? f->s[i] : NULL, &o)) != 0) {
		tfs_warn(f->log,
			 "follow: an order of %" PRIu64 " bytes is beyond the bound of all orders "
			 "(%" PRIu64 "); EFBIG",
			 o.bytes, f->max_bytes);
	} else {
		i = 0; /* make_room may have dropped streams */
		while (i < f->ns && !owns(f->s[i], owner))
			i++;
		struct stream *s = i < f->ns ? f->s[i] : fresh;
		if (s == fresh) {
			s->kind = owner->pid > 0 ? STREAM_PROCESS : STREAM_UNKNOWN;
			enter(f, s);
			fresh = NULL;
		}
		s->owner = *owner;
		install(f, s, &o);
	}
	pthread_mutex_unlock(&f->lock);
	stream_free(fresh);
	order_free(&o);
	if (rc == 0 && n == 0)
		tfs_info(f->log, "follow: process %ld has no order now", (long)owner->pid);
	else if (rc == 0)
		tfs_info(f->log,
			 "follow: order of %zu files set by process %ld (%zu bad lines skipped)", n,
			 (long)owner->pid, m->errors);
	return rc;
}

int tfs_follow_add(struct tfs_follow *f, const struct tfs_manifest *m, uint64_t *id)
{
	struct order o;
	int rc = order_build(m, &o);
	if (rc)
		return rc;
	struct stream *s = stream_alloc(f->window);
	if (s == NULL) {
		order_free(&o);
		return ENOMEM;
	}
	s->kind = STREAM_COMMAND;
	size_t n = o.n;
	pthread_mutex_lock(&f->lock);
	f->skipped_errors += m->errors;
	rc = make_room(f, NULL, &o);
	if (rc) {
		pthread_mutex_unlock(&f->lock);
		order_free(&o);
		stream_free(s);
		return rc;
	}
	enter(f, s);
	install(f, s, &o);
	*id = s->id;
	pthread_mutex_unlock(&f->lock);
	tfs_info(f->log, "follow: order of %zu files followed (%zu bad lines skipped)", n,
		 m->errors);
	return 0;
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

void tfs_follow_stats(struct tfs_follow *f, struct json_object *out)
{
	struct json_object *o = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	if (o == NULL || arr == NULL) {
		json_object_put(o);
		json_object_put(arr);
		return;
	}
	uint64_t budget = budget_of(f), now = f->clock_ms();
	pthread_mutex_lock(&f->lock);
	uint64_t files = 0, pos = 0;
	for (size_t i = 0; i < f->ns; i++) {
		files += f->s[i]->o.n;
		pos += f->s[i]->pos;
		struct json_object *so = stream_json(f, f->s[i], now);
		if (so)
			json_object_array_add(arr, so);
	}
	size_t active = active_count(f, now);
	json_object_object_add(o, "order_files", json_object_new_uint64(files));
	json_object_object_add(o, "position", json_object_new_uint64(pos));
	json_object_object_add(o, "window", json_object_new_uint64(f->window));
	json_object_object_add(o, "workers", json_object_new_uint64(tfs_workers_count(&f->pool)));
	json_object_object_add(o, "prefetched_files", json_object_new_uint64(f->fetched));
	json_object_object_add(o, "failed_files", json_object_new_uint64(f->failed));
	json_object_object_add(o, "opened_in_order", json_object_new_uint64(f->opened_in_order));
	json_object_object_add(o, "realigned", json_object_new_uint64(f->realigned));
	json_object_object_add(o, "bad_lines", json_object_new_uint64(f->skipped_errors));
	json_object_object_add(o, "active_streams", json_object_new_uint64(active));
	json_object_object_add(o, "share_bytes",
			       json_object_new_uint64(tfs_follow_share(budget, active)));
	json_object_object_add(o, "dropped_streams", json_object_new_uint64(f->dropped));
	pthread_mutex_unlock(&f->lock);
	json_object_object_add(o, "streams", arr);
	json_object_object_add(out, "follow", o);
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
	f->clock_ms = cfg->clock_ms ? cfg->clock_ms : monotonic_ms;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->work, &ca);
	pthread_condattr_destroy(&ca);
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
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->lock);
	tfs_workers_stop(&f->pool);
	for (size_t i = 0; i < f->ns; i++)
		stream_free(f->s[i]);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->work);
	free(f);
}

/* ---- the follow control command ---- */

static struct json_object *bad_lines(const struct tfs_manifest *m)
{
	struct json_object *bad = json_object_new_array();
	for (size_t i = 0; bad && i < m->n && json_object_array_length(bad) < 1000; i++) {
		if (m->v[i].error == NULL)
			continue;
		struct json_object *b = json_object_new_object();
		if (b == NULL)
			break;
		char where[64];
		snprintf(where, sizeof(where), "manifest line %llu",
			 (unsigned long long)m->v[i].line);
		json_object_object_add(b, "path", json_object_new_string(where));
		json_object_object_add(b, "error", json_object_new_string(m->v[i].error));
		json_object_array_add(bad, b);
	}
	return bad;
}

static int follow_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			  struct json_object **resp)
{
	struct tfs_follow *f = vctx;
	struct json_object *v;
	const char *path =
		json_object_object_get_ex(req, "manifest", &v) ? json_object_get_string(v) : NULL;
	if (path == NULL)
		return tfs_ctl_fail(resp, EINVAL, "follow needs a manifest");
	struct tfs_manifest m;
	int rc = tfs_manifest_load(path, f->scope, 50u * 1000u * 1000u, &m);
	if (rc)
		return tfs_ctl_fail(resp, rc, "manifest '%s': %s", path, strerror(rc));
	struct json_object *bad = bad_lines(&m);
	uint64_t id = 0;
	rc = tfs_follow_add(f, &m, &id);
	size_t errors = m.errors;
	tfs_manifest_free(&m);
	if (rc) {
		json_object_put(bad);
		return tfs_ctl_fail(resp, rc, "cannot set the order: %s", strerror(rc));
	}
	uint64_t pos = 0, len = 0, fetched = 0;
	for (;;) {
		tfs_follow_position(f, id, &pos, &len, &fetched);
		if (len == 0 || pos >= len)
			break;
		struct json_object *p = json_object_new_object();
		if (p) {
			json_object_object_add(p, "files_done", json_object_new_uint64(pos));
			json_object_object_add(p, "files_total", json_object_new_uint64(len));
			json_object_object_add(p, "fetched_files", json_object_new_uint64(fetched));
			json_object_object_add(p, "listing_done", json_object_new_boolean(1));
			(void)tfs_ctl_send_progress(conn, p);
			json_object_put(p);
		}
		if (tfs_ctl_conn_cancelled(conn))
			break; /* Ctrl-C: stop following */
		sleep_ms(500);
	}
	tfs_follow_remove(f, id);
	struct json_object *o = json_object_new_object();
	if (o == NULL) {
		json_object_put(bad);
		return ENOMEM;
	}
	json_object_object_add(o, "files_done", json_object_new_uint64(pos));
	json_object_object_add(o, "fetched_files", json_object_new_uint64(fetched));
	json_object_object_add(o, "failed_files", json_object_new_uint64(errors));
	json_object_object_add(o, "failures", bad);
	*resp = o;
	return 0;
}

int tfs_follow_register(struct tfs_ctl *ctl, struct tfs_follow *f,
			const struct tfs_manifest_scope *scope)
{
	f->scope = scope;
	return tfs_ctl_register(ctl, "follow", follow_handler, f);
}
