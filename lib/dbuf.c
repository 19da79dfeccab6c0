/* dbuf.c - growable byte buffer with a maximum size. */
#include "config.h"

#include "dbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tfs_dbuf_init(struct tfs_dbuf *d, size_t max)
{
	d->buf = NULL;
	d->len = 0;
	d->cap = 0;
	d->max = max;
}

void tfs_dbuf_free(struct tfs_dbuf *d)
{
	free(d->buf);
	d->buf = NULL;
	d->len = 0;
	d->cap = 0;
}

void tfs_dbuf_reset(struct tfs_dbuf *d)
{
	d->len = 0;
	if (d->buf)
		d->buf[0] = '\0';
}

static int reserve(struct tfs_dbuf *d, size_t extra)
{
	if (extra > d->max || d->len > d->max - extra)
		return EOVERFLOW;
	size_t need = d->len + extra + 1;
	if (need <= d->cap)
		return 0;
	size_t cap = d->cap ? d->cap : 64;
	while (cap < need)
		cap *= 2;
	char *nb = realloc(d->buf, cap);
	if (nb == NULL)
		return ENOMEM;
	d->buf = nb;
	d->cap = cap;
	return 0;
}

int tfs_dbuf_add(struct tfs_dbuf *d, const void *mem, size_t len)
{
	int rc = reserve(d, len);
	if (rc)
		return rc;
	if (len)
		memcpy(d->buf + d->len, mem, len);
	d->len += len;
	d->buf[d->len] = '\0';
	return 0;
}

int tfs_dbuf_adds(struct tfs_dbuf *d, const char *s)
{
	return tfs_dbuf_add(d, s, strlen(s));
}

int tfs_dbuf_addc(struct tfs_dbuf *d, char c)
{
	return tfs_dbuf_add(d, &c, 1);
}

int tfs_dbuf_addf(struct tfs_dbuf *d, const char *fmt, ...)
{
	va_list ap;
	char small[256];

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return EINVAL;
	if ((size_t)n < sizeof(small))
		return tfs_dbuf_add(d, small, (size_t)n);

	int rc = reserve(d, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(d->buf + d->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	d->len += (size_t)n;
	return 0;
}

const char *tfs_dbuf_str(const struct tfs_dbuf *d)
{
	return d->buf ? d->buf : "";
}

size_t tfs_dbuf_len(const struct tfs_dbuf *d)
{
	return d->len;
}

char *tfs_dbuf_steal(struct tfs_dbuf *d)
{
	char *s = d->buf;
	if (s == NULL)
		s = strdup("");
	d->buf = NULL;
	d->len = 0;
	d->cap = 0;
	return s;
}
