#!/usr/bin/env bash
# test_deb.sh - the Debian package as an admin meets it: build it from the
# working tree with `dpkg-buildpackage -us -uc` (in a copy under /tmp, so
# the tree is left alone), check what it holds, install it with apt-get,
# and use the installed commands: `tierfs --version`, a mount of a
# local-directory bucket with /usr/bin/tierfs and one with
# `mount -t fuse.tierfs` (the mount.fuse.tierfs helper), byte-exact reads,
# unmounts; the second package, python3-tierfs: `import tierfs` under
# /usr/bin/python3 and tierfs.Mount on a mount; then purge both.  Needs root; run by
# `./check.sh --extended`.  Ends with "deb: N passed, N failed".
#   tests/integration/test_deb.sh [--keep]   --keep: leave it installed
set -u
cd "$(dirname "$0")/../.." || exit 2
keep=0
[ "${1:-}" = --keep ] && keep=1
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2"; }
summary() { echo "deb: $pass passed, $fail failed"; [ $fail -eq 0 ]; exit; }
# expect NAME CMD...: CMD exits 0 (its output is shown if not).
expect() {
	local name=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	if [ $rc -eq 0 ]; then ok "$name"; else bad "$name (exit $rc)" "$(tail -n 30 <<<"$out")"; fi
	return $rc
}

if [ "$(id -u)" != 0 ]; then
	bad "runs as root (it installs a package and mounts)"
	summary
fi
for p in tierfs python3-tierfs; do
	if dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q 'install ok installed'; then
		bad "the $p package is not installed before the test (dpkg --purge $p first)"
		summary
	fi
done
expect "build tools are installed (scripts/deps.sh deb)" scripts/deps.sh deb || summary

work=$(mktemp -d /tmp/tierfs-deb-XXXXXX)
mnt=$work/mnt
installed=0
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null || grep -qF " $mnt fuse.tierfs " /proc/mounts; then
		fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null
	fi
	if [ $installed = 1 ] && [ $keep = 0 ]; then
		dpkg --purge python3-tierfs tierfs >/dev/null 2>&1
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# ---- build, in a copy of the tree: what git tracks plus new files it does
# not ignore (no build trees), or the whole tree outside git ----
version=$(dpkg-parsechangelog -S Version)
src=$work/tierfs-$version
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done |
		tar -c --null -T - | tar -x -C "$src"
else
	tar -c --exclude='./build*' --exclude=./.work --exclude=./debian/build . | tar -x -C "$src"
fi
jobs=$(nproc 2>/dev/null || echo 2)
log=$work/build.log
if (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs" DEB_BUILD_PROFILES=nocheck dpkg-buildpackage -us -uc) >"$log" 2>&1; then
	ok "dpkg-buildpackage -us -uc builds the package"
else
	bad "dpkg-buildpackage -us -uc builds the package" "$(tail -n 40 "$log")"
	summary
fi
deb=$(ls "$work"/tierfs_"$version"_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] && ok "the build made $(basename "$deb")" || { bad "the build made a .deb" "$(ls "$work")"; summary; }

# ---- what the package holds ----
contents=$(dpkg-deb -c "$deb" | awk '{ print $6 $7 $8 }')
for f in ./usr/bin/tierfs ./sbin/mount.tierfs ./sbin/mount.fuse.tierfs '->mount.tierfs' \
	./usr/sbin/tierfs-flexvolume ./usr/sbin/tierfs-csi ./usr/share/man/man1/tierfs.1.gz \
	./usr/share/man/man5/tierfs.conf.5.gz ./usr/share/man/man8/tierfs-flexvolume.8.gz \
	./usr/share/man/man8/tierfs-csi.8.gz \
	./usr/share/man/man8/mount.tierfs.8.gz ./usr/share/man/man8/mount.fuse.tierfs.8.gz \
	./lib/systemd/system/tierfs@.service ./usr/share/doc/tierfs/examples/tierfs.conf.example \
	./usr/share/doc/tierfs/examples/fstab.example ./usr/share/doc/tierfs/copyright \
	./usr/share/doc/tierfs/changelog.gz; do
	grep -qF -- "$f" <<<"$contents" && ok "the package has $f" || bad "the package has $f"
done
# python3-tierfs: the Python package, for Debian's python3, without byte code
pydeb=$(ls "$work"/python3-tierfs_"$version"_all.deb 2>/dev/null | head -n 1)
[ -n "$pydeb" ] && ok "the build made $(basename "$pydeb")" || { bad "the build made python3-tierfs_${version}_all.deb" "$(ls "$work")"; summary; }
pycontents=$(dpkg-deb -c "$pydeb" | awk '{ print $6 }')
for f in __init__.py _control.py dask.py torch.py; do
	grep -qx "./usr/lib/python3/dist-packages/tierfs/$f" <<<"$pycontents" &&
		ok "python3-tierfs has /usr/lib/python3/dist-packages/tierfs/$f" ||
		bad "python3-tierfs has /usr/lib/python3/dist-packages/tierfs/$f" "$pycontents"
done
grep -q -e __pycache__ -e '\.pyc$' <<<"$pycontents" && bad "python3-tierfs ships no byte code" "$pycontents" ||
	ok "python3-tierfs ships no byte code"
grep -q '^./usr/share/doc/python3-tierfs/examples/dask_read.py' <<<"$pycontents" &&
	ok "python3-tierfs has the examples" || bad "python3-tierfs has the examples" "$pycontents"
grep -q -e dist-packages -e '\.py$' <<<"$contents" && bad "the tierfs package holds no Python files" ||
	ok "the tierfs package holds no Python files"
pydepends=$(dpkg-deb -f "$pydeb" Depends)
for d in python3:any tierfs; do
	grep -qE "(^|, )$d( |,|$)" <<<"$pydepends" && ok "python3-tierfs Depends: $d" ||
		bad "python3-tierfs Depends: $d" "$pydepends"
done
[ "$(dpkg-deb -f "$pydeb" Architecture)" = all ] && ok "python3-tierfs is Architecture: all" ||
	bad "python3-tierfs is Architecture: all"
depends=$(dpkg-deb -f "$deb" Depends)
for d in fuse3 libfuse3-3 libcurl4 liblmdb0 libjson-c5 libinih1 libxxhash0 libexpat1 libssl3 libmicrohttpd12; do
	grep -qE "(^|, )$d( |,|$)" <<<"$depends" && ok "Depends: $d" || bad "Depends: $d" "$depends"
done

# ---- install ----
if DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb" "$pydeb" >"$work/apt.log" 2>&1 ||
	dpkg -i "$deb" "$pydeb" >>"$work/apt.log" 2>&1; then
	installed=1
	ok "the package installs"
else
	installed=1
	bad "the package installs" "$(tail -n 20 "$work/apt.log")"
	summary
fi
out=$(/usr/bin/tierfs --version 2>&1)
head -n 1 <<<"$out" | grep -qx "tierfs ${version%%-*}" && ok "tierfs --version: tierfs ${version%%-*}" ||
	bad "tierfs --version: tierfs ${version%%-*}" "$out"
missing=""
for lib in libfuse3 libcurl OpenSSL LMDB expat json-c libmicrohttpd inih xxhash; do
	grep -qE "^$lib [0-9]" <<<"$out" || missing="$missing $lib"
done
[ -z "$missing" ] && ok "tierfs --version names each library's version" ||
	bad "tierfs --version names each library's version (missing:$missing)" "$out"
# debian/rules does not pass --enable-test-hooks: no TIERFS_TEST_* hook.
! grep -q "^test hooks" <<<"$out" && ! grep -aq TIERFS_TEST_ /usr/bin/tierfs &&
	ok "the package has no test hooks" || bad "the package has no test hooks" "$out"
for page in tierfs tierfs.conf tierfs-flexvolume tierfs-csi mount.tierfs mount.fuse.tierfs; do
	p=$(man -w "$page" 2>/dev/null)
	case $p in /usr/share/man/*) ok "man $page is installed" ;; *) bad "man $page is installed ($p)" ;; esac
done
csi=$(/usr/sbin/tierfs-csi --version 2>&1)
grep -q '^tierfs-csi ' <<<"$csi" && ok "tierfs-csi --version" || bad "tierfs-csi --version" "$csi"
fv=$(/usr/sbin/tierfs-flexvolume init 2>&1)
grep -q '"status":"Success"' <<<"$fv" && ok "tierfs-flexvolume init" || bad "tierfs-flexvolume init" "$fv"
pyout=$(cd / && env -u PYTHONPATH /usr/bin/python3 -c 'import tierfs, tierfs.dask; print(tierfs.__file__)' 2>&1)
[ "$pyout" = /usr/lib/python3/dist-packages/tierfs/__init__.py ] &&
	ok "/usr/bin/python3 -c 'import tierfs' finds the installed package" ||
	bad "/usr/bin/python3 -c 'import tierfs' finds the installed package" "$pyout"
if command -v systemd-analyze >/dev/null 2>&1; then
	expect "systemd-analyze verify tierfs@srv-data.service" \
		systemd-analyze verify /lib/systemd/system/tierfs@srv-data.service
fi

# ---- mount a local-directory bucket with the installed commands ----
bucket=$work/bucket
mkdir -p "$bucket/dir" "$mnt"
head -c 5000000 /dev/urandom >"$bucket/data.bin"
printf 'hello from the bucket\n' >"$bucket/dir/small.txt"
printf '[ssd]\ndir = %s\nsize = 256M\n[ram]\nsize = 64M\n' "$work/cache" >"$work/tierfs.conf"

mounted() { grep -qE "^[^ ]+ $mnt fuse\.tierfs " /proc/mounts; }
# reads NAME: the files read through the mount are the bucket's, byte for byte.
reads() {
	if cmp -s "$bucket/data.bin" "$mnt/data.bin" && cmp -s "$bucket/dir/small.txt" "$mnt/dir/small.txt"; then
		ok "$1: reads are byte-exact"
	else
		bad "$1: reads are byte-exact" "$(ls -la "$mnt" "$mnt/dir" 2>&1)"
	fi
}
# gone PID: wait up to 30 s for the daemon to exit.
gone() {
	for _ in $(seq 300); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}
daemon_pid() { /usr/bin/tierfs stats --json "$mnt" 2>/dev/null | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' | head -n 1; }

if expect "/usr/bin/tierfs mount returns once the mount is live" \
	/usr/bin/tierfs mount -c "$work/tierfs.conf" "$bucket" "$mnt"; then
	mounted && ok "tierfs mount: fuse.tierfs in /proc/mounts" || bad "tierfs mount: fuse.tierfs in /proc/mounts"
	reads "tierfs mount"
	expect "tierfs stats answers" /usr/bin/tierfs stats "$mnt"
	expect "tierfs.Mount(MOUNTPOINT).stats() from the installed package" \
		env -u PYTHONPATH /usr/bin/python3 -c 'import sys, tierfs; assert tierfs.Mount(sys.argv[1]).stats()["pid"] > 0' "$mnt"
	expect "/usr/bin/tierfs umount" /usr/bin/tierfs umount "$mnt"
	mounted && bad "tierfs umount: the mount is gone" || ok "tierfs umount: the mount is gone"
fi

# mount(8) runs /sbin/mount.fuse.tierfs; fstab-style options ride along.
if expect "mount -t fuse.tierfs" mount -t fuse.tierfs \
	-o "ssd.dir=$work/cache2,ssd.size=256M,ram.size=64M,ro,_netdev,nofail" "$bucket" "$mnt"; then
	mounted && ok "mount -t fuse.tierfs: fuse.tierfs in /proc/mounts" ||
		bad "mount -t fuse.tierfs: fuse.tierfs in /proc/mounts"
	reads "mount -t fuse.tierfs"
	pid=$(daemon_pid)
	[ -n "$pid" ] && ok "the daemon's pid from tierfs stats" || bad "the daemon's pid from tierfs stats"
	expect "umount(8)" umount "$mnt"
	mounted && bad "umount: the mount is gone" || ok "umount: the mount is gone"
	if [ -n "$pid" ]; then
		gone "$pid" && ok "umount: the daemon exits" || bad "umount: the daemon exits (pid $pid)"
	fi
fi

# ---- purge ----
if [ $keep = 0 ]; then
	expect "dpkg --purge python3-tierfs tierfs" dpkg --purge python3-tierfs tierfs && installed=0
	[ ! -e /usr/bin/tierfs ] && [ ! -e /sbin/mount.tierfs ] && [ ! -e /sbin/mount.fuse.tierfs ] &&
		[ ! -e /lib/systemd/system/tierfs@.service ] && [ ! -e /usr/lib/python3/dist-packages/tierfs ] && ok "purge removes the files" ||
		bad "purge removes the files"
fi
summary
