/* manifest.h - dataset manifests: the list of files a warm-up fetches, or
 * the order a training job will read them in.
 *
 * A manifest is text, one entry per line, in either form (mixed is fine):
 *   a path:   train/img_001.jpg, or /mnt/data/train/img_001.jpg (absolute
 *             paths must lie under the mountpoint);
 *   JSON:     {"key": "train/img_001.jpg", ...} or {"url":
 *             "s3://bucket/prefix/train/img_001.jpg", ...} -- the dataset
 *             index training platforms keep; the first of "key", "path",
 *             "url", "uri" that is a string is used, and URLs must name
 *             the mounted bucket and lie under its prefix.
 * Empty lines and lines starting with '#' are skipped.  A bad line is an
 * entry with an error, never a reason to stop.
 */
#ifndef TFS_MANIFEST_H
#define TFS_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

struct tfs_manifest_entry {
	uint64_t line; /* 1-based line number */
	char *key;     /* object key relative to the mount's root, or NULL */
	char *error;   /* why the line was rejected, or NULL */
};

struct tfs_manifest {
	struct tfs_manifest_entry *v;
	size_t n;
	size_t errors;
};

/* What the mount serves: `mountpoint` (absolute, no trailing '/'),
 * `bucket` and `prefix` (S3 sources; prefix without a trailing '/', ""
 * for none; bucket NULL for a local directory). */
struct tfs_manifest_scope {
	const char *mountpoint;
	const char *bucket;
	const char *prefix;
};

/* One entry of a manifest: line number `line` (1-based), its key (relative
 * to the mount's root) or NULL and why the line was rejected; both are
 * borrowed for the call.  Returns 0 to go on, or an errno that stops the
 * scan and is returned by tfs_manifest_scan(). */
typedef int (*tfs_manifest_fn)(void *ctx, uint64_t line, const char *key, const char *error);

/* Call `fn` for each entry of `len` bytes of manifest text, in order,
 * allocating nothing per entry (one line buffer; a JSON line's objects
 * live for its call).  Returns 0, ENOMEM or the first errno of `fn`. */
int tfs_manifest_scan(const char *text, size_t len, const struct tfs_manifest_scope *scope,
		      tfs_manifest_fn fn, void *ctx);

/* Parse `len` bytes of manifest text.  Returns 0 and fills *out (release
 * with tfs_manifest_free), EFBIG (more than max_entries entries), or
 * ENOMEM.  Bad lines are entries with `error` set. */
int tfs_manifest_parse(const char *text, size_t len, const struct tfs_manifest_scope *scope,
		       size_t max_entries, struct tfs_manifest *out);

/* Read and parse the file at `path`.  Returns 0, an errno of open/read
 * (ENOENT, EACCES...), EFBIG, or ENOMEM. */
int tfs_manifest_load(const char *path, const struct tfs_manifest_scope *scope, size_t max_entries,
		      struct tfs_manifest *out);

void tfs_manifest_free(struct tfs_manifest *m);

#endif
