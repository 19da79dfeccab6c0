#!/usr/bin/env bash
# quickstart.sh - build tierfs and run it on the embedded default: a
# local-directory bucket of sample data under .work/, mounted with the RAM
# and SSD tiers, read cold and then warm, with the cache statistics.
set -euo pipefail
cd "$(dirname "$0")"
top=$PWD
jobs=$(nproc 2>/dev/null || echo 2)

echo "== installing missing build packages"
scripts/deps.sh build

echo "== building"
./autogen.sh >/dev/null 2>&1 || ./autogen.sh
mkdir -p build
(cd build && { [ -f Makefile ] || ../configure -q; } && make -s -j"$jobs" >/dev/null)
tierfs=$top/build/tierfs
"$tierfs" --version

work=$top/.work
bucket=$work/sample-bucket
mnt=$work/mnt
echo "== sample bucket: $bucket"
scripts/make-sample.sh "$bucket"

# Everything lives under .work: nothing from /etc, nothing in /var.
conf=$work/quickstart.conf
cat >"$conf" <<CONF
[ram]
size = 256M
[ssd]
dir = $work/cache
size = 2G
[cache]
metadata_ttl = forever
[log]
file = $work/tierfs.log
CONF
mkdir -p "$mnt"
if mountpoint -q "$mnt"; then "$tierfs" umount "$mnt" || fusermount3 -uz "$mnt"; fi
rm -rf "$work/cache"
trap 'mountpoint -q "$mnt" && "$tierfs" umount "$mnt"' EXIT

read_all() {
	local t0 t1 n bytes
	t0=$(date +%s.%N)
	n=$(find "$mnt" -type f | wc -l)
	bytes=$(find "$mnt" -type f -print0 | xargs -0 cat | wc -c)
	t1=$(date +%s.%N)
	awk -v n="$n" -v b="$bytes" -v t0="$t0" -v t1="$t1" \
		'BEGIN { s = t1 - t0; printf "%d files, %.1f MiB in %.2f s (%.0f MiB/s)\n", n, b / 1048576, s, b / 1048576 / s }'
}

echo "== mount $bucket on $mnt"
"$tierfs" mount -c "$conf" "$bucket" "$mnt"
ls "$mnt" "$mnt/train"
echo "== cold read (from the bucket, filling the RAM and SSD tiers)"
read_all
echo "== remount: the RAM tier and the kernel's page cache start empty"
"$tierfs" umount "$mnt"
"$tierfs" mount -c "$conf" "$bucket" "$mnt"
echo "== warm read (from the SSD tier)"
read_all
if cmp -s "$mnt/shards/shard-00000.tar" "$bucket/shards/shard-00000.tar"; then
	echo "content check: the shard read through the mount is identical to the bucket's"
else
	echo "content check FAILED" >&2
	exit 1
fi
echo "== statistics of the warm mount (tierfs stats $mnt)"
"$tierfs" stats "$mnt" | grep -E -A4 '^(ram|ssd|metadata):' | grep -E '^[a-z]+:|hits|misses|get|used_bytes' || true
"$tierfs" stats --json "$mnt" | python3 -c 'import json,sys; s=json.load(sys.stdin); print("backend GETs on the warm mount: %d, SSD hits: %d" % (s["backend"]["get"]["requests"], s["ssd"]["hits"]))'
echo "== warm-up before training: evict the cache, then fill it again (tierfs warmup)"
"$tierfs" evict "$mnt" "$mnt"
"$tierfs" warmup -j 8 "$mnt"
echo "== write a checkpoint, then upload it now (tierfs flush)"
mkdir -p "$mnt/checkpoints"
head -c 8M /dev/urandom >"$mnt/checkpoints/epoch-1.pt"
"$tierfs" flush "$mnt"
if cmp -s "$mnt/checkpoints/epoch-1.pt" "$bucket/checkpoints/epoch-1.pt"; then
	echo "checkpoint check: the bucket holds exactly what was written"
else
	echo "checkpoint check FAILED" >&2
	exit 1
fi
rm -r "$mnt/checkpoints"
echo "== unmount"
"$tierfs" umount "$mnt"
trap - EXIT
echo "== done.  Next: ./check.sh runs every test."
