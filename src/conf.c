/* conf.c - the configuration: defaults, the INI file (parsed by
 * libinih), -o overrides, validation, reload and dump, over the option
 * table of conf_keys.c and the one-value code of conf_value.c
 * (conf_internal.h). */
#include "config.h"

#include "conf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "ini_reader.h"
#include "units.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

#define MAX_FILE (1024 * 1024) /* bytes in a configuration file */
#define MAX_NAME 64            /* section and key names, with the NUL */
#define MIN_TIER_BLOCKS 4      /* a cache tier holds at least this many blocks */

const char *tfs_config_default_path(void)
{
	return SYSCONFDIR "/tierfs/tierfs.conf";
}

/* ---- small helpers ---- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Copy s[0..n) without surrounding blanks into dst (truncated to cap-1). */
static void copy_trimmed(char *dst, size_t cap, const char *s, size_t n)
{
	while (n && is_blank(*s)) {
		s++;
		n--;
	}
	while (n && is_blank(s[n - 1]))
		n--;
	if (n > cap - 1)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* ---- defaults, clear ---- */

void tfs_config_clear(struct tfs_config *cfg)
{
	for (size_t i = 0; i < tfs_conf_nopts; i++) {
		if (tfs_conf_is_string(&tfs_conf_options[i])) {
			char *s;

			memcpy(&s, tfs_conf_field(cfg, tfs_conf_options[i].off), sizeof(s));
			free(s);
		}
	}
	free(cfg->backend.bucket);
	free(cfg->backend.prefix);
	free(cfg->path);
	memset(cfg, 0, sizeof(*cfg));
}

int tfs_config_defaults(struct tfs_config *cfg)
{
	const struct where w = { .src = SRC_DEFAULT };
	char msg[768];

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < tfs_conf_nopts; i++) {
		const struct opt *o = &tfs_conf_options[i];
		union value val;
		size_t slen = 0;
		int rc;

		if (o->type == OPT_SOURCE)
			continue;
		/* a default that does not parse is a bug in the table (conf_keys.c) */
		rc = tfs_conf_parse_value(o, o->def, &val, &slen, msg, sizeof(msg));
		if (rc == 0)
			rc = tfs_conf_store_value(cfg, o, &val, slen, &w);
		if (rc) {
			tfs_config_clear(cfg);
			return rc;
		}
	}
	return 0;
}

/* ---- the file ---- */

struct load_ctx {
	struct tfs_config *cfg;
	const char *file;
	struct tfs_ini_reader rd; /* the file's lines (ini_reader.h) */
	int rc;                   /* the errno of rd.err_line */
	struct tfs_dbuf *err;
};

/* inih's handler, for each "key = value".  Returns 1 to go on, or 0 after
 * the first error (inih then reports this line). */
static int on_value(void *user, const char *section, const char *key, const char *value)
{
	struct load_ctx *c = user;
	struct where w = { .src = SRC_FILE, .file = c->file, .line = c->rd.lineno };
	char sec[MAX_NAME];
	int rc;

	if (c->rd.err_line)
		return 0;
	/* inih keeps the blanks inside "[ ssd ]" */
	copy_trimmed(sec, sizeof(sec), section, strlen(section));
	rc = tfs_conf_apply(c->cfg, &w, sec, key, value, c->err);
	if (rc) {
		c->rd.err_line = c->rd.lineno;
		c->rc = rc;
		return 0;
	}
	return 1;
}

/* Read the whole file (at most MAX_FILE bytes) into d.  Returns 0 or an
 * errno with the message in err. */
static int read_file(const char *path, bool must_exist, struct tfs_dbuf *d, struct tfs_dbuf *err)
{
	const struct where w = { .src = SRC_FILE, .file = path };
	char ebuf[128];
	char buf[4096];
	struct stat st;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		rc = errno;
		if (rc != ENOENT || must_exist)
			tfs_conf_fail(err, &w, NULL, NULL, "cannot open: %s",
				      strerror_r(rc, ebuf, sizeof(ebuf)));
		return rc;
	}
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = EISDIR;
		tfs_conf_fail(err, &w, NULL, NULL, "cannot read: %s",
			      strerror_r(rc, ebuf, sizeof(ebuf)));
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = errno;
			tfs_conf_fail(err, &w, NULL, NULL, "cannot read: %s",
				      strerror_r(rc, ebuf, sizeof(ebuf)));
			goto out;
		}
		if (n == 0)
			break;
		rc = tfs_dbuf_add(d, buf, (size_t)n);
		if (rc == EOVERFLOW) {
			rc = EFBIG;
			tfs_conf_fail(err, &w, NULL, NULL, "file too large (more than %d bytes)",
				      MAX_FILE);
			goto out;
		}
		if (rc) {
			tfs_conf_fail(err, &w, NULL, NULL, "out of memory");
			goto out;
		}
	}
out:
	close(fd);
	return rc;
}

/* Report line `line` of the file as a line inih could not parse. */
static void syntax_error(const struct load_ctx *c, unsigned line)
{
	const struct where w = { .src = SRC_FILE, .file = c->file, .line = line };
	const char *p = c->rd.data, *end = c->rd.data + c->rd.len, *eol;
	char text[256];
	char q[QBUF];

	for (unsigned l = 1; l < line && p < end; l++) {
		eol = memchr(p, '\n', (size_t)(end - p));
		p = eol ? eol + 1 : end;
	}
	eol = memchr(p, '\n', (size_t)(end - p));
	if (eol == NULL)
		eol = end;
	if (eol > p && eol[-1] == '\r')
		eol--;
	copy_trimmed(text, sizeof(text), p, (size_t)(eol - p));
	tfs_conf_fail(c->err, &w, NULL, NULL,
		      "syntax error: expected '[section]' or 'key = value', got %s",
		      tfs_escape(q, sizeof(q), text, MAX_QUOTE, true));
}

/* ---- the environment ---- */

/* Keys that, left empty by the file, take the AWS SDKs' environment
 * variables (tierfs.conf(5)): the first variable set and not empty
 * wins; -o, applied after the file, still overrides it. */
static const struct env_key {
	const char *section, *key;
	const char *vars[2];
} env_keys[] = {
	{ "backend", "region", { "AWS_REGION", "AWS_DEFAULT_REGION" } },
	{ "backend", "endpoint", { "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL" } },
};

static int apply_environment(struct tfs_config *cfg, struct tfs_dbuf *err)
{
	for (size_t i = 0; i < sizeof(env_keys) / sizeof(env_keys[0]); i++) {
		const struct env_key *k = &env_keys[i];
		const struct opt *o = tfs_conf_find_opt(k->section, k->key);

		if (o == NULL || tfs_conf_load_str(cfg, o) != NULL)
			continue; /* set by the file */
		for (size_t v = 0; v < sizeof(k->vars) / sizeof(k->vars[0]); v++) {
			const char *val = getenv(k->vars[v]);

			if (val == NULL || *val == '\0')
				continue;
			const struct where w = { .src = SRC_ENV,
						 .origin = k->vars[v],
						 .assignment = val };
			int rc = tfs_conf_apply(cfg, &w, k->section, k->key, val, err);

			if (rc)
				return rc;
			break;
		}
	}
	return 0;
}

int tfs_config_load(struct tfs_config *cfg, const char *path, bool must_exist, struct tfs_dbuf *err)
{
	struct tfs_dbuf data;
	struct load_ctx c = { .cfg = cfg, .err = err };
	char *copy;
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	if (path == NULL)
		path = tfs_config_default_path();
	c.file = path;
	tfs_dbuf_init(&data, MAX_FILE);
	rc = read_file(path, must_exist, &data, err);
	if (rc == ENOENT && !must_exist) {
		rc = apply_environment(cfg, err);
		goto out;
	}
	if (rc)
		goto out;

	copy = strdup(path);
	if (copy == NULL) {
		rc = ENOMEM;
		goto out;
	}
	free(cfg->path);
	cfg->path = copy;
	/* line numbers of an earlier file no longer mean anything */
	for (size_t i = 0; i < tfs_conf_nopts; i++)
		cfg->origin[i].line = 0;

	tfs_ini_reader_init(&c.rd, tfs_dbuf_str(&data), tfs_dbuf_len(&data));
	int bad = ini_parse_stream(tfs_ini_read_line, &c.rd, on_value, &c);

	if (bad < 0) {
		/* -2: inih could not allocate its line buffer */
		rc = ENOMEM;
	} else if (bad > 0 && (c.rd.err_line == 0 || (unsigned)bad < c.rd.err_line)) {
		/* a line inih could not parse: it calls no handler for it */
		syntax_error(&c, (unsigned)bad);
		rc = EINVAL;
	} else if (c.rd.err[0]) {
		/* a line the reader refused */
		const struct where w = { .src = SRC_FILE, .file = c.file, .line = c.rd.err_line };

		tfs_conf_fail(err, &w, NULL, NULL, "%s", c.rd.err);
		rc = EINVAL;
	} else if (c.rd.err_line) {
		rc = c.rc;
	} else {
		rc = apply_environment(cfg, err);
	}
out:
	tfs_dbuf_free(&data);
	return rc;
}

/* ---- -o ---- */

int tfs_config_set(struct tfs_config *cfg, const char *assignment, const char *origin,
		   struct tfs_dbuf *err)
{
	const struct where w = {
		.src = SRC_CMDLINE,
		.origin = origin ? origin : "command line: -o",
		.assignment = assignment,
	};
	char sec[MAX_NAME], key[MAX_NAME];
	const char *eq = strchr(assignment, '=');
	const char *dot;
	char *value;
	size_t vlen;
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	dot = eq ? memchr(assignment, '.', (size_t)(eq - assignment)) : NULL;
	if (dot) {
		copy_trimmed(sec, sizeof(sec), assignment, (size_t)(dot - assignment));
		copy_trimmed(key, sizeof(key), dot + 1, (size_t)(eq - dot - 1));
	}
	if (dot == NULL || sec[0] == '\0' || key[0] == '\0') {
		tfs_conf_fail(err, &w, NULL, NULL, "expected section.key=value");
		return EINVAL;
	}
	vlen = strlen(eq + 1);
	value = malloc(vlen + 1);
	if (value == NULL)
		return ENOMEM;
	copy_trimmed(value, vlen + 1, eq + 1, vlen);
	rc = tfs_conf_apply(cfg, &w, sec, key, value, err);
	free(value);
	return rc;
}

/* ---- validation ---- */

/* Prefix for a message about option o: where it was set last. */
static struct where where_of(const struct tfs_config *cfg, const struct opt *o)
{
	const struct tfs_config_origin *org = &cfg->origin[tfs_conf_opt_index(o)];
	struct where w = { .src = SRC_DEFAULT };

	if (org->cmdline) {
		w.src = SRC_FILE; /* "command line: [section] key: ..." */
		w.file = "command line";
	} else if (org->env) {
		w.src = SRC_FILE; /* "AWS_REGION: [section] key: ..." */
		w.file = org->env;
	} else if (org->line && cfg->path) {
		w.src = SRC_FILE;
		w.file = cfg->path;
		w.line = org->line;
	}
	return w;
}

/* Report a rule between options a and b that does not hold, at the place
 * where the later of the two was set. */
__attribute__((format(printf, 5, 6))) static int
cross_fail(const struct tfs_config *cfg, struct tfs_dbuf *err, const struct opt *a,
	   const struct opt *b, const char *fmt, ...)
{
	const struct tfs_config_origin *oa = &cfg->origin[tfs_conf_opt_index(a)];
	const struct tfs_config_origin *ob = &cfg->origin[tfs_conf_opt_index(b)];
	struct where w = where_of(cfg, oa->seq >= ob->seq ? a : b);
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tfs_conf_fail(err, &w, NULL, NULL, "%s", msg);
	return EINVAL;
}

#define OPT_OF(f) tfs_conf_opt_by_field(offsetof(struct tfs_config, f))

int tfs_config_validate(const struct tfs_config *cfg, struct tfs_dbuf *err)
{
	char x[TFS_UNITS_BUFLEN], y[TFS_UNITS_BUFLEN];
	int rc;

	if (err)
		tfs_dbuf_reset(err);
	for (size_t i = 0; i < tfs_conf_nopts; i++) {
		const struct where w = where_of(cfg, &tfs_conf_options[i]);

		rc = tfs_conf_check_value(cfg, &tfs_conf_options[i], &w, err);
		if (rc)
			return rc;
	}

	if (!(cfg->ssd.low_watermark < cfg->ssd.high_watermark))
		return cross_fail(cfg, err, OPT_OF(ssd.low_watermark), OPT_OF(ssd.high_watermark),
				  "[ssd] low_watermark (%.15g%%) must be below high_watermark "
				  "(%.15g%%)",
				  cfg->ssd.low_watermark, cfg->ssd.high_watermark);

	if (cfg->writeback.retry_base_ms > cfg->writeback.retry_max_ms) {
		tfs_conf_fmt_duration(cfg->writeback.retry_base_ms, x, sizeof(x));
		tfs_conf_fmt_duration(cfg->writeback.retry_max_ms, y, sizeof(y));
		return cross_fail(cfg, err, OPT_OF(writeback.retry_base_ms),
				  OPT_OF(writeback.retry_max_ms),
				  "[writeback] retry_base (%s) must not exceed retry_max (%s)", x,
				  y);
	}
	if (cfg->backend.retry_base_ms > cfg->backend.retry_max_ms) {
		tfs_conf_fmt_duration(cfg->backend.retry_base_ms, x, sizeof(x));
		tfs_conf_fmt_duration(cfg->backend.retry_max_ms, y, sizeof(y));
		return cross_fail(cfg, err, OPT_OF(backend.retry_base_ms),
				  OPT_OF(backend.retry_max_ms),
				  "[backend] retry_base (%s) must not exceed retry_max (%s)", x, y);
	}

	const char *np = cfg->near_store.prefix;
	if (np && (np[0] == '/' || np[strlen(np) - 1] != '/'))
		return cross_fail(cfg, err, OPT_OF(near_store.prefix), OPT_OF(near_store.prefix),
				  "[near] prefix '%s' must end with '/' and not start with it", np);
	if (cfg->near_store.bucket == NULL && (cfg->near_store.prefix || cfg->near_store.endpoint))
		return cross_fail(cfg, err,
				  cfg->near_store.prefix ? OPT_OF(near_store.prefix)
							 : OPT_OF(near_store.endpoint),
				  OPT_OF(near_store.bucket),
				  "[near] endpoint and prefix need [near] bucket");
	if (cfg->near.key && strlen(cfg->near.key) < TFS_NEAR_KEY_TEXT_MIN)
		return cross_fail(cfg, err, OPT_OF(near.key), OPT_OF(near.key),
				  "[near] key must be at least %d characters",
				  TFS_NEAR_KEY_TEXT_MIN);

	if (cfg->backend.part_size > cfg->backend.multipart_threshold) {
		tfs_conf_fmt_size(cfg->backend.part_size, x, sizeof(x));
		tfs_conf_fmt_size(cfg->backend.multipart_threshold, y, sizeof(y));
		return cross_fail(
			cfg, err, OPT_OF(backend.part_size), OPT_OF(backend.multipart_threshold),
			"[backend] part_size (%s) must not exceed multipart_threshold (%s)", x, y);
	}

	/* block_size <= 64M, so this does not overflow */
	uint64_t min_tier = MIN_TIER_BLOCKS * cfg->cache.block_size;

	tfs_conf_fmt_size(cfg->cache.block_size, y, sizeof(y));
	if (cfg->ram.size < min_tier) {
		tfs_conf_fmt_size(cfg->ram.size, x, sizeof(x));
		return cross_fail(cfg, err, OPT_OF(ram.size), OPT_OF(cache.block_size),
				  "[ram] size (%s) must be at least %d times [cache] block_size "
				  "(%s)",
				  x, MIN_TIER_BLOCKS, y);
	}
	if (cfg->ssd.size_pct == 0.0 && cfg->ssd.size < min_tier) {
		tfs_conf_fmt_size(cfg->ssd.size, x, sizeof(x));
		return cross_fail(cfg, err, OPT_OF(ssd.size), OPT_OF(cache.block_size),
				  "[ssd] size (%s) must be at least %d times [cache] block_size "
				  "(%s)",
				  x, MIN_TIER_BLOCKS, y);
	}
	return 0;
}

/* ---- reload ---- */

bool tfs_config_reloadable(const char *section, const char *key)
{
	const struct opt *o = tfs_conf_find_opt(section, key);

	return o && (o->flags & OPTF_RELOAD);
}

/* Copy option o's value and origin from `from` into `to`.  Returns 0 or
 * ENOMEM (to unchanged). */
static int copy_value(struct tfs_config *to, const struct tfs_config *from, const struct opt *o)
{
	if (tfs_conf_is_string(o)) {
		const char *s = tfs_conf_load_str(from, o);
		char *dup = s ? strdup(s) : NULL;
		char *old;

		if (s && dup == NULL)
			return ENOMEM;
		memcpy(&old, tfs_conf_field(to, o->off), sizeof(old));
		free(old);
		memcpy(tfs_conf_field(to, o->off), &dup, sizeof(dup));
	} else {
		memcpy(tfs_conf_field(to, o->off), tfs_conf_cfield(from, o->off), o->size);
		if (o->type == OPT_SIZE_PCT)
			memcpy(tfs_conf_field(to, o->pct_off), tfs_conf_cfield(from, o->pct_off),
			       sizeof(double));
	}
	to->origin[tfs_conf_opt_index(o)] = from->origin[tfs_conf_opt_index(o)];
	return 0;
}

int tfs_config_merge_reload(struct tfs_config *next, const struct tfs_config *cur,
			    tfs_config_change_fn fn, void *ctx)
{
	struct tfs_dbuf a, b;
	int rc = 0;

	tfs_dbuf_init(&a, 64 * 1024);
	tfs_dbuf_init(&b, 64 * 1024);
	for (size_t i = 0; i < tfs_conf_nopts && rc == 0; i++) {
		const struct opt *o = &tfs_conf_options[i];
		bool reload = (o->flags & OPTF_RELOAD) != 0;

		if (o->type == OPT_SOURCE)
			continue;
		tfs_dbuf_reset(&a);
		tfs_dbuf_reset(&b);
		rc = tfs_conf_format_value(cur, o, &a);
		if (rc == 0)
			rc = tfs_conf_format_value(next, o, &b);
		if (rc)
			break;
		if (strcmp(tfs_dbuf_str(&a), tfs_dbuf_str(&b)) == 0)
			continue;
		if (fn)
			fn(ctx, o->section, o->key, tfs_dbuf_str(&b), reload);
		if (!reload)
			rc = copy_value(next, cur, o);
	}
	tfs_dbuf_free(&a);
	tfs_dbuf_free(&b);
	return rc == EOVERFLOW ? ENOMEM : rc;
}

/* ---- dump ---- */

int tfs_config_dump(const struct tfs_config *cfg, bool origins, struct tfs_dbuf *out)
{
	int rc = 0;

	if (origins)
		rc = tfs_dbuf_addf(out, "# tierfs configuration from %s\n",
				   cfg->path ? cfg->path : "built-in defaults (no file)");
	for (size_t i = 0; i < tfs_conf_nopts && rc == 0; i++) {
		const struct opt *o = &tfs_conf_options[i];
		const struct tfs_config_origin *org = &cfg->origin[i];
		bool first = i == 0 || strcmp(tfs_conf_options[i - 1].section, o->section) != 0;

		if (first)
			rc = tfs_dbuf_addf(out, "%s[%s]\n", i ? "\n" : "", o->section);
		if (rc)
			break;
		if (o->type == OPT_SOURCE) {
			const char *s = tfs_conf_load_str(cfg, o);

			if (origins && s)
				rc = tfs_dbuf_addf(out, "; %s = %s (from the mount source)\n",
						   o->key, s);
			continue;
		}
		rc = tfs_dbuf_addf(out, "%s =", o->key);
		/* "key =" for an empty string, "key = value" otherwise */
		if (rc == 0 && !(tfs_conf_is_string(o) && tfs_conf_load_str(cfg, o) == NULL))
			rc = tfs_dbuf_addc(out, ' ');
		if (rc == 0 && (o->flags & OPTF_SECRET) && tfs_conf_load_str(cfg, o))
			rc = tfs_dbuf_adds(out, "(set, not shown)");
		else if (rc == 0)
			rc = tfs_conf_format_value(cfg, o, out);
		if (rc == 0 && origins && org->cmdline)
			rc = tfs_dbuf_adds(out, "  ; -o");
		else if (rc == 0 && origins && org->env)
			rc = tfs_dbuf_addf(out, "  ; environment %s", org->env);
		else if (rc == 0 && origins && org->line)
			rc = tfs_dbuf_addf(out, "  ; line %u", org->line);
		if (rc == 0)
			rc = tfs_dbuf_addc(out, '\n');
	}
	return rc;
}
