/* backend_value.c - the value types of backend.h that callers and
 * backends share: an object's user metadata, a listing page, the buffers
 * of a tfs_io and the state of a resumable upload.  None of it touches a
 * backend instance. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend.h"

void tfs_obj_meta_clear(struct tfs_obj_meta *m)
{
	for (size_t i = 0; i < m->n_user; i++) {
		free(m->user[i].name);
		free(m->user[i].value);
	}
	free(m->user);
	memset(m, 0, sizeof(*m));
}

static bool is_token_name(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (!isalnum(c) && c != '-' && c != '_' && c != '.')
			return false;
	}
	return true;
}

int tfs_obj_meta_set(struct tfs_obj_meta *m, const char *name, const char *value)
{
	if (!is_token_name(name))
		return EINVAL;
	for (size_t i = 0; i < m->n_user; i++) {
		if (strcasecmp(m->user[i].name, name) == 0) {
			char *v = strdup(value);
			if (v == NULL)
				return ENOMEM;
			free(m->user[i].value);
			m->user[i].value = v;
			return 0;
		}
	}
	struct tfs_meta_kv *nu = realloc(m->user, (m->n_user + 1) * sizeof(*nu));
	if (nu == NULL)
		return ENOMEM;
	m->user = nu;
	char *n = strdup(name);
	char *v = strdup(value);
	if (n == NULL || v == NULL) {
		free(n);
		free(v);
		return ENOMEM;
	}
	for (char *p = n; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	m->user[m->n_user].name = n;
	m->user[m->n_user].value = v;
	m->n_user++;
	return 0;
}

const char *tfs_obj_meta_get(const struct tfs_obj_meta *m, const char *name)
{
	for (size_t i = 0; i < m->n_user; i++)
		if (strcasecmp(m->user[i].name, name) == 0)
			return m->user[i].value;
	return NULL;
}

void tfs_list_page_clear(struct tfs_list_page *p)
{
	for (size_t i = 0; i < p->n_entries; i++)
		free(p->entries[i].key);
	free(p->entries);
	for (size_t i = 0; i < p->n_prefixes; i++)
		free(p->prefixes[i]);
	free(p->prefixes);
	free(p->next_token);
	memset(p, 0, sizeof(*p));
}

void tfs_io_iov_copy(const struct tfs_io *io, uint64_t pos, const void *data, size_t len)
{
	const char *src = data;
	int done = io->progress ? io->progress->ndone : 0;
	for (int i = 0; i < io->iovcnt && len; i++) {
		size_t seg = io->iov[i].iov_len;
		if (pos >= seg) {
			pos -= seg;
			continue;
		}
		size_t n = seg - (size_t)pos < len ? seg - (size_t)pos : len;
		if (i >= done) /* a reported buffer may be in use: never rewrite it */
			memcpy((char *)io->iov[i].iov_base + pos, src, n);
		src += n;
		len -= n;
		pos = 0;
	}
}

void tfs_io_iov_filled(const struct tfs_io *io, uint64_t filled)
{
	struct tfs_io_progress *p = io->progress;
	if (p == NULL)
		return;
	while (p->ndone < io->iovcnt && p->done_bytes + io->iov[p->ndone].iov_len <= filled) {
		p->done_bytes += io->iov[p->ndone].iov_len;
		p->done(p->ctx, p->ndone++);
	}
}

int tfs_mpu_alloc(struct tfs_mpu *st, unsigned nparts)
{
	char(*etags)[TFS_ETAG_MAX] = nparts ? calloc(nparts, sizeof(*etags)) : NULL;
	if (etags == NULL)
		return ENOMEM;
	free(st->etags);
	st->etags = etags;
	st->nparts = nparts;
	return 0;
}

void tfs_mpu_clear(struct tfs_mpu *st)
{
	if (st == NULL)
		return;
	free(st->etags);
	memset(st, 0, sizeof(*st));
}
