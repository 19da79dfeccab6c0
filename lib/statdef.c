/* statdef.c - the stats JSON of a snapshot, built from its table's rows
 * (statdef.h). */
#include "config.h"

#include "statdef.h"

#include <errno.h>
#include <json-c/json.h>
#include <string.h>

#include "hist.h"

/* The JSON value of a row's field, or *absent (no member). */
static struct json_object *value_of(const struct tfs_statdef *r, const void *snap, bool *absent)
{
	const char *p = (const char *)snap + r->off;

	*absent = false;
	switch (r->vtype) {
	case TFS_STAT_U64:
		return json_object_new_uint64(*(const uint64_t *)p);
	case TFS_STAT_I64:
		return json_object_new_int64(*(const int64_t *)p);
	case TFS_STAT_F64:
		return json_object_new_double(*(const double *)p);
	case TFS_STAT_BOOL:
		return json_object_new_boolean(*(const bool *)p);
	case TFS_STAT_STR: {
		const char *s = *(const char *const *)p;
		return s ? json_object_new_string(s) : NULL;
	}
	case TFS_STAT_OPT: {
		const struct tfs_stat_opt *o = (const struct tfs_stat_opt *)p;
		*absent = !o->set;
		return o->set ? json_object_new_uint64(o->v) : NULL;
	}
	case TFS_STAT_HIST: {
		const struct tfs_hist *h = *(const struct tfs_hist *const *)p;
		*absent = h == NULL;
		return h ? tfs_hist_json(h) : NULL;
	}
	case TFS_STAT_JSON:
		return *(struct json_object *const *)p;
	}
	*absent = true;
	return NULL;
}

/* Whether a NULL value from value_of() is a failed allocation. */
static bool null_is_enomem(const struct tfs_statdef *r, const void *snap)
{
	const char *p = (const char *)snap + r->off;

	if (r->vtype == TFS_STAT_JSON)
		return false;
	return r->vtype != TFS_STAT_STR || *(const char *const *)p != NULL;
}

int tfs_stat_json(struct json_object *o, const struct tfs_stattab *t, const void *snap)
{
	int rc = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct tfs_statdef *r = &t->rows[i];
		bool absent;
		struct json_object *v = value_of(r, snap, &absent);

		if (absent)
			continue;
		if (v == NULL && null_is_enomem(r, snap)) {
			rc = ENOMEM;
			continue;
		}
		if (json_object_object_add(o, r->key, v) != 0) {
			json_object_put(v);
			rc = ENOMEM;
		}
	}
	return rc;
}

struct json_object *tfs_stat_object(const struct tfs_stattab *t, const void *snap)
{
	struct json_object *o = json_object_new_object();

	if (o == NULL) {
		/* the JSON values are ours to put */
		for (size_t i = 0; i < t->n; i++)
			if (t->rows[i].vtype == TFS_STAT_JSON)
				json_object_put(*(struct json_object *const *)((const char *)snap +
									       t->rows[i].off));
		return NULL;
	}
	if (tfs_stat_json(o, t, snap) == 0)
		return o;
	json_object_put(o);
	return NULL;
}

const char *tfs_stat_name(const struct tfs_stattab *t)
{
	const char *dot = strrchr(t->section, '.');

	return dot ? dot + 1 : t->section;
}

int tfs_stat_add_section(struct json_object *parent, const struct tfs_stattab *t, const void *snap)
{
	struct json_object *o = tfs_stat_object(t, snap);

	if (o == NULL)
		return ENOMEM;
	if (json_object_object_add(parent, tfs_stat_name(t), o) != 0) {
		json_object_put(o);
		return ENOMEM;
	}
	return 0;
}
