/* node_conf.c - the node's FlexVolume configuration file (inih). */
#include "config.h"

#include "node_conf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "ini_reader.h"
#include "units.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif
#ifndef BINDIR
#define BINDIR "/usr/local/bin"
#endif

#define MAX_FILE (1024 * 1024)
#define SEC UINT64_C(1000)
#define HOUR (3600 * SEC)

/* ---- the [node] keys ---- */

enum node_type {
	N_PATH,     /* char *: an absolute path */
	N_PATH_OPT, /* char *: an absolute path, or empty (NULL) */
	N_DURATION, /* uint64_t milliseconds in [SEC, HOUR] */
	N_LOGLEVEL, /* enum tfs_log_level */
	N_SYSTEMD,  /* enum tfs_node_systemd */
	N_BOOL,     /* bool */
	N_MODE,     /* unsigned: octal, no bit outside TFS_NODE_FSGROUP_MODE_MASK */
	N_CONTEXT,  /* char *: an SELinux context, or empty (NULL) */
	N_COUNT,    /* unsigned: 1 to TFS_NODE_MAX_DAEMONS_MAX */
	N_SIZE,     /* uint64_t bytes */
	N_SIZE_OPT, /* uint64_t bytes, or empty (0: no bound) */
};

struct node_key {
	const char *key;
	enum node_type type;
	size_t off;
	const char *def;
};

#define NK(k, t, f, d)                                           \
	{                                                        \
		(k), (t), offsetof(struct tfs_node_conf, f), (d) \
	}

static const struct node_key node_keys[] = {
	NK("tierfs", N_PATH, tierfs, BINDIR "/tierfs"),
	NK("tierfs_conf", N_PATH_OPT, tierfs_conf, ""),
	NK("cache_root", N_PATH, cache_root, "/var/cache/tierfs/flexvolume"),
	NK("state_dir", N_PATH, state_dir, "/run/tierfs/flexvolume"),
	NK("log_file", N_PATH_OPT, log_file, "/var/log/tierfs-flexvolume.log"),
	NK("log_level", N_LOGLEVEL, log_level, "info"),
	NK("daemon_log", N_PATH_OPT, daemon_log, ""),
	NK("credentials_file", N_PATH_OPT, credentials_file, ""),
	NK("mount_timeout", N_DURATION, mount_timeout_ms, "60s"),
	NK("unmount_timeout", N_DURATION, unmount_timeout_ms, "45s"),
	NK("systemd", N_SYSTEMD, systemd, "auto"),
	NK("systemd_run", N_PATH, systemd_run, "/usr/bin/systemd-run"),
	NK("fsgroup", N_BOOL, fsgroup, "yes"),
	NK("fsgroup_dir_mode", N_MODE, fsgroup_dir_mode, "0775"),
	NK("fsgroup_file_mode", N_MODE, fsgroup_file_mode, "0664"),
	NK("selinux_context", N_CONTEXT, selinux_context, ""),
	NK("kubelet_dir", N_PATH, kubelet_dir, "/var/lib/kubelet"),
	NK("max_daemons", N_COUNT, max_daemons, "32"),
	NK("max_total_ram", N_SIZE_OPT, max_total_ram, ""),
	NK("max_total_ssd", N_SIZE_OPT, max_total_ssd, ""),
	NK("memory_margin", N_SIZE, memory_margin, "256M"),
	NK("cgroup_dir", N_PATH_OPT, cgroup_dir, ""),
};

#define N_NODE_KEYS (sizeof(node_keys) / sizeof(node_keys[0]))

/* What a pod may set when the file has no [pod] allow: the dataset, and the
 * options that cost the node nothing. */
static const enum tfs_node_opt builtin_allow[] = {
	TFS_NODE_OPT_SOURCE,    TFS_NODE_OPT_BUCKET, TFS_NODE_OPT_PREFIX,
	TFS_NODE_OPT_READ_ONLY, TFS_NODE_OPT_POLICY, TFS_NODE_OPT_METADATA_TTL,
};

/* The CSI plugin's built-in values where they differ from the table's:
 * its own state and cache, and its log on standard error (the container's
 * log). */
static const struct {
	const char *key;
	const char *def;
} csi_defaults[] = {
	{ "cache_root", "/var/cache/tierfs/csi" },
	{ "state_dir", "/run/tierfs/csi" },
	{ "log_file", "" },
};

static const char *builtin_value(const struct node_key *k, enum tfs_node_driver d)
{
	if (d == TFS_NODE_DRIVER_CSI) {
		for (size_t i = 0; i < sizeof(csi_defaults) / sizeof(csi_defaults[0]); i++) {
			if (strcmp(csi_defaults[i].key, k->key) == 0)
				return csi_defaults[i].def;
		}
	}
	return k->def;
}

const char *tfs_node_conf_path(enum tfs_node_driver d, bool *must_exist)
{
	const char *env =
		getenv(d == TFS_NODE_DRIVER_CSI ? TFS_NODE_CSI_CONF_ENV : TFS_NODE_CONF_ENV);

	if (env && *env) {
		*must_exist = true;
		return env;
	}
	*must_exist = false;
	return d == TFS_NODE_DRIVER_CSI ? SYSCONFDIR "/tierfs/csi.conf"
					: SYSCONFDIR "/tierfs/flexvolume.conf";
}

const char *tfs_node_driver_name(enum tfs_node_driver d)
{
	return d == TFS_NODE_DRIVER_CSI ? "tierfs-csi" : "tierfs-flexvolume";
}

void tfs_node_conf_clear(struct tfs_node_conf *n)
{
	for (size_t i = 0; i < N_NODE_KEYS; i++) {
		if (node_keys[i].type == N_PATH || node_keys[i].type == N_PATH_OPT ||
		    node_keys[i].type == N_CONTEXT) {
			char **p = (char **)((char *)n + node_keys[i].off);

			free(*p);
		}
	}
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++)
		free(n->def[i].value);
	free(n->path);
	memset(n, 0, sizeof(*n));
}

const char *tfs_node_conf_where(const struct tfs_node_conf *n, unsigned line, char *buf, size_t cap)
{
	if (line == 0 || n->path == NULL)
		snprintf(buf, cap, "built-in");
	else
		snprintf(buf, cap, "%s:%u", n->path, line);
	return buf;
}

/* ---- parsing ---- */

struct load_ctx {
	struct tfs_node_conf *n;
	const char *file;
	struct tfs_ini_reader rd; /* the file's lines (ini_reader.h); rd.err_line
				   * is set once an error is in err */
	int rc;
	struct tfs_dbuf *err;
};

__attribute__((format(printf, 2, 3))) static int fail(struct load_ctx *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->err) {
		tfs_dbuf_reset(c->err);
		tfs_dbuf_addf(c->err, "%s:%u: %s", c->file, c->rd.lineno, msg);
	}
	c->rd.err_line = c->rd.lineno;
	c->rc = EINVAL;
	return 0;
}

/* An SELinux context as mount(8)'s context= takes it: user:role:type[:level],
 * at most TFS_NODE_CONTEXT_MAX bytes of letters, digits and _ . - : , (the MCS
 * categories "c1,c2" hold commas). */
static bool valid_context(const char *s)
{
	size_t n = strlen(s), colons = 0;

	if (n == 0 || n > TFS_NODE_CONTEXT_MAX || s[0] == ':')
		return false;
	for (const char *p = s; *p; p++) {
		char ch = *p;

		if (ch == ':')
			colons++;
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			   (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-' ||
			   ch == ','))
			return false;
	}
	return colons >= 2 && s[n - 1] != ':' && strstr(s, "::") == NULL;
}

/* An octal mode of one to four digits with no bit outside the mask. */
static int parse_mode(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '7' || strlen(s) > 4)
		return EINVAL;
	errno = 0;
	v = strtoul(s, &end, 8);
	if (errno || *end || (v & ~(unsigned long)TFS_NODE_FSGROUP_MODE_MASK))
		return EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int set_node_key(struct load_ctx *c, const struct node_key *k, const char *value,
			bool builtin)
{
	char *base = (char *)c->n;
	char q[TFS_NODE_QUOTE_BUFLEN];

	switch (k->type) {
	case N_PATH:
	case N_PATH_OPT: {
		char **p = (char **)(base + k->off);
		char *copy = NULL;

		if (*value == '\0' && k->type == N_PATH)
			return builtin ? EINVAL : fail(c, "[node] %s: a path is required", k->key);
		if (*value && *value != '/')
			return builtin ? EINVAL
				       : fail(c, "[node] %s: %s is not an absolute path", k->key,
					      tfs_node_quote(q, sizeof(q), value));
		if (*value) {
			copy = strdup(value);
			if (copy == NULL) {
				c->rc = ENOMEM;
				return 0;
			}
		}
		free(*p);
		*p = copy;
		return 1;
	}
	case N_DURATION: {
		uint64_t ms;

		if (tfs_parse_duration(value, &ms) || ms < SEC || ms > HOUR)
			return builtin ? EINVAL
				       : fail(c, "[node] %s: %s is not a duration from 1s to 1h",
					      k->key, tfs_node_quote(q, sizeof(q), value));
		memcpy(base + k->off, &ms, sizeof(ms));
		return 1;
	}
	case N_LOGLEVEL: {
		enum tfs_log_level l;

		if (tfs_log_level_parse(value, &l))
			return builtin ? EINVAL
				       : fail(c,
					      "[node] %s: %s is not a log level (allowed: error, "
					      "warn, info, debug)",
					      k->key, tfs_node_quote(q, sizeof(q), value));
		memcpy(base + k->off, &l, sizeof(l));
		return 1;
	}
	case N_SYSTEMD: {
		enum tfs_node_systemd s;

		if (strcasecmp(value, "auto") == 0)
			s = TFS_NODE_SYSTEMD_AUTO;
		else if (strcasecmp(value, "yes") == 0 || strcasecmp(value, "true") == 0)
			s = TFS_NODE_SYSTEMD_YES;
		else if (strcasecmp(value, "no") == 0 || strcasecmp(value, "false") == 0)
			s = TFS_NODE_SYSTEMD_NO;
		else
			return builtin ? EINVAL
				       : fail(c, "[node] %s: %s is not one of auto, yes, no",
					      k->key, tfs_node_quote(q, sizeof(q), value));
		memcpy(base + k->off, &s, sizeof(s));
		return 1;
	}
	case N_BOOL: {
		bool b;

		if (tfs_parse_bool(value, &b))
			return builtin ? EINVAL
				       : fail(c,
					      "[node] %s: %s is not a boolean (allowed: yes/no, "
					      "true/false, on/off, 1/0)",
					      k->key, tfs_node_quote(q, sizeof(q), value));
		memcpy(base + k->off, &b, sizeof(b));
		return 1;
	}
	case N_MODE: {
		unsigned m;

		if (parse_mode(value, &m))
			return builtin ? EINVAL
				       : fail(c,
					      "[node] %s: %s is not an octal mode within %04o "
					      "(no set-id, sticky or world-write bit)",
					      k->key, tfs_node_quote(q, sizeof(q), value),
					      TFS_NODE_FSGROUP_MODE_MASK);
		memcpy(base + k->off, &m, sizeof(m));
		return 1;
	}
	case N_COUNT: {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(value, &end, 10);
		if (*value < '0' || *value > '9' || errno || *end || v < 1 ||
		    v > TFS_NODE_MAX_DAEMONS_MAX)
			return builtin ? EINVAL
				       : fail(c, "[node] %s: %s is not a number from 1 to %d",
					      k->key, tfs_node_quote(q, sizeof(q), value),
					      TFS_NODE_MAX_DAEMONS_MAX);
		unsigned u = (unsigned)v;
		memcpy(base + k->off, &u, sizeof(u));
		return 1;
	}
	case N_SIZE:
	case N_SIZE_OPT: {
		uint64_t b = 0;

		if ((*value || k->type == N_SIZE) && tfs_parse_size(value, &b))
			return builtin ? EINVAL
				       : fail(c,
					      "[node] %s: %s is not a size (bytes with K/M/G/T "
					      "suffix%s)",
					      k->key, tfs_node_quote(q, sizeof(q), value),
					      k->type == N_SIZE_OPT ? ", or empty for no bound"
								    : "");
		if (k->type == N_SIZE_OPT && *value && b == 0)
			return builtin ? EINVAL
				       : fail(c,
					      "[node] %s: 0 bounds nothing (leave it empty for "
					      "no bound)",
					      k->key);
		memcpy(base + k->off, &b, sizeof(b));
		return 1;
	}
	case N_CONTEXT: {
		char **p = (char **)(base + k->off);
		char *copy = NULL;

		if (*value && !valid_context(value))
			return builtin ? EINVAL
				       : fail(c,
					      "[node] %s: %s is not an SELinux context "
					      "(user:role:type[:level], at most %d characters of "
					      "letters, digits, _ . - : ,)",
					      k->key, tfs_node_quote(q, sizeof(q), value),
					      TFS_NODE_CONTEXT_MAX);
		if (*value) {
			copy = strdup(value);
			if (copy == NULL) {
				c->rc = ENOMEM;
				return 0;
			}
		}
		free(*p);
		*p = copy;
		return 1;
	}
	}
	return 1;
}

static bool is_sep(char ch)
{
	return ch == ',' || ch == ' ' || ch == '\t';
}

/* [pod] allow = NAME[, NAME]... (commas and/or blanks). */
static int set_allow(struct load_ctx *c, const char *value)
{
	bool allow[TFS_NODE_OPT_COUNT] = { false };
	char name[64], q[TFS_NODE_QUOTE_BUFLEN], known[512];
	const char *p = value;

	while (*p) {
		while (is_sep(*p))
			p++;
		if (*p == '\0')
			break;
		size_t n = 0;
		while (p[n] && !is_sep(p[n]))
			n++;
		enum tfs_node_opt o;
		if (n >= sizeof(name)) {
			snprintf(name, sizeof(name), "%.*s", (int)(sizeof(name) - 1), p);
			return fail(c, "[pod] allow: unknown option %s (known: %s)",
				    tfs_node_quote(q, sizeof(q), name),
				    tfs_node_opt_list(known, sizeof(known)));
		}
		memcpy(name, p, n);
		name[n] = '\0';
		if (tfs_node_opt_find(name, true, &o) != 0)
			return fail(c, "[pod] allow: unknown option %s (known: %s)",
				    tfs_node_quote(q, sizeof(q), name),
				    tfs_node_opt_list(known, sizeof(known)));
		allow[o] = true;
		p += n;
	}
	memcpy(c->n->allow, allow, sizeof(allow));
	c->n->allow_line = c->rd.lineno;
	return 1;
}

static int on_value(void *user, const char *section, const char *key, const char *value)
{
	struct load_ctx *c = user;
	char origin[300], q[TFS_NODE_QUOTE_BUFLEN], known[512];
	enum tfs_node_opt o;

	if (c->rd.err_line || c->rc)
		return 0;
	if (strcasecmp(section, "node") == 0) {
		for (size_t i = 0; i < N_NODE_KEYS; i++) {
			if (strcasecmp(node_keys[i].key, key) == 0)
				return set_node_key(c, &node_keys[i], value, false);
		}
		size_t n = 0;
		known[0] = '\0';
		for (size_t i = 0; i < N_NODE_KEYS && n < sizeof(known); i++) {
			int r = snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "",
					 node_keys[i].key);
			if (r < 0)
				break;
			n += (size_t)r;
		}
		return fail(c, "[node]: unknown key %s (known: %s)",
			    tfs_node_quote(q, sizeof(q), key), known);
	}
	if (strcasecmp(section, "defaults") == 0) {
		if (tfs_node_opt_find(key, true, &o) != 0)
			return fail(c, "[defaults]: unknown option %s (known: %s)",
				    tfs_node_quote(q, sizeof(q), key),
				    tfs_node_opt_list(known, sizeof(known)));
		snprintf(origin, sizeof(origin), "%s:%u: [defaults] %s", c->file, c->rd.lineno,
			 tfs_node_opt_name(o));
		struct tfs_node_value v;
		int rc = tfs_node_opt_check(o, value, origin, false, &v, c->err);
		if (rc) {
			c->rd.err_line = c->rd.lineno;
			c->rc = rc;
			return 0;
		}
		char *copy = strdup(value);
		if (copy == NULL) {
			c->rc = ENOMEM;
			return 0;
		}
		free(c->n->def[o].value);
		c->n->def[o].value = copy;
		c->n->def[o].line = c->rd.lineno;
		c->n->def[o].parsed = v;
		return 1;
	}
	if (strcasecmp(section, "limits") == 0) {
		if (tfs_node_opt_find_limit(key, &o) != 0)
			return fail(c, "[limits]: unknown key %s (known: %s)",
				    tfs_node_quote(q, sizeof(q), key),
				    tfs_node_opt_limit_list(known, sizeof(known)));
		snprintf(origin, sizeof(origin), "%s:%u: [limits] %s", c->file, c->rd.lineno,
			 tfs_node_opt_limit_key(o));
		uint64_t num;
		int rc = tfs_node_opt_check_limit(o, value, origin, &num, c->err);
		if (rc) {
			c->rd.err_line = c->rd.lineno;
			c->rc = rc;
			return 0;
		}
		c->n->limit[o] = (struct tfs_node_conf_limit){ .set = true,
							       .value = num,
							       .line = c->rd.lineno };
		return 1;
	}
	if (strcasecmp(section, "pod") == 0) {
		if (strcasecmp(key, "allow") == 0)
			return set_allow(c, value);
		return fail(c, "[pod]: unknown key %s (known: allow)",
			    tfs_node_quote(q, sizeof(q), key));
	}
	if (*section == '\0')
		return fail(c, "%s outside a section (sections: node, defaults, limits, pod)",
			    tfs_node_quote(q, sizeof(q), key));
	return fail(c, "unknown section [%s] (known: node, defaults, limits, pod)", section);
}

/* Read the whole file into d (at most MAX_FILE bytes). */
static int read_file(const char *path, bool must_exist, struct tfs_dbuf *d, struct tfs_dbuf *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char buf[16384];

	if (fd < 0) {
		int e = errno;

		if (e == ENOENT && !must_exist)
			return ENOENT;
		if (err) {
			tfs_dbuf_reset(err);
			tfs_dbuf_addf(err, "%s: cannot open: %s", path, strerror(e));
		}
		return e;
	}
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			close(fd);
			if (err) {
				tfs_dbuf_reset(err);
				tfs_dbuf_addf(err, "%s: cannot read: %s", path, strerror(e));
			}
			return e;
		}
		if (r == 0)
			break;
		int rc = tfs_dbuf_add(d, buf, (size_t)r);
		if (rc) {
			close(fd);
			if (rc == EOVERFLOW) {
				if (err) {
					tfs_dbuf_reset(err);
					tfs_dbuf_addf(err, "%s: larger than %d bytes", path,
						      MAX_FILE);
				}
				return EFBIG;
			}
			return rc;
		}
	}
	close(fd);
	return 0;
}

static int set_builtin(struct tfs_node_conf *n)
{
	struct load_ctx c = { .n = n, .file = "built-in" };

	for (size_t i = 0; i < N_NODE_KEYS; i++) {
		int r = set_node_key(&c, &node_keys[i], builtin_value(&node_keys[i], n->driver),
				     true);

		if (c.rc)
			return c.rc;
		if (r != 1)
			return EINVAL; /* a bad built-in default: a bug */
	}
	for (size_t i = 0; i < sizeof(builtin_allow) / sizeof(builtin_allow[0]); i++)
		n->allow[builtin_allow[i]] = true;
	return 0;
}

/* The rules that involve several settings. */
static int check_whole(struct tfs_node_conf *n, struct tfs_dbuf *err)
{
	char where[4200], lim[TFS_UNITS_BUFLEN];
	const struct tfs_node_conf_default *src = &n->def[TFS_NODE_OPT_SOURCE];

	for (int i = TFS_NODE_OPT_BUCKET; i <= TFS_NODE_OPT_PREFIX; i++) {
		const struct tfs_node_conf_default *d = &n->def[i];

		if (src->value && d->value) {
			unsigned line = d->line > src->line ? d->line : src->line;

			if (err) {
				tfs_dbuf_reset(err);
				tfs_dbuf_addf(err,
					      "%s: [defaults] source and %s exclude each other "
					      "(source is s3://BUCKET[/PREFIX])",
					      tfs_node_conf_where(n, line, where, sizeof(where)),
					      tfs_node_opt_name((enum tfs_node_opt)i));
			}
			return EINVAL;
		}
	}
	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		const struct tfs_node_conf_default *d = &n->def[i];
		const struct tfs_node_conf_limit *l = &n->limit[i];
		enum tfs_node_opt o = (enum tfs_node_opt)i;

		if (d->value == NULL || !l->set || tfs_node_opt_within(o, &d->parsed, l->value))
			continue;
		tfs_node_opt_format_limit(o, l->value, lim, sizeof(lim));
		if (err) {
			char q[TFS_NODE_QUOTE_BUFLEN];

			tfs_dbuf_reset(err);
			tfs_dbuf_addf(err,
				      "%s: [defaults] %s: %s is %s the limit %s = %s (line %u)",
				      tfs_node_conf_where(n, d->line, where, sizeof(where)),
				      tfs_node_opt_name(o), tfs_node_quote(q, sizeof(q), d->value),
				      tfs_node_opt_limit_kind(o) == TFS_NODE_LIMIT_MAX ? "above"
										       : "below",
				      tfs_node_opt_limit_key(o), lim, l->line);
		}
		return EINVAL;
	}
	return 0;
}

int tfs_node_conf_load(struct tfs_node_conf *n, enum tfs_node_driver driver, const char *path,
		       bool must_exist, struct tfs_dbuf *err)
{
	struct tfs_dbuf data;
	int rc;

	memset(n, 0, sizeof(*n));
	n->driver = driver;
	if (err)
		tfs_dbuf_reset(err);
	rc = set_builtin(n);
	if (rc) {
		tfs_node_conf_clear(n);
		return rc;
	}
	tfs_dbuf_init(&data, MAX_FILE);
	rc = read_file(path, must_exist, &data, err);
	if (rc == ENOENT && !must_exist) {
		tfs_dbuf_free(&data);
		return 0;
	}
	if (rc)
		goto out;
	n->path = strdup(path);
	if (n->path == NULL) {
		rc = ENOMEM;
		goto out;
	}
	struct load_ctx c = {
		.n = n,
		.file = path,
		.err = err,
	};
	tfs_ini_reader_init(&c.rd, tfs_dbuf_str(&data), tfs_dbuf_len(&data));
	int bad = ini_parse_stream(tfs_ini_read_line, &c.rd, on_value, &c);
	if (c.rc) {
		rc = c.rc;
	} else if (c.rd.err[0]) {
		/* a line the reader refused */
		c.rd.lineno = c.rd.err_line;
		fail(&c, "%s", c.rd.err);
		rc = EINVAL;
	} else if (bad > 0) {
		c.rd.lineno = (unsigned)bad;
		fail(&c, "syntax error (expected [section] or key = value)");
		rc = EINVAL;
	} else if (bad < 0) {
		rc = ENOMEM;
	}
	if (rc == 0)
		rc = check_whole(n, err);
out:
	tfs_dbuf_free(&data);
	if (rc)
		tfs_node_conf_clear(n);
	return rc;
}
