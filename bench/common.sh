# bench/common.sh — shell functions shared by bench/run.sh (read path),
# bench/write.sh (write path) and bench/policy.sh (usage, log, die only).
# Sourced, not run.
#
# Source it first thing, before the arguments are shifted: it sets PROG
# (the script's name, for messages), BENCH_DIR, REPO, HARNESS and COMMAND
# (the command line, for the report).  The script then sets, before it
# calls anything here:
#   WORK, SERVER (rgw|moto), OUT
#   PEERS     the selected peers, space-separated.  A peer is s3fs, rclone
#             or tierfs, optionally with a "-VARIANT" suffix (rclone-wb0),
#             the part before the first '-' names the program
# and defines skip_all FS (record every measurement of FS as skipped).
#
# Call order: bench_tools, [build_tool NAME], bench_rundir, start_server,
# peer_configs, then mount_fs/umount_current per measurement, select_peers,
# and at the end machine_meta, peer_meta and finish_report.
# shellcheck shell=bash

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/.." && pwd)
HARNESS=$REPO/tests/harness
PROG=$(basename "$0")
# sourced without arguments, so "$@" is the script's command line
COMMAND=$(printf '%q ' "$0" "$@")
COMMAND=${COMMAND% }

# usage: print the script's header comment (its help) and exit 2
usage() {
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
    exit 2
}

T_START=${EPOCHREALTIME/[.,]/}
log() {
    local t=${EPOCHREALTIME/[.,]/}
    printf '[%6.1fs] %s\n' "$(((t - T_START) / 100000))e-1" "$*" >&2
}
die() {
    echo "$PROG: $*" >&2
    exit 1
}

# peer_prog FS: the program behind a peer id (rclone-wb0 → rclone)
peer_prog() {
    echo "${1%%-*}"
}

# ------------------------------------------------------------ tools ----

# bench_tools: check the tools, install missing s3fs/rclone with apt-get
# (those peers are skipped if that fails), find the tierfs binary.
# Sets TIERFS and TIERFS_OK (1 if `$TIERFS mount --help` exits 0).
bench_tools() {
    local need_pkgs='' t p
    for t in curl gcc python3 findmnt mountpoint; do
        command -v "$t" >/dev/null || die "$t not found"
    done
    command -v fusermount3 >/dev/null || command -v fusermount >/dev/null || need_pkgs="$need_pkgs fuse3"
    for p in $PEERS; do
        p=$(peer_prog "$p")
        case "$p" in
            s3fs | rclone)
                command -v "$p" >/dev/null || case " $need_pkgs " in *" $p "*) ;; *) need_pkgs="$need_pkgs $p" ;; esac ;;
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
}

# build_tool NAME [LINK WORDS...]: compile bench/NAME.c into $WORK/bin/NAME
# unless it is up to date
build_tool() {
    local bin=$WORK/bin/$1 src=$BENCH_DIR/$1.c
    shift
    mkdir -p "$WORK/bin"
    if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
        gcc -O2 -std=c11 -Wall -pthread -o "$bin.tmp" "$src" "$@" ||
            die "compiling $src failed"
        mv "$bin.tmp" "$bin"
    fi
}

# ------------------------------------------------------ run dir, trap ----

# bench_rundir: create $RUN ($WORK/run.XXXXXX) with logs/, mnt/, an empty
# results.tsv and meta.tsv, and install the EXIT trap
bench_rundir() {
    RUN=$(mktemp -d "$WORK/run.XXXXXX")
    mkdir -p "$RUN/logs" "$RUN/mnt"
    : >"$RUN/results.tsv"
    : >"$RUN/meta.tsv"
    SERVER_DIR=$RUN/server
    CUR_FS='' CUR_PID='' CUR_MNT='' CUR_NAME='' SERVER_UP=0 SUCCESS=0
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

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
    name=$CUR_NAME
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
    CUR_FS='' CUR_PID='' CUR_MNT='' CUR_NAME=''
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "${EXTRA_CLEANUP:-}" ]; then "$EXTRA_CLEANUP"; fi
    umount_current
    if [ "$SERVER_UP" = 1 ]; then
        bash "$HARNESS/$SERVER.sh" stop "$SERVER_DIR" >/dev/null 2>&1 || true
    fi
    rm -rf "${RUN:?}"/cache "${RUN:?}"/cache-* "${RUN:?}/mnt"
    if [ "$SUCCESS" = 1 ]; then
        rm -rf "$RUN"
    else
        echo "$PROG: failed (rc $rc); logs kept in $RUN" >&2
    fi
    exit "$rc"
}

drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

# ------------------------------------------------------------- server ----

# start_server: start $SERVER in $SERVER_DIR (the caller exports
# TFS_RGW_MEMSTORE_BYTES first), load its env; sets BUCKET, EP, REGION,
# SERVER_VERSION and CURL_SIGN (curl arguments for a SigV4-signed request)
start_server() {
    log "starting $SERVER"
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
    # shellcheck disable=SC2034 # used by the sourcing scripts
    CURL_SIGN=(--aws-sigv4 "aws:amz:$REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
        -H "x-amz-content-sha256: $EMPTY_SHA256")
}
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# pin_cpus: with PIN=1 (--pin), give the S3 server CPU 0 and everything
# else (this script and all it starts from now on: the peers, curl, the
# readers) the other CPUs, as if the store ran on its own machine.  On a
# small box the server otherwise competes with the file system it serves
# for the same cores, and a benchmark of a client measures that contention.
# Call right after start_server.  Sets PIN_DESC for the report.
pin_cpus() {
    PIN_DESC="no (server and clients share all $(nproc) CPUs)"
    [ "${PIN:-0}" = 1 ] || return 0
    local n last f
    n=$(nproc)
    [ "$n" -ge 2 ] || die "--pin needs at least 2 CPUs"
    command -v taskset >/dev/null || die "--pin needs taskset (util-linux)"
    last=$((n - 1))
    for f in "$SERVER_DIR"/*.pid; do
        [ -f "$f" ] && taskset -a -p -c 0 "$(cat "$f")" >/dev/null
    done
    taskset -p -c "1-$last" $$ >/dev/null
    PIN_DESC="yes: the server on CPU 0, the clients on CPU$([ "$last" -gt 1 ] && echo "s 1-$last" || echo " 1")"
    log "pinned: $PIN_DESC"
}

# ------------------------------------------------------------ peers ----

# peer_configs: write the peers' configuration files into $RUN and set
# S3FS_CMD, RCLONE_CMD, TIERFS_CMD (the mount commands, for the report)
peer_configs() {
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
}

# mount_fs FS [WORD...]: mount FS on $RUN/mnt/FS with its cache in
# $RUN/cache/FS; the WORDs are added to the mount command (after the
# *_OPTS words).  With MOUNT_PREFIX set, only the keys below
# $MOUNT_PREFIX/ are mounted.  Sets CUR_FS, CUR_PID, CUR_MNT, CUR_NAME.
mount_fs() {
    local fs=$1 mnt=$RUN/mnt/$1 cache=$RUN/cache/$1 name
    shift
    name=$(peer_prog "$fs")
    mkdir -p "$mnt" "$cache"
    case "$name" in
        s3fs)
            # shellcheck disable=SC2086
            s3fs "$BUCKET${MOUNT_PREFIX:+:/$MOUNT_PREFIX}" "$mnt" -f -o url="$EP" -o use_path_request_style \
                -o passwd_file="$RUN/s3fs.passwd" -o use_cache="$cache" \
                -o endpoint="$REGION" -o sigv4 ${S3FS_OPTS:-} "$@" \
                </dev/null >>"$RUN/logs/$fs.log" 2>&1 &
            ;;
        rclone)
            # shellcheck disable=SC2086
            rclone mount --config "$RUN/rclone.conf" "bench:$BUCKET${MOUNT_PREFIX:+/$MOUNT_PREFIX}" "$mnt" \
                --vfs-cache-mode full --cache-dir "$cache" \
                --log-file "$RUN/logs/$fs.log" ${RCLONE_OPTS:-} "$@" \
                </dev/null >>"$RUN/logs/$fs.out" 2>&1 &
            ;;
        tierfs)
            name=$(basename "$TIERFS")
            # shellcheck disable=SC2086
            "$TIERFS" mount -c "$RUN/tierfs.conf" -o ssd.dir="$cache" ${TIERFS_OPTS:-} "$@" \
                -f "s3://$BUCKET${MOUNT_PREFIX:+/$MOUNT_PREFIX}" "$mnt" </dev/null >>"$RUN/logs/$fs.out" 2>&1 &
            ;;
    esac
    CUR_FS=$fs CUR_PID=$! CUR_MNT=$mnt CUR_NAME=$name
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

fresh_cache() {
    rm -rf "$RUN/cache/$1"
}

# select_peers: set ACTIVE to the peers of $PEERS that can run; the others
# are announced and recorded with skip_all
select_peers() {
    local fs
    ACTIVE=
    for fs in $PEERS; do
        if [ "$(peer_prog "$fs")" = tierfs ]; then
            if [ "$TIERFS_OK" != 1 ]; then
                echo "$fs: skipped (no mount support yet)" >&2
                skip_all "$fs"
                continue
            fi
        elif ! command -v "$(peer_prog "$fs")" >/dev/null; then
            echo "$fs: skipped (not installed)" >&2
            skip_all "$fs"
            continue
        fi
        ACTIVE="$ACTIVE $fs"
    done
}

# ---------------------------------------------------- warm-pass GETs ----

# A warm figure read from the bucket is not a warm figure (issue 32): every
# warm (or hot) pass of tierfs must make no backend GET.  warm_begin FS MNT
# notes the GETs tierfs at MNT has made so far (`tierfs stats`; peers other
# than tierfs have no such counter: nothing is noted).  warm_end FS WHAT
# checks the pass since: if it made GETs it logs them, appends
# "FS WHAT GETS" to $RUN/warm_gets.tsv and returns 1 (the caller records
# the pass as failed); without a warm_begin it returns 0.  finish_report
# then fails the run (warm_verdict).
WARM_GETS0='' WARM_MNT=''

# tierfs_gets MNT: backend GETs of the tierfs daemon serving MNT
tierfs_gets() {
    "$TIERFS" stats --json "$1" 2>>"$RUN/logs/stats.err" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["backend"]["get"]["requests"])'
}

warm_begin() {
    WARM_GETS0='' WARM_MNT=''
    [ "$(peer_prog "$1")" = tierfs ] || return 0
    WARM_MNT=$2
    WARM_GETS0=$(tierfs_gets "$2") || die "tierfs stats $2 failed; see $RUN/logs/stats.err"
}

warm_end() {
    local now n
    [ -n "$WARM_GETS0" ] || return 0
    now=$(tierfs_gets "$WARM_MNT") || die "tierfs stats $WARM_MNT failed; see $RUN/logs/stats.err"
    n=$((now - WARM_GETS0))
    WARM_GETS0=''
    [ "$n" = 0 ] && return 0
    log "$1 $2: FAILED: the warm pass made $n backend GETs (not a warm figure)"
    printf '%s\t%s\t%s\n' "$1" "$2" "$n" >>"$RUN/warm_gets.tsv"
    return 1
}

# warm_verdict: fail the run (logs kept) if a warm pass made backend GETs
warm_verdict() {
    [ -s "$RUN/warm_gets.tsv" ] || return 0
    die "warm passes made backend GETs ($(awk '{ printf "%s%s %s: %d", (NR > 1 ? "; " : ""), $1, $2, $3 }' \
        "$RUN/warm_gets.tsv")); the report above is not appended${OUT:+ to $OUT}"
}

# ------------------------------------------------------------- report ----

# machine_meta ELAPSED_NOTE: record when, what and where (date, command,
# commit, run time, machine, disk of $WORK, server)
machine_meta() {
    local t_end src fstype disk dev rota size model ra
    t_end=${EPOCHREALTIME/[.,]/}
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
    meta elapsed "$(awk -v d=$((t_end - T_START)) 'BEGIN { printf "%.0f", d / 1e6 }') s${1:+ ($1)}"
    meta nproc "$(nproc --all)"
    meta ram "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    meta kernel "$(uname -r)"
    meta cpu "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    meta workdir "$WORK"
    meta disk "$disk"
    meta server "$SERVER"
    meta server_version "$SERVER_VERSION"
    meta pinned "${PIN_DESC:-no}"
}

# peer_meta: record the version and mount command of s3fs, rclone, tierfs
peer_meta() {
    meta peer_s3fs "$(s3fs --version 2>/dev/null | head -1 | sed 's/.*V\([0-9.]*\).*/s3fs \1/'): \`$S3FS_CMD\`"
    meta peer_rclone "$(rclone version 2>/dev/null | head -1): \`$RCLONE_CMD\`"
    if [ "$TIERFS_OK" = 1 ]; then
        meta peer_tierfs "tierfs $("$TIERFS" --version 2>/dev/null | head -1): \`$TIERFS_CMD\`"
    else
        meta peer_tierfs "tierfs: skipped (no mount support yet)"
    fi
}

# finish_report SCRIPT: print the Markdown report SCRIPT makes of $RUN,
# fail the run if a warm pass made backend GETs (warm_verdict), else
# append it to $OUT if set, and mark the run a success
finish_report() {
    local report
    report=$(python3 "$1" "$RUN") || die "$(basename "$1") failed"
    printf '%s\n' "$report"
    warm_verdict
    if [ -n "$OUT" ]; then
        printf '%s\n\n' "$report" >>"$OUT"
        log "report appended to $OUT"
    fi
    SUCCESS=1
}
