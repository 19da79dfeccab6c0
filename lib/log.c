/* log.c - logger handle: level filter, formatting and the stderr sink. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

static void stderr_sink(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	struct timespec ts;
	struct tm tm;
	char stamp[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	/* One fprintf call per line: stdio locks the stream, so concurrent
	 * lines do not interleave. */
	fprintf(stderr, "%s.%03ldZ tierfs[%s]: %s\n", stamp, ts.tv_nsec / 1000000L,
		tfs_log_level_name(level), line);
}

void tfs_log_init(struct tfs_log *log, tfs_log_sink_fn sink, void *ctx, enum tfs_log_level level)
{
	log->sink = sink;
	log->ctx = ctx;
	atomic_store(&log->level, (int)level);
}

void tfs_log_init_stderr(struct tfs_log *log, enum tfs_log_level level)
{
	tfs_log_init(log, stderr_sink, NULL, level);
}

void tfs_vlogf(const struct tfs_log *log, enum tfs_log_level level, const char *fmt, va_list ap)
{
	char line[4096];
	int saved = errno;

	if (log == NULL || log->sink == NULL || (int)level > atomic_load(&log->level)) {
		errno = saved;
		return;
	}
	vsnprintf(line, sizeof(line), fmt, ap);
	log->sink(log->ctx, level, line);
	errno = saved;
}

void tfs_logf(const struct tfs_log *log, enum tfs_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tfs_vlogf(log, level, fmt, ap);
	va_end(ap);
}
