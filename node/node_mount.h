/* node_mount.h - mounting one volume with its own tierfs daemon, and
 * unmounting it: the FlexVolume driver's `mount` and `unmount` calls, and
 * the CSI plugin's NodeStageVolume and NodeUnstageVolume.
 *
 * Per-volume state lives in STATE/<hash>/ (node.state_dir, mode 0700),
 * where <hash> is tfs_node_hash() of the target's canonical path
 * (tfs_ctl_canonical_path()), so `unmount TARGET` finds it from the path
 * alone, even after a kubelet restart:
 *
 *	volume.json   target, source, cache directory, phase (mounting,
 *	              mounted, unmounted, kept), whether it takes writes, the
 *	              daemon's pid, the keyed fingerprint of the volume's
 *	              settings (tfs_node_fingerprint()), the daemon's ram.size and
 *	              ssd.size in bytes and its own memory cgroup (if any)
 *	tierfs.conf   the daemon's configuration (tfs_node_volume_tierfs_conf())
 *	credentials   the Secret's keys, mode 0600 (node_secrets.h)
 *
 * STATE/fingerprint.key (0600, 32 random bytes, created once) is the HMAC
 * key of the fingerprints; STATE/limits.lock serialises admission.
 *
 * Every volume of the node shares one SSD cache, node.cache_root, in
 * which tierfs keeps each source apart (<cache_root>/<source id>/) and each
 * mountpoint's staged writes apart (staging/<owner>/).
 *
 * mount: idempotent (a live mount of ours with the same source and
 * settings is Success, one with another source or settings EBUSY; a dead one is detached and mounted again, when the driver is
 * called on it: the kubelet does not, its own stat of the target comes
 * first); runs `tierfs mount` with tfs_node_volume_mount_opts()
 * (which daemonizes only once the mount is live) detached from the caller,
 * under `systemd-run --scope` when systemd runs, bounded by
 * node.mount_timeout, and under a memory limit of ram.size +
 * node.memory_margin (the scope's MemoryMax=, else a cgroup of its own:
 * node_cgroup.h).  Before the daemon starts, the node-wide limits are
 * checked (node.max_daemons, max_total_ram, max_total_ssd, counting every
 * volume of state_dir that is mounting or mounted, or whose daemon has not
 * exited): a mount beyond one fails with EDQUOT; on failure stops the daemon, unmounts, removes the
 * state and the cache, and returns the daemon's own message.
 *
 * unmount: a tierfs mount without state of ours in state_dir is refused
 * (EBUSY) and left alone: the driver unmounts only what it mounted.  For
 * a writable volume, first the daemon's write-back drain,
 * bounded by node.unmount_timeout: writes not uploaded by then (or a
 * daemon that does not answer) make it a Failure that leaves the volume
 * mounted and uploading, for the kubelet to retry.  Then `tierfs umount`,
 * and a lazy unmount if the target is still mounted (EBUSY); a dead mount
 * (ENOTCONN, ESTALE) counts as mounted.  It never deletes anything under
 * the target.  The credentials go at once; the cache and the state once
 * the daemon has exited, if nothing written can be left in the cache (a
 * read-only volume, or one drained before a plain unmount).  Otherwise the
 * cache is kept (phase "kept") for the next mount of the target, or for
 * the admin.  A daemon that outlives a lazy unmount is left to a later
 * call: every call first sweeps the state of volumes that are gone.
 *
 * The kubelet never runs two calls for one volume at once; calls for
 * different volumes touch different state.
 */
#ifndef TFS_NODE_MOUNT_H
#define TFS_NODE_MOUNT_H

#include "dbuf.h"
#include "node_conf.h"
#include "node_volume.h"
#include "log.h"

/* Mount the checked volume `vol` on `target`.  Returns 0 (the mount is
 * live); EBUSY when something else, or another volume of ours, is mounted
 * there; EDQUOT beyond a node-wide limit; EIO, ETIMEDOUT... when the daemon did not start, with the reason
 * in `msg` (one line, the daemon's own words; never a secret). */
int tfs_node_mount_volume(const struct tfs_node_conf *node, const struct tfs_log *log,
			  const char *target, const struct tfs_node_volume *vol,
			  struct tfs_dbuf *msg);

/* The fingerprint of `vol` (tfs_node_volume_fingerprint()) under the node's key,
 * STATE/fingerprint.key: created once (tfs_node_key_file()), state_dir created
 * 0700 (or made 0700) first.  Returns 0; or an errno with the reason in
 * `msg` (EPERM: a key file that is not ours and private). */
int tfs_node_fingerprint(const struct tfs_node_conf *node, const struct tfs_node_volume *vol,
			 char *out, size_t len, struct tfs_dbuf *msg);

/* `unmount TARGET`.  Returns 0 (nothing of ours is mounted there any
 * more), or an errno with the reason in `msg`. */
int tfs_node_unmount(const struct tfs_node_conf *node, const struct tfs_log *log,
		     const char *target, struct tfs_dbuf *msg);

/* Clean up after the volumes of node.state_dir that are gone (not mounted,
 * no daemon), as every mount and unmount call does first: a read-only or
 * cleanly unmounted one goes entirely, a writable one is kept.  Problems
 * are logged; cannot fail. */
void tfs_node_sweep(const struct tfs_node_conf *node, const struct tfs_log *log);

/* Whether the tierfs filesystem `devno` ("major:minor", tfs_node_mount_lookup())
 * is mounted on a target that a volume of node.state_dir records: a mount
 * this driver made, which a bind mount of it shares.  Sets *found (false
 * when state_dir cannot be read); returns 0. */
int tfs_node_recorded_devno(const struct tfs_node_conf *node, const char *devno, bool *found);

/* Log how many volumes of node.state_dir are mounted and answer, and each
 * one mounted whose daemon does not answer.  Cannot fail. */
void tfs_node_report(const struct tfs_node_conf *node, const struct tfs_log *log);

#endif
