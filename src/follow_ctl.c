/* follow_ctl.c - the `follow` control command over follow.c's streams
 * (vfs/follow.h): a manifest followed in a stream of its own while the
 * command runs. */
#include "config.h"

#include "follow_ctl.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

static struct json_object *bad_lines(const struct tfs_manifest *m)
{
	struct json_object *bad = json_object_new_array();
	for (size_t i = 0; bad && i < m->n && json_object_array_length(bad) < 1000; i++) {
		if (m->v[i].error == NULL)
			continue;
		struct json_object *b = json_object_new_object();
		if (b == NULL)
			break;
		char where[64];
		snprintf(where, sizeof(where), "manifest line %llu",
			 (unsigned long long)m->v[i].line);
		json_object_object_add(b, "path", json_object_new_string(where));
		json_object_object_add(b, "error", json_object_new_string(m->v[i].error));
		json_object_array_add(bad, b);
	}
	return bad;
}

static int follow_handler(void *vctx, struct tfs_ctl_conn *conn, struct json_object *req,
			  struct json_object **resp)
{
	struct tfs_follow *f = vctx;
	struct json_object *v;
	const char *path =
		json_object_object_get_ex(req, "manifest", &v) ? json_object_get_string(v) : NULL;
	if (path == NULL)
		return tfs_ctl_fail(resp, EINVAL, "follow needs a manifest");
	struct tfs_manifest m;
	int rc = tfs_manifest_load(path, tfs_follow_scope(f), 50u * 1000u * 1000u, &m);
	if (rc)
		return tfs_ctl_fail(resp, rc, "manifest '%s': %s", path, strerror(rc));
	struct json_object *bad = bad_lines(&m);
	uint64_t id = 0;
	/* The control socket serves only the daemon's uid and root: its
	 * streams count against the daemon's uid's share. */
	rc = tfs_follow_add(f, &m, geteuid(), &id);
	size_t errors = m.errors;
	tfs_manifest_free(&m);
	if (rc) {
		json_object_put(bad);
		return tfs_ctl_fail(resp, rc, "cannot set the order: %s", strerror(rc));
	}
	uint64_t pos = 0, len = 0, fetched = 0;
	const struct timespec half_second = { 0, 500000000L };
	for (;;) {
		tfs_follow_position(f, id, &pos, &len, &fetched);
		if (len == 0 || pos >= len)
			break;
		struct json_object *p = json_object_new_object();
		if (p) {
			json_object_object_add(p, "files_done", json_object_new_uint64(pos));
			json_object_object_add(p, "files_total", json_object_new_uint64(len));
			json_object_object_add(p, "fetched_files", json_object_new_uint64(fetched));
			json_object_object_add(p, "listing_done", json_object_new_boolean(1));
			(void)tfs_ctl_send_progress(conn, p);
			json_object_put(p);
		}
		if (tfs_ctl_conn_cancelled(conn))
			break; /* Ctrl-C: stop following */
		nanosleep(&half_second, NULL);
	}
	tfs_follow_remove(f, id);
	struct json_object *o = json_object_new_object();
	if (o == NULL) {
		json_object_put(bad);
		return ENOMEM;
	}
	json_object_object_add(o, "files_done", json_object_new_uint64(pos));
	json_object_object_add(o, "fetched_files", json_object_new_uint64(fetched));
	json_object_object_add(o, "failed_files", json_object_new_uint64(errors));
	json_object_object_add(o, "failures", bad);
	*resp = o;
	return 0;
}

int tfs_follow_register(struct tfs_ctl *ctl, struct tfs_follow *f,
			const struct tfs_manifest_scope *scope)
{
	tfs_follow_set_scope(f, scope);
	return tfs_ctl_register(ctl, "follow", follow_handler, f);
}
