#!/usr/bin/env bash
# bench/scale.sh — tierfs on a bucket of many small objects (issue 22,
# part 5): a walk with stat of every entry, `ls -l` of the largest
# directory, and a shuffled epoch over a sample, with the peak RssAnon of
# each FUSE daemon (sampled every 100 ms from /proc/PID/status), against
# rclone and s3fs in the same run.
#
#   bench/scale.sh [--objects N] [--epoch N] [--threads N] [--fs LIST]
#                  [--peer-limit SECS] [--s3fs-limit SECS] [--server-dir DIR]
#                  [--peer-workloads LIST] [--stop] [--out FILE]
#
#   --objects N        objects in the bucket (default 1000000), under the
#                      prefix nN/: big/ holds N/10 of them (the `ls -l`
#                      directory), the rest sit in directories d000, d001...
#                      of 1,000 each
#   --size BYTES       size of each object (default 4096: at or above
#                      TFS_META_PROBE_SIZE, so a lookup needs no HEAD; see
#                      cache.fetch_headers)
#   --epoch N          objects in the shuffled epoch (default 100000 or
#                      --objects if smaller), every (objects/N)-th key
#   --threads N        reader threads of the epoch (default 8)
#   --fs LIST          comma-separated peers (default tierfs,rclone,s3fs)
#   --peer-limit SECS  time limit of each workload of rclone and s3fs
#                      (default 900); a peer that hits it is reported as
#                      "> SECS s"
#   --s3fs-limit SECS  the same for s3fs alone (default: --peer-limit); s3fs
#                      HEADs every file it lists, so a walk of a million
#                      takes it long
#   --peer-workloads LIST  the workloads rclone and s3fs run (default
#                      ls,walk,epoch; the others are reported as skipped)
#   --server-dir DIR   the RGW cluster (default $TFS_BENCH_DIR/scale-rgw).
#                      A cluster already running there is reused, with the
#                      objects it holds; otherwise one is started (bluestore
#                      on a sparse file there: memstore costs ~15 KiB of RAM
#                      per object) and left running for the next run
#   --stop             stop the cluster at the end
#   --out FILE         also append the Markdown report to FILE
#
# Populating a million objects takes ~20-30 min on 2 cores (bench/s3_put.c,
# 96 PUTs in flight); a marker object markers/nN records a finished one.
# Every workload runs on a fresh mount with an empty cache, the page cache
# dropped.  Environment: TIERFS, TIERFS_OPTS, RCLONE_OPTS, S3FS_OPTS,
# TFS_BENCH_DIR (default /var/tmp/tierfs-bench), TFS_TEST_BUCKET (default
# tierfs-scale).  Needs root.  See docs/benchmarks.md, "Scale".
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
OBJECTS=1000000
SIZE=4096
EPOCH=
THREADS=8
FS_LIST=tierfs,rclone,s3fs
PEER_LIMIT=900
S3FS_LIMIT=
PEER_WL=ls,walk,epoch
SRV_DIR=
STOP=0
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-scale}
SEED=1

while [ $# -gt 0 ]; do
    case "$1" in
        --objects) OBJECTS=${2:?}; shift 2 ;;
        --size) SIZE=${2:?}; shift 2 ;;
        --epoch) EPOCH=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --fs) FS_LIST=${2:?}; shift 2 ;;
        --peer-limit) PEER_LIMIT=${2:?}; shift 2 ;;
        --s3fs-limit) S3FS_LIMIT=${2:?}; shift 2 ;;
        --peer-workloads) PEER_WL=${2:?}; shift 2 ;;
        --server-dir) SRV_DIR=${2:?}; shift 2 ;;
        --stop) STOP=1; shift ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "scale.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
[ -n "$EPOCH" ] || EPOCH=$((OBJECTS < 100000 ? OBJECTS : 100000))
[ -n "$S3FS_LIMIT" ] || S3FS_LIMIT=$PEER_LIMIT
case "$OBJECTS$SIZE$EPOCH$THREADS$PEER_LIMIT$S3FS_LIMIT" in *[!0-9]*) die "numbers expected" ;; esac
[ "$OBJECTS" -ge 10 ] && [ "$EPOCH" -ge 1 ] && [ "$EPOCH" -le "$OBJECTS" ] &&
    [ "$THREADS" -ge 1 ] || die "need --objects >= 10 and 1 <= --epoch <= --objects"
PEERS=
for p in ${FS_LIST//,/ }; do
    case "$p" in s3fs | rclone | tierfs) PEERS="$PEERS $p" ;; *) die "unknown fs '$p'" ;; esac
done
[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

bench_tools
build_tool epoch_reader
READER=$WORK/bin/epoch_reader
if [ ! -x "$WORK/bin/s3_put" ] || [ "$BENCH_DIR/s3_put.c" -nt "$WORK/bin/s3_put" ]; then
    gcc -O2 -std=c11 -Wall -o "$WORK/bin/s3_put" "$BENCH_DIR/s3_put.c" -lcurl -lcrypto ||
        die "compiling s3_put.c failed (needs libcurl and OpenSSL headers)"
fi
bench_rundir

# record FS WORKLOAD STATUS SECS PEAK_RSSANON_KIB CPU_SECS FILES
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RUN/results.tsv"
}
skip_all() {
    local w
    for w in ls walk epoch; do record "$1" "$w" skip 0 0 0 0; done
}

# ------------------------------------------------------------- server ----

SRV_DIR=${SRV_DIR:-$WORK/scale-rgw}
mkdir -p "$SRV_DIR"
SRV_DIR=$(cd "$SRV_DIR" && pwd)
SERVER_DIR=$SRV_DIR
reuse=0
if [ -f "$SRV_DIR/env" ]; then
    # shellcheck disable=SC1091
    . "$SRV_DIR/env"
    curl -s -o /dev/null -m 5 "$TFS_S3_ENDPOINT/" && reuse=1
fi
if [ "$reuse" = 1 ]; then
    log "reusing the cluster in $SRV_DIR ($TFS_S3_ENDPOINT)"
    BUCKET=$TFS_TEST_BUCKET EP=$TFS_S3_ENDPOINT REGION=${TFS_S3_REGION:-us-east-1}
    SERVER_VERSION=$(radosgw --version 2>/dev/null | head -1 | sed 's/ (.*//')
    CURL_SIGN=(--aws-sigv4 "aws:amz:$REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
        -H "x-amz-content-sha256: $EMPTY_SHA256")
else
    bash "$HARNESS/rgw.sh" stop "$SRV_DIR" >/dev/null 2>&1 || true
    # objects + index + headroom, sparse
    export TFS_RGW_BLUESTORE_BYTES=${TFS_RGW_BLUESTORE_BYTES:-$(((OBJECTS * (SIZE + 8192)) * 2 + (8 << 30)))}
    export TFS_RGW_START_TIMEOUT=${TFS_RGW_START_TIMEOUT:-60}
    start_server
fi
SERVER_UP=$STOP # cleanup() stops the server only with --stop
[ "$STOP" = 1 ] || log "the cluster stays up: tests/harness/rgw.sh stop $SRV_DIR"

# ------------------------------------------------------------ dataset ----

PREFIX=n$OBJECTS
# keys OBJECTS: the object keys below the prefix, in the layout above
keys() {
    awk -v n="$1" 'BEGIN { big = int(n / 10); for (i = 0; i < big; i++) printf "big/f%06d\n", i;
        for (i = 0; i < n - big; i++) printf "d%03d/f%04d\n", int(i / 1000), i % 1000 }'
}
code=$(curl -s -o /dev/null -w '%{http_code}' -I -m 30 "${CURL_SIGN[@]}" \
    "$EP/$BUCKET/markers/$PREFIX-s$SIZE") || code=000
if [ "$code" = 200 ]; then
    log "the bucket already holds $OBJECTS objects under $PREFIX/"
else
    log "populating $OBJECTS objects of $SIZE bytes under $PREFIX/ (s3_put, 96 in flight)"
    t0=${EPOCHREALTIME/[.,]/}
    keys "$OBJECTS" | sed "s|^|$PREFIX/|" |
        "$WORK/bin/s3_put" "$EP" "$BUCKET" "$REGION" "$SIZE" 96 2>>"$RUN/logs/populate.err" ||
        die "populate failed; see $RUN/logs/populate.err"
    t1=${EPOCHREALTIME/[.,]/}
    log "populated in $(((t1 - t0) / 1000000)) s"
    curl -s -o /dev/null -X PUT -m 30 "${CURL_SIGN[@]}" "$EP/$BUCKET/markers/$PREFIX-s$SIZE" ||
        die "writing the marker failed"
fi
BIG_N=$((OBJECTS / 10))
STEP=$((OBJECTS / EPOCH))
keys "$OBJECTS" | awk -v s="$STEP" -v e="$EPOCH" -v z="$SIZE" \
    'NR % s == 1 % s && n < e { printf "%s\t%d\n", $0, z; n++ }' >"$RUN/epoch.tsv"

# ------------------------------------------------------------- mounts ----

peer_configs
MOUNT_PREFIX=$PREFIX
# the mount commands of the report, with the prefix mount_fs adds
TIERFS_CMD=${TIERFS_CMD/"s3://$BUCKET "/"s3://$BUCKET/$PREFIX "}
RCLONE_CMD=${RCLONE_CMD/"bench:$BUCKET "/"bench:$BUCKET/$PREFIX "}
S3FS_CMD=${S3FS_CMD/"s3fs $BUCKET "/"s3fs $BUCKET:/$PREFIX "}

# daemon_pid FS: the process that serves the mount (for tierfs the
# daemon its supervisor started, from `tierfs stats`)
daemon_pid() {
    local pid
    if [ "$(peer_prog "$1")" = tierfs ]; then
        pid=$("$TIERFS" stats --json "$CUR_MNT" 2>/dev/null |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null) || pid=
        [ -n "$pid" ] && echo "$pid" && return
    fi
    echo "$CUR_PID"
}

# sampler PID FILE: write the peak RssAnon (KiB) of PID to FILE every 100 ms
# until PID exits or the sampler is killed
sampler() {
    local pid=$1 out=$2 peak=0 k v _
    while [ -r "/proc/$pid/status" ]; do
        while read -r k v _; do
            if [ "$k" = RssAnon: ]; then
                [ "$v" -gt "$peak" ] && peak=$v && echo "$peak" >"$out"
                break
            fi
        done <"/proc/$pid/status" 2>/dev/null || true
        sleep 0.1
    done
}

cpu_secs() { # cpu_secs PID: utime + stime of PID in seconds
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' \
        "/proc/$1/stat" 2>/dev/null || echo 0
}

# run_wl FS WORKLOAD COMMAND...: on a fresh mount with an empty cache and
# the page cache dropped, run COMMAND (its first word: a path made relative
# to the mount) and record its time, the daemon's peak RssAnon and CPU time
run_wl() {
    local fs=$1 wl=$2 pid spid t0 t1 rc=0 limit=0 secs peak cpu0 cpu1 out files
    shift 2
    fresh_cache "$fs"
    if ! mount_fs "$fs"; then
        record "$fs" "$wl" fail 0 0 0 0
        return
    fi
    pid=$(daemon_pid "$fs")
    echo 0 >"$RUN/peak.$fs.$wl"
    sampler "$pid" "$RUN/peak.$fs.$wl" &
    spid=$!
    drop_caches
    case "$(peer_prog "$fs")" in
        rclone) limit=$PEER_LIMIT ;;
        s3fs) limit=$S3FS_LIMIT ;;
    esac
    cpu0=$(cpu_secs "$pid")
    t0=${EPOCHREALTIME/[.,]/}
    out=$(cd "$CUR_MNT" && timeout "$limit" "$@" 2>>"$RUN/logs/reader.err") || rc=$?
    t1=${EPOCHREALTIME/[.,]/}
    cpu1=$(cpu_secs "$pid")
    if [ "$(peer_prog "$fs")" = tierfs ]; then
        "$TIERFS" stats --json "$CUR_MNT" >"$RUN/logs/stats.$fs.$wl.json" 2>/dev/null || true
        cp "/proc/$pid/smaps_rollup" "$RUN/logs/smaps.$fs.$wl" 2>/dev/null || true
    fi
    sleep 0.2
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    peak=$(cat "$RUN/peak.$fs.$wl")
    secs=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.2f", d / 1e6 }')
    cpu=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')
    files=$(sed -n 's/.*files=\([0-9]*\).*/\1/p' <<<"$out" | head -1)
    [ -n "$files" ] || files=$(wc -l <<<"$out")
    if [ "$rc" = 124 ]; then
        record "$fs" "$wl" timeout "$secs" "$peak" "$cpu" 0
        log "$fs $wl: stopped at the limit of $limit s (peak RssAnon $((peak / 1024)) MiB)"
    elif [ "$rc" != 0 ]; then
        record "$fs" "$wl" fail "$secs" "$peak" "$cpu" "$files"
        log "$fs $wl: FAILED (rc $rc) after $secs s; see $RUN/logs/reader.err"
    else
        record "$fs" "$wl" ok "$secs" "$peak" "$cpu" "$files"
        log "$fs $wl: $files entries in $secs s, daemon CPU $cpu s, peak RssAnon $((peak / 1024)) MiB"
    fi
    umount_current
}

# wanted FS WORKLOAD: whether FS runs WORKLOAD (else it is recorded as
# skipped)
wanted() {
    [ "$(peer_prog "$1")" = tierfs ] && return 0
    case ",$PEER_WL," in *",$2,"*) return 0 ;; esac
    record "$1" "$2" skip 0 0 0 0
    return 1
}

select_peers
for fs in $ACTIVE; do
    if wanted "$fs" ls; then
        log "$fs: ls -l big/ ($BIG_N entries)"
        run_wl "$fs" ls sh -c 'ls -l big | tail -n +2'
    fi
    if wanted "$fs" walk; then
        log "$fs: walk"
        run_wl "$fs" walk "$READER" walk .
    fi
    if wanted "$fs" epoch; then
        log "$fs: epoch of $EPOCH files, $THREADS threads"
        run_wl "$fs" epoch "$READER" read . "$RUN/epoch.tsv" "$THREADS" "$SEED"
    fi
done

# ------------------------------------------------------------- report ----

machine_meta
peer_meta
meta objects "$OBJECTS of $SIZE bytes under $PREFIX/: big/ with $BIG_N, $(((OBJECTS - BIG_N + 999) / 1000)) directories of up to 1,000"
meta epoch "$EPOCH files (every ${STEP}th key), $THREADS threads, seed $SEED"
meta peer_limit "time limit per workload: rclone $PEER_LIMIT s, s3fs $S3FS_LIMIT s"
meta server_store "$(grep -m1 '^osd objectstore' "$SRV_DIR/ceph/ceph.conf" | sed 's/.*= //')"
finish_report "$BENCH_DIR/scale_report.py"
