/* obj.c - an object version's identity (its key's SHA-256) and its
 * division into blocks (layer.h). */
#include "config.h"

#include "layer.h"

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

void tfs_obj_init(struct tfs_obj *obj, const char *key, const char *etag, uint64_t size)
{
	unsigned int len = 0;
	obj->key = key;
	snprintf(obj->etag, sizeof(obj->etag), "%s", etag ? etag : "");
	obj->size = size;
	EVP_Digest(key, strlen(key), obj->id, &len, EVP_sha256(), NULL);
}

uint64_t tfs_obj_blocks(const struct tfs_obj *obj, uint64_t bs)
{
	return (obj->size + bs - 1) / bs;
}

size_t tfs_obj_block_len(const struct tfs_obj *obj, uint64_t idx, uint64_t bs)
{
	uint64_t off = idx * bs;
	if (off >= obj->size)
		return 0;
	return (size_t)(obj->size - off < bs ? obj->size - off : bs);
}
