#!/bin/bash
# bench/dataloader.sh — a PyTorch DataLoader epoch over one ImageFolder on
# tierfs (with tierfs.torch.Sampler and with RandomSampler, cold and warm),
# s3fs, rclone mount and a local copy, all in one run against one S3
# server (Ceph RGW by default).  Prints images/s and ratios (Markdown).
#
# usage: bench/dataloader.sh [--server rgw|moto] [--classes N] [--per-class N]
#                            [--size PX] [--workers N] [--batch N] [--reps N]
#                            [--latency MS] [--fs LIST] [--out FILE]
#
#   --classes, --per-class, --size   the ImageFolder (examples/
#                  make_sample_data.py): default 10 x 100 PNGs of 64x64
#   --workers      DataLoader workers (default 4), --batch (default 32)
#   --reps         repetitions (default 3); each starts one peer further
#                  along the list, so every peer runs in every position
#   --latency MS   tests/faults/s3_fault_proxy.py between the FUSE peers
#                  and the server, holding each reply's headers MS ms (the
#                  time to first byte of a real object store)
#   --fs LIST      peers, default tierfs-sampler,tierfs-random,s3fs,rclone,local
#
# Each peer's cold epoch runs on a fresh mount with an empty cache (the
# ImageFolder scan is not timed), its warm epoch on the same mount after
# dropping the page cache, with the next epoch's order; a warm epoch of
# tierfs that made a backend GET fails the run (bench/common.sh
# warm_begin/warm_end), its report printed but not appended.  Needs root,
# /usr/bin/python3 with python3-torch and python3-torchvision, s3fs and
# rclone (installed with apt-get if missing; skipped if that fails).
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
CLASSES=10
PER_CLASS=100
SIZE=64
WORKERS=4
BATCH=32
REPS=3
LATENCY=0
OUT=
FS_LIST=tierfs-sampler,tierfs-random,s3fs,rclone,local
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
while [ $# -gt 0 ]; do
    case "$1" in
        --server) SERVER=${2:?}; shift 2 ;;
        --classes) CLASSES=${2:?}; shift 2 ;;
        --per-class) PER_CLASS=${2:?}; shift 2 ;;
        --size) SIZE=${2:?}; shift 2 ;;
        --workers) WORKERS=${2:?}; shift 2 ;;
        --batch) BATCH=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --latency) LATENCY=${2:?}; shift 2 ;;
        --fs) FS_LIST=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "dataloader.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$CLASSES$PER_CLASS$SIZE$WORKERS$BATCH$REPS$LATENCY" in
    *[!0-9]*) echo "dataloader.sh: numbers expected" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF
PY=/usr/bin/python3
$PY -c 'import torch, torchvision' 2>/dev/null ||
    die "/usr/bin/python3 has no torch/torchvision (apt-get install python3-torch python3-torchvision)"
DRIVER=$BENCH_DIR/dataloader.py

# The FUSE peers behind the S3 server (tierfs twice, with two samplers).
PEERS=
for p in ${FS_LIST//,/ }; do
    case "$p" in
        tierfs-sampler | tierfs-random) PEERS="$PEERS tierfs" ;;
        s3fs | rclone) PEERS="$PEERS $p" ;;
        local) ;;
        *) die "unknown peer '$p'" ;;
    esac
done
skip_all() { echo "$1: skipped" >&2; }
bench_tools
bench_rundir

N=$((CLASSES * PER_CLASS))
DATA=$WORK/imagefolder-c$CLASSES-n$PER_CLASS-s$SIZE
$PY "$DRIVER" gen "$DATA" "$CLASSES" "$PER_CLASS" "$SIZE"
export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$((1 << 30))}
start_server
log "$SERVER up at $EP; uploading $N images"
$PY "$DRIVER" upload "$DATA" imagefolder
if [ "$LATENCY" != 0 ]; then
    python3 "$REPO/tests/faults/s3_fault_proxy.py" --upstream "$EP" --no-control \
        --rate latency=1 --latency-ms "$LATENCY" --latency-where headers --seed 1 \
        --port-file "$RUN/proxy.port" --log "$RUN/logs/proxy.log" >/dev/null &
    PROXY_PID=$!
    for _ in $(seq 100); do [ -s "$RUN/proxy.port" ] && break; sleep 0.1; done
    [ -s "$RUN/proxy.port" ] || die "the latency proxy did not start: $(cat "$RUN/logs/proxy.log")"
    EP=http://127.0.0.1:$(cat "$RUN/proxy.port")
    log "latency proxy (${LATENCY} ms before each reply's headers) at $EP"
    trap 'rc=$?; kill "$PROXY_PID" 2>/dev/null; (exit $rc); cleanup' EXIT
fi
peer_configs

: >"$RUN/dataloader.tsv"
# epoch PEER PHASE REP ROOT SAMPLER SEED: one epoch, recorded
epoch() {
    local out images secs
    if ! out=$($PY "$DRIVER" epoch "$4" "$5" "$6" "$WORKERS" "$BATCH" 2>>"$RUN/logs/driver.err"); then
        log "$1 $2: the epoch failed: $(tail -n 3 "$RUN/logs/driver.err")"
        return 1
    fi
    images=$(sed -n 's/.*images=\([0-9]*\).*/\1/p' <<<"$out")
    secs=$(sed -n 's/.*epoch_s=\([0-9.]*\).*/\1/p' <<<"$out")
    index=$(sed -n 's/.*index_s=\([0-9.]*\).*/\1/p' <<<"$out")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$images" "$secs" "$index" >>"$RUN/dataloader.tsv"
    log "$1 $2: $out"
}

# run_peer PEER REP: its cold epoch on a fresh mount, then its warm one
run_peer() {
    local peer=$1 rep=$2 fs sampler=random root
    if [ "$peer" = local ]; then
        drop_caches
        epoch local cold "$rep" "$DATA/images" random "$rep" || true
        epoch local warm "$rep" "$DATA/images" random "$((rep + 1000))" || true
        return
    fi
    fs=$(peer_prog "$peer")
    [ "$peer" = tierfs-sampler ] && sampler=tierfs
    if [ "$fs" = tierfs ] && [ "$TIERFS_OK" != 1 ]; then return; fi
    command -v "$fs" >/dev/null || [ "$fs" = tierfs ] || return 0
    fresh_cache "$fs"
    drop_caches
    mount_fs "$fs" || { log "$peer: mount failed"; return; }
    root=$CUR_MNT/imagefolder
    epoch "$peer" cold "$rep" "$root" "$sampler" "$rep" || true
    drop_caches
    warm_begin "$fs" "$CUR_MNT"
    epoch "$peer" warm "$rep" "$root" "$sampler" "$((rep + 1000))" || true
    warm_end "$peer" warm || true # fails the run before the report is appended
    umount_current
    fresh_cache "$fs"
}

# shellcheck disable=SC2206 # a word list
UNITS=(${FS_LIST//,/ })
for REP in $(seq "$REPS"); do
    log "---- repetition $REP of $REPS"
    for i in $(seq 0 $((${#UNITS[@]} - 1))); do
        run_peer "${UNITS[$(((i + REP - 1) % ${#UNITS[@]}))]}" "$REP"
    done
done

machine_meta
meta images "$N ($CLASSES classes x $PER_CLASS PNGs of ${SIZE}x$SIZE, $(du -sh "$DATA/images" | cut -f1))"
meta latency "$([ "$LATENCY" = 0 ] && echo none || echo "$LATENCY ms before each reply's headers (tests/faults/s3_fault_proxy.py)")"
meta workers "$WORKERS DataLoader workers, batch $BATCH"
meta reps "$REPS"
meta machine "$(nproc) CPUs, $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
peer_meta
report=$($PY "$DRIVER" report "$RUN/dataloader.tsv" "$RUN/meta.tsv") || die "the report failed"
printf '%s\n' "$report"
warm_verdict
if [ -n "$OUT" ]; then
    printf '%s\n\n' "$report" >>"$OUT"
    log "report appended to $OUT"
fi
SUCCESS=1
