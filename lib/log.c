/* log.c - logger handle: level filter, rate limiting, formatting and the
 * stderr, file and syslog sinks. */
#include "config.h"

#include "log.h"
#include "clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = { "error", "warn", "info", "debug" };

const char *tfs_log_level_name(enum tfs_log_level level)
{
	if ((unsigned)level > TFS_LOG_DEBUG)
		return "?";
	return level_names[level];
}

int tfs_log_level_parse(const char *s, enum tfs_log_level *out)
{
	for (int i = 0; i <= TFS_LOG_DEBUG; i++) {
		if (strcasecmp(s, level_names[i]) == 0) {
			*out = (enum tfs_log_level)i;
			return 0;
		}
	}
	return EINVAL;
}

static void stamp_line(FILE *f, enum tfs_log_level level, const char *line)
{
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	/* One fprintf call per line: stdio locks the stream, so concurrent
	 * lines do not interleave. */
	fprintf(f, "%s.%03ldZ tierfs[%s]: %s\n", stamp, ts.tv_nsec / 1000000L,
		tfs_log_level_name(level), line);
}

static void stderr_sink(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	stamp_line(stderr, level, line);
}

static void file_sink(void *ctx, enum tfs_log_level level, const char *line)
{
	stamp_line(ctx, level, line);
}

static void syslog_sink(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	syslog(prio[level <= TFS_LOG_DEBUG ? level : TFS_LOG_DEBUG], "%s", line);
}

void tfs_log_init_syslog(struct tfs_log *log, enum tfs_log_level level)
{
	openlog("tierfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	tfs_log_init(log, syslog_sink, NULL, level);
}

int tfs_log_init_file(struct tfs_log *log, const char *path, enum tfs_log_level level)
{
	/* Never through a symlink, never a FIFO or device (O_NONBLOCK: a
	 * FIFO without a reader would block the open), never a file with
	 * other hard links: someone who can write to the file's directory
	 * must not point the daemon's writes at another file. */
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
		      0600);
	if (fd < 0)
		return errno;
	struct stat st;
	int rc = fstat(fd, &st) != 0    ? errno
		 : !S_ISREG(st.st_mode) ? EINVAL
		 : st.st_nlink > 1      ? EMLINK
					: 0;
	if (rc == 0 && fcntl(fd, F_SETFL, O_APPEND) != 0)
		rc = errno;
	if (rc) {
		close(fd);
		return rc;
	}
	FILE *f = fdopen(fd, "a");
	if (f == NULL) {
		int e = errno;
		close(fd);
		return e;
	}
	setvbuf(f, NULL, _IOLBF, 0);
	tfs_log_init(log, file_sink, f, level);
	return 0;
}

void tfs_log_close(struct tfs_log *log)
{
	if (log->sink == file_sink && log->ctx) {
		fclose(log->ctx);
		log->ctx = NULL;
		log->sink = stderr_sink;
	}
}

void tfs_log_init(struct tfs_log *log, tfs_log_sink_fn sink, void *ctx, enum tfs_log_level level)
{
	log->sink = sink;
	log->ctx = ctx;
	log->limiter = NULL;
	atomic_store(&log->level, (int)level);
}

void tfs_log_set_level(struct tfs_log *log, enum tfs_log_level level)
{
	atomic_store(&log->level, (int)level);
}

void tfs_log_init_stderr(struct tfs_log *log, enum tfs_log_level level)
{
	tfs_log_init(log, stderr_sink, NULL, level);
}

/* ---- rate limiting ---- */

void tfs_ratelimit_init(struct tfs_ratelimit *rl, uint64_t interval_ms, unsigned burst)
{
	pthread_mutex_init(&rl->mu, NULL);
	rl->interval_ms = interval_ms;
	rl->burst = burst;
	rl->window_start = 0;
	rl->used = 0;
	rl->suppressed = 0;
}

void tfs_ratelimit_destroy(struct tfs_ratelimit *rl)
{
	pthread_mutex_destroy(&rl->mu);
}

/* The window logic of both limiters.  Caller holds the lock. */
static bool window_allow(uint64_t *start, unsigned *used, uint64_t *suppressed, uint64_t interval,
			 unsigned burst, uint64_t now, uint64_t *sup_out)
{
	if (*used == 0 || now - *start >= interval) {
		*start = now;
		*used = 0;
	}
	if (*used < burst) {
		(*used)++;
		*sup_out = *suppressed;
		*suppressed = 0;
		return true;
	}
	(*suppressed)++;
	return false;
}

bool tfs_ratelimit_allow(struct tfs_ratelimit *rl, uint64_t now_ms, uint64_t *suppressed)
{
	bool ok;

	pthread_mutex_lock(&rl->mu);
	ok = window_allow(&rl->window_start, &rl->used, &rl->suppressed, rl->interval_ms, rl->burst,
			  now_ms, suppressed);
	pthread_mutex_unlock(&rl->mu);
	return ok;
}

/* Per-format limiter: a small open-addressed table keyed by the format
 * pointer.  When the probe finds neither the format nor a free slot, the
 * slot whose window started longest ago is taken over (its pending count
 * is reported first, so nothing is lost silently). */
#define LIMIT_SLOTS 256u
#define LIMIT_PROBE 8u

struct limit_slot {
	const char *fmt;
	enum tfs_log_level level; /* of the last line of this format */
	uint64_t start;
	unsigned used;
	uint64_t suppressed;
};

struct tfs_log_limiter {
	pthread_mutex_t mu; /* the slots */
	unsigned burst;
	uint64_t interval_ms;
	uint64_t (*clock_ms)(void);
	atomic_uint_fast64_t total;
	struct limit_slot slots[LIMIT_SLOTS];
};

int tfs_log_limit(struct tfs_log *log, unsigned burst, uint64_t interval_ms,
		  uint64_t (*clock_ms)(void))
{
	struct tfs_log_limiter *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return ENOMEM;
	pthread_mutex_init(&l->mu, NULL);
	l->burst = burst ? burst : 1;
	l->interval_ms = interval_ms;
	l->clock_ms = clock_ms ? clock_ms : tfs_mono_ms;
	log->limiter = l;
	return 0;
}

static void emit(const struct tfs_log *log, enum tfs_log_level level, const char *line)
{
	log->sink(log->ctx, level, line);
}

/* "N similar messages suppressed: FMT" for a slot being flushed, at the
 * level of the lines it stands for. */
static void report_pending(const struct tfs_log *log, const struct limit_slot *s)
{
	char line[512];

	snprintf(line, sizeof(line), "%" PRIu64 " similar messages suppressed: %s", s->suppressed,
		 s->fmt);
	emit(log, s->level, line);
}

/* May a line with format `fmt` go out?  *sup gets the count to append. */
static bool limit_allow(const struct tfs_log *log, enum tfs_log_level level, const char *fmt,
			uint64_t *sup)
{
	struct tfs_log_limiter *l = log->limiter;
	uint64_t now = l->clock_ms();
	uintptr_t h = (uintptr_t)fmt;
	struct limit_slot *s = NULL, *oldest = NULL, evicted = { 0 };
	bool ok;

	h ^= h >> 17;
	h *= 0x9E3779B97F4A7C15ull;
	pthread_mutex_lock(&l->mu);
	for (unsigned i = 0; i < LIMIT_PROBE; i++) {
		struct limit_slot *c = &l->slots[(h + i) % LIMIT_SLOTS];

		if (c->fmt == fmt || c->fmt == NULL) {
			s = c;
			break;
		}
		if (oldest == NULL || c->start < oldest->start)
			oldest = c;
	}
	if (s == NULL) {
		s = oldest;
		evicted = *s;
		*s = (struct limit_slot){ 0 };
	}
	s->fmt = fmt;
	s->level = level;
	ok = window_allow(&s->start, &s->used, &s->suppressed, l->interval_ms, l->burst, now, sup);
	pthread_mutex_unlock(&l->mu);
	if (!ok)
		atomic_fetch_add_explicit(&l->total, 1, memory_order_relaxed);
	if (evicted.suppressed)
		report_pending(log, &evicted);
	return ok;
}

static void flush(const struct tfs_log *log, bool all)
{
	struct tfs_log_limiter *l = log ? log->limiter : NULL;
	struct limit_slot pending[LIMIT_SLOTS];
	unsigned n = 0;

	if (l == NULL)
		return;
	uint64_t now = l->clock_ms();
	pthread_mutex_lock(&l->mu);
	for (unsigned i = 0; i < LIMIT_SLOTS; i++) {
		struct limit_slot *s = &l->slots[i];

		if (s->suppressed && (all || now - s->start >= l->interval_ms)) {
			pending[n++] = *s;
			s->suppressed = 0;
		}
	}
	pthread_mutex_unlock(&l->mu);
	for (unsigned i = 0; i < n; i++)
		report_pending(log, &pending[i]);
}

void tfs_log_flush_suppressed(const struct tfs_log *log)
{
	int saved = errno;

	flush(log, false);
	errno = saved;
}

uint64_t tfs_log_suppressed(const struct tfs_log *log)
{
	return log && log->limiter ? atomic_load(&log->limiter->total) : 0;
}

void tfs_log_unlimit(struct tfs_log *log)
{
	struct tfs_log_limiter *l = log->limiter;

	if (l == NULL)
		return;
	flush(log, true);
	log->limiter = NULL;
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* ---- formatting ---- */

/* Copy `in` to `out` (cap bytes, NUL included) with every control byte
 * (below 0x20, and DEL) written as \xNN, so that a string from outside
 * (an object key, a server's error message) cannot start a line of its
 * own, forge one, or send terminal escapes.  Cut where it does not fit. */
static void printable(const char *in, char *out, size_t cap)
{
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (*p >= 0x20 && *p != 0x7f) {
			if (o + 1 >= cap)
				break;
			out[o++] = (char)*p;
		} else {
			if (o + 4 >= cap)
				break;
			snprintf(out + o, cap - o, "\\x%02x", *p);
			o += 4;
		}
	}
	out[o] = '\0';
}

static void vlogf(const struct tfs_log *log, enum tfs_log_level level, const char *fmt, va_list ap)
{
	char line[4096], safe[4096];
	int saved = errno;
	uint64_t sup = 0;

	if (log == NULL || log->sink == NULL || (int)level > atomic_load(&log->level) ||
	    (log->limiter && level <= TFS_LOG_WARN && !limit_allow(log, level, fmt, &sup))) {
		errno = saved;
		return;
	}
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	if (sup && n >= 0) {
		size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;

		snprintf(line + len, sizeof(line) - len,
			 " (%" PRIu64 " similar messages suppressed)", sup);
	}
	printable(line, safe, sizeof(safe));
	emit(log, level, safe);
	errno = saved;
}

void tfs_logf(const struct tfs_log *log, enum tfs_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlogf(log, level, fmt, ap);
	va_end(ap);
}
