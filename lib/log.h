/* log.h - a logger handle passed to every layer (no global logger).
 *
 * Each layer receives a `const struct tfs_log *` at construction and logs
 * through it.  The sink is a function pointer, so the daemon can send lines
 * to stderr, a file or syslog, and tests can capture them.
 *
 * Thread safety: tfs_logf() may be called from any thread.  The level is an
 * atomic so that a later reload can change it while threads log.
 *
 * Secrets: callers must never pass credentials, signatures or
 * Authorization headers to the logger.
 */
#ifndef TFS_LOG_H
#define TFS_LOG_H

#include <stdarg.h>
#include <stdatomic.h>

enum tfs_log_level {
	TFS_LOG_ERROR = 0,
	TFS_LOG_WARN = 1,
	TFS_LOG_INFO = 2,
	TFS_LOG_DEBUG = 3,
};

/* A sink receives one complete line, without a trailing newline.  It must be
 * safe to call from several threads at once. */
typedef void (*tfs_log_sink_fn)(void *ctx, enum tfs_log_level level, const char *line);

struct tfs_log {
	tfs_log_sink_fn sink;
	void *ctx;
	_Atomic int level; /* lines above this level are dropped */
};

/* Initialise `log` to write to stderr (with a timestamp and level tag).
 * Cannot fail. */
void tfs_log_init_stderr(struct tfs_log *log, enum tfs_log_level level);

/* Initialise `log` to send lines to syslog (LOG_DAEMON, ident "tierfs").
 * Cannot fail. */
void tfs_log_init_syslog(struct tfs_log *log, enum tfs_log_level level);

/* Initialise `log` to append to `path` (created 0600).  Returns 0 or the
 * errno of open(); on failure `log` is unchanged.  tfs_log_close() closes
 * the file. */
int tfs_log_init_file(struct tfs_log *log, const char *path, enum tfs_log_level level);
void tfs_log_close(struct tfs_log *log);

/* Initialise `log` with a custom sink.  Cannot fail. */
void tfs_log_init(struct tfs_log *log, tfs_log_sink_fn sink, void *ctx, enum tfs_log_level level);

/* Format and emit a line if `level` is enabled.  `log` may be NULL, in which
 * case nothing is written.  Lines longer than 4 KiB are truncated.  Never
 * fails and never changes errno. */
void tfs_logf(const struct tfs_log *log, enum tfs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void tfs_vlogf(const struct tfs_log *log, enum tfs_log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Parse "error", "warn", "info" or "debug".  Returns 0 and sets *out, or
 * EINVAL for anything else. */
int tfs_log_level_parse(const char *s, enum tfs_log_level *out);
const char *tfs_log_level_name(enum tfs_log_level level);

#define tfs_err(log, ...) tfs_logf((log), TFS_LOG_ERROR, __VA_ARGS__)
#define tfs_warn(log, ...) tfs_logf((log), TFS_LOG_WARN, __VA_ARGS__)
#define tfs_info(log, ...) tfs_logf((log), TFS_LOG_INFO, __VA_ARGS__)
#define tfs_debug(log, ...) tfs_logf((log), TFS_LOG_DEBUG, __VA_ARGS__)

#endif
