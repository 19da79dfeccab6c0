/* near_fixture.h - what the unit tests of the near backend (test_near.c,
 * test_near_verify.c) share: two local stores, near and far, in a
 * temporary directory made afresh for each test, the composition under
 * test, its counters and the names of its copies.  Every helper asserts
 * (Criterion) instead of returning an error. */
#ifndef TFS_NEAR_FIXTURE_H
#define TFS_NEAR_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "log.h"
#include "near.h"

/* The test's directory and the two stores' roots under it. */
extern char base[64], near_dir[128], far_dir[128];
/* The composition under test (the test makes it; near_teardown() destroys
 * it), and the log every backend of the test writes to (errors only). */
extern struct tfs_backend *be;
extern struct tfs_log tlog;

/* near.key of every composition: copies are named under it. */
#define NEAR_TEST_KEY "unit-test-near-secret"
/* The configuration the tests start from: two copiers, a 4 MiB copy
 * budget, a breaker of 3 errors for 60 s, far as http://far.test:80
 * far-bucket, NEAR_TEST_KEY, and a far check that never expires. */
extern const struct tfs_near_config near_test_cfg;

/* Criterion's .init and .fini: make base, near_dir and far_dir; destroy be
 * and remove base. */
void near_setup(void);
void near_teardown(void);

/* A local backend with its root at `dir`. */
struct tfs_backend *local_at(const char *dir);
/* The counter `name` of be's "near" stats (0 when absent). */
uint64_t stat_of(const char *name);
/* Poll stat_of(name) (10 ms, 5 s at most) until it reaches `want`. */
void wait_for(const char *name, uint64_t want);
/* The name in near of the copy of version `etag` of `key`, under
 * near_test_cfg's key and source. */
void copy_name(const char *key, const char *etag, char *buf, size_t cap);

#endif
