/* node_cgroup.c - a daemon's own memory cgroup (v1 or v2). */
#include "config.h"

#include "node_cgroup.h"
#include "node_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#define AUTO_V2 "/sys/fs/cgroup"
#define AUTO_V1 "/sys/fs/cgroup/memory"
#define SUBDIR "tierfs"

static long fs_type(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 ? (long)st.f_type : 0;
}

/* Write `s` to the file `dir`/`file`. */
static int write_to(const char *dir, const char *file, const char *s, struct tfs_dbuf *msg)
{
	char path[PATH_MAX];
	size_t n = strlen(s);
	int fd, rc = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
		return ENAMETOOLONG;
	errno = 0;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, s, n) != (ssize_t)n)
		rc = errno ? errno : EIO; /* a short write sets no errno */
	if (fd >= 0)
		close(fd);
	if (rc) {
		tfs_dbuf_reset(msg);
		tfs_dbuf_addf(msg, "cannot write %s to %s: %s", s, path, strerror(rc));
	}
	return rc;
}

static int make_dir(const char *path, struct tfs_dbuf *msg)
{
	if (mkdir(path, 0755) == 0 || errno == EEXIST)
		return 0;
	int rc = errno;
	tfs_dbuf_reset(msg);
	tfs_dbuf_addf(msg, "cannot create the cgroup %s: %s", path, strerror(rc));
	return rc;
}

/* The parent directory of `path` into out. */
static int parent_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (n == 0 || n >= cap)
		return EINVAL;
	memcpy(out, path, n);
	out[n] = '\0';
	return 0;
}

int tfs_node_cgroup_create(const struct tfs_node_conf *node, const char *name, uint64_t limit,
			   char *path, size_t cap, int *procs_fd, struct tfs_dbuf *msg)
{
	char root[PATH_MAX], parent[PATH_MAX], num[32];
	long type;
	int rc;

	*procs_fd = -1;
	if (node->cgroup_dir) {
		snprintf(root, sizeof(root), "%s", node->cgroup_dir);
	} else if (fs_type(AUTO_V2) == CGROUP2_SUPER_MAGIC) {
		snprintf(root, sizeof(root), "%s/%s", AUTO_V2, SUBDIR);
	} else if (fs_type(AUTO_V1) == CGROUP_SUPER_MAGIC) {
		snprintf(root, sizeof(root), "%s/%s", AUTO_V1, SUBDIR);
	} else {
		tfs_dbuf_reset(msg);
		tfs_dbuf_addf(msg,
			      "no memory cgroup for the daemon's memory limit: neither systemd nor "
			      "a cgroup v2 or v1 memory hierarchy (%s, %s) is there; set [node] "
			      "cgroup_dir",
			      AUTO_V2, AUTO_V1);
		return ENOTSUP;
	}
	if (parent_of(root, parent, sizeof(parent)) != 0) {
		tfs_dbuf_reset(msg);
		tfs_dbuf_addf(msg, "[node] cgroup_dir %s: no parent directory", root);
		return ENOTSUP;
	}
	type = fs_type(parent);
	bool v1 = type == CGROUP_SUPER_MAGIC;
	if (v1) {
		char f[PATH_MAX];

		if ((size_t)snprintf(f, sizeof(f), "%s/memory.limit_in_bytes", parent) >= sizeof(f))
			return ENAMETOOLONG;
		if (access(f, F_OK) != 0)
			type = 0; /* another controller's hierarchy */
	}
	if (type != CGROUP_SUPER_MAGIC && type != CGROUP2_SUPER_MAGIC) {
		tfs_dbuf_reset(msg);
		tfs_dbuf_addf(msg,
			      "[node] cgroup_dir %s: its parent is not in a cgroup v2 or cgroup v1 "
			      "memory hierarchy",
			      root);
		return ENOTSUP;
	}
	if (!v1) {
		/* The controller in each level's subtree_control, down to the
		 * daemon's cgroup (the parent's first). */
		rc = write_to(parent, "cgroup.subtree_control", "+memory", msg);
		if (rc == 0)
			rc = make_dir(root, msg);
		if (rc == 0)
			rc = write_to(root, "cgroup.subtree_control", "+memory", msg);
	} else {
		rc = make_dir(root, msg);
	}
	if (rc)
		return rc;
	if ((size_t)snprintf(path, cap, "%s/%s", root, name) >= cap)
		return ENAMETOOLONG;
	rc = make_dir(path, msg);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)limit);
	if (rc == 0)
		rc = write_to(path, v1 ? "memory.limit_in_bytes" : "memory.max", num, msg);
	if (rc == 0) {
		char procs[PATH_MAX];

		if ((size_t)snprintf(procs, sizeof(procs), "%s/cgroup.procs", path) >=
		    sizeof(procs))
			return ENAMETOOLONG;
		*procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
		if (*procs_fd < 0) {
			rc = errno;
			tfs_dbuf_reset(msg);
			tfs_dbuf_addf(msg, "cannot open %s: %s", procs, strerror(rc));
		}
	}
	if (rc)
		(void)rmdir(path);
	return rc;
}

int tfs_node_cgroup_remove(const char *path, unsigned wait_ms)
{
	for (unsigned waited = 0;; waited += 50) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || waited >= wait_ms)
			return errno;
		tfs_node_sleep_ms(50); /* the keeper exits just after its daemon */
	}
}
