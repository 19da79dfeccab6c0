/* fuzz_flexvolume.c - libFuzzer harness for the FlexVolume driver's
 * options: the kubelet's JSON (fv_volume_parse, flexvolume/fv_json.h),
 * the per-option checks (tfs_node_opt_check, node/node_opts.h), the Secret
 * decoding they call (tfs_node_secret_decode) and the tierfs.conf a volume
 * becomes (tfs_node_volume_tierfs_conf).
 *
 * Written against the driver's API while it was being written (as
 * committed in 684d97d); if fv_json.h, node_opts.h or node_volume.h change, adapt here.
 *
 * Input: the options JSON exactly as the kubelet passes it (a flat object
 * of strings; anchors §5).  Each input is parsed under three node
 * configurations, loaded once at start-up from memfds: the built-in one
 * (no file), a permissive one (every option allowed, [defaults], a base
 * tierfs_conf, a node credentials_file) and a strict one ([limits], a
 * default source, no node credentials).
 *
 * Invariants checked besides "no crash, no leak, no UB":
 *  - fv_volume_parse returns 0, EINVAL or ENOMEM; on failure *out is all
 *    zero and the message is one line without control characters;
 *  - a message never contains a Secret's value (base64 or decoded): when
 *    it does, the parse is repeated with that secret replaced by another
 *    valid one of the same length, and the text must still be there
 *    (else it came from the secret);
 *  - on success: the source is a valid s3:// SOURCE; accessKey and
 *    secretKey come together, a sessionToken only with them, each
 *    printable ASCII without blanks; without a Secret the node has a
 *    credentials_file; every value is trimmed, passes tfs_node_opt_check and the
 *    node's limits when it came from the pod, and is the node's default
 *    when it did not; a read-only volume has no pod write-back mode but
 *    "off"; tfs_node_volume_clear zeroes the struct (twice is safe);
 *  - the tierfs.conf from tfs_node_volume_tierfs_conf loads with
 *    tfs_config_load, validates, and holds the volume's ssd.dir,
 *    credentials_file, log.file, read-only write-back mode and sizes, and
 *    *writable says whether that configuration takes writes;
 *  - tfs_node_opt_check agrees with tierfs's own -o parser (tfs_config_set) on
 *    every string value of a known option in the JSON (values without
 *    surrounding blanks; from the node, so N% sizes count).
 *
 * TFS_FUZZ_VERBOSE=1 prints each parse's result (for reproducers).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "conf.h"
#include "fv_json.h"
#include "node_conf.h"
#include "node_opts.h"
#include "node_secrets.h"
#include "node_volume.h"
#include "units.h"
#include "fuzz_common.h"

#define SSD_DIR "/var/cache/tierfs/flexvolume/vol-0123"
#define CREDS_FILE "/run/tierfs/flexvolume/vol-0123/credentials"
#define N_NODES 3

static const char base_conf[] = "[backend]\n"
				"endpoint = http://minio.minio:9000\n"
				"[ram]\n"
				"size = 256M\n"
				"[log]\n"
				"level = debug\n";

static const char node_permissive[] = "[node]\n"
				      "credentials_file = /etc/tierfs/node-credentials\n"
				      "daemon_log = /var/log/tierfs/daemon.log\n"
				      "tierfs_conf = %s\n"
				      "[defaults]\n"
				      "ramSize = 512M\n"
				      "ssdSize = 80%%\n"
				      "metadataTTL = 1m\n"
				      "policy = epoch\n"
				      "bucket = default-bucket\n"
				      "prefix = default/prefix/\n"
				      "[pod]\n"
				      "allow = source, bucket, prefix, endpoint, region, "
				      "pathStyle, ramSize, ssdSize, "
				      "blockSize, readahead, policy, metadataTTL, writeback, "
				      "readOnly\n";

static const char node_strict[] = "[defaults]\n"
				  "source = s3://node-default/data\n"
				  "readOnly = true\n"
				  "ramSize = 1G\n"
				  "[limits]\n"
				  "maxRamSize = 4G\n"
				  "maxSsdSize = 100G\n"
				  "maxBlockSize = 16M\n"
				  "maxReadahead = 256M\n"
				  "minMetadataTTL = 10s\n"
				  "[pod]\n"
				  "allow = source, prefix, ramSize, ssdSize, blockSize, readahead, "
				  "metadataTTL, writeback, readOnly\n";

static struct tfs_node_conf nodes[N_NODES];
static int conf_fd = -1;
static char conf_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd_with(const char *name, const char *text, char *path, size_t cap)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	size_t n = strlen(text);

	if (fd < 0 || write(fd, text, n) != (ssize_t)n) {
		perror("memfd");
		abort();
	}
	snprintf(path, cap, "/proc/self/fd/%d", fd);
	return fd;
}

static void load_node(struct tfs_node_conf *n, const char *path, bool must_exist)
{
	struct tfs_dbuf err;
	int rc;

	tfs_dbuf_init(&err, 65536);
	rc = tfs_node_conf_load(n, TFS_NODE_DRIVER_FLEXVOLUME, path, must_exist, &err);
	if (rc) {
		fprintf(stderr, "fuzz_flexvolume: the node config %s does not load: %s\n", path,
			tfs_dbuf_str(&err));
		abort();
	}
	tfs_dbuf_free(&err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char base_path[64], path[64], text[2048];

	(void)argc;
	(void)argv;
	memfd_with("tierfs.conf", base_conf, base_path, sizeof(base_path));
	snprintf(text, sizeof(text), node_permissive, base_path);
	load_node(&nodes[0], "/nonexistent/tierfs/flexvolume.conf", false);
	memfd_with("permissive.conf", text, path, sizeof(path));
	load_node(&nodes[1], path, true);
	memfd_with("strict.conf", node_strict, path, sizeof(path));
	load_node(&nodes[2], path, true);
	conf_fd = memfd_with("volume.conf", "", conf_path, sizeof(conf_path));
	return 0;
}

static void put_file(const char *text)
{
	size_t len = strlen(text), off = 0;

	if (ftruncate(conf_fd, 0) != 0)
		abort();
	while (off < len) {
		ssize_t n = pwrite(conf_fd, text + off, len - off, (off_t)off);

		if (n <= 0)
			abort();
		off += (size_t)n;
	}
}

static bool is_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool trimmed(const char *s)
{
	return *s == '\0' || (!is_blank(s[0]) && !is_blank(s[strlen(s) - 1]));
}

static char *trim_dup(const char *s)
{
	while (is_blank(*s))
		s++;
	size_t n = strlen(s);
	while (n && is_blank(s[n - 1]))
		n--;
	char *d = strndup(s, n);
	if (d == NULL)
		abort();
	return d;
}

static void check_message(const char *what, const struct tfs_dbuf *err)
{
	const char *m = tfs_dbuf_str(err);
	const char *bad = fuzz_bad_message(m);

	CHECK("tfs_node_message", bad == NULL, "%s: the message has %s: '%s'", what, bad ? bad : "",
	      m);
}

static void check_cred(const char *name, const char *v)
{
	if (v == NULL)
		return;
	CHECK("tfs_node_creds", *v != '\0', "%s is empty", name);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		CHECK("tfs_node_creds", *p > 0x20 && *p < 0x7f, "%s has byte 0x%02x", name, *p);
	CHECK("tfs_node_creds", strlen(v) <= TFS_NODE_CREDS_MAX_LINE, "%s has %zu bytes", name,
	      strlen(v));
	/* What the daemon can sign with (node_secrets.h). */
	if (strcmp(name, "sessionToken") == 0)
		CHECK("tfs_node_creds", strlen(v) <= TFS_NODE_SESSION_TOKEN_MAX, "%s has %zu bytes",
		      name, strlen(v));
	if (strcmp(name, "accessKey") == 0)
		CHECK("tfs_node_creds", strlen(v) <= TFS_NODE_ACCESS_KEY_MAX, "%s has %zu bytes",
		      name, strlen(v));
}

/* ---- the secret never in a message ---- */

static const char *const secret_names[] = { "accessKey", "secretKey", "sessionToken" };

/* The message of parsing `json` with secret `name` replaced by a valid
 * one of `len` bytes (not `avoid`).  malloc'd, or NULL when the JSON does
 * not parse here. */
static char *message_with_other_secret(const char *json, const char *key, size_t len,
				       const char *avoid, const struct tfs_node_conf *node)
{
	struct json_object *root = json_tokener_parse(json);
	unsigned char *fill, *b64;
	struct tfs_node_volume v;
	struct tfs_dbuf err;
	char *m;

	if (root == NULL)
		return NULL;
	fill = malloc(len + 1);
	b64 = malloc(4 * (len / 3 + 1) + 1);
	if (fill == NULL || b64 == NULL)
		abort();
	memset(fill, avoid[0] == 'Z' ? 'Y' : 'Z', len);
	EVP_EncodeBlock(b64, fill, (int)len);
	json_object_object_add(root, key, json_object_new_string((const char *)b64));
	const char *again = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
	tfs_dbuf_init(&err, 65536);
	if (fv_volume_parse(again, node, &v, &err) == 0)
		tfs_node_volume_clear(&v);
	m = strdup(tfs_dbuf_str(&err));
	if (m == NULL)
		abort();
	tfs_dbuf_free(&err);
	json_object_put(root);
	free(fill);
	free(b64);
	return m;
}

static void check_no_secret(const char *json, struct json_object *root,
			    const struct tfs_node_conf *node, const char *msg)
{
	char key[64];

	if (root == NULL || !json_object_is_type(root, json_type_object))
		return;
	for (size_t i = 0; i < 3; i++) {
		struct json_object *val;
		char *dec = NULL;

		snprintf(key, sizeof(key), "kubernetes.io/secret/%s", secret_names[i]);
		if (!json_object_object_get_ex(root, key, &val) ||
		    !json_object_is_type(val, json_type_string))
			continue;
		if (tfs_node_secret_decode(secret_names[i], json_object_get_string(val), &dec,
					   NULL) != 0)
			continue;
		char *raw = trim_dup(json_object_get_string(val));
		/* the base64 text also has no blanks inside: trim newlines too */
		raw[strcspn(raw, "\r\n")] = '\0';
		const char *needles[2] = { dec, raw };
		for (int k = 0; k < 2; k++) {
			if (strlen(needles[k]) < 6 || strstr(msg, needles[k]) == NULL)
				continue;
			char *m2 = message_with_other_secret(json, key, strlen(dec), dec, node);
			CHECK("tfs_node_secret_in_message",
			      m2 == NULL || strstr(m2, needles[k]) != NULL,
			      "the message shows the %s of %s: %s", k ? "base64 value" : "value",
			      secret_names[i], msg);
			free(m2);
		}
		free(raw);
		explicit_bzero(dec, strlen(dec));
		free(dec);
	}
}

/* ---- a parsed volume ---- */

static void check_volume(const struct tfs_node_volume *v, const struct tfs_node_conf *node)
{
	struct tfs_dbuf err;
	struct tfs_node_value pv;
	int rc;

	tfs_dbuf_init(&err, 65536);
	CHECK("tfs_node_source", v->source && strncmp(v->source, "s3://", 5) == 0, "source '%s'",
	      v->source ? v->source : "(null)");
	rc = tfs_node_opt_check(TFS_NODE_OPT_SOURCE, v->source, "source", false, NULL, &err);
	CHECK("tfs_node_source", rc == 0, "the volume's source '%s' fails its own check: %s",
	      v->source, tfs_dbuf_str(&err));

	CHECK("tfs_node_creds", (v->creds.access_key == NULL) == (v->creds.secret_key == NULL),
	      "%s", "accessKey without secretKey or the other way round");
	CHECK("tfs_node_creds", v->creds.session_token == NULL || v->creds.access_key != NULL, "%s",
	      "a sessionToken without keys");
	CHECK("tfs_node_creds", v->creds.access_key != NULL || node->credentials_file != NULL, "%s",
	      "no Secret and no node credentials_file, yet the volume parsed");
	check_cred("accessKey", v->creds.access_key);
	check_cred("secretKey", v->creds.secret_key);
	check_cred("sessionToken", v->creds.session_token);

	for (int i = 0; i < TFS_NODE_OPT_COUNT; i++) {
		enum tfs_node_opt o = (enum tfs_node_opt)i;
		const char *val = v->value[o];

		if (o == TFS_NODE_OPT_SOURCE || o == TFS_NODE_OPT_BUCKET ||
		    o == TFS_NODE_OPT_PREFIX || o == TFS_NODE_OPT_READ_ONLY) {
			CHECK("tfs_node_values", val == NULL, "value[%s] is set",
			      tfs_node_opt_name(o));
			continue;
		}
		if (val == NULL)
			continue;
		CHECK("tfs_node_values", trimmed(val), "%s '%s' is not trimmed",
		      tfs_node_opt_name(o), val);
		rc = tfs_node_opt_check(o, val, tfs_node_opt_name(o), v->from_pod[o], &pv, &err);
		CHECK("tfs_node_values", rc == 0,
		      "%s '%s' was accepted but fails tfs_node_opt_check: %s", tfs_node_opt_name(o),
		      val, tfs_dbuf_str(&err));
		if (v->from_pod[o]) {
			CHECK("tfs_node_values", node->allow[o], "%s from the pod, not allowed",
			      tfs_node_opt_name(o));
			CHECK("tfs_node_limits",
			      rc || !node->limit[o].set ||
				      tfs_node_opt_within(o, &pv, node->limit[o].value),
			      "%s '%s' is beyond the node's limit", tfs_node_opt_name(o), val);
		} else {
			CHECK("tfs_node_values", node->def[o].value != NULL,
			      "%s '%s' neither from the pod nor a node default",
			      tfs_node_opt_name(o), val);
			char *d = trim_dup(node->def[o].value);
			CHECK("tfs_node_values", strcmp(d, val) == 0,
			      "%s '%s' is not the node default '%s'", tfs_node_opt_name(o), val, d);
			free(d);
		}
	}
	if (v->read_only && v->value[TFS_NODE_OPT_WRITEBACK] && v->from_pod[TFS_NODE_OPT_WRITEBACK])
		CHECK("tfs_node_read_only", strcmp(v->value[TFS_NODE_OPT_WRITEBACK], "off") == 0,
		      "a read-only volume with writeback '%s' from the pod",
		      v->value[TFS_NODE_OPT_WRITEBACK]);
	tfs_dbuf_free(&err);
}

/* The tierfs.conf of the volume loads, validates and says what it should. */
static void check_conf(const struct tfs_node_volume *v, const struct tfs_node_conf *node)
{
	struct tfs_dbuf out, err;
	struct tfs_config cfg;
	bool writable = !v->read_only;
	uint64_t n;
	int rc;

	tfs_dbuf_init(&out, 1 << 20);
	tfs_dbuf_init(&err, 65536);
	rc = tfs_node_volume_tierfs_conf(v, node, SSD_DIR, CREDS_FILE, &out, &writable, &err);
	CHECK("tfs_node_errno", rc == 0 || rc == EINVAL || rc == ENOMEM || rc == EOVERFLOW,
	      "tfs_node_volume_tierfs_conf returned %d", rc);
	if (rc == EINVAL)
		check_message("tfs_node_volume_tierfs_conf", &err);
	if (rc) {
		tfs_dbuf_free(&out);
		tfs_dbuf_free(&err);
		return;
	}
	put_file(tfs_dbuf_str(&out));
	rc = tfs_config_defaults(&cfg);
	CHECK("tfs_node_conf_reloads", rc == 0, "tfs_config_defaults: %d", rc);
	rc = tfs_config_load(&cfg, conf_path, true, &err);
	CHECK("tfs_node_conf_reloads", rc == 0 || rc == ENOMEM,
	      "the volume's tierfs.conf does not load: %s\n--- it is:\n%s", tfs_dbuf_str(&err),
	      tfs_dbuf_str(&out));
	if (rc == 0) {
		rc = tfs_config_validate(&cfg, &err);
		CHECK("tfs_node_conf_validates", rc == 0,
		      "the volume's tierfs.conf does not validate: %s", tfs_dbuf_str(&err));
		CHECK("tfs_node_conf_values", cfg.ssd.dir && strcmp(cfg.ssd.dir, SSD_DIR) == 0,
		      "ssd.dir is '%s'", cfg.ssd.dir ? cfg.ssd.dir : "(null)");
		CHECK("tfs_node_conf_values",
		      cfg.backend.credentials_file &&
			      strcmp(cfg.backend.credentials_file, CREDS_FILE) == 0,
		      "backend.credentials_file is '%s'",
		      cfg.backend.credentials_file ? cfg.backend.credentials_file : "(null)");
		if (node->daemon_log)
			CHECK("tfs_node_conf_values",
			      cfg.log.file && strcmp(cfg.log.file, node->daemon_log) == 0,
			      "log.file is '%s'", cfg.log.file ? cfg.log.file : "(null)");
		if (v->read_only)
			CHECK("tfs_node_conf_values", cfg.writeback.mode == TFS_WB_OFF,
			      "a read-only volume with writeback.mode %d", (int)cfg.writeback.mode);
		CHECK("tfs_node_conf_values",
		      writable == (!v->read_only && cfg.writeback.mode != TFS_WB_OFF),
		      "*writable is %d for a %s volume with writeback.mode %d", writable,
		      v->read_only ? "read-only" : "read-write", (int)cfg.writeback.mode);
		if (v->value[TFS_NODE_OPT_RAM_SIZE] &&
		    tfs_parse_size(v->value[TFS_NODE_OPT_RAM_SIZE], &n) == 0)
			CHECK("tfs_node_conf_values", cfg.ram.size == n,
			      "ram.size %llu, expected %llu", (unsigned long long)cfg.ram.size,
			      (unsigned long long)n);
		if (v->value[TFS_NODE_OPT_BLOCK_SIZE] &&
		    tfs_parse_size(v->value[TFS_NODE_OPT_BLOCK_SIZE], &n) == 0)
			CHECK("tfs_node_conf_values", cfg.cache.block_size == n,
			      "cache.block_size %llu, expected %llu",
			      (unsigned long long)cfg.cache.block_size, (unsigned long long)n);
		if (v->value[TFS_NODE_OPT_READAHEAD] &&
		    tfs_parse_size(v->value[TFS_NODE_OPT_READAHEAD], &n) == 0)
			CHECK("tfs_node_conf_values", cfg.prefetch.readahead == n,
			      "prefetch.readahead %llu, expected %llu",
			      (unsigned long long)cfg.prefetch.readahead, (unsigned long long)n);
		if (v->value[TFS_NODE_OPT_METADATA_TTL] &&
		    tfs_parse_duration(v->value[TFS_NODE_OPT_METADATA_TTL], &n) == 0)
			CHECK("tfs_node_conf_values", cfg.cache.metadata_ttl_ms == n,
			      "cache.metadata_ttl %llu ms, expected %llu",
			      (unsigned long long)cfg.cache.metadata_ttl_ms, (unsigned long long)n);
	}
	tfs_config_clear(&cfg);
	tfs_dbuf_free(&out);
	tfs_dbuf_free(&err);
}

/* ---- tfs_node_opt_check against tfs_config_set ---- */

static void check_agreement(struct json_object *root)
{
	if (root == NULL || !json_object_is_type(root, json_type_object))
		return;
	json_object_object_foreach(root, key, val)
	{
		enum tfs_node_opt o;
		struct tfs_dbuf err, assign;
		struct tfs_config cfg;
		struct tfs_node_value pv;
		const char *value;
		const char *tk;
		int r1, r2;

		if (!json_object_is_type(val, json_type_string) ||
		    tfs_node_opt_find(key, false, &o) != 0)
			continue;
		value = json_object_get_string(val);
		tfs_dbuf_init(&err, 65536);
		r1 = tfs_node_opt_check(o, value, "option x", false, &pv, &err);
		CHECK("tfs_node_errno", r1 == 0 || r1 == EINVAL || r1 == ENOMEM,
		      "tfs_node_opt_check returned %d", r1);
		if (r1 == EINVAL) {
			check_message("tfs_node_opt_check", &err);
			CHECK("tfs_node_message",
			      strncmp(tfs_dbuf_str(&err), "option x: ", 10) == 0,
			      "the message does not start with its origin: %s", tfs_dbuf_str(&err));
		}
		tk = tfs_node_opt_tierfs_key(o);
		if (tk && trimmed(value) && r1 != ENOMEM) {
			if (tfs_config_defaults(&cfg) != 0)
				abort();
			tfs_dbuf_init(&assign, 1 << 20);
			tfs_dbuf_addf(&assign, "%s=%s", tk, value);
			r2 = tfs_config_set(&cfg, tfs_dbuf_str(&assign), NULL, NULL);
			CHECK("tfs_node_opts_agree", (r1 == 0) == (r2 == 0),
			      "%s '%s': tfs_node_opt_check says %d, tfs_config_set %d (%s)", key,
			      value, r1, r2, tfs_dbuf_str(&err));
			tfs_dbuf_free(&assign);
			tfs_config_clear(&cfg);
		}
		tfs_dbuf_free(&err);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *json = fuzz_strndup(data, size);
	struct json_object *root = json_tokener_parse(json);

	for (int i = 0; i < N_NODES; i++) {
		struct tfs_node_volume v;
		struct tfs_dbuf err;
		int rc;

		tfs_dbuf_init(&err, 65536);
		memset(&v, 0xa5, sizeof(v)); /* fv_volume_parse must not read *out */
		rc = fv_volume_parse(json, &nodes[i], &v, &err);
		if (getenv("TFS_FUZZ_VERBOSE"))
			fprintf(stderr, "node %d: fv_volume_parse %d %s\n", i, rc,
				rc ? tfs_dbuf_str(&err) : v.source);
		CHECK("tfs_node_errno", rc == 0 || rc == EINVAL || rc == ENOMEM,
		      "fv_volume_parse returned %d", rc);
		if (rc) {
			CHECK("tfs_node_cleared", is_zero(&v, sizeof(v)), "%s",
			      "a failed fv_volume_parse left data in *out");
			if (rc == EINVAL) {
				check_message("fv_volume_parse", &err);
				check_no_secret(json, root, &nodes[i], tfs_dbuf_str(&err));
			}
		} else {
			CHECK("tfs_node_message", tfs_dbuf_len(&err) == 0,
			      "success with a message: %s", tfs_dbuf_str(&err));
			check_volume(&v, &nodes[i]);
			check_conf(&v, &nodes[i]);
		}
		tfs_node_volume_clear(&v);
		CHECK("tfs_node_cleared", is_zero(&v, sizeof(v)), "%s",
		      "tfs_node_volume_clear left data");
		tfs_node_volume_clear(&v);
		tfs_dbuf_free(&err);
	}
	check_agreement(root);
	json_object_put(root);
	free(json);
	return 0;
}
