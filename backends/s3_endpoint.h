/* s3_endpoint.h - an S3 endpoint in one canonical spelling, to compare
 * stores and to name them (the near copies' keys, backends/near_key.h).
 */
#ifndef TFS_S3_ENDPOINT_H
#define TFS_S3_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "s3.h"

/* The canonical form of `endpoint` ("http[s]://host[:port][/]"; NULL or ""
 * means AWS's https://s3.<region>.amazonaws.com, as tfs_s3_create() does)
 * into buf (cap bytes): "scheme://host:port", scheme and host in lower
 * case, the port always written (80 for http, 443 for https when none is
 * given), no trailing slash.  So http://HOST, http://host:80 and
 * http://host/ are one store.  Uses curl's URL parser.  Returns 0, EINVAL
 * (not an http or https URL, or one with a path, user or query),
 * ENAMETOOLONG (does not fit) or ENOMEM.  Thread safe. */
int tfs_s3_endpoint_canonical(const char *endpoint, const char *region, char *buf, size_t cap);

/* Whether requests to `bucket` through `endpoint` (NULL or "": AWS) name
 * the bucket in the path, for the setting `ps` (s3.h).  Pure; cannot
 * fail. */
bool tfs_s3_path_style_effective(enum tfs_s3_path_style ps, const char *endpoint,
				 const char *bucket);

#endif
