#!/usr/bin/env bash
# test_cli.sh TIERFS - the command line as a user meets it: config errors
# with file:line and exit status 2, `tierfs near gc` usage errors, and
# `tierfs backend` round trips.
set -u
tierfs=${1:?usage: test_cli.sh PATH/TO/tierfs}
work=$(mktemp -d /tmp/tierfs-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2"; }

# expect NAME STATUS PATTERN CMD...: exit status and a line of output.
expect() {
	local name=$1 status=$2 pattern=$3
	shift 3
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	if [ "$rc" -ne "$status" ]; then
		bad "$name (exit $rc, expected $status)" "$out"
	elif [ -n "$pattern" ] && ! grep -qF -- "$pattern" <<<"$out"; then
		bad "$name (no '$pattern' in output)" "$out"
	else
		ok "$name"
	fi
}

bucket=$work/bucket
mkdir -p "$bucket"
empty=$work/empty.conf
: >"$empty"

printf '[ssd]\nsize = 12Q\n' >"$work/badvalue.conf"
expect "malformed value names file:line" 2 "$work/badvalue.conf:2:" \
	"$tierfs" config -c "$work/badvalue.conf"
printf '# comment\n[nosuch]\nkey = 1\n' >"$work/badsection.conf"
expect "unknown section names file:line" 2 "$work/badsection.conf:3:" \
	"$tierfs" config -c "$work/badsection.conf"
printf '[ram]\nsize = 1G\nbogus = 2\n' >"$work/badkey.conf"
expect "unknown key names file:line and key" 2 "bogus" \
	"$tierfs" config -c "$work/badkey.conf"
expect "unknown key error is at line 3" 2 "$work/badkey.conf:3:" \
	"$tierfs" config -c "$work/badkey.conf"
expect "-o with a bad value is a config error" 2 "command line" \
	"$tierfs" config -c "$empty" -o cache.block_size=3K
expect "missing -c file is a config error" 2 "$work/nope.conf" \
	"$tierfs" config -c "$work/nope.conf"
expect "-o overrides show in the effective config" 0 "policy = lru" \
	"$tierfs" config -c "$empty" -o cache.policy=lru
expect "a valid config dumps every section" 0 "[writeback]" \
	"$tierfs" config -c "$empty"
# The AWS SDKs' variables stand in for an unset region and endpoint, and
# say so; a bad one names the variable (tierfs.conf(5)).
expect "AWS_REGION gives the region, named as its origin" 0 \
	"region = eu-west-2  ; environment AWS_REGION" \
	env AWS_REGION=eu-west-2 AWS_DEFAULT_REGION=us-west-1 "$tierfs" config -c "$empty"
expect "AWS_ENDPOINT_URL gives the endpoint" 0 \
	"endpoint = http://127.0.0.1:9000  ; environment AWS_ENDPOINT_URL" \
	env AWS_ENDPOINT_URL=http://127.0.0.1:9000 "$tierfs" config -c "$empty"
expect "a bad AWS_REGION is a config error naming it" 2 "environment AWS_REGION='eu west'" \
	env AWS_REGION="eu west" "$tierfs" config -c "$empty"
expect "-o's region wins over AWS_REGION" 0 "region = eu-north-1  ; -o" \
	env AWS_REGION=eu-west-2 "$tierfs" config -c "$empty" -o backend.region=eu-north-1
expect "--version names the libraries" 0 "libcurl" "$tierfs" --version
expect "unknown command exits 2" 2 "unknown command" "$tierfs" frobnicate
expect "bad SOURCE scheme exits 2" 2 "unsupported scheme" \
	"$tierfs" backend -c "$empty" gs://b ls

head -c 3000000 /dev/urandom >"$work/blob"
# tierfs near gc: usage and configuration errors are status 2, with the reason
expect "near gc needs --max-size" 2 "usage: tierfs near" \
	"$tierfs" near -c "$empty" gc
expect "near gc refuses a size that is not one" 2 "--max-size '12Q': not a size" \
	"$tierfs" near -c "$empty" gc --max-size 12Q
expect "near gc without a [near] bucket" 2 "no [near] bucket" \
	"$tierfs" near -c "$empty" gc --max-size 1G
expect "near: an unknown operation" 2 "usage: tierfs near" \
	"$tierfs" near -c "$empty" sweep --max-size 1G
expect "near gc needs a [near] prefix (or --whole-bucket)" 2 "prefix is empty" \
	"$tierfs" near -c "$empty" -o near.bucket=copies gc --max-size 1G
expect "near.key shorter than 16 characters is a config error" 2 "at least 16" \
	"$tierfs" config -c "$empty" -o near.key=short
if out=$("$tierfs" config -c "$empty" -o near.key=a-secret-text-of-ours 2>&1) &&
	grep -qF "key = (set, not shown)" <<<"$out" && ! grep -qF "a-secret-text" <<<"$out"; then
	ok "tierfs config does not print near.key"
else
	bad "tierfs config does not print near.key" "$out"
fi

tb() { "$tierfs" backend -c "$empty" "$bucket" "$@"; }
expect "put a file" 0 "3000000 bytes" tb put "$work/blob" "dir/blob one"
expect "ls shows the prefix" 0 "PRE dir/" tb ls
expect "ls of the prefix shows the key" 0 "dir/blob one" tb ls dir/
expect "stat gives the size" 0 "size:  3000000" tb stat "dir/blob one"
expect "get into a file" 0 "" tb get "dir/blob one" "$work/back"
if cmp -s "$work/blob" "$work/back"; then ok "get returns the same bytes"; else bad "get returns the same bytes"; fi
expect "put from stdin" 0 "5 bytes" tb put - small <<<"data"
expect "get to stdout" 0 "data" tb get small
expect "server-side copy" 0 "" tb cp small "dir/copy"
expect "the copy is there" 0 "data" tb get dir/copy
expect "get of a missing key says so, exit 1" 1 "No such file or directory" tb get nothing
expect "rm" 0 "" tb rm small dir/copy "dir/blob one"
expect "rm leaves nothing behind" 0 "" tb ls -r
[ -z "$(tb ls -r)" ] && ok "bucket is empty after rm" || bad "bucket is empty after rm" "$(tb ls -r)"
expect "a non-directory local bucket is refused" 1 "cannot open" \
	"$tierfs" backend -c "$empty" "$work/blob" ls

printf '[default]\naws_access_key_id = AK\naws_secret_access_key = SECRETVALUE123\n' >"$work/creds"
chmod 644 "$work/creds"
expect "group/other-readable credentials file is refused" 1 "must not be readable by group or others" \
	"$tierfs" backend -c "$empty" -o backend.credentials_file="$work/creds" \
	-o backend.endpoint=http://127.0.0.1:1 s3://bucket ls
chmod 600 "$work/creds"
expect "a 0600 credentials file is accepted (then the server is unreachable)" 1 "Couldn't connect" \
	"$tierfs" backend -c "$empty" -o backend.credentials_file="$work/creds" -o backend.retries=0 \
	-o backend.endpoint=http://127.0.0.1:1 s3://bucket ls
out=$("$tierfs" backend -v -c "$empty" -o backend.credentials_file="$work/creds" -o backend.retries=0 \
	-o backend.endpoint=http://127.0.0.1:1 s3://bucket ls 2>&1)
if grep -q "SECRETVALUE123" <<<"$out"; then bad "the secret never appears in logs" "$out"; else ok "the secret never appears in logs"; fi

# Directories and files another user could have planted: `tierfs mount`
# fails before mounting, naming the path (lib/dirs.h, log.file).
mkdir -p "$work/mnt"
tm() { "$tierfs" mount -c "$empty" -o ssd.size=64M -o ram.size=16M "$@" "$bucket" "$work/mnt"; }
mkdir -m 0700 "$work/planted"
if [ "$(id -u)" = 0 ]; then
	chown 65534:65534 "$work/planted"
	expect "an ssd.dir owned by another uid is refused" 1 "'$work/planted' is owned by uid 65534" \
		tm -o ssd.dir="$work/planted"
	expect "a cache directory below one owned by another uid is refused" 1 \
		"'$work/planted' (above '$work/planted/cache') is owned by uid 65534" \
		tm -o ssd.dir="$work/planted/cache"
fi
mkdir -m 0700 "$work/open"
chmod 0777 "$work/open"
expect "a world-writable ssd.dir is refused" 1 "'$work/open' is writable by others (mode 0777)" \
	tm -o ssd.dir="$work/open"
expect "a cache directory below a world-writable one is refused" 1 "without the sticky bit" \
	tm -o ssd.dir="$work/open/cache"
[ ! -e "$work/open/cache" ] || [ -z "$(ls -A "$work/open/cache")" ] &&
	ok "nothing was created in the refused directory" || bad "nothing was created in the refused directory"
mkdir -m 0700 "$work/logs"
ln -s "$work/logs/target" "$work/logs/tierfs.log"
expect "a symlinked log.file is refused" 1 "log.file '$work/logs/tierfs.log'" \
	tm -o ssd.dir="$work/cache" -o log.file="$work/logs/tierfs.log"
[ ! -e "$work/logs/target" ] && ok "the symlink's target was not created" ||
	bad "the symlink's target was not created"
if mountpoint -q "$work/mnt"; then bad "no refused mount is mounted"; fusermount3 -uz "$work/mnt"; fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
