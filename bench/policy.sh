#!/usr/bin/env bash
# bench/policy.sh — compare the SSD tier's eviction policies (lru, epoch) on
# a real tierfs mount: shuffled epochs over a dataset twice the tier's size.
#
#   bench/policy.sh [--files N] [--epochs E] [--threads T] [--ssd-size SIZE]
#                   [--policies LIST] [--out FILE]
#
#   --files N         number of ~110 KiB files (default 2000, ~215 MiB)
#   --epochs E        epochs per policy (default 5)
#   --threads T       reader threads (default 8)
#   --ssd-size SIZE   ssd.size (default: half the dataset, in whole MiB)
#   --policies LIST   comma-separated policies (default lru,epoch)
#   --out FILE        also append the Markdown report to FILE
#
# For each policy: mount tierfs on a fresh, empty cache directory (ram.size
# 16M, prefetch.workers 0, metadata_ttl forever, watermarks 95/90), then run
# E epochs, each reading every file once in a new shuffled order (seed =
# epoch number).  The page cache is dropped before every epoch so that every
# read reaches tierfs.  After each epoch `tierfs stats --json` gives the SSD
# tier's hits and misses and the backend's GETs; the report shows each
# epoch's deltas.
#
# Environment: TIERFS (tierfs binary; default build/tierfs of this repo),
# TIERFS_OPTS (extra words for the mount command, e.g. "-o ram.size=64M"),
# TFS_BENCH_DIR (work dir, default /var/tmp/tierfs-bench; the dataset is
# cached there), TFS_TEST_BUCKET (default tierfs-test).
#
# Needs root (drop_caches, FUSE mounts).  Everything listens on 127.0.0.1;
# the EXIT trap unmounts, stops the tierfs daemon it started (by pid) and
# stops the server.  See bench/README.md.
set -euo pipefail

# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

FILES=2000
EPOCHS=5
THREADS=8
SSD_SIZE=
POLICIES=lru,epoch
OUT=
WORK=${TFS_BENCH_DIR:-/var/tmp/tierfs-bench}
export TFS_TEST_BUCKET=${TFS_TEST_BUCKET:-tierfs-test}

while [ $# -gt 0 ]; do
    case "$1" in
        --files) FILES=${2:?}; shift 2 ;;
        --epochs) EPOCHS=${2:?}; shift 2 ;;
        --threads) THREADS=${2:?}; shift 2 ;;
        --ssd-size) SSD_SIZE=${2:?}; shift 2 ;;
        --policies) POLICIES=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        *) echo "policy.sh: unknown argument '$1'" >&2; usage ;;
    esac
done

case "$FILES$EPOCHS$THREADS" in *[!0-9]*) echo "policy.sh: --files, --epochs, --threads take numbers" >&2; exit 2 ;; esac
if [ "$FILES" -lt 1 ] || [ "$EPOCHS" -lt 2 ] || [ "$THREADS" -lt 1 ]; then
    echo "policy.sh: --files and --threads must be >= 1, --epochs >= 2" >&2
    exit 2
fi
for p in ${POLICIES//,/ }; do
    case "$p" in lru | epoch) ;; *) echo "policy.sh: unknown policy '$p' (lru, epoch)" >&2; exit 2 ;; esac
done

[ "$(id -u)" = 0 ] || die "must run as root (drop_caches and FUSE mounts)"
[ -w /proc/sys/vm/drop_caches ] || die "/proc/sys/vm/drop_caches is not writable"
unset AWS_CA_BUNDLE CEPH_ARGS CEPH_CONF

for t in gcc python3 mountpoint; do
    command -v "$t" >/dev/null || die "$t not found"
done
python3 -c 'import boto3' 2>/dev/null ||
    die "python3 has no boto3 (apt-get install python3-boto3, or pip install boto3)"
command -v radosgw >/dev/null || die "radosgw not found (apt-get install radosgw ceph-mon ceph-osd)"

if [ -z "${TIERFS:-}" ]; then TIERFS=$REPO/build/tierfs; fi
[ -x "$TIERFS" ] || die "no tierfs binary at $TIERFS (build it, or set TIERFS)"
"$TIERFS" mount --help >/dev/null 2>&1 || die "$TIERFS has no working 'mount' command"

mkdir -p "$WORK/bin"
READER=$WORK/bin/epoch_reader
if [ ! -x "$READER" ] || [ "$BENCH_DIR/epoch_reader.c" -nt "$READER" ]; then
    gcc -O2 -std=c11 -Wall -pthread -o "$READER.tmp" "$BENCH_DIR/epoch_reader.c" ||
        die "compiling epoch_reader.c failed"
    mv "$READER.tmp" "$READER"
fi

# ------------------------------------------------------ run dir, trap ----

RUN=$(mktemp -d "$WORK/policy.XXXXXX")
mkdir -p "$RUN/logs" "$RUN/bin"
# run a private copy, so that a rebuild of $TIERFS during the run cannot
# swap the binary between (or break) mount, stats and umount
TIERFS_SRC=$TIERFS
if [ "$TIERFS_SRC" -ef "$REPO/build/tierfs" ] &&
    [ -n "$(git -C "$REPO" status --porcelain -- src cache backends lib 2>/dev/null)" ]; then
    TIERFS_NOTE="build/tierfs, C sources modified in the working tree"
else
    TIERFS_NOTE=$TIERFS_SRC
fi
cp "$TIERFS_SRC" "$RUN/bin/tierfs"
TIERFS=$RUN/bin/tierfs
MNT=$RUN/mnt
SERVER_DIR=$RUN/server
SERVER_UP=0 SUCCESS=0 CUR_PID=''
: >"$RUN/results.tsv"

# tierfs_alive PID: PID is alive (not a zombie) and runs our tierfs binary
tierfs_alive() {
    local cmd
    [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] || return 1
    cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
    [ -n "$cmd" ] || return 1
    case "$cmd" in *"$(basename "$TIERFS")"*"$MNT"*) return 0 ;; esac
    return 1
}

# umount_current: `tierfs umount` (waits for the daemon); if the daemon we
# recorded is still there after 30 s, SIGTERM then SIGKILL that pid only
umount_current() {
    if mountpoint -q "$MNT" 2>/dev/null; then
        timeout 60 "$TIERFS" umount "$MNT" >>"$RUN/logs/umount.out" 2>&1 ||
            fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
    fi
    if [ -n "$CUR_PID" ]; then
        for _ in $(seq 300); do tierfs_alive "$CUR_PID" || break; sleep 0.1; done
        if tierfs_alive "$CUR_PID"; then
            log "tierfs (pid $CUR_PID) still running 30 s after unmount: SIGTERM"
            kill -TERM "$CUR_PID" 2>/dev/null || true
            for _ in $(seq 50); do tierfs_alive "$CUR_PID" || break; sleep 0.1; done
            if tierfs_alive "$CUR_PID"; then kill -KILL "$CUR_PID" 2>/dev/null || true; fi
        fi
    fi
    if mountpoint -q "$MNT" 2>/dev/null; then umount -l "$MNT" 2>/dev/null || true; fi
    CUR_PID=''
}

# cleanup (common.sh) calls umount_current, stops $SERVER and removes
# $RUN/cache-* and $RUN/mnt (= $MNT)
SERVER=rgw
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

# ------------------------------------------------------------ dataset ----

# dataset.py with a 0 MiB big object: only the small files are read
DATA=$WORK/dataset-n$FILES-b0
if [ ! -f "$DATA/.complete" ]; then
    log "generating the dataset in $DATA"
    python3 "$BENCH_DIR/dataset.py" gen "$DATA" "$FILES" 0
else
    log "reusing the dataset in $DATA"
fi
DATA_BYTES=$(awk -F'\t' '{ s += $2 } END { printf "%d", s }' "$DATA/small.tsv")
if [ -z "$SSD_SIZE" ]; then
    SSD_SIZE=$((DATA_BYTES / 2 / 1048576))M
fi

# ------------------------------------------------------------- server ----

log "starting rgw"
export TFS_RGW_MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-$((DATA_BYTES * 3 / 2 + (1 << 30)))}
SERVER_UP=1
bash "$HARNESS/rgw.sh" start "$SERVER_DIR" 2>>"$RUN/logs/server.err" ||
    { cat "$RUN/logs/server.err" >&2; die "starting rgw failed"; }
# shellcheck disable=SC1091
. "$SERVER_DIR/env"
unset AWS_CA_BUNDLE
BUCKET=$TFS_TEST_BUCKET
EP=$TFS_S3_ENDPOINT
REGION=${TFS_S3_REGION:-us-east-1}
case "$EP" in http://127.0.0.1:* | https://127.0.0.1:*) ;; *) die "server endpoint $EP is not on 127.0.0.1" ;; esac
SERVER_VERSION=$(radosgw --version 2>/dev/null | head -1 | sed 's/ (.*//')
log "rgw up at $EP; uploading $FILES files ($((DATA_BYTES / 1048576)) MiB)"
python3 "$BENCH_DIR/dataset.py" upload "$DATA" 2>&1 | sed 's/^/    /' >&2

# -------------------------------------------------------------- epochs ----

# stats_json FILE: save `tierfs stats --json MNT` to FILE
stats_json() {
    "$TIERFS" stats --json "$MNT" >"$1" 2>>"$RUN/logs/stats.err" ||
        die "tierfs stats --json $MNT failed (see $RUN/logs/stats.err)"
}

# run_policy POLICY: fresh mount, E epochs, a line of results.tsv per epoch
run_policy() {
    local p=$1 conf=$RUN/tierfs-$1.conf cache=$RUN/cache-$1 e out rc secs files errors
    rm -rf "$cache"
    mkdir -p "$cache" "$MNT"
    cat >"$conf" <<EOF
[backend]
endpoint = $EP
region = $REGION
path_style = true
[ssd]
dir = $cache
size = $SSD_SIZE
high_watermark = 95
low_watermark = 90
[ram]
size = 16M
[cache]
policy = $p
metadata_ttl = forever
[prefetch]
workers = 0
[log]
file = $RUN/logs/tierfs-$p.log
EOF
    drop_caches
    log "$p: mounting (ssd.size $SSD_SIZE, empty cache)"
    # shellcheck disable=SC2086 # TIERFS_OPTS is a list of words
    "$TIERFS" mount -c "$conf" ${TIERFS_OPTS:-} "s3://$BUCKET" "$MNT" \
        </dev/null >>"$RUN/logs/mount.out" 2>&1 ||
        { tail -n 5 "$RUN/logs/mount.out" >&2; die "$p: tierfs mount failed"; }
    mountpoint -q "$MNT" || die "$p: $MNT is not a mountpoint after tierfs mount"
    stats_json "$RUN/stats-$p-0.json"
    CUR_PID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$RUN/stats-$p-0.json")
    for e in $(seq "$EPOCHS"); do
        drop_caches
        rc=0
        out=$("$READER" read "$MNT" "$DATA/small.tsv" "$THREADS" "$e" 2>>"$RUN/logs/reader.err") || rc=$?
        files=$(sed -n 's/.*files=\([0-9]*\).*/\1/p' <<<"$out")
        secs=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' <<<"$out")
        errors=$(sed -n 's/.*errors=\([0-9]*\).*/\1/p' <<<"$out")
        if [ "$rc" != 0 ] || [ "$files" != "$FILES" ] || [ "${errors:-1}" != 0 ]; then
            die "$p epoch $e: reader failed (rc $rc: $out; see $RUN/logs/reader.err)"
        fi
        stats_json "$RUN/stats-$p-$e.json"
        printf '%s\t%s\t%s\n' "$p" "$e" "$secs" >>"$RUN/results.tsv"
        log "$p epoch $e: $files files in $secs s"
    done
    umount_current
    rm -rf "$cache"
}

for p in ${POLICIES//,/ }; do
    run_policy "$p"
done

# ------------------------------------------------------------- report ----

T_END=${EPOCHREALTIME/[.,]/}
P_COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
P_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
P_MACHINE="$(nproc) cores ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(awk '/^MemTotal/ { printf "%.1f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
P_SERVER="$SERVER_VERSION (memstore) on 127.0.0.1"
P_TIERFS="$("$TIERFS" --version 2>/dev/null | head -1) ($TIERFS_NOTE)"
P_ELAPSED=$(awk -v d=$((T_END - T_START)) 'BEGIN { printf "%.0f", d / 1e6 }')
P_COMMAND=$COMMAND
export P_COMMAND P_COMMIT P_DATE P_MACHINE P_SERVER P_TIERFS P_ELAPSED
export P_FILES=$FILES P_EPOCHS=$EPOCHS P_THREADS=$THREADS P_DATA_BYTES=$DATA_BYTES
export P_SSD_SIZE=$SSD_SIZE P_POLICIES=$POLICIES P_OPTS=${TIERFS_OPTS:-}

report=$(python3 - "$RUN" <<'PY'
import json, os, sys

run = sys.argv[1]
env = os.environ
E = int(env["P_EPOCHS"])
data_bytes = int(env["P_DATA_BYTES"])
policies = env["P_POLICIES"].split(",")
secs = {}
with open(os.path.join(run, "results.tsv")) as f:
    for line in f:
        p, e, s = line.rstrip("\n").split("\t")
        secs[(p, int(e))] = float(s)


def load(p, e):
    with open(os.path.join(run, "stats-%s-%d.json" % (p, e))) as f:
        return json.load(f)


def get(d, *path):
    for k in path:
        d = d.get(k, {}) if isinstance(d, dict) else {}
    return d if isinstance(d, (int, float)) else 0


rows = {}   # (p, e) -> dict of deltas
cap = {}
for p in policies:
    prev = load(p, 0)
    for e in range(1, E + 1):
        cur = load(p, e)
        d = lambda *k: get(cur, *k) - get(prev, *k)
        hits, misses = d("ssd", "hits"), d("ssd", "misses")
        rows[(p, e)] = {
            "hits": hits, "misses": misses,
            "ratio": hits / (hits + misses) if hits + misses else 0.0,
            "gets": d("backend", "get", "requests"),
            "bypassed": d("ssd", "bypassed"),
            "evictions": d("ssd", "evictions"),
            "used": get(cur, "ssd", "used_bytes"),
            "ram_hits": d("ram", "hits"),
            "ram_misses": d("ram", "misses"),
            "reads": d("fuse", "read", "count"),
        }
        prev = cur
    cap[p] = get(prev, "ssd", "capacity_bytes")

capacity = max(cap.values())
frac = capacity / data_bytes
MiB = 1048576.0
out = []
w = out.append
w("## Eviction policies on a real mount (bench/policy.sh)")
w("")
w("- date: %s; commit %s" % (env["P_DATE"], env["P_COMMIT"]))
w("- command: `%s`" % env["P_COMMAND"])
w("- machine: %s" % env["P_MACHINE"])
w("- server: %s; %s" % (env["P_SERVER"], env["P_TIERFS"]))
w("- dataset: %s files, %.1f MiB; %s epochs, %s threads, shuffled (seed = epoch), "
  "page cache dropped before each epoch" % (env["P_FILES"], data_bytes / MiB, E, env["P_THREADS"]))
w("- tierfs: ssd.size %s (capacity %.1f MiB), watermarks 95/90, ram.size 16M, "
  "prefetch.workers 0, metadata_ttl forever, block_size default%s"
  % (env["P_SSD_SIZE"], capacity / MiB, ("; extra: `%s`" % env["P_OPTS"]) if env["P_OPTS"] else ""))
w("- elapsed: %s s" % env["P_ELAPSED"])
w("")
hdr = ["epoch"] + ["%s hit ratio" % p for p in policies] + ["%s GETs" % p for p in policies] \
    + ["%s seconds" % p for p in policies]
w("| " + " | ".join(hdr) + " |")
w("|" + "---|" * len(hdr))
for e in range(1, E + 1):
    cells = [str(e)]
    cells += ["%.3f" % rows[(p, e)]["ratio"] for p in policies]
    cells += ["%d" % rows[(p, e)]["gets"] for p in policies]
    cells += ["%.2f" % secs[(p, e)] for p in policies]
    w("| " + " | ".join(cells) + " |")
w("")
means = {p: sum(rows[(p, e)]["ratio"] for e in range(2, E + 1)) / (E - 1) for p in policies}
w("Tier/dataset fraction: %.1f / %.1f MiB = **%.3f**." % (capacity / MiB, data_bytes / MiB, frac))
for p in policies:
    w("Mean %s hit ratio, epochs 2..%d: %.3f." % (p, E, means[p]))
if "epoch" in policies:
    target = 0.95 * frac
    met = means["epoch"] >= target
    w("Target: epoch policy from epoch 2 on ≥ 0.95 × fraction = %.3f: **%s** (%.3f)."
      % (target, "met ✓" if met else "not met ✗", means["epoch"]))
short = [(p, e) for p in policies for e in range(1, E + 1)
         if rows[(p, e)]["reads"] < int(env["P_FILES"])]
if short:
    w("")
    w("**Warning:** fewer FUSE reads than files in %s: some reads did not reach tierfs "
      "(page cache?), so the ratios above undercount." % ", ".join("%s epoch %d" % x for x in short))
w("")
w("SSD tier details per epoch (deltas; used = after the epoch; RAM = RAM tier hits above the SSD tier):")
w("")
hdr = ["policy", "epoch", "FUSE reads", "RAM hits", "SSD hits", "SSD misses", "SSD bypassed",
       "SSD evictions", "SSD used MiB"]
w("| " + " | ".join(hdr) + " |")
w("|" + "---|" * len(hdr))
for p in policies:
    for e in range(1, E + 1):
        r = rows[(p, e)]
        w("| %s | %d | %d | %d | %d | %d | %d | %d | %.1f |" % (
            p, e, r["reads"], r["ram_hits"], r["hits"], r["misses"], r["bypassed"],
            r["evictions"], r["used"] / MiB))
print("\n".join(out))
PY
) || die "building the report failed"

printf '%s\n' "$report"
if [ -n "$OUT" ]; then
    printf '%s\n\n' "$report" >>"$OUT"
    log "report appended to $OUT"
fi
SUCCESS=1
