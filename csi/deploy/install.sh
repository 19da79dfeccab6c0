#!/bin/sh
# install.sh - the init container of the tierfs CSI DaemonSet
# (daemonset.yaml): put tierfs, tierfs-csi and their libraries onto the
# node, then exit.  The plugin container and every tierfs daemon it starts
# run from the node's copy, which outlives any container.
#
#   /opt/tierfs/current (image) -> HOST_OPT/<version>, and the link
#                                  HOST_OPT/current pointing at it
# Files are copied to dot-names and renamed into place, so a running
# daemon keeps the files it has open; the version before the new one is
# kept for the daemons started from it.  (The same steps as the
# FlexVolume installer, flexvolume/deploy/install.sh, without its driver
# and node-config steps: the CSI plugin reads its ConfigMap directly.)
#
# Environment: HOST_OPT (default /host/opt/tierfs), SRC (/opt/tierfs/current).
set -eu

HOST_OPT=${HOST_OPT:-/host/opt/tierfs}
SRC=${SRC:-/opt/tierfs/current}
VERSION=$(cat "$SRC/VERSION" 2>/dev/null || echo unknown)

log() { echo "tierfs-csi-installer: $*"; }

# put SRC DST MODE: copy to a dot-name beside DST, then rename over DST.
put() {
	tmp=$(dirname "$2")/.$(basename "$2").tmp$$
	cp "$1" "$tmp"
	chmod "$3" "$tmp"
	mv -f "$tmp" "$2"
}

mkdir -p "$HOST_OPT"
prev=$(readlink "$HOST_OPT/current" 2>/dev/null || true)
stage=$HOST_OPT/.$VERSION.tmp$$
rm -rf "$stage"
cp -a "$SRC" "$stage"
if [ -d "$HOST_OPT/$VERSION" ]; then
	# Same version again (a restarted pod): replace file by file, a
	# daemon may use them.
	for f in $(cd "$stage" && find . -type f); do
		mkdir -p "$(dirname "$HOST_OPT/$VERSION/$f")"
		put "$stage/$f" "$HOST_OPT/$VERSION/$f" "$(stat -c %a "$stage/$f")"
	done
	rm -rf "$stage"
else
	mv "$stage" "$HOST_OPT/$VERSION"
fi
ln -sfn "$VERSION" "$HOST_OPT/.current.tmp$$"
mv -Tf "$HOST_OPT/.current.tmp$$" "$HOST_OPT/current"
# Keep this version and the one before it (its daemons may still run).
for d in $(ls -1 "$HOST_OPT"); do
	case $d in current | "$VERSION" | "$prev") ;; *) rm -rf "${HOST_OPT:?}/$d" ;; esac
done
log "tierfs $VERSION in $HOST_OPT/current"
if ! "$HOST_OPT/current/sbin/tierfs-csi" --version >/dev/null 2>&1; then
	log "warning: the installed tierfs-csi does not run (libraries missing on the node?)"
fi
