/* near_fixture.c - two local stores and a near composition for the unit
 * tests of the near backend (near_fixture.h). */
#include "config.h"

#include "near_fixture.h"

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local.h"
#include "near_key.h"

char base[64], near_dir[128], far_dir[128];
struct tfs_backend *be;
struct tfs_log tlog;

const struct tfs_near_config near_test_cfg = {
	.copiers = 2,
	.copy_budget = 4 << 20,
	.breaker_errors = 3,
	.breaker_ms = 60000,
	.source = { "http://far.test:80", "far-bucket", "" },
	.key = NEAR_TEST_KEY,
	.check_ttl_ms = UINT64_MAX,
};

void near_setup(void)
{
	tfs_log_init_stderr(&tlog, TFS_LOG_ERROR);
	snprintf(base, sizeof(base), "/tmp/test_near.XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(near_dir, sizeof(near_dir), "%s/near", base);
	snprintf(far_dir, sizeof(far_dir), "%s/far", base);
	cr_assert_eq(mkdir(near_dir, 0755), 0);
	cr_assert_eq(mkdir(far_dir, 0755), 0);
}

void near_teardown(void)
{
	tfs_backend_destroy(be);
	be = NULL;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

struct tfs_backend *local_at(const char *dir)
{
	struct tfs_local_config lc = { .root = (char *)dir };
	struct tfs_backend *b = NULL;
	cr_assert_eq(tfs_local_create(&lc, &tlog, &b), 0);
	return b;
}

uint64_t stat_of(const char *name)
{
	struct json_object *o = tfs_backend_stats_json(be), *near, *v;
	cr_assert_not_null(o);
	cr_assert(json_object_object_get_ex(o, "near", &near));
	uint64_t r = json_object_object_get_ex(near, name, &v) ? json_object_get_uint64(v) : 0;
	json_object_put(o);
	return r;
}

void wait_for(const char *name, uint64_t want)
{
	for (int i = 0; i < 500 && stat_of(name) < want; i++)
		usleep(10000);
	cr_assert_geq(stat_of(name), want, "%s stayed at %lu", name, (unsigned long)stat_of(name));
}

void copy_name(const char *key, const char *etag, char *buf, size_t cap)
{
	uint8_t secret[TFS_NEAR_SECRET_LEN];
	tfs_near_secret_from_text(NEAR_TEST_KEY, strlen(NEAR_TEST_KEY), secret);
	cr_assert_eq(tfs_near_copy_name(secret, &near_test_cfg.source, key, etag, buf, cap), 0);
}
