#!/usr/bin/env bash
# test_man.sh [TIERFS] - the manual pages in man/: each renders with
# `man --warnings -l` (and with every groff warning on) without a
# warning, and, given the tierfs binary, tierfs(1) documents every command
# and option its --help lists and tierfs.conf(5) gives every key a default
# and an example.  Ends with "man: N passed, N failed".
set -u
cd "$(dirname "$0")/../.." || exit 2
tierfs=${1:-}
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok   - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; [ -n "${2:-}" ] && sed 's/^/       /' <<<"$2"; }

if ! command -v man >/dev/null 2>&1 || ! command -v groff >/dev/null 2>&1; then
	bad "man and groff are installed (scripts/deps.sh test: man-db, groff-base)"
	echo "man: $pass passed, $fail failed"
	exit 1
fi

export LC_ALL=C.UTF-8 MANWIDTH=80 MANPAGER=cat PAGER=cat
pages=(man/tierfs.1 man/tierfs.conf.5 man/tierfs-flexvolume.8 man/tierfs-csi.8 man/mount.tierfs.8)

# ---- lint ----
for page in "${pages[@]}"; do
	if [ ! -f "$page" ]; then
		bad "$page exists"
		continue
	fi
	for w in "" "=w"; do
		out=$(man --warnings$w -l "$page" 2>&1 >/dev/null)
		rc=$?
		if [ $rc -ne 0 ] || [ -n "$out" ]; then
			bad "man --warnings$w -l $page is clean (exit $rc)" "$out"
		else
			ok "man --warnings$w -l $page is clean"
		fi
	done
	text=$(man -l "$page" 2>/dev/null)
	if grep -q '^NAME' <<<"$text" && grep -q '^SEE ALSO' <<<"$text"; then
		ok "$page renders with NAME and SEE ALSO"
	else
		bad "$page renders with NAME and SEE ALSO" "$(head -n 5 <<<"$text")"
	fi
done

[ -n "$tierfs" ] || { echo "man: $pass passed, $fail failed"; [ $fail -eq 0 ]; exit; }

# ---- tierfs(1) against the binary's --help ----
man1=$(cat man/tierfs.1)
# in_man1 WORD: WORD as the page spells it ('-' is written '\-').
in_man1() { grep -qF -- "${1//-/\\-}" <<<"$man1"; }

version=$("$tierfs" --version | head -n 1 | awk '{print $2}')
for page in "${pages[@]}"; do
	if grep -q "^\.TH .*\"tierfs $version\"" "$page"; then
		ok "$page names tierfs $version"
	else
		bad "$page names tierfs $version in .TH" "$(grep '^\.TH' "$page")"
	fi
done

# Commands: the first word of each entry of `tierfs --help`, and the word
# after a '/' (pin / unpin).  Each must head an entry of COMMANDS.
cmds=$("$tierfs" --help | { h=$(cat); sed -n 's/^  \([a-z][a-z]*\) .*/\1/p' <<<"$h"
	sed -n 's|^  [a-z].*/ *\([a-z][a-z]*\) .*|\1|p' <<<"$h"; } | sort -u)
[ -n "$cmds" ] || bad "tierfs --help lists commands"
for c in $cmds; do
	if grep -qE "^\.B $c( |\$)" man/tierfs.1; then
		ok "tierfs.1 documents the command $c"
	else
		bad "tierfs.1 documents the command $c (no '.B $c' entry)"
	fi
done

# Options: every -x / --long token of each command's --help, and every
# word of "-o word" (mount options).
for c in "" mount warmup backend stats config; do
	help=$("$tierfs" $c --help 2>&1)
	opts=$(grep -oE '(^|[][ ,|])--?[a-zA-Z][a-zA-Z-]*' <<<"$help" | sed -E 's/^[][ ,|]//' | sort -u)
	words=""
	[ "$c" = mount ] && words=$(grep -oE -- '-o [a-z_]+([=,][^ ]*)?' <<<"$help" |
		sed -E 's/^-o //; s/=[^,]*//g; s/,/ /g' | tr ' ' '\n' | sort -u)
	missing=""
	for o in $opts; do in_man1 "$o" || missing="$missing $o"; done
	for o in $words; do in_man1 "$o" || missing="$missing -o $o"; done
	for w in $(sed -n 's/^  \([a-z][a-z]*\) .*/\1/p' <<<"$help"); do
		[ "$c" = backend ] || continue # backend's operations
		grep -qE "^\.B backend .*\\\\fP $w( |\$)" man/tierfs.1 || missing="$missing op:$w"
	done
	if [ -z "$missing" ]; then
		ok "tierfs.1 documents every option of tierfs ${c:-(global)} --help"
	else
		bad "tierfs.1 documents every option of tierfs ${c:-(global)} --help; missing:$missing"
	fi
done

# ---- tierfs.conf(5): every key with a default and an example ----
empty=$(mktemp)
trap 'rm -f "$empty"' EXIT
dump=$("$tierfs" config -c "$empty")
# entry SECTION KEY: the text of the key's .TP entry in its .SS section.
entry() {
	awk -v sec="[$1]" -v key="$2" '
		/^\.S[HS] / { insec = ($0 == ".SS \"" sec "\""); inkey = 0 }
		insec && prev == ".TP" && $0 == ".B " key { inkey = 1; print; prev = $0; next }
		inkey && /^\.(TP|SS|SH)( |$)/ { inkey = 0 }
		inkey { print }
		{ prev = $0 }' man/tierfs.conf.5
}
section=""
nkeys=0
while IFS= read -r line; do
	case $line in
	\[*\]) section=${line#[}; section=${section%]} ;;
	*" = "* | *" =")
		key=${line%% =*}
		nkeys=$((nkeys + 1))
		e=$(entry "$section" "$key")
		if [ -z "$e" ]; then
			bad "tierfs.conf.5 has an entry for [$section] $key"
		elif ! grep -q 'Default' <<<"$e"; then
			bad "tierfs.conf.5 gives [$section] $key a default"
		elif ! grep -q '^Example:' <<<"$e"; then
			bad "tierfs.conf.5 gives [$section] $key an example (a line 'Example:')"
		else
			ok "tierfs.conf.5: [$section] $key has a default and an example"
		fi
		;;
	esac
done <<<"$dump"
[ "$nkeys" -gt 30 ] && ok "tierfs config lists the keys ($nkeys)" || bad "tierfs config lists the keys ($nkeys)"

echo "man: $pass passed, $fail failed"
[ $fail -eq 0 ]
