/* test_meta.c - the metadata cache's listing ahead of lookups, against a
 * scripted backend whose LIST can be held at a gate: how far a listing
 * ahead goes depends on the lookups that arrive while it runs, and the
 * gate makes that order deterministic. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_impl.h"
#include "clock.h"
#include "lmdb_env.h"
#include "log.h"
#include "meta.h"

#define MAP_SIZE (64ull << 20)
/* Listed objects are this large or more: settled by the listing alone
 * (tfs_meta_settled()), so a lookup answered by it makes no HEAD. */
#define OBJ_SIZE TFS_META_PROBE_SIZE

/* ---- a scripted backend: the root holds "d/", d holds f00000..f<n-1> ---- */

struct sb {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned n;             /* objects in d */
	bool gate_open;         /* LIST waits while false */
	unsigned lists_entered; /* LISTs of d/ begun (before the gate) */
	unsigned lists;         /* LISTs of d/ answered: pages of its listings */
	unsigned heads;
};

static bool parse_name(const struct sb *b, const char *key, unsigned *idx)
{
	char tail;
	return sscanf(key, "d/f%5u%c", idx, &tail) == 1 && strlen(key) == 8 && *idx < b->n;
}

static int sb_head(void *priv, const char *key, struct tfs_obj_meta *out)
{
	struct sb *b = priv;
	unsigned idx;
	pthread_mutex_lock(&b->mu);
	b->heads++;
	pthread_mutex_unlock(&b->mu);
	if (!parse_name(b, key, &idx))
		return ENOENT;
	memset(out, 0, sizeof(*out));
	out->size = OBJ_SIZE + idx;
	snprintf(out->etag, sizeof(out->etag), "\"e%u\"", idx);
	out->mtime = 1600000000;
	return 0;
}

static int sb_list(void *priv, const char *prefix, const char *delimiter, const char *token,
		   size_t max_keys, struct tfs_list_page *out)
{
	struct sb *b = priv;
	(void)delimiter;
	memset(out, 0, sizeof(*out));
	if (prefix[0] == '\0') {
		out->prefixes = calloc(1, sizeof(char *));
		out->prefixes[0] = strdup("d/");
		out->n_prefixes = 1;
		return 0;
	}
	if (strcmp(prefix, "d/") != 0)
		return 0; /* is "d/<name>/" a directory?  No. */
	pthread_mutex_lock(&b->mu);
	b->lists_entered++;
	pthread_cond_broadcast(&b->cv);
	while (!b->gate_open)
		pthread_cond_wait(&b->cv, &b->mu);
	b->lists++;
	pthread_mutex_unlock(&b->mu);
	char *tail = NULL;
	unsigned long start = token ? strtoul(token, &tail, 10) : 0;
	cr_assert(token == NULL || (*token && *tail == '\0' && start <= b->n), "bad token '%s'",
		  token);
	unsigned end = start + max_keys < b->n ? (unsigned)(start + max_keys) : b->n;
	out->entries = calloc(end - start + 1, sizeof(*out->entries));
	for (unsigned i = (unsigned)start; i < end; i++) {
		struct tfs_list_entry *e = &out->entries[out->n_entries++];
		char key[16];
		snprintf(key, sizeof(key), "d/f%05u", i);
		e->key = strdup(key);
		e->size = OBJ_SIZE + i;
		snprintf(e->etag, sizeof(e->etag), "\"e%u\"", i);
		e->mtime = 1600000000;
	}
	if (end < b->n) {
		char t[16];
		snprintf(t, sizeof(t), "%u", end);
		out->next_token = strdup(t);
	}
	return 0;
}

static void sb_destroy(void *priv)
{
	(void)priv;
}

static const struct tfs_backend_ops sb_ops = {
	.name = "scripted",
	.head = sb_head,
	.list = sb_list,
	.destroy = sb_destroy,
};

static unsigned sb_get(struct sb *b, unsigned *field)
{
	pthread_mutex_lock(&b->mu);
	unsigned v = *field;
	pthread_mutex_unlock(&b->mu);
	return v;
}

static void sb_open_gate(struct sb *b)
{
	pthread_mutex_lock(&b->mu);
	b->gate_open = true;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

/* Wait (up to 10 s) until `n` LIST calls have begun. */
static void sb_wait_entered(struct sb *b, unsigned n)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&b->mu);
	while (b->lists_entered < n)
		cr_assert_eq(pthread_cond_timedwait(&b->cv, &b->mu, &dl), 0, "no LIST began");
	pthread_mutex_unlock(&b->mu);
}

/* ---- the cache over it ---- */

struct t {
	char root[64];
	struct sb sb;
	struct tfs_backend *be;
	struct tfs_log log;
	MDB_env *env;
	struct tfs_meta *m;
};

static void drop_line(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	(void)level;
	(void)line;
}

static void t_open(struct t *t, unsigned n, bool gate_open)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->sb.mu, NULL);
	pthread_cond_init(&t->sb.cv, NULL);
	t->sb.n = n;
	t->sb.gate_open = gate_open;
	snprintf(t->root, sizeof(t->root), "/tmp/tfs-meta-XXXXXX");
	cr_assert_not_null(mkdtemp(t->root));
	tfs_log_init(&t->log, drop_line, NULL, TFS_LOG_DEBUG);
	cr_assert_eq(tfs_backend_new(&sb_ops, &t->sb, "scripted", &t->be), 0);
	cr_assert_eq(tfs_lmdb_open(t->root, MAP_SIZE, &t->log, &t->env), 0);
	struct tfs_cache_config cc = {
		.block_size = 1 << 20,
		.metadata_ttl_ms = UINT64_MAX,
		.list_ahead = true,
	};
	cr_assert_eq(tfs_meta_open(t->env, t->be, &cc, &t->log, &t->m), 0);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void t_close(struct t *t)
{
	sb_open_gate(&t->sb); /* a lister held at the gate must finish */
	tfs_meta_close(t->m);
	tfs_lmdb_close(t->env);
	tfs_backend_destroy(t->be);
	nftw(t->root, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static uint64_t stat_of(struct t *t, const char *name)
{
	struct json_object *o = json_object_new_object(), *md, *v;
	tfs_meta_stats(t->m, o);
	cr_assert(json_object_object_get_ex(o, "metadata", &md));
	cr_assert(json_object_object_get_ex(md, name, &v), "no metadata.%s", name);
	uint64_t r = json_object_get_uint64(v);
	json_object_put(o);
	return r;
}

/* Wait (up to 10 s) until no listing ahead is queued or running. */
static void wait_idle(struct t *t)
{
	for (int i = 0; i < 10000 && stat_of(t, "list_ahead_pending"); i++)
		usleep(1000);
	cr_assert_eq(stat_of(t, "list_ahead_pending"), 0, "listing ahead never finished");
}

static int lookup(struct t *t, unsigned idx)
{
	char name[16];
	struct tfs_attr a;
	snprintf(name, sizeof(name), "f%05u", idx);
	int rc = tfs_meta_lookup(t->m, "d", name, &a, NULL);
	if (rc == 0)
		cr_assert_eq(a.size, OBJ_SIZE + idx, "%s: size %llu", name,
			     (unsigned long long)a.size);
	return rc;
}

static int count_entry(void *ctx, const char *name, const struct tfs_attr *a)
{
	(void)name;
	(void)a;
	(*(unsigned *)ctx)++;
	return 0;
}

/* ---- tests ---- */

Test(list_ahead, stops_after_one_page_without_lookups)
{
	struct t t;
	t_open(&t, 3500, true); /* four pages */
	cr_assert_eq(lookup(&t, 0), 0);
	cr_assert_eq(t.sb.heads, 1);
	wait_idle(&t);
	cr_assert_eq(sb_get(&t.sb, &t.sb.lists), 1, "listed %u pages for one lookup", t.sb.lists);
	cr_assert_eq(stat_of(&t, "listed_ahead"), 1);
	cr_assert_eq(stat_of(&t, "listed_ahead_partial"), 1);

	/* The first page answers lookups; a name beyond it is HEADed, and so
	 * is a missing one; none of them lists again. */
	cr_assert_eq(lookup(&t, 500), 0);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), 1, "a listed name was HEADed");
	cr_assert_eq(lookup(&t, 3000), 0);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), 2);
	cr_assert_eq(lookup(&t, 9999), ENOENT);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), 3);
	wait_idle(&t);
	cr_assert_eq(sb_get(&t.sb, &t.sb.lists), 1, "a partial listing was listed again");

	/* A readdir is never served from it: the directory is listed whole. */
	unsigned seen = 0;
	cr_assert_eq(tfs_meta_readdir(t.m, "d", "", count_entry, &seen), 0);
	cr_assert_eq(seen, 3500);
	cr_assert_eq(sb_get(&t.sb, &t.sb.lists), 1 + 4);
	/* ... and that full listing answers "no such name". */
	cr_assert_eq(lookup(&t, 9998), ENOENT);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), 3);
	t_close(&t);
}

Test(list_ahead, goes_on_one_page_per_lookup)
{
	struct t t;
	t_open(&t, 4500, false); /* five pages; LIST held at the gate */
	cr_assert_eq(lookup(&t, 0), 0);
	sb_wait_entered(&t.sb, 1);
	/* Two lookups while page 1 is on its way: pages 2 and 3, not 4. */
	cr_assert_eq(lookup(&t, 1), 0);
	cr_assert_eq(lookup(&t, 2), 0);
	sb_open_gate(&t.sb);
	wait_idle(&t);
	cr_assert_eq(sb_get(&t.sb, &t.sb.lists), 3, "listed %u pages after 2 lookups", t.sb.lists);
	cr_assert_eq(stat_of(&t, "listed_ahead_partial"), 1);
	unsigned h = sb_get(&t.sb, &t.sb.heads);
	cr_assert_eq(lookup(&t, 2999), 0);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), h, "page 3 does not answer lookups");
	cr_assert_eq(lookup(&t, 3000), 0);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), h + 1);
	t_close(&t);
}

Test(list_ahead, lists_whole_directory_while_lookups_keep_up)
{
	struct t t;
	t_open(&t, 2500, false); /* three pages */
	cr_assert_eq(lookup(&t, 0), 0);
	sb_wait_entered(&t.sb, 1);
	for (unsigned i = 1; i <= 2; i++)
		cr_assert_eq(lookup(&t, i), 0);
	sb_open_gate(&t.sb);
	wait_idle(&t);
	cr_assert_eq(sb_get(&t.sb, &t.sb.lists), 3);
	cr_assert_eq(stat_of(&t, "listed_ahead_partial"), 0);
	unsigned h = sb_get(&t.sb, &t.sb.heads);
	cr_assert_eq(lookup(&t, 2499), 0);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), h, "the last page does not answer lookups");
	/* Listed ahead, complete or not, it still asks for names it lacks. */
	cr_assert_eq(lookup(&t, 7777), ENOENT);
	cr_assert_eq(sb_get(&t.sb, &t.sb.heads), h + 1);
	/* A readdir makes it a listing the user has seen: no new LIST. */
	unsigned seen = 0;
	cr_assert_eq(tfs_meta_readdir(t.m, "d", "", count_entry, &seen), 0);
	cr_assert_eq(seen, 2500);
	cr_assert_eq(sb_get(&t.sb, &t.sb.lists), 3);
	t_close(&t);
}

struct find {
	const char *name;
	bool found;
};

static int find_entry(void *ctx, const char *name, const struct tfs_attr *a)
{
	struct find *f = ctx;
	(void)a;
	if (strcmp(name, f->name) == 0)
		f->found = true;
	return 0;
}

/* A name deleted (write-back retired its DELETE, or a rename moved it)
 * while a listing that began before is in flight stays gone: the listing's
 * older answer does not bring it back. */
Test(list_ahead, a_name_forgotten_during_a_listing_stays_gone)
{
	struct t t;
	t_open(&t, 5, false);
	cr_assert_eq(lookup(&t, 0), 0);
	sb_wait_entered(&t.sb, 1); /* the listing ahead has begun */
	/* Its start and the deletion are in different milliseconds. */
	uint64_t t0 = tfs_wall_ms();
	while (tfs_wall_ms() <= t0 + 1)
		usleep(200);
	MDB_txn *txn;
	cr_assert_eq(mdb_txn_begin(t.env, NULL, 0, &txn), 0);
	cr_assert_eq(tfs_meta_txn_forget(t.m, txn, "d/f00003"), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	sb_open_gate(&t.sb);
	wait_idle(&t);
	struct find f = { "f00003", false };
	cr_assert_eq(tfs_meta_readdir(t.m, "d", "", find_entry, &f), 0);
	cr_assert_not(f.found, "the listing brought a deleted name back");
	cr_assert_eq(sb_get(&t.sb, &t.sb.lists), 1);
	t_close(&t);
}
