#!/usr/bin/env bash
# bench/meta.sh — metadata operations: fsstress (xfstests) on tierfs,
# rclone mount and s3fs over a loopback S3 server, in one run.
#
#   FSSTRESS=/path/to/fsstress bench/meta.sh [--server rgw|moto] [--fs LIST]
#                [--ops N] [--procs N] [--seed S] [--reps N] [--pin] [--out FILE]
#
#   --server rgw|moto   S3 server from tests/harness (default rgw)
#   --fs LIST           comma-separated peers (default rclone,s3fs,tierfs,tierfs-d2):
#                       tierfs-d2 is tierfs with writeback.delay = 2s
#   --ops N             fsstress -n: operations per process (default 2000)
#   --procs N           fsstress -p: processes (default 4)
#   --seed S            fsstress -s (default 1): every peer runs the same ops
#   --reps N            repetitions, each starting one peer further along;
#                       the report shows medians (default 3)
#   --pin               the S3 server on CPU 0, everything else on the others
#   --out FILE          also append the Markdown report to FILE
#
# Each run mounts the peer on an empty cache, runs fsstress in a fresh
# directory of the mount and times it (the uploads each peer leaves for
# later are not waited for), with the daemon's CPU time (utime + stime from
# /proc) and the bytes fsstress left (du --apparent-size: fsstress scales
# its offsets with st_blksize, so the workload differs between peers).
# fsstress is not packaged: build it outside the tree (bench/README.md).
#
# Environment: FSSTRESS (required), FSSTRESS_TIMEOUT (s per run, default
# 600), TIERFS, S3FS_OPTS, RCLONE_OPTS,
# TIERFS_OPTS, TFS_BENCH_DIR (default /var/tmp/tierfs-bench),
# TFS_TEST_BUCKET.  RGW's memstore is TFS_RGW_MEMSTORE_BYTES (default
# 8 GiB, filled only by what is stored) and frees deleted data after 10 s.
#
# Needs root (FUSE mounts).  Everything listens on 127.0.0.1; the EXIT trap
# unmounts, stops the daemons it started and the server.
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SERVER=rgw
FS_LIST=rclone,s3fs,tierfs,tierfs-d2
OPS=2000
PROCS=4
SEED=1
REPS=3
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}

while [ $# -gt 0 ]; do
    case "$1" in
        --server) SERVER=${2:?}; shift 2 ;;
        --fs) FS_LIST=${2:?}; shift 2 ;;
        --ops) OPS=${2:?}; shift 2 ;;
        --procs) PROCS=${2:?}; shift 2 ;;
        --seed) SEED=${2:?}; shift 2 ;;
        --reps) REPS=${2:?}; shift 2 ;;
        --pin) PIN=1; shift ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "meta.sh: unknown argument '$1'" >&2; usage ;;
    esac
done

case "$SERVER" in rgw | moto) ;; *) echo "meta.sh: --server must be rgw or moto" >&2; exit 2 ;; esac
case "$OPS$PROCS$SEED$REPS" in *[!0-9]*) echo "meta.sh: --ops, --procs, --seed, --reps take numbers" >&2; exit 2 ;; esac
if [ "$OPS" -lt 1 ] || [ "$PROCS" -lt 1 ] || [ "$REPS" -lt 1 ]; then
    echo "meta.sh: --ops, --procs, --reps must be >= 1" >&2
    exit 2
fi
PEERS=
for p in ${FS_LIST//,/ }; do
    case "$p" in s3fs | rclone | tierfs | tierfs-d2) PEERS="$PEERS $p" ;; *) echo "meta.sh: unknown fs '$p'" >&2; exit 2 ;; esac
done
if [ -z "${FSSTRESS:-}" ] || [ ! -x "$FSSTRESS" ]; then
    die "set FSSTRESS to an fsstress binary (built outside the tree: bench/README.md)"
fi
[ "$(id -u)" = 0 ] || die "must run as root (FUSE mounts)"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

bench_tools
bench_rundir

REP=1
# record FS STATUS SECS CPU_SECS BYTES (for repetition $REP)
record() {
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$REP" >>"$RUN/results.tsv"
}
skip_all() {
    local r
    for r in $(seq "$REPS"); do
        printf '%s\tskip\t0\t0\t0\t%s\n' "$1" "$r" >>"$RUN/results.tsv"
    done
}

if [ "$SERVER" = rgw ]; then
    export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$((8 << 30))}
    export TFS_RGW_GC_WAIT=${TFS_RGW_GC_WAIT:-10}
fi
start_server
pin_cpus
peer_configs
select_peers

# cpu_ticks PID: utime + stime of PID in clock ticks
cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

# daemon_pid FS: the process doing the peer's work (tierfs: the daemon the
# keeper started, from `tierfs stats`; the others: the mount command)
daemon_pid() {
    if [ "$(peer_prog "$1")" = tierfs ]; then
        "$TIERFS" stats --json "$CUR_MNT" 2>/dev/null |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])'
    else
        echo "$CUR_PID"
    fi
}

# server_answers: a signed PUT of an empty object answers 200 within 10 s.
# A run during which the server stopped answering (memstore full) is not
# a measure: the peer's uploads hung instead of competing with fsstress.
server_answers() {
    local code
    code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' "${CURL_SIGN[@]}" -X PUT \
        --data-binary '' "$EP/$BUCKET/.meta-probe" 2>/dev/null) || code=000
    [ "$code" = 200 ]
}

# run_one FS: mount FS on an empty cache, run fsstress in a fresh directory
run_one() {
    local fs=$1 dir pid c0 c1 t0 t1 rc secs cpu bytes
    local -a extra=()
    fresh_cache "$fs"
    case "$fs" in
        tierfs) extra=(-o writeback.drain_timeout=5s) ;;
        tierfs-d2) extra=(-o writeback.drain_timeout=5s -o writeback.delay=2s) ;;
    esac
    if ! mount_fs "$fs" "${extra[@]}"; then
        record "$fs" fail 0 0 0
        return 0
    fi
    dir=$CUR_MNT/fsstress-$fs-$REP
    mkdir "$dir"
    pid=$(daemon_pid "$fs")
    c0=$(cpu_ticks "$pid")
    t0=${EPOCHREALTIME/[.,]/}
    rc=0
    timeout "${FSSTRESS_TIMEOUT:-600}" "$FSSTRESS" -d "$dir" -n "$OPS" -p "$PROCS" -s "$SEED" >>"$RUN/logs/fsstress-$fs.log" 2>&1 || rc=$?
    t1=${EPOCHREALTIME/[.,]/}
    c1=$(cpu_ticks "$pid")
    secs=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e6 }')
    cpu=$(awk -v d=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", d / hz }')
    bytes=$(du -s --apparent-size -B1 "$dir" 2>/dev/null | cut -f1) || bytes=0
    if ! server_answers; then
        record "$fs" stalled "$secs" "$cpu" "${bytes:-0}"
        log "$fs rep $REP: $secs s, but $SERVER stopped answering during the run: not counted"
    elif [ "$rc" = 0 ]; then
        record "$fs" ok "$secs" "$cpu" "${bytes:-0}"
        log "$fs rep $REP: $secs s, daemon CPU $cpu s, $(awk -v b="${bytes:-0}" 'BEGIN { printf "%.0f MiB", b / 1048576 }') left"
    else
        record "$fs" fail "$secs" "$cpu" "${bytes:-0}"
        log "$fs rep $REP: fsstress exited $rc (see $RUN/logs/fsstress-$fs.log)"
    fi
    umount_current
}

read -r -a ORDER <<<"$ACTIVE"
N=${#ORDER[@]}
[ "$N" -gt 0 ] || die "no peer can run"
for REP in $(seq "$REPS"); do
    for i in $(seq 0 $((N - 1))); do
        run_one "${ORDER[$(((i + REP - 1) % N))]}"
    done
done

machine_meta "$REPS repetitions"
meta fsstress "$FSSTRESS -n $OPS -p $PROCS -s $SEED (in a fresh directory of each mount)"
peer_meta
meta peer_tierfs-d2 "the tierfs binary above with \`-o writeback.delay=2s\`"

report() {
    python3 - "$RUN" <<'PY'
import collections, statistics, sys
run = sys.argv[1]
meta = dict(l.rstrip("\n").split("\t", 1) for l in open(run + "/meta.tsv") if "\t" in l)
rows = collections.defaultdict(list)
for l in open(run + "/results.tsv"):
    fs, st, secs, cpu, b, rep = l.rstrip("\n").split("\t")
    rows[fs].append((st, float(secs), float(cpu), int(b)))
print("### fsstress %s\n" % meta.get("date", ""))
for k in ("command", "commit", "fsstress", "nproc", "cpu", "kernel", "server", "server_version",
          "pinned", "peer_rclone", "peer_s3fs", "peer_tierfs", "peer_tierfs-d2"):
    if k in meta:
        print("- %s: %s" % (k, meta[k]))
ok = {fs: [r for r in v if r[0] == "ok"] for fs, v in rows.items()}
med = {fs: statistics.median(r[1] for r in v) for fs, v in ok.items() if v}
ref = med.get("rclone")
print("\n| fs | runs ok | median s | min–max s | x rclone | daemon CPU s (median) | bytes left (MiB) |")
print("|---|---|---|---|---|---|---|")
for fs in sorted(rows):
    v = ok[fs]
    if not v:
        print("| %s | 0/%d | — | — | — | — | — |" % (fs, len(rows[fs])))
        continue
    t = [r[1] for r in v]
    print("| %s | %d/%d | %.2f | %.2f–%.2f | %s | %.2f | %.0f |" % (
        fs, len(v), len(rows[fs]), med[fs], min(t), max(t),
        "%.2f" % (med[fs] / ref) if ref else "—",
        statistics.median(r[2] for r in v), statistics.median(r[3] for r in v) / 1048576))
stalled = ["%s (%.1f s)" % (fs, r[1]) for fs in sorted(rows) for r in rows[fs] if r[0] == "stalled"]
if stalled:
    print("\nNot counted (the server stopped answering during the run): " + ", ".join(stalled))
PY
}
if report >"$RUN/report.md"; then
    cat "$RUN/report.md"
    if [ -n "$OUT" ]; then
        { cat "$RUN/report.md"; echo; } >>"$OUT"
        log "report appended to $OUT"
    fi
    SUCCESS=1
else
    die "the report failed"
fi
