#!/usr/bin/env bash
# bench/run.sh — compare tierfs with s3fs and rclone mount on a loopback S3
# server, against curl and local-disk baselines, in one run.
#
#   bench/run.sh [--server rgw|moto] [--only LIST] [--fs LIST] [--small N]
#                [--big MIB] [--threads N] [--reps N] [--warm-remount]
#                [--pin] [--out FILE]
#
#   --server rgw|moto   S3 server from tests/harness (default rgw: a throwaway
#                       single-node Ceph RGW on memstore; moto is far slower)
#   --only LIST         comma-separated workloads: walk, seq, epoch (default
#                       all three), or "baseline" for the baselines alone
#   --fs LIST           comma-separated peers (default s3fs,rclone,tierfs)
#   --small N           number of ~110 KiB files (default 3000)
#   --big MIB           size of the big object in MiB (default 512)
#   --threads N         reader threads for the small-file epochs (default 8)
#   --reps N            repetitions of everything, each starting one turn
#                       further along; the report shows medians (default 4)
#   --warm-remount      warm runs remount the FS (keeping its disk cache)
#                       instead of only dropping the page cache
#   --pin               the S3 server on CPU 0, the peers, curl and the
#                       readers on the other CPUs, as if the store ran on
#                       its own machine (needs 2 CPUs)
#   --out FILE          also append the Markdown report to FILE
#
# Environment: TIERFS (tierfs binary; default build/tierfs of this repo if it
# exists — used only when `$TIERFS mount --help` exits 0), S3FS_OPTS,
# RCLONE_OPTS, TIERFS_OPTS (extra words for the mount commands),
# TFS_BENCH_DIR (work dir, default /var/tmp/tierfs-bench; the generated
# dataset is cached there), TFS_TEST_BUCKET (default tierfs-test).
#
# A warm or hot pass of tierfs that made a backend GET (`tierfs stats`) is
# recorded as failed, and the run fails after printing its report, which
# is then not appended to --out (warm_begin/warm_end in bench/common.sh).
#
# Needs root (drop_caches, FUSE mounts).  Everything listens on 127.0.0.1;
# the EXIT trap unmounts, stops the daemons it started (by recorded pid) and
# stops the server.  See bench/README.md.
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
ONLY=walk,seq,epoch
FS_LIST=s3fs,rclone,tierfs
SMALL=3000
BIG=512
THREADS=8
REPS=4
WARM_REMOUNT=0
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
# seeds of the three small-file epochs (cold, warm, hot)
SEED_COLD=1
SEED_WARM=2
SEED_HOT=3

while [ $# -gt 0 ]; do
    case "$1" in
        --server) SERVER=${2:?}; shift 2 ;;
        --only) ONLY=${2:?}; shift 2 ;;
        --fs) FS_LIST=${2:?}; shift 2 ;;
        --small) SMALL=${2:?}; shift 2 ;;
        --big) BIG=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --pin) PIN=1; shift ;;
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

[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

# ------------------------------------------------------------ tools ----

bench_tools

build_tool epoch_reader
READER=$WORK/bin/epoch_reader

# ------------------------------------------------------ run dir, trap ----

bench_rundir

# record FS WORKLOAD STATUS FILES BYTES SECS (for repetition $REP)
REP=1
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" "$REP" >>"$RUN/results.tsv"
}

# measure FS WORKLOAD [EXPECT_FILES] -- COMMAND...: run an epoch_reader
# command, record its files/bytes/secs (or a failure, also when a
# warm_begin came before it and the pass made backend GETs)
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
        WARM_GETS0=''
        return 1
    fi
    if [ -n "$expect" ] && [ "$files" != "$expect" ]; then
        log "$fs $wl: FAILED: saw $files files, expected $expect"
        record "$fs" "$wl" fail "$files" "$bytes" "$secs"
        WARM_GETS0=''
        return 1
    fi
    # a warm pass (warm_begin before it) that made backend GETs
    if ! warm_end "$fs" "$wl"; then
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

if [ "$SERVER" = rgw ]; then
    # memstore keeps the objects in RAM: dataset + headroom
    export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$(((SMALL * 140 * 1024 + BIG * 1048576) * 3 / 2 + (1 << 30)))}
fi
start_server
pin_cpus
log "$SERVER up at $EP; uploading"
t0=${EPOCHREALTIME/[.,]/}
python3 "$BENCH_DIR/dataset.py" upload "$DATA" 2>&1 | sed 's/^/    /' >&2
t1=${EPOCHREALTIME/[.,]/}
UPLOAD_SECS=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.1f", d / 1e6 }')

# ------------------------------------------------------------ peers ----

peer_configs

# remount_fs FS: unmount and mount again, keeping the disk cache
remount_fs() {
    umount_current
    mount_fs "$1"
}

# ---------------------------------------------------------- baselines ----

# big_baseline WHO HTTP_CODE BYTES SECS: record a GET of the big object
big_baseline() {
    if [ "$2" = 200 ] && [ "$3" = $((BIG * 1048576)) ]; then
        record "$1" big_cold ok 1 "$3" "$4"
        log "$1 big_cold: $(awk -v b="$3" -v s="$4" 'BEGIN { printf "%.1f MiB/s (%.3f s)", b/1048576/s, s }')"
    else
        record "$1" big_cold fail 0 0 0
        log "$1 big_cold: FAILED (HTTP $2, $3 bytes)"
    fi
}

# base_get_null, base_get_pipe, base_get_file: one GET of the big object,
# its bytes dropped (the target's baseline), piped to dd, or written to a
# local file.  The first drops every byte; the other two hand them to
# someone, as any filesystem must.  On a box whose CPUs the server shares
# they say how fast the bytes can be consumed at all (docs/benchmarks.md).
base_get_null() {
    local out code size secs
    log "baseline: one curl GET of the $BIG MiB object"
    drop_caches
    out=$(curl -sS -o /dev/null -w '%{http_code} %{size_download} %{time_total}' "${CURL_SIGN[@]}" \
        "$EP/$BUCKET/big/shard-00000.tar" 2>>"$RUN/logs/curl.err") || out="000 0 0"
    read -r code size secs <<<"$out"
    big_baseline curl "$code" "$size" "$secs"
}

base_get_pipe() {
    local out code size t0 t1
    log "baseline: one curl GET of the $BIG MiB object, piped to dd"
    drop_caches
    t0=${EPOCHREALTIME/[.,]/}
    curl -sS -w '%{stderr}\n%{http_code} %{size_download}\n' "${CURL_SIGN[@]}" \
        "$EP/$BUCKET/big/shard-00000.tar" 2>"$RUN/curl-pipe.err" |
        dd of=/dev/null bs=1M iflag=fullblock status=none || true
    t1=${EPOCHREALTIME/[.,]/}
    out=$(tail -n 1 "$RUN/curl-pipe.err")
    cat "$RUN/curl-pipe.err" >>"$RUN/logs/curl.err"
    read -r code size <<<"$out"
    big_baseline curl-pipe "$code" "$size" "$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.6f", d / 1e6 }')"
}

base_get_file() {
    local out code size secs
    log "baseline: one curl GET of the $BIG MiB object into a file on the caches' disk"
    drop_caches
    out=$(curl -sS -o "$RUN/big.download" -w '%{http_code} %{size_download} %{time_total}' \
        "${CURL_SIGN[@]}" "$EP/$BUCKET/big/shard-00000.tar" 2>>"$RUN/logs/curl.err") || out="000 0 0"
    rm -f "$RUN/big.download"
    read -r code size secs <<<"$out"
    big_baseline curl-file "$code" "$size" "$secs"
}

run_baselines() {
    local out code size secs t0 t1 n200 nbytes
    if [ "$DO_WALK" = 1 ]; then
        log "baseline: walk of the local copy (page cache dropped)"
        drop_caches
        measure local walk "$((SMALL + 1))" -- "$READER" walk "$DATA/objects" || true
    fi
    if [ "$DO_SEQ" = 1 ]; then
        # The first GET after other work runs slower on this kind of VM
        # (docs/benchmarks.md), so the three GETs take turns going first.
        local gets=(get_null get_pipe get_file) i
        for i in 0 1 2; do
            "base_${gets[$(((i + REP - 1) % 3))]}"
        done
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
                warm_begin "$fs" "$mnt"
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
                warm_begin "$fs" "$mnt"
                measure "$fs" small_warm "$SMALL" -- "$READER" read "$mnt" "$DATA/small.tsv" "$THREADS" "$SEED_WARM" || true
                warm_begin "$fs" "$mnt"
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

select_peers

# Repetitions are interleaved so that drift on a noisy machine hits every
# peer and baseline alike, and each starts one turn further along the
# list (baselines, then the peers), so that over as many repetitions as
# there are entries each one runs once in every position: running first,
# or right after a teardown (a big cache deleted), does not always fall on
# the same one.  The report shows medians.
# shellcheck disable=SC2206 # ACTIVE is a word list
UNITS=(baselines $ACTIVE)
for REP in $(seq "$REPS"); do
    log "---- repetition $REP of $REPS"
    for i in $(seq 0 $((${#UNITS[@]} - 1))); do
        u=${UNITS[$(((i + REP - 1) % ${#UNITS[@]}))]}
        if [ "$u" = baselines ]; then run_baselines; else run_peer "$u"; fi
    done
done

# ------------------------------------------------------------- report ----

machine_meta "dataset upload $UPLOAD_SECS s"
meta small "$SMALL"
meta small_mib "$SMALL_MIB"
meta big_mib "$BIG"
meta fs "$PEERS"
meta reps "$REPS"
peer_meta
if [ "$WARM_REMOUNT" = 1 ]; then
    meta warm_mode "unmount + mount again (disk cache kept), then page cache dropped"
else
    meta warm_mode "same mount, page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches)"
fi

finish_report "$BENCH_DIR/report.py"
