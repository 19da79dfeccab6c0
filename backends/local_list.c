/* local_list.c - listings of the local backend: a directory tree as S3
 * lists a bucket.
 *
 * Listing order is S3's: byte order of the full key.  A depth-first walk
 * gives that order when each directory's entries are sorted with a '/'
 * appended to directory names ("a-c" < "a/" < "a0").  The continuation
 * token is the last key or common prefix returned; the next page skips
 * whole subtrees that sort before it.  Entries are stat'ed relative to the
 * directory read, never followed: FIFOs, sockets and devices are left out
 * (logged), symlinks are listed as objects, and a directory holding a
 * marker file lists its marker key first.  Called through local.c's
 * operations table; calls local.c's helpers (local_internal.h).
 */
#include "config.h"

#include "backend_impl.h"
#include "dbuf.h"
#include "local_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- list ---- */

struct dent {
	char *name; /* with '/' appended for directories */
	bool dir;
};

static int dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->name, ((const struct dent *)b)->name);
}

struct walk {
	struct local *lb;
	const char *prefix;
	const char *delim;
	const char *token;
	size_t max;
	struct tfs_list_page *out;
	size_t count;
	bool full;      /* max items collected; looking for one more */
	bool truncated; /* a further item exists */
	char *last;     /* last key or prefix emitted (borrowed from out) */
	struct tfs_dbuf path;
};

/* Add `key` to the page: a common prefix, or an entry with the
 * attributes in *st (`target`: a symlink's, NULL for a file or marker). */
static int emit(struct walk *w, const char *key, bool is_prefix, const struct stat *st,
		const char *target)
{
	if (w->full) {
		w->truncated = true;
		return 0;
	}
	char *k = strdup(key);
	if (k == NULL)
		return ENOMEM;
	struct tfs_list_page *p = w->out;
	if (is_prefix) {
		char **np = realloc(p->prefixes, (p->n_prefixes + 1) * sizeof(*np));
		if (np == NULL) {
			free(k);
			return ENOMEM;
		}
		p->prefixes = np;
		p->prefixes[p->n_prefixes++] = k;
	} else {
		struct tfs_list_entry *ne = realloc(p->entries, (p->n_entries + 1) * sizeof(*ne));
		if (ne == NULL) {
			free(k);
			return ENOMEM;
		}
		p->entries = ne;
		struct tfs_list_entry *e = &p->entries[p->n_entries++];
		memset(e, 0, sizeof(*e));
		e->key = k;
		e->mtime = st->st_mtim.tv_sec;
		if (target != NULL) {
			e->size = strlen(target);
			local_make_link_etag(st, target, e->size, e->etag);
		} else {
			e->size = S_ISDIR(st->st_mode) ? 0 : (uint64_t)st->st_size;
			local_make_etag(st, e->etag);
		}
	}
	w->last = k;
	if (++w->count >= w->max)
		w->full = true;
	return 0;
}

/* File, symlink (an object too: *isdir false) or directory?  d_type when
 * the file system gives it, else lstat.  Anything else (a FIFO, socket,
 * device) is left out: -1, with a warning naming it when `w` is given
 * (rel: the directory's key). */
static int entry_kind(struct walk *w, const char *rel, DIR *d, const struct dirent *de, bool *isdir)
{
	if (de->d_type == DT_DIR || de->d_type == DT_REG || de->d_type == DT_LNK) {
		*isdir = de->d_type == DT_DIR;
		return 0;
	}
	struct stat st;
	if (de->d_type == DT_UNKNOWN) {
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -1;
		if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
			*isdir = S_ISDIR(st.st_mode);
			return 0;
		}
	}
	if (w != NULL)
		tfs_warn(w->lb->log,
			 "local: '%s%s' in %s is not a file, symlink or directory: "
			 "not listed",
			 local_esc(rel).s, local_esc(de->d_name).s, w->lb->root);
	return -1;
}

/* A new DIR stream on directory `dfd` (its own open file description, so
 * that reading it moves no other reader's offset), or NULL with errno. */
static DIR *open_stream(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

/* The sorted entries of directory `dfd` (key `rel`) whose sort key (the
 * name, with '/' after directories) is not below `lower` ("" for all):
 * entries below it hold only keys that sort before the continuation token,
 * so a page deep into a large directory sorts only what is left. */
static int read_dir(struct walk *w, int dfd, const char *rel, const char *lower, struct dent **out,
		    size_t *n_out)
{
	DIR *d = open_stream(dfd);
	if (d == NULL)
		return errno;
	struct dent *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		const char *nm = de->d_name;
		size_t len = strlen(nm);
		bool isdir;
		if (!local_segment_ok(nm, len) || entry_kind(w, rel, d, de, &isdir) != 0)
			continue;
		char *s = malloc(len + 2);
		if (s == NULL) {
			rc = ENOMEM;
			break;
		}
		memcpy(s, nm, len);
		s[len] = isdir ? '/' : '\0';
		s[len + 1] = '\0';
		if (lower[0] && strcmp(s, lower) < 0) {
			free(s);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct dent *nv = realloc(v, cap * sizeof(*nv));
			if (nv == NULL) {
				free(s);
				rc = ENOMEM;
				break;
			}
			v = nv;
		}
		v[n].name = s;
		v[n].dir = isdir;
		n++;
	}
	closedir(d);
	if (rc) {
		for (size_t i = 0; i < n; i++)
			free(v[i].name);
		free(v);
		return rc;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), dent_cmp);
	*out = v;
	*n_out = n;
	return 0;
}

/* Does directory `dfd` hold no file or directory? */
static bool dir_empty(int dfd)
{
	DIR *d = open_stream(dfd);
	if (d == NULL)
		return false;
	bool empty = true;
	struct dirent *de;
	while (empty && (de = readdir(d)) != NULL) {
		bool isdir;
		if (local_segment_ok(de->d_name, strlen(de->d_name)) &&
		    entry_kind(NULL, "", d, de, &isdir) == 0)
			empty = false;
	}
	closedir(d);
	return empty;
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* The subdirectory `dname` ("x/", as read_dir() names it) of `dfd`, opened
 * O_PATH without following a symlink.  0, or the errno (ENOENT, ENOTDIR,
 * ELOOP when it was replaced since it was read). */
static int open_subdir(int dfd, const char *dname, int *fd_out)
{
	char name[NAME_MAX + 2];
	size_t n = strlen(dname);
	if (n == 0 || n >= sizeof(name))
		return ENAMETOOLONG;
	memcpy(name, dname, n - 1);
	name[n - 1] = '\0';
	return local_open_last(dfd, name, O_PATH | O_DIRECTORY, 0, fd_out);
}

/* Emit the file or symlink `name` of `dfd` as `key`, stat'ed (and a
 * symlink read) without following it; anything else, or a symlink that
 * cannot be read, is left out. */
static int emit_entry(struct walk *w, int dfd, const char *name, const char *key)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	if (S_ISREG(st.st_mode))
		return emit(w, key, false, &st, NULL);
	if (!S_ISLNK(st.st_mode))
		return 0;
	char target[PATH_MAX];
	size_t n = 0;
	int rc = local_read_link(dfd, name, target, &n);
	if (rc) {
		tfs_warn(w->lb->log, "local: '%s' in %s: readlink: %s: not listed",
			 local_esc(key).s, w->lb->root, strerror(rc));
		return 0;
	}
	return emit(w, key, false, &st, target);
}

/* Walk directory `dfd`, key `rel` ("" or "a/b/", ending in '/'), whose keys
 * all start with rel.  Entries are stat'ed and entered relative to dfd,
 * never through a symlink; one descriptor is held per level of depth (at
 * most PATH_MAX / 2 levels, as keys are shorter than PATH_MAX). */
static int walk_dir(struct walk *w, int dfd, const char *rel)
{
	struct dent *v = NULL;
	size_t n = 0;
	char lower[NAME_MAX + 2] = "";
	if (w->token && starts_with(w->token, rel)) {
		const char *rest = w->token + strlen(rel);
		const char *sl = strchr(rest, '/');
		size_t ln = sl ? (size_t)(sl - rest) + 1 : strlen(rest);
		if (ln < sizeof(lower)) {
			memcpy(lower, rest, ln);
			lower[ln] = '\0';
		}
	}
	int rc = read_dir(w, dfd, rel, lower, &v, &n);
	if (rc == ENOENT || rc == ENOTDIR)
		return 0;
	if (rc)
		return rc;

	size_t base = strlen(rel);
	for (size_t i = 0; i < n && rc == 0 && !w->truncated; i++) {
		struct tfs_dbuf *p = &w->path;
		tfs_dbuf_reset(p);
		rc = tfs_dbuf_add(p, rel, base);
		if (rc == 0)
			rc = tfs_dbuf_adds(p, v[i].name);
		if (rc)
			break;
		char *key = strdup(tfs_dbuf_str(p));
		if (key == NULL) {
			rc = ENOMEM;
			break;
		}
		size_t klen = strlen(key);
		size_t plen = strlen(w->prefix);
		int cfd = -1;
		if (!starts_with(key, w->prefix)) {
			/* Only a directory on the way to the prefix is of use. */
			if (v[i].dir && klen < plen && starts_with(w->prefix, key) &&
			    open_subdir(dfd, v[i].name, &cfd) == 0) {
				rc = walk_dir(w, cfd, key);
				close(cfd);
			}
			free(key);
			continue;
		}
		/* Keys below the prefix: does the delimiter roll this up? */
		const char *rest = key + plen;
		const char *dpos = (w->delim && *w->delim) ? strstr(rest, w->delim) : NULL;
		if (dpos != NULL) {
			size_t cplen = (size_t)(dpos - key) + strlen(w->delim);
			/* Entire rollup lies at or before the token: skip. */
			char save = key[cplen];
			key[cplen] = '\0';
			bool skip = w->token && strcmp(key, w->token) <= 0;
			bool dup = w->last && strcmp(key, w->last) == 0;
			if (!skip && !dup) {
				struct stat dummy = { 0 };
				rc = emit(w, key, true, &dummy, NULL);
			}
			key[cplen] = save;
			free(key);
			continue;
		}
		if (v[i].dir) {
			/* Skip subtrees that sort wholly before the token. */
			if ((w->token && strcmp(key, w->token) < 0 &&
			     !starts_with(w->token, key)) ||
			    open_subdir(dfd, v[i].name, &cfd) != 0) {
				free(key);
				continue;
			}
			/* An empty directory stands for its marker object,
			 * and so does a marker file: the marker key sorts
			 * before the directory's other keys, as on S3. */
			bool empty = dir_empty(cfd);
			if ((empty ||
			     faccessat(cfd, MARKER_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0) &&
			    !(w->token && strcmp(key, w->token) <= 0)) {
				struct stat st;
				if (fstat(cfd, &st) == 0)
					rc = emit(w, key, false, &st, NULL);
			}
			if (rc == 0 && !empty)
				rc = walk_dir(w, cfd, key);
			close(cfd);
			free(key);
			continue;
		}
		if (!(w->token && strcmp(key, w->token) <= 0))
			rc = emit_entry(w, dfd, v[i].name, key);
		free(key);
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	return rc;
}

int local_list(void *priv, const char *prefix, const char *delimiter, const char *token,
	       size_t max_keys, struct tfs_list_page *out)
{
	struct local *lb = priv;
	struct walk w = {
		.lb = lb,
		.prefix = prefix,
		.delim = delimiter,
		.token = (token && *token) ? token : NULL,
		.max = max_keys,
		.out = out,
	};
	tfs_dbuf_init(&w.path, PATH_MAX);
	int rc = walk_dir(&w, lb->root_fd, "");
	tfs_dbuf_free(&w.path);
	if (rc == 0 && w.truncated) {
		out->next_token = strdup(w.last);
		if (out->next_token == NULL)
			rc = ENOMEM;
	}
	if (rc) {
		tfs_err(lb->log, "local: list '%s' in %s: %s", local_esc(prefix).s, lb->root,
			strerror(rc));
		tfs_list_page_clear(out);
		return rc == ENOMEM ? ENOMEM : EIO;
	}
	return 0;
}
