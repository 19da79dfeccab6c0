/* stats_render.c - generic human-readable rendering of a JSON object
 * (sections, aligned values, tables); see stats_render.h for the rules. */
#include "config.h"

#include "stats_render.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbuf.h"
#include "units.h"

#define INDENT 2  /* per nesting level */
#define COL_SEP 2 /* spaces between table columns */
#define CELL_MAX 4096

enum shape {
	SHAPE_INLINE,  /* on the key's line */
	SHAPE_TABLE,   /* array of flat objects */
	SHAPE_SECTION, /* members indented below the key */
};

/* An output buffer with a sticky error: once an append fails, the others
 * do nothing and the first error is reported. */
struct rend {
	struct tfs_dbuf *out;
	int err;
};

/* A member of an object, or an element of an array named "[i]". */
struct member {
	const char *key;
	struct json_object *val;
	bool bytes;
	char name[24];
};

static void r_add(struct rend *r, const char *s, size_t n)
{
	if (r->err == 0)
		r->err = tfs_dbuf_add(r->out, s, n);
}

static void r_adds(struct rend *r, const char *s)
{
	r_add(r, s, strlen(s));
}

static void r_pad(struct rend *r, size_t n)
{
	static const char spaces[] = "                                ";

	while (n > 0) {
		size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
		r_add(r, spaces, k);
		n -= k;
	}
}

/* Append text with control characters replaced by '?'. */
static void r_text(struct rend *r, const char *s, size_t n)
{
	size_t start = r->out->len;

	r_add(r, s, n);
	if (r->err)
		return;
	for (size_t i = start; i < r->out->len; i++) {
		unsigned char c = (unsigned char)r->out->buf[i];
		if (c < 0x20 || c == 0x7f)
			r->out->buf[i] = '?';
	}
}

static bool bytes_key(const char *key)
{
	size_t n = strlen(key);
	return n >= 6 && memcmp(key + n - 6, "_bytes", 6) == 0;
}

static bool is_scalar(struct json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null:
	case json_type_boolean:
	case json_type_int:
	case json_type_double:
	case json_type_string:
		return true;
	default:
		return false;
	}
}

static bool is_number(struct json_object *v)
{
	return json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
}

static size_t length(struct json_object *v)
{
	if (json_object_is_type(v, json_type_object))
		return (size_t)json_object_object_length(v);
	if (json_object_is_type(v, json_type_array))
		return json_object_array_length(v);
	return 0;
}

static void r_size(struct rend *r, uint64_t bytes)
{
	char buf[TFS_UNITS_BUFLEN];

	if (tfs_format_size(bytes, buf, sizeof(buf)) == 0)
		r_adds(r, buf);
	else
		r_adds(r, "?");
}

static void r_scalar(struct rend *r, struct json_object *v, bool bytes)
{
	char buf[64];

	switch (json_object_get_type(v)) {
	case json_type_null:
		r_adds(r, "-");
		break;
	case json_type_boolean:
		r_adds(r, json_object_get_boolean(v) ? "true" : "false");
		break;
	case json_type_int: {
		int64_t i = json_object_get_int64(v);
		if (i < 0) {
			snprintf(buf, sizeof(buf), "%" PRId64, i);
			r_adds(r, buf);
			break;
		}
		/* json-c saturates get_int64 for values above INT64_MAX */
		uint64_t u = i == INT64_MAX ? json_object_get_uint64(v) : (uint64_t)i;
		if (bytes) {
			r_size(r, u);
		} else {
			snprintf(buf, sizeof(buf), "%" PRIu64, u);
			r_adds(r, buf);
		}
		break;
	}
	case json_type_double: {
		double d = json_object_get_double(v);
		if (bytes && d >= 0 && d < 18446744073709551616.0) {
			r_size(r, (uint64_t)d);
		} else {
			snprintf(buf, sizeof(buf), "%g", d);
			r_adds(r, buf);
		}
		break;
	}
	case json_type_string:
		if (json_object_get_string_len(v) == 0)
			r_adds(r, "\"\"");
		else
			r_text(r, json_object_get_string(v), (size_t)json_object_get_string_len(v));
		break;
	default:
		r_adds(r, "?");
		break;
	}
}

static enum shape shape_of(struct json_object *v)
{
	if (is_scalar(v) || length(v) == 0)
		return SHAPE_INLINE;
	if (json_object_is_type(v, json_type_object))
		return SHAPE_SECTION;

	size_t n = json_object_array_length(v);
	bool all_scalar = true, flat_objects = true, any_key = false;
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(v, i);
		if (!is_scalar(e))
			all_scalar = false;
		if (!json_object_is_type(e, json_type_object)) {
			flat_objects = false;
			continue;
		}
		json_object_object_foreach(e, ek, ev)
		{
			(void)ek;
			any_key = true;
			if (!is_scalar(ev))
				flat_objects = false;
		}
	}
	if (all_scalar)
		return SHAPE_INLINE;
	return flat_objects && any_key ? SHAPE_TABLE : SHAPE_SECTION;
}

/* Scalars, empty containers and arrays of scalars. */
static void r_inline(struct rend *r, struct json_object *v, bool bytes)
{
	if (is_scalar(v)) {
		r_scalar(r, v, bytes);
		return;
	}
	size_t n = length(v);
	if (n == 0) {
		r_adds(r, "-");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			r_adds(r, ", ");
		r_scalar(r, json_object_array_get_idx(v, i), bytes);
	}
}

static void r_cell(struct rend *r, const char *text, size_t len, size_t width, bool right,
		   bool last)
{
	if (right)
		r_pad(r, width - len);
	r_add(r, text, len);
	if (!right && !last)
		r_pad(r, width - len);
	if (!last)
		r_pad(r, COL_SEP);
}

/* Render cell (row, column key) of a table into `cell`. */
static int cell_text(struct tfs_dbuf *cell, struct json_object *row, const char *key)
{
	struct rend cr = { .out = cell };
	struct json_object *v;

	tfs_dbuf_reset(cell);
	if (json_object_object_get_ex(row, key, &v))
		r_scalar(&cr, v, bytes_key(key));
	else
		r_adds(&cr, "-");
	return cr.err;
}

static void r_table(struct rend *r, struct json_object *arr, size_t indent)
{
	size_t rows = json_object_array_length(arr), ncols = 0;
	const char **cols = NULL;
	size_t *width = NULL;
	bool *numeric = NULL;
	struct tfs_dbuf cell;
	struct rend hr;

	tfs_dbuf_init(&cell, CELL_MAX);
	hr.out = &cell;
	/* The columns: every key, in order of first appearance. */
	for (size_t i = 0; i < rows && r->err == 0; i++) {
		json_object_object_foreach(json_object_array_get_idx(arr, i), ck, cv)
		{
			(void)cv;
			size_t j = 0;
			while (j < ncols && strcmp(cols[j], ck) != 0)
				j++;
			if (j < ncols)
				continue;
			const char **nc = realloc(cols, (ncols + 1) * sizeof(*nc));
			if (nc == NULL) {
				r->err = ENOMEM;
				break;
			}
			cols = nc;
			cols[ncols++] = ck;
		}
	}
	if (r->err == 0) {
		width = calloc(ncols, sizeof(*width));
		numeric = calloc(ncols, sizeof(*numeric));
		if (width == NULL || numeric == NULL)
			r->err = ENOMEM;
	}
	/* Widths, and which columns hold only numbers (nulls aside). */
	for (size_t j = 0; j < ncols && r->err == 0; j++) {
		bool any_number = false, only_numbers = true;
		hr.err = 0;
		tfs_dbuf_reset(&cell);
		r_text(&hr, cols[j], strlen(cols[j]));
		width[j] = cell.len;
		for (size_t i = 0; i < rows && hr.err == 0; i++) {
			struct json_object *row = json_object_array_get_idx(arr, i), *v;
			if (json_object_object_get_ex(row, cols[j], &v) && v != NULL) {
				if (is_number(v))
					any_number = true;
				else
					only_numbers = false;
			}
			hr.err = cell_text(&cell, row, cols[j]);
			if (cell.len > width[j])
				width[j] = cell.len;
		}
		numeric[j] = any_number && only_numbers;
		r->err = hr.err;
	}
	/* Header, then one line per element. */
	if (r->err == 0) {
		r_pad(r, indent);
		for (size_t j = 0; j < ncols && r->err == 0; j++) {
			hr.err = 0;
			tfs_dbuf_reset(&cell);
			r_text(&hr, cols[j], strlen(cols[j]));
			r->err = hr.err;
			r_cell(r, tfs_dbuf_str(&cell), cell.len, width[j], numeric[j],
			       j + 1 == ncols);
		}
		r_adds(r, "\n");
	}
	for (size_t i = 0; i < rows && r->err == 0; i++) {
		struct json_object *row = json_object_array_get_idx(arr, i);
		r_pad(r, indent);
		for (size_t j = 0; j < ncols && r->err == 0; j++) {
			r->err = cell_text(&cell, row, cols[j]);
			r_cell(r, tfs_dbuf_str(&cell), cell.len, width[j], numeric[j],
			       j + 1 == ncols);
		}
		r_adds(r, "\n");
	}
	tfs_dbuf_free(&cell);
	free(cols);
	free(width);
	free(numeric);
}

static void r_members(struct rend *r, struct json_object *v, bool parent_bytes, size_t indent);

static void r_member_list(struct rend *r, const struct member *m, size_t n, size_t indent)
{
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		size_t kl = strlen(m[i].key) + 1;
		if (shape_of(m[i].val) == SHAPE_INLINE && kl > w)
			w = kl;
	}
	for (size_t i = 0; i < n && r->err == 0; i++) {
		enum shape sh = shape_of(m[i].val);
		size_t kl = strlen(m[i].key);
		r_pad(r, indent);
		r_text(r, m[i].key, kl);
		r_adds(r, ":");
		if (sh == SHAPE_INLINE) {
			r_pad(r, w - (kl + 1) + 1);
			r_inline(r, m[i].val, m[i].bytes);
			r_adds(r, "\n");
		} else {
			r_adds(r, "\n");
			if (sh == SHAPE_TABLE)
				r_table(r, m[i].val, indent + INDENT);
			else
				r_members(r, m[i].val, m[i].bytes, indent + INDENT);
		}
	}
}

/* The members of an object, or the elements of an array as "[i]". */
static void r_members(struct rend *r, struct json_object *v, bool parent_bytes, size_t indent)
{
	size_t n = length(v), i = 0;
	struct member *m;

	if (n == 0 || r->err)
		return;
	m = calloc(n, sizeof(*m));
	if (m == NULL) {
		r->err = ENOMEM;
		return;
	}
	if (json_object_is_type(v, json_type_object)) {
		json_object_object_foreach(v, mk, mv)
		{
			m[i].key = mk;
			m[i].val = mv;
			m[i].bytes = bytes_key(mk);
			i++;
		}
	} else {
		for (i = 0; i < n; i++) {
			snprintf(m[i].name, sizeof(m[i].name), "[%zu]", i);
			m[i].key = m[i].name;
			m[i].val = json_object_array_get_idx(v, i);
			m[i].bytes = parent_bytes;
		}
	}
	r_member_list(r, m, i, indent);
	free(m);
}

int tfs_stats_render(struct json_object *obj, struct tfs_dbuf *out)
{
	struct rend r = { .out = out };

	if (!json_object_is_type(obj, json_type_object))
		return EINVAL;
	r_members(&r, obj, false, 0);
	return r.err;
}
