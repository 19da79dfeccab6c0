/* stack.c - assembly of the layer stack from the validated config. */
#include "config.h"

#include "stack.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dbuf.h"
#include "dirs.h"
#include "lmdb_env.h"
#include "local.h"
#include "near.h"
#include "ram.h"
#include "s3.h"
#include "s3_endpoint.h"
#include "ssd.h"

#define LMDB_MAP_SIZE (64ull << 30) /* address space only; the file grows as needed */

int tfs_stack_open_near_store(const struct tfs_config *cfg, const struct tfs_log *log,
			      struct tfs_backend **out)
{
	const struct tfs_s3_config *n = &cfg->near_store;
	if (n->bucket == NULL) {
		tfs_err(log, "near: no [near] bucket configured");
		return EINVAL;
	}
	struct tfs_s3_config nc = cfg->backend;
	nc.bucket = n->bucket;
	nc.prefix = n->prefix ? n->prefix : "";
	nc.endpoint = n->endpoint;
	nc.region = n->region;
	nc.path_style = n->path_style;
	nc.credentials_file = n->credentials_file;
	nc.profile = n->profile;
	nc.ca_file = n->ca_file;
	nc.connect_timeout_ms = n->connect_timeout_ms;
	nc.low_speed_time_s = n->low_speed_time_s;
	nc.retries = n->retries;
	return tfs_s3_create(&nc, log, out);
}

static bool same_text(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* Whether two endpoints name one store: compared canonical (scheme, host
 * case, default port: s3_endpoint.h); as text when one is not a URL (the
 * S3 backend then refuses it anyway). */
static bool same_endpoint(const char *a, const char *ra, const char *b, const char *rb)
{
	char ca[1024], cb[1024];
	if (tfs_s3_endpoint_canonical(a, ra, ca, sizeof(ca)) != 0 ||
	    tfs_s3_endpoint_canonical(b, rb, cb, sizeof(cb)) != 0)
		return same_text(a, b);
	return strcmp(ca, cb) == 0;
}

/* Whether one prefix starts with the other ("" holds every key). */
static bool prefixes_overlap(const char *a, const char *b)
{
	a = a ? a : "";
	b = b ? b : "";
	size_t la = strlen(a), lb = strlen(b);
	return strncmp(a, b, la < lb ? la : lb) == 0;
}

int tfs_stack_open_backend(const struct tfs_config *cfg, const struct tfs_source *src,
			   const struct tfs_log *log, struct tfs_backend **out)
{
	if (src->kind == TFS_SOURCE_LOCAL) {
		struct tfs_local_config lc = { .root = src->path };
		return tfs_local_create(&lc, log, out);
	}
	struct tfs_s3_config sc = cfg->backend;
	sc.bucket = src->bucket;
	sc.prefix = src->prefix;
	if (cfg->near_store.bucket == NULL)
		return tfs_s3_create(&sc, log, out);

	/* Near's copies must never land among far's objects (near gc
	 * deletes copies). */
	const struct tfs_s3_config *n = &cfg->near_store;
	if (same_endpoint(n->endpoint, n->region, sc.endpoint, sc.region) &&
	    same_text(n->bucket, sc.bucket) && prefixes_overlap(n->prefix, sc.prefix)) {
		tfs_err(log, "near: [near] bucket '%s' prefix '%s' overlaps the source %s",
			n->bucket, n->prefix ? n->prefix : "", src->bucket);
		return EINVAL;
	}
	struct tfs_backend *far = NULL, *near = NULL;
	int rc = tfs_s3_create(&sc, log, &far);
	if (rc == 0)
		rc = tfs_stack_open_near_store(cfg, log, &near);
	/* Copies of objects read in parts are assembled in <ssd.dir>/near-spool
	 * (backends/near_spool.h), unnamed files that vanish with the daemon. */
	char spool[PATH_MAX], canon[1024];
	struct tfs_near_config ncfg = cfg->near;
	/* Copies are named by far's canonical endpoint, bucket and prefix
	 * (backends/near_key.h); a far check holds for the metadata TTL. */
	if (rc == 0)
		rc = tfs_s3_endpoint_canonical(sc.endpoint, sc.region, canon, sizeof(canon));
	ncfg.source = (struct tfs_near_source){ canon, sc.bucket, sc.prefix ? sc.prefix : "" };
	ncfg.check_ttl_ms = cfg->cache.metadata_ttl_ms;
	if (rc == 0 && ncfg.spool_size) {
		if (snprintf(spool, sizeof(spool), "%s/near-spool", cfg->ssd.dir) >=
		    (int)sizeof(spool))
			rc = ENAMETOOLONG;
		else
			rc = tfs_dir_secure(spool, TFS_DIR_CREATE, log);
		ncfg.spool_dir = spool;
	}
	if (rc == 0)
		rc = tfs_near_create(&ncfg, near, far, log, out);
	if (rc) {
		tfs_backend_destroy(near);
		tfs_backend_destroy(far);
	}
	return rc;
}

/* <ssd.dir>/<first 16 hex of SHA-256 of the source and who reads it>: the
 * description, the endpoint and, when the backend has one, its cache
 * identity (the S3 access key ID), so that mounts with other credentials
 * never share cached bytes, listings or write-back journals.  Without an
 * identity (local backend) the input is the description and endpoint
 * alone, as before identities were added. */
static int source_dir(const struct tfs_config *cfg, struct tfs_backend *be, char **out)
{
	const char *who = tfs_backend_cache_identity(be);
	struct tfs_dbuf id, dir;
	unsigned char md[32];
	unsigned int mdlen = 0;
	int rc;

	tfs_dbuf_init(&id, 8192);
	tfs_dbuf_init(&dir, PATH_MAX);
	rc = tfs_dbuf_addf(&id, "%s\n%s\n", tfs_backend_describe(be),
			   cfg->backend.endpoint ? cfg->backend.endpoint : "");
	if (rc == 0 && *who)
		rc = tfs_dbuf_addf(&id, "key %s\n", who);
	if (rc == 0) {
		EVP_Digest(tfs_dbuf_str(&id), tfs_dbuf_len(&id), md, &mdlen, EVP_sha256(), NULL);
		rc = tfs_dbuf_addf(&dir, "%s/%02x%02x%02x%02x%02x%02x%02x%02x", cfg->ssd.dir, md[0],
				   md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
	}
	tfs_dbuf_free(&id);
	if (rc) {
		tfs_dbuf_free(&dir);
		return rc == ENOMEM ? ENOMEM : ENAMETOOLONG;
	}
	*out = tfs_dbuf_steal(&dir);
	return *out ? 0 : ENOMEM;
}

int tfs_stack_open(const struct tfs_config *cfg, const struct tfs_source *src, bool read_only,
		   const char *mountpoint, const struct tfs_log *log, struct tfs_stack **out)
{
	struct tfs_stack *s = calloc(1, sizeof(*s));
	struct tfs_layer *bel = NULL, *ssd = NULL;
	char index[PATH_MAX];
	int rc;

	if (s == NULL)
		return ENOMEM;
	rc = tfs_stack_open_backend(cfg, src, log, &s->be);
	if (rc)
		goto fail;
	rc = source_dir(cfg, s->be, &s->cache_dir);
	if (rc) {
		tfs_err(log, "cache directory '%s': %s", cfg->ssd.dir, strerror(rc));
		goto fail;
	}
	/* ssd.dir is the administrator's (root may own it); the source's
	 * directory is ours.  Both checked, none planted (lib/dirs.h). */
	rc = tfs_dir_secure(cfg->ssd.dir, TFS_DIR_CREATE | TFS_DIR_ADMIN, log);
	if (rc == 0)
		rc = tfs_dir_secure(s->cache_dir, TFS_DIR_CREATE, log);
	if (rc)
		goto fail;
	snprintf(index, sizeof(index), "%s/index", s->cache_dir);
	rc = tfs_lmdb_open(index, LMDB_MAP_SIZE, log, &s->env);
	if (rc)
		goto fail;
	rc = tfs_backend_layer_create(s->be, cfg->cache.block_size, log, &bel);
	if (rc)
		goto fail;
	struct tfs_ssd_config sc = cfg->ssd;
	sc.dir = s->cache_dir;
	rc = tfs_ssd_create(&sc, &cfg->cache, s->env, bel, log, &ssd);
	if (rc)
		goto fail;
	bel = NULL; /* owned by the SSD tier */
	rc = tfs_ram_create(&cfg->ram, &cfg->cache, ssd, log, &s->top);
	if (rc)
		goto fail;
	s->ssd = ssd;
	ssd = NULL; /* owned by the RAM tier */
	rc = tfs_meta_open(s->env, s->be, &cfg->cache, log, &s->meta);
	if (rc == 0 && mountpoint)
		rc = tfs_meta_set_mount(s->meta, mountpoint);
	if (rc)
		goto fail;
	rc = tfs_prefetch_create(&cfg->prefetch, s->top, log, &s->pf);
	if (rc)
		goto fail;
	/* The journal is always opened: a read-only mount still keeps (and
	 * reports) what an earlier mount left to upload, it just starts no
	 * uploaders. */
	struct tfs_writeback_config wc = cfg->writeback;
	if (read_only)
		wc.mode = TFS_WB_OFF;
	rc = tfs_wb_create(&wc, s->cache_dir, mountpoint, s->env, s->meta, s->be, s->top, log,
			   &s->wb);
	if (rc)
		goto fail;
	tfs_info(log, "cache for %s in %s", tfs_backend_describe(s->be), s->cache_dir);
	*out = s;
	return 0;
fail:
	tfs_layer_destroy(ssd);
	tfs_layer_destroy(bel);
	tfs_stack_close(s);
	return rc;
}

void tfs_stack_close(struct tfs_stack *s)
{
	if (s == NULL)
		return;
	tfs_wb_destroy(s->wb);
	tfs_prefetch_destroy(s->pf);
	tfs_meta_close(s->meta);
	tfs_layer_destroy(s->top);
	if (s->env)
		tfs_lmdb_close(s->env);
	tfs_backend_destroy(s->be);
	free(s->cache_dir);
	free(s);
}

void tfs_stack_stats(struct tfs_stack *s, struct json_object *out)
{
	tfs_layer_stats(s->top, out);
	tfs_meta_stats(s->meta, out);
	tfs_prefetch_stats(s->pf, out);
	tfs_wb_stats(s->wb, out);
}
