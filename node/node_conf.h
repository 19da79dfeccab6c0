/* node_conf.h - the node's configuration for a driver, written by the
 * cluster admin: /etc/tierfs/flexvolume.conf for the FlexVolume driver
 * (from the ConfigMap in flexvolume/deploy/), /etc/tierfs/csi.conf for the
 * CSI plugin (csi/deploy/); one format for both.  Where things live on the node, the defaults of every
 * volume option, the limits a pod may not exceed, and which options a pod
 * may set at all.
 *
 *	[node]
 *	tierfs = /opt/tierfs/bin/tierfs    the tierfs binary
 *	tierfs_conf =                      base tierfs.conf for the daemons
 *	cache_root = /var/cache/tierfs/flexvolume
 *	state_dir = /run/tierfs/flexvolume
 *	log_file = /var/log/tierfs-flexvolume.log   (empty: syslog)
 *	log_level = info
 *	daemon_log =                       log.file of the daemons (empty: theirs)
 *	credentials_file =                 for volumes without a Secret
 *	mount_timeout = 60s
 *	unmount_timeout = 45s
 *	systemd = auto                     auto, yes or no: systemd-run --scope
 *	systemd_run = /usr/bin/systemd-run
 *	fsgroup = yes                      honour the pod's fsGroup (below)
 *	fsgroup_dir_mode = 0775            modes of a volume with an fsGroup
 *	fsgroup_file_mode = 0664
 *	selinux_context =                  context= of every mount (empty: none)
 *	kubelet_dir = /var/lib/kubelet     the CSI plugin acts only below it
 *	max_daemons = 32                   node-wide: daemons at once
 *	max_total_ram =                    node-wide: sum of ram.size (empty: no bound)
 *	max_total_ssd =                    node-wide: sum of ssd.size (empty: no bound)
 *	memory_margin = 256M               a daemon's memory limit: ram.size + this
 *	cgroup_dir =                       parent of the daemons' cgroups (empty: auto)
 *
 *	[defaults]                         any volume option (node_opts.h)
 *	ramSize = 512M
 *
 *	[limits]
 *	maxRamSize = 4G                    maxSsdSize, maxBlockSize,
 *	minMetadataTTL = 10s               maxReadahead
 *
 *	[pod]
 *	allow = source, bucket, prefix, readOnly, policy, metadataTTL
 *
 * The CSI plugin's built-in values differ in three keys: cache_root
 * /var/cache/tierfs/csi, state_dir /run/tierfs/csi, and log_file empty
 * (the plugin then logs to standard error, the container's log).
 *
 * Syntax as tierfs.conf: inih, names case-insensitive, ';' and '#'
 * comments, lines of at most 199 characters, files of at most 1 MiB.
 * Without a file the built-in values above apply (every [defaults] key
 * unset, no limits, the allow list shown).  Every path must be absolute.
 *
 * Errors name the file and line:
 *	/etc/tierfs/flexvolume.conf:12: [limits] maxRamSize: '4X' is not a size ...
 * A default that breaks a limit, or source together with bucket or prefix
 * in [defaults], is an error too.
 */
#ifndef TFS_NODE_CONF_H
#define TFS_NODE_CONF_H

#include <stdbool.h>
#include <stdint.h>

#include "dbuf.h"
#include "node_opts.h"
#include "log.h"

enum tfs_node_systemd {
	TFS_NODE_SYSTEMD_AUTO, /* when /run/systemd/system exists (systemd is PID 1) */
	TFS_NODE_SYSTEMD_YES,
	TFS_NODE_SYSTEMD_NO,
};

/* fsgroup: when yes and the kubelet passes kubernetes.io/mounterArgs.FsGroup
 * (the pod's securityContext.fsGroup), the mount gets gid=FSGROUP,
 * dir_mode=fsgroup_dir_mode, file_mode=fsgroup_file_mode (for objects
 * without x-amz-meta-gid and -mode, tierfs(1)), so a pod running as
 * another uid in that group can write.  The modes are octal and may hold
 * no bit outside TFS_NODE_FSGROUP_MODE_MASK: nothing world-writable, and no
 * setuid, setgid or sticky bit (a volume is never trusted, so tierfs would
 * drop the set-id bits anyway).  When no, FsGroup is ignored. */
#define TFS_NODE_FSGROUP_MODE_MASK 0775

/* selinux_context: passed as context="..." on every mount the driver
 * makes (SELinux nodes: the kubelet's selinuxRelabel is off for this
 * driver, FUSE cannot be relabelled).  At most TFS_NODE_CONTEXT_MAX bytes of
 * user:role:type[:level]; only the admin sets it, never a pod. */
#define TFS_NODE_CONTEXT_MAX 160

/* kubelet_dir: the kubelet's root directory (--root-dir).  The CSI plugin
 * stages, publishes, unpublishes and unstages only paths below it
 * (csi_node.h); every other path is refused before anything is touched.
 *
 * max_daemons, max_total_ram, max_total_ssd: node-wide bounds on the
 * daemons the driver runs (each with its own RAM and SSD budget, outside
 * the pod's cgroup).  A mount that would exceed one is refused (EDQUOT;
 * the CSI plugin answers RESOURCE_EXHAUSTED), naming the bound and what
 * the node's daemons hold.  A relative ssd.size ("N%") counts as that
 * share of the filesystem holding cache_root.
 *
 * memory_margin, cgroup_dir: each daemon runs under a memory limit of its
 * ram.size + memory_margin (node_cgroup.h): a MemoryMax= property of its
 * systemd scope where systemd runs, else a cgroup of its own,
 * CGROUP_DIR/<driver>-<volume hash>, where cgroup_dir is a directory of a
 * cgroup v1 memory hierarchy or of cgroup v2 (empty: /sys/fs/cgroup/tierfs
 * on cgroup v2, /sys/fs/cgroup/memory/tierfs on v1 or hybrid). */
#define TFS_NODE_MAX_DAEMONS_MAX 100000

/* The environment variables naming the node config file (for tests and
 * unusual installs); when set, the file must exist. */
#define TFS_NODE_CONF_ENV "TIERFS_FLEXVOLUME_CONF"
#define TFS_NODE_CSI_CONF_ENV "TIERFS_CSI_CONF"

/* Which driver reads the file: the built-in values and names differ. */
enum tfs_node_driver {
	TFS_NODE_DRIVER_FLEXVOLUME,
	TFS_NODE_DRIVER_CSI,
};

struct tfs_node_conf_default {
	char *value;   /* NULL: not set */
	unsigned line; /* its line in the file */
	struct tfs_node_value parsed;
};

struct tfs_node_conf_limit {
	bool set;
	uint64_t value; /* bytes, or milliseconds for metadataTTL */
	unsigned line;
};

struct tfs_node_conf {
	enum tfs_node_driver driver;
	char *path; /* the file read; NULL when it did not exist */
	char *tierfs;
	char *tierfs_conf; /* NULL: the daemons start from tierfs's built-in defaults */
	char *cache_root;
	char *state_dir;
	char *log_file; /* NULL: syslog */
	enum tfs_log_level log_level;
	char *daemon_log;       /* NULL: the daemons log as their config says */
	char *credentials_file; /* NULL: a volume without a Secret fails */
	uint64_t mount_timeout_ms;
	uint64_t unmount_timeout_ms;
	enum tfs_node_systemd systemd;
	char *systemd_run;
	bool fsgroup;
	unsigned fsgroup_dir_mode;
	unsigned fsgroup_file_mode;
	char *selinux_context; /* NULL: no context= option */
	char *kubelet_dir;
	unsigned max_daemons;
	uint64_t max_total_ram; /* 0: no bound */
	uint64_t max_total_ssd; /* 0: no bound */
	uint64_t memory_margin;
	char *cgroup_dir; /* NULL: auto */

	struct tfs_node_conf_default def[TFS_NODE_OPT_COUNT];
	struct tfs_node_conf_limit limit[TFS_NODE_OPT_COUNT];
	bool allow[TFS_NODE_OPT_COUNT];
	unsigned allow_line; /* 0: the built-in list */
};

/* The file to read: $TIERFS_FLEXVOLUME_CONF / $TIERFS_CSI_CONF (then
 * *must_exist is true), else SYSCONFDIR "/tierfs/flexvolume.conf" /
 * "/tierfs/csi.conf" (*must_exist false).  Returns a static string or the
 * environment's; cannot fail. */
const char *tfs_node_conf_path(enum tfs_node_driver d, bool *must_exist);

/* "tierfs-flexvolume" or "tierfs-csi", for logs, unit names and the
 * daemons' configuration.  Static string. */
const char *tfs_node_driver_name(enum tfs_node_driver d);

/* Fill *n with the built-in values of `driver`, then read `path` on top of them.  A
 * missing file is not an error unless `must_exist`.  Returns 0; ENOENT,
 * EACCES, ... (cannot open: "FILE: cannot open: why"); EFBIG above 1 MiB;
 * EINVAL for anything wrong in the file ("FILE:LINE: ..."); ENOMEM.  The
 * message goes to `err` (may be NULL).  On failure *n is cleared; on
 * success the caller owns it and calls tfs_node_conf_clear(). */
int tfs_node_conf_load(struct tfs_node_conf *n, enum tfs_node_driver driver, const char *path,
		       bool must_exist, struct tfs_dbuf *err);

/* Free the strings of *n and zero it.  Safe on a zeroed struct. */
void tfs_node_conf_clear(struct tfs_node_conf *n);

/* "FILE:LINE" of a setting for messages, or "built-in" when line is 0 or
 * no file was read.  Writes into buf; returns buf. */
const char *tfs_node_conf_where(const struct tfs_node_conf *n, unsigned line, char *buf,
				size_t cap);

#endif
