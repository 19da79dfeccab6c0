/* backoff.c - see backoff.h. */
#include "config.h"

#include "backoff.h"

#include <pthread.h>
#include <sys/random.h>
#include <time.h>

uint64_t tfs_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned n)
{
	uint64_t cap = base_ms;
	for (unsigned i = 0; i < n && cap < max_ms; i++)
		cap *= 2;
	if (cap > max_ms)
		cap = max_ms;
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)time(NULL) ^ (uint32_t)pthread_self();
	return cap / 2 + (cap ? r % (cap / 2 + 1) : 0);
}
