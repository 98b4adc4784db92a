#!/usr/bin/env bash
# The inline clock's overhead: for each bundled workload, the run time and peak
# RSS of the instrumented build with the sampler at its default settings
# (LOMAS_PERIOD=auto) against the same program built by clang-16 with the same
# flags (-O2 -g; -flto too with the sanitizer-coverage recipe) but without
# instrumentation. The two builds run side by side, alternating,
# REPS times (default 5); times are the fastest run of each (the least
# disturbed: on a shared 2-core VM the median still moves by 10%), peak RSS
# the median. Goals (docs/benchmarks.md): time ratio <= 1.5x (geometric mean), peak
# RSS ratio <= 1.1x.
#   bench/inline.sh [BUILD_DIR] [REPS]      (extra env, e.g. LOMAS_PERIOD, is passed on)
set -euo pipefail
build=${1:-build}
reps=${2:-5}
dir="$build/examples/workloads"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$dir/matmul-inline" ]; then
	echo "inline.sh: $dir/matmul-inline not built (needs clang-16)" >&2
	exit 1
fi

# The workloads, in order, at sizes for runs of ~0.1-0.5 s natively.
# shellcheck source=bench/workloads-lib.sh
. "$(dirname "$0")/workloads-lib.sh"

# shellcheck source=bench/inline-lib.sh
. "$(dirname "$0")/inline-lib.sh"

printf '%-8s %10s %10s %7s %10s %10s %7s %9s\n' workload plain_s inline_s time_x \
	plain_KB inline_KB rss_x samples
logsum_t=0
logsum_m=0
n=0
for w in "${bench_workloads[@]}"; do
	# shellcheck disable=SC2086
	measure_pair "$w" "$dir/$w-clang" "$dir/$w-inline" ${bench_timing_args[$w]}
	samples=?
	if [ -x "$build/examples/lomas-demo/lomas-demo" ]; then
		samples=$("$build/examples/lomas-demo/lomas-demo" export --csv "$tmp/p.lomas" | tail -n +2 | wc -l)
	fi
	awk -v w="$w" -v pt="$pt" -v it="$it" -v pm="$pm" -v im="$im" -v s="$samples" 'BEGIN {
		printf "%-8s %10.3f %10.3f %7.2f %10d %10d %7.2f %9s\n", w, pt / 1e6, it / 1e6,
			it / pt, pm, im, im / pm, s }'
	logsum_t=$(awk -v a="$logsum_t" -v pt="$pt" -v it="$it" 'BEGIN { print a + log(it / pt) }')
	logsum_m=$(awk -v a="$logsum_m" -v pm="$pm" -v im="$im" 'BEGIN { print a + log(im / pm) }')
	n=$((n + 1))
done
footer 8 "$logsum_t" "$logsum_m" "$n"
