#!/bin/sh
# make-sample.sh DIR [FILES_PER_CLASS] - create the sample bucket the quick
# start uses: an image-classification layout of small files plus a shard.
set -eu
dir=${1:?usage: make-sample.sh DIR [FILES_PER_CLASS]}
per=${2:-50}
[ -f "$dir.complete" ] && exit 0
mkdir -p "$dir"
for c in 0 1 2 3; do
	mkdir -p "$dir/train/class$c"
	i=0
	while [ $i -lt "$per" ]; do
		# 90-130 KiB, the size of a typical JPEG in ImageNet.
		kib=$((90 + (i * 7 + c * 13) % 41))
		head -c $((kib * 1024)) /dev/urandom >"$dir/train/class$c/img$(printf %04d $i).jpg"
		i=$((i + 1))
	done
done
mkdir -p "$dir/shards"
head -c $((24 * 1024 * 1024)) /dev/urandom >"$dir/shards/shard-00000.tar"
printf 'tierfs sample dataset: 4 classes of small images and one 24 MiB shard.\n' >"$dir/README.txt"
touch "$dir.complete"
