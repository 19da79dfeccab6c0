/* conf.h - tierfs configuration: one struct per layer, filled once at
 * start-up from built-in defaults, the INI file and -o overrides.
 *
 * Start-up sequence (main):
 *
 *	struct tfs_config cfg;
 *	struct tfs_dbuf err;
 *	tfs_dbuf_init(&err, 4096);
 *	if (tfs_config_defaults(&cfg) ||
 *	    tfs_config_load(&cfg, path_or_NULL, path_given_with_-c, &err) ||
 *	    tfs_config_set(&cfg, "ssd.size=50%", NULL, &err) ||   (each -o)
 *	    tfs_config_validate(&cfg, &err))
 *		print tfs_dbuf_str(&err) (or strerror() if it is empty) and
 *		exit(TFS_EXIT_CONFIG);
 *	cfg.backend.bucket/prefix = from the mount SOURCE (malloc'd);
 *	hand &cfg.ram, &cfg.ssd, ... to the layers; tfs_config_clear() at exit.
 *
 * After start-up every layer reads its own struct; nothing looks a setting
 * up by name.  The structs are plain data: no locking.  A reload (SIGHUP,
 * `tierfs reload`) loads a new config the same way, then
 * tfs_config_merge_reload() keeps only the keys that can change while
 * mounted (tfs_config_reloadable()); the daemon hands those values to the
 * layers' setters, which are thread safe.
 *
 * File syntax (libinih): "[section]" lines and "key = value" lines ("key:
 * value" works too).  Section and key names are case-insensitive.  Lines
 * starting with ';' or '#' are comments, and " ;" starts a comment after a
 * value ('#' does not).  Leading whitespace is ignored; there are no
 * continuation lines.  A key given twice takes the last value; a section
 * given twice is merged.  Lines are limited to 199 characters after the
 * indentation and files to 1 MiB.  Value syntax: see lib/units.h and
 * tierfs.conf(5).
 *
 * Errors: every function below that can fail returns 0 or a positive errno.
 * Those taking an `err` buffer (may be NULL) empty it first and, on
 * failure, leave in it one line (no newline) saying what is wrong and
 * where, e.g.
 *
 *	/etc/tierfs/tierfs.conf:12: [ssd] size: invalid size 'abc' (allowed: bytes with K/M/G/T suffix or N%)
 *	command line: -o ram.size=1M: '1M' is out of range (allowed: 16M or more)
 *
 * On ENOMEM `err` may be empty.  Any failure of tfs_config_load(),
 * tfs_config_set() or tfs_config_validate() is a configuration error: the
 * caller prints the message and exits with status TFS_EXIT_CONFIG (2).
 */
#ifndef TFS_CONF_H
#define TFS_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "dbuf.h"
#include "log.h"
#include "metrics.h"
#include "near.h"
#include "prefetch.h"
#include "ram.h"
#include "s3.h"
#include "ssd.h"
#include "writeback.h"

/* Exit status for a configuration error (bad file, -o or combination). */
#define TFS_EXIT_CONFIG 2

struct tfs_log_config {
	enum tfs_log_level level;
	char *file; /* NULL: syslog when daemonized, stderr in the foreground */
};

/* [mount]: whether the bucket's contents are trusted like a local disk. */
struct tfs_mount_config {
	/* false (the default): the kernel mount is made nosuid,nodev (and
	 * `-o suid` or `-o dev` is refused), and S_ISUID and S_ISGID are
	 * dropped from every mode the mount shows or stores: object metadata
	 * (x-amz-meta-mode, the local backend's xattrs), chmod() and
	 * create.  true: mounted suid,dev unless -o nosuid/nodev, bits kept. */
	bool trusted;
	/* Live inodes kept before the kernel is asked to drop unused
	 * dentries (vfs/inode.h, tfs_itable_set_max()); 0: no bound. */
	uint64_t max_inodes;
};

/* Bookkeeping for messages: where an option got its value.  Private to
 * config.c. */
struct tfs_config_origin {
	unsigned line;   /* line in tfs_config.path; 0: not from that file */
	unsigned seq;    /* order of assignment; 0: built-in default */
	bool cmdline;    /* set by tfs_config_set() */
	const char *env; /* the environment variable that set it (static), or NULL */
};

#define TFS_CONFIG_MAX_OPTIONS 96

struct tfs_config {
	/* [backend].  bucket and prefix are not configuration keys: the
	 * caller sets them from the mount SOURCE (malloc'd strings, freed by
	 * tfs_config_clear()). */
	struct tfs_s3_config backend;
	/* [near]: the in-cluster store (its bucket and prefix are keys here;
	 * the rest of its settings are [backend]'s) and its copies. */
	struct tfs_s3_config near_store;
	struct tfs_near_config near;
	struct tfs_ram_config ram;
	struct tfs_ssd_config ssd;
	struct tfs_cache_config cache;
	struct tfs_writeback_config writeback;
	struct tfs_prefetch_config prefetch;
	struct tfs_log_config log;
	struct tfs_metrics_config metrics;
	struct tfs_mount_config mount;
	char *path; /* the file loaded, or NULL (built-in defaults only) */

	struct tfs_config_origin origin[TFS_CONFIG_MAX_OPTIONS];
	unsigned seq;
};

/* The default file: SYSCONFDIR "/tierfs/tierfs.conf" (/etc/tierfs/... in a
 * normal install).  Static string; cannot fail. */
const char *tfs_config_default_path(void);

/* Initialise *cfg (any previous contents are ignored, not freed) to the
 * built-in defaults.  Returns 0, or ENOMEM with *cfg cleared (EINVAL would
 * mean a default in the option table that does not parse: a bug, caught by
 * tests/unit/test_config).  Afterwards tfs_config_clear() must be called. */
int tfs_config_defaults(struct tfs_config *cfg);

/* Read the INI file `path` (NULL: tfs_config_default_path()) and apply its
 * settings on top of the current values of *cfg (initialised by
 * tfs_config_defaults()); sets cfg->path (a copy) when the file exists.
 * Stops at the first error.  Then the keys that are still empty take the
 * AWS SDKs' environment variables (the first set and not empty):
 * [backend] region from AWS_REGION, then AWS_DEFAULT_REGION; [backend]
 * endpoint from AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL
 * ("environment AWS_REGION='x': [backend] region: ..." when one does not
 * parse).
 *
 * Returns 0; 0 with only the environment applied when the file does not
 * exist and must_exist is false; ENOENT, EACCES, EISDIR, ... when the file cannot be
 * opened or read ("FILE: cannot open: <strerror>"); EFBIG above 1 MiB;
 * EINVAL for a syntax error, an unknown section or key, or a malformed or
 * out-of-range value ("FILE:LINE: [section] key: <what> (allowed: ...)");
 * ENOMEM.  After a failure *cfg holds a mix of old and new values: clear
 * it and exit. */
int tfs_config_load(struct tfs_config *cfg, const char *path, bool must_exist,
		    struct tfs_dbuf *err);

/* Apply one override "section.key=value" (blanks around the names and the
 * value are ignored; the value is taken literally, with no comments).
 * `origin` is printed before the assignment in messages; NULL means
 * "command line: -o", giving "command line: -o ssd.size=abc: invalid size
 * 'abc' (allowed: ...)".  Returns 0, EINVAL (malformed assignment, unknown
 * section or key, bad value; *cfg unchanged) or ENOMEM. */
int tfs_config_set(struct tfs_config *cfg, const char *assignment, const char *origin,
		   struct tfs_dbuf *err);

/* Check every value against its range again (in case a caller changed a
 * field directly) and the rules that involve several keys:
 * ssd.low_watermark < ssd.high_watermark, backend.retry_base <= retry_max,
 * backend.part_size <= multipart_threshold, ram.size and an absolute
 * ssd.size of at least 4 cache blocks.  Call once after the last
 * tfs_config_set().  The message starts with the file:line (or "command
 * line:") of the setting that was made last.  Returns 0 or EINVAL. */
int tfs_config_validate(const struct tfs_config *cfg, struct tfs_dbuf *err);

/* ---- reload ---- */

/* Whether "section.key" can change while mounted: ram.size, ssd.size,
 * ssd.pin_max, ssd.high_watermark, ssd.low_watermark,
 * cache.metadata_ttl, writeback.uploaders, prefetch.workers and
 * log.level.  Names are case-insensitive. */
bool tfs_config_reloadable(const char *section, const char *key);

/* Called by tfs_config_merge_reload() for each key whose value differs,
 * with the new value as tfs_config_dump() writes it. */
typedef void (*tfs_config_change_fn)(void *ctx, const char *section, const char *key,
				     const char *value, bool reloadable);

/* Reload: `next` is a freshly loaded configuration (defaults, file, -o),
 * `cur` the one in force.  For each key whose value differs, calls fn
 * (may be NULL); then copies the value (and its origin) of every key that
 * is not reloadable from `cur` into `next`, so `next` holds what would be
 * in force.  The caller then runs tfs_config_validate(next) (a reloadable
 * value may not fit a key that kept its old value) and, if it passes,
 * applies it and replaces `cur` with `next`.  Returns 0 or ENOMEM (next
 * is then a mix: clear it). */
int tfs_config_merge_reload(struct tfs_config *next, const struct tfs_config *cur,
			    tfs_config_change_fn fn, void *ctx);

/* Free the strings in *cfg (including backend.bucket/prefix and path) and
 * zero it.  Safe on a zeroed or already cleared struct.  Cannot fail. */
void tfs_config_clear(struct tfs_config *cfg);

/* Append the effective configuration to `out` as INI text that
 * tfs_config_load() reads back to the same values: every section and key,
 * in the order of tierfs.conf(5).  With `origins`, a header comment names
 * the file and each value that is not a default gets a "; line N" or
 * "; -o" comment.  The configuration holds no secrets (only the
 * credentials_file path).  Returns 0, ENOMEM or EOVERFLOW (out's max). */
int tfs_config_dump(const struct tfs_config *cfg, bool origins, struct tfs_dbuf *out);

#endif
