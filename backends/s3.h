/* s3.h - the S3 backend: any S3-compatible object store over HTTP(S).
 *
 * The defaults and ranges of every field are those of the [backend] section
 * in src/config.c (man tierfs.conf(5)).
 *
 * Construction resolves credentials (credentials_file, then the
 * environment, then ~/.aws/credentials), creates the connection pool and
 * validates the configuration.  Call it after daemonizing: it creates curl
 * handles.
 */
#ifndef TFS_S3_H
#define TFS_S3_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "log.h"

/* How a request names the bucket: in the path (endpoint/bucket/key) or in
 * the host name (bucket.endpoint/key). */
enum tfs_s3_path_style {
	/* path-style with an endpoint (most S3-compatible stores), virtual-
	 * hosted on AWS (no endpoint) unless the bucket's name has a dot,
	 * which the TLS certificate of *.s3.<region>.amazonaws.com does not
	 * cover: the AWS SDKs' rule (tfs_s3_path_style_effective()) */
	TFS_S3_PATH_AUTO = 0,
	TFS_S3_PATH_ON,  /* always path-style */
	TFS_S3_PATH_OFF, /* always virtual-hosted */
};

struct tfs_s3_config {
	char *endpoint; /* "http[s]://host[:port]"; NULL: https://s3.<region>.amazonaws.com */
	char *region;   /* SigV4 region, e.g. "us-east-1"; NULL: us-east-1 */
	enum tfs_s3_path_style path_style;
	char *bucket;           /* required */
	char *prefix;           /* "" or a key prefix ending in '/' */
	char *ca_file;          /* NULL: the system CA store */
	char *credentials_file; /* NULL: skip; must not be group/other readable */
	char *profile; /* profile in ~/.aws/credentials (NULL: $AWS_PROFILE or "default") */
	unsigned connect_timeout_ms;
	unsigned low_speed_time_s;    /* abort a transfer below low_speed_limit for this long */
	unsigned low_speed_limit;     /* bytes per second */
	unsigned retries;             /* attempts after the first for retryable failures */
	unsigned retry_base_ms;       /* first backoff; doubles each retry, with full jitter */
	unsigned retry_max_ms;        /* backoff cap */
	uint64_t multipart_threshold; /* PUTs of at least this size use multipart */
	uint64_t part_size;           /* multipart part size (5 MiB .. 5 GiB) */
	unsigned upload_parallel;     /* parts in flight per multipart upload or copy */
	uint64_t copy_part_size;      /* copies of larger objects go in parts of this size
				  * (5 MiB .. 5 GiB; 0: 5 GiB, S3's limit for one copy) */
	unsigned max_connections;     /* connection pool size */
};

/* Create an S3 backend.  Returns 0 and *out, EINVAL for a bad
 * configuration, EACCES when no usable credentials are found or a
 * credentials file has unsafe permissions, ENOMEM.  The cause is logged.
 * `log` must outlive the instance.  `cfg` is copied. */
int tfs_s3_create(const struct tfs_s3_config *cfg, const struct tfs_log *log,
		  struct tfs_backend **out);

#endif
