#!/usr/bin/env bash
# quickstart.sh - build tierfs and run it on the embedded default: a
# local-directory bucket of sample data under .work/.
set -euo pipefail
cd "$(dirname "$0")"
jobs=$(nproc 2>/dev/null || echo 2)

echo "== installing missing build packages"
scripts/deps.sh build

echo "== building"
./autogen.sh >/dev/null 2>&1 || ./autogen.sh
mkdir -p build
(cd build && { [ -f Makefile ] || ../configure -q; } && make -s -j"$jobs" >/dev/null)
tierfs=$PWD/build/tierfs
"$tierfs" --version

bucket=$PWD/.work/sample-bucket
echo "== sample bucket: $bucket"
scripts/make-sample.sh "$bucket"

# The sample needs no config file: built-in defaults, nothing from /etc.
conf=$PWD/.work/quickstart.conf
: >"$conf"
tfs() { "$tierfs" backend -c "$conf" "$bucket" "$@"; }

echo "== top level of the bucket"
tfs ls
echo "== first keys of train/class0/"
tfs ls train/class0/ | head -n 5
echo "== object details"
tfs stat shards/shard-00000.tar

echo "== round trip: write a checkpoint, read it back"
ckpt=$PWD/.work/checkpoint.bin
head -c $((8 * 1024 * 1024)) /dev/urandom >"$ckpt"
tfs put "$ckpt" checkpoints/step-100.bin
tfs get checkpoints/step-100.bin "$PWD/.work/checkpoint.back"
if cmp -s "$ckpt" "$PWD/.work/checkpoint.back"; then
	echo "round trip OK: $(sha256sum <"$ckpt" | cut -c1-16)... identical"
else
	echo "round trip FAILED: the object read back differs" >&2
	exit 1
fi
tfs rm checkpoints/step-100.bin
echo "== done.  Next: ./check.sh runs every test."
