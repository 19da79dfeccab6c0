#!/usr/bin/env bash
# rgw.sh — start/stop a throwaway single-node Ceph cluster (1 mon, 1 memstore
# osd, 1 radosgw with the beast frontend) on 127.0.0.1, everything under DIR.
#
#   rgw.sh start DIR   build the cluster, create the S3 user and test bucket,
#                      write DIR/env
#   rgw.sh stop DIR    stop exactly the daemons recorded in DIR/*.pid
#                      (idempotent)
#
# Layout: DIR/env, DIR/mon.pid, DIR/osd.pid, DIR/rgw.pid; cluster config,
# data and logs in DIR/ceph/ (ceph.conf, mon.a/, osd.0/, *.log).  Nothing is
# written to /etc/ceph, /var/lib/ceph or /var/log/ceph.  cephx is disabled
# inside the cluster; radosgw still verifies S3 signatures.
#
# Environment:
#   TFS_TEST_BUCKET          bucket to create (default tierfs-test)
#   TFS_RGW_ACCESS_KEY       S3 access key (default tierfsaccess)
#   TFS_RGW_SECRET_KEY       S3 secret key (default tierfssecret)
#   TFS_RGW_MEMSTORE_BYTES   memstore capacity (default 1 GiB; data is in RAM)
#   TFS_RGW_BLUESTORE_BYTES  if set: the osd uses bluestore on a sparse file
#                            of this size in DIR/ceph/osd.0.block instead of
#                            memstore (data on disk; memstore costs ~15 KiB
#                            of RAM per small object, too much for a million
#                            of them: bench/scale.sh)
#   TFS_RGW_START_TIMEOUT    per-step readiness deadline in s (default 30)
#   TFS_RGW_GC_WAIT          seconds before RGW frees the data of deleted and
#                            overwritten objects (default RGW's own, 2 hours;
#                            bench/meta.sh sets 10 so memstore does not fill)
set -eu

HARNESS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
ACCESS_KEY=${TFS_RGW_ACCESS_KEY:-tierfsaccess}
SECRET_KEY=${TFS_RGW_SECRET_KEY:-tierfssecret}
MEMSTORE_BYTES=${TFS_RGW_MEMSTORE_BYTES:-1073741824}
BLUESTORE_BYTES=${TFS_RGW_BLUESTORE_BYTES:-}
STEP_TIMEOUT=${TFS_RGW_START_TIMEOUT:-30}
GC_WAIT=${TFS_RGW_GC_WAIT:-}
STOP_TIMEOUT=10
# sha256 of the empty payload: RGW 16.2 insists on x-amz-content-sha256.
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

unset CEPH_ARGS CEPH_CONF AWS_CA_BUNDLE
# any python3 runs freeport.py; the system one starts faster than a pyenv shim
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}

now_ms() {
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
}

# ---------------------------------------------------------------- stop ----

# is_ours PID BINARY: PID is alive (not a zombie) and runs BINARY with our
# cluster config, i.e. it is a daemon this script started for this DIR.
is_ours() {
    local pid=$1 bin=$2 cmd
    case "$pid" in '' | *[!0-9]*) return 1 ;; esac
    [ -r "/proc/$pid/cmdline" ] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    case "$cmd" in
        *"$bin"*"-c $CONF "*) return 0 ;;
    esac
    return 1
}

# stop_one NAME BINARY: TERM the pid in DIR/NAME.pid, poll, then KILL.
stop_one() {
    local name=$1 bin=$2 pidfile="$DIR/$1.pid" pid deadline
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile" 2>/dev/null || true)
    if is_ours "$pid" "$bin"; then
        kill -TERM "$pid" 2>/dev/null || true
        deadline=$(($(now_ms) + STOP_TIMEOUT * 1000))
        while is_ours "$pid" "$bin" && [ "$(now_ms)" -lt "$deadline" ]; do
            sleep 0.02
        done
        if is_ours "$pid" "$bin"; then
            echo "rgw.sh: $name (pid $pid) ignored SIGTERM, sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            deadline=$(($(now_ms) + 5000))
            while is_ours "$pid" "$bin" && [ "$(now_ms)" -lt "$deadline" ]; do
                sleep 0.02
            done
        fi
    fi
    rm -f "$pidfile"
}

do_stop() {
    stop_one rgw radosgw
    stop_one osd ceph-osd
    stop_one mon ceph-mon
    rm -f "$DIR/env"
}

# --------------------------------------------------------------- start ----

STARTED=0
STEP="init"
T0=0

fail() { # fail MESSAGE [LOGFILE...]
    local msg=$1 f
    shift
    echo "rgw.sh: step '$STEP' failed: $msg" >&2
    for f in "$@"; do
        if [ -s "$f" ]; then
            echo "---- last lines of $f ----" >&2
            tail -n 25 "$f" >&2 || true
        fi
    done
    [ $# -eq 0 ] || echo "----" >&2
    exit 1 # the EXIT trap stops whatever was started
}

on_exit() {
    local rc=$?
    if [ "$STARTED" != 1 ]; then
        [ "$rc" != 0 ] || rc=1
        echo "rgw.sh: start aborted during step '$STEP', stopping the cluster" >&2
        do_stop
    fi
    exit "$rc"
}

step() {
    STEP=$1
    echo "rgw.sh: [$(($(now_ms) - T0)) ms] $STEP" >>"$CEPH_DIR/timings"
}

# ceph_cli ARGS...: bounded ceph CLI call against our cluster.
ceph_cli() {
    timeout 20 ceph -c "$CONF" --connect-timeout 10 "$@" 2>>"$CEPH_DIR/cli.err"
}

# spawn NAME BINARY ARGS...: start a foreground daemon in the background and
# record its pid in DIR/NAME.pid.
spawn() {
    local name=$1 pid deadline
    shift
    "$@" </dev/null >>"$CEPH_DIR/$name.out" 2>&1 &
    pid=$!
    echo "$pid" >"$DIR/$name.pid"
    # Until the forked shell has exec'd the daemon, /proc/PID/cmdline is this
    # script's, and alive/is_ours would take the daemon for dead.
    deadline=$(($(now_ms) + 5000))
    while ! alive "$name" && kill -0 "$pid" 2>/dev/null &&
        [ "$(now_ms)" -lt "$deadline" ]; do
        sleep 0.005
    done
}

# reap_stale_watchers: a radosgw that died during init (e.g. its port was
# taken) leaves watches on the control objects, and the next radosgw's
# notifies would wait osd_client_watch_timeout (30 s) for them.  With no
# radosgw running, every watcher is stale: blocklist them all.
reap_stale_watchers() {
    local i addr
    for i in 0 1 2 3 4 5 6 7; do
        timeout 10 rados -c "$CONF" -p default.rgw.control listwatchers "notify.$i" 2>/dev/null || true
    done | sed -n 's/^watcher=\([^ ]*\) .*/\1/p' | sort -u | while read -r addr; do
        ceph_cli osd blocklist add "$addr" 3600 >/dev/null || true
    done
}

alive() { # alive NAME: the daemon recorded in DIR/NAME.pid is running
    local pid bin
    case "$1" in mon) bin=ceph-mon ;; osd) bin=ceph-osd ;; *) bin=radosgw ;; esac
    pid=$(cat "$DIR/$1.pid" 2>/dev/null || true)
    is_ours "$pid" "$bin"
}

# owns_listener PORT PID: the LISTEN socket on 127.0.0.1:PORT belongs to PID
# (guards against another server having grabbed the port we picked).
owns_listener() {
    local port=$1 pid=$2 inode fd
    inode=$(awk -v a="$(printf '0100007F:%04X' "$port")" \
        '$2 == a && $4 == "0A" { print $10; exit }' /proc/net/tcp 2>/dev/null) || return 1
    [ -n "$inode" ] || return 1
    for fd in /proc/"$pid"/fd/*; do
        [ "$(readlink "$fd" 2>/dev/null)" = "socket:[$inode]" ] && return 0
    done
    return 1
}

# store_conf: the [osd] lines of the object store
store_conf() {
    if [ -z "$BLUESTORE_BYTES" ]; then
        printf 'osd objectstore = memstore\nmemstore device bytes = %s\n' "$MEMSTORE_BYTES"
        return
    fi
    cat <<EOF
osd objectstore = bluestore
bluestore block path = $CEPH_DIR/\$name.block
bluestore block create = true
bluestore block size = $BLUESTORE_BYTES
bluestore block db create = false
bluestore block wal create = false
bluestore fsck on mkfs = false
# a small box shared with the clients: keep the caches small
osd memory target = 1073741824
bluestore cache autotune = false
bluestore cache size = 268435456
EOF
}

write_conf() {
    local monport=$1 fsid=$2
    cat >"$CONF" <<EOF
# generated by tests/harness/rgw.sh — throwaway test cluster
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$monport
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
# a taken port fails at once (default: 3 tries 5 s apart); rgw.sh retries
ms bind retry count = 1
ms bind retry delay = 0
auth cluster required = none
auth service required = none
auth client required = none
# radosgw defaults ms_mon_client_mode to "secure", impossible without cephx
ms mon client mode = crc
keyring = $CEPH_DIR/keyring
run dir = $CEPH_DIR
crash dir = $CEPH_DIR/crash
log file = $CEPH_DIR/\$name.log
log to stderr = false
err to stderr = true
mon cluster log file = $CEPH_DIR/ceph.\$channel.log
mon debug dump location = $CEPH_DIR/\$name.tdump
mgr data = $CEPH_DIR/\$name
mds data = $CEPH_DIR/\$name
pid file =
client mount timeout = 20
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000

[mon]
mon data = $CEPH_DIR/\$name
mon data avail warn = 2
mon data avail crit = 1
# commit paxos proposals immediately instead of batching them
paxos propose interval = 0
paxos min wait = 0
mon osd prime pg temp = false

[osd]
osd data = $CEPH_DIR/\$name
osd journal = $CEPH_DIR/\$name/journal
# rgw.sh polls osd.0.log for "state: booting -> active" (a level-1 message)
debug osd = 1/5
$(store_conf)
osd max object name len = 460
osd max object namespace len = 64

[client.rgw.a]
rgw data = $CEPH_DIR/rgw.a
rgw crypt require ssl = false
rgw thread pool size = 128
EOF
    if [ -n "$GC_WAIT" ]; then
        printf 'rgw gc obj min wait = %s\nrgw gc processor period = %s\n' "$GC_WAIT" "$GC_WAIT" >>"$CONF"
    fi
}

do_start() {
    local monport rgwport fsid osd_uuid attempt deadline out code n

    for n in mon osd rgw; do
        if alive "$n"; then
            echo "rgw.sh: a cluster is already running in $DIR; run '$0 stop $DIR' first" >&2
            exit 1
        fi
    done
    for n in ceph-mon ceph-osd radosgw radosgw-admin ceph rados ceph-authtool monmaptool curl timeout; do
        command -v "$n" >/dev/null || { echo "rgw.sh: $n not found" >&2; exit 1; }
    done

    T0=$(now_ms)
    trap on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    rm -f "$DIR/mon.pid" "$DIR/osd.pid" "$DIR/rgw.pid" "$DIR/env"
    rm -rf "$CEPH_DIR"
    mkdir -p "$CEPH_DIR/crash" "$CEPH_DIR/osd.0" "$CEPH_DIR/rgw.a"
    : >"$CEPH_DIR/timings"

    # ---- mon (retry with a fresh port if it was grabbed meanwhile) ----
    for attempt in 1 2 3; do
        step "mkfs"
        monport=$("$PY" "$HARNESS_DIR/freeport.py") || fail "cannot pick a free port"
        fsid=$(cat /proc/sys/kernel/random/uuid)
        osd_uuid=$(cat /proc/sys/kernel/random/uuid)
        rm -rf "$CEPH_DIR/mon.a" "$CEPH_DIR/osd.0"
        mkdir -p "$CEPH_DIR/osd.0"
        write_conf "$monport" "$fsid"
        ceph-authtool --create-keyring --gen-key --name=mon. --cap mon 'allow *' \
            "$CEPH_DIR/keyring" >"$CEPH_DIR/mkfs.out" 2>&1 ||
            fail "ceph-authtool" "$CEPH_DIR/mkfs.out"
        monmaptool --create --clobber --fsid "$fsid" \
            --addv a "[v2:127.0.0.1:$monport]" "$CEPH_DIR/monmap" >>"$CEPH_DIR/mkfs.out" 2>&1 ||
            fail "monmaptool" "$CEPH_DIR/mkfs.out"
        timeout 60 ceph-mon -c "$CONF" -i a --mkfs --monmap "$CEPH_DIR/monmap" \
            --keyring "$CEPH_DIR/keyring" >>"$CEPH_DIR/mkfs.out" 2>&1 ||
            fail "ceph-mon --mkfs" "$CEPH_DIR/mkfs.out" "$CEPH_DIR/mon.a.log"
        # memstore mkfs needs no monitor
        timeout 60 ceph-osd -c "$CONF" -i 0 --mkfs --no-mon-config --osd-uuid "$osd_uuid" \
            >>"$CEPH_DIR/mkfs.out" 2>&1 ||
            fail "ceph-osd --mkfs" "$CEPH_DIR/mkfs.out" "$CEPH_DIR/osd.0.log"

        step "mon quorum"
        spawn mon ceph-mon -c "$CONF" -i a -f
        deadline=$(($(now_ms) + STEP_TIMEOUT * 1000))
        while :; do
            if ! alive mon; then
                if grep -qi 'address already in use' "$CEPH_DIR/mon.a.log" "$CEPH_DIR/mon.out" 2>/dev/null; then
                    echo "rgw.sh: mon port $monport taken (attempt $attempt/3), retrying" >&2
                    rm -f "$DIR/mon.pid"
                    continue 2
                fi
                fail "ceph-mon exited" "$CEPH_DIR/mon.out" "$CEPH_DIR/mon.a.log"
            fi
            # the mon's cluster log records quorum (a CLI round trip costs
            # ~150 ms; 'ceph osd new' below verifies the mon end to end)
            if grep -q 'mons a in quorum' "$CEPH_DIR/ceph.cluster.log" 2>/dev/null; then
                break 2
            fi
            [ "$(now_ms)" -lt "$deadline" ] ||
                fail "no mon quorum within ${STEP_TIMEOUT}s" "$CEPH_DIR/mon.a.log"
            sleep 0.02
        done
    done
    alive mon || fail "could not start ceph-mon after 3 attempts" "$CEPH_DIR/mon.a.log"

    # ---- osd ----
    step "osd new"
    out=$(ceph_cli osd new "$osd_uuid" 0) ||
        fail "ceph osd new" "$CEPH_DIR/cli.err" "$CEPH_DIR/mon.a.log"
    [ "$out" = 0 ] || fail "ceph osd new returned id '$out', expected 0"

    step "osd up"
    spawn osd ceph-osd -c "$CONF" -i 0 -f
    deadline=$(($(now_ms) + STEP_TIMEOUT * 1000))
    while :; do
        alive osd || fail "ceph-osd exited" "$CEPH_DIR/osd.out" "$CEPH_DIR/osd.0.log"
        # logged (debug_osd 1) once the osd sees itself up in the osdmap
        if grep -q 'state: booting -> active' "$CEPH_DIR/osd.0.log" 2>/dev/null; then
            break
        fi
        [ "$(now_ms)" -lt "$deadline" ] ||
            fail "osd.0 not up within ${STEP_TIMEOUT}s" "$CEPH_DIR/osd.0.log"
        sleep 0.02
    done

    # ---- S3 user (also creates the rgw metadata pools) ----
    step "radosgw-admin user create"
    timeout 60 radosgw-admin -c "$CONF" user create --uid tierfs --display-name "tierfs tests" \
        --access-key "$ACCESS_KEY" --secret-key "$SECRET_KEY" >"$CEPH_DIR/user.json" 2>"$CEPH_DIR/radosgw-admin.err" ||
        fail "radosgw-admin user create" "$CEPH_DIR/radosgw-admin.err" "$CEPH_DIR/client.admin.log"

    # ---- radosgw (retry with a fresh port if it was grabbed meanwhile) ----
    for attempt in 1 2 3; do
        step "rgw http"
        # picked just before use to keep the window for a port thief small
        rgwport=$("$PY" "$HARNESS_DIR/freeport.py") || fail "cannot pick a free port"
        spawn rgw radosgw -c "$CONF" -n client.rgw.a -f \
            --rgw-frontends "beast endpoint=127.0.0.1:$rgwport tcp_nodelay=1"
        deadline=$(($(now_ms) + STEP_TIMEOUT * 1000))
        while :; do
            code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$rgwport/" 2>/dev/null) || true
            if [ -n "$code" ] && [ "$code" != 000 ]; then
                owns_listener "$rgwport" "$(cat "$DIR/rgw.pid")" && break 2
                fail "127.0.0.1:$rgwport answers HTTP but not from our radosgw" \
                    "$CEPH_DIR/client.rgw.a.log"
            fi
            if ! alive rgw; then
                if grep -qiE 'address already in use|failed to bind' "$CEPH_DIR/client.rgw.a.log" "$CEPH_DIR/rgw.out" 2>/dev/null; then
                    echo "rgw.sh: rgw port $rgwport taken (attempt $attempt/3), retrying" >&2
                    rm -f "$DIR/rgw.pid"
                    reap_stale_watchers
                    continue 2
                fi
                fail "radosgw exited" "$CEPH_DIR/rgw.out" "$CEPH_DIR/client.rgw.a.log"
            fi
            [ "$(now_ms)" -lt "$deadline" ] ||
                fail "radosgw not answering HTTP on 127.0.0.1:$rgwport within ${STEP_TIMEOUT}s" \
                    "$CEPH_DIR/client.rgw.a.log"
            sleep 0.05
        done
    done
    alive rgw || fail "could not start radosgw after 3 attempts" "$CEPH_DIR/client.rgw.a.log"

    # ---- bucket (SigV4-signed; us-east-1 → no LocationConstraint body) ----
    step "create bucket"
    code=$(curl -s -o "$CEPH_DIR/create-bucket.out" -m 30 -w '%{http_code}' -X PUT \
        --aws-sigv4 "aws:amz:us-east-1:s3" --user "$ACCESS_KEY:$SECRET_KEY" \
        -H "x-amz-content-sha256: $EMPTY_SHA256" \
        "http://127.0.0.1:$rgwport/$BUCKET") || code=000
    if [ "$code" != 200 ]; then
        # curl without --aws-sigv4 (< 7.75): fall back to boto3
        TFS_EP="http://127.0.0.1:$rgwport" python3 - "$BUCKET" "$ACCESS_KEY" "$SECRET_KEY" \
            >>"$CEPH_DIR/create-bucket.out" 2>&1 <<'EOF' ||
import os, sys, boto3
from botocore.config import Config
b, ak, sk = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=os.environ["TFS_EP"], region_name="us-east-1",
                  aws_access_key_id=ak, aws_secret_access_key=sk,
                  config=Config(s3={"addressing_style": "path"}))
s3.create_bucket(Bucket=b)
EOF
            fail "creating bucket '$BUCKET' (curl HTTP $code)" "$CEPH_DIR/create-bucket.out" \
                "$CEPH_DIR/client.rgw.a.log"
    fi

    step "done"
    cat >"$DIR/env.tmp" <<EOF
export TFS_S3_ENDPOINT=http://127.0.0.1:$rgwport
export TFS_S3_REGION=us-east-1
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export TFS_S3_KIND=rgw
export TFS_TEST_BUCKET=$BUCKET
export TFS_CEPH_CONF=$(printf %q "$CONF")
EOF
    mv "$DIR/env.tmp" "$DIR/env"
    STARTED=1
    trap - EXIT INT TERM
    echo "rgw.sh: rgw up on http://127.0.0.1:$rgwport (mon 127.0.0.1:$monport, bucket $BUCKET) in $(($(now_ms) - T0)) ms" >&2
}

[ $# -eq 2 ] || usage
[ -n "$2" ] || usage
if [ "$1" = stop ] && [ ! -d "$2" ]; then
    exit 0
fi
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
CEPH_DIR=$DIR/ceph
CONF=$CEPH_DIR/ceph.conf
case "$1" in
    start) do_start ;;
    stop) do_stop ;;
    *) usage ;;
esac
