#!/usr/bin/env bash
# moto.sh — start/stop a throwaway moto S3 server on 127.0.0.1.
#
#   moto.sh start DIR   start moto_server, create the test bucket, write DIR/env
#   moto.sh stop DIR    stop the server recorded in DIR/moto.pid (idempotent)
#
# Files in DIR: moto.log (server output), moto.pid, moto.port, env.
# Environment: TFS_TEST_BUCKET (default tierfs-test), MOTO_SERVER (default
# moto_server from PATH), TFS_MOTO_START_TIMEOUT (seconds, default 20).
set -eu

HARNESS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUCKET=${TFS_TEST_BUCKET:-tierfs-test}
START_TIMEOUT=${TFS_MOTO_START_TIMEOUT:-20}
STOP_TIMEOUT=10
STARTED=0
# any python3 runs freeport.py; the system one starts faster than a pyenv shim
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

die() {
    echo "moto.sh: $*" >&2
    exit 1
}

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}

# now_ms: wall clock in milliseconds (bash 5 EPOCHREALTIME, no fork).
now_ms() {
    local t=${EPOCHREALTIME/[.,]/}
    echo $((t / 1000))
}

log_tail() {
    if [ -f "$DIR/moto.log" ]; then
        echo "---- last lines of $DIR/moto.log ----" >&2
        tail -n 30 "$DIR/moto.log" >&2 || true
        echo "----" >&2
    fi
}

# is_ours PID PORT: PID is alive and is the moto_server we started on PORT.
is_ours() {
    local pid=$1 port=$2 cmd
    [ -r "/proc/$pid/cmdline" ] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    case "$cmd" in
        *moto_server*"-p $port"*) return 0 ;;
    esac
    return 1
}

# http_up PORT: moto answers any HTTP response on PORT.
http_up() {
    local code
    code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/" 2>/dev/null) || true
    [ -n "$code" ] && [ "$code" != 000 ]
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

do_stop() {
    local pid port deadline
    [ -f "$DIR/moto.pid" ] || return 0
    pid=$(cat "$DIR/moto.pid" 2>/dev/null || true)
    port=$(cat "$DIR/moto.port" 2>/dev/null || true)
    case "$pid" in '' | *[!0-9]*) pid= ;; esac
    if [ -n "$pid" ] && [ -n "$port" ] && is_ours "$pid" "$port"; then
        kill -TERM "$pid" 2>/dev/null || true
        deadline=$(($(now_ms) + STOP_TIMEOUT * 1000))
        while is_ours "$pid" "$port" && [ "$(now_ms)" -lt "$deadline" ]; do
            sleep 0.05
        done
        if is_ours "$pid" "$port"; then
            echo "moto.sh: pid $pid ignored SIGTERM, sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
            deadline=$(($(now_ms) + 5000))
            while is_ours "$pid" "$port" && [ "$(now_ms)" -lt "$deadline" ]; do
                sleep 0.05
            done
        fi
    fi
    rm -f "$DIR/moto.pid" "$DIR/env"
}

on_exit() {
    local rc=$?
    if [ "$STARTED" != 1 ]; then
        do_stop
        [ "$rc" != 0 ] || rc=1
    fi
    exit "$rc"
}

do_start() {
    local server port pid attempt deadline t0 code
    server=${MOTO_SERVER:-$(command -v moto_server || true)}
    [ -n "$server" ] || die "moto_server not found on PATH"
    command -v curl >/dev/null || die "curl not found"
    mkdir -p "$DIR"
    if [ -f "$DIR/moto.pid" ]; then
        pid=$(cat "$DIR/moto.pid" 2>/dev/null || true)
        port=$(cat "$DIR/moto.port" 2>/dev/null || true)
        if [ -n "$pid" ] && [ -n "$port" ] && is_ours "$pid" "$port"; then
            die "already running in $DIR (pid $pid); run '$0 stop $DIR' first"
        fi
        rm -f "$DIR/moto.pid"
    fi
    unset AWS_CA_BUNDLE
    t0=$(now_ms)
    # whatever makes start fail (or an INT/TERM) stops the server again
    trap on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    # The port can be taken between freeport.py and moto binding it: retry.
    for attempt in 1 2 3; do
        port=$("$PY" "$HARNESS_DIR/freeport.py") || die "cannot pick a free port"
        echo "$port" >"$DIR/moto.port"
        "$server" -H 127.0.0.1 -p "$port" </dev/null >"$DIR/moto.log" 2>&1 &
        pid=$!
        echo "$pid" >"$DIR/moto.pid"
        deadline=$(($(now_ms) + START_TIMEOUT * 1000))
        while :; do
            if http_up "$port"; then
                if owns_listener "$port" "$pid"; then
                    break 2
                fi
                log_tail
                do_stop
                die "127.0.0.1:$port answers HTTP but not from our moto_server"
            fi
            if ! kill -0 "$pid" 2>/dev/null; then
                wait "$pid" 2>/dev/null || true
                rm -f "$DIR/moto.pid"
                if grep -qi 'address already in use' "$DIR/moto.log" 2>/dev/null; then
                    echo "moto.sh: port $port taken (attempt $attempt/3), retrying" >&2
                    continue 2
                fi
                log_tail
                die "moto_server exited during startup"
            fi
            if [ "$(now_ms)" -ge "$deadline" ]; then
                log_tail
                do_stop
                die "moto_server did not answer HTTP on 127.0.0.1:$port within ${START_TIMEOUT}s"
            fi
            sleep 0.05
        done
    done
    [ -f "$DIR/moto.pid" ] || die "could not start moto_server after 3 attempts"

    # moto accepts unsigned requests; CreateBucket in us-east-1 needs no body.
    code=$(curl -s -o "$DIR/moto.create-bucket.out" -m 10 -w '%{http_code}' \
        -X PUT "http://127.0.0.1:$port/$BUCKET") || code=000
    if [ "$code" != 200 ]; then
        cat "$DIR/moto.create-bucket.out" >&2 2>/dev/null || true
        log_tail
        do_stop
        die "creating bucket '$BUCKET' failed (HTTP $code)"
    fi
    rm -f "$DIR/moto.create-bucket.out"

    cat >"$DIR/env.tmp" <<EOF
export TFS_S3_ENDPOINT=http://127.0.0.1:$port
export TFS_S3_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing
export AWS_SECRET_ACCESS_KEY=testing
export TFS_S3_KIND=moto
export TFS_TEST_BUCKET=$BUCKET
EOF
    mv "$DIR/env.tmp" "$DIR/env"
    STARTED=1
    trap - EXIT INT TERM
    echo "moto.sh: moto up on http://127.0.0.1:$port (pid $pid, bucket $BUCKET) in $(($(now_ms) - t0)) ms" >&2
}

[ $# -eq 2 ] || usage
[ -n "$2" ] || usage
DIR=$2
case "$1" in
    start) do_start ;;
    stop) do_stop ;;
    *) usage ;;
esac
