/* test_units.c - unit tests for lib/units.c: size, duration, percentage,
 * boolean and integer parsing, and the size/duration formatters. */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "backoff.h"
#include "units.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

static void size_ok(const char *s, uint64_t want)
{
	uint64_t v = 12345;
	int rc = tfs_parse_size(s, &v);

	cr_assert_eq(rc, 0, "tfs_parse_size(\"%s\") = %d", s, rc);
	cr_assert_eq(v, want, "tfs_parse_size(\"%s\") = %" PRIu64 ", want %" PRIu64, s, v, want);
}

static void size_bad(const char *s, int want)
{
	uint64_t v = 12345;
	int rc = tfs_parse_size(s, &v);

	cr_assert_eq(rc, want, "tfs_parse_size(\"%s\") = %d, want %d", s, rc, want);
	cr_assert_eq(v, 12345, "output changed on failure for \"%s\"", s);
}

Test(units, size_plain_and_units)
{
	size_ok("0", 0);
	size_ok("512", 512);
	size_ok("512B", 512);
	size_ok("512 b", 512);
	size_ok("1K", KIB);
	size_ok("1k", KIB);
	size_ok("1KB", KIB);
	size_ok("1kb", KIB);
	size_ok("1KiB", KIB);
	size_ok("1KIB", KIB);
	size_ok("1 KiB", KIB);
	size_ok("1\tK", KIB);
	size_ok("16M", 16 * MIB);
	size_ok("16MB", 16 * MIB);
	size_ok("16 MiB", 16 * MIB);
	size_ok("5G", 5 * GIB);
	size_ok("5gib", 5 * GIB);
	size_ok("2T", 2 * TIB);
	size_ok("2TiB", 2 * TIB);
	size_ok("007K", 7 * KIB);
}

Test(units, size_decimal)
{
	size_ok("1.5G", GIB + GIB / 2);
	size_ok("1.5 GiB", GIB + GIB / 2);
	size_ok("0.5K", 512);
	size_ok("0.25M", MIB / 4);
	size_ok("1.0M", MIB);
	/* fractions of a byte are rounded down */
	size_ok("1.5", 1);
	size_ok("0.1K", 102);
	/* more digits than a double holds are accepted */
	size_ok("1.50000000000000000000001K", 1536);
}

Test(units, size_limits)
{
	size_ok("18446744073709551615", UINT64_MAX);
	size_ok("16777215T", 16777215 * TIB);
	size_bad("18446744073709551616", ERANGE);
	size_bad("16777216T", ERANGE);
	size_bad("99999999999999999999999K", ERANGE);
	size_bad("18446744073709551615.5K", ERANGE);
	/* junk wins over overflow */
	size_bad("99999999999999999999999X", EINVAL);
}

Test(units, size_junk)
{
	const char *bad[] = {
		"",      " ",   "K",     "abc",  "-1",    "+1",    " 1", "1 ",
		"1K ",   "1Q",  "1KiBs", "1KK",  "1 K B", "1.",    ".5", "1..5",
		"1.5.5", "1e3", "0x10",  "1,5K", "1%",    "1 K\n", "1P",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		size_bad(bad[i], EINVAL);
}

Test(units, size_or_pct)
{
	uint64_t b = 7;
	double p = 7;

	cr_assert_eq(tfs_parse_size_or_pct("80%", &b, &p), 0);
	cr_assert_eq(b, 0);
	cr_assert_float_eq(p, 80.0, 1e-12);

	cr_assert_eq(tfs_parse_size_or_pct("0.5 %", &b, &p), 0);
	cr_assert_float_eq(p, 0.5, 1e-12);
	cr_assert_eq(tfs_parse_size_or_pct("100%", &b, &p), 0);
	cr_assert_float_eq(p, 100.0, 1e-12);

	cr_assert_eq(tfs_parse_size_or_pct("1G", &b, &p), 0);
	cr_assert_eq(b, GIB);
	cr_assert_float_eq(p, 0.0, 1e-12);

	b = 7;
	p = 7;
	cr_assert_eq(tfs_parse_size_or_pct("0%", &b, &p), ERANGE);
	cr_assert_eq(tfs_parse_size_or_pct("0.0%", &b, &p), ERANGE);
	cr_assert_eq(tfs_parse_size_or_pct("100.01%", &b, &p), ERANGE);
	cr_assert_eq(tfs_parse_size_or_pct("101%", &b, &p), ERANGE);
	cr_assert_eq(tfs_parse_size_or_pct("99999999999999999999999%", &b, &p), ERANGE);
	cr_assert_eq(tfs_parse_size_or_pct("%", &b, &p), EINVAL);
	cr_assert_eq(tfs_parse_size_or_pct("abc%", &b, &p), EINVAL);
	cr_assert_eq(tfs_parse_size_or_pct("-5%", &b, &p), EINVAL);
	cr_assert_eq(tfs_parse_size_or_pct("5%%", &b, &p), EINVAL);
	cr_assert_eq(tfs_parse_size_or_pct("5K%", &b, &p), EINVAL);
	cr_assert_eq(tfs_parse_size_or_pct("", &b, &p), EINVAL);
	cr_assert_eq(tfs_parse_size_or_pct("16777216T", &b, &p), ERANGE);
	cr_assert_eq(b, 7);
	cr_assert_float_eq(p, 7.0, 1e-12);
}

static void duration_ok(const char *s, uint64_t want)
{
	uint64_t v = 12345;
	int rc = tfs_parse_duration(s, &v);

	cr_assert_eq(rc, 0, "tfs_parse_duration(\"%s\") = %d", s, rc);
	cr_assert_eq(v, want, "tfs_parse_duration(\"%s\") = %" PRIu64 ", want %" PRIu64, s, v,
		     want);
}

static void duration_bad(const char *s, int want)
{
	uint64_t v = 12345;
	int rc = tfs_parse_duration(s, &v);

	cr_assert_eq(rc, want, "tfs_parse_duration(\"%s\") = %d, want %d", s, rc, want);
	cr_assert_eq(v, 12345);
}

Test(units, duration)
{
	duration_ok("0", 0);
	duration_ok("0ms", 0);
	duration_ok("10", 10000);
	duration_ok("10s", 10000);
	duration_ok("10 s", 10000);
	duration_ok("100ms", 100);
	duration_ok("100 MS", 100);
	duration_ok("1.5s", 1500);
	duration_ok("1.5", 1500);
	duration_ok("0.5ms", 0);
	duration_ok("5m", 300000);
	duration_ok("5M", 300000);
	duration_ok("2h", 7200000);
	duration_ok("1.5h", 5400000);
	duration_ok("forever", TFS_DURATION_FOREVER);
	duration_ok("Forever", TFS_DURATION_FOREVER);
	duration_ok("18446744073709551614ms", UINT64_MAX - 1);
}

Test(units, duration_bad)
{
	const char *bad[] = {
		"",     "s",   "ms",    "1d",       "1 day", "-1s", "+1s",   "1sec",
		"1msx", "1.s", "never", "forever ", " 1s",   "1s ", "1e3ms", "1:30",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		duration_bad(bad[i], EINVAL);
	duration_bad("18446744073709551615ms", ERANGE); /* reserved for forever */
	duration_bad("18446744073709551616ms", ERANGE);
	duration_bad("5124095576030432h", ERANGE);
}

Test(units, percent)
{
	double p = -1;

	cr_assert_eq(tfs_parse_percent("90", &p), 0);
	cr_assert_float_eq(p, 90.0, 1e-12);
	cr_assert_eq(tfs_parse_percent("90%", &p), 0);
	cr_assert_float_eq(p, 90.0, 1e-12);
	cr_assert_eq(tfs_parse_percent("90.5 %", &p), 0);
	cr_assert_float_eq(p, 90.5, 1e-12);
	cr_assert_eq(tfs_parse_percent("0", &p), 0);
	cr_assert_float_eq(p, 0.0, 1e-12);
	cr_assert_eq(tfs_parse_percent("100", &p), 0);

	p = -1;
	cr_assert_eq(tfs_parse_percent("100.5", &p), ERANGE);
	cr_assert_eq(tfs_parse_percent("101%", &p), ERANGE);
	cr_assert_eq(tfs_parse_percent("-1", &p), EINVAL);
	cr_assert_eq(tfs_parse_percent("90 ", &p), EINVAL);
	cr_assert_eq(tfs_parse_percent("90%%", &p), EINVAL);
	cr_assert_eq(tfs_parse_percent("ninety", &p), EINVAL);
	cr_assert_eq(tfs_parse_percent("", &p), EINVAL);
	cr_assert_float_eq(p, -1.0, 1e-12);
}

Test(units, boolean)
{
	const char *yes[] = { "true", "TRUE", "True", "yes", "YES", "on", "On", "1" };
	const char *no[] = { "false", "FALSE", "no", "No", "off", "OFF", "0" };
	const char *bad[] = { "", "2", "y", "n", "truee", "t", "enable", " true", "true ", "01" };
	bool b;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		b = false;
		cr_assert_eq(tfs_parse_bool(yes[i], &b), 0, "%s", yes[i]);
		cr_assert(b, "%s", yes[i]);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		b = true;
		cr_assert_eq(tfs_parse_bool(no[i], &b), 0, "%s", no[i]);
		cr_assert(!b, "%s", no[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = true;
		cr_assert_eq(tfs_parse_bool(bad[i], &b), EINVAL, "%s", bad[i]);
		cr_assert(b);
	}
}

Test(units, uint)
{
	uint64_t v = 7;

	cr_assert_eq(tfs_parse_uint("0", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(tfs_parse_uint("42", &v), 0);
	cr_assert_eq(v, 42);
	cr_assert_eq(tfs_parse_uint("18446744073709551615", &v), 0);
	cr_assert_eq(v, UINT64_MAX);

	v = 7;
	cr_assert_eq(tfs_parse_uint("18446744073709551616", &v), ERANGE);
	cr_assert_eq(tfs_parse_uint("1.5", &v), EINVAL);
	cr_assert_eq(tfs_parse_uint("1K", &v), EINVAL);
	cr_assert_eq(tfs_parse_uint("-1", &v), EINVAL);
	cr_assert_eq(tfs_parse_uint("+1", &v), EINVAL);
	cr_assert_eq(tfs_parse_uint(" 1", &v), EINVAL);
	cr_assert_eq(tfs_parse_uint("0x10", &v), EINVAL);
	cr_assert_eq(tfs_parse_uint("", &v), EINVAL);
	cr_assert_eq(v, 7);
}

static void human(uint64_t bytes, const char *want)
{
	char buf[TFS_UNITS_BUFLEN];

	cr_assert_eq(tfs_format_size(bytes, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, want, "tfs_format_size(%" PRIu64 ") = \"%s\"", bytes, buf);
}

Test(units, format_size_human)
{
	human(0, "0 B");
	human(1, "1 B");
	human(1023, "1023 B");
	human(1024, "1 KiB");
	human(1536, "1.5 KiB");
	human(1024 + 51, "1 KiB");
	human(1024 + 52, "1.1 KiB");
	human(16 * MIB, "16 MiB");
	human(GIB + GIB / 2, "1.5 GiB");
	human(MIB - 1, "1 MiB"); /* 1023.999 KiB rounds up a unit */
	human(10 * GIB - 1, "10 GiB");
	human(3 * TIB + TIB / 10, "3.1 TiB");
	human(UINT64_MAX, "16 EiB");
}

Test(units, format_exact)
{
	char buf[TFS_UNITS_BUFLEN];
	const struct {
		uint64_t v;
		const char *s;
	} sizes[] = {
		{ 0, "0" }, { 1000, "1000" }, { 1024, "1K" }, { 1536, "1536" },
		{ MIB + MIB / 2, "1536K" }, { 16 * MIB, "16M" }, { 5 * GIB, "5G" },
		{ 2 * TIB, "2T" }, { 2048 * TIB, "2048T" }, { UINT64_MAX, "18446744073709551615" },
	}, durations[] = {
		{ 0, "0s" }, { 1, "1ms" }, { 1500, "1500ms" }, { 10000, "10s" },
		{ 300000, "5m" }, { 5400000, "90m" }, { 7200000, "2h" },
		{ TFS_DURATION_FOREVER, "forever" }, { UINT64_MAX - 1, "18446744073709551614ms" },
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t back = 1;

		cr_assert_eq(tfs_format_size_exact(sizes[i].v, buf, sizeof(buf)), 0);
		cr_assert_str_eq(buf, sizes[i].s);
		cr_assert_eq(tfs_parse_size(buf, &back), 0);
		cr_assert_eq(back, sizes[i].v, "round trip of %s", buf);
	}
	for (size_t i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
		uint64_t back = 1;

		cr_assert_eq(tfs_format_duration(durations[i].v, buf, sizeof(buf)), 0);
		cr_assert_str_eq(buf, durations[i].s);
		cr_assert_eq(tfs_parse_duration(buf, &back), 0);
		cr_assert_eq(back, durations[i].v, "round trip of %s", buf);
	}
}

Test(units, format_small_buffer)
{
	char buf[4];

	cr_assert_eq(tfs_format_size(GIB + GIB / 2, buf, sizeof(buf)), ERANGE);
	cr_assert_str_eq(buf, "1.5");
	cr_assert_eq(tfs_format_size_exact(16 * MIB, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "16M");
	cr_assert_eq(tfs_format_size_exact(1000, buf, sizeof(buf)), ERANGE);
	cr_assert_eq(tfs_format_duration(TFS_DURATION_FOREVER, buf, sizeof(buf)), ERANGE);
	cr_assert_eq(tfs_format_duration(1, buf, 0), ERANGE);
}

/* lib/backoff.c: doubling from the base, capped, jittered into [cap/2, cap]. */
Test(backoff, doubles_caps_and_jitters)
{
	for (int k = 0; k < 200; k++) {
		uint64_t d0 = tfs_backoff_ms(100, 1000, 0);
		cr_assert(d0 >= 50 && d0 <= 100, "first retry %" PRIu64, d0);
		uint64_t d2 = tfs_backoff_ms(100, 1000, 2);
		cr_assert(d2 >= 200 && d2 <= 400, "third retry %" PRIu64, d2);
		uint64_t d9 = tfs_backoff_ms(100, 1000, 9);
		cr_assert(d9 >= 500 && d9 <= 1000, "capped %" PRIu64, d9);
		cr_assert(tfs_backoff_ms(100, 1000, 4000000000u) <= 1000, "no overflow");
	}
	cr_assert_eq(tfs_backoff_ms(0, 1000, 3), 0);
}
