/* log.c - logger handle: level filter, formatting and the stderr sink. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <strings.h>
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
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
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
