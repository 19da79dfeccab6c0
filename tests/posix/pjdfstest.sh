#!/usr/bin/env bash
# pjdfstest.sh - run the external POSIX suite pjdfstest against tierfs.
#
#   tests/posix/pjdfstest.sh PJDFSTEST_DIR [--backend moto|rgw|local|disk]
#       [--tierfs PATH] [--dirs "chmod chown ..."] [--out DIR] [--timeout S]
#       [--trusted]
#
# PJDFSTEST_DIR is a built checkout of github.com/pjd/pjdfstest (outside
# this tree; docs/testing.md says how).  --backend (default moto): moto or
# rgw start a throwaway S3 server on 127.0.0.1 (tests/harness/), local uses
# a fresh directory as the bucket; tierfs (default build/tierfs) is mounted
# with -o allow_other on a fresh cache (with --trusted, [mount] trusted =
# true: setuid/setgid bits kept).  disk runs the suite on a plain
# directory of the local disk ($TMPDIR), the baseline.  Each .t file of
# tests/<dir> runs with the mount as its cwd (at most --timeout seconds,
# default 300); its TAP output is kept in OUT/tap/, every failing assertion
# in OUT/failures.txt, the table in OUT/summary.txt (OUT defaults to
# $TMPDIR/pjdfstest-BACKEND[-trusted]).  Prints per directory the .t files passed,
# failed and skipped (the suite's quick_exit for what the OS or file system
# does not have) and the assertions ok out of planned, then the total and
# the total without link/.  Needs root (pjdfstest switches users).  Exits 0
# once the suite has run, whatever it found; 1 if the setup failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
tmp=${TMPDIR:-/tmp}

usage() {
	sed -n '4,6p' "$0" | sed 's/^# *//' >&2
	exit 2
}
[ $# -ge 1 ] || usage
pjd=$(cd "$1" && pwd) || usage
shift
backend=moto
tierfs=$top/build/tierfs
dirs=
out=
timeout_s=300
trusted=false
while [ $# -gt 0 ]; do
	case $1 in
	--backend) backend=${2:?}; shift 2 ;;
	--tierfs) tierfs=${2:?}; shift 2 ;;
	--dirs) dirs=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--timeout) timeout_s=${2:?}; shift 2 ;;
	--trusted) trusted=true; shift ;;
	*) usage ;;
	esac
done
case $backend in moto | rgw | local | disk) ;; *) usage ;; esac
[ -x "$pjd/pjdfstest" ] || { echo "pjdfstest.sh: $pjd/pjdfstest not built (make pjdfstest)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "pjdfstest.sh: pjdfstest needs root" >&2; exit 1; }
[ -n "$dirs" ] || dirs=$(cd "$pjd/tests" && for d in */; do printf '%s ' "${d%/}"; done)
[ "$trusted" = false ] || backend_tag=-trusted
out=${out:-$tmp/pjdfstest-$backend${backend_tag:-}}
# only a directory of an earlier run is replaced
if [ -e "$out" ] && [ ! -f "$out/summary.txt" ]; then
	echo "pjdfstest.sh: $out exists and is not the output of an earlier run" >&2
	exit 1
fi
rm -rf "$out"
mkdir -p "$out/tap"
unset AWS_CA_BUNDLE || true

work=$(mktemp -d "$tmp/tierfs-pjd-XXXXXX")
mnt=$work/mnt
srv=
child=
cleanup() {
	cd /
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null || true # timeout passes it on to the test
		wait "$child" 2>/dev/null || true
	fi
	if mountpoint -q "$mnt" 2>/dev/null; then
		"$tierfs" umount "$mnt" >/dev/null 2>&1 || fusermount3 -uz "$mnt" || true
	fi
	[ -f "$work/tierfs.log" ] && cp "$work/tierfs.log" "$out/" 2>/dev/null
	[ -z "$srv" ] || "$top/tests/harness/$backend.sh" stop "$srv" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$mnt"
if [ "$backend" != disk ]; then
	[ -x "$tierfs" ] || { echo "pjdfstest.sh: no tierfs at $tierfs" >&2; exit 1; }
	endpoint=
	case $backend in
	local)
		source=$work/bucket
		mkdir -p "$source"
		;;
	*)
		srv=$work/srv
		"$top/tests/harness/$backend.sh" start "$srv"
		# shellcheck disable=SC1091
		. "$srv/env"
		source=s3://$TFS_TEST_BUCKET/pjd
		endpoint="endpoint = $TFS_S3_ENDPOINT"
		;;
	esac
	# The configuration of tests/integration/test_mount.py's mounts.
	cat >"$work/tierfs.conf" <<EOF
[ram]
size = 64M
[ssd]
dir = $work/cache
size = 1G
[cache]
block_size = 1M
metadata_ttl = forever
[log]
level = info
file = $work/tierfs.log
[mount]
trusted = $trusted
[backend]
retries = 2
connect_timeout = 1s
$endpoint
EOF
	"$tierfs" mount -c "$work/tierfs.conf" -o allow_other "$source" "$mnt"
	for _ in $(seq 100); do
		mountpoint -q "$mnt" && break
		sleep 0.1
	done
	mountpoint -q "$mnt" || { echo "pjdfstest.sh: tierfs did not mount" >&2; exit 1; }
fi
fstype=$(df -PT "$mnt" | awk 'NR == 2 { print $2 }')
rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')
[ "$trusted" = false ] || fstype="$fstype, trusted"
echo "pjdfstest on $backend ($fstype), tierfs $rev, $(date -u +%FT%TZ)" | tee "$out/summary.txt"

# tap_counts TAPFILE: "planned ok notok" of one .t file's output, as prove
# counts them (a "not ok ... # TODO" is ok).
tap_counts() {
	awk '/^1\.\.[0-9]+/ { split($1, p, "\\.\\."); plan = p[2] }
	     /^ok / || /^not ok .*# TODO/ { ok++; next }
	     /^not ok / { bad++ }
	     END { printf "%d %d %d\n", plan, ok, bad }' "$1"
}

# tap_failures TRACE BASE NAME: each failing assertion of a traced run as
# "NAME:LINE: not ok ...", LINE the last line of BASE traced before it.
tap_failures() {
	awk -v base="$2" -v name="$3" '
	     /^\+/ { s = $0; sub(/^\++/, "", s); i = index(s, ":")
		      if (substr(s, 1, i - 1) == base) line = substr(s, i + 1) + 0; next }
	     /^not ok / && !/# TODO/ { print name ":" line ": " $0 }' "$1"
}

cd "$mnt"
: >"$out/failures.txt"
printf '%-16s %6s %6s %6s %6s %13s\n' dir files pass fail skip "ok/planned" | tee -a "$out/summary.txt"
T=(0 0 0 0 0 0)
L=(0 0 0 0 0 0)
for d in $dirs; do
	n=0 fp=0 ff=0 fs=0 ok=0 planned=0
	for t in "$pjd/tests/$d"/*.t; do
		[ -e "$t" ] || continue
		base=$(basename "$t")
		tap=$out/tap/$d-${base%.t}.tap
		rc=0
		# bash -x with file:line in PS4 (bash takes no PS4 from the
		# environment as root): tap_failures names each failing line
		# shellcheck disable=SC2016
		# in the background, so that a signal to this script runs the
		# EXIT trap at once (bash defers traps until a foreground child ends)
		timeout -k 10 "$timeout_s" bash -c 'PS4="+\${BASH_SOURCE##*/}:\${LINENO}: "; set -x; . "$0"' \
			"$t" >"$tap.trace" 2>&1 </dev/null &
		child=$!
		wait "$child" || rc=$?
		child=
		grep -aE '^(ok|not ok|1\.\.)' "$tap.trace" >"$tap" || true
		read -r p o b < <(tap_counts "$tap")
		n=$((n + 1))
		# quick_exit: "1..1", "ok 1" from a file whose own plan is not 1..1
		if [ "$(cat "$tap")" = $'1..1\nok 1' ] && ! grep -q '^echo "1\.\.1"$' "$t"; then
			fs=$((fs + 1))
			continue
		fi
		ok=$((ok + o))
		planned=$((planned + p))
		if [ "$rc" = 0 ] && [ "$b" = 0 ] && [ "$p" -gt 0 ] && [ "$o" = "$p" ]; then
			fp=$((fp + 1))
		else
			ff=$((ff + 1))
			[ "$rc" = 124 ] && echo "$d/$base: timed out after ${timeout_s}s" >>"$out/failures.txt"
			[ "$o" -lt "$p" ] || [ "$b" -gt 0 ] || [ "$rc" != 0 ] || echo "$d/$base: bad plan" >>"$out/failures.txt"
			tap_failures "$tap.trace" "$base" "$d/$base" >>"$out/failures.txt"
		fi
	done
	printf '%-16s %6d %6d %6d %6d %13s\n' "$d" "$n" "$fp" "$ff" "$fs" "$ok/$planned" | tee -a "$out/summary.txt"
	v=("$n" "$fp" "$ff" "$fs" "$ok" "$planned")
	for i in 0 1 2 3 4 5; do
		T[i]=$((T[i] + v[i]))
		[ "$d" = link ] || L[i]=$((L[i] + v[i]))
	done
done
printf '%-16s %6d %6d %6d %6d %13s\n' total "${T[0]}" "${T[1]}" "${T[2]}" "${T[3]}" "${T[4]}/${T[5]}" |
	tee -a "$out/summary.txt"
printf '%-16s %6d %6d %6d %6d %13s\n' "total w/o link" "${L[0]}" "${L[1]}" "${L[2]}" "${L[3]}" \
	"${L[4]}/${L[5]}" | tee -a "$out/summary.txt"
echo "pjdfstest: $backend: failing assertions in $out/failures.txt, TAP in $out/tap/"
