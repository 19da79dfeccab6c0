/* wb_attr.c - how a staged file's attributes are written down: in the
 * write-back API (struct tfs_wb_attr), in a journal record, in the
 * metadata cache's struct tfs_attr, and as the object headers (s3fs's
 * x-amz-meta-mode, uid, gid, times, rdev) a record gives its upload.
 * Pure conversions: no state, no locks.  Contracts in
 * writeback_internal.h and writeback.h.
 */
#include "config.h"

#include "writeback_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct tfs_wb_attr tfs_wb_attr_of(const struct tfs_attr *a)
{
	struct tfs_wb_attr w = {
		.mode = a->mode == TFS_META_UNSET ? TFS_META_UNSET : (a->mode & 07777) | a->fmt,
		.uid = a->uid,
		.gid = a->gid,
		.mtime = a->mtime,
		.atime = a->atime,
		.ctime = a->ctime,
		.mtime_ns = a->mtime_ns,
		.atime_ns = a->atime_ns,
		.ctime_ns = a->ctime_ns,
		.rdev = a->rdev,
	};
	return w;
}

void tfs_wb_attr_apply(const struct tfs_wb_attr *w, struct tfs_attr *a)
{
	a->mode = w->mode == TFS_META_UNSET ? TFS_META_UNSET : w->mode & 07777;
	a->fmt = w->mode == TFS_META_UNSET ? 0 : w->mode & S_IFMT;
	a->uid = w->uid;
	a->gid = w->gid;
	a->mtime = w->mtime;
	a->atime = w->atime;
	a->ctime = w->ctime;
	a->mtime_ns = w->mtime_ns;
	a->atime_ns = w->atime_ns;
	a->ctime_ns = w->ctime_ns;
	a->rdev = w->rdev;
}

void wb_jrec_set_attr(struct tfs_jrec *r, const struct tfs_wb_attr *a)
{
	r->mode = a->mode;
	r->uid = a->uid;
	r->gid = a->gid;
	r->mtime = a->mtime;
	r->atime = a->atime;
	r->ctime = a->ctime;
	r->mtime_ns = a->mtime_ns;
	r->atime_ns = a->atime_ns;
	r->ctime_ns = a->ctime_ns;
	r->rdev = a->rdev;
}

struct tfs_wb_attr wb_jrec_attr(const struct tfs_jrec *r)
{
	struct tfs_wb_attr a = {
		.mode = r->mode,
		.uid = r->uid,
		.gid = r->gid,
		.mtime = r->mtime,
		.atime = r->atime,
		.ctime = r->ctime,
		.mtime_ns = r->mtime_ns,
		.atime_ns = r->atime_ns,
		.ctime_ns = r->ctime_ns,
		.rdev = r->rdev,
	};
	return a;
}

void wb_file_tfs_attr(const struct tfs_wb_file *f, struct tfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = TFS_FT_FILE;
	a->size = f->size;
	tfs_wb_attr_apply(&f->attr, a);
	a->local = true;
	a->headers = true;
}

/* ---- what a record becomes ---- */

/* x-amz-meta-<name> as s3fs writes a time: "sec", or "sec.nsec" with
 * nine digits. */
static void set_time(struct tfs_obj_meta *om, const char *name, int64_t s, uint32_t ns)
{
	char v[48];
	if (ns && ns < 1000000000u)
		snprintf(v, sizeof(v), "%lld.%09u", (long long)s, (unsigned)ns);
	else
		snprintf(v, sizeof(v), "%lld", (long long)s);
	tfs_obj_meta_set(om, name, v);
}

void wb_set_meta_headers(struct tfs_obj_meta *om, const struct tfs_jrec *r, bool dir, bool mtime)
{
	char v[32];
	if (r->mode != TFS_META_UNSET) {
		/* s3fs stores st_mode in decimal, with the file type bits. */
		uint32_t fmt = r->mode & S_IFMT;
		if (dir || fmt == 0)
			fmt = dir ? S_IFDIR : S_IFREG;
		snprintf(v, sizeof(v), "%u", (unsigned)(fmt | (r->mode & 07777)));
		tfs_obj_meta_set(om, "mode", v);
		if (!dir && (fmt == S_IFCHR || fmt == S_IFBLK)) {
			snprintf(v, sizeof(v), "%llu", (unsigned long long)r->rdev);
			tfs_obj_meta_set(om, "rdev", v);
		}
	}
	if (r->uid != TFS_META_UNSET) {
		snprintf(v, sizeof(v), "%u", (unsigned)r->uid);
		tfs_obj_meta_set(om, "uid", v);
	}
	if (r->gid != TFS_META_UNSET) {
		snprintf(v, sizeof(v), "%u", (unsigned)r->gid);
		tfs_obj_meta_set(om, "gid", v);
	}
	if (mtime)
		set_time(om, "mtime", r->mtime, r->mtime_ns);
	if (mtime && r->atime)
		set_time(om, "atime", r->atime, r->atime_ns);
	if (mtime && r->ctime)
		set_time(om, "ctime", r->ctime, r->ctime_ns);
}
