#!/bin/sh
# deps.sh - install the Debian 12 packages tierfs needs, only if missing.
#   scripts/deps.sh build   compiler, autotools and -dev libraries
#   scripts/deps.sh test    build + test servers and tools (default)
#   scripts/deps.sh bench   test + peers for benchmarks (rclone, fio; s3fs is in test)
#   scripts/deps.sh deb     build + Debian packaging tools (dpkg-buildpackage)
# Runs apt-get only when something is missing; needs root for that.
set -eu

BUILD_PKGS="gcc make autoconf automake autoconf-archive pkg-config
  libfuse3-dev fuse3 libcurl4-openssl-dev libssl-dev liblmdb-dev
  libexpat1-dev libinih-dev libjson-c-dev libcriterion-dev libxxhash-dev
  libmicrohttpd-dev
  libgrpc-dev libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev"
TEST_PKGS="curl openssl python3 python3-botocore python3-boto3 man-db groff-base
  radosgw ceph-mon ceph-osd ceph-common ceph-base lmdb-utils procps psmisc"
# setpriv (tests/integration/test_flexvolume.py reads a mount as another uid);
# unshare and nsenter (test_ops.py's syslog test); PyYAML
# (test_flexvolume.py parses flexvolume/deploy/*.yaml)
TEST_PKGS="$TEST_PKGS util-linux python3-yaml"
# clang with ASan/UBSan and its libFuzzer runtime (tests/fuzz/build.sh);
# clang-format (scripts/check_format.sh); binutils' nm (scripts/check_calls.py)
TEST_PKGS="$TEST_PKGS clang libclang-rt-14-dev clang-format binutils"
# s3fs (tests/integration/test_s3fs_compat.py: each reads what the other wrote)
TEST_PKGS="$TEST_PKGS s3fs"
# gRPC for the CSI suite: tests/integration/test_csi.py runs under
# /usr/bin/python3, generates the stubs of csi/csi.proto with grpc_tools and
# calls tierfs-csi with grpcio (Debian packages them for /usr/bin/python3
# only); it writes objects with boto3, so python3-boto3 (above) must be
# importable by /usr/bin/python3 too, not only by moto's pip environment.
TEST_PKGS="$TEST_PKGS python3-grpcio python3-grpc-tools"
# PyTorch for tests/integration/test_python.py (tierfs.torch and examples/),
# also under /usr/bin/python3: Debian's torch 1.13, torchvision 0.14, PIL
TEST_PKGS="$TEST_PKGS python3-torch python3-torchvision python3-pil"
BENCH_PKGS="rclone fio hyperfine"
# dpkg-buildpackage -us -uc with debian/ (tests/integration/test_deb.sh);
# debian/control's Build-Depends are BUILD_PKGS and these.
DEB_PKGS="dpkg-dev debhelper dh-autoreconf fakeroot build-essential"

what=${1:-test}
case $what in
build) pkgs=$BUILD_PKGS ;;
test) pkgs="$BUILD_PKGS $TEST_PKGS" ;;
bench) pkgs="$BUILD_PKGS $TEST_PKGS $BENCH_PKGS" ;;
deb) pkgs="$BUILD_PKGS $DEB_PKGS" ;;
*) echo "usage: $0 [build|test|bench|deb]" >&2; exit 2 ;;
esac

missing=""
for p in $pkgs; do
	# python3-boto3/botocore/yaml may come from pip (moto's environment) instead.
	case $p in
	python3-botocore) python3 -c 'import botocore' 2>/dev/null && continue ;;
	python3-boto3) python3 -c 'import boto3' 2>/dev/null && /usr/bin/python3 -c 'import boto3' 2>/dev/null && continue ;;
	python3-grpcio | python3-grpc-tools) /usr/bin/python3 -c 'import grpc, grpc_tools' 2>/dev/null && continue ;;
	python3-yaml) python3 -c 'import yaml' 2>/dev/null && continue ;;
	esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -n "$missing" ]; then
	echo "deps: installing:$missing"
	if [ "$(id -u)" != 0 ]; then
		echo "deps: run as root (or install these packages yourself):$missing" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ "$what" != build ] && [ "$what" != deb ] && ! command -v moto_server >/dev/null 2>&1; then
	# moto is not packaged for Debian 12's python3 here; it must come with
	# the machine's python (the CI image has it).  Try Debian's as a fallback.
	if [ "$(id -u)" = 0 ] && apt-cache show python3-moto >/dev/null 2>&1; then
		apt-get install -y -qq python3-moto >/dev/null
	fi
	command -v moto_server >/dev/null 2>&1 || {
		echo "deps: moto_server not found (python3 -m pip install 'moto[server]')" >&2
		exit 1
	}
fi
exit 0
