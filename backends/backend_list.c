/* backend_list.c - listings through the backend interface: the list
 * wrapper drops the names a backend returned outside the listing asked
 * for, and the walk over a listing's pages cuts one that does not end
 * (docs/semantics.md, "Replies from the object store"). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "clock.h"
#include "log.h"

/* Whether a name of a listing of `prefix` with delimiter `delim` ("": none)
 * belongs there: a key (`is_prefix` false) or a common prefix. */
static bool list_name_ok(const char *name, const char *prefix, size_t plen, const char *delim,
			 bool is_prefix)
{
	size_t dlen = strlen(delim);

	if (strncmp(name, prefix, plen) != 0)
		return false;
	const char *rest = name + plen;
	const char *d = dlen ? strstr(rest, delim) : NULL;
	if (!is_prefix)
		return d == NULL; /* a key holding the delimiter belongs to a common prefix */
	/* A common prefix: the delimiter once, at its end. */
	return d != NULL && d[dlen] == '\0';
}

/* Drop the names of *p that do not belong to the listing (compacting the
 * arrays in place); returns how many were dropped. */
static size_t list_drop_foreign(struct tfs_list_page *p, const char *prefix, const char *delim)
{
	size_t plen = strlen(prefix), w = 0, dropped = 0;

	for (size_t i = 0; i < p->n_entries; i++) {
		if (!list_name_ok(p->entries[i].key, prefix, plen, delim, false)) {
			free(p->entries[i].key);
			dropped++;
			continue;
		}
		p->entries[w++] = p->entries[i];
	}
	p->n_entries = w;
	w = 0;
	for (size_t i = 0; i < p->n_prefixes; i++) {
		if (!list_name_ok(p->prefixes[i], prefix, plen, delim, true)) {
			free(p->prefixes[i]);
			dropped++;
			continue;
		}
		p->prefixes[w++] = p->prefixes[i];
	}
	p->n_prefixes = w;
	return dropped;
}

int tfs_backend_list(struct tfs_backend *be, const char *prefix, const char *delimiter,
		     const char *token, size_t max_keys, struct tfs_list_page *out)
{
	uint64_t t0 = tfs_mono_ns();

	if (prefix == NULL)
		prefix = "";
	if (max_keys == 0 || max_keys > 1000)
		max_keys = 1000;
	int rc = be->ops->list(be->priv, prefix, delimiter, token, max_keys, out);
	if (rc == 0) {
		out->n_dropped += list_drop_foreign(out, prefix, delimiter ? delimiter : "");
		if (out->n_dropped)
			atomic_fetch_add_explicit(&be->stats.list_foreign_dropped, out->n_dropped,
						  memory_order_relaxed);
	}
	return tfs_backend_account(be, TFS_OP_LIST, rc, 0, t0);
}

void tfs_list_walk_clear(struct tfs_list_walk *w)
{
	free(w->token);
	free(w->mark);
	memset(w, 0, sizeof(*w));
}

/* Brent's cycle detection over the tokens: `mark` is the token after page
 * 1, 2, 4, 8...; a token equal to it closes a loop.  Returns 0, EIO (a
 * loop) or ENOMEM. */
static int walk_step(struct tfs_list_walk *w, const char *next)
{
	if (w->mark && strcmp(w->mark, next) == 0)
		return EIO;
	if (w->mark_at == 0)
		w->mark_at = 1;
	if (w->pages == w->mark_at) {
		char *m = strdup(next);
		if (m == NULL)
			return ENOMEM;
		free(w->mark);
		w->mark = m;
		w->mark_at *= 2;
	}
	return 0;
}

int tfs_backend_list_walk(struct tfs_backend *be, const struct tfs_log *log,
			  struct tfs_list_walk *w, const char *prefix, const char *delimiter,
			  size_t max_keys, struct tfs_list_page *out)
{
	const char *what = NULL;
	int rc;

	if (w->done)
		return EINVAL;
	if (prefix == NULL)
		prefix = "";
	if (w->pages >= TFS_LIST_WALK_MAX_PAGES) {
		what = "more pages than the limit";
		rc = EIO;
		goto loop;
	}
	rc = tfs_backend_list(be, prefix, delimiter, w->token, max_keys, out);
	if (rc) {
		w->done = true;
		return rc;
	}
	w->pages++;
	if (out->n_dropped && log)
		tfs_warn(log, "listing '%s' of %s: dropped %zu names outside it", prefix,
			 tfs_backend_describe(be), out->n_dropped);
	free(w->token);
	w->token = NULL;
	if (out->next_token == NULL) {
		w->done = true;
		return 0;
	}
	rc = walk_step(w, out->next_token);
	if (rc == 0) {
		w->token = strdup(out->next_token);
		if (w->token == NULL)
			rc = ENOMEM;
	}
	if (rc == 0)
		return 0;
	tfs_list_page_clear(out);
	if (rc == ENOMEM) {
		w->done = true;
		return rc;
	}
	what = "a continuation token came back";
loop:
	atomic_fetch_add_explicit(&be->stats.list_loops, 1, memory_order_relaxed);
	if (log)
		tfs_err(log,
			"listing '%s' of %s: %s after %" PRIu64 " pages: the listing does not end",
			prefix, tfs_backend_describe(be), what, w->pages);
	w->done = true;
	return EIO;
}
