#!/usr/bin/env bash
# check_layers.sh - fail when the source tree breaks the layering rules.
#
#   1. Layers go one way: lib -> backends -> cache -> vfs -> src -> node ->
#      flexvolume, csi.  A file may include headers of its own layer and of
#      layers below it, never of a layer above.  flexvolume and csi are
#      siblings, two front ends over node: neither includes the other.
#      The include path holds every directory, so the compiler does not
#      catch an upward include; this script does.
#   2. vfs/, the file core, never includes libfuse's headers (fuse*.h):
#      only src/'s FUSE adapter speaks to libfuse.
#   3. A header says what the code does now: no comment in a header
#      promises work ("soon", "future", "milestone", "TODO", "FIXME",
#      "XXX").  "as soon as" describes an order of events and is allowed.
#   4. docs/architecture.md's file map matches the tree: it names every
#      source file of the layers, and every header that has no source
#      file of its own name (x.h goes with x.c).
#
# Usage: scripts/check_layers.sh [TOPDIR]   (default: the tree it lives in)
# Prints one line per violation, then "layers: N violations"; exits 1 if
# there is any, 0 otherwise.
set -euo pipefail
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top"

layers=(lib backends cache vfs src node flexvolume csi)
declare -A rank where
for i in "${!layers[@]}"; do
	rank[${layers[$i]}]=$i
done
# The two drivers sit side by side on node/: one rank, so neither may
# include the other (the check below refuses a sibling's header).
rank[csi]=${rank[flexvolume]}
# Which layer each project header lives in.  Two headers of one name in
# different layers would make the check ambiguous, so that is an error too.
bad=0
for d in "${layers[@]}"; do
	for h in "$d"/*.h; do
		[ -e "$h" ] || continue
		b=${h##*/}
		if [ -n "${where[$b]:-}" ]; then
			echo "$h: header name also used in ${where[$b]}/"
			bad=$((bad + 1))
		fi
		where[$b]=$d
	done
done

for d in "${layers[@]}"; do
	for f in "$d"/*.c "$d"/*.h; do
		[ -e "$f" ] || continue
		while IFS=: read -r line inc; do
			inc=${inc#*\"}
			inc=${inc%%\"*}
			hd=${where[${inc##*/}]:-}
			[ -n "$hd" ] || continue # a system or generated header (config.h)
			if [ "${rank[$hd]}" -gt "${rank[$d]}" ]; then
				echo "$f:$line: includes $hd/${inc##*/}, a layer above $d/"
				bad=$((bad + 1))
			elif [ "$hd" != "$d" ] && [ "${rank[$hd]}" -eq "${rank[$d]}" ]; then
				echo "$f:$line: includes $hd/${inc##*/}, a sibling of $d/"
				bad=$((bad + 1))
			fi
		done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
	done
done

for f in vfs/*.c vfs/*.h; do
	[ -e "$f" ] || continue
	while IFS=: read -r line inc; do
		echo "$f:$line: includes libfuse ($inc): vfs/ never speaks to libfuse"
		bad=$((bad + 1))
	done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](fuse|linux/fuse)[^>"]*[>"]' "$f" || true)
done

promise='\b(TODO|FIXME|XXX|milestone|future|soon)\b'
for d in "${layers[@]}"; do
	for h in "$d"/*.h; do
		[ -e "$h" ] || continue
		while IFS= read -r hit; do
			echo "$h:${hit%%:*}: a header promises work: ${hit#*:}"
			bad=$((bad + 1))
		done < <(sed -E 's/as soon as//g' "$h" | grep -nEi "$promise" || true)
	done
done

for d in "${layers[@]}"; do
	for f in "$d"/*.c "$d"/*.h; do
		[ -e "$f" ] || continue
		case $f in *.h) [ -e "${f%.h}.c" ] && continue ;; esac
		if ! grep -qF "${f##*/}" docs/architecture.md; then
			echo "$f: not named in docs/architecture.md's file map"
			bad=$((bad + 1))
		fi
	done
done

echo "layers: $bad violations"
[ "$bad" -eq 0 ]
