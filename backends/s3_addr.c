/* s3_addr.c - where the S3 backend's requests go, and the switch to the
 * region a bucket says it lives in (s3_internal.h). */
#include "config.h"

#include "s3_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbuf.h"
#include "log.h"

int s3_addr_make(const struct s3 *s, const char *region, struct s3_addr **out)
{
	struct tfs_dbuf ep;
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	struct s3_addr *a = calloc(1, sizeof(*a));
	int rc = 0;

	if (a == NULL)
		return ENOMEM;
	if (snprintf(a->region, sizeof(a->region), "%s", region) >= (int)sizeof(a->region)) {
		tfs_err(s->log, "s3: region '%.64s...' is too long", region);
		free(a);
		return EINVAL;
	}
	tfs_dbuf_init(&ep, 4096);
	if (s->cfg.endpoint && *s->cfg.endpoint)
		rc = tfs_dbuf_adds(&ep, s->cfg.endpoint);
	else
		rc = tfs_dbuf_addf(&ep, "https://s3.%s.amazonaws.com", region);
	if (rc) {
		tfs_dbuf_free(&ep);
		free(a);
		return ENOMEM;
	}
	CURLU *u = curl_url();
	if (u == NULL || curl_url_set(u, CURLUPART_URL, tfs_dbuf_str(&ep), 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		tfs_err(s->log, "s3: endpoint '%s' is not a URL (expected http[s]://host[:port])",
			tfs_dbuf_str(&ep));
		rc = EINVAL;
		goto out;
	}
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
		tfs_err(s->log, "s3: endpoint '%s': scheme must be http or https",
			tfs_dbuf_str(&ep));
		rc = EINVAL;
		goto out;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	if (path && strcmp(path, "/") != 0 && strcmp(path, "") != 0) {
		tfs_err(s->log, "s3: endpoint '%s' must not contain a path", tfs_dbuf_str(&ep));
		rc = EINVAL;
		goto out;
	}
	struct tfs_dbuf d;
	tfs_dbuf_init(&d, 4096);
	bool nomem = false;
	if (!s->path_style)
		nomem |= tfs_dbuf_addf(&d, "%s.", s->cfg.bucket) != 0;
	nomem |= tfs_dbuf_adds(&d, host) != 0;
	if (port)
		nomem |= tfs_dbuf_addf(&d, ":%s", port) != 0;
	a->host = tfs_dbuf_steal(&d);
	tfs_dbuf_init(&d, 4096);
	nomem |= tfs_dbuf_addf(&d, "%s://%s", scheme, a->host ? a->host : "") != 0;
	a->origin = tfs_dbuf_steal(&d);
	if (nomem || !a->host || !a->origin)
		rc = ENOMEM;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(u);
	tfs_dbuf_free(&ep);
	if (rc) {
		free(a->host);
		free(a->origin);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

const struct s3_addr *s3_addr(struct s3 *s)
{
	return atomic_load_explicit(&s->addr, memory_order_acquire);
}

/* A region name a reply may switch to: 1 to 63 lower-case letters,
 * digits, '-', '_' or '.' (AWS's are "eu-west-2"; other stores' may be
 * "default"); anything else in a reply is refused, not signed with. */
static bool region_name_ok(const char *r)
{
	size_t n = strlen(r);
	if (n == 0 || n > 63)
		return false;
	for (; *r; r++)
		if (!((*r >= 'a' && *r <= 'z') || (*r >= '0' && *r <= '9') || *r == '-' ||
		      *r == '_' || *r == '.'))
			return false;
	return true;
}

int s3_switch_region(struct s3 *s, const struct s3_addr *from, const char *region)
{
	int rc = 0;

	if (!region_name_ok(region) || strcmp(region, from->region) == 0)
		return EINVAL;
	pthread_mutex_lock(&s->switch_lock);
	struct s3_addr *cur = atomic_load_explicit(&s->addr, memory_order_relaxed);
	if (cur != from) {
		pthread_mutex_unlock(&s->switch_lock); /* another request switched */
		return 0;
	}
	if (s->switches >= S3_MAX_REGION_SWITCHES) {
		tfs_err(s->log,
			"s3: bucket %s: the store names region %s after %u switches; staying in %s",
			s->cfg.bucket, region, s->switches, cur->region);
		rc = EINVAL;
	} else {
		struct s3_addr *a = NULL;
		rc = s3_addr_make(s, region, &a);
		if (rc == 0) {
			a->old = cur;
			atomic_store_explicit(&s->addr, a, memory_order_release);
			s->switches++;
			tfs_info(s->log,
				 "s3: bucket %s is in region %s, not %s: signing for %s%s%s",
				 s->cfg.bucket, region, cur->region, region,
				 strcmp(a->origin, cur->origin) ? " via " : "",
				 strcmp(a->origin, cur->origin) ? a->origin : "");
		}
	}
	pthread_mutex_unlock(&s->switch_lock);
	return rc;
}

void s3_addr_free(struct s3_addr *a)
{
	while (a) {
		struct s3_addr *old = a->old;
		free(a->origin);
		free(a->host);
		free(a);
		a = old;
	}
}
