/* meta_headers.c - the attributes s3fs-style x-amz-meta-* headers give an
 * object or a directory marker (meta_headers.h).  Called by meta.c and meta_list.c only;
 * calls nothing of the cache.
 */
#include "config.h"

#include "meta_headers.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint32_t meta_u32(const struct tfs_obj_meta *om, const char *name, uint32_t mask)
{
	const char *v = tfs_obj_meta_get(om, name);
	if (v == NULL || *v == '\0')
		return TFS_META_UNSET;
	char *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno || *end != '\0' || x > UINT32_MAX)
		return TFS_META_UNSET;
	return (uint32_t)x & mask;
}

/* A time from x-amz-meta-<name>: s3fs writes "sec" or "sec.nsec" (nine
 * digits; s3fs reads the digits after the dot as a number of nanoseconds,
 * and so does this).  Returns the seconds, or 0 when missing or out of
 * range (then *ns is 0 too). */
static int64_t meta_time(const struct tfs_obj_meta *om, const char *name, uint32_t *ns)
{
	const char *v = tfs_obj_meta_get(om, name);
	*ns = 0;
	if (v == NULL || *v < '0' || *v > '9')
		return 0;
	char *end;
	errno = 0;
	long long s = strtoll(v, &end, 10);
	if (errno || s >= 1000000000000ll)
		return 0;
	if (*end == '.') {
		const char *f = end + 1;
		unsigned long long n = 0;
		if (*f >= '0' && *f <= '9')
			n = strtoull(f, &end, 10);
		if (errno || n >= 1000000000ull)
			return 0;
		*ns = (uint32_t)n;
	}
	if (*end != '\0') {
		*ns = 0;
		return 0;
	}
	return (int64_t)s;
}

/* The S_IFMT bits of a file that shows as a special kind, or 0. */
static uint32_t special_fmt(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFLNK:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		return mode & S_IFMT;
	default:
		return 0;
	}
}

void tfs_meta_attr_from_head(const struct tfs_obj_meta *om, struct tfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = TFS_FT_FILE;
	a->size = om->size;
	a->mtime = om->mtime;
	snprintf(a->etag, sizeof(a->etag), "%s", om->etag);
	a->headers = true;
	/* s3fs writes st_mode in decimal, with the file type bits. */
	uint32_t mode = meta_u32(om, "mode", UINT32_MAX);
	a->mode = mode == TFS_META_UNSET ? mode : mode & 07777;
	a->fmt = mode == TFS_META_UNSET ? 0 : special_fmt(mode);
	if (a->fmt == S_IFLNK && (a->size == 0 || a->size >= PATH_MAX))
		a->fmt = 0; /* no target a symlink can have: a file */
	if (a->fmt == S_IFCHR || a->fmt == S_IFBLK) {
		const char *rd = tfs_obj_meta_get(om, "rdev");
		char *end;
		errno = 0;
		unsigned long long x = rd ? strtoull(rd, &end, 10) : 0;
		if (rd && errno == 0 && end != rd && *end == '\0')
			a->rdev = x;
	}
	a->uid = meta_u32(om, "uid", UINT32_MAX);
	a->gid = meta_u32(om, "gid", UINT32_MAX);
	uint32_t ns;
	int64_t t = meta_time(om, "mtime", &ns);
	if (t) {
		a->mtime = t;
		a->mtime_ns = ns;
	}
	a->atime = meta_time(om, "atime", &a->atime_ns);
	a->ctime = meta_time(om, "ctime", &a->ctime_ns);
}

void tfs_meta_attr_from_marker(const struct tfs_obj_meta *om, struct tfs_attr *a)
{
	tfs_meta_attr_from_head(om, a);
	a->type = TFS_FT_DIR;
	a->size = 0;
	a->fmt = 0;
	a->rdev = 0;
	a->etag[0] = '\0';
	if (tfs_obj_meta_get(om, "mtime") == NULL)
		a->mtime = 0; /* a marker's Last-Modified is not the directory's time */
}

void tfs_meta_dir_attr(struct tfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = TFS_FT_DIR;
	a->mode = a->uid = a->gid = TFS_META_UNSET;
}
