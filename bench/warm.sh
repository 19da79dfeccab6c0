#!/usr/bin/env bash
# bench/warm.sh — warm reads from the SSD tier against the same bytes read
# from a plain file on the same filesystem (issue 22, part 2)
#
# usage: sudo bench/warm.sh [--big MIB] [--small N] [--threads N]
#                           [--reps N] [--rounds N] [--only LIST] [--out FILE]
#
#   --big MIB     size of the big object (default 512)
#   --small N     number of ~110 KiB files (default 3000)
#   --threads N   reader threads of the small-file hot epoch (default 8)
#   --reps N      reads of each kind per round, rotating tierfs, the plain
#                 file (and the FUSE floor in hot); a round reports their
#                 medians (default 5)
#   --rounds N    rounds, for the spread (default 3)
#   --only LIST   seq (the big object), hot (the small-file hot epoch);
#                 default both
#   --out FILE    also append the Markdown report to FILE
#
# tierfs mounts the dataset's directory with the local backend (no S3
# server: once the SSD tier holds the bytes, the backend is never asked),
# its ssd.dir on the same filesystem as the dataset, so the plain reads
# and the SSD tier's reads come from the same disk.  `tierfs warmup`
# fills the SSD tier first.
#
# seq: before each read, `sync; echo 3 > /proc/sys/vm/drop_caches` (the
# mount's page cache and the data files' go; the daemon's RAM tier keeps
# nothing of a sequential read: its read-ahead is streamed).  Each read is
# `epoch_reader read` with 1 MiB read()s.  CPU: utime+stime of the reader
# (bash's `times` of the child) and of the daemon's process tree (keeper
# and daemon, /proc/PID/stat), CPU seconds per GiB read.
# hot: the epoch is read once to fill the page cache, then each read runs
# with the page cache warm, rotating tierfs, the plain files and the FUSE
# floor.  The FUSE floor is bench/fuse_floor.c, a read-only passthrough of
# the same directory built as tierfs's FUSE loop with nothing done per
# request beyond one syscall: what any FUSE daemon costs per file here.
# FLOOR_THREADS sets its FUSE threads (default 16, as tierfs).  (Not in
# seq: its reads of the plain file itself, interleaved with drop_caches,
# made the plain reads after them cost 3-4x their CPU on this VM.)
#
# Environment: TIERFS (default build/tierfs of this repo), TIERFS_OPTS
# (extra words for the mount command), TFS_BENCH_DIR (work dir, default
# /var/tmp/tierfs-bench; the dataset is shared with bench/run.sh).
#
# Every tierfs read must make no backend GET (`tierfs stats`): a run where
# one did fails after printing its report, which is then not appended to
# --out (warm_begin/warm_end in bench/common.sh).
#
# Needs root (drop_caches, FUSE mounts).  The EXIT trap unmounts and stops
# the daemon it started (by recorded pid).
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SMALL=3000
BIG=512
THREADS=8
REPS=5
ROUNDS=3
ONLY=seq,hot
# shellcheck disable=SC2034
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
# shellcheck disable=SC2034 # read by common.sh (cleanup, machine_meta, finish_report)
SERVER=none SERVER_VERSION='none (local backend)'
# shellcheck disable=SC2034
PEERS=tierfs

while [ $# -gt 0 ]; do
    case "$1" in
        --big) BIG=${2:?}; shift 2 ;;
        --small) SMALL=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --rounds) ROUNDS=${2:?}; shift 2 ;;
        --only) ONLY=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "warm.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$SMALL$BIG$THREADS$REPS$ROUNDS" in *[!0-9]*) echo "warm.sh: sizes and counts take numbers" >&2; exit 2 ;; esac
DO_SEQ=0 DO_HOT=0
for w in ${ONLY//,/ }; do
    case "$w" in
        seq) DO_SEQ=1 ;;
        hot) DO_HOT=1 ;;
        *) echo "warm.sh: unknown workload '$w' (seq, hot)" >&2; exit 2 ;;
    esac
done

[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
if [ -z "${TIERFS:-}" ] && [ -x "$REPO/build/tierfs" ]; then TIERFS=$REPO/build/tierfs; fi
[ -x "${TIERFS:-}" ] || die "no tierfs binary (set TIERFS)"
build_tool epoch_reader
READER=$WORK/bin/epoch_reader
if [ "$DO_HOT" = 1 ]; then
    # shellcheck disable=SC2046 # pkg-config prints a list of words
    build_tool fuse_floor $(pkg-config --cflags --libs fuse3)
fi

DATA=$WORK/dataset-n$SMALL-b$BIG
if [ ! -f "$DATA/.complete" ]; then
    log "generating the dataset in $DATA"
    python3 "$BENCH_DIR/dataset.py" gen "$DATA" "$SMALL" "$BIG"
fi

bench_rundir
# local backend: the dataset's directory is the bucket
cat >"$RUN/tierfs.conf" <<EOF
[log]
file = $RUN/logs/tierfs.log
EOF
MNT=$RUN/mnt/tierfs
mkdir -p "$MNT" "$RUN/cache/tierfs"
# shellcheck disable=SC2086 # a list of words
"$TIERFS" mount -c "$RUN/tierfs.conf" -o ssd.dir="$RUN/cache/tierfs" ${TIERFS_OPTS:-} \
    -f "$DATA/objects" "$MNT" </dev/null >>"$RUN/logs/tierfs.out" 2>&1 &
CUR_FS=tierfs CUR_PID=$! CUR_MNT=$MNT CUR_NAME=$(basename "$TIERFS")
for _ in $(seq 600); do
    mountpoint -q "$MNT" && break
    fs_alive "$CUR_PID" "$CUR_NAME" || die "tierfs exited before mounting; see $RUN/logs"
    sleep 0.05
done
mountpoint -q "$MNT" || die "tierfs did not mount within 30 s"

FLOOR_PID='' FLOOR_MNT=$RUN/mnt/floor
floor_stop() {
    [ -n "$FLOOR_PID" ] || return 0
    fusermount3 -u "$FLOOR_MNT" 2>/dev/null || umount -l "$FLOOR_MNT" 2>/dev/null || true
    wait "$FLOOR_PID" 2>/dev/null || true
    FLOOR_PID=''
}
# shellcheck disable=SC2034 # read by cleanup (common.sh)
EXTRA_CLEANUP=floor_stop
if [ "$DO_HOT" = 1 ]; then
    mkdir -p "$FLOOR_MNT"
    "$WORK/bin/fuse_floor" -t "${FLOOR_THREADS:-16}" "$DATA/objects" "$FLOOR_MNT" \
        </dev/null >>"$RUN/logs/fuse_floor.out" 2>&1 &
    FLOOR_PID=$!
    for _ in $(seq 600); do
        mountpoint -q "$FLOOR_MNT" && break
        kill -0 "$FLOOR_PID" 2>/dev/null || die "fuse_floor exited before mounting; see $RUN/logs"
        sleep 0.05
    done
    mountpoint -q "$FLOOR_MNT" || die "fuse_floor did not mount within 30 s"
fi

# tree_ticks PID: utime+stime (clock ticks) of PID and its children
tree_ticks() {
    local t=0 p
    for p in "$1" $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
        # fields 14, 15 after the ")" that ends the command name
        t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }')))
    done
    echo "$t"
}
HZ=$(getconf CLK_TCK)

# child_cpu: user and system CPU seconds of this shell's waited-for
# children, from `times >"$RUN/times"`, which must run in this shell (a
# subshell has no children of its own yet)
child_cpu() {
    tail -1 "$RUN/times" | sed 's/m/ /g; s/s//g' | awk '{ print $1 * 60 + $2, $3 * 60 + $4 }'
}

RES=$RUN/results.tsv # round kind what secs reader_cpu daemon_cpu bytes
# one_read ROUND KIND WHAT ROOT LIST NTHREADS SEED DAEMON_PID|-
one_read() {
    local round=$1 kind=$2 what=$3 root=$4 list=$5 nt=$6 seed=$7 dpid=$8 d0=0 d1=0 out
    local u0 s0 u1 s1
    [ "$kind" = seq ] && drop_caches
    [ "$dpid" != - ] && d0=$(tree_ticks "$dpid")
    [ "$what" = tierfs ] && warm_begin tierfs "$root"
    times >"$RUN/times"
    read -r u0 s0 < <(child_cpu)
    out=$("$READER" read "$root" "$list" "$nt" "$seed")
    times >"$RUN/times"
    read -r u1 s1 < <(child_cpu)
    [ "$dpid" != - ] && d1=$(tree_ticks "$dpid")
    case "$out" in *errors=0*) ;; *) die "$what $kind read failed: $out" ;; esac
    warm_end "$what" "$kind" || true # fails the run at finish_report
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$kind" "$what" \
        "$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")" \
        "$(awk -v a="$u0" -v b="$s0" -v c="$u1" -v d="$s1" 'BEGIN { printf "%.3f", c + d - a - b }')" \
        "$(awk -v a="$d0" -v b="$d1" -v hz="$HZ" 'BEGIN { printf "%.3f", (b - a) / hz }')" \
        "$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' <<<"$out")" >>"$RES"
    log "round $round $kind $what: $out"
}

# rotation REP ROUND WHAT...: the WHATs, starting one further along each
# time
rotation() {
    local k=$((($1 + $2) % ($# - 2)))
    shift 2
    local order=("$@")
    echo "${order[@]:k}" "${order[@]:0:k}"
}

LISTS=
if [ "$DO_SEQ" = 1 ]; then LISTS="$LISTS $DATA/big.tsv"; fi
if [ "$DO_HOT" = 1 ]; then LISTS="$LISTS $DATA/small.tsv"; fi
log "filling the SSD tier (tierfs warmup)"
"$TIERFS" warmup --quiet "$MNT" "$MNT" >&2 || die "tierfs warmup failed"
# the epoch's first read through the mount fills the page cache for "hot"
DPID=$CUR_PID
for round in $(seq "$ROUNDS"); do
    if [ "$DO_SEQ" = 1 ]; then
        for rep in $(seq "$REPS"); do
            for what in $(rotation "$rep" "$round" tierfs plain); do
                case "$what" in
                    tierfs) one_read "$round" seq tierfs "$MNT" "$DATA/big.tsv" 1 0 "$DPID" ;;
                    plain) one_read "$round" seq plain "$DATA/objects" "$DATA/big.tsv" 1 0 - ;;
                esac
            done
        done
    fi
    if [ "$DO_HOT" = 1 ]; then
        "$READER" read "$MNT" "$DATA/small.tsv" "$THREADS" 1 >/dev/null
        "$READER" read "$DATA/objects" "$DATA/small.tsv" "$THREADS" 1 >/dev/null
        "$READER" read "$FLOOR_MNT" "$DATA/small.tsv" "$THREADS" 1 >/dev/null
        for rep in $(seq "$REPS"); do
            for what in $(rotation "$rep" "$round" tierfs plain floor); do
                case "$what" in
                    tierfs) one_read "$round" hot tierfs "$MNT" "$DATA/small.tsv" "$THREADS" "$((rep + 10))" "$DPID" ;;
                    plain) one_read "$round" hot plain "$DATA/objects" "$DATA/small.tsv" "$THREADS" "$((rep + 10))" - ;;
                    floor) one_read "$round" hot floor "$FLOOR_MNT" "$DATA/small.tsv" "$THREADS" "$((rep + 10))" "$FLOOR_PID" ;;
                esac
            done
        done
    fi
done
"$TIERFS" stats --json "$MNT" >"$RUN/stats.json" 2>/dev/null || true
floor_stop
umount_current

machine_meta ""
meta big_mib "$BIG"
meta small "$SMALL"
meta threads "$THREADS"
meta floor_threads "${FLOOR_THREADS:-16}"
meta reps "$REPS"
meta rounds "$ROUNDS"
meta peer_tierfs "$("$TIERFS" --version 2>/dev/null | head -1): \`tierfs mount -o ssd.dir=CACHE${TIERFS_OPTS:+ $TIERFS_OPTS} -f DATASET MNT\` (local backend)"
finish_report "$BENCH_DIR/warm_report.py"
