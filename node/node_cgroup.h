/* node_cgroup.h - the memory limit of one daemon where systemd does not run:
 * a cgroup of its own, below node.cgroup_dir (node_conf.h), that the
 * process starting the daemon joins before exec (tfs_node_run_in()), so the
 * daemon, its keeper and whatever they start are charged to it.
 *
 * Both layouts are handled: the cgroup v1 memory controller (its own
 * hierarchy, /sys/fs/cgroup/memory on a v1 or hybrid node), where the
 * limit is memory.limit_in_bytes, and cgroup v2, where it is memory.max
 * and the memory controller is enabled in cgroup.subtree_control of
 * cgroup_dir and of its parent.  The layout is told by the file system of
 * cgroup_dir's parent (statfs()).
 *
 * Where systemd runs, the daemon's scope gets the same limit as a
 * MemoryMax= property instead (node_mount.c), and nothing here is used.
 */
#ifndef TFS_NODE_CGROUP_H
#define TFS_NODE_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "dbuf.h"
#include "node_conf.h"

/* Create (or reuse) the cgroup CGROUP_DIR/`name` (cgroup_dir, and on v2
 * the controller settings above it, created as needed), set its memory
 * limit to `limit` bytes, and open its cgroup.procs for writing
 * (close-on-exec) into *procs_fd.  Its path goes to path[0..cap).
 * Returns 0; ENOTSUP when cgroup_dir is empty and no memory cgroup is
 * mounted, or cgroup_dir is not in a cgroup memory hierarchy; ENAMETOOLONG;
 * or the errno of the file system, each with one line in `msg` naming
 * the file and [node] cgroup_dir. */
int tfs_node_cgroup_create(const struct tfs_node_conf *node, const char *name, uint64_t limit,
			   char *path, size_t cap, int *procs_fd, struct tfs_dbuf *msg);

/* Remove the cgroup at `path` (rmdir: the kernel refuses while a process
 * is in it), retrying for up to `wait_ms` while one is.  Returns 0 (also
 * when it is gone already), EBUSY while a process is still in it, or
 * another errno. */
int tfs_node_cgroup_remove(const char *path, unsigned wait_ms);

#endif
