#!/usr/bin/env bash
# conformance.sh - run the backend conformance suite against one backend.
#   conformance.sh local|local-walk|moto|rgw PATH/TO/test_conformance [criterion args]
# local-walk: the local backend resolving keys without openat2().
# For moto and rgw the server is started in a temporary directory and
# stopped (by its recorded pids) whatever happens.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kind=${1:?usage: conformance.sh local|local-walk|moto|rgw BINARY}
bin=${2:?usage: conformance.sh local|local-walk|moto|rgw BINARY}
shift 2
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN || true

case $kind in
local)
	TFS_TEST_BACKEND=local exec "$bin" "$@"
	;;
local-walk)
	TFS_TEST_BACKEND=local TFS_LOCAL_WALK=1 exec "$bin" "$@"
	;;
moto | rgw)
	dir=$(mktemp -d /tmp/tierfs-$kind-XXXXXX)
	trap '"$here/$kind.sh" stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
	"$here/$kind.sh" start "$dir"
	# shellcheck disable=SC1091
	. "$dir/env"
	export TFS_TEST_BACKEND=s3
	rc=0
	"$bin" "$@" || rc=$?
	exit $rc
	;;
*)
	echo "conformance.sh: unknown backend '$kind'" >&2
	exit 2
	;;
esac
