/* node_volume.h - one volume as the kubelet describes it, checked against
 * the node's policy, and the tierfs configuration it becomes.  Both drivers
 * share it: each fills a struct tfs_node_request, the CSI plugin from the
 * call's volume_context, secrets and capability (csi/csi_node.c), the
 * FlexVolume driver from the options JSON of a `mount` call
 * (flexvolume/fv_json.c), and tfs_node_volume_make() checks it.  The rules,
 * in the words of the FlexVolume JSON (the CSI plugin passes the same
 * request from its own fields, csi_node.h):
 *
 *   - Volume options (node_opts.h) are matched exactly ("ramSize").  An
 *     unknown one is an error; so is one the node does not allow
 *     ([pod] allow), a malformed value, or a value beyond the node's
 *     [limits].
 *   - kubernetes.io/readwrite "ro" makes the mount read-only, like
 *     readOnly=true.  The kubelet sets it from the inline volume's
 *     flexVolume.readOnly, or for a PersistentVolume from the pod's
 *     persistentVolumeClaim.readOnly (a PV's own flexVolume.readOnly never
 *     reaches the driver: a read-only PV says readOnly: "true" in its
 *     options).
 *   - kubernetes.io/mounterArgs.FsGroup (the pod's fsGroup, a decimal gid
 *     below 2^31) gives the mount that gid and the node's fsgroup modes
 *     when the node config's fsgroup is yes (node_conf.h); the pod
 *     chooses it in its securityContext anyway, so a pod option of that
 *     name (the kubelet lets the options override its keys) grants nothing
 *     more.  Other kubernetes.io/ keys only name the pod for the log.
 *   - kubernetes.io/secret/accessKey, secretKey (both required when either
 *     is there) and sessionToken (optional); any other secret key is an
 *     error.  Without a Secret, the node's credentials_file is used if it
 *     has one, else the mount fails.
 *   - Options the pod does not give take the node's [defaults]; options
 *     unset in both are left to tierfs (its base config, then its
 *     built-in defaults).
 *   - The source: a pod's source replaces the default bucket and prefix; a
 *     pod's bucket comes with the pod's prefix (none if not given); a pod's
 *     prefix alone applies to the default bucket.  No bucket at all is an
 *     error.
 *   - A read-only volume gets writeback.mode=off; a pod asking for another
 *     write-back mode on a read-only volume is an error.
 */
#ifndef TFS_NODE_VOLUME_H
#define TFS_NODE_VOLUME_H

#include <stdbool.h>

#include "dbuf.h"
#include "node_conf.h"
#include "node_opts.h"
#include "node_secrets.h"

struct tfs_node_volume {
	char *source; /* s3://BUCKET[/PREFIX] */
	bool read_only;
	bool has_fsgroup; /* kubernetes.io/mounterArgs.FsGroup was given */
	unsigned fsgroup;
	char *value[TFS_NODE_OPT_COUNT]; /* effective values of the tierfs-mapped options; NULL: unset */
	bool from_pod[TFS_NODE_OPT_COUNT];
	struct tfs_node_creds creds; /* access_key NULL: no Secret */
	char *pod;                   /* "namespace/name" for logs, or NULL */
	char *pv;                    /* kubernetes.io/pvOrVolumeName, or NULL */
};

/* One volume as a driver received it, before the node's policy.  Strings
 * are borrowed for the call. */
struct tfs_node_kv {
	const char *key;
	const char *value;
};

#define TFS_NODE_MAX_KV 64 /* options, and keys of the Secret, of one request */

struct tfs_node_request {
	const struct tfs_node_kv *opt; /* the volume's options by pod-spec name ("ramSize") */
	size_t n_opt;
	const struct tfs_node_kv *secret; /* the Secret's keys, values in plain text */
	size_t n_secret;
	bool read_only;               /* the caller's read-only flag */
	const char *read_only_origin; /* what set it, for messages */
	const char *fsgroup;          /* the pod's fsGroup, decimal, or NULL */
	const char *fsgroup_origin;   /* where it came from, for messages */
	const char *pod;              /* "namespace/name" for logs, or NULL */
	const char *pv;               /* the volume's name for logs, or NULL */
};

/* Check the request `rq` under the policy of `node` and fill *out: every
 * option known, allowed by [pod] allow, well-formed and within [limits];
 * the Secret's keys accessKey and secretKey (both or neither; a missing
 * Secret needs node->credentials_file), optional sessionToken, each
 * checked by tfs_node_secret_plain(); fsgroup a gid below 2^31; the source and
 * the defaults resolved as the header's comment says.  Returns 0; EINVAL
 * with one line in `err` saying which option, secret or rule and why (never
 * a secret's value); ENOMEM.  On failure *out is cleared; on success the
 * caller calls tfs_node_volume_clear(). */
int tfs_node_volume_make(const struct tfs_node_request *rq, const struct tfs_node_conf *node,
			 struct tfs_node_volume *out, struct tfs_dbuf *err);

/* A gid as the kubelet writes an int64: decimal digits, at most
 * 2^31 - 1 (Kubernetes validates fsGroup to that range).  Returns 0 and
 * sets *out, or EINVAL. */
int tfs_node_parse_gid(const char *s, unsigned *out);

/* Replace the text of `err` (when not NULL) with the message, cut at 2047
 * bytes; returns EINVAL.  How tfs_node_volume_make() refuses a request,
 * and how a driver refuses what it cannot make a request of. */
int tfs_node_refuse(struct tfs_dbuf *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Wipe the secrets, free everything, zero *v.  Safe on a zeroed struct. */
void tfs_node_volume_clear(struct tfs_node_volume *v);

/* The tierfs configuration of the volume's daemon, as INI text appended to
 * `out`: node.tierfs_conf (if set) as the base, then the volume's
 * options, mount.trusted = false (a volume is never trusted: setuid and
 * setgid bits are dropped and the mount is nosuid,nodev, even when the
 * base sets it), ssd.dir = `ssd_dir`, backend.credentials_file = `creds_file`
 * (may be NULL: left as the base has it), log.file = node.daemon_log (if
 * set) and, for a read-only volume, writeback.mode = off; validated as
 * `tierfs mount` will.  *writable (may be NULL) tells whether the daemon
 * takes writes (not read-only, write-back not off): only then can its
 * cache hold writes not uploaded yet.  Returns 0; EINVAL (message in err:
 * the base file's file:line, or a rule the options break together);
 * ENOENT/EACCES... for the base file; ENOMEM; EOVERFLOW (out's maximum). */
int tfs_node_volume_tierfs_conf(const struct tfs_node_volume *v, const struct tfs_node_conf *node,
				const char *ssd_dir, const char *creds_file, struct tfs_dbuf *out,
				bool *writable, struct tfs_dbuf *err);

/* The fingerprint of what the volume's daemon serves: HMAC-SHA256 under
 * `key` (keylen > 0 bytes: the node's fingerprint key, node_mount.h) of its
 * source, effective options, read-only flag, fsGroup and credentials
 * (access key, secret key and session token), the first TFS_NODE_HASH_LEN hex
 * digits into out[0..len).  Two volumes with one fingerprint can share a
 * daemon; one that names another's access key with another secret key
 * cannot.  The fingerprint names a directory that mountinfo shows: without
 * the key it says nothing about the secret key, so a weak one cannot be
 * tested offline against it.  Returns 0, ERANGE, ENOMEM, or EIO if OpenSSL
 * fails. */
int tfs_node_volume_fingerprint(const struct tfs_node_volume *v, const unsigned char *key,
				size_t keylen, char *out, size_t len);

/* The -o argument of `tierfs mount` for the volume, appended to `out`:
 * allow_other; ro for a read-only volume; gid=FSGROUP,
 * dir_mode=NODE_DIR_MODE,file_mode=NODE_FILE_MODE when the volume has an
 * fsGroup and node->fsgroup is set; context="CONTEXT" when
 * node->selinux_context is set, its commas escaped with a backslash for
 * fuse_opt (which takes the backslashes off again, so the kernel gets the
 * quoted context whole).  Returns 0, ENOMEM or EOVERFLOW (out's maximum). */
int tfs_node_volume_mount_opts(const struct tfs_node_volume *v, const struct tfs_node_conf *node,
			       struct tfs_dbuf *out);

#endif
