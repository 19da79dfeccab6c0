#!/bin/sh
# install.sh - run by the tierfs FlexVolume DaemonSet on every node: put
# tierfs and the driver onto the node, then stay (a DaemonSet pod must keep
# running; restarting it installs again).
#
# What goes where (the container sees the node's directories under these
# paths; daemonset.yaml mounts them):
#   /opt/tierfs/current        (image) -> HOST_OPT/<version>, and the link
#                                 HOST_OPT/current pointing at it
#   driver                     -> PLUGIN_DIR/tierfs~tierfs/tierfs
#   /config/flexvolume.conf    (ConfigMap) -> HOST_ETC/flexvolume.conf
# Every file is copied to a dot-name in the same directory, then renamed
# into place: the kubelet, which watches PLUGIN_DIR, and running daemons
# never see a half-written file.  A running daemon keeps the files it has
# open; the previous version directory is kept for it.
#
# Environment: PLUGIN_DIR (default /flexmnt), HOST_OPT (/host/opt/tierfs),
# HOST_ETC (/host/etc/tierfs), CONFIG (/config/flexvolume.conf),
# INSTALL_ONLY=1 to exit after installing (for tests).
set -eu

PLUGIN_DIR=${PLUGIN_DIR:-/flexmnt}
HOST_OPT=${HOST_OPT:-/host/opt/tierfs}
HOST_ETC=${HOST_ETC:-/host/etc/tierfs}
CONFIG=${CONFIG:-/config/flexvolume.conf}
SRC=${SRC:-/opt/tierfs/current}
VERSION=$(cat "$SRC/VERSION" 2>/dev/null || echo unknown)

log() { echo "tierfs-flexvolume-installer: $*"; }

# put SRC DST MODE: copy to a dot-name beside DST, then rename over DST.
put() {
	tmp=$(dirname "$2")/.$(basename "$2").tmp$$
	cp "$1" "$tmp"
	chmod "$3" "$tmp"
	mv -f "$tmp" "$2"
}

# 1. tierfs, the driver and their libraries: HOST_OPT/VERSION, then the
#    link HOST_OPT/current.
mkdir -p "$HOST_OPT"
prev=$(readlink "$HOST_OPT/current" 2>/dev/null || true)
stage=$HOST_OPT/.$VERSION.tmp$$
rm -rf "$stage"
cp -a "$SRC" "$stage"
if [ -d "$HOST_OPT/$VERSION" ]; then
	# Same version again: replace file by file (a daemon may use them).
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
# Keep this version and the one before it (its daemons may still run);
# older ones have none left unless a node ran two upgrades under one mount.
for d in $(ls -1 "$HOST_OPT"); do
	case $d in current | "$VERSION" | "$prev") ;; *) rm -rf "${HOST_OPT:?}/$d" ;; esac
done
log "tierfs $VERSION in $HOST_OPT/current"

# 2. The node config, if the ConfigMap is mounted.
if [ -f "$CONFIG" ]; then
	mkdir -p "$HOST_ETC"
	put "$CONFIG" "$HOST_ETC/flexvolume.conf" 0644
	log "node config in $HOST_ETC/flexvolume.conf"
fi

# 3. The driver, last: the kubelet probes it (init) as soon as it appears.
mkdir -p "$PLUGIN_DIR/tierfs~tierfs"
put "$SRC/sbin/tierfs-flexvolume" "$PLUGIN_DIR/tierfs~tierfs/tierfs" 0755
log "driver in $PLUGIN_DIR/tierfs~tierfs/tierfs"
if ! "$PLUGIN_DIR/tierfs~tierfs/tierfs" init | grep -q '"status":"Success"'; then
	log "warning: the installed driver does not answer init (libraries missing on the node?)"
fi

[ "${INSTALL_ONLY:-0}" = 1 ] && exit 0
trap 'exit 0' TERM INT
while :; do sleep 3600 & wait $!; done
