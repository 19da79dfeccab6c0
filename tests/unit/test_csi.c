/* test_csi.c - unit tests for the CSI plugin's calls (csi_node.c) without
 * gRPC and without mounting: each handler gets a packed request and its
 * reply's code and message are checked.  Calls that mount are
 * tests/integration/test_csi.py. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csi.pb-c.h"
#include "csi_node.h"
#include "node_conf.h"
#include "node_sys.h"

static char tmpdir[200];
static char conf[256];
static struct tfs_node_conf node;
static struct tfs_log tlog;
static struct csi_node cn;
static struct csi_reply reply;

#define SECRET_VALUE "s3cr3t-VALUE-never-shown"

static void setup(void)
{
	const char *base = getenv("TMPDIR");
	struct tfs_dbuf err;

	if (base == NULL || strlen(base) > 150)
		base = "/tmp";
	snprintf(tmpdir, sizeof(tmpdir), "%s/tierfs-test-csi.XXXXXX", base);
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
	snprintf(conf, sizeof(conf), "%s/csi.conf", tmpdir);
	FILE *f = fopen(conf, "w");
	cr_assert_not_null(f);
	fprintf(f,
		"[node]\nstate_dir = %s/state\ncache_root = %s/cache\nsystemd = no\n"
		"kubelet_dir = %s\n"
		"[limits]\nmaxRamSize = 1G\n"
		"[pod]\nallow = source, ramSize, readOnly\n",
		tmpdir, tmpdir, tmpdir);
	cr_assert_eq(fclose(f), 0);
	tfs_dbuf_init(&err, 4096);
	cr_assert_eq(tfs_node_conf_load(&node, TFS_NODE_DRIVER_CSI, conf, true, &err), 0, "%s",
		     tfs_dbuf_str(&err));
	tfs_dbuf_free(&err);
	tfs_log_init_stderr(&tlog, TFS_LOG_ERROR);
	cn = (struct csi_node){ .node = &node, .log = &tlog, .node_id = "node-7" };
	memset(&reply, 0, sizeof(reply));
}

static void teardown(void)
{
	free(reply.data);
	tfs_node_conf_clear(&node);
	tfs_node_rmtree(tmpdir);
}

TestSuite(csi, .init = setup, .fini = teardown);

/* Run method `path` on the packed message `m` (NULL: `raw`). */
static void call_raw(const char *path, const uint8_t *raw, size_t len)
{
	size_t n;
	const struct csi_method *m = csi_node_methods(&n);

	free(reply.data);
	memset(&reply, 0, sizeof(reply));
	for (size_t i = 0; i < n; i++) {
		if (strcmp(m[i].path, path) == 0) {
			m[i].fn(&cn, raw, len, &reply);
			return;
		}
	}
	cr_assert_fail("no method %s", path);
}

static void call(const char *path, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(n + 1);

	cr_assert_not_null(buf);
	protobuf_c_message_pack(msg, buf);
	call_raw(path, buf, n);
	free(buf);
}

static void expect(enum csi_code code, const char *in_msg)
{
	cr_assert_eq(reply.code, code, "code %d, not %d: %s", reply.code, code, reply.msg);
	if (in_msg)
		cr_assert(strstr(reply.msg, in_msg), "'%s' not in: %s", in_msg, reply.msg);
	cr_assert_null(strstr(reply.msg, SECRET_VALUE), "a secret in: %s", reply.msg);
}

/* ---- a stage request to vary ---- */

static Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
static Csi__V1__VolumeCapability__MountVolume mnt = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
static Csi__V1__VolumeCapability__BlockVolume blk = CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;
static Csi__V1__NodeStageVolumeRequest__VolumeContextEntry ctx_e[4];
static Csi__V1__NodeStageVolumeRequest__VolumeContextEntry *ctx_p[4];
static Csi__V1__NodeStageVolumeRequest__SecretsEntry sec_e[4];
static Csi__V1__NodeStageVolumeRequest__SecretsEntry *sec_p[4];
static char staging[300];

static void stage_req(Csi__V1__NodeStageVolumeRequest *r)
{
	Csi__V1__NodeStageVolumeRequest init = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;

	*r = init;
	mnt = (Csi__V1__VolumeCapability__MountVolume)CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	cap = (Csi__V1__VolumeCapability)CSI__V1__VOLUME_CAPABILITY__INIT;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mnt;
	snprintf(staging, sizeof(staging), "%s/globalmount", tmpdir);
	r->volume_id = "pv-1";
	r->staging_target_path = staging;
	r->volume_capability = &cap;
	for (int i = 0; i < 4; i++) {
		ctx_e[i] = (Csi__V1__NodeStageVolumeRequest__VolumeContextEntry)
			CSI__V1__NODE_STAGE_VOLUME_REQUEST__VOLUME_CONTEXT_ENTRY__INIT;
		ctx_p[i] = &ctx_e[i];
		sec_e[i] = (Csi__V1__NodeStageVolumeRequest__SecretsEntry)
			CSI__V1__NODE_STAGE_VOLUME_REQUEST__SECRETS_ENTRY__INIT;
		sec_p[i] = &sec_e[i];
	}
	ctx_e[0].key = "source";
	ctx_e[0].value = "s3://bucket/prefix";
	r->n_volume_context = 1;
	r->volume_context = ctx_p;
	sec_e[0].key = "accessKey";
	sec_e[0].value = "AKIDEXAMPLE";
	sec_e[1].key = "secretKey";
	sec_e[1].value = SECRET_VALUE;
	r->n_secrets = 2;
	r->secrets = sec_p;
}

#define STAGE "/csi.v1.Node/NodeStageVolume"
#define PUBLISH "/csi.v1.Node/NodePublishVolume"

Test(csi, identity)
{
	Csi__V1__GetPluginInfoRequest in = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;

	call("/csi.v1.Identity/GetPluginInfo", &in.base);
	expect(CSI_OK, NULL);
	Csi__V1__GetPluginInfoResponse *out =
		csi__v1__get_plugin_info_response__unpack(NULL, reply.len, reply.data);
	cr_assert_not_null(out);
	cr_assert_str_eq(out->name, "csi.tierfs.io");
	cr_assert_str_eq(out->vendor_version, PACKAGE_VERSION);
	csi__v1__get_plugin_info_response__free_unpacked(out, NULL);

	Csi__V1__NodeGetCapabilitiesRequest cin = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	call("/csi.v1.Node/NodeGetCapabilities", &cin.base);
	Csi__V1__NodeGetCapabilitiesResponse *caps =
		csi__v1__node_get_capabilities_response__unpack(NULL, reply.len, reply.data);
	cr_assert_not_null(caps);
	cr_assert_eq(caps->n_capabilities, 2);
	cr_assert_eq(caps->capabilities[0]->rpc->type,
		     CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME);
	cr_assert_eq(caps->capabilities[1]->rpc->type,
		     CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_MOUNT_GROUP);
	csi__v1__node_get_capabilities_response__free_unpacked(caps, NULL);

	Csi__V1__NodeGetInfoRequest iin = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	call("/csi.v1.Node/NodeGetInfo", &iin.base);
	Csi__V1__NodeGetInfoResponse *info =
		csi__v1__node_get_info_response__unpack(NULL, reply.len, reply.data);
	cr_assert_not_null(info);
	cr_assert_str_eq(info->node_id, "node-7");
	csi__v1__node_get_info_response__free_unpacked(info, NULL);
}

Test(csi, stage_bad_bytes)
{
	static const uint8_t junk[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f };

	call_raw(STAGE, junk, sizeof(junk));
	expect(CSI_INVALID_ARGUMENT, "does not parse");
}

Test(csi, stage_missing_fields)
{
	Csi__V1__NodeStageVolumeRequest r;

	stage_req(&r);
	r.volume_id = "";
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "volume_id is missing");

	stage_req(&r);
	r.staging_target_path = "";
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "staging_target_path is missing");

	stage_req(&r);
	r.volume_capability = NULL;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "volume_capability is missing");

	/* A relative path is refused before anything is made of it. */
	stage_req(&r);
	r.staging_target_path = "relative/globalmount";
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "staging_target_path must be an absolute path");
	cr_assert_neq(access("relative", F_OK), 0, "a relative staging path was created");
}

Test(csi, stage_capability)
{
	Csi__V1__NodeStageVolumeRequest r;
	char *flags[] = { "ro", "noexec" };

	stage_req(&r);
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	cap.block = &blk;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "not block devices");

	stage_req(&r);
	mnt.fs_type = "ext4";
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "fs_type 'ext4'");

	stage_req(&r);
	mnt.n_mount_flags = 2;
	mnt.mount_flags = flags;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "mount flag 'noexec'");

	stage_req(&r);
	mnt.volume_mount_group = "staff";
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "volume_mount_group: 'staff' is not a group id");
}

Test(csi, stage_policy)
{
	Csi__V1__NodeStageVolumeRequest r;

	stage_req(&r);
	ctx_e[1].key = "colour";
	ctx_e[1].value = "blue";
	r.n_volume_context = 2;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "unknown option 'colour'");

	stage_req(&r);
	ctx_e[1].key = "endpoint";
	ctx_e[1].value = "http://169.254.169.254";
	r.n_volume_context = 2;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "option endpoint: not allowed on this node");

	stage_req(&r);
	ctx_e[1].key = "ramSize";
	ctx_e[1].value = "8G";
	r.n_volume_context = 2;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "above this node's limit maxRamSize");

	/* The kubelet's pod info is accepted, and only logged. */
	stage_req(&r);
	ctx_e[1].key = "csi.storage.k8s.io/pod.name";
	ctx_e[1].value = "trainer-0";
	ctx_e[2].key = "ramSize";
	ctx_e[2].value = "8G";
	r.n_volume_context = 3;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "option ramSize");
}

Test(csi, stage_secrets)
{
	Csi__V1__NodeStageVolumeRequest r;

	stage_req(&r);
	sec_e[2].key = "password";
	sec_e[2].value = SECRET_VALUE;
	r.n_secrets = 3;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "unknown key 'password' in the volume's Secret");

	stage_req(&r);
	r.n_secrets = 1;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "has accessKey but not secretKey");

	stage_req(&r);
	sec_e[1].value = "two " SECRET_VALUE;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "secret secretKey: has a byte that is not printable");

	/* No Secret and no node credentials_file. */
	stage_req(&r);
	r.n_secrets = 0;
	call(STAGE, &r.base);
	expect(CSI_INVALID_ARGUMENT, "no credentials");
}

Test(csi, publish_needs_stage)
{
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeStageVolumeRequest s;
	char target[300];

	stage_req(&s); /* for the capability */
	snprintf(target, sizeof(target), "%s/pod/mount", tmpdir);
	r.volume_id = "pv-1";
	r.target_path = target;
	r.volume_capability = &cap;
	call(PUBLISH, &r.base);
	expect(CSI_FAILED_PRECONDITION, "staging_target_path is missing");

	cr_assert_eq(tfs_node_mkdirs(staging, 0700), 0);
	r.staging_target_path = staging;
	call(PUBLISH, &r.base);
	expect(CSI_FAILED_PRECONDITION, "is not staged");
	cr_assert_neq(access(target, F_OK), 0, "publish made the target of a failed call");

	r.target_path = "";
	call(PUBLISH, &r.base);
	expect(CSI_INVALID_ARGUMENT, "target_path is missing");
}

Test(csi, unpublish_unstage_nothing_is_ok)
{
	Csi__V1__NodeUnpublishVolumeRequest u = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeRequest s = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	char gone[300];

	snprintf(gone, sizeof(gone), "%s/never/there", tmpdir);
	u.volume_id = "pv-1";
	u.target_path = gone;
	call("/csi.v1.Node/NodeUnpublishVolume", &u.base);
	expect(CSI_OK, NULL);
	s.volume_id = "pv-1";
	s.staging_target_path = gone;
	call("/csi.v1.Node/NodeUnstageVolume", &s.base);
	expect(CSI_OK, NULL);

	/* An existing directory with nothing mounted: OK, and removed. */
	cr_assert_eq(tfs_node_mkdirs(gone, 0700), 0);
	call("/csi.v1.Node/NodeUnpublishVolume", &u.base);
	expect(CSI_OK, NULL);
	cr_assert_neq(access(gone, F_OK), 0);

	u.volume_id = "";
	call("/csi.v1.Node/NodeUnpublishVolume", &u.base);
	expect(CSI_INVALID_ARGUMENT, "volume_id is missing");
}

/* Paths outside kubelet_dir (as given, through "..", or through a link)
 * are refused by every volume call, and nothing is created or removed. */
Test(csi, paths_outside_kubelet_dir)
{
	Csi__V1__NodeUnpublishVolumeRequest u = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeRequest s = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeStageVolumeRequest st = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	char outside[300], dotdot[700], link[300], via_link[300], made[400];

	snprintf(outside, sizeof(outside), "%s.outside", tmpdir);
	cr_assert_eq(tfs_node_mkdirs(outside, 0700), 0);
	snprintf(dotdot, sizeof(dotdot), "%s/../%s.outside", tmpdir, strrchr(tmpdir, '/') + 1);
	snprintf(link, sizeof(link), "%s/link", tmpdir);
	cr_assert_eq(symlink(outside, link), 0);
	snprintf(via_link, sizeof(via_link), "%s/link", tmpdir);
	const char *paths[] = { outside, dotdot, via_link };
	for (int i = 0; i < 3; i++) {
		u.volume_id = s.volume_id = "pv-1";
		u.target_path = (char *)paths[i];
		call("/csi.v1.Node/NodeUnpublishVolume", &u.base);
		expect(CSI_INVALID_ARGUMENT, "is not below the kubelet's directory");
		s.staging_target_path = (char *)paths[i];
		call("/csi.v1.Node/NodeUnstageVolume", &s.base);
		expect(CSI_INVALID_ARGUMENT, "is not below the kubelet's directory");
		cr_assert_eq(access(outside, F_OK), 0, "%s: the directory was removed", paths[i]);
	}
	stage_req(&st);
	snprintf(made, sizeof(made), "%s/made/here", outside);
	st.staging_target_path = made;
	call("/csi.v1.Node/NodeStageVolume", &st.base);
	expect(CSI_INVALID_ARGUMENT, "is not below the kubelet's directory");
	cr_assert_neq(access(made, F_OK), 0, "a staging directory was created outside");
	tfs_node_rmtree(outside);
}
