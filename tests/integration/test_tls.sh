#!/usr/bin/env bash
# test_tls.sh TIERFS - HTTPS to a loopback S3 server with a self-signed
# certificate: refused without backend.ca_file (verification is never
# switched off), accepted with it.
set -u
tierfs=${1:?usage: test_tls.sh PATH/TO/tierfs}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d /tmp/tierfs-tls-XXXXXX)
pid=""
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2"; }

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=127.0.0.1" \
	-addext "subjectAltName=IP:127.0.0.1" -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null ||
	{ echo "tls: openssl cannot make a certificate"; echo "tls: 0 passed, 1 failed"; exit 1; }
port=$(python3 "$here/../harness/freeport.py")
unset AWS_CA_BUNDLE
moto_server -H 127.0.0.1 -p "$port" -c "$work/cert.pem" -k "$work/key.pem" >"$work/moto.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
	curl -s --cacert "$work/cert.pem" "https://127.0.0.1:$port/" >/dev/null && break
	sleep 0.1
done
curl -s --cacert "$work/cert.pem" -X PUT "https://127.0.0.1:$port/tlsbucket" >/dev/null ||
	{ echo "tls: moto did not come up"; tail "$work/moto.log"; echo "tls: 0 passed, 1 failed"; exit 1; }

export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
: >"$work/empty.conf"
echo "over TLS" >"$work/obj"
tb() { "$tierfs" backend -c "$work/empty.conf" -o backend.endpoint="https://127.0.0.1:$port" -o backend.retries=0 "$@"; }

out=$(tb s3://tlsbucket put "$work/obj" k 2>&1)
if [ $? -ne 0 ] && grep -qi "certificate" <<<"$out"; then
	ok "a self-signed server is refused without ca_file, and the error says why"
else
	bad "a self-signed server is refused without ca_file" "$out"
fi
out=$(tb -o backend.ca_file="$work/cert.pem" s3://tlsbucket put "$work/obj" k 2>&1)
if [ $? -eq 0 ]; then ok "ca_file makes the server trusted"; else bad "ca_file makes the server trusted" "$out"; fi
out=$(tb -o backend.ca_file="$work/cert.pem" s3://tlsbucket get k 2>&1)
if [ "$out" = "over TLS" ]; then ok "data round-trips over TLS"; else bad "data round-trips over TLS" "$out"; fi

echo "tls: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
