/* cmd_backend.c - `tierfs backend`: direct access to the bucket, for
 * debugging and scripts (ls, stat, get, put, rm, cp). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "stack.h"
#include "units.h"

#define GET_CHUNK (8u << 20)

static void usage(FILE *f)
{
	fprintf(f, "usage: tierfs backend [-c CONF] [-o SECTION.KEY=VALUE]... [-v] SOURCE OP "
		   "[ARGS]\n"
		   "\n"
		   "  ls [-r] [PREFIX]     list keys (-r: recursively, without the '/' rollup)\n"
		   "  stat KEY...          size, ETag, mtime and user metadata\n"
		   "  get KEY [FILE|-]     download (default: stdout)\n"
		   "  put FILE|- KEY       upload (multipart above backend.multipart_threshold)\n"
		   "  rm KEY...            delete\n"
		   "  cp SRC DST           server-side copy\n");
}

static void fmt_time(int64_t t, char *buf, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;
	gmtime_r(&tt, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static int op_ls(struct tfs_backend *be, int argc, char **argv)
{
	bool recursive = false;
	const char *prefix = "";
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "-r") == 0)
			recursive = true;
		else
			prefix = argv[i];
	}
	struct tfs_list_walk w = { 0 };
	int rc;
	do {
		struct tfs_list_page p = { 0 };
		rc = tfs_backend_list_walk(be, NULL, &w, prefix, recursive ? NULL : "/", 0, &p);
		if (rc)
			break;
		for (size_t i = 0; i < p.n_prefixes; i++)
			printf("%19s %12s %s\n", "", "PRE", p.prefixes[i]);
		for (size_t i = 0; i < p.n_entries; i++) {
			char t[32];
			fmt_time(p.entries[i].mtime, t, sizeof(t));
			printf("%19s %12" PRIu64 " %s\n", t, p.entries[i].size, p.entries[i].key);
		}
		tfs_list_page_clear(&p);
	} while (!w.done);
	tfs_list_walk_clear(&w);
	if (rc)
		fprintf(stderr, "tierfs: ls '%s': %s\n", prefix, strerror(rc));
	return rc;
}

static int op_stat(struct tfs_backend *be, int argc, char **argv)
{
	int worst = 0;
	for (int i = 0; i < argc; i++) {
		struct tfs_obj_meta m = { 0 };
		int rc = tfs_backend_head(be, argv[i], &m);
		if (rc) {
			fprintf(stderr, "tierfs: stat '%s': %s\n", argv[i], strerror(rc));
			worst = rc;
			continue;
		}
		char t[32];
		fmt_time(m.mtime, t, sizeof(t));
		printf("key:   %s\nsize:  %" PRIu64 "\netag:  %s\nmtime: %s UTC\n", argv[i], m.size,
		       m.etag, t);
		for (size_t j = 0; j < m.n_user; j++)
			printf("meta:  %s=%s\n", m.user[j].name, m.user[j].value);
		tfs_obj_meta_clear(&m);
	}
	return worst;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int op_get(struct tfs_backend *be, int argc, char **argv)
{
	if (argc < 1 || argc > 2) {
		usage(stderr);
		return EINVAL;
	}
	const char *key = argv[0];
	const char *dest = argc == 2 ? argv[1] : "-";
	int fd = strcmp(dest, "-") == 0
			 ? STDOUT_FILENO
			 : open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		fprintf(stderr, "tierfs: get: cannot create '%s': %s\n", dest, strerror(e));
		return e;
	}
	char *buf = malloc(GET_CHUNK);
	char etag[TFS_ETAG_MAX] = "";
	uint64_t off = 0;
	int rc = buf ? 0 : ENOMEM;
	while (rc == 0) {
		size_t got = 0;
		char cur[TFS_ETAG_MAX];
		/* If-Match after the first chunk: a changed object fails, it is
		 * never stitched together from two versions. */
		rc = tfs_backend_get_range(be, key, off, GET_CHUNK, etag[0] ? etag : NULL,
					   tfs_io_buf(buf), &got, cur);
		if (rc || got == 0)
			break;
		if (etag[0] == '\0')
			memcpy(etag, cur, sizeof(etag));
		rc = write_all(fd, buf, got);
		off += got;
		if (got < GET_CHUNK)
			break;
	}
	free(buf);
	if (fd != STDOUT_FILENO && close(fd) < 0 && rc == 0)
		rc = errno;
	if (rc)
		fprintf(stderr, "tierfs: get '%s': %s\n", key, strerror(rc));
	return rc;
}

/* Copy stdin to an unlinked temporary file so it can be uploaded with
 * known length (and re-read on retries). */
static int spool_stdin(int *fd_out, uint64_t *len)
{
	char path[] = "/tmp/tierfs-put-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return errno;
	unlink(path);
	char buf[65536];
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return e;
		}
		if (n == 0)
			break;
		int rc = write_all(fd, buf, (size_t)n);
		if (rc) {
			close(fd);
			return rc;
		}
		total += (uint64_t)n;
	}
	*fd_out = fd;
	*len = total;
	return 0;
}

static int op_put(struct tfs_backend *be, int argc, char **argv)
{
	if (argc != 2) {
		usage(stderr);
		return EINVAL;
	}
	const char *src = argv[0], *key = argv[1];
	int fd, rc;
	uint64_t len;
	if (strcmp(src, "-") == 0) {
		rc = spool_stdin(&fd, &len);
	} else {
		struct stat st;
		fd = open(src, O_RDONLY | O_CLOEXEC);
		rc = fd < 0 ? errno : 0;
		if (rc == 0 && fstat(fd, &st) < 0)
			rc = errno;
		if (rc == 0 && !S_ISREG(st.st_mode))
			rc = EINVAL;
		len = rc ? 0 : (uint64_t)st.st_size;
		if (rc && fd >= 0)
			close(fd);
	}
	if (rc) {
		fprintf(stderr, "tierfs: put: cannot read '%s': %s\n", src, strerror(rc));
		return rc;
	}
	char etag[TFS_ETAG_MAX];
	rc = tfs_backend_put(be, key, tfs_io_fd(fd, 0), len, NULL, etag);
	close(fd);
	if (rc)
		fprintf(stderr, "tierfs: put '%s': %s\n", key, strerror(rc));
	else
		printf("%s %" PRIu64 " bytes, ETag %s\n", key, len, etag);
	return rc;
}

static int op_rm(struct tfs_backend *be, int argc, char **argv)
{
	int worst = 0;
	for (int i = 0; i < argc; i++) {
		int rc = tfs_backend_delete(be, argv[i]);
		if (rc) {
			fprintf(stderr, "tierfs: rm '%s': %s\n", argv[i], strerror(rc));
			worst = rc;
		}
	}
	return worst;
}

static int op_cp(struct tfs_backend *be, int argc, char **argv)
{
	if (argc != 2) {
		usage(stderr);
		return EINVAL;
	}
	int rc = tfs_backend_copy(be, argv[0], argv[1], TFS_SIZE_UNKNOWN, NULL, NULL);
	if (rc)
		fprintf(stderr, "tierfs: cp '%s' '%s': %s\n", argv[0], argv[1], strerror(rc));
	return rc;
}

static const struct {
	const char *name;
	int (*fn)(struct tfs_backend *be, int argc, char **argv);
	int min_args;
} ops[] = {
	{ "ls", op_ls, 0 },   { "stat", op_stat, 1 }, { "get", op_get, 1 },
	{ "put", op_put, 2 }, { "rm", op_rm, 1 },     { "cp", op_cp, 2 },
};

int tfs_cmd_backend(int argc, char **argv)
{
	struct tfs_cli_conf cc;
	int first;
	/* In order: stop at SOURCE so that "ls -r" reaches the op. */
	int rc = tfs_cli_parse(argc, argv, true, NULL, 0, &cc, usage, &first);
	if (rc != -1)
		return rc;
	if (argc - first < 2)
		return tfs_cli_usage_error(&cc, usage);
	const char *source = argv[first];
	const char *opname = argv[first + 1];
	int op_argc = argc - first - 2;
	char **op_argv = argv + first + 2;
	size_t op = 0;
	while (op < sizeof(ops) / sizeof(ops[0]) && strcmp(ops[op].name, opname) != 0)
		op++;
	if (op == sizeof(ops) / sizeof(ops[0]) || op_argc < ops[op].min_args) {
		fprintf(stderr, "tierfs backend: %s '%s'\n",
			op == sizeof(ops) / sizeof(ops[0]) ? "unknown operation"
							   : "missing arguments for",
			opname);
		return tfs_cli_usage_error(&cc, usage);
	}

	struct tfs_config cfg;
	rc = tfs_cli_conf_load(&cc, &cfg);
	if (rc)
		return rc;
	struct tfs_source src;
	char err[512];
	rc = tfs_source_parse(source, &src, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "tierfs: %s\n", rc == EINVAL ? err : strerror(rc));
		tfs_config_clear(&cfg);
		return TFS_EXIT_CONFIG;
	}
	struct tfs_log log;
	tfs_log_init_stderr(&log, cc.verbose                     ? TFS_LOG_DEBUG
				  : cfg.log.level < TFS_LOG_WARN ? cfg.log.level
								 : TFS_LOG_WARN);
	struct tfs_backend *be = NULL;
	rc = tfs_stack_open_backend(&cfg, &src, &log, &be);
	if (rc) {
		fprintf(stderr, "tierfs: cannot open %s: %s\n", source, strerror(rc));
		rc = TFS_EXIT_FAIL;
	} else {
		rc = ops[op].fn(be, op_argc, op_argv) ? TFS_EXIT_FAIL : TFS_EXIT_OK;
	}
	tfs_backend_destroy(be);
	tfs_source_clear(&src);
	tfs_config_clear(&cfg);
	return rc;
}
