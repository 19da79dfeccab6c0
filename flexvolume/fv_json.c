/* fv_json.c - the FlexVolume driver's options JSON, made into a volume
 * request and mounted (fv_json.h). */
#include "config.h"

#include "fv_json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "node_mount.h"
#include "node_opts.h"
#include "node_secrets.h"

#define K8S "kubernetes.io/"
#define K8S_SECRET "kubernetes.io/secret/"

/* The request a JSON object makes; its strings are borrowed from the JSON
 * but the decoded secrets, which are wiped and freed by json_req_clear(). */
struct json_req {
	struct tfs_node_request rq;
	struct tfs_node_kv opt[TFS_NODE_MAX_KV];
	struct tfs_node_kv secret[TFS_NODE_MAX_KV];
	char *decoded[TFS_NODE_MAX_KV];
	char *pod;
};

static void json_req_clear(struct json_req *j)
{
	for (size_t i = 0; i < j->rq.n_secret; i++) {
		if (j->decoded[i]) {
			explicit_bzero(j->decoded[i], strlen(j->decoded[i]));
			free(j->decoded[i]);
		}
	}
	free(j->pod);
	memset(j, 0, sizeof(*j));
}

static int json_kubelet_key(struct json_req *j, const char *key, const char *s, const char **ns,
			    const char **name, struct tfs_dbuf *err)
{
	char q[TFS_NODE_QUOTE_BUFLEN];

	if (strcmp(key, K8S "readwrite") == 0) {
		if (s == NULL || (strcmp(s, "ro") != 0 && strcmp(s, "rw") != 0))
			return tfs_node_refuse(
				err, "kubernetes.io/readwrite: %s is neither ro nor rw",
				s ? tfs_node_quote(q, sizeof(q), s) : "a non-string");
		j->rq.read_only = strcmp(s, "ro") == 0;
	} else if (strcmp(key, K8S "mounterArgs.FsGroup") == 0) {
		unsigned g;

		if (s == NULL || tfs_node_parse_gid(s, &g))
			return tfs_node_refuse(err,
					       "kubernetes.io/mounterArgs.FsGroup: %s is not a "
					       "group id "
					       "(0 to 2147483647)",
					       s ? tfs_node_quote(q, sizeof(q), s)
						 : "a non-string");
		j->rq.fsgroup = s;
	} else if (strcmp(key, K8S "pod.namespace") == 0) {
		*ns = s;
	} else if (strcmp(key, K8S "pod.name") == 0) {
		*name = s;
	} else if (strcmp(key, K8S "pvOrVolumeName") == 0) {
		j->rq.pv = s;
	}
	/* fsType, pod.uid, serviceAccount.name and keys of later kubelets:
	 * nothing to do. */
	return 0;
}

static int json_entry(struct json_req *j, const char *key, struct json_object *val, const char **ns,
		      const char **name, struct tfs_dbuf *err)
{
	const char *s = json_object_is_type(val, json_type_string) ? json_object_get_string(val)
								   : NULL;
	enum tfs_node_opt o;

	if (strncmp(key, K8S_SECRET, strlen(K8S_SECRET)) == 0) {
		const char *sname = key + strlen(K8S_SECRET);

		if (j->rq.n_secret == TFS_NODE_MAX_KV)
			return tfs_node_refuse(err, "the volume's Secret has more than %d keys",
					       TFS_NODE_MAX_KV);
		size_t i = j->rq.n_secret;
		/* An unknown key is refused by name, quoted, in take_secret(). */
		bool known = strcmp(sname, "accessKey") == 0 || strcmp(sname, "secretKey") == 0 ||
			     strcmp(sname, "sessionToken") == 0;
		if (known && s == NULL)
			return tfs_node_refuse(err, "secret %s: expected a base64 string", sname);
		if (known) {
			int rc = tfs_node_secret_decode(sname, s, &j->decoded[i], err);

			if (rc)
				return rc;
		}
		j->secret[i] = (struct tfs_node_kv){ sname, j->decoded[i] ? j->decoded[i]
							    : s           ? s
									  : "" };
		j->rq.n_secret++;
		return 0;
	}
	if (strncmp(key, K8S, strlen(K8S)) == 0)
		return json_kubelet_key(j, key, s, ns, name, err);
	if (s == NULL && tfs_node_opt_find(key, false, &o) == 0)
		return tfs_node_refuse(err, "option %s: expected a string value",
				       tfs_node_opt_name(o));
	if (j->rq.n_opt == TFS_NODE_MAX_KV)
		return tfs_node_refuse(err, "more than %d options", TFS_NODE_MAX_KV);
	j->opt[j->rq.n_opt++] = (struct tfs_node_kv){ key, s ? s : "" };
	return 0;
}

int fv_volume_parse(const char *json, const struct tfs_node_conf *node, struct tfs_node_volume *out,
		    struct tfs_dbuf *err)
{
	enum json_tokener_error jerr = json_tokener_success;
	struct json_object *root;
	struct json_req *j;
	const char *ns = NULL, *name = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (err)
		tfs_dbuf_reset(err);
	root = json_tokener_parse_verbose(json, &jerr);
	if (root == NULL)
		return tfs_node_refuse(err, "the options are not valid JSON: %s",
				       json_tokener_error_desc(jerr));
	if (!json_object_is_type(root, json_type_object)) {
		json_object_put(root);
		return tfs_node_refuse(err, "the options are not a JSON object");
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		json_object_put(root);
		return ENOMEM;
	}
	j->rq.opt = j->opt;
	j->rq.secret = j->secret;
	j->rq.read_only_origin = "kubernetes.io/readwrite=ro";
	j->rq.fsgroup_origin = "kubernetes.io/mounterArgs.FsGroup";
	json_object_object_foreach(root, key, val)
	{
		rc = json_entry(j, key, val, &ns, &name, err);
		if (rc)
			goto out;
	}
	if (ns || name) {
		struct tfs_dbuf s;

		tfs_dbuf_init(&s, 1024);
		rc = tfs_dbuf_addf(&s, "%s/%s", ns ? ns : "?", name ? name : "?");
		if (rc == 0) {
			j->pod = tfs_dbuf_steal(&s);
			rc = j->pod ? 0 : ENOMEM;
		}
		tfs_dbuf_free(&s);
		if (rc)
			goto out;
		j->rq.pod = j->pod;
	}
	rc = tfs_node_volume_make(&j->rq, node, out, err);
out:
	json_req_clear(j);
	free(j);
	json_object_put(root);
	return rc;
}

int fv_mount(const struct tfs_node_conf *node, const struct tfs_log *log, const char *target,
	     const char *json, struct tfs_dbuf *msg)
{
	struct tfs_node_volume vol;
	struct tfs_dbuf err;
	char buf[4096];
	int rc;

	tfs_dbuf_init(&err, 8192);
	rc = fv_volume_parse(json, node, &vol, &err);
	if (rc) {
		/* one line for the kubelet, as node_mount.c's own messages */
		snprintf(buf, sizeof(buf), "%s",
			 tfs_dbuf_len(&err) ? tfs_dbuf_str(&err) : strerror(rc));
		tfs_dbuf_free(&err);
		tfs_dbuf_reset(msg);
		tfs_dbuf_adds(msg, buf);
		tfs_warn(log, "mount %s refused: %s", target, tfs_dbuf_str(msg));
		return rc;
	}
	tfs_dbuf_free(&err);
	rc = tfs_node_mount_volume(node, log, target, &vol, msg);
	tfs_node_volume_clear(&vol);
	return rc;
}
