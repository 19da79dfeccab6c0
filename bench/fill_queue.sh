#!/usr/bin/env bash
# bench/fill_queue.sh — sizes of ssd.fill_queue against a cold sequential
# read from a local-directory bucket (issue 32)
#
# usage: sudo bench/fill_queue.sh [--big MIB] [--queues LIST] [--reps N]
#                                 [--out FILE]
#
#   --big MIB      size of the shard (default 512)
#   --queues LIST  ssd.fill_queue values, comma-separated (default
#                  0,1M,8M,32M,128M,512M)
#   --reps N       repetitions, each starting one value further along
#                  (default 3); the report shows medians
#   --out FILE     also append the Markdown report to FILE
#
# For each value, on a fresh cache (ram.size = 1G, ssd.size = 8G, as in
# the issue): drop_caches, `dd` the shard through the mount with bs=1M
# (cold: every block from the backend); the MiB still queued when it
# ended and the seconds until `tierfs stats` shows the queue empty (the
# poll's own cost included); then a remount (the RAM tier empty),
# drop_caches and the same dd (warm), with the backend GETs it made.  A
# value that leaves blocks out of the tier shows warm GETs; the default
# should be the smallest value whose cold read is as fast as the larger
# ones'.  The local backend reads the dataset's directory, on the same
# disk as the cache, so the SSD's writes compete with the backend's reads
# as on a node with one local disk.
#
# Environment: TIERFS (default build/tierfs of this repo), TFS_BENCH_DIR
# (work dir, default /var/tmp/tierfs-bench; the dataset is shared with
# bench/run.sh).  Needs root (drop_caches, FUSE mounts).  The EXIT trap
# unmounts and stops the daemon it started (by recorded pid).
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BIG=512
QUEUES=0,1M,8M,32M,128M,512M
REPS=3
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
# shellcheck disable=SC2034 # read by common.sh (cleanup, machine_meta)
SERVER=none SERVER_VERSION='none (local backend)'

while [ $# -gt 0 ]; do
    case "$1" in
        --big) BIG=${2:?}; shift 2 ;;
        --queues) QUEUES=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "fill_queue.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$BIG$REPS" in *[!0-9]*) echo "fill_queue.sh: --big and --reps take numbers" >&2; exit 2 ;; esac
case "$QUEUES" in *[!0-9KMG,]*) echo "fill_queue.sh: --queues takes sizes (0,8M,1G)" >&2; exit 2 ;; esac

[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
if [ -z "${TIERFS:-}" ] && [ -x "$REPO/build/tierfs" ]; then TIERFS=$REPO/build/tierfs; fi
[ -x "${TIERFS:-}" ] || die "no tierfs binary (set TIERFS)"

DATA=$WORK/dataset-n1-b$BIG
if [ ! -f "$DATA/.complete" ]; then
    log "generating the dataset in $DATA"
    python3 "$BENCH_DIR/dataset.py" gen "$DATA" 1 "$BIG"
fi
SHARD=big/shard-00000.tar

bench_rundir
cat >"$RUN/tierfs.conf" <<EOF
[ram]
size = 1G
[ssd]
size = 8G
[log]
file = $RUN/logs/tierfs.log
EOF
MNT=$RUN/mnt/tierfs
mkdir -p "$MNT"

# mount_q QUEUE: mount the dataset with ssd.fill_queue = QUEUE
mount_q() {
    "$TIERFS" mount -c "$RUN/tierfs.conf" -o ssd.dir="$RUN/cache" -o ssd.fill_queue="$1" \
        -f "$DATA/objects" "$MNT" </dev/null >>"$RUN/logs/tierfs.out" 2>&1 &
    CUR_FS=tierfs CUR_PID=$! CUR_MNT=$MNT CUR_NAME=$(basename "$TIERFS")
    for _ in $(seq 600); do
        mountpoint -q "$MNT" && return 0
        fs_alive "$CUR_PID" "$CUR_NAME" || die "tierfs exited before mounting; see $RUN/logs"
        sleep 0.05
    done
    die "tierfs did not mount within 30 s"
}

# stat_of KEY...: values of ssd/backend stats ("ssd.fill_queue_bytes", "gets")
stat_of() {
    "$TIERFS" stats --json "$MNT" | python3 -c '
import json, sys
s = json.load(sys.stdin)
out = []
for k in sys.argv[1:]:
    if k == "gets":
        out.append(s["backend"]["get"]["requests"])
    else:
        sec, name = k.split(".")
        out.append(s[sec].get(name, 0))
print(" ".join(str(v) for v in out))' "$@"
}

now_us() { echo "${EPOCHREALTIME/[.,]/}"; }

# dd_secs: seconds of one dd of the shard through the mount
dd_secs() {
    local t0 t1
    t0=$(now_us)
    dd if="$MNT/$SHARD" of=/dev/null bs=1M status=none
    t1=$(now_us)
    awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e6 }'
}

# rep queue cold_s left_mib drain_s written queued failed dropped warm_s warm_gets
RES=$RUN/results.tsv
one() {
    local rep=$1 q=$2 cold left drain=0 t0 t1 written queued failed dropped warm wgets
    rm -rf "$RUN/cache"
    mount_q "$q"
    drop_caches
    cold=$(dd_secs)
    # the bytes still queued when the read ended, then how long they took
    t0=$(now_us)
    left=$(stat_of ssd.fill_queue_bytes)
    if [ "$left" != 0 ]; then
        for _ in $(seq 1200); do
            [ "$(stat_of ssd.fill_queue_bytes)" = 0 ] && break
            sleep 0.05
        done
        t1=$(now_us)
        drain=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.2f", d / 1e6 }')
    fi
    left=$(awk -v b="$left" 'BEGIN { printf "%.0f", b / 1048576 }')
    # (a binary from before issue 32 has no fill_written: 0)
    read -r written queued failed dropped <<<"$(stat_of ssd.fill_written ssd.fill_queued ssd.fill_failed ssd.fill_dropped)"
    umount_current
    mount_q "$q"
    drop_caches
    warm=$(dd_secs)
    wgets=$(stat_of gets)
    umount_current
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$q" "$cold" "$left" "$drain" \
        "$written" "$queued" "$failed" "$dropped" "$warm" "$wgets" >>"$RES"
    log "rep $rep fill_queue=$q: cold $cold s, $left MiB queued at its end, empty $drain s later," \
        "$written written ($queued queued, $dropped dropped), warm $warm s with $wgets GETs"
}

# shellcheck disable=SC2206 # a word list
QS=(${QUEUES//,/ })
for rep in $(seq "$REPS"); do
    for i in $(seq 0 $((${#QS[@]} - 1))); do
        one "$rep" "${QS[$(((i + rep - 1) % ${#QS[@]}))]}"
    done
done

machine_meta ""
meta binary "$TIERFS"
meta big_mib "$BIG"
meta reps "$REPS"
meta tierfs "$("$TIERFS" --version 2>/dev/null | head -1): \`tierfs mount -o ssd.dir=CACHE -o ssd.fill_queue=Q -f DATASET MNT\` (local backend, ram.size 1G, ssd.size 8G)"
meta load "$(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min load average at the end)"
finish_report "$BENCH_DIR/fill_queue_report.py"
