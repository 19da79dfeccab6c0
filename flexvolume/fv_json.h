/* fv_json.h - the FlexVolume driver's `mount` call: the kubelet's options
 * JSON made into a volume request for the node core (node_volume.h), then
 * mounted (node_mount.h).
 *
 * The JSON is a flat object of strings (anchors §5): the pod's
 * flexVolume.options verbatim, the kubelet's "kubernetes.io/..." keys and
 * each key of the Secret as "kubernetes.io/secret/<key>", base64.  What
 * the keys mean, and the rules a volume is checked by, are node_volume.h's.
 */
#ifndef TFS_FV_JSON_H
#define TFS_FV_JSON_H

#include "dbuf.h"
#include "log.h"
#include "node_conf.h"
#include "node_volume.h"

/* Parse the kubelet's FlexVolume options `json` into a request (the
 * Secret's keys base64-decoded with tfs_node_secret_decode(), more than
 * TFS_NODE_MAX_KV options or keys refused) and check it with
 * tfs_node_volume_make() under the policy of `node` into *out.  Returns 0;
 * EINVAL with one line in `err` saying which option, secret or rule and
 * why (never a secret's value); ENOMEM.  On failure *out is cleared; on
 * success the caller calls tfs_node_volume_clear(). */
int fv_volume_parse(const char *json, const struct tfs_node_conf *node, struct tfs_node_volume *out,
		    struct tfs_dbuf *err);

/* `mount TARGET JSON`: fv_volume_parse(), then tfs_node_mount_volume().
 * Returns 0 (the mount is live), or an errno with the reason for the
 * kubelet in `msg` (one line; never a secret). */
int fv_mount(const struct tfs_node_conf *node, const struct tfs_log *log, const char *target,
	     const char *json, struct tfs_dbuf *msg);

#endif
