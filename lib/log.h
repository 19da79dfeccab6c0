/* log.h - a logger handle passed to every layer (no global logger).
 *
 * Each layer receives a `const struct tfs_log *` at construction and logs
 * through it.  The sink is a function pointer, so the daemon can send lines
 * to stderr, a file or syslog, and tests can capture them.
 *
 * Thread safety: tfs_logf() may be called from any thread.  The level is an
 * atomic so that a reload can change it while threads log
 * (tfs_log_set_level()).
 *
 * Rate limiting: with tfs_log_limit(), error and warning lines are limited
 * per format string (each tfs_err()/tfs_warn() call site has its own
 * literal, so in effect per call site): at most `burst` lines of one
 * format per `interval`; the rest are dropped without being formatted and
 * counted, and the next line of that format that is let through ends with
 * " (N similar messages suppressed)".  Info and debug lines are never
 * limited.
 *
 * Secrets: callers must never pass credentials, signatures or
 * Authorization headers to the logger.
 */
#ifndef TFS_LOG_H
#define TFS_LOG_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum tfs_log_level {
	TFS_LOG_ERROR = 0,
	TFS_LOG_WARN = 1,
	TFS_LOG_INFO = 2,
	TFS_LOG_DEBUG = 3,
};

/* A sink receives one complete line, without a trailing newline.  It must be
 * safe to call from several threads at once. */
typedef void (*tfs_log_sink_fn)(void *ctx, enum tfs_log_level level, const char *line);

struct tfs_log_limiter;

struct tfs_log {
	tfs_log_sink_fn sink;
	void *ctx;
	_Atomic int level;               /* lines above this level are dropped */
	struct tfs_log_limiter *limiter; /* NULL: no rate limiting */
};

/* Initialise `log` to write to stderr (with a timestamp and level tag).
 * Cannot fail. */
void tfs_log_init_stderr(struct tfs_log *log, enum tfs_log_level level);

/* Initialise `log` to send lines to syslog (LOG_DAEMON, ident "tierfs").
 * Cannot fail. */
void tfs_log_init_syslog(struct tfs_log *log, enum tfs_log_level level);

/* Initialise `log` to append to `path` (created 0600).  The path is
 * opened with O_NOFOLLOW and must be a regular file with no other hard
 * link.  Returns 0, the errno of open() (ELOOP for a symlink), EINVAL (not
 * a regular file) or EMLINK (more than one link); on failure `log` is
 * unchanged.  tfs_log_close() closes the file. */
int tfs_log_init_file(struct tfs_log *log, const char *path, enum tfs_log_level level);
void tfs_log_close(struct tfs_log *log);

/* Initialise `log` with a custom sink (no rate limiting).  Cannot fail. */
void tfs_log_init(struct tfs_log *log, tfs_log_sink_fn sink, void *ctx, enum tfs_log_level level);

/* Change the level while other threads log.  Cannot fail. */
void tfs_log_set_level(struct tfs_log *log, enum tfs_log_level level);

/* Rate-limit the error and warning lines of `log` (see above): at most
 * `burst` lines of one format per `interval_ms`.  `clock_ms` returns the
 * time in milliseconds (NULL: CLOCK_MONOTONIC; tests pass their own).
 * Call before other threads use `log`.  Returns 0 or ENOMEM (then `log`
 * is not limited). */
int tfs_log_limit(struct tfs_log *log, unsigned burst, uint64_t interval_ms,
		  uint64_t (*clock_ms)(void));

/* Log, for each format whose lines were dropped and whose interval has
 * ended since, "N similar messages suppressed: <format>", so a burst that
 * stopped is still accounted for; the daemon calls it every interval.
 * No-op without a limiter.  Thread safe. */
void tfs_log_flush_suppressed(const struct tfs_log *log);

/* Lines dropped by the limiter since tfs_log_limit().  Thread safe. */
uint64_t tfs_log_suppressed(const struct tfs_log *log);

/* Flush (tfs_log_flush_suppressed(), regardless of the intervals) and
 * free the limiter.  Call once no other thread logs.  No-op without. */
void tfs_log_unlimit(struct tfs_log *log);

/* A token bucket for one kind of message that a caller limits itself
 * (e.g. "SSD tier full" at most once a minute): at most `burst` lines per
 * `interval_ms`.  Thread safe (its own mutex). */
struct tfs_ratelimit {
	pthread_mutex_t mu;
	uint64_t interval_ms, window_start;
	unsigned burst, used;
	uint64_t suppressed;
};

/* Cannot fail.  tfs_ratelimit_destroy() releases the mutex. */
void tfs_ratelimit_init(struct tfs_ratelimit *rl, uint64_t interval_ms, unsigned burst);
void tfs_ratelimit_destroy(struct tfs_ratelimit *rl);

/* May a line be logged at time `now_ms` (any monotonic milliseconds)?
 * When it may, *suppressed gets the number of lines refused since the
 * last allowed one. */
bool tfs_ratelimit_allow(struct tfs_ratelimit *rl, uint64_t now_ms, uint64_t *suppressed);

/* Format and emit a line if `level` is enabled.  `log` may be NULL, in which
 * case nothing is written.  Control bytes in the formatted line (below
 * 0x20, and DEL: a newline or terminal escape in an object key) are
 * written as \xNN.  Lines longer than 4 KiB are truncated.  Never fails
 * and never changes errno. */
void tfs_logf(const struct tfs_log *log, enum tfs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Parse "error", "warn", "info" or "debug".  Returns 0 and sets *out, or
 * EINVAL for anything else. */
int tfs_log_level_parse(const char *s, enum tfs_log_level *out);
const char *tfs_log_level_name(enum tfs_log_level level);

#define tfs_err(log, ...) tfs_logf((log), TFS_LOG_ERROR, __VA_ARGS__)
#define tfs_warn(log, ...) tfs_logf((log), TFS_LOG_WARN, __VA_ARGS__)
#define tfs_info(log, ...) tfs_logf((log), TFS_LOG_INFO, __VA_ARGS__)
#define tfs_debug(log, ...) tfs_logf((log), TFS_LOG_DEBUG, __VA_ARGS__)

#endif
