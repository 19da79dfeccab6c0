/* units.h - value syntax shared by the configuration and the messages:
 * sizes, durations, percentages, booleans, and their formatters.
 *
 * Grammar (no surrounding whitespace; callers trim):
 *
 *   number   = DIGITS [ "." DIGITS ]          (no sign, no exponent, no hex;
 *                                             "." is always the decimal point,
 *                                             whatever the locale)
 *   size     = number [ blanks ] [ unit ]     unit, case-insensitive:
 *              B; K, KB, KiB; M, MB, MiB; G, GB, GiB; T, TB, TiB.
 *              All units are binary (K = 1024); a bare number is bytes.
 *              Fractions of a byte are rounded down ("1.5" = 1 byte).
 *   percent  = number [ blanks ] [ "%" ]      0 <= N <= 100
 *   size_or_pct = size | number [ blanks ] "%"    the % form needs 0 < N <= 100
 *   duration = number [ blanks ] [ unit ] | "forever"
 *              unit, case-insensitive: ms, s, m (minutes), h; a bare number
 *              is seconds.  Stored as milliseconds, fractions of a
 *              millisecond rounded down.  "forever" is TFS_DURATION_FOREVER.
 *   bool     = true/false, yes/no, on/off, 1/0 (case-insensitive)
 *   uint     = DIGITS
 *
 * Every parser returns 0 and sets its outputs, EINVAL for text that does
 * not match the grammar, or ERANGE for a well-formed value that does not
 * fit (or, for percentages, lies outside the range above).  On failure the
 * outputs are left unchanged.  None of them allocates.
 *
 * The formatters write a NUL-terminated string into the caller's buffer and
 * return 0, or ERANGE when it does not fit (the buffer then holds a
 * truncated string, or "" when len is 0).  TFS_UNITS_BUFLEN is always
 * enough.  All functions are thread safe (no shared state).
 */
#ifndef TFS_UNITS_H
#define TFS_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The value of the duration "forever"; no finite duration parses to it. */
#define TFS_DURATION_FOREVER UINT64_MAX

/* A buffer size that fits the output of every formatter below. */
#define TFS_UNITS_BUFLEN 32

/* Parse a size into bytes.  ERANGE when it exceeds UINT64_MAX bytes. */
int tfs_parse_size(const char *s, uint64_t *bytes);

/* Parse a size or a relative size "N%".  For a size: *bytes is set and
 * *pct is 0.  For "N%": *pct is set (0 < N <= 100, else ERANGE) and
 * *bytes is 0. */
int tfs_parse_size_or_pct(const char *s, uint64_t *bytes, double *pct);

/* Parse a duration into milliseconds ("forever": TFS_DURATION_FOREVER).
 * ERANGE when a finite duration reaches UINT64_MAX milliseconds. */
int tfs_parse_duration(const char *s, uint64_t *ms);

/* Parse a percentage "N" or "N%" (0 <= N <= 100, else ERANGE). */
int tfs_parse_percent(const char *s, double *pct);

/* Parse a boolean. */
int tfs_parse_bool(const char *s, bool *out);

/* Parse an unsigned decimal integer.  ERANGE above UINT64_MAX. */
int tfs_parse_uint(const char *s, uint64_t *out);

/* Human form for messages and statistics: "512 B", "16 MiB", "1.5 GiB"
 * (one decimal, dropped when it is 0; the value is rounded, so this is not
 * meant to be parsed back). */
int tfs_format_size(uint64_t bytes, char *buf, size_t len);

/* Exact form in the configuration syntax, with the largest unit that
 * divides the value: "0", "1000", "1536K", "16M", "5G".
 * tfs_parse_size() gives back the same value. */
int tfs_format_size_exact(uint64_t bytes, char *buf, size_t len);

/* Exact form in the configuration syntax: "0s", "1500ms", "10s", "5m",
 * "2h", "forever".  tfs_parse_duration() gives back the same value. */
int tfs_format_duration(uint64_t ms, char *buf, size_t len);

#endif
