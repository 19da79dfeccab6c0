#!/usr/bin/env bash
# bench/run.sh — compare tierfs with s3fs and rclone mount on a loopback S3
# server, against curl and local-disk baselines, in one run.
#
#   bench/run.sh [--server rgw|moto] [--only LIST] [--fs LIST] [--small N]
#                [--big MIB] [--threads N] [--reps N] [--warm-remount]
#                [--out FILE]
#
#   --server rgw|moto   S3 server from tests/harness (default rgw: a throwaway
#                       single-node Ceph RGW on memstore; moto is far slower)
#   --only LIST         comma-separated workloads: walk, seq, epoch (default
#                       all three), or "baseline" for the baselines alone
#   --fs LIST           comma-separated peers (default s3fs,rclone,tierfs)
#   --small N           number of ~110 KiB files (default 3000)
#   --big MIB           size of the big object in MiB (default 512)
#   --threads N         reader threads for the small-file epochs (default 8)
#   --reps N            repetitions of everything; the report shows medians
#                       (default 3)
#   --warm-remount      warm runs remount the FS (keeping its disk cache)
#                       instead of only dropping the page cache
#   --out FILE          also append the Markdown report to FILE
#
# Environment: TIERFS (tierfs binary; default build/tierfs of this repo if it
# exists — used only when `$TIERFS mount --help` exits 0), S3FS_OPTS,
# RCLONE_OPTS, TIERFS_OPTS (extra words for the mount commands),
# TFS_BENCH_DIR (work dir, default /var/tmp/tierfs-bench; the generated
# dataset is cached there), TFS_TEST_BUCKET (default tierfs-test).
#
# Needs root (drop_caches, FUSE mounts).  Everything listens on 127.0.0.1;
# the EXIT trap unmounts, stops the daemons it started (by recorded pid) and
# stops the server.  See bench/README.md.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
HARNESS=$REPO/tests/harness
COMMAND=$(printf '%q ' "$0" "$@")
COMMAND=${COMMAND% }

SERVER=rgw
ONLY=walk,seq,epoch
FS_LIST=s3fs,rclone,tierfs
SMALL=3000
BIG=512
THREADS=8
REPS=3
WARM_REMOUNT=0
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
# seeds of the three small-file epochs (cold, warm, hot)
SEED_COLD=1
SEED_WARM=2
SEED_HOT=3
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --server) SERVER=${2:?}; shift 2 ;;
        --only) ONLY=${2:?}; shift 2 ;;
        --fs) FS_LIST=${2:?}; shift 2 ;;
        --small) SMALL=${2:?}; shift 2 ;;
        --big) BIG=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --warm-remount) WARM_REMOUNT=1; shift ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
    esac
done

case "$SERVER" in rgw | moto) ;; *) echo "run.sh: --server must be rgw or moto" >&2; exit 2 ;; esac
case "$SMALL$BIG$THREADS$REPS" in *[!0-9]*) echo "run.sh: --small, --big, --threads, --reps take numbers" >&2; exit 2 ;; esac
if [ "$SMALL" -lt 1 ] || [ "$BIG" -lt 1 ] || [ "$THREADS" -lt 1 ] || [ "$REPS" -lt 1 ]; then
    echo "run.sh: sizes must be >= 1" >&2
    exit 2
fi

DO_WALK=0 DO_SEQ=0 DO_EPOCH=0 PEERS_ON=1
for w in ${ONLY//,/ }; do
    case "$w" in
        walk) DO_WALK=1 ;;
        seq) DO_SEQ=1 ;;
        epoch) DO_EPOCH=1 ;;
        baseline) PEERS_ON=0 ;;
        *) echo "run.sh: unknown workload '$w' (walk, seq, epoch, baseline)" >&2; exit 2 ;;
    esac
done
if [ $((DO_WALK + DO_SEQ + DO_EPOCH)) -eq 0 ]; then DO_WALK=1 DO_SEQ=1 DO_EPOCH=1; fi
PEERS=
if [ "$PEERS_ON" = 1 ]; then
    for p in ${FS_LIST//,/ }; do
        case "$p" in s3fs | rclone | tierfs) PEERS="$PEERS $p" ;; *) echo "run.sh: unknown fs '$p'" >&2; exit 2 ;; esac
    done
fi

T_START=${EPOCHREALTIME/[.,]/}
log() {
    local t=${EPOCHREALTIME/[.,]/}
    printf '[%6.1fs] %s\n' "$(((t - T_START) / 100000))e-1" "$*" >&2
}
die() {
    echo "run.sh: $*" >&2
    exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

# ------------------------------------------------------------ tools ----

need_pkgs=
for t in curl gcc python3 findmnt mountpoint; do
    command -v "$t" >/dev/null || die "$t not found"
done
command -v fusermount3 >/dev/null || command -v fusermount >/dev/null || need_pkgs="$need_pkgs fuse3"
for p in $PEERS; do
    case "$p" in
        s3fs) command -v s3fs >/dev/null || need_pkgs="$need_pkgs s3fs" ;;
        rclone) command -v rclone >/dev/null || need_pkgs="$need_pkgs rclone" ;;
    esac
done
if [ -n "$need_pkgs" ]; then
    log "installing$need_pkgs with apt-get"
    # shellcheck disable=SC2086 # a list of package names
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need_pkgs >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need_pkgs >/dev/null 2>&1; } ||
        log "apt-get install$need_pkgs failed; those peers will be skipped"
fi
python3 -c 'import boto3' 2>/dev/null ||
    die "python3 has no boto3 (apt-get install python3-boto3, or pip install boto3)"
if [ "$SERVER" = rgw ]; then
    command -v radosgw >/dev/null || die "radosgw not found (apt-get install radosgw ceph-mon ceph-osd)"
else
    command -v moto_server >/dev/null || die "moto_server not found (pip install 'moto[server]')"
fi

if [ -z "${TIERFS:-}" ] && [ -x "$REPO/build/tierfs" ]; then
    TIERFS=$REPO/build/tierfs
fi
TIERFS_OK=0
if [ -n "${TIERFS:-}" ] && [ -x "$TIERFS" ] && "$TIERFS" mount --help >/dev/null 2>&1; then
    TIERFS_OK=1
fi

mkdir -p "$WORK/bin"
READER=$WORK/bin/epoch_reader
if [ ! -x "$READER" ] || [ "$BENCH_DIR/epoch_reader.c" -nt "$READER" ]; then
    gcc -O2 -std=c11 -Wall -pthread -o "$READER.tmp" "$BENCH_DIR/epoch_reader.c" ||
        die "compiling epoch_reader.c failed"
    mv "$READER.tmp" "$READER"
fi

# ------------------------------------------------------ run dir, trap ----

RUN=$(mktemp -d "$WORK/run.XXXXXX")
mkdir -p "$RUN/logs" "$RUN/mnt"
: >"$RUN/results.tsv"
: >"$RUN/meta.tsv"
SERVER_DIR=$RUN/server
CUR_FS='' CUR_PID='' CUR_MNT='' SERVER_UP=0 SUCCESS=0

meta() { printf '%s\t%s\n' "$1" "$2" >>"$RUN/meta.tsv"; }

# fs_alive PID NAME: PID is alive and runs NAME (our FUSE daemon)
fs_alive() {
    local cmd
    [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] || return 1
    cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
    [ -n "$cmd" ] || return 1 # zombie
    case "$cmd" in *"$2"*) return 0 ;; esac
    return 1
}

# umount_current: unmount the current FS and make sure its daemon is gone
umount_current() {
    local name
    [ -n "$CUR_FS" ] || return 0
    name=$CUR_FS
    [ "$name" = tierfs ] && name=$(basename "$TIERFS")
    if mountpoint -q "$CUR_MNT" 2>/dev/null; then
        fusermount3 -u "$CUR_MNT" 2>/dev/null || fusermount -u "$CUR_MNT" 2>/dev/null ||
            umount "$CUR_MNT" 2>/dev/null || umount -l "$CUR_MNT" 2>/dev/null || true
    fi
    # the daemon exits by itself once unmounted (s3fs and rclone take a
    # second or two to tidy up)
    for _ in $(seq 300); do fs_alive "$CUR_PID" "$name" || break; sleep 0.1; done
    if fs_alive "$CUR_PID" "$name"; then
        log "$CUR_FS (pid $CUR_PID) still running 30 s after unmount: SIGTERM"
        kill -TERM "$CUR_PID" 2>/dev/null || true
        for _ in $(seq 50); do fs_alive "$CUR_PID" "$name" || break; sleep 0.1; done
        if fs_alive "$CUR_PID" "$name"; then kill -KILL "$CUR_PID" 2>/dev/null || true; fi
    fi
    wait "$CUR_PID" 2>/dev/null || true
    if mountpoint -q "$CUR_MNT" 2>/dev/null; then umount -l "$CUR_MNT" 2>/dev/null || true; fi
    CUR_FS='' CUR_PID='' CUR_MNT=''
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    umount_current
    if [ "$SERVER_UP" = 1 ]; then
        bash "$HARNESS/$SERVER.sh" stop "$SERVER_DIR" >/dev/null 2>&1 || true
    fi
    rm -rf "${RUN:?}/cache" "${RUN:?}/mnt"
    if [ "$SUCCESS" = 1 ]; then
        rm -rf "$RUN"
    else
        echo "run.sh: failed (rc $rc); logs kept in $RUN" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

# record FS WORKLOAD STATUS FILES BYTES SECS (for repetition $REP)
REP=1
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" "$REP" >>"$RUN/results.tsv"
}

# measure FS WORKLOAD [EXPECT_FILES] -- COMMAND...: run an epoch_reader
# command, record its files/bytes/secs (or a failure)
measure() {
    local fs=$1 wl=$2 expect=$3 out rc files bytes secs
    shift 4
    rc=0
    out=$("$@" 2>>"$RUN/logs/reader.err") || rc=$?
    files=$(sed -n 's/.*files=\([0-9]*\).*/\1/p' <<<"$out")
    bytes=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' <<<"$out")
    secs=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")
    if [ "$rc" != 0 ] || [ -z "$secs" ]; then
        log "$fs $wl: FAILED (rc $rc; see $RUN/logs/reader.err) $out"
        record "$fs" "$wl" fail 0 0 0
        return 1
    fi
    if [ -n "$expect" ] && [ "$files" != "$expect" ]; then
        log "$fs $wl: FAILED: saw $files files, expected $expect"
        record "$fs" "$wl" fail "$files" "$bytes" "$secs"
        return 1
    fi
    record "$fs" "$wl" ok "$files" "$bytes" "$secs"
    log "$fs $wl: $(awk -v f="$files" -v b="$bytes" -v s="$secs" -v w="$wl" \
        'BEGIN { if (w == "walk") printf "%d files in %.3f s", f, s;
                 else if (f == 1) printf "%.1f MiB in %.3f s = %.1f MiB/s", b/1048576, s, b/1048576/s;
                 else printf "%d files, %.1f MiB in %.3f s = %.0f files/s, %.1f MiB/s", f, b/1048576, s, f/s, b/1048576/s }')"
}

# ------------------------------------------------------------ dataset ----

DATA=$WORK/dataset-n$SMALL-b$BIG
if [ ! -f "$DATA/.complete" ]; then
    log "generating the dataset in $DATA"
    python3 "$BENCH_DIR/dataset.py" gen "$DATA" "$SMALL" "$BIG"
else
    log "reusing the dataset in $DATA"
fi
SMALL_MIB=$(awk -F'\t' '{ s += $2 } END { printf "%.0f", s / 1048576 }' "$DATA/small.tsv")

# ------------------------------------------------------------- server ----

log "starting $SERVER"
if [ "$SERVER" = rgw ]; then
    # memstore keeps the objects in RAM: dataset + headroom
    export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$(((SMALL * 140 * 1024 + BIG * 1048576) * 3 / 2 + (1 << 30)))}
fi
SERVER_UP=1
bash "$HARNESS/$SERVER.sh" start "$SERVER_DIR" 2>>"$RUN/logs/server.err" ||
    { cat "$RUN/logs/server.err" >&2; die "starting $SERVER failed"; }
# shellcheck disable=SC1091
. "$SERVER_DIR/env"
BUCKET=$TFS_TEST_BUCKET
EP=$TFS_S3_ENDPOINT
REGION=${TFS_S3_REGION:-us-east-1}
if [ "$SERVER" = rgw ]; then
    SERVER_VERSION=$(radosgw --version 2>/dev/null | head -1 | sed 's/ (.*//')
else
    SERVER_VERSION="moto $(python3 -c 'import moto; print(moto.__version__)' 2>/dev/null)"
fi
log "$SERVER up at $EP; uploading"
t0=${EPOCHREALTIME/[.,]/}
python3 "$BENCH_DIR/dataset.py" upload "$DATA" 2>&1 | sed 's/^/    /' >&2
t1=${EPOCHREALTIME/[.,]/}
UPLOAD_SECS=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1e6 }')

CURL_SIGN=(--aws-sigv4 "aws:amz:$REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
    -H "x-amz-content-sha256: $EMPTY_SHA256")

# ------------------------------------------------------------ peers ----

printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$RUN/s3fs.passwd"
chmod 600 "$RUN/s3fs.passwd"
PROVIDER=Ceph
[ "$SERVER" = moto ] && PROVIDER=Other
cat >"$RUN/rclone.conf" <<EOF
[bench]
type = s3
provider = $PROVIDER
endpoint = $EP
region = $REGION
access_key_id = $AWS_ACCESS_KEY_ID
secret_access_key = $AWS_SECRET_ACCESS_KEY
force_path_style = true
EOF
chmod 600 "$RUN/rclone.conf"
cat >"$RUN/tierfs.conf" <<EOF
[backend]
endpoint = $EP
region = $REGION
path_style = true
[log]
file = $RUN/logs/tierfs.log
EOF

S3FS_CMD="s3fs $BUCKET MNT -f -o url=$EP -o use_path_request_style -o passwd_file=FILE -o use_cache=CACHE -o endpoint=$REGION -o sigv4${S3FS_OPTS:+ $S3FS_OPTS}"
RCLONE_CMD="rclone mount bench:$BUCKET MNT --vfs-cache-mode full --cache-dir CACHE (provider $PROVIDER, force_path_style)${RCLONE_OPTS:+ $RCLONE_OPTS}"
TIERFS_CMD="tierfs mount -c CONF -o ssd.dir=CACHE -f s3://$BUCKET MNT${TIERFS_OPTS:+ $TIERFS_OPTS}"

# mount_fs FS: mount FS on $RUN/mnt/FS with its cache in $RUN/cache/FS
mount_fs() {
    local fs=$1 mnt=$RUN/mnt/$1 cache=$RUN/cache/$1 name=$1
    mkdir -p "$mnt" "$cache"
    case "$fs" in
        s3fs)
            # shellcheck disable=SC2086
            s3fs "$BUCKET" "$mnt" -f -o url="$EP" -o use_path_request_style \
                -o passwd_file="$RUN/s3fs.passwd" -o use_cache="$cache" \
                -o endpoint="$REGION" -o sigv4 ${S3FS_OPTS:-} \
                </dev/null >>"$RUN/logs/s3fs.log" 2>&1 &
            ;;
        rclone)
            # shellcheck disable=SC2086
            rclone mount --config "$RUN/rclone.conf" "bench:$BUCKET" "$mnt" \
                --vfs-cache-mode full --cache-dir "$cache" \
                --log-file "$RUN/logs/rclone.log" ${RCLONE_OPTS:-} \
                </dev/null >>"$RUN/logs/rclone.out" 2>&1 &
            ;;
        tierfs)
            name=$(basename "$TIERFS")
            # shellcheck disable=SC2086
            "$TIERFS" mount -c "$RUN/tierfs.conf" -o ssd.dir="$cache" ${TIERFS_OPTS:-} \
                -f "s3://$BUCKET" "$mnt" </dev/null >>"$RUN/logs/tierfs.out" 2>&1 &
            ;;
    esac
    CUR_FS=$fs CUR_PID=$! CUR_MNT=$mnt
    echo "$CUR_PID" >"$RUN/$fs.pid"
    for _ in $(seq 600); do
        mountpoint -q "$mnt" && return 0
        if ! fs_alive "$CUR_PID" "$name"; then
            log "$fs exited before mounting; see $RUN/logs/$fs.*"
            tail -n 5 "$RUN/logs/$fs".* >&2 2>/dev/null || true
            umount_current
            return 1
        fi
        sleep 0.05
    done
    log "$fs did not mount within 30 s"
    umount_current
    return 1
}

# remount_fs FS: unmount and mount again, keeping the disk cache
remount_fs() {
    umount_current
    mount_fs "$1"
}

fresh_cache() {
    rm -rf "$RUN/cache/$1"
}

# ---------------------------------------------------------- baselines ----

run_baselines() {
    local out code size secs t0 t1 n200 nbytes
    if [ "$DO_WALK" = 1 ]; then
        log "baseline: walk of the local copy (page cache dropped)"
        drop_caches
        measure local walk "$((SMALL + 1))" -- "$READER" walk "$DATA/objects" || true
    fi
    if [ "$DO_SEQ" = 1 ]; then
        log "baseline: one curl GET of the $BIG MiB object"
        drop_caches
        out=$(curl -sS -o /dev/null -w '%{http_code} %{size_download} %{time_total}' "${CURL_SIGN[@]}" \
            "$EP/$BUCKET/big/shard-00000.tar" 2>>"$RUN/logs/curl.err") || out="000 0 0"
        read -r code size secs <<<"$out"
        if [ "$code" = 200 ] && [ "$size" = $((BIG * 1048576)) ]; then
            record curl big_cold ok 1 "$size" "$secs"
            log "curl big_cold: $(awk -v b="$size" -v s="$secs" 'BEGIN { printf "%.1f MiB/s (%.3f s)", b/1048576/s, s }')"
        else
            record curl big_cold fail 0 0 0
            log "curl big_cold: FAILED (HTTP $code, $size bytes)"
        fi
        log "baseline: local copy of the $BIG MiB object (page cache dropped)"
        drop_caches
        measure local big_warm 1 -- "$READER" read "$DATA/objects" "$DATA/big.tsv" 1 0 || true
    fi
    if [ "$DO_EPOCH" = 1 ]; then
        log "baseline: $SMALL GETs, $THREADS in parallel (curl --parallel)"
        "$READER" order "$DATA/small.tsv" "$SEED_COLD" |
            awk -v ep="$EP/$BUCKET" '{ print "url = \"" ep "/" $1 "\"\noutput = \"/dev/null\"" }' >"$RUN/curl-small.cfg"
        drop_caches
        t0=${EPOCHREALTIME/[.,]/}
        curl -sS --parallel --parallel-max "$THREADS" -K "$RUN/curl-small.cfg" "${CURL_SIGN[@]}" \
            -w '%{http_code} %{size_download}\n' >"$RUN/curl-small.out" 2>>"$RUN/logs/curl.err" || true
        t1=${EPOCHREALTIME/[.,]/}
        read -r n200 nbytes <<<"$(awk '$1 == 200 { n++; b += $2 } END { print n + 0, b + 0 }' "$RUN/curl-small.out")"
        secs=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.6f", d / 1e6 }')
        if [ "$n200" = "$SMALL" ]; then
            record curl small_cold ok "$n200" "$nbytes" "$secs"
            log "curl small_cold: $(awk -v f="$n200" -v b="$nbytes" -v s="$secs" 'BEGIN { printf "%.0f files/s, %.1f MiB/s (%.2f s)", f/s, b/1048576/s, s }')"
        else
            record curl small_cold fail 0 0 0
            log "curl small_cold: FAILED ($n200 of $SMALL GETs answered 200)"
        fi
        log "baseline: local copy, $THREADS threads, page cache dropped, then hot"
        drop_caches
        measure local small_warm "$SMALL" -- "$READER" read "$DATA/objects" "$DATA/small.tsv" "$THREADS" "$SEED_WARM" || true
        measure local small_hot "$SMALL" -- "$READER" read "$DATA/objects" "$DATA/small.tsv" "$THREADS" "$SEED_HOT" || true
    fi
}

# -------------------------------------------------------------- peers ----

skip_all() { # skip_all FS: record every selected workload as skipped
    local w
    [ "$DO_WALK" = 1 ] && record "$1" walk skip 0 0 0
    if [ "$DO_SEQ" = 1 ]; then for w in big_cold big_warm; do record "$1" "$w" skip 0 0 0; done; fi
    if [ "$DO_EPOCH" = 1 ]; then for w in small_cold small_warm small_hot; do record "$1" "$w" skip 0 0 0; done; fi
    return 0
}

warm_step() { # warm_step FS: what separates a cold run from the warm one
    if [ "$WARM_REMOUNT" = 1 ]; then remount_fs "$1" || return 1; fi
    drop_caches
}

# run_peer FS: every selected workload on FS, each on a fresh mount with an
# empty cache
run_peer() {
    local fs=$1 mnt=$RUN/mnt/$1 w
    if [ "$DO_WALK" = 1 ]; then
        log "$fs: walk on a fresh mount"
        fresh_cache "$fs"
        drop_caches
        if mount_fs "$fs"; then
            measure "$fs" walk "$((SMALL + 1))" -- "$READER" walk "$mnt" || true
        else
            record "$fs" walk fail 0 0 0
        fi
        umount_current
    fi
    if [ "$DO_SEQ" = 1 ]; then
        log "$fs: $BIG MiB sequential read, cold then warm"
        fresh_cache "$fs"
        drop_caches
        if mount_fs "$fs"; then
            measure "$fs" big_cold 1 -- "$READER" read "$mnt" "$DATA/big.tsv" 1 0 || true
            if warm_step "$fs"; then
                measure "$fs" big_warm 1 -- "$READER" read "$mnt" "$DATA/big.tsv" 1 0 || true
            else
                record "$fs" big_warm fail 0 0 0
            fi
        else
            record "$fs" big_cold fail 0 0 0
            record "$fs" big_warm fail 0 0 0
        fi
        umount_current
    fi
    if [ "$DO_EPOCH" = 1 ]; then
        log "$fs: $SMALL small files, $THREADS threads: cold, warm, hot epochs"
        fresh_cache "$fs"
        drop_caches
        if mount_fs "$fs"; then
            measure "$fs" small_cold "$SMALL" -- "$READER" read "$mnt" "$DATA/small.tsv" "$THREADS" "$SEED_COLD" || true
            if warm_step "$fs"; then
                measure "$fs" small_warm "$SMALL" -- "$READER" read "$mnt" "$DATA/small.tsv" "$THREADS" "$SEED_WARM" || true
                measure "$fs" small_hot "$SMALL" -- "$READER" read "$mnt" "$DATA/small.tsv" "$THREADS" "$SEED_HOT" || true
            else
                record "$fs" small_warm fail 0 0 0
                record "$fs" small_hot fail 0 0 0
            fi
        else
            for w in small_cold small_warm small_hot; do record "$fs" "$w" fail 0 0 0; done
        fi
        umount_current
    fi
    fresh_cache "$fs"
}

ACTIVE=
for fs in $PEERS; do
    if [ "$fs" = tierfs ]; then
        if [ "$TIERFS_OK" != 1 ]; then
            echo "tierfs: skipped (no mount support yet)" >&2
            skip_all tierfs
            continue
        fi
    elif ! command -v "$fs" >/dev/null; then
        echo "$fs: skipped (not installed)" >&2
        skip_all "$fs"
        continue
    fi
    ACTIVE="$ACTIVE $fs"
done

# repetitions are interleaved so that drift on a noisy machine hits every
# peer and baseline alike; the report shows medians
for REP in $(seq "$REPS"); do
    log "---- repetition $REP of $REPS"
    run_baselines
    for fs in $ACTIVE; do
        run_peer "$fs"
    done
done

# ------------------------------------------------------------- report ----

T_END=${EPOCHREALTIME/[.,]/}
src=$(findmnt -no SOURCE -T "$WORK" 2>/dev/null | head -1)
fstype=$(findmnt -no FSTYPE -T "$WORK" 2>/dev/null | head -1)
disk="$fstype on $src"
dev=$(lsblk -no PKNAME "$src" 2>/dev/null | head -1)
[ -n "$dev" ] || dev=$(basename "$src")
if [ -e "/sys/block/$dev" ]; then
    rota=$(cat "/sys/block/$dev/queue/rotational" 2>/dev/null || echo "?")
    size=$(lsblk -dno SIZE "/dev/$dev" 2>/dev/null | tr -d ' ')
    model=$(lsblk -dno MODEL "/dev/$dev" 2>/dev/null | sed 's/ *$//')
    ra=$(cat "/sys/block/$dev/queue/read_ahead_kb" 2>/dev/null || echo "?")
    disk="$disk ($size${model:+, $model}, $([ "$rota" = 0 ] && echo non-rotational || echo rotational) per the kernel, read_ahead_kb $ra)"
fi
meta date "$(date -u '+%Y-%m-%d %H:%M UTC')"
meta command "$COMMAND"
meta commit "$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
meta elapsed "$(awk -v d=$((T_END - T_START)) 'BEGIN { printf "%.0f", d / 1e6 }') s (dataset upload $UPLOAD_SECS s)"
meta nproc "$(nproc)"
meta ram "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
meta kernel "$(uname -r)"
meta cpu "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
meta workdir "$WORK"
meta disk "$disk"
meta server "$SERVER"
meta server_version "$SERVER_VERSION"
meta small "$SMALL"
meta small_mib "$SMALL_MIB"
meta big_mib "$BIG"
meta fs "$PEERS"
meta reps "$REPS"
meta peer_s3fs "$(s3fs --version 2>/dev/null | head -1 | sed 's/.*V\([0-9.]*\).*/s3fs \1/'): \`$S3FS_CMD\`"
meta peer_rclone "$(rclone version 2>/dev/null | head -1): \`$RCLONE_CMD\`"
if [ "$TIERFS_OK" = 1 ]; then
    meta peer_tierfs "tierfs $("$TIERFS" --version 2>/dev/null | head -1): \`$TIERFS_CMD\`"
else
    meta peer_tierfs "tierfs: skipped (no mount support yet)"
fi
if [ "$WARM_REMOUNT" = 1 ]; then
    meta warm_mode "unmount + mount again (disk cache kept), then page cache dropped"
else
    meta warm_mode "same mount, page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches)"
fi

report=$(python3 "$BENCH_DIR/report.py" "$RUN") || die "report.py failed"
printf '%s\n' "$report"
if [ -n "$OUT" ]; then
    printf '%s\n\n' "$report" >>"$OUT"
    log "report appended to $OUT"
fi
SUCCESS=1
