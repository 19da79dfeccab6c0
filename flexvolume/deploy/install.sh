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
# into place (node/deploy/install-tierfs.sh, the steps shared with the CSI
# installer): the kubelet, which watches PLUGIN_DIR, and running daemons
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

# put and install_tierfs, shared with the CSI installer: beside this
# script in the image, in node/deploy/ in the source tree.
common=$(dirname "$0")/install-tierfs.sh
[ -f "$common" ] || common=$(dirname "$0")/../../node/deploy/install-tierfs.sh
# shellcheck source=node/deploy/install-tierfs.sh
. "$common"

# 1. tierfs, the driver and their libraries: HOST_OPT/VERSION, then the
#    link HOST_OPT/current.
install_tierfs

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
