/* hash.h - FNV-1a, the 64-bit hash of names for in-memory tables (not for
 * anything an attacker could aim collisions at to cost more than a
 * slower lookup). */
#ifndef TFS_HASH_H
#define TFS_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TFS_FNV1A_INIT 1469598103934665603ull

/* Fold one byte into h.  Cannot fail. */
static inline uint64_t tfs_fnv1a_byte(uint64_t h, unsigned char c)
{
	return (h ^ c) * 1099511628211ull;
}

/* Fold the string s (up to its NUL) into h.  Cannot fail. */
static inline uint64_t tfs_fnv1a_str(uint64_t h, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = tfs_fnv1a_byte(h, *p);
	return h;
}

/* Fold the n bytes at p into h.  Cannot fail. */
static inline uint64_t tfs_fnv1a_mem(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = tfs_fnv1a_byte(h, ((const unsigned char *)p)[i]);
	return h;
}

#endif
