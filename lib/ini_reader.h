/* ini_reader.h - the line reader that both INI files hand to inih's
 * ini_parse_stream(): tierfs's configuration (src/conf.c) and the
 * Kubernetes drivers' node config (node/node_conf.c).  The caller reads
 * the whole file into memory and keeps its own handler; this reader walks
 * the text one line per call, so that errors name the right line.
 *
 * Reading lines here instead of with ini_parse() fixes two traps of
 * libinih as Debian builds it (INI_ALLOW_MULTILINE, 200-byte
 * INI_MAX_LINE): an indented line would continue the previous value, and
 * a long line would be split in two (shifting every later line number).
 * So each line has its trailing CR and its leading blanks dropped
 * (indentation is harmless); a comment line (';' or '#' first) is handed
 * on empty, so a long comment is no error; a line that does not fit
 * inih's buffer even without an inline comment (" ;...", which inih
 * drops anyway) is an error, as is a NUL byte.
 */
#ifndef TFS_INI_READER_H
#define TFS_INI_READER_H

#include <stddef.h>

struct tfs_ini_reader {
	const char *data; /* the file's text; not owned */
	size_t len;
	size_t pos;
	/* Lines handed to inih so far: the line inih works on, and the one
	 * the caller's handler reports.  inih's return value (the first line
	 * it could not parse) counts lines the same way. */
	unsigned lineno;
	/* The first line found wrong, by the reader itself or by the caller
	 * (its handler sets it); reading stops there.  0: none. */
	unsigned err_line;
	/* The reader's own reason for err_line ("NUL byte in line", "line
	 * too long (more than N characters)"); "" when the caller set it. */
	char err[64];
};

/* Start reading `len` bytes of `data` (which must outlive the reader).
 * Cannot fail. */
void tfs_ini_reader_init(struct tfs_ini_reader *r, const char *data, size_t len);

/* inih's reader (ini_reader type): `stream` is a struct tfs_ini_reader.
 * Copies the next line into str (num bytes) and returns str; returns NULL
 * at the end of the text, once err_line is set, or on a line it refuses
 * (then err_line and err say why).  Not thread safe on one reader. */
char *tfs_ini_read_line(char *str, int num, void *stream);

#endif
