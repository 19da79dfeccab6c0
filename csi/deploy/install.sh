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
# kept for the daemons started from it.  (The steps are those the
# FlexVolume installer, flexvolume/deploy/install.sh, shares:
# node/deploy/install-tierfs.sh.  It has no driver or node-config step:
# the CSI plugin reads its ConfigMap directly.)
#
# Environment: HOST_OPT (default /host/opt/tierfs), SRC (/opt/tierfs/current).
set -eu

HOST_OPT=${HOST_OPT:-/host/opt/tierfs}
SRC=${SRC:-/opt/tierfs/current}
VERSION=$(cat "$SRC/VERSION" 2>/dev/null || echo unknown)

log() { echo "tierfs-csi-installer: $*"; }

# put and install_tierfs, shared with the FlexVolume installer: beside this
# script in the image, in node/deploy/ in the source tree.
common=$(dirname "$0")/install-tierfs.sh
[ -f "$common" ] || common=$(dirname "$0")/../../node/deploy/install-tierfs.sh
# shellcheck source=node/deploy/install-tierfs.sh
. "$common"

install_tierfs
if ! "$HOST_OPT/current/sbin/tierfs-csi" --version >/dev/null 2>&1; then
	log "warning: the installed tierfs-csi does not run (libraries missing on the node?)"
fi
