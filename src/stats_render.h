/* stats_render.h - a generic human-readable rendering of a JSON object, for
 * `tierfs stats` (and any later command that prints a daemon's result).
 *
 * It knows nothing of the layout of the statistics, which grows:
 *
 *   - Members are printed in their order in the object, one per line, as
 *     "key: value", the values of one object aligned.
 *   - A nested object, or an array that is not shown inline, becomes
 *     "key:" followed by its members indented by two spaces.
 *   - Numbers whose key ends in "_bytes" (and the elements of an array so
 *     named) are shown with binary units by tfs_format_size() ("1.5 GiB");
 *     other integers in decimal, other numbers with "%g".  Booleans are
 *     "true"/"false", null is "-", strings are printed without quotes
 *     ("" for the empty string), control characters replaced by '?'.
 *   - Empty objects and arrays are "-"; an array of scalars is inline,
 *     its elements separated by ", ".
 *   - An array of objects whose members are all scalars becomes a table:
 *     one column per key (in order of first appearance), a header line,
 *     "-" for a missing cell, columns separated by two spaces, numeric
 *     columns right-aligned.
 *   - Any other array is a list whose elements are named "[0]", "[1]"...
 *
 * Example: {"ram":{"used_bytes":1536,"hits":7},"tiers":["ram","ssd"]}
 *
 *   ram:
 *     used_bytes: 1.5 KiB
 *     hits:       7
 *   tiers: ram, ssd
 */
#ifndef TFS_STATS_RENDER_H
#define TFS_STATS_RENDER_H

struct json_object;
struct tfs_dbuf;

/* Append the rendering of the object `obj` to `out` (each line ends with
 * "\n"; an empty object appends nothing).  Returns 0; EINVAL when `obj` is
 * not an object; ENOMEM or EOVERFLOW from the buffer (`out` then holds a
 * partial rendering).  Thread safe; does not modify `obj`. */
int tfs_stats_render(struct json_object *obj, struct tfs_dbuf *out);

#endif
