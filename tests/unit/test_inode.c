/* test_inode.c - unit tests for vfs/inode.c: which version's attributes
 * the kernel may hold (tfs_itable_set_attr_etag, tfs_itable_swap_attr_etag). */
#include "config.h"

#include <criterion/criterion.h>

#include "inode.h"

static struct tfs_itable *t;
static struct tfs_inode *in;

static void setup(void)
{
	cr_assert_eq(tfs_itable_create(&t), 0);
	cr_assert_eq(tfs_itable_lookup(t, "d/f", TFS_FT_FILE, 0, &in), 0);
}

static void teardown(void)
{
	tfs_itable_destroy(t);
}

TestSuite(attr_etag, .init = setup, .fini = teardown);

Test(attr_etag, open_after_lookup_of_same_version_sends_nothing)
{
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
}

Test(attr_etag, open_of_another_version_than_sent)
{
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
	/* Recorded: the next open of v2 sends nothing. */
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
}

Test(attr_etag, nothing_sent_yet)
{
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
}

Test(attr_etag, replies_of_two_versions_are_ambiguous)
{
	/* The kernel keeps the first applied of racing replies: after v1 and
	 * v2 it may hold v1, although v2 was sent last. */
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	tfs_itable_set_attr_etag(t, in, "\"v2\"");
	tfs_itable_set_attr_etag(t, in, "\"v2\"");
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
	tfs_itable_set_attr_etag(t, in, "\"v2\"");
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v2\""));
}

Test(attr_etag, staged_or_changed_size_is_never_a_version)
{
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
	tfs_itable_set_attr_etag(t, in, ""); /* written, truncated: the kernel's own size */
	tfs_itable_set_attr_etag(t, in, "\"v1\"");
	cr_assert_not(tfs_itable_swap_attr_etag(t, in, "\"v1\""));
}

/* ---- the persisted node table (cache/nodes.h): what a resumed daemon
 * resolves ---- */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lmdb_env.h"
#include "nodes.h"

static char root[64];
static struct tfs_log plog;
static MDB_env *env;

static void quiet(void *ctx, enum tfs_log_level level, const char *line)
{
	(void)ctx;
	(void)level;
	(void)line;
}

static void psetup(void)
{
	snprintf(root, sizeof(root), "/tmp/tfs_inode_XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	tfs_log_init(&plog, quiet, NULL, TFS_LOG_DEBUG);
	cr_assert_eq(tfs_lmdb_open(root, 64u << 20, &plog, &env), 0);
}

static void pteardown(void)
{
	tfs_lmdb_close(env);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}

/* A table of mount `owner`: fresh (wiping what was kept) or resumed. */
static struct tfs_itable *table(const char *owner, bool resumed, struct tfs_nodes **store)
{
	struct tfs_itable *it;
	cr_assert_eq(tfs_nodes_open(env, owner, !resumed, &plog, store), 0);
	cr_assert_eq(tfs_itable_open(*store, resumed, &plog, &it), 0);
	return it;
}

static uint64_t look(struct tfs_itable *it, const char *path, enum tfs_ftype type)
{
	struct tfs_inode *x;
	cr_assert_eq(tfs_itable_lookup(it, path, type, 0, &x), 0);
	return x->ino;
}

static void path_is(struct tfs_itable *it, uint64_t ino, const char *want)
{
	char buf[256];
	struct tfs_inode *x = tfs_itable_find(it, ino);
	cr_assert_not_null(x, "node %llu does not resolve", (unsigned long long)ino);
	cr_assert_eq(tfs_itable_path(it, x, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, want);
}

TestSuite(persisted, .init = psetup, .fini = pteardown);

/* The first table is never destroyed: a killed daemon writes nothing at
 * its end. */
Test(persisted, resumed_table_resolves_every_node_id)
{
	struct tfs_nodes *s1, *s2;
	struct tfs_itable *a = table("/mnt/a", false, &s1);
	uint64_t d = look(a, "d", TFS_FT_DIR), f = look(a, "d/f", TFS_FT_FILE);
	struct tfs_inode *l;
	cr_assert_eq(tfs_itable_lookup(a, "d/l", TFS_FT_FILE, 0120000, &l), 0);
	struct tfs_itable *b = table("/mnt/a", true, &s2);
	path_is(b, d, "d");
	path_is(b, f, "d/f");
	path_is(b, l->ino, "d/l");
	cr_assert_eq(tfs_itable_find(b, d)->type, TFS_FT_DIR);
	cr_assert_eq(tfs_itable_find(b, l->ino)->fmt, 0120000u);
	/* The same path keeps its ID; a new one is above every ID given. */
	cr_assert_eq(look(b, "d/f", TFS_FT_FILE), f);
	cr_assert_gt(look(b, "d/g", TFS_FT_FILE), l->ino);
	tfs_itable_destroy(b);
	tfs_itable_destroy(a); /* after b loaded: as a dead daemon's */
	tfs_nodes_close(s2);
	tfs_nodes_close(s1);
}

static size_t last_txn(void)
{
	MDB_envinfo info;
	cr_assert_eq(mdb_env_info(env, &info), 0);
	return info.me_last_txnid;
}

Test(persisted, a_forgotten_id_comes_back_only_for_its_own_path)
{
	struct tfs_nodes *s1, *s2;
	struct tfs_itable *a = table("/mnt/a", false, &s1);
	uint64_t f = look(a, "f", TFS_FT_FILE), g = look(a, "g", TFS_FT_FILE);
	tfs_itable_forget(a, f, 1);
	tfs_itable_forget(a, g, 1);
	cr_assert_eq(tfs_itable_persist(a), 0);
	cr_assert_null(tfs_itable_find(a, f));
	/* The same name and type takes its ID back and writes nothing. */
	size_t txn = last_txn();
	cr_assert_eq(look(a, "f", TFS_FT_FILE), f);
	cr_assert_eq(last_txn(), txn, "a ghost's lookup wrote to LMDB");
	uint64_t reused = 0, retired = 0;
	tfs_itable_ghost_counts(a, &reused, &retired);
	cr_assert_eq(reused, 1);
	/* Another type under g's name, or another name: new IDs above all. */
	uint64_t gd = look(a, "g", TFS_FT_DIR);
	cr_assert_gt(gd, g);
	cr_assert_gt(look(a, "h", TFS_FT_FILE), gd);
	/* A resumed daemon knows every ID the kernel may hold and gives out
	 * new ones above every ID stored, ghosts included. */
	struct tfs_itable *b = table("/mnt/a", true, &s2);
	path_is(b, f, "f");
	cr_assert_gt(look(b, "i", TFS_FT_FILE), gd);
	tfs_itable_destroy(b);
	tfs_itable_destroy(a); /* after b loaded: as a dead daemon's */
	tfs_nodes_close(s2);
	tfs_nodes_close(s1);
}

Test(persisted, a_ghost_whose_record_changed_is_not_reused)
{
	struct tfs_nodes *s1;
	struct tfs_itable *a = table("/mnt/a", false, &s1);
	uint64_t f = look(a, "f", TFS_FT_FILE);
	tfs_itable_forget(a, f, 1);
	/* Someone else's write to the record: the ghost must not be trusted. */
	struct tfs_node_rec r = { .ino = f, .type = TFS_FT_FILE, .path = "other" };
	cr_assert_eq(tfs_nodes_write(s1, &r, 1, 100), 0);
	uint64_t again = look(a, "f", TFS_FT_FILE);
	cr_assert_neq(again, f);
	uint64_t reused = 0, retired = 0;
	tfs_itable_ghost_counts(a, &reused, &retired);
	cr_assert_eq(reused, 0);
	cr_assert_eq(retired, 1);
	tfs_itable_destroy(a);
	tfs_nodes_close(s1);
}

Test(persisted, rename_of_a_directory_moves_its_descendants)
{
	struct tfs_nodes *s1, *s2;
	struct tfs_itable *a = table("/mnt/a", false, &s1);
	uint64_t d = look(a, "d", TFS_FT_DIR), sub = look(a, "d/sub", TFS_FT_DIR);
	uint64_t g = look(a, "d/sub/g", TFS_FT_FILE), other = look(a, "dd/x", TFS_FT_FILE);
	uint64_t victim = look(a, "e", TFS_FT_DIR);
	cr_assert_eq(tfs_itable_rename(a, "d", "e"), 0);
	struct tfs_itable *b = table("/mnt/a", true, &s2);
	path_is(b, d, "e");
	path_is(b, sub, "e/sub");
	path_is(b, g, "e/sub/g");
	path_is(b, other, "dd/x");
	char buf[64];
	cr_assert_eq(tfs_itable_path(b, tfs_itable_find(b, victim), buf, sizeof(buf)), 0);
	cr_assert(tfs_itable_path_is_detached(buf), "replaced directory at '%s'", buf);
	tfs_itable_destroy(b);
	tfs_itable_destroy(a); /* after b loaded: as a dead daemon's */
	tfs_nodes_close(s2);
	tfs_nodes_close(s1);
}

Test(persisted, detached_node_stays_detached)
{
	struct tfs_nodes *s1, *s2;
	struct tfs_itable *a = table("/mnt/a", false, &s1);
	uint64_t f = look(a, "f", TFS_FT_FILE);
	cr_assert_eq(tfs_itable_detach(a, "f"), 0);
	struct tfs_itable *b = table("/mnt/a", true, &s2);
	char buf[64];
	cr_assert_eq(tfs_itable_path(b, tfs_itable_find(b, f), buf, sizeof(buf)), 0);
	cr_assert(tfs_itable_path_is_detached(buf));
	cr_assert_neq(look(b, "f", TFS_FT_FILE), f, "a new file of the name reused the node");
	tfs_itable_destroy(b);
	tfs_itable_destroy(a); /* after b loaded: as a dead daemon's */
	tfs_nodes_close(s2);
	tfs_nodes_close(s1);
}

Test(persisted, forget_of_unknown_id_and_resurrected_counts)
{
	struct tfs_nodes *s1, *s2;
	struct tfs_itable *a = table("/mnt/a", false, &s1);
	uint64_t f = look(a, "f", TFS_FT_FILE);
	look(a, "f", TFS_FT_FILE); /* the kernel holds 2 */
	struct tfs_itable *b = table("/mnt/a", true, &s2);
	tfs_itable_forget(b, 999999, 5); /* never given out: nothing happens */
	uint64_t n = tfs_itable_count(b);
	/* This daemon gives one lookup; the kernel gives back that one (a
	 * reply it could not use): the inode stays, the kernel holds 2. */
	cr_assert_eq(look(b, "f", TFS_FT_FILE), f);
	tfs_itable_forget(b, f, 1);
	cr_assert_not_null(tfs_itable_find(b, f));
	/* Its final FORGET carries the earlier daemon's 2: gone. */
	tfs_itable_forget(b, f, 2);
	cr_assert_null(tfs_itable_find(b, f));
	cr_assert_eq(tfs_itable_count(b), n - 1);
	tfs_itable_forget(b, f, 1); /* more than it knew: still a no-op */
	tfs_itable_destroy(b);
	tfs_itable_destroy(a); /* after b loaded: as a dead daemon's */
	tfs_nodes_close(s2);
	tfs_nodes_close(s1);
}

Test(persisted, fresh_mount_wipes_and_mounts_keep_apart)
{
	struct tfs_nodes *s1, *s2, *s3, *s4;
	struct tfs_itable *a = table("/mnt/a", false, &s1);
	struct tfs_itable *o = table("/mnt/other", false, &s3);
	uint64_t f = look(a, "f", TFS_FT_FILE);
	uint64_t g = look(o, "g", TFS_FT_FILE);
	tfs_itable_destroy(a);
	tfs_nodes_close(s1);
	/* A new mount of /mnt/a starts clean; /mnt/other's table stays. */
	struct tfs_itable *b = table("/mnt/a", false, &s2);
	cr_assert_null(tfs_itable_find(b, f));
	tfs_itable_destroy(b);
	tfs_nodes_close(s2);
	b = table("/mnt/a", true, &s2);
	cr_assert_null(tfs_itable_find(b, f), "the fresh mount did not wipe the table");
	struct tfs_itable *o2 = table("/mnt/other", true, &s4);
	path_is(o2, g, "g");
	tfs_itable_destroy(o2);
	tfs_itable_destroy(o);
	tfs_itable_destroy(b);
	tfs_nodes_close(s2);
	tfs_nodes_close(s3);
	tfs_nodes_close(s4);
}

/* ---- the bound (tfs_itable_set_max, tfs_itable_pick_trim) ---- */

TestSuite(trim);

Test(trim, excess_is_what_lies_above_the_bound)
{
	struct tfs_itable *tt;
	struct tfs_inode *x;
	char p[32];
	cr_assert_eq(tfs_itable_create(&tt), 0);
	for (int i = 0; i < 10; i++) {
		snprintf(p, sizeof(p), "f%d", i);
		cr_assert_eq(tfs_itable_lookup(tt, p, TFS_FT_FILE, 0, &x), 0);
	}
	cr_assert_eq(tfs_itable_excess(tt), 0); /* no bound */
	tfs_itable_set_max(tt, 4);
	cr_assert_eq(tfs_itable_excess(tt), 11 - 4); /* with the root */
	tfs_itable_set_max(tt, 100);
	cr_assert_eq(tfs_itable_excess(tt), 0);
	tfs_itable_destroy(tt);
}

Test(trim, picks_names_with_their_parent_and_spares_the_recently_used_once)
{
	struct tfs_itable *tt;
	struct tfs_inode *d, *a, *b, *x;
	struct tfs_itable_victim v[8];
	cr_assert_eq(tfs_itable_create(&tt), 0);
	cr_assert_eq(tfs_itable_lookup(tt, "d", TFS_FT_DIR, 0, &d), 0);
	cr_assert_eq(tfs_itable_lookup(tt, "d/a", TFS_FT_FILE, 0, &a), 0);
	cr_assert_eq(tfs_itable_lookup(tt, "d/b", TFS_FT_FILE, 0, &b), 0);
	cr_assert_eq(tfs_itable_lookup(tt, "gone", TFS_FT_FILE, 0, &x), 0);
	cr_assert_eq(tfs_itable_detach(tt, "gone"), 0);
	/* Everything was just looked up: the first turn only clears the
	 * bits, the second picks d, d/a and d/b; never the root or a
	 * detached inode. */
	size_t n = tfs_itable_pick_trim(tt, v, 8);
	cr_assert_eq(n, 3);
	bool seen_d = false, seen_a = false, seen_b = false;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(v[i].name, "d") == 0) {
			cr_assert_eq(v[i].parent, 1); /* FUSE_ROOT_ID */
			seen_d = true;
		} else if (strcmp(v[i].name, "a") == 0) {
			cr_assert_eq(v[i].parent, d->ino);
			seen_a = true;
		} else if (strcmp(v[i].name, "b") == 0) {
			cr_assert_eq(v[i].parent, d->ino);
			seen_b = true;
		}
	}
	cr_assert(seen_d && seen_a && seen_b);
	cr_assert_eq(tfs_itable_trim_count(tt), 3);
	/* A name used since (a request on it) is spared by the next turn. */
	cr_assert_eq(tfs_itable_find(tt, a->ino), a);
	n = tfs_itable_pick_trim(tt, v, 1);
	cr_assert_eq(n, 1);
	cr_assert_str_neq(v[0].name, "a");
	tfs_itable_destroy(tt);
}

Test(trim, a_name_without_a_parent_inode_is_skipped)
{
	struct tfs_itable *tt;
	struct tfs_inode *x;
	struct tfs_itable_victim v[4];
	cr_assert_eq(tfs_itable_create(&tt), 0);
	/* A resumed table may hold "p/q" without "p". */
	cr_assert_eq(tfs_itable_lookup(tt, "p/q", TFS_FT_FILE, 0, &x), 0);
	cr_assert_eq(tfs_itable_pick_trim(tt, v, 4), 0);
	tfs_itable_destroy(tt);
}
