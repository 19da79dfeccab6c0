# install-tierfs.sh - the steps both drivers' installers share, sourced
# shellcheck shell=sh
# (not run) by flexvolume/deploy/install.sh (the FlexVolume DaemonSet's
# container, which then stays) and csi/deploy/install.sh (the CSI
# DaemonSet's init container, which then exits).  The image holds it
# beside install.sh (node/deploy/Dockerfile).
#
# The caller sets SRC (the image's /opt/tierfs/current), HOST_OPT (the
# node's /opt/tierfs as the container sees it) and VERSION, and defines
# log MESSAGE.  Files are copied to dot-names and renamed into place, so
# a running daemon (and the kubelet, watching its plugin directory) never
# sees a half-written file and keeps the files it has open.

# put SRC DST MODE: copy to a dot-name beside DST, then rename over DST.
put() {
	tmp=$(dirname "$2")/.$(basename "$2").tmp$$
	cp "$1" "$tmp"
	chmod "$3" "$tmp"
	mv -f "$tmp" "$2"
}

# install_tierfs: tierfs, the drivers and their libraries from SRC to
# HOST_OPT/VERSION, then the link HOST_OPT/current.  The version before
# the new one is kept for the daemons started from it.
install_tierfs() {
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
	# Keep this version and the one before it (its daemons may still run);
	# older ones have none left unless a node ran two upgrades under one
	# mount.
	for d in $(ls -1 "$HOST_OPT"); do
		case $d in current | "$VERSION" | "$prev") ;; *) rm -rf "${HOST_OPT:?}/$d" ;; esac
	done
	log "tierfs $VERSION in $HOST_OPT/current"
}
