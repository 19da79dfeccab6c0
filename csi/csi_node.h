/* csi_node.h - the CSI Identity and Node services of tierfs-csi: each call
 * unpacked from its protobuf bytes, checked, carried out with the node-side
 * core it shares with the FlexVolume driver (node_volume.h, node_mount.h),
 * and answered with the spec's gRPC code.
 *
 *   NodeStageVolume     one tierfs daemon per volume, mounted on the
 *                       staging path (tfs_node_mount_volume()), under the node's
 *                       policy (node_conf.h)
 *   NodePublishVolume   a bind mount of the staged mount on the pod's
 *                       target, nosuid,nodev, and read-only when asked; an
 *                       inline ephemeral volume (no stage call) binds a
 *                       daemon shared by every ephemeral volume with the
 *                       same fingerprint (tfs_node_fingerprint(): keyed by
 *                       STATE/fingerprint.key), mounted on
 *                       STATE/ephemeral/<fingerprint>; each target is
 *                       recorded in STATE/published/ before the bind
 *   NodeUnpublishVolume unmounts the bind of a recorded target (or an
 *                       unrecorded bind of a mount the state records:
 *                       published by an older plugin) and removes the
 *                       target directory; stops a shared ephemeral daemon
 *                       whose last bind went
 *   NodeUnstageVolume   tfs_node_unmount() of the staging path: write-back is
 *                       drained first; a mount without state is refused
 *
 * Every staging and target path must be below node.kubelet_dir, as given
 * (no "." or ".." component) and canonical; nothing outside it is
 * created, bound, unmounted or removed.
 *
 * Every call is idempotent.  What is mounted where is read from
 * /proc/self/mountinfo and the state directory, never kept in memory, so a
 * restarted plugin carries on where the last one stopped.
 *
 * Codes: a missing or malformed field, a path outside kubelet_dir, an
 * option or secret the policy refuses: INVALID_ARGUMENT; a bucket that
 * does not exist: NOT_FOUND; a target or staging path already holding
 * something else: ALREADY_EXISTS; a new daemon beyond the node-wide
 * limits (node_mount.h): RESOURCE_EXHAUSTED; publish before stage, unstage
 * with writes not uploaded, unpublish or unstage of a tierfs mount the
 * plugin did not make: FAILED_PRECONDITION; anything else: INTERNAL with
 * the daemon's own message.  Messages never hold a secret's value.
 */
#ifndef TFS_CSI_NODE_H
#define TFS_CSI_NODE_H

#include <stddef.h>

#include "csi_grpc.h"
#include "node_conf.h"
#include "log.h"

#define CSI_DRIVER_NAME "csi.tierfs.io"
#define CSI_EPHEMERAL_DIR "ephemeral" /* under node.state_dir */

struct csi_node {
	const struct tfs_node_conf *node;
	const struct tfs_log *log;
	const char *node_id;
};

/* The methods of both services, for csi_server_start(): identity calls
 * and NodeGetCapabilities/NodeGetInfo are inline, volume calls are not.
 * Sets *n; returns a static table whose handlers take a struct csi_node. */
const struct csi_method *csi_node_methods(size_t *n);

/* At start-up: clean up the state of volumes that are gone (tfs_node_sweep()),
 * drop the publish records of targets no longer mounted, stop the shared ephemeral daemons that no target uses any more (the last
 * unpublish may have died with a plugin), and log the volumes found live
 * and those whose daemon is dead.  Cannot fail (problems are logged). */
void csi_node_reconcile(const struct csi_node *cn);

#endif
