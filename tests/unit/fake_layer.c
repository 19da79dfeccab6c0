/* fake_layer.c - a deterministic inner layer for cache unit tests. */
#include "config.h"

#include "fake_layer.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash.h"

unsigned char fake_byte(const char *key, const char *etag, uint64_t off)
{
	uint64_t h = tfs_fnv1a_str(tfs_fnv1a_str(TFS_FNV1A_INIT, key), etag);
	h ^= off * 0x9E3779B97F4A7C15ull;
	h ^= h >> 31;
	return (unsigned char)(h * 0xBF58476D1CE4E5B9ull >> 56);
}

void fake_fill(const char *key, const char *etag, uint64_t off, void *buf, size_t len)
{
	unsigned char *p = buf;
	for (size_t i = 0; i < len; i++)
		p[i] = fake_byte(key, etag, off + i);
}

static void pause_1ms(void)
{
	struct timespec ts = { 0, 1000000L };
	nanosleep(&ts, NULL);
}

static int fake_read(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t idx, void *buf)
{
	struct fake_layer *f = l->priv;
	atomic_fetch_add(&f->calls, 1);
	int now = atomic_fetch_add(&f->in_flight, 1) + 1;
	int max = atomic_load(&f->max_in_flight);
	while (now > max && !atomic_compare_exchange_weak(&f->max_in_flight, &max, now))
		;
	int d = atomic_load(&f->delay_ms);
	if (d) {
		struct timespec ts = { d / 1000, (d % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	const char *hold = atomic_load(&f->hold_key);
	if (hold && strcmp(hold, obj->key) == 0) {
		atomic_store(&f->held, 1);
		while (!atomic_load(&f->release))
			pause_1ms();
	}
	int rc = atomic_load(&f->fail_with);
	if (rc == 0)
		fake_fill(obj->key, obj->etag, idx * l->block_size, buf,
			  tfs_obj_block_len(obj, idx, l->block_size));
	atomic_fetch_sub(&f->in_flight, 1);
	return rc;
}

static int fake_read_blocks(struct tfs_layer *l, const struct tfs_obj *obj, uint64_t first,
			    unsigned n, void *const bufs[], struct tfs_io_progress *progress)
{
	struct fake_layer *f = l->priv;
	int fail = atomic_load(&f->fail_with);
	unsigned good = fail ? (unsigned)atomic_load(&f->fail_after) : n;
	atomic_fetch_add(&f->multi_calls, 1);
	for (unsigned i = 0; i < n; i++) {
		size_t len = tfs_obj_block_len(obj, first + i, l->block_size);
		fake_fill(obj->key, obj->etag, (first + i) * l->block_size, bufs[i], len);
		if (i < good)
			tfs_layer_block_done(progress, i, len);
		while (i == 0 && atomic_load(&f->gate)) {
			atomic_store(&f->at_gate, 1);
			pause_1ms();
		}
		atomic_store(&f->at_gate, 0);
	}
	return fail;
}

static void fake_invalidate(struct tfs_layer *l, const uint8_t id[TFS_OBJ_ID_LEN])
{
	(void)id;
	struct fake_layer *f = l->priv;
	atomic_fetch_add(&f->invalidations, 1);
}

static void fake_stats(struct tfs_layer *l, struct json_object *out)
{
	struct fake_layer *f = l->priv;
	json_object_object_add(out, "fake", json_object_new_int(atomic_load(&f->calls)));
}

static void fake_destroy(struct tfs_layer *l)
{
	free(l);
}

static const struct tfs_layer_ops fake_ops = {
	.name = "fake",
	.read_block = fake_read,
	.read_blocks = fake_read_blocks,
	.invalidate = fake_invalidate,
	.stats = fake_stats,
	.destroy = fake_destroy,
};

struct tfs_layer *fake_layer_create(struct fake_layer *f, uint64_t block_size)
{
	struct tfs_layer *l = calloc(1, sizeof(*l));
	l->ops = &fake_ops;
	l->priv = f;
	l->block_size = block_size;
	return l;
}
