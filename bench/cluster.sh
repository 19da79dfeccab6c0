#!/usr/bin/env bash
# bench/cluster.sh — a copy of the bucket in the cluster ([near],
# docs/cluster.md, issue 23): far is a Ceph RGW behind
# tests/faults/s3_fault_proxy.py --realistic (a time to first byte per
# reply, a bandwidth cap per connection, like a cloud bucket), near a second
# Ceph RGW on plain loopback; tierfs mounts with their own SSD tiers stand
# in for the nodes of a job.  Every node reads the N small files of the
# dataset (~110 KiB each) with epoch_reader (THREADS threads, shuffled):
#
#   cost    node 1 (fresh mount, empty near) reads an epoch from far and
#           copies it to near; once its copies have settled, node 2 (fresh
#           mount, fresh SSD tier) reads its own epoch from near.  Against
#           a node without [near] through the same proxy, taking turns
#           going first across the repetitions.  files/s of each and the
#           ratio node 2 / node 1; the peak RssAnon of node 1's daemon
#   fanout  four fresh nodes each read a whole epoch (each its own seed)
#           at the same time, near empty: far GETs and bytes per node, and
#           all far bytes / dataset bytes (issue 23's target: <= 1.2)
#   split   as DistributedSampler: four fresh nodes each read a disjoint
#           quarter at once, then (once the copies settled) each another
#           quarter: far bytes of each round / dataset bytes
#
# Each measurement that starts with an empty near uses a prefix of its own
# in near's bucket, so nothing is deleted between them.
#
# usage: bench/cluster.sh [--only LIST] [--small N] [--big MIB]
#                         [--threads N] [--ttfb-ms MS] [--bandwidth-mbps MBPS]
#                         [--reps N] [--out FILE]
#
#   --only LIST         cost, fanout, split (default all three)
#   --small N           number of ~110 KiB files (default 1000)
#   --big MIB           also one object of MIB MiB in every epoch (default
#                       0: none); bigger than near.copy_budget (256M) it is
#                       never copied
#   --threads N         reader threads per node (default 8)
#   --ttfb-ms, --bandwidth-mbps
#                       the far proxy's realistic mode (default 30 ms, 90 MB/s)
#   --reps N            repetitions (default 2); the report shows medians
#                       and the spread
#   --out FILE          also append the Markdown report to FILE
#
# Environment: TIERFS (the binary; default build/tierfs), TIERFS_OPTS (more
# `-o` words for every mount), TFS_BENCH_DIR (work directory, default
# /var/tmp/tierfs-bench), TFS_TEST_BUCKET, TFS_RGW_MEMSTORE_BYTES.  Needs
# root.  Everything listens on 127.0.0.1.  See bench/README.md.
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
ONLY=cost,fanout,split
SMALL=1000
BIG=0
THREADS=8
TTFB=30
BW=90
REPS=2
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}

while [ $# -gt 0 ]; do
    case "$1" in
        --only) ONLY=${2:?}; shift 2 ;;
        --small) SMALL=${2:?}; shift 2 ;;
        --big) BIG=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --ttfb-ms) TTFB=${2:?}; shift 2 ;;
        --bandwidth-mbps) BW=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "cluster.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$BIG$SMALL$THREADS$REPS" in
    *[!0-9]*) echo "cluster.sh: sizes and counts are whole numbers" >&2; exit 2 ;;
esac
case "$TTFB$BW" in *[!0-9.]*) echo "cluster.sh: --ttfb-ms, --bandwidth-mbps take numbers" >&2; exit 2 ;; esac
for v in "$SMALL" "$THREADS" "$REPS"; do
    [ "$v" -ge 1 ] || { echo "cluster.sh: counts must be >= 1" >&2; exit 2; }
done
[ "$SMALL" -ge 4 ] || { echo "cluster.sh: --small must be >= 4 (four nodes)" >&2; exit 2; }
DO_COST=0 DO_FANOUT=0 DO_SPLIT=0
for w in ${ONLY//,/ }; do
    case "$w" in
        cost) DO_COST=1 ;;
        fanout) DO_FANOUT=1 ;;
        split) DO_SPLIT=1 ;;
        *) echo "cluster.sh: unknown measurement '$w' (cost, fanout, split)" >&2; exit 2 ;;
    esac
done
PEERS=tierfs

[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

bench_tools
[ "$TIERFS_OK" = 1 ] || die "no tierfs binary that mounts (build it, or set TIERFS)"
build_tool epoch_reader
READER=$WORK/bin/epoch_reader
bench_rundir
# a private copy: a rebuild during the run cannot change the binary under it
cp "$TIERFS" "$RUN/tierfs.bin"
TIERFS=$RUN/tierfs.bin
TNAME=$(basename "$TIERFS")

now_us() { echo "${EPOCHREALTIME/[.,]/}"; }
# record PHASE NODE STATUS FILES BYTES SECS [NOTE: key=value words]
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$REP" "$3" "$4" "$5" "$6" "${7:-}" >>"$RUN/results.tsv"
}

# ------------------------------------------------------------ dataset ----

DATA=$WORK/dataset-n$SMALL-b$BIG
if [ ! -f "$DATA/.complete" ]; then
    log "generating the dataset in $DATA"
    python3 "$BENCH_DIR/dataset.py" gen "$DATA" "$SMALL" "$BIG"
else
    log "reusing the dataset in $DATA"
fi
LIST=$DATA/small.tsv
if [ "$BIG" -gt 0 ]; then
    LIST=$RUN/epoch.tsv
    cat "$DATA/small.tsv" "$DATA/big.tsv" >"$LIST"
fi
NFILES=$(wc -l <"$LIST")
DATA_BYTES=$(awk -F'\t' '{ b += $2 } END { printf "%.0f", b }' "$LIST")
for q in 0 1 2 3; do
    awk -v q=$q 'NR % 4 == q' "$LIST" >"$RUN/quarter$q.tsv"
done

# ------------------------------------------------------------ servers ----

export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$(((SMALL * 140 * 1024 + BIG * 1048576) * 3 / 2 + (1 << 30)))}
start_server # far, in $RUN/server
log "far: $SERVER up at $EP; uploading"
python3 "$BENCH_DIR/dataset.py" upload "$DATA" 2>&1 | sed 's/^/    /' >&2
NEAR_DIR=$RUN/near-server
NEAR_UP=1
# near holds every copy of every measurement (each its own prefix)
NEAR_RUNS=$(((DO_COST * 2 + DO_FANOUT + DO_SPLIT) * REPS))
TFS_RGW_MEMSTORE_BYTES=$(((SMALL * 140 * 1024 + BIG * 1048576) * NEAR_RUNS * 3 / 2 + (1 << 30))) \
    bash "$HARNESS/rgw.sh" start "$NEAR_DIR" 2>>"$RUN/logs/near-server.err" ||
    { cat "$RUN/logs/near-server.err" >&2; die "starting near's rgw failed"; }
NEAR_EP=$(. "$NEAR_DIR/env" && echo "$TFS_S3_ENDPOINT")
[ "$NEAR_EP" != "$EP" ] || die "near and far answer on the same endpoint"
log "near: a second $SERVER at $NEAR_EP"

python3 "$REPO/tests/faults/s3_fault_proxy.py" --upstream "$EP" --no-control --realistic \
    --ttfb-ms "$TTFB" --bandwidth-mbps "$BW" --seed 1 \
    --port-file "$RUN/proxy.port" --log "$RUN/logs/proxy.log" >/dev/null &
PROXY_PID=$!
for _ in $(seq 100); do [ -s "$RUN/proxy.port" ] && break; sleep 0.1; done
[ -s "$RUN/proxy.port" ] || die "the proxy did not start: $(cat "$RUN/logs/proxy.log")"
UPSTREAM=$EP
EP=http://127.0.0.1:$(cat "$RUN/proxy.port")
log "far through the realistic proxy (ttfb $TTFB ms, $BW MB/s per connection) at $EP"

# ------------------------------------------------------------- nodes ----

cat >"$RUN/tierfs.conf" <<EOF
[backend]
endpoint = $EP
region = $REGION
path_style = true
[log]
file = $RUN/logs/tierfs.log
EOF
cp "$RUN/tierfs.conf" "$RUN/tierfs-near.conf"
cat >>"$RUN/tierfs-near.conf" <<EOF
[near]
bucket = $BUCKET
endpoint = $NEAR_EP
EOF
TIERFS_CMD="tierfs mount -c CONF -o ssd.dir=CACHE [-o near.prefix=P] -f s3://$BUCKET MNT${TIERFS_OPTS:+ $TIERFS_OPTS}"

declare -A NODE_PID=()
# node_mount NAME PREFIX: mount node NAME on $RUN/mnt/NAME with a fresh SSD
# tier; PREFIX empty: no [near], else near.prefix=PREFIX
node_mount() {
    local name=$1 prefix=$2 mnt=$RUN/mnt/$1 cache=$RUN/cache-$1 conf=$RUN/tierfs.conf pid
    rm -rf "$cache"
    mkdir -p "$mnt" "$cache"
    local near=()
    if [ -n "$prefix" ]; then
        conf=$RUN/tierfs-near.conf
        near=(-o "near.prefix=$prefix")
    fi
    # shellcheck disable=SC2086 # TIERFS_OPTS is a word list
    "$TIERFS" mount -c "$conf" -o ssd.dir="$cache" "${near[@]}" ${TIERFS_OPTS:-} \
        -f "s3://$BUCKET" "$mnt" </dev/null >>"$RUN/logs/$name.out" 2>&1 &
    pid=$!
    NODE_PID[$name]=$pid
    for _ in $(seq 600); do
        mountpoint -q "$mnt" && return 0
        fs_alive "$pid" "$TNAME" || die "node $name exited before mounting: $(tail -n 5 "$RUN/logs/$name.out")"
        sleep 0.05
    done
    die "node $name did not mount within 30 s"
}

# node_umount NAME: unmount it and wait for its daemon to go
node_umount() {
    local name=$1 mnt=$RUN/mnt/$1 pid=${NODE_PID[$1]:-}
    [ -n "$pid" ] || return 0
    mountpoint -q "$mnt" && { fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; }
    for _ in $(seq 300); do fs_alive "$pid" "$TNAME" || break; sleep 0.1; done
    fs_alive "$pid" "$TNAME" && kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    unset "NODE_PID[$name]"
    rm -rf "$RUN/cache-$name"
}

cluster_cleanup() {
    local rc=$? n
    for n in "${!NODE_PID[@]}"; do node_umount "$n"; done
    kill "$PROXY_PID" 2>/dev/null || true
    [ "${NEAR_UP:-0}" = 1 ] && bash "$HARNESS/rgw.sh" stop "$NEAR_DIR" >/dev/null 2>&1
    (exit "$rc")
    cleanup
}
trap cluster_cleanup EXIT

# node_stats NAME FILE: `tierfs stats --json` of the node into FILE
node_stats() {
    "$TIERFS" stats --json "$RUN/mnt/$1" >"$2" 2>/dev/null || echo '{}' >"$2"
}

# stat_words FILE: key=value words of a stats file: far GETs and bytes,
# near hits, misses, errors, copies (a node without near: its backend's GETs)
stat_words() {
    python3 - "$1" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])).get("backend", {})
n = s.get("near")
if n is None:
    g = s.get("get", {})
    print("far_gets=%d far_bytes=%d" % (g.get("requests", -1), g.get("payload_bytes", -1)))
else:
    g = n.get("far", {}).get("get", {})
    w = ["far_gets=%d" % g.get("requests", -1), "far_bytes=%d" % g.get("payload_bytes", -1)]
    for k in ("hits", "misses", "errors", "copies", "copies_existing", "copies_dropped",
              "copies_failed", "copy_far_rereads"):
        w.append("%s=%d" % (k, n.get(k, -1)))
    print(" ".join(w))
EOF
}

# settled NAME: every copy node NAME queued has ended (made, found made,
# dropped, failed or changed)
settled() {
    node_stats "$1" "$RUN/settle.json"
    python3 - "$RUN/settle.json" <<'EOF'
import json, sys
n = json.load(open(sys.argv[1]))["backend"]["near"]
done = sum(n[k] for k in ("copies", "copies_existing", "copies_dropped", "copies_failed",
                          "copies_changed"))
sys.exit(0 if done >= n["copies_queued"] else 1)
EOF
}
# wait_settled NAME...: poll until every node's copies settled (at most 10 min)
wait_settled() {
    local n t0
    t0=$(now_us)
    for n in "$@"; do
        for _ in $(seq 6000); do settled "$n" && break; sleep 0.1; done
        settled "$n" || die "node $n: copies still running after 10 min"
    done
    SETTLE_S=$(awk -v a="$t0" -v b="$(now_us)" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')
}

# rss_watch PID FILE: the peak RssAnon (kB) of PID and its children
rss_watch() {
    local pid=$1 out=$2 peak=0 c v k
    while [ -r "/proc/$pid/status" ]; do
        for c in $pid $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
            v=0
            while read -r k v2 _; do [ "$k" = RssAnon: ] && v=$v2; done <"/proc/$c/status" 2>/dev/null || true
            if [ "$v" -gt "$peak" ]; then peak=$v; echo "$peak" >"$out"; fi
        done
        sleep 0.1
    done
}

# epoch NAME LIST SEED OUT: epoch_reader on node NAME; its output line in OUT
epoch() {
    "$READER" read "$RUN/mnt/$1" "$2" "$THREADS" "$3" >"$4" 2>>"$RUN/logs/reader.err" || echo "rc=$?" >>"$4"
}

# result PHASE NODE OUTFILE STATSFILE EXPECT [WORDS]: record one node's epoch
result() {
    local out files bytes s note
    out=$(cat "$3")
    files=$(sed -n 's/.*files=\([0-9]*\).*/\1/p' <<<"$out")
    bytes=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' <<<"$out")
    s=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")
    note="$(stat_words "$4") ${6:-}"
    if [ -z "$s" ] || [ "$files" != "$5" ] || ! grep -q 'errors=0' <<<"$out"; then
        log "$1 $2: FAILED $out"
        record "$1" "$2" fail 0 0 0 "$note"
        return 0
    fi
    record "$1" "$2" ok "$files" "$bytes" "$s" "$note"
    log "$1 $2: $(awk -v f="$files" -v s="$s" 'BEGIN { printf "%.0f files/s (%.2f s)", f/s, s }') $note"
}

# ------------------------------------------------------- measurements ----

run_nonear() {
    log "cost: a node without [near]"
    node_mount base ''
    drop_caches
    epoch base "$LIST" "$((REP * 10 + 1))" "$RUN/base.out"
    node_stats base "$RUN/logs/stats-base-$REP.json"
    node_umount base
    result cost no-near "$RUN/base.out" "$RUN/logs/stats-base-$REP.json" "$NFILES"
}

run_pair() {
    local p=cost-r$REP/ rss_pid
    log "cost: node 1 reads from far and copies to near, then node 2 reads from near"
    node_mount n1 "$p"
    drop_caches
    rm -f "$RUN/rss.peak"
    rss_watch "${NODE_PID[n1]}" "$RUN/rss.peak" &
    rss_pid=$!
    epoch n1 "$LIST" "$((REP * 10 + 1))" "$RUN/n1.out"
    wait_settled n1
    kill "$rss_pid" 2>/dev/null || true
    wait "$rss_pid" 2>/dev/null || true
    node_stats n1 "$RUN/logs/stats-n1-$REP.json"
    node_umount n1
    result cost node1 "$RUN/n1.out" "$RUN/logs/stats-n1-$REP.json" "$NFILES" \
        "settle_s=$SETTLE_S rss_kb=$(cat "$RUN/rss.peak" 2>/dev/null || echo 0)"
    node_mount n2 "$p"
    drop_caches
    epoch n2 "$LIST" "$((REP * 10 + 2))" "$RUN/n2.out"
    node_stats n2 "$RUN/logs/stats-n2-$REP.json"
    node_umount n2
    result cost node2 "$RUN/n2.out" "$RUN/logs/stats-n2-$REP.json" "$NFILES"
}

# four NAME-PREFIX PHASE ROUND LIST-OF-NODE-I: the four nodes k0..k3 each
# read their list at once
four_at_once() {
    local phase=$1 round=$2 i pids=()
    drop_caches
    for i in 0 1 2 3; do
        epoch "k$i" "$(list_of "$phase" "$round" "$i")" "$((REP * 10 + i + 3))" "$RUN/k$i.out" &
        pids+=($!)
    done
    wait "${pids[@]}"
    wait_settled k0 k1 k2 k3
    for i in 0 1 2 3; do
        node_stats "k$i" "$RUN/logs/stats-$phase-$round-k$i-$REP.json"
        result "$phase$round" "node$((i + 1))" "$RUN/k$i.out" "$RUN/logs/stats-$phase-$round-k$i-$REP.json" \
            "$(wc -l <"$(list_of "$phase" "$round" "$i")")" "settle_s=$SETTLE_S"
    done
}
list_of() { # PHASE ROUND I
    if [ "$1" = fanout ]; then echo "$LIST"; else echo "$RUN/quarter$((($3 + $2 - 1) % 4)).tsv"; fi
}

run_four() {
    local phase=$1 i
    for i in 0 1 2 3; do node_mount "k$i" "$phase-r$REP/"; done
    if [ "$phase" = fanout ]; then
        log "fanout: four fresh nodes each read a whole epoch at once"
        four_at_once fanout ''
    else
        log "split: four fresh nodes each read a quarter at once, then another"
        four_at_once split 1
        four_at_once split 2
    fi
    for i in 0 1 2 3; do node_umount "k$i"; done
}

UNITS=()
[ "$DO_COST" = 1 ] && UNITS+=(no-near pair)
for REP in $(seq "$REPS"); do
    log "---- repetition $REP of $REPS"
    for i in $(seq 0 $((${#UNITS[@]} - 1))); do
        case "${UNITS[$(((i + REP - 1) % ${#UNITS[@]}))]}" in
            no-near) run_nonear ;;
            pair) run_pair ;;
        esac
    done
    [ "$DO_FANOUT" = 1 ] && run_four fanout
    [ "$DO_SPLIT" = 1 ] && run_four split
done

# ------------------------------------------------------------- report ----

machine_meta
meta files "$NFILES"
meta dataset_bytes "$DATA_BYTES"
meta small "$SMALL"
meta big_mib "$BIG"
meta threads "$THREADS"
meta reps "$REPS"
meta proxy "tests/faults/s3_fault_proxy.py --realistic --ttfb-ms $TTFB --bandwidth-mbps $BW in front of far ($UPSTREAM)"
meta near "a second $SERVER on plain loopback ($NEAR_EP)"
meta load "$(cut -d' ' -f1-3 /proc/loadavg)"
meta peer_tierfs "tierfs $("$TIERFS" --version 2>/dev/null | head -1): \`$TIERFS_CMD\`"
# kept, so that the report can be made again (bench/cluster_report.py
# DIR), with the nodes' log
mkdir -p "$WORK/cluster-last"
cp "$RUN/results.tsv" "$RUN/meta.tsv" "$WORK/cluster-last/"
cp "$RUN/logs/tierfs.log" "$WORK/cluster-last/" 2>/dev/null || true
finish_report "$BENCH_DIR/cluster_report.py"
