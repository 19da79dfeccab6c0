#!/usr/bin/env bash
# tests/fuzz/run.sh [--cpu] [SECONDS] - build the libFuzzer harnesses and run
# each one on its corpus for SECONDS (default 10) of wall time, one after the
# other (one process: the machine may be shared).  With --cpu, SECONDS is
# CPU time of each fuzzer (user + system), however long that takes: the
# issue's "10 CPU-minutes per harness" is `tests/fuzz/run.sh --cpu 600`.
#
# For each harness: first the saved reproducers tests/fuzz/crashes/<h>-*
# run as regression inputs, then libFuzzer runs with -max_total_time, the
# seeds of tests/fuzz/corpus/<h>/ and the dictionary tests/fuzz/<h>.dict.
# New corpus entries go to OUTDIR/corpus/<h>/ (kept between runs, never
# into the source tree), crashes to OUTDIR/artifacts/<h>/, the full log to
# OUTDIR/logs/<h>.log.
#
# Prints one line per harness ("ok:   conf  10 s, 9 s CPU, 12345 runs, ..." or
# "FAIL: ...") and at the end "fuzz: N passed, N failed" (check.sh adds
# these up); exits non-zero when any harness failed or crashed.
#
#   FUZZ_OUT=DIR        build and work directory (default: build-fuzz/)
#   FUZZ_ONLY="conf sigv4"  only these harnesses
#   FUZZ_NO_BUILD=1     use the binaries already in FUZZ_OUT
#   FUZZ_ARGS="..."     extra libFuzzer flags (e.g. -jobs=2 -workers=2)
#   TFS_FUZZ_IGNORE=... skip named invariants (tests/fuzz/fuzz_common.h);
#                       for exploring past a known bug, never in check.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cpu_mode=0
if [ "${1:-}" = --cpu ]; then
	cpu_mode=1
	shift
fi
secs=${1:-10}
out=${FUZZ_OUT:-$top/build-fuzz}
harnesses=${FUZZ_ONLY:-conf s3_xml sigv4 flexvolume manifest}

case $secs in
'' | *[!0-9]*) echo "usage: $0 [--cpu] [SECONDS]" >&2; exit 2 ;;
esac

passed=0
failed=0
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
	blog=$(mktemp)
	if ! FUZZ_ONLY="$harnesses" "$here/build.sh" "$out" >"$blog" 2>&1; then
		tail -n 40 "$blog"
		echo "FAIL: build (tests/fuzz/build.sh); the harnesses that built still run"
		failed=$((failed + 1))
	else
		grep -h 'skipping' "$blog" || true
	fi
	rm -f "$blog"
fi
mkdir -p "$out/logs"

# Largest input libFuzzer makes, per harness (the XML text limit is 64 KiB).
declare -A max_len=([conf]=16384 [s3_xml]=131072 [sigv4]=8192 [flexvolume]=16384 [manifest]=16384)

for h in $harnesses; do
	bin=$out/fuzz_$h
	if [ ! -x "$bin" ]; then
		echo "skip: $h (not built)"
		continue
	fi
	work=$out/corpus/$h
	art=$out/artifacts/$h
	log=$out/logs/$h.log
	mkdir -p "$work" "$art"
	dict=()
	[ -f "$here/$h.dict" ] && dict=(-dict="$here/$h.dict")

	# the saved reproducers must not crash any more
	repro=()
	for f in "$here/crashes/$h"-*; do
		[ -f "$f" ] && repro+=("$f")
	done
	if [ ${#repro[@]} -gt 0 ] && ! "$bin" "${repro[@]}" >"$log" 2>&1; then
		what=$(grep -m1 -E 'INVARIANT|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error' "$log")
		echo "FAIL: $h: a saved reproducer still crashes: ${what:-see $log}"
		grep -m1 'Running: ' "$log" | sed 's/^/      /' || true
		failed=$((failed + 1))
		continue
	fi

	# Fuzz for $secs seconds of wall time, or with --cpu until the fuzzer
	# has used $secs seconds of CPU (libFuzzer only knows wall time, so
	# that takes several runs on a busy machine; the corpus carries over).
	cpu=0
	runs=0
	rc=0
	: >"$log"
	t0=$(date +%s)
	while :; do
		left=$secs
		[ $cpu_mode = 1 ] && left=$((secs - cpu))
		[ "$left" -lt 1 ] && break
		timef=$(mktemp)
		# shellcheck disable=SC2086
		{ TIMEFORMAT='%U %S'; time "$bin" -max_total_time="$left" -timeout=10 -rss_limit_mb=2048 \
			-max_len="${max_len[$h]:-16384}" -print_final_stats=1 -artifact_prefix="$art/" \
			"${dict[@]}" ${FUZZ_ARGS:-} "$work" "$here/corpus/$h" >>"$log" 2>&1; } 2>"$timef"
		rc=$?
		prev=$cpu
		cpu=$(awk -v c="$cpu" '{ printf "%.0f", c + $1 + $2 }' "$timef")
		rm -f "$timef"
		r=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -n 1 | awk '{ print $2 }')
		runs=$((runs + ${r:-0}))
		[ $rc -ne 0 ] && break
		[ $cpu_mode = 0 ] && break
		[ "$cpu" -le "$prev" ] && break # no progress: do not spin
	done
	wall=$(($(date +%s) - t0))
	corpus=$(find "$work" -type f | wc -l)
	if [ $rc -eq 0 ]; then
		printf 'ok:   %-10s %s s, %s s CPU, %s runs, corpus %s\n' "$h" \
			"$wall" "$cpu" "$runs" "$corpus"
		passed=$((passed + 1))
	else
		what=$(grep -m1 -E 'INVARIANT|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' "$log")
		unit=$(grep -o 'Test unit written to .*' "$log" | tail -n 1 | sed 's/Test unit written to //')
		echo "FAIL: $h (exit $rc after $wall s, $cpu s CPU, $runs runs): ${what:-see $log}"
		[ -n "$unit" ] && echo "      input: $unit (log: $log)"
		failed=$((failed + 1))
	fi
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
