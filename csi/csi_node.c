/* csi_node.c - the CSI Identity and Node services of tierfs-csi. */
#include "config.h"

#include "csi_node.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "csi.pb-c.h"
#include "ctl_path.h"
#include "node_mount.h"
#include "node_sys.h"
#include "node_volume.h"

#define FSTYPE "fuse.tierfs"
#define K8S_PREFIX "csi.storage.k8s.io/"
#define MAX_ID 1024 /* bytes of a volume_id */
#define PUBLISHED_DIR "published" /* under node.state_dir: one record per target */

__attribute__((format(printf, 3, 4))) static void set_error(struct csi_reply *r, enum csi_code code,
							    const char *fmt, ...)
{
	va_list ap;

	r->code = code;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
}

/* Pack a reply message into r. */
static void pack(struct csi_reply *r, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	r->data = malloc(n ? n : 1);
	if (r->data == NULL) {
		set_error(r, CSI_INTERNAL, "out of memory");
		return;
	}
	r->len = protobuf_c_message_pack(m, r->data);
}

/* ---- identity ---- */

static void get_plugin_info(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	Csi__V1__GetPluginInfoResponse out = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;

	(void)ctx, (void)req, (void)len;
	out.name = CSI_DRIVER_NAME;
	out.vendor_version = PACKAGE_VERSION;
	pack(r, &out.base);
}

static void get_plugin_capabilities(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	/* A node-only plugin: no controller service, no topology. */
	Csi__V1__GetPluginCapabilitiesResponse out = CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT;

	(void)ctx, (void)req, (void)len;
	pack(r, &out.base);
}

static void probe(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	Csi__V1__ProbeResponse out = CSI__V1__PROBE_RESPONSE__INIT;
	Google__Protobuf__BoolValue ready = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;

	(void)ctx, (void)req, (void)len;
	ready.value = 1;
	out.ready = &ready;
	pack(r, &out.base);
}

static void node_get_capabilities(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	Csi__V1__NodeGetCapabilitiesResponse out = CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__NodeServiceCapability cap[2] = { CSI__V1__NODE_SERVICE_CAPABILITY__INIT,
						  CSI__V1__NODE_SERVICE_CAPABILITY__INIT };
	Csi__V1__NodeServiceCapability__RPC rpc[2] = { CSI__V1__NODE_SERVICE_CAPABILITY__RPC__INIT,
						       CSI__V1__NODE_SERVICE_CAPABILITY__RPC__INIT };
	Csi__V1__NodeServiceCapability *caps[2] = { &cap[0], &cap[1] };

	(void)ctx, (void)req, (void)len;
	rpc[0].type = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME;
	rpc[1].type = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_MOUNT_GROUP;
	for (int i = 0; i < 2; i++) {
		cap[i].type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		cap[i].rpc = &rpc[i];
	}
	out.n_capabilities = 2;
	out.capabilities = caps;
	pack(r, &out.base);
}

static void node_get_info(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	const struct csi_node *cn = ctx;
	Csi__V1__NodeGetInfoResponse out = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;

	(void)req, (void)len;
	out.node_id = (char *)cn->node_id;
	pack(r, &out.base);
}

/* ---- the volume of a request ---- */

/* What a stage or publish request says about the volume, as pointers into
 * the unpacked message. */
struct vol_args {
	const char *volume_id;
	Csi__V1__VolumeCapability *cap;
	size_t n_context;
	Csi__V1__NodeStageVolumeRequest__VolumeContextEntry **context; /* same layout for publish */
	size_t n_secrets;
	Csi__V1__NodeStageVolumeRequest__SecretsEntry **secrets;
};

/* A key and value of a map<string,string>: every map entry type that
 * protoc-c generates has this layout. */
struct map_entry {
	ProtobufCMessage base;
	char *key;
	char *value;
};

static const char *context_value(const struct vol_args *a, const char *key)
{
	for (size_t i = 0; i < a->n_context; i++) {
		const struct map_entry *e = (const struct map_entry *)a->context[i];

		if (strcmp(e->key, key) == 0)
			return e->value;
	}
	return NULL;
}

static bool is_ephemeral(const struct vol_args *a)
{
	const char *v = context_value(a, K8S_PREFIX "ephemeral");

	return v && strcmp(v, "true") == 0;
}

static int check_id(const char *id, struct csi_reply *r)
{
	if (id == NULL || id[0] == '\0') {
		set_error(r, CSI_INVALID_ARGUMENT, "volume_id is missing");
		return EINVAL;
	}
	if (strlen(id) > MAX_ID) {
		set_error(r, CSI_INVALID_ARGUMENT, "volume_id is longer than %d bytes", MAX_ID);
		return EINVAL;
	}
	return 0;
}

/* A path the kubelet must give: present and absolute. */
static int check_given(const char *what, const char *path, struct csi_reply *r)
{
	if (path == NULL || path[0] == '\0') {
		set_error(r, CSI_INVALID_ARGUMENT, "%s is missing", what);
		return EINVAL;
	}
	if (path[0] != '/') {
		set_error(r, CSI_INVALID_ARGUMENT, "%s must be an absolute path", what);
		return EINVAL;
	}
	return 0;
}

/* An absolute path the kubelet gave, canonical, into out. */
static int check_path(const char *what, const char *path, char *out, size_t cap,
		      struct csi_reply *r)
{
	int rc = check_given(what, path, r);

	if (rc)
		return rc;
	rc = tfs_ctl_canonical_path(path, out, cap);
	if (rc) {
		set_error(r, rc == ENOENT ? CSI_NOT_FOUND : CSI_INVALID_ARGUMENT, "%s %.1024s: %s",
			  what, path, strerror(rc));
		return rc;
	}
	return 0;
}

/* Whether `path` is below `dir` (both absolute, no trailing '/'). */
static bool is_below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] != '\0';
}

/* A path the kubelet gives must be below node.kubelet_dir: as given (no
 * ".." component, so nothing is created elsewhere), and, once it exists,
 * canonical (no symbolic link leads out).  `path` is what the request
 * says or its canonical form. */
static int check_kubelet(const struct csi_node *cn, const char *what, const char *path,
			 struct csi_reply *r)
{
	char kdir[PATH_MAX];
	const char *k = cn->node->kubelet_dir;

	if (tfs_ctl_canonical_path(k, kdir, sizeof(kdir)) != 0)
		snprintf(kdir, sizeof(kdir), "%s", k);
	bool dotdot = strstr(path, "/../") != NULL || strstr(path, "/./") != NULL ||
		      (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0);
	if (!dotdot && (is_below(path, kdir) || is_below(path, k)))
		return 0;
	set_error(r, CSI_INVALID_ARGUMENT,
		  "%s %.1024s is not below the kubelet's directory %s ([node] kubelet_dir): "
		  "tierfs-csi touches nothing else",
		  what, path, k);
	return EINVAL;
}

/* check_path() of a kubelet path, which must also be below kubelet_dir
 * (check_kubelet()) as given and canonical. */
static int check_kubelet_path(const struct csi_node *cn, const char *what, const char *path,
			      char *out, size_t cap, struct csi_reply *r)
{
	if (check_given(what, path, r) || check_kubelet(cn, what, path, r))
		return EINVAL;
	int rc = check_path(what, path, out, cap, r);
	if (rc)
		return rc;
	return check_kubelet(cn, what, out, r);
}

/* The capability: a mount (not a block device) of type "" or "tierfs",
 * mount flags "ro" at most. */
static int check_cap(const Csi__V1__VolumeCapability *cap, bool *ro_flag, struct csi_reply *r)
{
	*ro_flag = false;
	if (cap == NULL) {
		set_error(r, CSI_INVALID_ARGUMENT, "volume_capability is missing");
		return EINVAL;
	}
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT ||
	    cap->mount == NULL) {
		set_error(r, CSI_INVALID_ARGUMENT,
			  "volume_capability: tierfs volumes are filesystems (access type mount), "
			  "not block devices");
		return EINVAL;
	}
	const char *fs = cap->mount->fs_type;
	if (fs && fs[0] && strcmp(fs, "tierfs") != 0) {
		char q[TFS_NODE_QUOTE_BUFLEN];

		set_error(r, CSI_INVALID_ARGUMENT,
			  "volume_capability: fs_type %s (a tierfs volume has fs_type \"\" or "
			  "\"tierfs\")",
			  tfs_node_quote(q, sizeof(q), fs));
		return EINVAL;
	}
	for (size_t i = 0; i < cap->mount->n_mount_flags; i++) {
		const char *f = cap->mount->mount_flags[i];
		char q[TFS_NODE_QUOTE_BUFLEN];

		if (strcmp(f, "ro") == 0) {
			*ro_flag = true;
			continue;
		}
		set_error(r, CSI_INVALID_ARGUMENT,
			  "volume_capability: mount flag %s is not supported (only ro; set tierfs "
			  "options in volumeAttributes)",
			  tfs_node_quote(q, sizeof(q), f));
		return EINVAL;
	}
	return 0;
}

static bool reader_only(const Csi__V1__VolumeCapability *cap)
{
	if (cap->access_mode == NULL)
		return false;
	switch (cap->access_mode->mode) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY:
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY:
		return true;
	default:
		return false;
	}
}

/* Build and check the volume of a stage call or an ephemeral publish. */
static int make_volume(const struct csi_node *cn, const struct vol_args *a, bool ro_flag,
		       struct tfs_node_volume *vol, struct csi_reply *r)
{
	struct tfs_node_kv opt[TFS_NODE_MAX_KV], sec[TFS_NODE_MAX_KV];
	struct tfs_node_request rq = { .opt = opt, .secret = sec };
	const char *ns = NULL, *name = NULL;
	char pod[600];
	struct tfs_dbuf err;
	int rc;

	for (size_t i = 0; i < a->n_context; i++) {
		const struct map_entry *e = (const struct map_entry *)a->context[i];

		if (strncmp(e->key, K8S_PREFIX, strlen(K8S_PREFIX)) == 0) {
			/* The kubelet's pod info: only for the log. */
			if (strcmp(e->key, K8S_PREFIX "pod.namespace") == 0)
				ns = e->value;
			else if (strcmp(e->key, K8S_PREFIX "pod.name") == 0)
				name = e->value;
			continue;
		}
		if (rq.n_opt == TFS_NODE_MAX_KV) {
			set_error(r, CSI_INVALID_ARGUMENT, "more than %d volume attributes",
				  TFS_NODE_MAX_KV);
			return EINVAL;
		}
		opt[rq.n_opt++] = (struct tfs_node_kv){ e->key, e->value };
	}
	for (size_t i = 0; i < a->n_secrets; i++) {
		const struct map_entry *e = (const struct map_entry *)a->secrets[i];

		if (rq.n_secret == TFS_NODE_MAX_KV) {
			set_error(r, CSI_INVALID_ARGUMENT, "more than %d secrets", TFS_NODE_MAX_KV);
			return EINVAL;
		}
		sec[rq.n_secret++] = (struct tfs_node_kv){ e->key, e->value };
	}
	rq.read_only = ro_flag || reader_only(a->cap);
	rq.read_only_origin = "a read-only access mode";
	if (a->cap->mount->volume_mount_group && a->cap->mount->volume_mount_group[0]) {
		rq.fsgroup = a->cap->mount->volume_mount_group;
		rq.fsgroup_origin = "volume_mount_group";
	}
	if (ns || name) {
		snprintf(pod, sizeof(pod), "%.250s/%.250s", ns ? ns : "?", name ? name : "?");
		rq.pod = pod;
	}
	rq.pv = a->volume_id;
	tfs_dbuf_init(&err, 8192);
	rc = tfs_node_volume_make(&rq, cn->node, vol, &err);
	if (rc)
		set_error(r, rc == EINVAL ? CSI_INVALID_ARGUMENT : CSI_INTERNAL, "%s",
			  tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
	tfs_dbuf_free(&err);
	if (rc)
		tfs_warn(cn->log, "volume %.200s refused: %s", a->volume_id, r->msg);
	return rc;
}

/* The code of a failed tfs_node_mount_volume(). */
static enum csi_code mount_code(int rc, const char *msg)
{
	if (rc == EBUSY)
		return CSI_ALREADY_EXISTS;
	if (rc == EINVAL)
		return CSI_INVALID_ARGUMENT;
	if (rc == EDQUOT) /* a node-wide limit (node_mount.h) */
		return CSI_RESOURCE_EXHAUSTED;
	/* The daemon's words for a bucket that is not there (S3's
	 * NoSuchBucket, the local backend's missing directory). */
	if (strstr(msg, "NoSuchBucket") || strstr(msg, "no such bucket") ||
	    strstr(msg, "does not exist"))
		return CSI_NOT_FOUND;
	return CSI_INTERNAL;
}

/* Mount `vol` on `target` with its own daemon. */
static int mount_volume(const struct csi_node *cn, const char *target, const struct tfs_node_volume *vol,
			struct csi_reply *r)
{
	struct tfs_dbuf msg;
	int rc;

	tfs_dbuf_init(&msg, CSI_GRPC_MAX_DETAILS);
	rc = tfs_node_mount_volume(cn->node, cn->log, target, vol, &msg);
	if (rc)
		set_error(r, mount_code(rc, tfs_dbuf_str(&msg)), "%s",
			  tfs_dbuf_len(&msg) ? tfs_dbuf_str(&msg) : strerror(rc));
	tfs_dbuf_free(&msg);
	return rc;
}

/* ---- stage ---- */

static void node_stage(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	const struct csi_node *cn = ctx;
	Csi__V1__NodeStageVolumeRequest *in;
	char staging[PATH_MAX];
	struct tfs_node_volume vol;
	bool ro_flag;

	in = csi__v1__node_stage_volume_request__unpack(NULL, len, req);
	if (in == NULL) {
		set_error(r, CSI_INVALID_ARGUMENT, "NodeStageVolume: the request does not parse");
		return;
	}
	if (check_id(in->volume_id, r) || check_cap(in->volume_capability, &ro_flag, r))
		goto out;
	if (check_given("staging_target_path", in->staging_target_path, r) ||
	    check_kubelet(cn, "staging_target_path", in->staging_target_path, r))
		goto out;
	int rc = tfs_node_mkdirs(in->staging_target_path, 0750);
	if (rc) {
		set_error(r, CSI_INTERNAL, "staging_target_path %.1024s: %s",
			  in->staging_target_path, strerror(rc));
		goto out;
	}
	if (check_kubelet_path(cn, "staging_target_path", in->staging_target_path, staging,
			       sizeof(staging), r))
		goto out;
	struct vol_args a = {
		.volume_id = in->volume_id,
		.cap = in->volume_capability,
		.n_context = in->n_volume_context,
		.context = in->volume_context,
		.n_secrets = in->n_secrets,
		.secrets = in->secrets,
	};
	if (make_volume(cn, &a, ro_flag, &vol, r))
		goto out;
	tfs_info(cn->log, "NodeStageVolume %s: %s on %s", in->volume_id, vol.source, staging);
	(void)mount_volume(cn, staging, &vol, r);
	tfs_node_volume_clear(&vol);
out:
	if (r->code == CSI_OK) {
		Csi__V1__NodeStageVolumeResponse o = CSI__V1__NODE_STAGE_VOLUME_RESPONSE__INIT;

		pack(r, &o.base);
	}
	/* The secrets are in the unpacked message: wipe them before freeing. */
	for (size_t i = 0; i < in->n_secrets; i++)
		explicit_bzero(in->secrets[i]->value, strlen(in->secrets[i]->value));
	csi__v1__node_stage_volume_request__free_unpacked(in, NULL);
}

static void node_unstage(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	const struct csi_node *cn = ctx;
	Csi__V1__NodeUnstageVolumeRequest *in;
	char staging[PATH_MAX];
	struct tfs_dbuf msg;

	in = csi__v1__node_unstage_volume_request__unpack(NULL, len, req);
	if (in == NULL) {
		set_error(r, CSI_INVALID_ARGUMENT, "NodeUnstageVolume: the request does not parse");
		return;
	}
	if (check_id(in->volume_id, r) ||
	    check_given("staging_target_path", in->staging_target_path, r) ||
	    check_kubelet(cn, "staging_target_path", in->staging_target_path, r))
		goto out;
	if (check_path("staging_target_path", in->staging_target_path, staging, sizeof(staging),
		       r)) {
		if (r->code == CSI_NOT_FOUND) /* gone already: nothing to unstage */
			r->code = CSI_OK, r->msg[0] = '\0';
		goto out;
	}
	/* tfs_node_unmount() refuses a tierfs mount it has no state of. */
	if (check_kubelet(cn, "staging_target_path", staging, r))
		goto out;
	tfs_info(cn->log, "NodeUnstageVolume %s: %s", in->volume_id, staging);
	tfs_dbuf_init(&msg, CSI_GRPC_MAX_DETAILS);
	int rc = tfs_node_unmount(cn->node, cn->log, staging, &msg);
	if (rc)
		set_error(r, rc == EBUSY ? CSI_FAILED_PRECONDITION : CSI_INTERNAL, "%s",
			  tfs_dbuf_len(&msg) ? tfs_dbuf_str(&msg) : strerror(rc));
	tfs_dbuf_free(&msg);
out:
	if (r->code == CSI_OK) {
		Csi__V1__NodeUnstageVolumeResponse o = CSI__V1__NODE_UNSTAGE_VOLUME_RESPONSE__INIT;

		pack(r, &o.base);
	}
	csi__v1__node_unstage_volume_request__free_unpacked(in, NULL);
}

/* ---- the publish records ---- */

/* Open STATE/`sub` (its path into dir[0..PATH_MAX)); NULL when it is not
 * there. */
static DIR *open_state_dir(const struct csi_node *cn, const char *sub, char *dir)
{
	if (snprintf(dir, PATH_MAX, "%s/%s", cn->node->state_dir, sub) >= PATH_MAX)
		return NULL;
	return opendir(dir);
}

/* STATE/published/<tfs_node_hash(target)>: the target, its source and volume,
 * written before the bind and removed after the unbind. */
static int record_path(const struct csi_node *cn, const char *target, char *out, size_t cap)
{
	char h[TFS_NODE_HASH_LEN + 1];
	int rc = tfs_node_hash(target, h, sizeof(h));

	if (rc)
		return rc;
	int n = snprintf(out, cap, "%s/%s/%s", cn->node->state_dir, PUBLISHED_DIR, h);
	return n < 0 || (size_t)n >= cap ? ENAMETOOLONG : 0;
}

static int record_target(const struct csi_node *cn, const char *target, const char *source,
			 const char *volume_id)
{
	char path[PATH_MAX], dir[PATH_MAX];
	int rc = record_path(cn, target, path, sizeof(path));

	if (rc == 0 && snprintf(dir, sizeof(dir), "%s/%s", cn->node->state_dir, PUBLISHED_DIR) >=
			       (int)sizeof(dir))
		rc = ENAMETOOLONG;
	if (rc == 0)
		rc = tfs_node_mkdirs(dir, 0700);
	if (rc)
		return rc;
	struct json_object *o = json_object_new_object();
	if (o == NULL)
		return ENOMEM;
	json_object_object_add(o, "target", json_object_new_string(target));
	json_object_object_add(o, "source", json_object_new_string(source));
	json_object_object_add(o, "volume_id", json_object_new_string(volume_id));
	const char *txt = json_object_to_json_string_ext(o, JSON_C_TO_STRING_NOSLASHESCAPE);
	rc = txt ? tfs_node_write_file(path, txt, strlen(txt), 0600) : ENOMEM;
	json_object_put(o);
	return rc;
}

static void forget_target(const struct csi_node *cn, const char *target)
{
	char path[PATH_MAX];

	if (record_path(cn, target, path, sizeof(path)) == 0 && unlink(path) != 0 &&
	    errno != ENOENT)
		tfs_warn(cn->log, "cannot remove %s: %s", path, strerror(errno));
}

/* The target a record file names, into out ("" when unreadable). */
static void read_record(const char *path, char *out, size_t cap)
{
	struct tfs_dbuf d;
	struct json_object *o = NULL, *t;

	out[0] = '\0';
	tfs_dbuf_init(&d, 3 * PATH_MAX + 2 * MAX_ID);
	if (tfs_node_read_file(path, &d) == 0)
		o = json_tokener_parse(tfs_dbuf_str(&d));
	if (o && json_object_object_get_ex(o, "target", &t) &&
	    json_object_is_type(t, json_type_string))
		snprintf(out, cap, "%s", json_object_get_string(t));
	json_object_put(o);
	tfs_dbuf_free(&d);
}

/* Whether NodePublishVolume recorded `target` (canonical). */
static bool recorded_target(const struct csi_node *cn, const char *target)
{
	char path[PATH_MAX], t[PATH_MAX];

	if (record_path(cn, target, path, sizeof(path)) != 0)
		return false;
	read_record(path, t, sizeof(t));
	return strcmp(t, target) == 0;
}

/* At start-up: drop the records of targets that hold no tierfs mount any
 * more (unpublished while the plugin was down, or a node reboot). */
static void forget_gone_targets(const struct csi_node *cn)
{
	char dir[PATH_MAX], path[PATH_MAX], t[PATH_MAX];
	struct dirent *e;
	DIR *d = open_state_dir(cn, PUBLISHED_DIR, dir);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		struct tfs_node_mount_entry me;

		if (e->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		read_record(path, t, sizeof(t));
		if (t[0] && tfs_node_mount_lookup(t, &me) == 0 && me.mounted &&
		    strcmp(me.fstype, FSTYPE) == 0)
			continue;
		tfs_info(cn->log, "forgetting the publish record of %s: not mounted", t[0] ? t : path);
		(void)unlink(path);
	}
	closedir(d);
}

/* ---- publish ---- */

/* The shared mount of ephemeral volumes with fingerprint `fp`. */
static int ephemeral_path(const struct csi_node *cn, const char *fp, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s/%s", cn->node->state_dir, CSI_EPHEMERAL_DIR, fp);

	return n < 0 || (size_t)n >= cap ? ENAMETOOLONG : 0;
}

/* Mount (or find) the daemon shared by the ephemeral volumes like this one;
 * its mount point into `src`. */
static int ephemeral_source(const struct csi_node *cn, const struct vol_args *a, bool ro_flag,
			    char *src, size_t cap, struct csi_reply *r)
{
	struct tfs_node_volume vol;
	char fp[TFS_NODE_HASH_LEN + 1];
	int rc;

	if (make_volume(cn, a, ro_flag, &vol, r))
		return EINVAL;
	struct tfs_dbuf msg;
	tfs_dbuf_init(&msg, CSI_GRPC_MAX_DETAILS);
	rc = tfs_node_fingerprint(cn->node, &vol, fp, sizeof(fp), &msg);
	if (rc)
		set_error(r, CSI_INTERNAL, "the ephemeral volume's fingerprint: %s",
			  tfs_dbuf_len(&msg) ? tfs_dbuf_str(&msg) : strerror(rc));
	tfs_dbuf_free(&msg);
	if (rc == 0)
		rc = ephemeral_path(cn, fp, src, cap);
	if (rc == 0)
		rc = tfs_node_mkdirs(src, 0700);
	if (rc) {
		if (r->code == CSI_OK)
			set_error(r, CSI_INTERNAL, "the ephemeral volume's mount point: %s",
				  strerror(rc));
	} else {
		tfs_info(cn->log, "ephemeral volume %s: %s, shared mount %s", a->volume_id,
			 vol.source, src);
		rc = mount_volume(cn, src, &vol, r);
	}
	tfs_node_volume_clear(&vol);
	return rc;
}

/* Bind-mount `src` on `target`: nosuid, nodev, and read-only when `ro`. */
static int bind_target(const struct csi_node *cn, const char *src, const char *target, bool ro,
		struct csi_reply *r)
{
	unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (ro ? MS_RDONLY : 0);

	if (mount(src, target, NULL, MS_BIND, NULL) != 0) {
		set_error(r, CSI_INTERNAL, "bind mount of %s on %s: %s", src, target,
			  strerror(errno));
		return errno;
	}
	if (mount(NULL, target, NULL, flags, NULL) != 0) {
		int e = errno;

		(void)umount2(target, MNT_DETACH);
		set_error(r, CSI_INTERNAL, "remounting %s%s: %s", target, ro ? " read-only" : "",
			  strerror(e));
		return e;
	}
	tfs_info(cn->log, "bound %s on %s%s", src, target, ro ? " read-only" : "");
	return 0;
}

static void node_publish(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	const struct csi_node *cn = ctx;
	Csi__V1__NodePublishVolumeRequest *in;
	char target[PATH_MAX], src[PATH_MAX];
	struct tfs_node_mount_entry sme, tme;
	bool ro_flag;
	int rc;

	in = csi__v1__node_publish_volume_request__unpack(NULL, len, req);
	if (in == NULL) {
		set_error(r, CSI_INVALID_ARGUMENT, "NodePublishVolume: the request does not parse");
		return;
	}
	if (check_id(in->volume_id, r) || check_cap(in->volume_capability, &ro_flag, r))
		goto out;
	if (check_given("target_path", in->target_path, r) ||
	    check_kubelet(cn, "target_path", in->target_path, r))
		goto out;
	struct vol_args a = {
		.volume_id = in->volume_id,
		.cap = in->volume_capability,
		.n_context = in->n_volume_context,
		.context = (Csi__V1__NodeStageVolumeRequest__VolumeContextEntry **)
				   in->volume_context,
		.n_secrets = in->n_secrets,
		.secrets = (Csi__V1__NodeStageVolumeRequest__SecretsEntry **)in->secrets,
	};
	bool ro = in->readonly || ro_flag;
	if (is_ephemeral(&a)) {
		if (ephemeral_source(cn, &a, false, src, sizeof(src), r))
			goto out;
	} else {
		if (in->staging_target_path == NULL || in->staging_target_path[0] == '\0') {
			set_error(r, CSI_FAILED_PRECONDITION,
				  "staging_target_path is missing: NodeStageVolume comes first "
				  "(tierfs-csi has STAGE_UNSTAGE_VOLUME)");
			goto out;
		}
		if (check_kubelet_path(cn, "staging_target_path", in->staging_target_path, src,
				       sizeof(src), r)) {
			if (r->code == CSI_NOT_FOUND)
				r->code = CSI_FAILED_PRECONDITION;
			goto out;
		}
	}
	rc = tfs_node_mount_lookup(src, &sme);
	if (rc == 0 && !(sme.mounted && strcmp(sme.fstype, FSTYPE) == 0)) {
		set_error(r, CSI_FAILED_PRECONDITION,
			  "volume %s is not staged: nothing of tierfs is mounted on %s", in->volume_id,
			  src);
		goto out;
	}
	/* A read-only daemon's binds say so too. */
	ro = ro || sme.read_only;
	rc = rc ? rc : tfs_node_mkdirs(in->target_path, 0750);
	if (rc) {
		set_error(r, CSI_INTERNAL, "target_path %.1024s: %s", in->target_path, strerror(rc));
		goto out;
	}
	if (check_kubelet_path(cn, "target_path", in->target_path, target, sizeof(target), r))
		goto out;
	rc = tfs_node_mount_lookup(target, &tme);
	if (rc) {
		set_error(r, CSI_INTERNAL, "cannot read the mount table: %s", strerror(rc));
		goto out;
	}
	if (tme.mounted) {
		if (strcmp(tme.devno, sme.devno) != 0)
			set_error(r, CSI_ALREADY_EXISTS, "%s already holds another mount (%s from %s)",
				  target, tme.fstype, tme.source);
		else if (tme.read_only != ro)
			set_error(r, CSI_ALREADY_EXISTS,
				  "volume %s is already published on %s %s", in->volume_id,
				  target, tme.read_only ? "read-only" : "read-write");
		else if ((rc = record_target(cn, target, src, in->volume_id)) != 0)
			/* Published by an older plugin, or before a crash:
			 * recorded now. */
			set_error(r, CSI_INTERNAL, "cannot record the target %s in %s: %s", target,
				  cn->node->state_dir, strerror(rc));
		else
			tfs_info(cn->log, "NodePublishVolume %s on %s: already published",
				 in->volume_id, target);
		goto out;
	}
	tfs_info(cn->log, "NodePublishVolume %s: %s on %s%s", in->volume_id, src, target,
		 ro ? " read-only" : "");
	/* Recorded first: a plugin that dies after the bind still knows it. */
	rc = record_target(cn, target, src, in->volume_id);
	if (rc) {
		set_error(r, CSI_INTERNAL, "cannot record the target %s in %s: %s", target,
			  cn->node->state_dir, strerror(rc));
		goto out;
	}
	if (bind_target(cn, src, target, ro, r) != 0)
		forget_target(cn, target);
out:
	if (r->code == CSI_OK) {
		Csi__V1__NodePublishVolumeResponse o = CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT;

		pack(r, &o.base);
	}
	for (size_t i = 0; i < in->n_secrets; i++)
		explicit_bzero(in->secrets[i]->value, strlen(in->secrets[i]->value));
	csi__v1__node_publish_volume_request__free_unpacked(in, NULL);
}

/* ---- unpublish ---- */

/* Stop the shared ephemeral daemons that no bind mount uses any more.
 * `only_devno` (may be NULL) limits it to the one the caller unbound. */
static void ephemeral_gc(const struct csi_node *cn, const char *only_devno)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *e;
	DIR *d = open_state_dir(cn, CSI_EPHEMERAL_DIR, dir);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		struct tfs_node_mount_entry me;
		unsigned users = 0;

		if (e->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		if (tfs_node_mount_lookup(path, &me) != 0)
			continue;
		if (me.mounted) {
			if (only_devno && strcmp(me.devno, only_devno) != 0)
				continue;
			if (tfs_node_mount_users(me.devno, path, &users) != 0 || users > 0)
				continue;
			struct tfs_dbuf msg;

			tfs_info(cn->log, "ephemeral mount %s: no pod uses it; stopping it", path);
			tfs_dbuf_init(&msg, CSI_GRPC_MAX_DETAILS);
			int rc = tfs_node_unmount(cn->node, cn->log, path, &msg);
			if (rc)
				tfs_warn(cn->log, "ephemeral mount %s: %s", path, tfs_dbuf_str(&msg));
			tfs_dbuf_free(&msg);
			if (rc)
				continue;
		}
		if (rmdir(path) != 0 && errno != ENOENT)
			tfs_warn(cn->log, "cannot remove %s: %s", path, strerror(errno));
	}
	closedir(d);
}

/* Whether the tierfs mount `me` on `target` is a bind this plugin made: a
 * recorded target, or (published before targets were recorded) a bind of
 * a mount that the state records. */
static bool ours(const struct csi_node *cn, const char *target, const struct tfs_node_mount_entry *me)
{
	bool found = false;

	if (recorded_target(cn, target))
		return true;
	if (tfs_node_recorded_devno(cn->node, me->devno, &found) != 0 || !found)
		return false;
	tfs_info(cn->log, "%s: an unrecorded bind of a mount of ours (published by an older "
			  "plugin)",
		 target);
	return true;
}

static void node_unpublish(void *ctx, const uint8_t *req, size_t len, struct csi_reply *r)
{
	const struct csi_node *cn = ctx;
	Csi__V1__NodeUnpublishVolumeRequest *in;
	char target[PATH_MAX], devno[sizeof(((struct tfs_node_mount_entry *)0)->devno)] = "";
	struct tfs_node_mount_entry me;

	in = csi__v1__node_unpublish_volume_request__unpack(NULL, len, req);
	if (in == NULL) {
		set_error(r, CSI_INVALID_ARGUMENT, "NodeUnpublishVolume: the request does not parse");
		return;
	}
	/* A path the kubelet never gives is refused before anything is
	 * looked at (INVALID_ARGUMENT: the request is wrong, not the node). */
	if (check_id(in->volume_id, r) || check_given("target_path", in->target_path, r) ||
	    check_kubelet(cn, "target_path", in->target_path, r))
		goto out;
	if (check_path("target_path", in->target_path, target, sizeof(target), r)) {
		if (r->code == CSI_NOT_FOUND)
			r->code = CSI_OK, r->msg[0] = '\0';
		goto out;
	}
	if (check_kubelet(cn, "target_path", target, r))
		goto out;
	/* A bind of ours, once or stacked by a retried publish. */
	for (int tries = 0; tries < 8; tries++) {
		int rc = tfs_node_mount_lookup(target, &me);

		if (rc) {
			set_error(r, CSI_INTERNAL, "cannot read the mount table: %s", strerror(rc));
			goto out;
		}
		if (!me.mounted)
			break;
		if (strcmp(me.fstype, FSTYPE) != 0) {
			set_error(r, CSI_INTERNAL, "%s holds a %s mount, not tierfs: not unmounting it",
				  target, me.fstype);
			goto out;
		}
		/* FAILED_PRECONDITION: the node holds something at the
		 * target that the plugin did not put there; a retry cannot
		 * change that, an admin can. */
		if (tries == 0 && !ours(cn, target, &me)) {
			set_error(r, CSI_FAILED_PRECONDITION,
				  "%s holds a tierfs mount (from %s) that tierfs-csi did not publish: "
				  "not unmounting it",
				  target, me.source);
			goto out;
		}
		snprintf(devno, sizeof(devno), "%s", me.devno);
		if (umount2(target, 0) != 0 && umount2(target, MNT_DETACH) != 0 &&
		    errno != EINVAL) {
			set_error(r, CSI_INTERNAL, "cannot unmount %s: %s", target, strerror(errno));
			goto out;
		}
		tfs_info(cn->log, "NodeUnpublishVolume %s: unmounted %s", in->volume_id, target);
	}
	/* An empty directory below kubelet_dir: the target the plugin
	 * created (rmdir removes nothing else). */
	if (rmdir(target) != 0 && errno != ENOENT)
		tfs_warn(cn->log, "NodeUnpublishVolume %s: cannot remove %s: %s", in->volume_id,
			 target, strerror(errno));
	forget_target(cn, target);
	if (devno[0])
		ephemeral_gc(cn, devno);
out:
	if (r->code == CSI_OK) {
		Csi__V1__NodeUnpublishVolumeResponse o =
			CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT;

		pack(r, &o.base);
	}
	csi__v1__node_unpublish_volume_request__free_unpacked(in, NULL);
}

/* ---- the table ---- */

static const struct csi_method methods[] = {
	{ "/csi.v1.Identity/GetPluginInfo", get_plugin_info, true },
	{ "/csi.v1.Identity/GetPluginCapabilities", get_plugin_capabilities, true },
	{ "/csi.v1.Identity/Probe", probe, true },
	{ "/csi.v1.Node/NodeGetCapabilities", node_get_capabilities, true },
	{ "/csi.v1.Node/NodeGetInfo", node_get_info, true },
	{ "/csi.v1.Node/NodeStageVolume", node_stage, false },
	{ "/csi.v1.Node/NodeUnstageVolume", node_unstage, false },
	{ "/csi.v1.Node/NodePublishVolume", node_publish, false },
	{ "/csi.v1.Node/NodeUnpublishVolume", node_unpublish, false },
};

const struct csi_method *csi_node_methods(size_t *n)
{
	*n = sizeof(methods) / sizeof(methods[0]);
	return methods;
}

void csi_node_reconcile(const struct csi_node *cn)
{
	tfs_node_sweep(cn->node, cn->log);
	forget_gone_targets(cn);
	ephemeral_gc(cn, NULL);
	tfs_node_report(cn->node, cn->log);
}
