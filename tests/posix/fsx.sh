#!/usr/bin/env bash
# fsx.sh - run fsx (the file-system exerciser of xfstests, ltp/fsx.c) on a
# file in a tierfs mount, against moto, Ceph RGW or a local directory on
# loopback.  fsx is not part of the tree: build it outside it
# (docs/testing.md, "fsx").
#
#   tests/posix/fsx.sh FSX_BINARY [--backend moto|rgw|local] [--tierfs PATH]
#                      [--ops N] [--seed S] [--only RUN[,RUN...]]
#   FSX_KEEP=1 keeps the work directory (fsx logs, tierfs logs) under /tmp.
#
# Runs, each on its own file, with a fixed seed so a run repeats:
#   nommap     N ops, read()/write() only (-R -W)
#   mmap       N ops, mapped reads and writes as well
#   closeopen  N ops, -R -W, closing and reopening the file 1 op in 10 (-c 10)
#   mmapclose  N ops, mapped I/O as well, and -c 10: pages written through a
#              mapping must reach the daemon, and reads after a reopen come
#              from it
#   bucket     N ops (-R -W), then `tierfs flush`, then the file read through
#              the mount, the object in the bucket, and the file read through
#              a second mount on a fresh cache directory must be the same
#              bytes (xfstests fsx writes its .fsxgood copy only on failure)
# Prints one line per run (mode, ops, seed, result, time), the end of the
# fsx log of a failing run (its last operations), and ends with
# "fsx: N passed, N failed".  Exit status 0 only if every run passed.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
harness=$top/tests/harness

usage() {
	echo "usage: $0 FSX_BINARY [--backend moto|rgw|local] [--tierfs PATH] [--ops N]" \
		"[--seed S] [--only RUN[,RUN...]]" >&2
	exit 2
}

[ $# -ge 1 ] || usage
fsx=$1
shift
backend=moto
tierfs=$top/build/tierfs
ops=100000
seed=18
only=
while [ $# -gt 0 ]; do
	case $1 in
	--backend) backend=${2:?}; shift 2 ;;
	--tierfs) tierfs=${2:?}; shift 2 ;;
	--ops) ops=${2:?}; shift 2 ;;
	--seed) seed=${2:?}; shift 2 ;;
	--only) only=${2:?}; shift 2 ;;
	*) usage ;;
	esac
done
case $backend in moto | rgw | local) ;; *) usage ;; esac
case $ops in '' | *[!0-9]*) usage ;; esac
case $seed in '' | *[!0-9]*) usage ;; esac
fsx=$(cd "$(dirname "$fsx")" && pwd)/$(basename "$fsx")
tierfs=$(cd "$(dirname "$tierfs")" && pwd)/$(basename "$tierfs")
[ -x "$fsx" ] || { echo "fsx.sh: $fsx is not an executable" >&2; exit 2; }
[ -x "$tierfs" ] || { echo "fsx.sh: $tierfs is not an executable" >&2; exit 2; }
unset AWS_CA_BUNDLE || true

work=$(mktemp -d /tmp/tierfs-fsx.XXXXXX)
server=$work/srv
mounts=()
passed=0
failed=0
shown_disabled=

cleanup() {
	local m
	for m in "${mounts[@]}"; do
		mountpoint -q "$m" && { "$tierfs" umount "$m" >/dev/null 2>&1 ||
			fusermount3 -uz "$m" >/dev/null 2>&1 || true; }
	done
	[ "$backend" = local ] || "$harness/$backend.sh" stop "$server" >/dev/null 2>&1 || true
	if [ -n "${FSX_KEEP:-}" ]; then
		echo "fsx.sh: kept $work (FSX_KEEP)"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

now() { date +%s.%N; }

# ---- the bucket -----------------------------------------------------------
if [ "$backend" = local ]; then
	root=$work/bucket
	mkdir -p "$root"
	source=$root
else
	"$harness/$backend.sh" start "$server" >/dev/null
	# shellcheck disable=SC1091
	. "$server/env"
	prefix=fsx$$
	source=s3://$TFS_TEST_BUCKET/$prefix
fi

# write_conf NAME: a configuration as tests/integration/test_mount.py's
# Mount writes it; the cache directory is NAME's own.
write_conf() {
	local name=$1
	{
		printf '[ram]\nsize = 64M\n'
		printf '[ssd]\ndir = %s\nsize = 1G\n' "$work/cache-$name"
		printf '[cache]\nblock_size = 1M\nmetadata_ttl = forever\n'
		printf '[prefetch]\nworkers = 4\nreadahead = 4M\n'
		printf '[log]\nlevel = info\nfile = %s\n' "$work/$name.log"
		printf '[backend]\nretries = 2\nretry_base = 10ms\nretry_max = 50ms\n'
		printf 'connect_timeout = 1s\n'
		[ "$backend" = local ] || printf 'endpoint = %s\n' "$TFS_S3_ENDPOINT"
	} >"$work/$name.conf"
}

# do_mount NAME: mount the bucket on $work/mnt-NAME, wait for it.
do_mount() {
	local name=$1 mnt=$work/mnt-$1
	mkdir -p "$mnt"
	write_conf "$name"
	"$tierfs" mount -c "$work/$name.conf" "$source" "$mnt"
	mounts+=("$mnt")
	for _ in $(seq 100); do
		mountpoint -q "$mnt" && return 0
		sleep 0.1
	done
	echo "fsx.sh: $mnt did not appear" >&2
	tail -n 20 "$work/$name.log" >&2 || true
	return 1
}

do_umount() {
	"$tierfs" umount "$work/mnt-$1"
}

# bucket_sha256 KEY: sha256 of the object (S3) or the file (local).
bucket_sha256() {
	if [ "$backend" = local ]; then
		sha256sum <"$root/$1" | cut -d' ' -f1
	else
		python3 - "$TFS_TEST_BUCKET" "$prefix/$1" <<'EOF'
import hashlib, os, sys
import boto3
s3 = boto3.client("s3", endpoint_url=os.environ["TFS_S3_ENDPOINT"], region_name="us-east-1")
body = s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2])["Body"]
h = hashlib.sha256()
for c in body.iter_chunks(1 << 20):
    h.update(c)
print(h.hexdigest())
EOF
	fi
}

wanted() {
	[ -z "$only" ] || [[ ",$only," == *",$1,"* ]]
}

# run_fsx MODE FLAGS...: fsx on $mnt/MODE.fsx; logs in $work/logs.
run_fsx() {
	local mode=$1 t0 rc=0
	shift
	mkdir -p "$work/logs"
	t0=$(now)
	"$fsx" -N "$ops" -S "$seed" -P "$work/logs" "$@" "$mnt/$mode.fsx" \
		>"$work/logs/$mode.out" 2>&1 || rc=$?
	elapsed=$(echo "$(now) - $t0" | bc)
	return $rc
}

# report MODE RESULT DETAIL
report() {
	printf 'fsx run: mode=%-9s ops=%s seed=%s flags=%-12s result=%s time=%.1fs%s\n' \
		"$1" "$ops" "$seed" "$flags" "$2" "$elapsed" "${3:+ ($3)}"
	# which operations fsx found unsupported (the same for every run)
	if [ -z "$shown_disabled" ]; then
		grep -h "disabling" "$work/logs/$1.out" | sed "s/^/    fsx: /" || true
		shown_disabled=1
	fi
	if [ "$2" = ok ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "---- fsx output ($1), last 60 lines:"
		tail -n 60 "$work/logs/$1.out" || true
		if [ -f "$work/logs/$1.fsx.fsxlog" ]; then
			echo "---- fsx operation log ($1.fsx.fsxlog), last 40 lines:"
			tail -n 40 "$work/logs/$1.fsx.fsxlog"
		fi
		echo "---- tierfs log, last 20 lines:"
		tail -n 20 "$work/a.log" || true
	fi
}

do_mount a
mnt=$work/mnt-a
echo "fsx.sh: $backend, $source on $mnt, fsx $fsx, tierfs $tierfs ($("$tierfs" --version 2>/dev/null | head -n 1))"

for mode in nommap mmap closeopen mmapclose; do
	wanted $mode || continue
	case $mode in
	nommap) flags="-R -W" ;;
	mmap) flags="" ;;
	closeopen) flags="-R -W -c 10" ;;
	mmapclose) flags="-c 10" ;;
	esac
	# shellcheck disable=SC2086
	if run_fsx $mode $flags; then report $mode ok; else report $mode FAIL "fsx exit $?"; fi
done

if wanted bucket; then
	flags="-R -W"
	rc=0
	run_fsx bucket -R -W || rc=$?
	if [ $rc -ne 0 ]; then
		report bucket FAIL "fsx exit $rc"
	else
		t0=$(now)
		detail=
		"$tierfs" flush "$mnt" >"$work/logs/bucket.flush" 2>&1 ||
			detail="tierfs flush failed: $(cat "$work/logs/bucket.flush")"
		if [ -z "$detail" ]; then
			via_mount=$(sha256sum <"$mnt/bucket.fsx" | cut -d' ' -f1)
			size=$(stat -c %s "$mnt/bucket.fsx")
			in_bucket=$(bucket_sha256 bucket.fsx)
			do_mount b
			fresh=$(sha256sum <"$work/mnt-b/bucket.fsx" | cut -d' ' -f1)
			do_umount b
			if [ "$via_mount" != "$in_bucket" ] || [ "$via_mount" != "$fresh" ]; then
				detail="bytes differ: mount $via_mount, bucket $in_bucket, fresh mount $fresh"
			else
				detail="$size bytes, sha256 ${via_mount:0:16}.. same in mount, bucket, fresh mount"
			fi
		fi
		elapsed=$(echo "$elapsed + $(now) - $t0" | bc)
		case $detail in
		*"same in"*) report bucket ok "$detail" ;;
		*) report bucket FAIL "$detail" ;;
		esac
	fi
fi

do_umount a
echo "fsx: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
