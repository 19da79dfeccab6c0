/* s3_endpoint.c - an S3 endpoint in one canonical spelling
 * (s3_endpoint.h). */
#include "config.h"

#include "s3_endpoint.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dbuf.h"

static void lower(char *s)
{
	for (; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
}

int tfs_s3_endpoint_canonical(const char *endpoint, const char *region, char *buf, size_t cap)
{
	struct tfs_dbuf ep;
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *user = NULL, *query = NULL;
	int rc;

	tfs_dbuf_init(&ep, 4096);
	if (endpoint && *endpoint)
		rc = tfs_dbuf_adds(&ep, endpoint);
	else
		rc = tfs_dbuf_addf(&ep, "https://s3.%s.amazonaws.com", region ? region : "");
	if (rc) {
		tfs_dbuf_free(&ep);
		return rc == EOVERFLOW ? ENAMETOOLONG : ENOMEM;
	}
	CURLU *u = curl_url();
	if (u == NULL) {
		tfs_dbuf_free(&ep);
		return ENOMEM;
	}
	rc = EINVAL;
	if (curl_url_set(u, CURLUPART_URL, tfs_dbuf_str(&ep), 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
		curl_url_get(u, CURLUPART_PATH, &path, 0);
		curl_url_get(u, CURLUPART_USER, &user, 0);
		curl_url_get(u, CURLUPART_QUERY, &query, 0);
		lower(scheme);
		lower(host);
		bool web = strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0;
		bool bare = (path == NULL || strcmp(path, "/") == 0 || *path == '\0') &&
			    user == NULL && query == NULL;
		if (web && bare) {
			int w = snprintf(buf, cap, "%s://%s:%s", scheme, host, port);
			rc = w < 0 || (size_t)w >= cap ? ENAMETOOLONG : 0;
		}
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(user);
	curl_free(query);
	curl_url_cleanup(u);
	tfs_dbuf_free(&ep);
	return rc;
}

bool tfs_s3_path_style_effective(enum tfs_s3_path_style ps, const char *endpoint,
				 const char *bucket)
{
	if (ps == TFS_S3_PATH_ON)
		return true;
	if (ps == TFS_S3_PATH_OFF)
		return false;
	if (endpoint && *endpoint)
		return true;
	return bucket == NULL || strchr(bucket, '.') != NULL;
}
