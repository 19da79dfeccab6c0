#!/usr/bin/env bash
# bench/write.sh — checkpoint WRITE benchmark: write a big file through
# tierfs, s3fs and rclone mount on a loopback S3 server, and upload the same
# file directly (boto3, `tierfs backend put`), in one run.
#
#   bench/write.sh [--server rgw|moto] [--sizes LIST] [--fs LIST] [--reps N]
#                  [--pin] [--out FILE]
#
#   --server rgw|moto   S3 server from tests/harness (default rgw: a throwaway
#                       single-node Ceph RGW on memstore; moto is far slower)
#   --sizes LIST        comma-separated checkpoint sizes in MiB (default
#                       256,1024)
#   --fs LIST           comma-separated peers (default
#                       s3fs,rclone,rclone-wb0,tierfs; rclone-wb0 is rclone
#                       with --vfs-write-back 0s instead of its 5 s default;
#                       also tierfs-stream, tierfs with
#                       writeback.stream = true: uploads while writing)
#   --reps N            repetitions of everything, interleaved; the report
#                       shows medians (default 3)
#   --pin               the S3 server on CPU 0, everything else on the
#                       other CPUs (bench/README.md)
#   --out FILE          also append the Markdown report to FILE
#
# Each checkpoint is random data generated once into the work dir and read
# into the page cache before every write.  Every write goes to a new key on
# a fresh mount with an empty cache, and measures (1) close latency: open()
# to close() returning, writing the whole file in 4 MiB write()s without
# fsync (ckpt_writer.c), and (2) time until durable: from open() until a
# signed HEAD, polled every 50 ms after close, sees the object with its full
# size.  In the first repetition every object is also fetched and compared
# with the source by sha256.  Baselines: boto3 upload_file (default
# TransferConfig) and `tierfs backend put`, each timed, with the same HEAD
# polling running beside them (its cost is part of every FS's durable time).  Objects are deleted
# after each measurement (and RGW's garbage collected), so the server holds
# one checkpoint at a time.
#
# Environment: TIERFS (tierfs binary; default build/tierfs of this repo if it
# exists — used only when `$TIERFS mount --help` exits 0; the run uses a
# private copy), S3FS_OPTS, RCLONE_OPTS, TIERFS_OPTS (extra words for the
# mount commands), TFS_BENCH_DIR (work dir, default /var/tmp/tierfs-bench;
# the checkpoints are cached there), TFS_TEST_BUCKET (default tierfs-test),
# TFS_RGW_MEMSTORE_BYTES (default 3 × the largest size + 1 GiB).
#
# Needs root (FUSE mounts).  Everything listens on 127.0.0.1; the EXIT trap
# unmounts, stops the daemons it started (by recorded pid) and stops the
# server.  See bench/README.md.
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
SIZES=256,1024
FS_LIST=s3fs,rclone,rclone-wb0,tierfs
REPS=3
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
POLL_US=50000   # HEAD polling interval
BLOCK=4194304   # write() size
MIB=1048576

while [ $# -gt 0 ]; do
    case "$1" in
        --server) SERVER=${2:?}; shift 2 ;;
        --sizes) SIZES=${2:?}; shift 2 ;;
        --fs) FS_LIST=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --pin) PIN=1; shift ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "write.sh: unknown argument '$1'" >&2; usage ;;
    esac
done

case "$SERVER" in rgw | moto) ;; *) echo "write.sh: --server must be rgw or moto" >&2; exit 2 ;; esac
SIZES=${SIZES//,/ }
case "${SIZES// /}$REPS" in '' | *[!0-9]*) echo "write.sh: --sizes and --reps take numbers" >&2; exit 2 ;; esac
MAX_MIB=0
for mib in $SIZES; do
    if [ "$mib" -lt 1 ]; then echo "write.sh: sizes must be >= 1" >&2; exit 2; fi
    [ "$mib" -le "$MAX_MIB" ] || MAX_MIB=$mib
done
if [ "$REPS" -lt 1 ]; then echo "write.sh: --reps must be >= 1" >&2; exit 2; fi
PEERS=
for p in ${FS_LIST//,/ }; do
    case "$p" in s3fs | rclone | rclone-wb0 | tierfs | tierfs-stream) PEERS="$PEERS $p" ;; *) echo "write.sh: unknown fs '$p'" >&2; exit 2 ;; esac
done

[ "$(id -u)" = 0 ] || die "must run as root (FUSE mounts)"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

# ------------------------------------------------------------ tools ----

bench_tools
command -v sha256sum >/dev/null || die "sha256sum not found"
build_tool ckpt_writer
WRITER=$WORK/bin/ckpt_writer

# ------------------------------------------------------ run dir, trap ----

bench_rundir
# run a private copy, so that a rebuild of $TIERFS during the run cannot
# swap the binary between measurements
TIERFS_NOTE=${TIERFS:-}
if [ "$TIERFS_OK" = 1 ]; then
    if [ "$TIERFS" -ef "$REPO/build/tierfs" ] &&
        [ -n "$(git -C "$REPO" status --porcelain -- src cache backends lib 2>/dev/null)" ]; then
        TIERFS_NOTE="build/tierfs, C sources modified in the working tree"
    fi
    mkdir -p "$RUN/bin"
    cp "$TIERFS" "$RUN/bin/tierfs"
    TIERFS=$RUN/bin/tierfs
fi

# record WHO MIB STATUS BYTES TOTAL CLOSE_CALL DURABLE VERIFIED (for
# repetition $REP): TOTAL is open..close returned, CLOSE_CALL the close()
# alone, DURABLE write start..object in the bucket ("-" where it does not
# apply), VERIFIED "sha256" or "-"
REP=1
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" "$REP" >>"$RUN/results.tsv"
}

secs_since() { # secs_since T0_US T1_US: seconds between two EPOCHREALTIME µs
    awk -v d=$(($2 - $1)) 'BEGIN { printf "%.6f", d / 1e6 }'
}

# -------------------------------------------------------- checkpoints ----

CKPT_DIR=$WORK/checkpoints
mkdir -p "$CKPT_DIR"
for mib in $SIZES; do
    f=$CKPT_DIR/ckpt-${mib}M.bin
    if [ -f "$f.sha256" ] && [ "$(stat -c %s "$f" 2>/dev/null)" = $((mib * MIB)) ]; then
        log "reusing the $mib MiB checkpoint $f"
        continue
    fi
    log "generating the $mib MiB checkpoint $f (random bytes)"
    rm -f "$f.sha256"
    head -c $((mib * MIB)) /dev/urandom >"$f.tmp"
    sha256sum <"$f.tmp" | cut -d' ' -f1 >"$f.sha256.tmp"
    mv "$f.tmp" "$f"
    mv "$f.sha256.tmp" "$f.sha256"
done

# preread FILE: make sure FILE is in the page cache
preread() {
    cat "$1" >/dev/null
}

# ------------------------------------------------------------- server ----

if [ "$SERVER" = rgw ]; then
    # memstore keeps the objects in RAM; every object is deleted and garbage
    # collected after its measurement, so a few checkpoints' worth suffices
    export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$((3 * MAX_MIB * MIB + (1 << 30)))}
fi
start_server
pin_cpus
log "$SERVER up at $EP"
peer_configs

# ------------------------------------------------------ object checks ----

# wait_durable KEY BYTES DEADLINE_US: poll a signed HEAD of KEY every
# $POLL_US µs until it answers 200 with Content-Length BYTES; print the
# time (epoch µs) that HEAD returned.  Fails after DEADLINE_US.
wait_durable() {
    local key=$1 bytes=$2 deadline=$3 t0 t1 out code len left
    while :; do
        t0=${EPOCHREALTIME/[.,]/}
        out=$(curl -sS -I -o /dev/null -m 10 -w '%{http_code} %header{content-length}' \
            "${CURL_SIGN[@]}" "$EP/$BUCKET/$key" 2>>"$RUN/logs/curl.err") || out="000 -"
        t1=${EPOCHREALTIME/[.,]/}
        read -r code len <<<"$out"
        if [ "$code" = 200 ] && [ "$len" = "$bytes" ]; then
            echo "$t1"
            return 0
        fi
        [ "$t1" -lt "$deadline" ] || return 1
        left=$((t0 + POLL_US - ${EPOCHREALTIME/[.,]/}))
        if [ "$left" -gt 0 ]; then sleep "$(printf '0.%06d' "$left")"; fi
    done
}

# poll_beside KEY: the HEAD polling of wait_durable, run beside a direct
# upload (until killed) so that the baselines bear the same load as the
# file systems, whose durable time is measured with it: every poll forks a
# curl and costs the server a HEAD, on a box whose two cores the server
# and the client already share.
poll_beside() {
    while :; do
        curl -sS -I -o /dev/null -m 10 "${CURL_SIGN[@]}" "$EP/$BUCKET/$1" 2>/dev/null || true
        sleep "$(printf '0.%06d' "$POLL_US")"
    done
}

# same_bytes KEY MIB: GET KEY and compare its sha256 with the checkpoint's
same_bytes() {
    local got
    got=$(curl -sS -m 600 "${CURL_SIGN[@]}" "$EP/$BUCKET/$1" 2>>"$RUN/logs/curl.err" |
        sha256sum | cut -d' ' -f1) || return 1
    [ "$got" = "$(cat "$CKPT_DIR/ckpt-${2}M.bin.sha256")" ]
}

# remove_object KEY: delete KEY; on RGW, also run the garbage collector
# now, or the deleted data would stay in memstore for rgw_gc_obj_min_wait (2 h)
remove_object() {
    local code
    code=$(curl -sS -o /dev/null -m 60 -w '%{http_code}' -X DELETE "${CURL_SIGN[@]}" \
        "$EP/$BUCKET/$1" 2>>"$RUN/logs/curl.err") || code=000
    [ "$code" = 204 ] || log "warning: DELETE $1 answered HTTP $code"
    if [ "$SERVER" = rgw ]; then
        timeout 300 radosgw-admin -c "$TFS_CEPH_CONF" gc process --include-all >>"$RUN/logs/gc.out" 2>&1 ||
            log "warning: radosgw-admin gc process failed; see $RUN/logs/gc.out"
    fi
}

# settle WHO MIB KEY TOTAL CLOSE_CALL START_US [DURABLE]: wait until KEY is
# durable (unless DURABLE, in seconds, is given), check its bytes in the
# first repetition, record the measurement
settle() {
    local who=$1 mib=$2 key=$3 total=$4 closecall=$5 start=$6 durable=${7:-} bytes found verified=-
    bytes=$((mib * MIB))
    if [ -z "$durable" ]; then
        if ! found=$(wait_durable "$key" "$bytes" $((start + (120 + mib / 4) * 1000000))); then
            log "$who $mib MiB: FAILED: $key did not reach the bucket with $bytes bytes within $((120 + mib / 4)) s"
            record "$who" "$mib" fail "$bytes" "$total" "$closecall" - -
            return 1
        fi
        durable=$(secs_since "$start" "$found")
    elif ! wait_durable "$key" "$bytes" 0 >/dev/null; then
        log "$who $mib MiB: FAILED: $key is not in the bucket with $bytes bytes"
        record "$who" "$mib" fail "$bytes" "$total" "$closecall" - -
        return 1
    fi
    if [ "$REP" = 1 ]; then
        if ! same_bytes "$key" "$mib"; then
            log "$who $mib MiB: FAILED: the object's sha256 differs from the checkpoint's"
            record "$who" "$mib" bad "$bytes" "$total" "$closecall" "$durable" mismatch
            return 1
        fi
        verified=sha256
    fi
    record "$who" "$mib" ok "$bytes" "$total" "$closecall" "$durable" "$verified"
    log "$who $mib MiB: $(awk -v t="$total" -v c="$closecall" -v d="$durable" -v b="$bytes" -v v="$verified" \
        'BEGIN { if (t != "-") printf "close returned after %.3f s (%.0f MiB/s; close() %.3f s), ", t, b/1048576/t, c;
                 printf "durable after %.3f s (%.0f MiB/s)%s", d, b/1048576/d, v == "-" ? "" : ", sha256 ok" }')"
}

# ---------------------------------------------------------- baselines ----

# run_direct WHO MIB: upload the checkpoint straight to the bucket
run_direct() {
    local who=$1 mib=$2 src key out rc=0 t0 t1 secs
    src=$CKPT_DIR/ckpt-${mib}M.bin
    key=ckpt-$who-${mib}M-r$REP.bin
    preread "$src"
    sync
    poll_beside "$key" &
    local poller=$!
    case "$who" in
        boto3)
            out=$(python3 "$BENCH_DIR/dataset.py" put "$src" "$key" 2>>"$RUN/logs/boto3.err") || rc=$?
            secs=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")
            # "threshold=N chunk=N threads=N", for the report
            [ -n "$BOTO3_CFG" ] || BOTO3_CFG=$(awk '{ printf "multipart from %d MiB, %d MiB parts, %s threads",
                substr($3, 11) / 1048576, substr($4, 7) / 1048576, substr($5, 9) }' <<<"$out")
            t0=0
            ;;
        tierfs-put)
            t0=${EPOCHREALTIME/[.,]/}
            "$TIERFS" backend -c "$RUN/tierfs.conf" "s3://$BUCKET" put "$src" "$key" \
                >>"$RUN/logs/tierfs-put.out" 2>&1 || rc=$?
            t1=${EPOCHREALTIME/[.,]/}
            secs=$(secs_since "$t0" "$t1")
            ;;
    esac
    kill "$poller" 2>/dev/null || true
    wait "$poller" 2>/dev/null || true
    if [ "$rc" != 0 ] || [ -z "$secs" ]; then
        log "$who $mib MiB: FAILED (rc $rc; see $RUN/logs/$who.*)"
        record "$who" "$mib" fail $((mib * MIB)) - - - -
    else
        settle "$who" "$mib" "$key" - - "$t0" "$secs" || true
    fi
    remove_object "$key"
}

# -------------------------------------------------------------- peers ----

skip_all() { # skip_all FS: record every size of FS as skipped
    local mib
    for mib in $SIZES; do record "$1" "$mib" skip 0 - - - -; done
}

mount_peer() { # mount_peer FS: mount_fs with the peer's variant options
    case "$1" in
        rclone-wb0) mount_fs "$1" --vfs-write-back 0s ;;
        tierfs-stream) mount_fs "$1" -o writeback.stream=true ;;
        *) mount_fs "$1" ;;
    esac
}

# run_peer FS MIB: write the checkpoint to a new key on a fresh mount
run_peer() {
    local fs=$1 mib=$2 src key out rc=0 start total closecall
    src=$CKPT_DIR/ckpt-${mib}M.bin
    key=ckpt-$fs-${mib}M-r$REP.bin
    fresh_cache "$fs"
    preread "$src"
    if ! mount_peer "$fs"; then
        record "$fs" "$mib" fail $((mib * MIB)) - - - -
        return 0
    fi
    sync
    out=$("$WRITER" "$src" "$RUN/mnt/$fs/$key" "$BLOCK" 2>>"$RUN/logs/writer.err") || rc=$?
    start=$(sed -n 's/.*start_us=\([0-9]*\).*/\1/p' <<<"$out")
    total=$(sed -n 's/.*total=\([0-9.]*\).*/\1/p' <<<"$out")
    closecall=$(sed -n 's/.* close=\([0-9.]*\).*/\1/p' <<<"$out")
    if [ "$rc" != 0 ] || [ -z "$total" ]; then
        log "$fs $mib MiB: FAILED: the write failed (rc $rc; see $RUN/logs/writer.err) $out"
        record "$fs" "$mib" fail $((mib * MIB)) - - - -
    else
        settle "$fs" "$mib" "$key" "$total" "$closecall" "$start" || true
    fi
    umount_current
    fresh_cache "$fs"
    remove_object "$key"
}

select_peers
DIRECT=boto3 BOTO3_CFG=
[ "$TIERFS_OK" = 1 ] && DIRECT="$DIRECT tierfs-put"

# repetitions are interleaved so that drift on a noisy machine hits every
# peer and baseline alike; the report shows medians
for REP in $(seq "$REPS"); do
    log "---- repetition $REP of $REPS"
    for mib in $SIZES; do
        for who in $DIRECT; do
            run_direct "$who" "$mib"
        done
        for fs in $ACTIVE; do
            run_peer "$fs" "$mib"
        done
    done
done

# ------------------------------------------------------------- report ----

machine_meta ""
meta sizes "$SIZES"
meta fs "$PEERS"
meta direct "$DIRECT"
meta reps "$REPS"
peer_meta
meta peer_rclone-wb0 "$(rclone version 2>/dev/null | head -1): the same with \`--vfs-write-back 0s\`"
meta peer_tierfs-stream "the same tierfs with \`-o writeback.stream=true\`"
meta boto3 "boto3 $(python3 -c 'import boto3; print(boto3.__version__)' 2>/dev/null) \`upload_file\` with the default TransferConfig (${BOTO3_CFG:-?})"
if [ "$TIERFS_OK" = 1 ]; then
    meta tierfs_binary "$TIERFS_NOTE"
    # shellcheck disable=SC2086 # TIERFS_OPTS is a list of words
    meta tierfs_write "$("$TIERFS" config -c "$RUN/tierfs.conf" ${TIERFS_OPTS:-} 2>/dev/null |
        awk -F' = ' '/^\[/ { s = substr($0, 2, length($0) - 2) }
                     s == "writeback" && ($1 == "mode" || $1 == "delay" || $1 == "uploaders" || $1 == "stream") ||
                     s == "backend" && ($1 == "multipart_threshold" || $1 == "part_size" || $1 == "upload_parallel") {
                         printf "%s%s.%s = %s", n++ ? ", " : "", s, $1, $2 }')"
fi
meta writer "ckpt_writer: source mmap'd from the page cache, $((BLOCK / MIB)) MiB write()s, close(), no fsync"
meta poll "signed curl HEAD every $((POLL_US / 1000)) ms after close() returns; the same polling runs beside the direct uploads"

finish_report "$BENCH_DIR/write_report.py"
