#!/bin/sh
# Memory and time of a program that runs many short threads one after
# another (tests/inline/hostile.c, mode threads: each thread 4 x 256
# read-modify-writes of its own array), built with the lomas-inline recipe
# against the same program without it: peak RSS (the process's whole life,
# exit path and profile included) and wall time, medians of REPS runs.
# An exited thread's sampler is given back and its samples kept compactly
# (lib/sampler/exited.c), so the inline build's peak RSS should stay a few
# MiB above the plain build's whatever the number of threads.
#   bench/inline-threads.sh [BUILD_DIR] [REPS] [COUNTS...]   (default build 3 20000 60000)
set -eu
build=${1:-build}
reps=${2:-3}
shift 2 2>/dev/null || shift $#
counts=${*:-20000 60000}
inline=$build/tests/inline/hostile-inline
plain=$build/tests/inline/hostile-plain
[ -x "$inline" ] && [ -x "$plain" ] || {
	echo "bench/inline-threads.sh: build $inline and $plain first (ninja -C $build)" >&2
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/inline-lib.sh"
export LOMAS_OUTPUT="$tmp/p.lomas"
printf "%-8s %12s %12s %10s %10s %10s %10s\n" threads "plain KiB" "inline KiB" "+MiB" \
	"plain ms" "inline ms" ratio
for n in $counts; do
	: >"$tmp/p"
	: >"$tmp/i"
	for r in $(seq "$reps"); do
		one "$plain" threads "$n" >>"$tmp/p"
		one "$inline" threads "$n" >>"$tmp/i"
	done
	pt=$(awk '{print $1}' "$tmp/p" | median)
	pm=$(awk '{print $2}' "$tmp/p" | median)
	it=$(awk '{print $1}' "$tmp/i" | median)
	im=$(awk '{print $2}' "$tmp/i" | median)
	awk -v n="$n" -v pm="$pm" -v im="$im" -v pt="$pt" -v it="$it" 'BEGIN {
		printf "%-8s %12d %12d %10.1f %10.0f %10.0f %10.2f\n", n, pm, im, (im - pm) / 1024,
		       pt / 1000, it / 1000, it / pt }'
done
