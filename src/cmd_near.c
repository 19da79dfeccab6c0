/* cmd_near.c - `tierfs near gc`: keep the [near] copies (docs/cluster.md)
 * under a size, for stores without lifecycle rules. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "near_key.h"
#include "stack.h"
#include "units.h"

/* Most copies one gc holds in memory: a key and two numbers each. */
#define GC_MAX_COPIES 10000000u

struct copy {
	char *key;
	uint64_t size;
	int64_t mtime;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: tierfs near [-c CONF] [-o SECTION.KEY=VALUE]... [-v] gc --max-size SIZE "
		   "[--dry-run] [--whole-bucket]\n"
		   "\n"
		   "  gc   delete the copies in [near] bucket/prefix copied longest ago until "
		   "they\n"
		   "       take at most SIZE; only objects tagged as copies are deleted: other\n"
		   "       objects there, and the source bucket, are never touched. Needs a\n"
		   "       [near] prefix, or --whole-bucket for a bucket that holds only copies\n"
		   "       (docs/cluster.md)\n");
}

static int oldest_first(const void *a, const void *b)
{
	const struct copy *x = a, *y = b;
	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return strcmp(x->key, y->key);
}

static void free_copies(struct copy *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].key);
	free(c);
}

/* List every copy into *out (*n of them, *total bytes); counts the other
 * objects in *others.  Returns 0, E2BIG (above GC_MAX_COPIES), ENOMEM or
 * the listing's error. */
static int list_copies(struct tfs_backend *be, const struct tfs_log *log, struct copy **out,
		       size_t *n, uint64_t *total, size_t *others)
{
	struct tfs_list_walk w = { 0 };
	struct copy *c = NULL;
	size_t cap = 0;
	int rc;
	*out = NULL;
	*n = *others = 0;
	*total = 0;
	do {
		struct tfs_list_page p = { 0 };
		rc = tfs_backend_list_walk(be, log, &w, "", NULL, 0, &p);
		for (size_t i = 0; rc == 0 && i < p.n_entries; i++) {
			const struct tfs_list_entry *e = &p.entries[i];
			if (!tfs_near_is_copy_name(e->key)) {
				(*others)++;
				continue;
			}
			if (*n == GC_MAX_COPIES) {
				rc = E2BIG;
				break;
			}
			if (*n == cap) {
				size_t nc = cap ? 2 * cap : 1024;
				struct copy *g = realloc(c, nc * sizeof(*c));
				if (g == NULL) {
					rc = ENOMEM;
					break;
				}
				c = g;
				cap = nc;
			}
			c[*n].key = strdup(e->key);
			if (c[*n].key == NULL) {
				rc = ENOMEM;
				break;
			}
			c[*n].size = e->size;
			c[*n].mtime = e->mtime;
			*total += e->size;
			(*n)++;
		}
		tfs_list_page_clear(&p);
	} while (rc == 0 && !w.done);
	tfs_list_walk_clear(&w);
	if (rc) {
		free_copies(c, *n);
		*n = 0;
		return rc;
	}
	*out = c;
	return 0;
}

/* Whether the object named like a copy is one tierfs made (its tag,
 * backends/near_key.h): 1 yes, 0 no, or -errno (ENOENT: gone already). */
static int tagged(struct tfs_backend *be, const char *key)
{
	struct tfs_obj_meta m = { 0 };
	int rc = tfs_backend_head(be, key, &m);
	bool ok = rc == 0 && tfs_near_copy_tagged(key, &m);
	tfs_obj_meta_clear(&m);
	return rc ? -rc : ok;
}

static int gc(struct tfs_backend *be, const struct tfs_log *log, uint64_t max, bool dry_run)
{
	struct copy *c;
	size_t n, others;
	uint64_t total;
	int rc = list_copies(be, log, &c, &n, &total, &others);
	if (rc) {
		fprintf(stderr, "tierfs near gc: listing %s: %s\n", tfs_backend_describe(be),
			rc == E2BIG ? "more than 10,000,000 copies" : strerror(rc));
		return TFS_EXIT_FAIL;
	}
	qsort(c, n, sizeof(*c), oldest_first);
	size_t gone = 0, failed = 0, skipped = 0;
	uint64_t freed = 0;
	for (size_t i = 0; i < n && total - freed > max; i++) {
		/* Only tagged copies are deleted: an object shaped like one
		 * but untagged is someone else's (or a hostile name). */
		int t = tagged(be, c[i].key);
		if (t == 0 || t == -ENOENT) {
			if (t == 0)
				fprintf(stderr,
					"tierfs near gc: %s is not tagged as a copy: left alone\n",
					c[i].key);
			others += t == 0;
			skipped++;
			total -= c[i].size;
			continue;
		}
		rc = t < 0 ? -t : dry_run ? 0 : tfs_backend_delete(be, c[i].key);
		if (rc) {
			fprintf(stderr, "tierfs near gc: delete %s: %s\n", c[i].key, strerror(rc));
			failed++;
			continue;
		}
		if (dry_run)
			printf("would delete %s (%" PRIu64 " bytes)\n", c[i].key, c[i].size);
		gone++;
		freed += c[i].size;
	}
	char a[TFS_UNITS_BUFLEN], b[TFS_UNITS_BUFLEN];
	tfs_format_size(freed, a, sizeof(a));
	tfs_format_size(total - freed, b, sizeof(b));
	printf("%s %zu copies (%s); %zu copies (%s) remain; %zu other objects left alone\n",
	       dry_run ? "would delete" : "deleted", gone, a, n - gone - skipped, b, others);
	free_copies(c, n);
	return failed ? TFS_EXIT_FAIL : TFS_EXIT_OK;
}

int tfs_cmd_near(int argc, char **argv)
{
	const char *max_arg = NULL;
	bool dry_run = false, whole_bucket = false;
	const struct tfs_cli_opt opts[] = {
		{ "max-size", 'm', true, &max_arg, NULL },
		{ "dry-run", 'n', false, &dry_run, NULL },
		{ "whole-bucket", 'w', false, &whole_bucket, NULL },
	};
	struct tfs_cli_conf cc;
	int first;
	int rc = tfs_cli_parse(argc, argv, false, opts, sizeof(opts) / sizeof(opts[0]), &cc, usage,
			       &first);
	if (rc != -1)
		return rc;
	uint64_t max = 0;
	if (argc - first != 1 || strcmp(argv[first], "gc") != 0 || max_arg == NULL ||
	    tfs_parse_size(max_arg, &max) != 0) {
		if (max_arg && tfs_parse_size(max_arg, &max) != 0)
			fprintf(stderr, "tierfs near: --max-size '%s': not a size\n", max_arg);
		return tfs_cli_usage_error(&cc, usage);
	}
	struct tfs_config cfg;
	rc = tfs_cli_conf_load(&cc, &cfg);
	if (rc)
		return rc;
	struct tfs_log log;
	tfs_log_init_stderr(&log, cc.verbose ? TFS_LOG_DEBUG : TFS_LOG_WARN);
	struct tfs_backend *be = NULL;
	if (cfg.near_store.bucket == NULL) {
		fprintf(stderr, "tierfs near: no [near] bucket in the configuration\n");
		rc = TFS_EXIT_CONFIG;
	} else if (cfg.near_store.prefix == NULL && !whole_bucket) {
		fprintf(stderr,
			"tierfs near gc: [near] prefix is empty: gc deletes only under a "
			"prefix that holds copies alone; give --whole-bucket if bucket '%s' "
			"holds nothing but copies\n",
			cfg.near_store.bucket);
		rc = TFS_EXIT_CONFIG;
	} else if ((rc = tfs_stack_open_near_store(&cfg, &log, &be)) != 0) {
		fprintf(stderr, "tierfs near: cannot open the near store: %s\n", strerror(rc));
		rc = TFS_EXIT_FAIL;
	} else {
		rc = gc(be, &log, max, dry_run);
	}
	tfs_backend_destroy(be);
	tfs_config_clear(&cfg);
	return rc;
}
