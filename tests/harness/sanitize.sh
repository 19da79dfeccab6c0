#!/usr/bin/env bash
# sanitize.sh - run a test command whose tierfs binaries are built with
# sanitizers, and fail if any sanitizer report appears.
#   tests/harness/sanitize.sh asan|tsan CMD [ARG...]
# asan: a build with --enable-sanitizers (ASan, UBSan and LeakSanitizer);
# tsan: a build with --enable-tsan.  Example:
#   tests/harness/sanitize.sh asan python3 tests/integration/test_write.py \
#       build-san/tierfs --backend local --seed 7
#
# The mount daemon detaches with its stdio on /dev/null, so every
# instrumented process (daemon, CLI, FlexVolume driver, unit test)
# writes its reports to a file instead: REPORTS/KIND.PID, through the
# log_path option (the harnesses pass the environment on to the daemon).
# The suppression files in tests/sanitizers/ are applied.
#
# Prints CMD's output, then every report, then "sanitize: N reports in
# DIR" if there are any (DIR is kept; it is removed when clean).  Exit
# status: CMD's if it failed, else 1 if any report appeared, else 0.
# TFS_SAN_DIR=DIR collects the reports in DIR (created, never removed).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suppdir=$(cd "$here/.." && pwd)/sanitizers
kind=${1:-}
case $kind in
asan | tsan) shift ;;
*) echo "usage: $0 asan|tsan CMD [ARG...]" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "usage: $0 asan|tsan CMD [ARG...]" >&2; exit 2; }

if [ -n "${TFS_SAN_DIR:-}" ]; then
	dir=$TFS_SAN_DIR
	mkdir -p "$dir"
	keep=1
else
	dir=$(mktemp -d /tmp/tierfs-san-XXXXXX)
	keep=0
fi
dir=$(cd "$dir" && pwd)

# The options of the other kind must not leak in from the caller (check.sh
# exports its own for the unit tests).
unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS
# supp NAME: ":suppressions=FILE" if tests/sanitizers/NAME.supp exists.
supp() { [ -f "$suppdir/$1.supp" ] && printf ':suppressions=%s' "$suppdir/$1.supp"; }
if [ "$kind" = asan ]; then
	# halt_on_error (ASan's default; UBSan is built with
	# -fno-sanitize-recover): the first error ends the process, and its
	# report is complete.
	ASAN_OPTIONS="log_path=$dir/asan:detect_leaks=1:halt_on_error=1$(supp asan)"
	UBSAN_OPTIONS="log_path=$dir/ubsan:print_stacktrace=1:halt_on_error=1$(supp ubsan)"
	LSAN_OPTIONS="print_suppressions=0$(supp lsan)"
	export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
else
	TSAN_OPTIONS="log_path=$dir/tsan:second_deadlock_stack=1:print_suppressions=0$(supp tsan)"
	export TSAN_OPTIONS
fi

rc=0
"$@" || rc=$?

# A daemon writes its leak report when it exits, which can be just after
# the suite returns: wait (up to 10 s) for the tierfs processes started
# with these options.
for _ in $(seq 100); do
	live=0
	for p in /proc/[0-9]*; do
		case $(cat "$p/comm" 2>/dev/null) in tierfs*) ;; *) continue ;; esac
		tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -q "log_path=$dir/" && live=1 && break
	done
	[ $live = 0 ] && break
	sleep 0.1
done

n=0
for f in "$dir"/*; do
	[ -f "$f" ] || continue
	n=$((n + 1))
	printf '\n==== sanitizer report %s\n' "$f"
	cat "$f"
done
if [ $n -gt 0 ]; then
	# The one-line summaries last, where a truncated log still shows them.
	printf '\n'
	grep -h '^SUMMARY:' "$dir"/* | sort | uniq -c
	echo "sanitize: $n reports in $dir"
	[ $rc -eq 0 ] && rc=1
elif [ $keep = 0 ]; then
	rmdir "$dir" 2>/dev/null || true
fi
exit $rc
