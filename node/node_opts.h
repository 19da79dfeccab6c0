/* node_opts.h - the options a FlexVolume volume may carry (pod spec or the
 * node's [defaults]), what each one means for tierfs, and how a value is
 * checked.
 *
 * Option names are the camelCase names of the pod spec ("ramSize").  Most
 * map onto one tierfs configuration key ("ram.size") and are checked with
 * that key's own parser and range (src/conf.c), so the driver accepts
 * exactly what `tierfs mount` accepts.  source, bucket and prefix make the
 * mount SOURCE; readOnly makes the mount read-only.
 *
 * Limits: the node config may bound some options ([limits] maxRamSize,
 * minMetadataTTL, ...); tfs_node_opt_limit_kind() says which and in what
 * direction.
 *
 * Messages: functions taking `err` (may be NULL) empty it first and, on
 * failure, leave one line there, "ORIGIN: why", e.g.
 *
 *	option ramSize: '8K' is out of range (allowed: 16M or more)
 *	/etc/tierfs/flexvolume.conf:7: [defaults] policy: invalid value 'fifo' (allowed: lru, epoch)
 *
 * Values are quoted with control characters escaped and cut after 100
 * bytes, so a message is always one printable line.  No function here keeps
 * state; all are thread safe.
 */
#ifndef TFS_NODE_OPTS_H
#define TFS_NODE_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dbuf.h"

enum tfs_node_opt {
	TFS_NODE_OPT_SOURCE,             /* s3://BUCKET[/PREFIX] */
	TFS_NODE_OPT_BUCKET,             /* BUCKET (with prefix: the other way to say source) */
	TFS_NODE_OPT_PREFIX,             /* PREFIX inside the bucket */
	TFS_NODE_OPT_ENDPOINT,           /* backend.endpoint */
	TFS_NODE_OPT_REGION,             /* backend.region */
	TFS_NODE_OPT_PATH_STYLE,         /* backend.path_style */
	TFS_NODE_OPT_RAM_SIZE,           /* ram.size */
	TFS_NODE_OPT_SSD_SIZE,           /* ssd.size */
	TFS_NODE_OPT_BLOCK_SIZE,         /* cache.block_size */
	TFS_NODE_OPT_READAHEAD,          /* prefetch.readahead */
	TFS_NODE_OPT_POLICY,             /* cache.policy */
	TFS_NODE_OPT_METADATA_TTL,       /* cache.metadata_ttl */
	TFS_NODE_OPT_WRITEBACK,          /* writeback.mode */
	TFS_NODE_OPT_NEAR_BUCKET,        /* near.bucket (docs/cluster.md) */
	TFS_NODE_OPT_NEAR_PREFIX,        /* near.prefix */
	TFS_NODE_OPT_NEAR_ENDPOINT,      /* near.endpoint */
	TFS_NODE_OPT_NEAR_WRITE_THROUGH, /* near.write_through */
	TFS_NODE_OPT_READ_ONLY,          /* the mount option ro */
	TFS_NODE_OPT_COUNT
};

enum tfs_node_limit_kind {
	TFS_NODE_LIMIT_NONE, /* the option has no limit */
	TFS_NODE_LIMIT_MAX,  /* sizes: a pod may ask for at most the limit */
	TFS_NODE_LIMIT_MIN,  /* metadataTTL: a pod may ask for at least the limit */
};

/* A checked value.  num is meaningful for sizes (bytes) and durations
 * (milliseconds, UINT64_MAX for "forever"); pct is true for a relative
 * size "N%" (num is then 0); flag holds a boolean. */
struct tfs_node_value {
	uint64_t num;
	bool pct;
	bool flag;
};

/* The pod-spec name of `o` ("ramSize").  Static string; never NULL for a
 * valid option. */
const char *tfs_node_opt_name(enum tfs_node_opt o);

/* The tierfs configuration key ("ram.size") or NULL for source, bucket,
 * prefix and readOnly.  Static string. */
const char *tfs_node_opt_tierfs_key(enum tfs_node_opt o);

/* Find an option by name: exactly (pod specs), or ignoring case (the node
 * config, like tierfs.conf).  Returns 0 and sets *out, or ENOENT. */
int tfs_node_opt_find(const char *name, bool ignore_case, enum tfs_node_opt *out);

/* "source, bucket, prefix, ..." into buf (truncated to fit).  Returns buf. */
const char *tfs_node_opt_list(char *buf, size_t cap);

/* The limit of `o`: its kind and its key in [limits] ("maxRamSize"; NULL
 * when TFS_NODE_LIMIT_NONE). */
enum tfs_node_limit_kind tfs_node_opt_limit_kind(enum tfs_node_opt o);
const char *tfs_node_opt_limit_key(enum tfs_node_opt o);

/* Find an option by its [limits] key, ignoring case.  Returns 0 and sets
 * *out, or ENOENT. */
int tfs_node_opt_find_limit(const char *key, enum tfs_node_opt *out);

/* "maxRamSize, maxSsdSize, ..." into buf.  Returns buf. */
const char *tfs_node_opt_limit_list(char *buf, size_t cap);

/* Check `value` (already trimmed of blanks) for option `o` and parse it
 * into *out (may be NULL).
 * `origin` starts the message ("option ramSize", "FILE:LINE: [defaults]
 * ramSize").  `from_pod` refuses what only the admin may write: a relative
 * ssdSize ("N%", since the volumes of a node share its disk).  source must
 * be s3://BUCKET[/PREFIX] (a pod must not mount a directory of the node);
 * bucket a bucket name (no '/'); prefix printable text.
 * Returns 0, EINVAL (message in err) or ENOMEM. */
int tfs_node_opt_check(enum tfs_node_opt o, const char *value, const char *origin, bool from_pod,
		       struct tfs_node_value *out, struct tfs_dbuf *err);

/* Parse a limit value for option `o` (a size, or a duration for
 * metadataTTL; "N%" is refused) into *num.  Same conventions as
 * tfs_node_opt_check(). */
int tfs_node_opt_check_limit(enum tfs_node_opt o, const char *value, const char *origin,
			     uint64_t *num, struct tfs_dbuf *err);

/* Does value `v` of option `o` respect the limit `limit`?  Relative sizes
 * cannot be compared and pass.  Always true for TFS_NODE_LIMIT_NONE. */
bool tfs_node_opt_within(enum tfs_node_opt o, const struct tfs_node_value *v, uint64_t limit);

/* Format a limit of option `o` for messages ("4G", "10s"). */
void tfs_node_opt_format_limit(enum tfs_node_opt o, uint64_t limit, char *buf, size_t cap);

/* Write s into buf for a message as tierfs.conf's messages do (lib's
 * tfs_escape()): quoted, control characters as \xNN, cut after 100 bytes
 * with "...".  cap of TFS_NODE_QUOTE_BUFLEN always suffices; below 16
 * bytes buf gets "".  Returns buf. */
#define TFS_NODE_QUOTE_BUFLEN 420
const char *tfs_node_quote(char *buf, size_t cap, const char *s);

#endif
