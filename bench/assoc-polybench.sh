#!/usr/bin/env bash
# Set-associative accuracy (issue 21 item 4) on PolyBench/C 4.2 (fetch it
# yourself; it is never part of this repository), recorded as a user without
# the inline pass records: gcc -O1 -g(dwarf-4) binaries, `lomas-demo record
# --clock dbi` with LOMAS_DBI_TRACE writing the exact trace of the same run,
# `lomas-demo curve --ways W` against `exactsim --ways W` (a line's set its
# line number modulo the sets, LRU and random replacement, the mean of
# exactsim's random runs), cold misses excluded, at 32 KiB, 64 KiB, 256 KiB
# and 1 MiB, 8 and 16 ways. Prints per kernel the largest error (percentage
# points) of each policy over those 8 caches, and each cache's figures with -v.
#
#   bench/assoc-polybench.sh [options] POLYBENCH_DIR
#     -b BUILD    the build directory (default build; needs tests/tools/exactsim)
#     -d DATASET  MINI|SMALL|MEDIUM (default SMALL: a few minutes for the 30)
#     -k KERNELS  a comma-separated subset (default all of utilities/benchmark_list)
#     -w DIR      keep binaries, profiles and exact results in DIR (default: a
#                 temporary directory removed at exit)
#     -R          re-model only: the profiles and exact results kept in -w DIR
#     -r RUNS     exactsim's random-replacement runs (default 3)
#     -v          every cache's figures, not only the largest errors
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=build dataset=SMALL kernels="" work="" reuse=0 runs=3 verbose=0
while getopts "b:d:k:w:Rr:v" o; do
	case $o in
	b) build=$OPTARG ;;
	d) dataset=$OPTARG ;;
	k) kernels=$OPTARG ;;
	w) work=$OPTARG ;;
	R) reuse=1 ;;
	r) runs=$OPTARG ;;
	v) verbose=1 ;;
	*) sed -n '2,21p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
pb=$(cd "$1" && pwd)
case $build in /*) ;; *) build=$root/$build ;; esac
demo=$build/examples/lomas-demo/lomas-demo exactsim=$build/tests/tools/exactsim
for x in "$demo" "$exactsim"; do
	[ -x "$x" ] || { echo "assoc-polybench: $x not built (meson setup with tests)" >&2; exit 2; }
done
[ -f "$pb/utilities/benchmark_list" ] || { echo "assoc-polybench: $pb is not PolyBench/C" >&2; exit 2; }
if [ -z "$work" ]; then
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
sizes=32768,65536,262144,1048576
list=$(sed 's|^\./||' "$pb/utilities/benchmark_list")
[ -n "$kernels" ] && list=$(for k in ${kernels//,/ }; do grep "/$k/$k\.c$" <<<"$list"; done)
for src in $list; do
	k=$(basename "$src" .c)
	dir=$pb/$(dirname "$src")
	cd "$work"
	if [ $reuse = 0 ]; then
		gcc -O1 -gdwarf-4 -I "$pb/utilities" -I "$dir" "$pb/utilities/polybench.c" "$pb/$src" \
			-D"${dataset}_DATASET" -lm -o "$k"
		LOMAS_DBI_TRACE=$work/$k.t "$demo" record --clock dbi -o "$k.lomas" -- "./$k" \
			>/dev/null 2>&1
		for W in 8 16; do
			"$exactsim" --ways $W --runs "$runs" --sizes $sizes "$k.t" | tail -4 >"$k.ex$W"
		done
		rm -f "$k.t"
	fi
	for W in 8 16; do
		"$demo" curve --ways $W --sizes $sizes "$k.lomas" | tail -4 >"$k.m$W"
		paste -d, "$k.ex$W" "$k.m$W" | awk -F, -v k="$k" -v W=$W -v v=$verbose '
			v { printf "%-16s %2s-way %8s  random exact %6.2f %% model %+6.2f pp | lru exact %6.2f %% model %+6.2f pp\n",
			    k, W, $1, 100 * $2, 100 * ($5 - $2), 100 * $3, 100 * ($6 - $3) }'
	done
	cat "$k.ex8" "$k.ex16" >"$k.exall"
	cat "$k.m8" "$k.m16" >"$k.mall"
	paste -d, "$k.exall" "$k.mall" | awk -F, -v k="$k" '
		function abs(x) { return x < 0 ? -x : x }
		{ r = abs(100 * ($5 - $2)); l = abs(100 * ($6 - $3))
		  if (r > rm) rm = r; if (l > lm) lm = l }
		END { printf "%-16s largest error over 32K-1M, 8/16 ways: random %5.2f pp, lru %5.2f pp\n", k, rm, lm }'
done
