/* s3_xml.c - expat-based parsers for S3 XML replies (ListObjectsV2, Error,
 * multipart, multipart listing and copy results) and S3/HTTP time parsing. */
#include "config.h"

#include "s3_xml.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#include "dbuf.h"

#ifdef XML_UNICODE
#error "s3_xml.c expects expat built with XML_Char == char (UTF-8)"
#endif

/* Largest single text value we collect (a key is at most 1024 bytes on S3,
 * a continuation token a few hundred); anything larger is a bogus reply. */
#define XP_TEXT_MAX (64u * 1024u)
/* Element nesting we track by name; deeper elements are only counted. */
#define XP_MAX_DEPTH 16
/* Bytes handed to XML_Parse at once (its length argument is an int). */
#define XP_CHUNK (1u << 30)

/* Element names we care about, matched by local name. */
enum xp_name {
	N_OTHER = 0,
	N_LIST_BUCKET_RESULT,
	N_CONTENTS,
	N_KEY,
	N_SIZE,
	N_ETAG,
	N_LAST_MODIFIED,
	N_COMMON_PREFIXES,
	N_PREFIX,
	N_IS_TRUNCATED,
	N_NEXT_CONTINUATION_TOKEN,
	N_ENCODING_TYPE,
	N_ERROR,
	N_CODE,
	N_REGION,
	N_MESSAGE,
	N_INITIATE_MPU_RESULT,
	N_UPLOAD_ID,
	N_COMPLETE_MPU_RESULT,
	N_COPY_OBJECT_RESULT,
	N_COPY_PART_RESULT,
	N_LIST_MPU_RESULT,
	N_UPLOAD,
};

static const struct {
	const char *name;
	enum xp_name id;
} xp_names[] = {
	{ "ListBucketResult", N_LIST_BUCKET_RESULT },
	{ "Contents", N_CONTENTS },
	{ "Key", N_KEY },
	{ "Size", N_SIZE },
	{ "ETag", N_ETAG },
	{ "LastModified", N_LAST_MODIFIED },
	{ "CommonPrefixes", N_COMMON_PREFIXES },
	{ "Prefix", N_PREFIX },
	{ "IsTruncated", N_IS_TRUNCATED },
	{ "NextContinuationToken", N_NEXT_CONTINUATION_TOKEN },
	{ "EncodingType", N_ENCODING_TYPE },
	{ "Error", N_ERROR },
	{ "Code", N_CODE },
	{ "Region", N_REGION },
	{ "Message", N_MESSAGE },
	{ "InitiateMultipartUploadResult", N_INITIATE_MPU_RESULT },
	{ "UploadId", N_UPLOAD_ID },
	{ "CompleteMultipartUploadResult", N_COMPLETE_MPU_RESULT },
	/* moto names the root ...Response instead of ...Result. */
	{ "CompleteMultipartUploadResponse", N_COMPLETE_MPU_RESULT },
	{ "CopyObjectResult", N_COPY_OBJECT_RESULT },
	{ "CopyPartResult", N_COPY_PART_RESULT },
	{ "ListMultipartUploadsResult", N_LIST_MPU_RESULT },
	{ "Upload", N_UPLOAD },
};

struct xp;

/* Per-document hooks.  `start` runs after the element is pushed (xp->depth
 * is its depth) and may call xp_capture(); `end` runs before it is popped,
 * with the element's text in xp->text when it was captured. */
struct xp_kind {
	int (*start)(struct xp *xp, enum xp_name id);
	int (*end)(struct xp *xp, enum xp_name id, bool captured);
};

struct xp {
	XML_Parser parser;
	const struct xp_kind *kind;
	void *ctx;
	int err;
	unsigned depth; /* depth of the current element; the root is 1 */
	enum xp_name path[XP_MAX_DEPTH + 1];
	unsigned capture_depth; /* 0: not capturing text */
	struct tfs_dbuf text;
};

/* ---- small string helpers ---- */

static bool is_xml_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trim XML whitespace from both ends of s in place; returns s. */
static char *trim(char *s, size_t *len)
{
	size_t b = 0, e = *len;
	while (b < e && is_xml_space(s[b]))
		b++;
	while (e > b && is_xml_space(s[e - 1]))
		e--;
	if (b)
		memmove(s, s + b, e - b);
	s[e - b] = '\0';
	*len = e - b;
	return s;
}

/* Copy at most dst_len-1 bytes of src, not splitting a UTF-8 sequence. */
static void copy_trunc(char *dst, size_t dst_len, const char *src, size_t src_len)
{
	if (dst == NULL || dst_len == 0)
		return;
	size_t n = src_len;
	if (n > dst_len - 1) {
		n = dst_len - 1;
		while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode s in place ('+' stays '+').  EIO for a bad escape or an
 * encoded NUL. */
static int pct_decode(char *s)
{
	char *w = s;
	for (const char *r = s; *r; r++) {
		if (*r != '%') {
			*w++ = *r;
			continue;
		}
		int hi = hexval(r[1]);
		int lo = hi < 0 ? -1 : hexval(r[2]);
		if (hi < 0 || lo < 0)
			return EIO;
		int v = hi * 16 + lo;
		if (v == 0)
			return EIO;
		*w++ = (char)v;
		r += 2;
	}
	*w = '\0';
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (*s == '\0')
		return EIO;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return EIO;
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return EIO;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static bool eq_nocase(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a, y = *b;
		if (x >= 'A' && x <= 'Z')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return false;
	}
	return *a == *b;
}

/* ---- the generic expat driver ---- */

static enum xp_name lookup_name(const XML_Char *name)
{
	/* Without namespace processing a name is "Local" or "prefix:Local". */
	const char *local = strrchr(name, ':');
	local = local ? local + 1 : name;
	for (size_t i = 0; i < sizeof(xp_names) / sizeof(xp_names[0]); i++)
		if (strcmp(local, xp_names[i].name) == 0)
			return xp_names[i].id;
	return N_OTHER;
}

static void xp_fail(struct xp *xp, int err)
{
	if (xp->err == 0)
		xp->err = err;
	XML_StopParser(xp->parser, XML_FALSE);
}

/* Name of the open element at `depth` (1 = root). */
static enum xp_name xp_at(const struct xp *xp, unsigned depth)
{
	return depth >= 1 && depth <= XP_MAX_DEPTH ? xp->path[depth] : N_OTHER;
}

/* Collect the direct text of the current element. */
static void xp_capture(struct xp *xp)
{
	xp->capture_depth = xp->depth;
	tfs_dbuf_reset(&xp->text);
}

static void XMLCALL on_start(void *user, const XML_Char *name, const XML_Char **atts)
{
	struct xp *xp = user;
	(void)atts;
	if (xp->err)
		return;
	if (xp->depth == UINT_MAX) {
		xp_fail(xp, EIO);
		return;
	}
	xp->depth++;
	enum xp_name id = lookup_name(name);
	if (xp->depth <= XP_MAX_DEPTH)
		xp->path[xp->depth] = id;
	int rc = xp->kind->start(xp, id);
	if (rc)
		xp_fail(xp, rc);
}

static void XMLCALL on_end(void *user, const XML_Char *name)
{
	struct xp *xp = user;
	(void)name;
	if (xp->err)
		return;
	bool captured = xp->capture_depth != 0 && xp->capture_depth == xp->depth;
	if (captured)
		xp->capture_depth = 0;
	int rc = xp->kind->end(xp, xp_at(xp, xp->depth), captured);
	xp->depth--;
	if (rc)
		xp_fail(xp, rc);
}

static void XMLCALL on_text(void *user, const XML_Char *s, int len)
{
	struct xp *xp = user;
	if (xp->err || xp->capture_depth == 0 || xp->capture_depth != xp->depth || len <= 0)
		return;
	int rc = tfs_dbuf_add(&xp->text, s, (size_t)len);
	if (rc)
		xp_fail(xp, rc == ENOMEM ? ENOMEM : EIO);
}

/* No DTDs at all: refusing the DOCTYPE keeps entity definitions (and with
 * them billion-laughs style expansion and external entities) out. */
static void XMLCALL on_doctype(void *user, const XML_Char *name, const XML_Char *sysid,
			       const XML_Char *pubid, int has_internal_subset)
{
	(void)name;
	(void)sysid;
	(void)pubid;
	(void)has_internal_subset;
	xp_fail(user, EIO);
}

static void XMLCALL on_entity_decl(void *user, const XML_Char *name, int is_param,
				   const XML_Char *value, int value_len, const XML_Char *base,
				   const XML_Char *sysid, const XML_Char *pubid,
				   const XML_Char *notation)
{
	(void)name;
	(void)is_param;
	(void)value;
	(void)value_len;
	(void)base;
	(void)sysid;
	(void)pubid;
	(void)notation;
	xp_fail(user, EIO);
}

/* Parse a complete body.  Returns 0 or a positive errno; the kind's
 * context holds the results. */
static int xp_run(const struct xp_kind *kind, void *ctx, const char *body, size_t len)
{
	struct xp xp;
	memset(&xp, 0, sizeof(xp));
	xp.kind = kind;
	xp.ctx = ctx;
	tfs_dbuf_init(&xp.text, XP_TEXT_MAX);

	if (body == NULL)
		len = 0;
	/* AWS may send whitespace ahead of a slow CompleteMultipartUpload
	 * reply to keep the connection alive; it is not part of the XML. */
	while (len > 0 && is_xml_space(*body)) {
		body++;
		len--;
	}
	if (len == 0)
		return EIO;

	xp.parser = XML_ParserCreate(NULL);
	if (xp.parser == NULL)
		return ENOMEM;
	XML_SetUserData(xp.parser, &xp);
	XML_SetElementHandler(xp.parser, on_start, on_end);
	XML_SetCharacterDataHandler(xp.parser, on_text);
	XML_SetStartDoctypeDeclHandler(xp.parser, on_doctype);
	XML_SetEntityDeclHandler(xp.parser, on_entity_decl);
	XML_SetParamEntityParsing(xp.parser, XML_PARAM_ENTITY_PARSING_NEVER);

	int rc = 0;
	size_t off = 0;
	do {
		size_t n = len - off;
		if (n > XP_CHUNK)
			n = XP_CHUNK;
		bool final = off + n == len;
		if (XML_Parse(xp.parser, body + off, (int)n, final) != XML_STATUS_OK) {
			rc = xp.err;
			if (rc == 0)
				rc = XML_GetErrorCode(xp.parser) == XML_ERROR_NO_MEMORY ? ENOMEM
											: EIO;
			break;
		}
		off += n;
	} while (off < len);
	if (rc == 0 && xp.err)
		rc = xp.err;

	XML_ParserFree(xp.parser);
	tfs_dbuf_free(&xp.text);
	return rc;
}

/* The captured text, trimmed, as a NUL-terminated string in xp->text. */
static const char *xp_text_trimmed(struct xp *xp)
{
	if (xp->text.buf == NULL)
		return "";
	return trim(xp->text.buf, &xp->text.len);
}

/* An ETag element's text into out, in the quotes the ETag header has
 * ("" stays ""): Ceph RGW completes an upload of copied parts with
 * <ETag>hex-3</ETag>, and HEAD then says "hex-3", so the two must compare
 * equal.  EIO when it does not fit. */
static int etag_copy(const char *s, char out[TFS_ETAG_MAX])
{
	size_t n = strlen(s);
	bool quoted = n == 0 || (n >= 2 && s[0] == '"' && s[n - 1] == '"');
	if (n + (quoted ? 0 : 2) >= TFS_ETAG_MAX)
		return EIO;
	if (quoted)
		memcpy(out, s, n + 1);
	else
		snprintf(out, TFS_ETAG_MAX, "\"%s\"", s);
	return 0;
}

/* The captured text exactly, as a malloc'd string (NULL on ENOMEM). */
static char *xp_text_steal(struct xp *xp)
{
	return tfs_dbuf_steal(&xp->text);
}

/* ---- ListObjectsV2 ---- */

struct list_ctx {
	struct tfs_list_page page;
	size_t cap_entries;
	size_t cap_prefixes;
	struct tfs_list_entry cur;
	bool in_contents;
	bool truncated;
	bool url_encoded;
	char *token;
};

/* Make room for element n of an array of `*cap` elements of `elem` bytes.
 * Returns the (possibly moved) array, or NULL on ENOMEM with `arr` intact. */
static void *grow(void *arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return arr;
	size_t ncap = *cap ? *cap * 2 : 16;
	if (ncap < *cap || ncap > SIZE_MAX / elem)
		return NULL;
	void *na = realloc(arr, ncap * elem);
	if (na == NULL)
		return NULL;
	*cap = ncap;
	return na;
}

static int list_start(struct xp *xp, enum xp_name id)
{
	struct list_ctx *lc = xp->ctx;
	enum xp_name parent = xp_at(xp, xp->depth - 1);

	switch (xp->depth) {
	case 1:
		return id == N_LIST_BUCKET_RESULT ? 0 : EIO;
	case 2:
		if (id == N_CONTENTS) {
			free(lc->cur.key);
			memset(&lc->cur, 0, sizeof(lc->cur));
			lc->in_contents = true;
		} else if (id == N_IS_TRUNCATED || id == N_NEXT_CONTINUATION_TOKEN ||
			   id == N_ENCODING_TYPE) {
			xp_capture(xp);
		}
		return 0;
	case 3:
		if (parent == N_CONTENTS &&
		    (id == N_KEY || id == N_SIZE || id == N_ETAG || id == N_LAST_MODIFIED))
			xp_capture(xp);
		else if (parent == N_COMMON_PREFIXES && id == N_PREFIX)
			xp_capture(xp);
		return 0;
	default:
		return 0;
	}
}

static int list_end_contents_field(struct xp *xp, struct list_ctx *lc, enum xp_name id)
{
	switch (id) {
	case N_KEY:
		free(lc->cur.key);
		lc->cur.key = xp_text_steal(xp);
		return lc->cur.key ? 0 : ENOMEM;
	case N_SIZE:
		/* Sizes are off_t above us: a larger one is a lie. */
		if (parse_u64(xp_text_trimmed(xp), &lc->cur.size) != 0 ||
		    lc->cur.size > (uint64_t)INT64_MAX)
			return EIO;
		return 0;
	case N_ETAG:
		return etag_copy(xp_text_trimmed(xp), lc->cur.etag);
	case N_LAST_MODIFIED:
		/* A date we cannot read is not worth failing a listing for. */
		if (tfs_s3_parse_time(xp_text_trimmed(xp), &lc->cur.mtime) != 0)
			lc->cur.mtime = 0;
		return 0;
	default:
		return 0;
	}
}

static int list_end(struct xp *xp, enum xp_name id, bool captured)
{
	struct list_ctx *lc = xp->ctx;
	struct tfs_list_page *pg = &lc->page;
	const char *s;

	if (xp->depth == 2 && id == N_CONTENTS && lc->in_contents) {
		lc->in_contents = false;
		if (lc->cur.key == NULL)
			return EIO; /* an entry without a key is useless */
		struct tfs_list_entry *ne =
			grow(pg->entries, &lc->cap_entries, pg->n_entries, sizeof(*ne));
		if (ne == NULL)
			return ENOMEM;
		pg->entries = ne;
		pg->entries[pg->n_entries++] = lc->cur;
		memset(&lc->cur, 0, sizeof(lc->cur));
		return 0;
	}
	if (!captured)
		return 0;

	if (xp->depth == 3 && xp_at(xp, 2) == N_CONTENTS)
		return list_end_contents_field(xp, lc, id);

	if (xp->depth == 3 && id == N_PREFIX) {
		char **np = grow(pg->prefixes, &lc->cap_prefixes, pg->n_prefixes, sizeof(*np));
		if (np == NULL)
			return ENOMEM;
		pg->prefixes = np;
		char *p = xp_text_steal(xp);
		if (p == NULL)
			return ENOMEM;
		pg->prefixes[pg->n_prefixes++] = p;
		return 0;
	}

	switch (id) {
	case N_IS_TRUNCATED:
		lc->truncated = eq_nocase(xp_text_trimmed(xp), "true");
		return 0;
	case N_NEXT_CONTINUATION_TOKEN:
		free(lc->token);
		lc->token = xp_text_steal(xp);
		return lc->token ? 0 : ENOMEM;
	case N_ENCODING_TYPE:
		s = xp_text_trimmed(xp);
		if (*s == '\0')
			lc->url_encoded = false;
		else if (eq_nocase(s, "url"))
			lc->url_encoded = true;
		else
			return EIO; /* keys in an encoding we cannot undo */
		return 0;
	default:
		return 0;
	}
}

static const struct xp_kind list_kind = { list_start, list_end };

/* Decode (when url-encoded) and strip `strip` from s in place.  Returns 0
 * and *keep (false for a name outside `strip` or longer than an S3 key
 * may be), or EIO. */
static int list_fix_name(char *s, bool url, const char *strip, size_t strip_len, bool *keep)
{
	if (url) {
		int rc = pct_decode(s);
		if (rc)
			return rc;
	}
	*keep = strncmp(s, strip, strip_len) == 0 && strlen(s) <= TFS_S3_KEY_MAX;
	if (*keep && strip_len)
		memmove(s, s + strip_len, strlen(s + strip_len) + 1);
	return 0;
}

/* Decode and strip names after the whole document is read: EncodingType
 * may come after the Contents it applies to. */
static int list_finish(struct list_ctx *lc, const char *strip)
{
	struct tfs_list_page *pg = &lc->page;
	size_t strip_len = strip ? strlen(strip) : 0;
	size_t w = 0;
	bool keep;
	int rc;

	if (strip == NULL)
		strip = "";
	/* Compact in place; moved-from and dropped slots are left with a NULL
	 * key so that tfs_list_page_clear() is safe if we fail half way. */
	for (size_t i = 0; i < pg->n_entries; i++) {
		rc = list_fix_name(pg->entries[i].key, lc->url_encoded, strip, strip_len, &keep);
		if (rc)
			return rc;
		if (!keep) {
			free(pg->entries[i].key);
			pg->entries[i].key = NULL;
			pg->n_dropped++;
		} else if (w != i) {
			pg->entries[w] = pg->entries[i];
			pg->entries[i].key = NULL;
			w++;
		} else {
			w++;
		}
	}
	pg->n_entries = w;

	w = 0;
	for (size_t i = 0; i < pg->n_prefixes; i++) {
		rc = list_fix_name(pg->prefixes[i], lc->url_encoded, strip, strip_len, &keep);
		if (rc)
			return rc;
		char *p = pg->prefixes[i];
		pg->prefixes[i] = NULL;
		if (keep) {
			pg->prefixes[w++] = p;
		} else {
			free(p);
			pg->n_dropped++;
		}
	}
	pg->n_prefixes = w;

	if (lc->truncated) {
		/* Truncated without a way to go on would silently lose keys. */
		if (lc->token == NULL || lc->token[0] == '\0')
			return EIO;
		pg->next_token = lc->token;
		lc->token = NULL;
	}
	return 0;
}

int tfs_s3_xml_parse_list(const char *body, size_t len, const char *strip,
			  struct tfs_list_page *out)
{
	struct list_ctx lc;
	memset(&lc, 0, sizeof(lc));

	int rc = xp_run(&list_kind, &lc, body, len);
	if (rc == 0)
		rc = list_finish(&lc, strip);
	free(lc.cur.key);
	free(lc.token);
	if (rc) {
		tfs_list_page_clear(&lc.page);
		return rc;
	}
	*out = lc.page;
	return 0;
}

/* ---- Error ---- */

struct error_ctx {
	char *code;
	size_t code_len;
	char *msg;
	size_t msg_len;
	char *region; /* NULL: not wanted */
	size_t region_len;
};

static int error_fill(struct xp *xp, struct error_ctx *ec, enum xp_name id)
{
	const char *s = xp_text_trimmed(xp);
	size_t n = xp->text.len;
	if (id == N_CODE)
		copy_trunc(ec->code, ec->code_len, s, n);
	else if (id == N_MESSAGE)
		copy_trunc(ec->msg, ec->msg_len, s, n);
	else if (id == N_REGION && ec->region)
		copy_trunc(ec->region, ec->region_len, s, n);
	return 0;
}

static int error_start(struct xp *xp, enum xp_name id)
{
	if (xp->depth == 1)
		return id == N_ERROR ? 0 : EIO;
	if (xp->depth == 2 && (id == N_CODE || id == N_MESSAGE || id == N_REGION))
		xp_capture(xp);
	return 0;
}

static int error_end(struct xp *xp, enum xp_name id, bool captured)
{
	if (captured && xp->depth == 2)
		return error_fill(xp, xp->ctx, id);
	return 0;
}

static const struct xp_kind error_kind = { error_start, error_end };

static void clear_str(char *s, size_t len)
{
	if (s && len)
		s[0] = '\0';
}

int tfs_s3_xml_parse_error(const char *body, size_t len, char *code, size_t code_len, char *msg,
			   size_t msg_len)
{
	struct error_ctx ec = { code, code_len, msg, msg_len, NULL, 0 };
	clear_str(code, code_len);
	clear_str(msg, msg_len);
	int rc = xp_run(&error_kind, &ec, body, len);
	if (rc) {
		clear_str(code, code_len);
		clear_str(msg, msg_len);
	}
	return rc;
}

int tfs_s3_xml_parse_error_region(const char *body, size_t len, char *code, size_t code_len,
				  char *region, size_t region_len)
{
	struct error_ctx ec = { code, code_len, NULL, 0, region, region_len };
	clear_str(code, code_len);
	clear_str(region, region_len);
	int rc = xp_run(&error_kind, &ec, body, len);
	if (rc) {
		clear_str(code, code_len);
		clear_str(region, region_len);
	}
	return rc;
}

/* ---- InitiateMultipartUploadResult ---- */

struct upload_ctx {
	char *upload_id;
};

static int upload_start(struct xp *xp, enum xp_name id)
{
	if (xp->depth == 1)
		return id == N_INITIATE_MPU_RESULT ? 0 : EIO;
	if (xp->depth == 2 && id == N_UPLOAD_ID)
		xp_capture(xp);
	return 0;
}

static int upload_end(struct xp *xp, enum xp_name id, bool captured)
{
	struct upload_ctx *uc = xp->ctx;
	if (!captured || xp->depth != 2 || id != N_UPLOAD_ID || uc->upload_id)
		return 0;
	xp_text_trimmed(xp);
	uc->upload_id = xp_text_steal(xp);
	return uc->upload_id ? 0 : ENOMEM;
}

static const struct xp_kind upload_kind = { upload_start, upload_end };

int tfs_s3_xml_parse_upload_id(const char *body, size_t len, char **upload_id)
{
	struct upload_ctx uc = { NULL };
	*upload_id = NULL;
	int rc = xp_run(&upload_kind, &uc, body, len);
	if (rc == 0 && (uc.upload_id == NULL || uc.upload_id[0] == '\0'))
		rc = EIO;
	if (rc) {
		free(uc.upload_id);
		return rc;
	}
	*upload_id = uc.upload_id;
	return 0;
}

/* ---- ListMultipartUploadsResult ---- */

struct uploads_ctx {
	size_t count;
	char *key, *id;
	tfs_s3_upload_fn fn;
	void *fctx;
};

static int uploads_start(struct xp *xp, enum xp_name id)
{
	struct uploads_ctx *uc = xp->ctx;
	if (xp->depth == 1)
		return id == N_LIST_MPU_RESULT ? 0 : EIO;
	if (xp->depth == 2 && id == N_UPLOAD) {
		uc->count++;
		free(uc->key);
		free(uc->id);
		uc->key = uc->id = NULL;
	}
	if (xp->depth == 3 && uc->fn && (id == N_KEY || id == N_UPLOAD_ID))
		xp_capture(xp);
	return 0;
}

static int uploads_end(struct xp *xp, enum xp_name id, bool captured)
{
	struct uploads_ctx *uc = xp->ctx;
	if (captured && xp->depth == 3 && (id == N_KEY || id == N_UPLOAD_ID)) {
		if (id == N_UPLOAD_ID)
			xp_text_trimmed(xp);
		char *t = xp_text_steal(xp);
		if (t == NULL)
			return ENOMEM;
		char **slot = id == N_KEY ? &uc->key : &uc->id;
		free(*slot);
		*slot = t;
		return 0;
	}
	if (xp->depth == 2 && id == N_UPLOAD && uc->fn && uc->key && uc->id) {
		int rc = uc->fn(uc->fctx, uc->key, uc->id);
		free(uc->key);
		free(uc->id);
		uc->key = uc->id = NULL;
		return rc;
	}
	return 0;
}

static const struct xp_kind uploads_kind = { uploads_start, uploads_end };

int tfs_s3_xml_each_upload(const char *body, size_t len, tfs_s3_upload_fn fn, void *ctx,
			   size_t *count)
{
	struct uploads_ctx uc = { .fn = fn, .fctx = ctx };
	int rc = xp_run(&uploads_kind, &uc, body, len);
	free(uc.key);
	free(uc.id);
	if (count)
		*count = rc ? 0 : uc.count;
	return rc;
}

int tfs_s3_xml_parse_uploads(const char *body, size_t len, size_t *count)
{
	return tfs_s3_xml_each_upload(body, len, NULL, NULL, count);
}

/* ---- CompleteMultipartUploadResult / CopyObjectResult ---- */

struct etag_ctx {
	char *etag;
	bool have_etag;
	bool is_error;
	struct error_ctx err;
};

static int etag_start(struct xp *xp, enum xp_name id)
{
	struct etag_ctx *ec = xp->ctx;
	if (xp->depth == 1) {
		if (id == N_ERROR) {
			ec->is_error = true;
			return 0;
		}
		return id == N_COMPLETE_MPU_RESULT || id == N_COPY_OBJECT_RESULT ||
				       id == N_COPY_PART_RESULT
			       ? 0
			       : EIO;
	}
	if (xp->depth != 2)
		return 0;
	if (ec->is_error ? (id == N_CODE || id == N_MESSAGE) : (id == N_ETAG && !ec->have_etag))
		xp_capture(xp);
	return 0;
}

static int etag_end(struct xp *xp, enum xp_name id, bool captured)
{
	struct etag_ctx *ec = xp->ctx;
	if (!captured || xp->depth != 2)
		return 0;
	if (ec->is_error)
		return error_fill(xp, &ec->err, id);
	if (id != N_ETAG || ec->have_etag)
		return 0;
	ec->have_etag = true;
	return etag_copy(xp_text_trimmed(xp), ec->etag);
}

static const struct xp_kind etag_kind = { etag_start, etag_end };

int tfs_s3_xml_parse_etag(const char *body, size_t len, char etag[TFS_ETAG_MAX], char *code,
			  size_t code_len, char *msg, size_t msg_len)
{
	struct etag_ctx ec;
	memset(&ec, 0, sizeof(ec));
	ec.etag = etag;
	ec.err.code = code;
	ec.err.code_len = code ? code_len : 0;
	ec.err.msg = msg;
	ec.err.msg_len = msg ? msg_len : 0;
	etag[0] = '\0';
	clear_str(ec.err.code, ec.err.code_len);
	clear_str(ec.err.msg, ec.err.msg_len);

	int rc = xp_run(&etag_kind, &ec, body, len);
	if (rc == 0 && ec.is_error)
		return EIO; /* code/msg filled in */
	if (rc) {
		etag[0] = '\0';
		clear_str(ec.err.code, ec.err.code_len);
		clear_str(ec.err.msg, ec.err.msg_len);
	}
	return rc;
}

/* ---- time ---- */

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
	static const int dim[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return dim[m - 1];
}

/* Exactly n decimal digits. */
static bool take_digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return false;
		v = v * 10 + (c - '0');
	}
	*p += n;
	*out = v;
	return true;
}

/* Only trailing whitespace is left. */
static bool at_end(const char *p)
{
	while (is_xml_space(*p))
		p++;
	return *p == '\0';
}

/* " GMT" and the end of the string. */
static bool at_gmt_end(const char *p)
{
	return strncmp(p, " GMT", 4) == 0 && at_end(p + 4);
}

static bool take_char(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

/* One of `n` three-letter names (case-sensitive as RFC 7231 requires);
 * returns its index or -1. */
static int take_name3(const char **p, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strncmp(*p, names[i], 3) == 0) {
			*p += 3;
			return i;
		}
	return -1;
}

static const char *const month_names[12] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
static const char *const wday_names[7] = { "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
static const char *const wday_long[7] = { "Monday", "Tuesday",  "Wednesday", "Thursday",
					  "Friday", "Saturday", "Sunday" };

static int make_time(int y, int mo, int d, int h, int mi, int s, int64_t *out)
{
	if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 60)
		return EINVAL;
	*out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
	return 0;
}

/* "HH:MM:SS" */
static bool take_hms(const char **p, int *h, int *mi, int *s)
{
	return take_digits(p, 2, h) && take_char(p, ':') && take_digits(p, 2, mi) &&
	       take_char(p, ':') && take_digits(p, 2, s);
}

/* 2024-01-02T03:04:05[.fff]Z, or with a +hh:mm / -hh:mm offset. */
static int parse_iso8601(const char *p, int64_t *out)
{
	int y, mo, d, h, mi, s;
	if (!take_digits(&p, 4, &y) || !take_char(&p, '-') || !take_digits(&p, 2, &mo) ||
	    !take_char(&p, '-') || !take_digits(&p, 2, &d))
		return EINVAL;
	if (*p != 'T' && *p != 't')
		return EINVAL;
	p++;
	if (!take_hms(&p, &h, &mi, &s))
		return EINVAL;
	if (*p == '.' || *p == ',') {
		p++;
		if (*p < '0' || *p > '9')
			return EINVAL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	int off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1, oh, om;
		p++;
		if (!take_digits(&p, 2, &oh))
			return EINVAL;
		take_char(&p, ':');
		if (!take_digits(&p, 2, &om) || oh > 23 || om > 59)
			return EINVAL;
		off = sign * (oh * 3600 + om * 60);
	} else {
		return EINVAL; /* no zone: not an S3 timestamp */
	}
	if (!at_end(p))
		return EINVAL;
	int rc = make_time(y, mo, d, h, mi, s, out);
	if (rc == 0)
		*out -= off;
	return rc;
}

/* The three HTTP-date forms of RFC 7231 section 7.1.1.1:
 *   Tue, 02 Jan 2024 03:04:05 GMT      (IMF-fixdate)
 *   Tuesday, 02-Jan-24 03:04:05 GMT    (obsolete RFC 850)
 *   Tue Jan  2 03:04:05 2024           (obsolete asctime) */
static int parse_http_date(const char *p, int64_t *out)
{
	int y, mo, d, h, mi, s;

	if (take_name3(&p, wday_names, 7) < 0)
		return EINVAL;
	if (take_char(&p, ',')) {
		/* IMF-fixdate */
		if (!take_char(&p, ' ') || !take_digits(&p, 2, &d) || !take_char(&p, ' '))
			return EINVAL;
		if ((mo = take_name3(&p, month_names, 12)) < 0)
			return EINVAL;
		if (!take_char(&p, ' ') || !take_digits(&p, 4, &y) || !take_char(&p, ' ') ||
		    !take_hms(&p, &h, &mi, &s) || !at_gmt_end(p))
			return EINVAL;
	} else if (take_char(&p, ' ')) {
		/* asctime: day is space-padded */
		if ((mo = take_name3(&p, month_names, 12)) < 0 || !take_char(&p, ' '))
			return EINVAL;
		if (*p == ' ') {
			p++;
			if (!take_digits(&p, 1, &d))
				return EINVAL;
		} else if (!take_digits(&p, 2, &d)) {
			return EINVAL;
		}
		if (!take_char(&p, ' ') || !take_hms(&p, &h, &mi, &s) || !take_char(&p, ' ') ||
		    !take_digits(&p, 4, &y) || !at_end(p))
			return EINVAL;
	} else {
		/* RFC 850: back up to read the full day name */
		p -= 3;
		int i;
		for (i = 0; i < 7; i++) {
			size_t n = strlen(wday_long[i]);
			if (strncmp(p, wday_long[i], n) == 0) {
				p += n;
				break;
			}
		}
		int yy;
		if (i == 7 || !take_char(&p, ',') || !take_char(&p, ' ') ||
		    !take_digits(&p, 2, &d) || !take_char(&p, '-'))
			return EINVAL;
		if ((mo = take_name3(&p, month_names, 12)) < 0)
			return EINVAL;
		if (!take_char(&p, '-') || !take_digits(&p, 2, &yy) || !take_char(&p, ' ') ||
		    !take_hms(&p, &h, &mi, &s) || !at_gmt_end(p))
			return EINVAL;
		y = yy < 70 ? 2000 + yy : 1900 + yy;
	}
	return make_time(y, mo + 1, d, h, mi, s, out);
}

int tfs_s3_parse_time(const char *s, int64_t *out)
{
	if (s == NULL || out == NULL)
		return EINVAL;
	/* Tolerate surrounding whitespace (header OWS, pretty-printed XML). */
	while (is_xml_space(*s))
		s++;
	int64_t t;
	int rc = *s >= '0' && *s <= '9' ? parse_iso8601(s, &t) : parse_http_date(s, &t);
	if (rc == 0)
		*out = t;
	return rc;
}
