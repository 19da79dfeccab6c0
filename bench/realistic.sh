#!/usr/bin/env bash
# bench/realistic.sh — tierfs, s3fs and rclone mount against a store that
# behaves like S3 (issue 22, part 1): tests/faults/s3_fault_proxy.py
# --realistic (a time to first byte per reply, a bandwidth cap per
# connection) in front of a loopback server, every client going through
# the proxy, in one run:
#
#   seq     cold sequential read of one big object: each peer on a fresh
#           mount (1 MiB read()s, one thread), one curl GET piped to dd,
#           and N ranged curl GETs covering the object, each piped to its
#           own dd (N = tierfs's GETs in flight for one sequential reader)
#   epoch   cold small-file epoch (THREADS readers, shuffled): each peer,
#           against `xargs -P THREADS curl` over the same keys in the same
#           order; tierfs again with the order written to .tierfs-order
#           first, against `xargs -P ORDER_PAR curl`
#   ceiling the proxy's own limit: the best of CEIL ranged curl GETs of
#           the big object at once, to /dev/null
#
# usage: bench/realistic.sh [--server rgw|moto] [--only LIST] [--fs LIST]
#                           [--big MIB] [--small N] [--threads N]
#                           [--ranged N] [--order-par N] [--ceil LIST]
#                           [--ttfb-ms MS] [--bandwidth-mbps MBPS]
#                           [--reps N] [--pin] [--out FILE]
#
#   --only LIST         seq, epoch (default both; the ceiling always runs)
#   --fs LIST           peers (default s3fs,rclone,tierfs)
#   --big MIB           big object size (default 2048)
#   --small N           number of ~110 KiB files (default 3000)
#   --threads N         reader threads of the epochs, xargs -P of its
#                       baseline (default 8)
#   --ranged N          ranged GETs of the parallel baseline (default:
#                       tierfs's own, from prefetch.readahead and
#                       cache.block_size; see bench/README.md)
#   --order-par N       xargs -P of the sampler-order baseline (default 32)
#   --ceil LIST         parallel GETs of the proxy-ceiling measures; the
#                       best of them is the ceiling (default 8,16,32)
#   --ttfb-ms, --bandwidth-mbps
#                       the proxy's realistic mode (default 30 ms, 90 MB/s)
#   --reps N            repetitions, each starting one turn further along
#                       (default 2); the report shows medians
#   --pin               the server and the proxy on CPU 0, the rest on the
#                       other CPUs
#   --out FILE          also append the Markdown report to FILE
#
# Environment: as bench/run.sh (TIERFS, S3FS_OPTS, RCLONE_OPTS, TIERFS_OPTS,
# TFS_BENCH_DIR, TFS_TEST_BUCKET, TFS_RGW_MEMSTORE_BYTES); TFS_BENCH_PERF=1
# records the FS daemon with perf over each measurement.  Needs root.
# Everything listens on 127.0.0.1.  See bench/README.md.
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
ONLY=seq,epoch
FS_LIST=s3fs,rclone,tierfs
BIG=2048
SMALL=3000
THREADS=8
RANGED=
ORDER_PAR=32
CEIL=8,16,32
TTFB=30
BW=90
REPS=2
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
SEED=1

while [ $# -gt 0 ]; do
    case "$1" in
        --server) SERVER=${2:?}; shift 2 ;;
        --only) ONLY=${2:?}; shift 2 ;;
        --fs) FS_LIST=${2:?}; shift 2 ;;
        --big) BIG=${2:?}; shift 2 ;;
        --small) SMALL=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --ranged) RANGED=${2:?}; shift 2 ;;
        --order-par) ORDER_PAR=${2:?}; shift 2 ;;
        --ceil) CEIL=${2:?}; shift 2 ;;
        --ttfb-ms) TTFB=${2:?}; shift 2 ;;
        --bandwidth-mbps) BW=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --pin) PIN=1; shift ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "realistic.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$SERVER" in rgw | moto) ;; *) echo "realistic.sh: --server must be rgw or moto" >&2; exit 2 ;; esac
case "$BIG$SMALL$THREADS$RANGED$ORDER_PAR${CEIL//,/}$REPS" in
    *[!0-9]*) echo "realistic.sh: sizes and counts are whole numbers" >&2; exit 2 ;;
esac
case "$TTFB$BW" in *[!0-9.]*) echo "realistic.sh: --ttfb-ms, --bandwidth-mbps take numbers" >&2; exit 2 ;; esac
for v in "$BIG" "$SMALL" "$THREADS" "$ORDER_PAR" ${CEIL//,/ } "$REPS" ${RANGED:+"$RANGED"}; do
    [ "$v" -ge 1 ] || { echo "realistic.sh: sizes and counts must be >= 1" >&2; exit 2; }
done
DO_SEQ=0 DO_EPOCH=0
for w in ${ONLY//,/ }; do
    case "$w" in
        seq) DO_SEQ=1 ;;
        epoch) DO_EPOCH=1 ;;
        *) echo "realistic.sh: unknown workload '$w' (seq, epoch)" >&2; exit 2 ;;
    esac
done
PEERS=
for p in ${FS_LIST//,/ }; do
    case "$p" in s3fs | rclone | tierfs) PEERS="$PEERS $p" ;; *) echo "realistic.sh: unknown fs '$p'" >&2; exit 2 ;; esac
done

[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

bench_tools
command -v xargs >/dev/null || die "xargs not found"
build_tool epoch_reader
READER=$WORK/bin/epoch_reader
bench_rundir
# a private copy: a rebuild during the run cannot change the binary under it
if [ "$TIERFS_OK" = 1 ]; then
    cp "$TIERFS" "$RUN/tierfs.bin"
    TIERFS=$RUN/tierfs.bin
fi

REP=1
# record WHO WORKLOAD STATUS FILES BYTES SECS [NOTE]
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$REP" "${7:-}" >>"$RUN/results.tsv"
}
now_us() { echo "${EPOCHREALTIME/[.,]/}"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", (b - a) / 1e6 }'; }

# ------------------------------------------------ tierfs's concurrency ----

# tierfs_setting SECTION.KEY DEFAULT: the value TIERFS_OPTS gives, else
# DEFAULT (the defaults of src/conf.c)
tierfs_setting() {
    local v
    v=$(grep -o -- "$1=[^ ]*" <<<"${TIERFS_OPTS:-}" | tail -1 | cut -d= -f2)
    echo "${v:-$2}"
}
to_bytes() { # 16M -> bytes
    numfmt --from=iec "${1^^}" 2>/dev/null || die "cannot read size '$1'"
}
# src/fs.c read_ahead(): a sequential reader keeps a window of
# max(2 x readahead, stream_gets runs) claimed, fetched in runs of
# readahead/2 (at most TFS_MAX_RUN = 64 blocks), one GET per run, by
# prefetch.workers threads: its GETs in flight are min(window / run, workers).
RA=$(to_bytes "$(tierfs_setting prefetch.readahead 16M)")
BS=$(to_bytes "$(tierfs_setting cache.block_size 1M)")
PF_WORKERS=$(tierfs_setting prefetch.workers 32)
PF_GETS=$(tierfs_setting prefetch.stream_gets 4)
RAM_SIZE=$(to_bytes "$(tierfs_setting ram.size 1G)")
RA_BLOCKS=$(((RA + BS - 1) / BS))
RUN_BLOCKS=$((RA_BLOCKS / 2 > 0 ? RA_BLOCKS / 2 : 1))
[ "$RUN_BLOCKS" -le 64 ] || RUN_BLOCKS=64
TIERFS_N=$(((2 * RA_BLOCKS + RUN_BLOCKS - 1) / RUN_BLOCKS))
[ "$TIERFS_N" -ge "$PF_GETS" ] || TIERFS_N=$PF_GETS
[ "$TIERFS_N" -le "$PF_WORKERS" ] || TIERFS_N=$PF_WORKERS
[ "$TIERFS_N" -ge 1 ] || TIERFS_N=1
N=${RANGED:-$TIERFS_N}
log "tierfs: readahead $RA, block $BS, run $RUN_BLOCKS blocks, stream_gets $PF_GETS, $PF_WORKERS workers: $TIERFS_N GETs in flight; ranged baseline N = $N"

# ------------------------------------------------------------ dataset ----

DATA=$WORK/dataset-n$SMALL-b$BIG
if [ ! -f "$DATA/.complete" ]; then
    log "generating the dataset in $DATA"
    python3 "$BENCH_DIR/dataset.py" gen "$DATA" "$SMALL" "$BIG"
else
    log "reusing the dataset in $DATA"
fi
BIG_BYTES=$((BIG * 1048576))

if [ "$SERVER" = rgw ]; then
    export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$(((SMALL * 140 * 1024 + BIG_BYTES) * 3 / 2 + (1 << 30)))}
fi
start_server
pin_cpus
log "$SERVER up at $EP; uploading"
python3 "$BENCH_DIR/dataset.py" upload "$DATA" 2>&1 | sed 's/^/    /' >&2

# ---------------------------------------------------------------- proxy ----

python3 "$REPO/tests/faults/s3_fault_proxy.py" --upstream "$EP" --no-control --realistic \
    --ttfb-ms "$TTFB" --bandwidth-mbps "$BW" --seed 1 \
    --port-file "$RUN/proxy.port" --log "$RUN/logs/proxy.log" >/dev/null &
PROXY_PID=$!
[ "${PIN:-0}" = 1 ] && taskset -a -p -c 0 "$PROXY_PID" >/dev/null
for _ in $(seq 100); do [ -s "$RUN/proxy.port" ] && break; sleep 0.1; done
[ -s "$RUN/proxy.port" ] || die "the proxy did not start: $(cat "$RUN/logs/proxy.log")"
UPSTREAM=$EP
EP=http://127.0.0.1:$(cat "$RUN/proxy.port")
log "realistic proxy (ttfb $TTFB ms, $BW MB/s per connection) at $EP, pid $PROXY_PID"
trap 'rc=$?; kill "$PROXY_PID" 2>/dev/null; (exit $rc); cleanup' EXIT
peer_configs
BIG_URL=$EP/$BUCKET/big/shard-00000.tar

# --------------------------------------------------------- baselines ----

# ranged_gets P PIPE WHO: P ranged GETs covering the big object at once,
# each piped to its own dd (PIPE=1) or written to /dev/null
ranged_gets() {
    local p=$1 pipe=$2 who=$3 i a b t0 t1 n206 bytes
    : >"$RUN/ranged.out"
    drop_caches
    t0=$(now_us)
    for i in $(seq 0 $((p - 1))); do
        a=$((BIG_BYTES * i / p))
        b=$((BIG_BYTES * (i + 1) / p - 1))
        if [ "$pipe" = 1 ]; then
            { curl -sS -r "$a-$b" -w '%{stderr}%{http_code} %{size_download}\n' "${CURL_SIGN[@]}" \
                "$BIG_URL" 2>>"$RUN/ranged.out" | dd of=/dev/null bs=1M iflag=fullblock status=none; } &
        else
            curl -sS -r "$a-$b" -o /dev/null -w '%{http_code} %{size_download}\n' "${CURL_SIGN[@]}" \
                "$BIG_URL" >>"$RUN/ranged.out" 2>>"$RUN/logs/curl.err" &
        fi
    done
    wait_jobs
    t1=$(now_us)
    read -r n206 bytes <<<"$(awk '$1 == 206 || $1 == 200 { n++; b += $2 } END { printf "%d %.0f\n", n, b }' "$RUN/ranged.out")"
    if [ "$n206" = "$p" ] && [ "$bytes" = "$BIG_BYTES" ]; then
        record "$who" seq ok 1 "$bytes" "$(secs "$t0" "$t1")" "$p GETs"
        log "$who: $(awk -v b="$bytes" -v s="$(secs "$t0" "$t1")" 'BEGIN { printf "%.1f MiB/s (%.2f s)", b/1048576/s, s }')"
    else
        record "$who" seq fail 0 0 0
        log "$who: FAILED ($n206 of $p GETs answered, $bytes bytes)"
        cat "$RUN/ranged.out" >>"$RUN/logs/curl.err"
    fi
}

# wait_jobs: wait for this shell's background jobs, but not for the proxy
wait_jobs() {
    local j
    for j in $(jobs -p); do
        [ "$j" = "$PROXY_PID" ] || [ "$j" = "${CUR_PID:-}" ] || wait "$j" 2>/dev/null || true
    done
}

# xargs_epoch P WHO: every small file, in the epoch's order, with
# `xargs -P P curl` (one curl process per key)
xargs_epoch() {
    local p=$1 who=$2 t0 t1 n200 nbytes s
    drop_caches
    t0=$(now_us)
    xargs -d '\n' -P "$p" -n 1 curl -sS -o /dev/null -w '%{http_code} %{size_download}\n' \
        "${CURL_SIGN[@]}" <"$RUN/order.urls" >"$RUN/xargs.out" 2>>"$RUN/logs/curl.err" || true
    t1=$(now_us)
    s=$(secs "$t0" "$t1")
    read -r n200 nbytes <<<"$(awk '$1 == 200 { n++; b += $2 } END { printf "%d %.0f\n", n, b }' "$RUN/xargs.out")"
    if [ "$n200" = "$SMALL" ]; then
        record "$who" epoch ok "$n200" "$nbytes" "$s"
        log "$who: $(awk -v f="$n200" -v s="$s" 'BEGIN { printf "%.0f files/s (%.2f s)", f/s, s }')"
    else
        record "$who" epoch fail 0 0 0
        log "$who: FAILED ($n200 of $SMALL GETs answered 200)"
    fi
}

run_baselines() {
    local c
    for c in ${CEIL//,/ }; do
        log "baseline: proxy ceiling, $c ranged GETs at once to /dev/null"
        ranged_gets "$c" 0 "ceiling-$c"
    done
    if [ "$DO_SEQ" = 1 ]; then
        # take turns going first (bench/README.md: the first GET after
        # other work runs slower on this VM)
        if [ $((REP % 2)) = 1 ]; then
            ranged_gets 1 1 curl-1; ranged_gets "$N" 1 curl-N
        else
            ranged_gets "$N" 1 curl-N; ranged_gets 1 1 curl-1
        fi
    fi
    if [ "$DO_EPOCH" = 1 ]; then
        if [ $((REP % 2)) = 1 ]; then
            xargs_epoch "$THREADS" xargs-P; xargs_epoch "$ORDER_PAR" xargs-Porder
        else
            xargs_epoch "$ORDER_PAR" xargs-Porder; xargs_epoch "$THREADS" xargs-P
        fi
    fi
}

# -------------------------------------------------------------- peers ----

# rss_anon PID: RssAnon of PID in kB (0 if gone)
rss_anon() {
    local k v _
    while read -r k v _; do
        [ "$k" = RssAnon: ] && { echo "$v"; return 0; }
    done <"/proc/$1/status" 2>/dev/null
    echo 0
}

# cpu_ticks PID: user + system clock ticks of PID and its children (the
# tierfs daemon is a child of the -f keeper)
cpu_ticks() {
    local c t=0 f
    for c in $1 $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        f=$(cut -d')' -f2 "/proc/$c/stat" 2>/dev/null) || continue
        # shellcheck disable=SC2086 # fields after "pid (comm)"
        set -- $f
        t=$((t + ${12} + ${13}))
    done
    echo "$t"
}

# others_ticks: "PROXY SERVER" clock ticks so far of the proxy and of the
# S3 server's processes (their pid files in $SERVER_DIR)
others_ticks() {
    local f p=0 s=0
    p=$(cpu_ticks "$PROXY_PID")
    for f in "$SERVER_DIR"/*.pid; do
        [ -f "$f" ] && s=$((s + $(cpu_ticks "$(cat "$f")")))
    done
    echo "$p $s"
}

# perf_start NAME, perf_stop: with TFS_BENCH_PERF=1, a `perf record -g`
# of the FS's daemon (the keeper's child for tierfs) over the measurement;
# its top symbols go to $WORK/perf-NAME-REP.txt (kept after the run)
PERF_PID=
perf_start() {
    local d
    [ "${TFS_BENCH_PERF:-0}" = 1 ] && command -v perf >/dev/null || return 0
    d=$(cat /proc/"$CUR_PID"/task/*/children 2>/dev/null | awk '{ print $1 }')
    PERF_NAME=$1
    perf record -q -g -o "$RUN/perf.data" -p "${d:-$CUR_PID}" >/dev/null 2>&1 &
    PERF_PID=$!
}
perf_stop() {
    [ -n "$PERF_PID" ] || return 0
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
    PERF_PID=
    perf report -q -i "$RUN/perf.data" --stdio --no-children --sort dso,sym 2>/dev/null |
        grep -v '^$' | grep '%' | head -40 >"$WORK/perf-$PERF_NAME-$REP.txt" || true
    rm -f "$RUN/perf.data"
}

# rss_watch PID FILE: write the peak RssAnon (kB) of PID's daemon into
# FILE, every 0.1 s, until PID exits or this is killed.  tierfs -f runs
# the keeper in PID and the daemon (the caches) in its child, so the
# peak is over PID and its children, each process on its own.
rss_watch() {
    local pid=$1 out=$2 peak=0 c v
    while [ -r "/proc/$pid/status" ]; do
        for c in $pid $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
            v=$(rss_anon "$c")
            if [ "$v" -gt "$peak" ]; then peak=$v; echo "$peak" >"$out"; fi
        done
        sleep 0.1
    done
}

# peer_measure FS WORKLOAD WHO EXPECT LIST THREADS [ORDER]: on a fresh
# mount with an empty cache, epoch_reader over LIST; tierfs's peak RssAnon
# and stats are kept
peer_measure() {
    local fs=$1 wl=$2 who=$3 expect=$4 list=$5 threads=$6 order=${7:-} out rc files bytes s rss_pid note=''
    local cpu0 cpu1 others0 others1
    fresh_cache "$fs"
    drop_caches
    if ! mount_fs "$fs"; then
        record "$who" "$wl" fail 0 0 0
        return 0
    fi
    rm -f "$RUN/rss.peak"
    rss_watch "$CUR_PID" "$RUN/rss.peak" &
    rss_pid=$!
    if [ -n "$order" ]; then
        # the sampler's order, as tierfs.torch.Sampler writes it
        cp "$order" "$CUR_MNT/.tierfs-order"
    fi
    rc=0
    cpu0=$(cpu_ticks "$CUR_PID")
    others0=$(others_ticks)
    perf_start "$who-$wl"
    out=$("$READER" read "$CUR_MNT" "$list" "$threads" "$SEED" 2>>"$RUN/logs/reader.err") || rc=$?
    perf_stop
    cpu1=$(cpu_ticks "$CUR_PID")
    others1=$(others_ticks)
    if [ "$fs" = tierfs ]; then
        "$TIERFS" stats --json "$CUR_MNT" >"$RUN/logs/stats-$who-$wl-$REP.json" 2>/dev/null || true
        [ "${TFS_BENCH_PERF:-0}" = 1 ] && cp "$RUN/logs/stats-$who-$wl-$REP.json" "$WORK/" 2>/dev/null || true
    fi
    kill "$rss_pid" 2>/dev/null || true
    wait "$rss_pid" 2>/dev/null || true
    [ -s "$RUN/rss.peak" ] && note="rss_kb=$(cat "$RUN/rss.peak")"
    note="$note cpu_s=$(awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')"
    note="$note $(awk -v a="$others0" -v b="$others1" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        printf "cpu_proxy_s=%.2f cpu_server_s=%.2f", (y[1] - x[1]) / hz, (y[2] - x[2]) / hz }')"
    if [ "$fs" = tierfs ] && [ -s "$RUN/logs/stats-$who-$wl-$REP.json" ]; then
        note="$note $(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print("gets_max=%d gets=%d" % (s.get("prefetch", {}).get("active_max", -1),
      s.get("backend", {}).get("get", {}).get("requests", -1)))' "$RUN/logs/stats-$who-$wl-$REP.json" 2>/dev/null)"
    fi
    umount_current
    files=$(sed -n 's/.*files=\([0-9]*\).*/\1/p' <<<"$out")
    bytes=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' <<<"$out")
    s=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")
    if [ "$rc" != 0 ] || [ -z "$s" ] || [ "$files" != "$expect" ]; then
        log "$who $wl: FAILED (rc $rc) $out"
        record "$who" "$wl" fail 0 0 0
        return 0
    fi
    record "$who" "$wl" ok "$files" "$bytes" "$s" "$note"
    log "$who $wl: $(awk -v f="$files" -v b="$bytes" -v s="$s" \
        'BEGIN { if (f == 1) printf "%.1f MiB/s (%.2f s)", b/1048576/s, s;
                 else printf "%.0f files/s (%.2f s)", f/s, s }') $note"
}

run_peer() {
    local fs=$1
    if [ "$DO_SEQ" = 1 ]; then
        log "$fs: cold sequential read of $BIG MiB"
        peer_measure "$fs" seq "$fs" 1 "$DATA/big.tsv" 1
    fi
    if [ "$DO_EPOCH" = 1 ]; then
        log "$fs: cold epoch, $SMALL files, $THREADS threads"
        peer_measure "$fs" epoch "$fs" "$SMALL" "$DATA/small.tsv" "$THREADS"
        if [ "$fs" = tierfs ]; then
            log "$fs: cold epoch with the order in .tierfs-order"
            peer_measure "$fs" epoch tierfs-order "$SMALL" "$DATA/small.tsv" "$THREADS" "$RUN/order.txt"
        fi
    fi
}

skip_all() {
    [ "$DO_SEQ" = 1 ] && record "$1" seq skip 0 0 0
    if [ "$DO_EPOCH" = 1 ]; then
        record "$1" epoch skip 0 0 0
        [ "$1" = tierfs ] && record tierfs-order epoch skip 0 0 0
    fi
    return 0
}

"$READER" order "$DATA/small.tsv" "$SEED" >"$RUN/order.txt"
sed "s|^|$EP/$BUCKET/|" "$RUN/order.txt" >"$RUN/order.urls"

select_peers
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

machine_meta
meta small "$SMALL"
meta big_mib "$BIG"
meta threads "$THREADS"
meta order_par "$ORDER_PAR"
meta ceil "$CEIL"
meta ranged "$N"
meta tierfs_n "$TIERFS_N"
meta tierfs_geometry "prefetch.readahead $RA B, cache.block_size $BS B, run $RUN_BLOCKS blocks, prefetch.stream_gets $PF_GETS, prefetch.workers $PF_WORKERS"
meta ram_size "$RAM_SIZE"
meta proxy "tests/faults/s3_fault_proxy.py --realistic --ttfb-ms $TTFB --bandwidth-mbps $BW in front of $UPSTREAM"
meta reps "$REPS"
meta fs "$PEERS"
peer_meta
finish_report "$BENCH_DIR/realistic_report.py"
