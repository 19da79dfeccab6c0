#!/bin/bash
# bench/prefetch.sh — warm-up and sampler-order prefetch (issue 5), on a
# loopback S3 server, in one run:
#
#   warm-up rate   `tierfs warmup -j THREADS` of the small-file dataset on a
#                  fresh mount, against THREADS parallel curl GETs of the
#                  same objects (curl --parallel)
#   cold epochs    THREADS readers take the files in one shuffled order
#                  (epoch_reader), on a fresh mount with an empty cache:
#                  without the order, then with it written to the control
#                  file .tierfs-order first; the goal is >= 2x
#
# usage: bench/prefetch.sh [--server rgw|moto] [--small N] [--threads N]
#                          [--reps N] [--pin] [--latency MS] [--out FILE]
#
# --pin gives the server (and the latency proxy) CPU 0 and the clients the
# other CPUs (bench/README.md).
#
# --latency MS puts tests/faults/s3_fault_proxy.py between the clients
# (curl and tierfs) and the server, holding every reply's headers back MS
# milliseconds: the time to first byte of a real object store (S3 answers
# a small GET in tens of ms), which a loopback server does not have.  The
# dataset is uploaded directly.  Extra tierfs settings go in TIERFS_OPTS
# (e.g. TIERFS_OPTS="-o prefetch.workers=32").
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
SMALL=3000
THREADS=8
REPS=3
LATENCY=0
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
PEERS=tierfs
while [ $# -gt 0 ]; do
    case "$1" in
        --server) SERVER=${2:?}; shift 2 ;;
        --small) SMALL=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --pin) PIN=1; shift ;;
        --latency) LATENCY=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "prefetch.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$SMALL$THREADS$REPS$LATENCY" in *[!0-9]*) echo "prefetch.sh: numbers expected" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

skip_all() { :; }
bench_tools
[ "$TIERFS_OK" = 1 ] || die "no usable tierfs binary (build it first)"
build_tool epoch_reader
READER=$WORK/bin/epoch_reader
bench_rundir

DATA=$WORK/dataset-n$SMALL-b1
python3 "$BENCH_DIR/dataset.py" gen "$DATA" "$SMALL" 1 >&2
export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$((2 << 30))}
start_server
pin_cpus
log "$SERVER up at $EP; uploading $SMALL files"
python3 "$BENCH_DIR/dataset.py" upload "$DATA" 2>&1 | sed 's/^/    /' >&2
if [ "$LATENCY" != 0 ]; then
    python3 "$BENCH_DIR/../tests/faults/s3_fault_proxy.py" --upstream "$EP" --no-control \
        --rate latency=1 --latency-ms "$LATENCY" --latency-where headers --seed 1 \
        --port-file "$RUN/proxy.port" --log "$RUN/logs/proxy.log" >/dev/null &
    PROXY_PID=$!
    # The proxy stands for the network and the store: on the server's CPU.
    [ "${PIN:-0}" = 1 ] && taskset -a -p -c 0 "$PROXY_PID" >/dev/null
    for _ in $(seq 100); do [ -s "$RUN/proxy.port" ] && break; sleep 0.1; done
    [ -s "$RUN/proxy.port" ] || die "the latency proxy did not start: $(cat "$RUN/logs/proxy.log")"
    EP=http://127.0.0.1:$(cat "$RUN/proxy.port")
    log "latency proxy (${LATENCY} ms before each reply's headers) at $EP"
    trap 'rc=$?; kill "$PROXY_PID" 2>/dev/null; (exit $rc); cleanup' EXIT
fi
peer_configs

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1e6 }'; }
now_us() { echo "${EPOCHREALTIME/[.,]/}"; }

: >"$RUN/prefetch.tsv"
for rep in $(seq "$REPS"); do
    log "---- repetition $rep of $REPS"
    # raw parallel GETs of every small file
    cut -f1 "$DATA/small.tsv" | sed "s|^|url = \"$EP/$BUCKET/|; s|$|\"\\noutput = /dev/null|" >"$RUN/curl.cfg"
    drop_caches
    t0=$(now_us)
    curl -sS --parallel --parallel-max "$THREADS" "${CURL_SIGN[@]}" -K "$RUN/curl.cfg" \
        2>>"$RUN/logs/curl.err" || die "curl GETs failed"
    t1=$(now_us)
    printf 'curl\t%s\t%s\n' "$rep" "$(secs "$t0" "$t1")" >>"$RUN/prefetch.tsv"

    # warm-up on a fresh mount
    fresh_cache tierfs
    drop_caches
    mount_fs tierfs || die "mount failed"
    t0=$(now_us)
    "$TIERFS" warmup --quiet -j "$THREADS" "$CUR_MNT" "$CUR_MNT/train" >"$RUN/logs/warmup.out" ||
        die "warm-up failed: $(cat "$RUN/logs/warmup.out")"
    t1=$(now_us)
    printf 'warmup\t%s\t%s\n' "$rep" "$(secs "$t0" "$t1")" >>"$RUN/prefetch.tsv"
    umount_current

    # cold epoch without, then with the order
    seed=$((100 + rep))
    "$READER" order "$DATA/small.tsv" "$seed" >"$RUN/order.txt"
    for mode in plain order; do
        fresh_cache tierfs
        drop_caches
        mount_fs tierfs || die "mount failed"
        ls -R "$CUR_MNT/train" >/dev/null # listings are cached in both modes
        if [ "$mode" = order ]; then
            cp "$RUN/order.txt" "$CUR_MNT/.tierfs-order"
        fi
        out=$("$READER" read "$CUR_MNT" "$DATA/small.tsv" "$THREADS" "$seed")
        s=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")
        e=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$out")
        [ "$e" = 0 ] || die "epoch_reader: $out"
        printf 'epoch_%s\t%s\t%s\n' "$mode" "$rep" "$s" >>"$RUN/prefetch.tsv"
        log "epoch ($mode): $out"
        umount_current
    done
done

report=$(python3 - "$RUN/prefetch.tsv" "$SMALL" "$THREADS" "$COMMAND" "$LATENCY" "${TIERFS_OPTS:-}" <<'PY'
import statistics, sys, collections, subprocess, platform, os
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, rep, s = line.split("\t")
    rows[k].append(float(s))
n, threads, cmd, latency, opts = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
med = {k: statistics.median(v) for k, v in rows.items()}
print("### bench/prefetch.sh: warm-up and sampler-order prefetch")
print()
print("- command: `%s`" % cmd)
print("- %d files of 90-130 KiB, %d threads, medians of %d repetitions" % (n, threads, len(rows["curl"])))
if latency:
    print("- every reply's headers held back %d ms by tests/faults/s3_fault_proxy.py (time to first byte)" % latency)
if opts:
    print("- tierfs mount options: `%s`" % opts)
print()
print("| measure | seconds | files/s | ratio |")
print("|---|---|---|---|")
print("| %d parallel curl GETs | %.2f | %.0f | 1.00 |" % (threads, med["curl"], n / med["curl"]))
print("| tierfs warmup -j %d (fresh mount) | %.2f | %.0f | %.2f x curl |" % (
    threads, med["warmup"], n / med["warmup"], med["curl"] / med["warmup"]))
print("| cold epoch, no order | %.2f | %.0f | 1.00 |" % (med["epoch_plain"], n / med["epoch_plain"]))
print("| cold epoch, order in .tierfs-order | %.2f | %.0f | **%.2f x** |" % (
    med["epoch_order"], n / med["epoch_order"], med["epoch_plain"] / med["epoch_order"]))
print()
print("raw seconds: " + "; ".join("%s %s" % (k, ", ".join("%.2f" % x for x in v)) for k, v in sorted(rows.items())))
PY
)
echo "$report"
if [ -n "$OUT" ]; then printf '\n%s\n' "$report" >>"$OUT"; fi
SUCCESS=1
