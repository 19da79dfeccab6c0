/* s3_creds.c - credential resolution for the S3 backend (file, env, profile). */
#include "config.h"

#include "s3_creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void tfs_s3_creds_clear(struct tfs_s3_creds *c)
{
	wipe_free(c->access_key);
	wipe_free(c->secret_key);
	wipe_free(c->session_token);
	memset(c, 0, sizeof(*c));
}

struct profile_scan {
	const char *profile;
	struct tfs_s3_creds *out;
	bool nomem;
	bool any_section;
};

static int set_str(char **dst, const char *v, bool *nomem)
{
	char *s = strdup(v);
	if (s == NULL) {
		*nomem = true;
		return 0;
	}
	wipe_free(*dst);
	*dst = s;
	return 1;
}

static int on_kv(void *user, const char *section, const char *name, const char *value)
{
	struct profile_scan *ps = user;

	/* ~/.aws/config style names a profile "profile X"; credentials files
	 * use plain "X". */
	const char *sec = section;
	if (strncmp(sec, "profile ", 8) == 0)
		sec += 8;
	if (strcmp(sec, ps->profile) != 0)
		return 1;
	ps->any_section = true;
	if (strcmp(name, "aws_access_key_id") == 0)
		return set_str(&ps->out->access_key, value, &ps->nomem);
	if (strcmp(name, "aws_secret_access_key") == 0)
		return set_str(&ps->out->secret_key, value, &ps->nomem);
	if (strcmp(name, "aws_session_token") == 0)
		return set_str(&ps->out->session_token, value, &ps->nomem);
	return 1;
}

static char *trim(char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	size_t n = strlen(p);
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r' || p[n - 1] == '\n'))
		p[--n] = '\0';
	return p;
}

/* The AWS credentials file is INI, but not one libinih as Debian builds it
 * can read: its lines are limited to 199 bytes, and STS session tokens are
 * longer.  So the lines are read here (any length, with getline) and fed
 * to the same handler inih would call.  Returns 0 or the first bad line. */
static int parse_lines(FILE *f, struct profile_scan *ps)
{
	char *buf = NULL, section[256] = "";
	size_t cap = 0;
	int lineno = 0, bad = 0;
	while (bad == 0 && getline(&buf, &cap, f) >= 0) {
		lineno++;
		char *p = trim(buf);
		if (*p == '\0' || *p == '#' || *p == ';')
			continue;
		if (*p == '[') {
			char *end = strchr(p, ']');
			if (end == NULL || (size_t)(end - p - 1) >= sizeof(section)) {
				bad = lineno;
				continue;
			}
			*end = '\0';
			snprintf(section, sizeof(section), "%s", trim(p + 1));
			continue;
		}
		char *eq = strpbrk(p, "=:");
		if (eq == NULL) {
			bad = lineno;
			continue;
		}
		*eq = '\0';
		if (!on_kv(ps, section, trim(p), trim(eq + 1)) && ps->nomem)
			break;
	}
	free(buf);
	return bad;
}

/* Load `profile` from `path`.  `strict_perms` refuses group/other access.
 * Returns 0 (possibly with incomplete keys), ENOENT, EACCES, EINVAL. */
static int load_file(const char *path, const char *profile, bool strict_perms, bool must_exist,
		     const struct tfs_log *log, struct tfs_s3_creds *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT && !must_exist)
			return ENOENT;
		tfs_err(log, "s3: credentials file '%s': %s", path, strerror(e));
		return e == ENOENT ? ENOENT : EACCES;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		tfs_err(log, "s3: credentials file '%s' is not a regular file", path);
		return EINVAL;
	}
	if (strict_perms && (st.st_mode & 077)) {
		close(fd);
		tfs_err(log,
			"s3: credentials file '%s' has mode %04o: it must not be readable by "
			"group or others (chmod 600 '%s')",
			path, (unsigned)(st.st_mode & 07777), path);
		return EACCES;
	}
	FILE *f = fdopen(fd, "r");
	if (f == NULL) {
		close(fd);
		return ENOMEM;
	}
	struct profile_scan ps = { .profile = profile, .out = out };
	int line = parse_lines(f, &ps);
	fclose(f);
	if (ps.nomem)
		return ENOMEM;
	if (line != 0) {
		tfs_err(log, "s3: credentials file '%s': syntax error at line %d", path, line);
		return EINVAL;
	}
	return 0;
}

static bool complete(const struct tfs_s3_creds *c)
{
	return c->access_key && *c->access_key && c->secret_key && *c->secret_key;
}

static int from_env(struct tfs_s3_creds *out)
{
	const char *ak = getenv("AWS_ACCESS_KEY_ID");
	const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
	const char *tok = getenv("AWS_SESSION_TOKEN");
	bool nomem = false;

	if (ak == NULL || sk == NULL || *ak == '\0' || *sk == '\0')
		return ENOENT;
	set_str(&out->access_key, ak, &nomem);
	set_str(&out->secret_key, sk, &nomem);
	if (tok && *tok)
		set_str(&out->session_token, tok, &nomem);
	if (nomem)
		return ENOMEM;
	snprintf(out->source, sizeof(out->source), "environment (AWS_ACCESS_KEY_ID)");
	return 0;
}

int tfs_s3_creds_load(const char *credentials_file, const char *profile, const struct tfs_log *log,
		      struct tfs_s3_creds *out)
{
	int rc;
	const char *env_profile = getenv("AWS_PROFILE");
	const char *prof = profile && *profile
				   ? profile
				   : (env_profile && *env_profile ? env_profile : "default");

	memset(out, 0, sizeof(*out));
	if (credentials_file && *credentials_file) {
		rc = load_file(credentials_file, prof, true, true, log, out);
		if (rc == 0 && !complete(out)) {
			tfs_err(log,
				"s3: credentials file '%s' has no aws_access_key_id and "
				"aws_secret_access_key in profile [%s]",
				credentials_file, prof);
			rc = EACCES;
		}
		if (rc == 0)
			snprintf(out->source, sizeof(out->source), "%s [%s]", credentials_file,
				 prof);
		else
			tfs_s3_creds_clear(out);
		return rc;
	}

	rc = from_env(out);
	if (rc != ENOENT) {
		if (rc)
			tfs_s3_creds_clear(out);
		return rc;
	}

	char path[4096];
	const char *shared = getenv("AWS_SHARED_CREDENTIALS_FILE");
	const char *home = getenv("HOME");
	if (shared && *shared)
		snprintf(path, sizeof(path), "%s", shared);
	else if (home && *home)
		snprintf(path, sizeof(path), "%s/.aws/credentials", home);
	else
		path[0] = '\0';
	if (path[0]) {
		rc = load_file(path, prof, true, false, log, out);
		if (rc == 0 && complete(out)) {
			snprintf(out->source, sizeof(out->source), "%s [%s]", path, prof);
			return 0;
		}
		tfs_s3_creds_clear(out);
		if (rc && rc != ENOENT)
			return rc;
	}
	tfs_err(log,
		"s3: no credentials: set credentials_file in [backend], or "
		"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or profile [%s] in %s",
		prof, path[0] ? path : "~/.aws/credentials");
	return EACCES;
}
