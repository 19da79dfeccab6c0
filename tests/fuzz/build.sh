#!/usr/bin/env bash
# tests/fuzz/build.sh [OUTDIR] - build the libFuzzer harnesses.
#
# Compiles the project's sources (lib/, backends/, cache/, vfs/, src/,
# node/, flexvolume/, all but the two main()s) with clang -fsanitize=fuzzer-no-link,
# address,undefined and -DFUZZING into OUTDIR/libtierfs-fuzz.a, then links
# each tests/fuzz/fuzz_<name>.c against it: the linker takes only the
# objects a harness needs, so a source file that does not compile right
# now (someone is editing it) only matters if a harness needs it.  No
# ./configure, no Makefile: the normal build is not touched.  OUTDIR
# defaults to build-fuzz/ at the top of the tree (ignored by git); the
# harnesses land in OUTDIR/fuzz_<name>.  Objects are rebuilt when their
# source, any project header or this script changes.
#
#   CC=clang-14 tests/fuzz/build.sh          another clang
#   FUZZ_CFLAGS=-O2 tests/fuzz/build.sh      extra flags for every file
#   FUZZ_ONLY="conf sigv4" tests/fuzz/build.sh
#
# A harness whose code under test is missing (e.g. node/ in a tree
# without the FlexVolume driver) is skipped with a note, not an error.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:-$top/build-fuzz}
CC=${CC:-clang}
harnesses=${FUZZ_ONLY:-conf s3_xml sigv4 flexvolume manifest}

command -v "$CC" >/dev/null 2>&1 || {
	echo "build.sh: $CC not found (scripts/deps.sh test installs clang)" >&2
	exit 1
}
mkdir -p "$out/obj" "$out/include"
out=$(cd "$out" && pwd)

# config.h as configure would write it, for the defines the sources use.
cat >"$out/include/config.h.tmp" <<'EOF'
/* config.h for the fuzzing build (tests/fuzz/build.sh), not from configure */
#define _GNU_SOURCE 1
#define _FILE_OFFSET_BITS 64
#define FUSE_USE_VERSION 314
#define HAVE_PTHREAD 1
#define PACKAGE "tierfs"
#define PACKAGE_NAME "tierfs"
#define PACKAGE_VERSION "0.1.0-fuzz"
#define VERSION "0.1.0-fuzz"
EOF
if cmp -s "$out/include/config.h.tmp" "$out/include/config.h"; then
	rm -f "$out/include/config.h.tmp"
else
	mv "$out/include/config.h.tmp" "$out/include/config.h"
fi

# The libraries of the normal build: configure.ac's PKG_CHECK_MODULES (so a
# new dependency needs no change here), less the test-only ones.
pkgs=$(sed -n 's/^PKG_CHECK_MODULES(\[\([A-Z_]*\)\], *\[\([A-Za-z0-9_.+-]*\).*/\1 \2/p' \
	"$top/configure.ac" | awk '$1 != "CRITERION" { print $2 }' | tr '\n' ' ')
[ -n "$pkgs" ] || pkgs="expat json-c inih libcrypto libcurl lmdb libxxhash fuse3"
# shellcheck disable=SC2086
pkg_cflags=$(pkg-config --cflags $pkgs)
# shellcheck disable=SC2086
pkg_libs="$(pkg-config --libs $pkgs) -lpthread -lm"
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=gnu11 -g -O1 -DFUZZING $SAN -I$out/include \
	-I$top/lib -I$top/backends -I$top/cache -I$top/vfs -I$top/src -I$top/node -I$top/flexvolume -I$here \
	$pkg_cflags ${FUZZ_CFLAGS:-}"

# The code each harness is about: without it the harness is skipped.
declare -A needs=(
	[conf]="src/conf.c src/conf_value.c src/conf_keys.c"
	[s3_xml]="backends/s3_xml.c"
	[sigv4]="backends/s3_sigv4.c"
	[flexvolume]="flexvolume/fv_json.c node/node_volume.c node/node_opts.c"
	[manifest]="vfs/manifest.c"
)

# ---- the project's objects, in parallel ----
stamp=$out/obj/.stamp
headers_newer=0
if [ ! -f "$stamp" ] || [ "$0" -nt "$stamp" ] || [ "$out/include/config.h" -nt "$stamp" ] ||
	[ -n "$(find "$top/lib" "$top/backends" "$top/cache" "$top/src" "$top/node" "$top/flexvolume" \
		-name '*.h' -newer "$stamp" -print -quit 2>/dev/null)" ]; then
	headers_newer=1
fi
touch "$out/obj/.stamp.new"

srcs=()
for d in lib backends cache vfs src node flexvolume; do
	for f in "$top/$d"/*.c; do
		[ -f "$f" ] || continue
		case ${f#"$top"/} in
		src/main.c | flexvolume/tierfs-flexvolume.c) continue ;;
		esac
		srcs+=("${f#"$top"/}")
	done
done

jobs=$(nproc 2>/dev/null || echo 2)
failed_srcs=()
running=0
for s in "${srcs[@]}"; do
	obj="$out/obj/$(echo "$s" | tr '/' '_').o"
	if [ $headers_newer = 1 ] || [ ! -f "$obj" ] || [ "$top/$s" -nt "$obj" ]; then
		rm -f "$obj"
		# shellcheck disable=SC2086
		(
			$CC $CFLAGS -fsanitize=fuzzer-no-link -w -c "$top/$s" -o "$obj.tmp" \
				2>"$obj.err" && mv "$obj.tmp" "$obj" && rm -f "$obj.err"
		) &
		running=$((running + 1))
		if [ $running -ge "$jobs" ]; then
			wait -n || true
			running=$((running - 1))
		fi
	fi
done
wait || true
objs=()
for s in "${srcs[@]}"; do
	obj="$out/obj/$(echo "$s" | tr '/' '_').o"
	if [ -f "$obj" ]; then
		objs+=("$obj")
	else
		failed_srcs+=("$s")
	fi
done
mv "$out/obj/.stamp.new" "$stamp"
rm -f "$out/libtierfs-fuzz.a"
ar rcs "$out/libtierfs-fuzz.a" "${objs[@]}"

# ---- the harnesses ----
built=0
status=0
for h in $harnesses; do
	missing=""
	for s in ${needs[$h]:-}; do
		[ -f "$top/$s" ] || missing="$missing $s"
	done
	if [ -n "$missing" ]; then
		echo "build.sh: skipping fuzz_$h: missing$missing" >&2
		rm -f "$out/fuzz_$h"
		continue
	fi
	# shellcheck disable=SC2086
	if ! $CC $CFLAGS -Wall -Wextra -Wshadow -Wformat=2 -Werror -fsanitize=fuzzer \
		"$here/fuzz_$h.c" "$out/libtierfs-fuzz.a" $pkg_libs -o "$out/fuzz_$h"; then
		echo "build.sh: fuzz_$h does not build" >&2
		for s in "${failed_srcs[@]}"; do
			echo "build.sh: (does not compile now: $s)" >&2
			head -n 20 "$out/obj/$(echo "$s" | tr '/' '_').o.err" 2>/dev/null | sed 's/^/    /' >&2
		done
		rm -f "$out/fuzz_$h"
		status=1
		continue
	fi
	built=$((built + 1))
done
echo "build.sh: $built harnesses in $out"
exit $status
