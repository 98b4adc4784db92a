#!/usr/bin/env bash
# The inline clock's overhead on programs written apart from the sampler, built
# the way a user (or the issue's check) builds them: plain with
#   clang-16 -O2 prog.c
# and instrumented with the pkg-config recipe only
#   clang-16 -O2 $(pkg-config --cflags lomas-inline) prog.c $(pkg-config --libs lomas-inline)
# (PKG_CONFIG_PATH is the build directory's uninstalled .pc files). The
# programs (bench/extra/*.c: a stencil, a transpose, a hash table, a quicksort,
# a search tree, a histogram, a word count, a sparse matrix-vector product) were
# not tuned for: the bundled workloads (bench/inline.sh) are the ones the
# instrumentation was measured on. For each: the outputs of the two builds must
# be identical, then the two run side by side, alternating, REPS times
# (default 5); times are the fastest of each, peak RSS the median.
#   bench/inline-extra.sh [BUILD_DIR] [REPS]   (extra env, e.g. LOMAS_PERIOD, is passed on)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
reps=${2:-5}
src=$(cd "$(dirname "$0")/extra" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if ! command -v clang-16 >/dev/null || ! pkg-config --exists lomas-inline; then
	echo "inline-extra.sh: needs clang-16 and $build/meson-uninstalled/lomas-inline-uninstalled.pc" >&2
	exit 1
fi

# Sizes for runs of ~0.05-0.5 s natively.
declare -A args=(
	[stencil]="1024 20"
	[transpose]="2048 5"
	[hash]="1048576 4000000"
	[qsort]="4000000"
	[bst]="500000 2000000"
	[hist]="67108864 4096"
	[strings]="16777216 8"
	[spmv]="200000 16 10"
)
order=(stencil transpose hash qsort bst hist strings spmv)

# shellcheck disable=SC2046
for w in "${order[@]}"; do
	clang-16 -O2 "$src/$w.c" -o "$tmp/$w-plain"
	clang-16 -O2 $(pkg-config --cflags lomas-inline) "$src/$w.c" \
		$(pkg-config --libs lomas-inline) -o "$tmp/$w-inline"
done

# shellcheck source=bench/inline-lib.sh
. "$(dirname "$0")/inline-lib.sh"

printf '%-9s %10s %10s %7s %10s %10s %7s\n' program plain_s inline_s time_x plain_KB inline_KB rss_x
logsum_t=0
logsum_m=0
n=0
for w in "${order[@]}"; do
	# shellcheck disable=SC2086
	same_output=1 measure_pair "$w" "$tmp/$w-plain" "$tmp/$w-inline" ${args[$w]}
	awk -v w="$w" -v pt="$pt" -v it="$it" -v pm="$pm" -v im="$im" 'BEGIN {
		printf "%-9s %10.3f %10.3f %7.2f %10d %10d %7.2f\n", w, pt / 1e6, it / 1e6,
			it / pt, pm, im, im / pm }'
	logsum_t=$(awk -v a="$logsum_t" -v pt="$pt" -v it="$it" 'BEGIN { print a + log(it / pt) }')
	logsum_m=$(awk -v a="$logsum_m" -v pm="$pm" -v im="$im" 'BEGIN { print a + log(im / pm) }')
	n=$((n + 1))
done
footer 9 "$logsum_t" "$logsum_m" "$n"
