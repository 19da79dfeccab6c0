#!/usr/bin/env bash
# check_format.sh - fail when a C file is not formatted as .clang-format says.
#
#   scripts/check_format.sh          check every C file of the tree
#   scripts/check_format.sh --fix    format them in place
#
# The files: lib/, backends/, cache/, src/, node/, flexvolume/ and tests/ (*.c,
# *.h), as git tracks them.  Prints each file that differs, with the first
# lines of the difference, then "format: N files differ"; exits 1 if any.
# Needs clang-format (Debian's clang-format 14; scripts/deps.sh test).
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = --fix ] && fix=1
if ! command -v clang-format >/dev/null 2>&1; then
	echo "format: clang-format is not installed (scripts/deps.sh test)"
	exit 1
fi
bad=0
while IFS= read -r f; do
	if [ $fix = 1 ]; then
		clang-format -i "$f"
		continue
	fi
	if ! out=$(clang-format "$f" | diff -u "$f" - 2>&1); then
		echo "$f: not formatted (scripts/check_format.sh --fix)"
		head -n 12 <<<"$out" | sed 's/^/    /'
		bad=$((bad + 1))
	fi
done < <(git ls-files -- 'lib/*.[ch]' 'backends/*.[ch]' 'cache/*.[ch]' 'vfs/*.[ch]' 'src/*.[ch]' \
	'node/*.[ch]' 'flexvolume/*.[ch]' 'tests/*.[ch]')
[ $fix = 1 ] && exit 0
echo "format: $bad files differ"
[ "$bad" -eq 0 ]
