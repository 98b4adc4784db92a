#!/usr/bin/env bash
# The dbi clock's cost: for each program (the bundled workloads and
# bench/extra/*.c, built with gcc -O2 and, with BENCH_CC="gcc clang-16", clang
# too, sized for ~0.3-1 s natively), the run time of
#   native                         the program alone
#   none                           valgrind --tool=none (Valgrind's own floor)
#   dbi                            lomas-demo record --clock dbi (period auto)
#   helper                         the same with a helper call at every
#                                  reference instead of the countdown and
#                                  filter test in the IR (LOMAS_DBI_FASTPATH=helper)
#   cachegrind                     valgrind --tool=cachegrind --cache-sim=yes
# side by side: each repetition runs the five in turn, REPS times (default 3);
# times are medians, peak RSS (dbi against native) the median too. Every run's
# output must equal the native run's. Goals (docs/benchmarks.md): dbi <= 1.5x none and
# <= 1/3 of cachegrind (geometric means).
#   bench/dbi.sh [BUILD_DIR] [REPS]      BENCH_SET=bundled|extra|all (default all)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
reps=${2:-3}
set_=${BENCH_SET:-all}
compilers=${BENCH_CC:-gcc}
root=$(cd "$(dirname "$0")/.." && pwd)
demo="$build/examples/lomas-demo/lomas-demo"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$build/lib/dbi/lomas-amd64-linux" ] || ! command -v valgrind >/dev/null; then
	echo "dbi.sh: needs valgrind and $build/lib/dbi/lomas-amd64-linux (the dbi tool)" >&2
	exit 1
fi

# Sizes for ~0.3-1 s natively (gcc -O2, a 2-core x86-64 VM).
declare -A args=(
	[stream]="4194304 12"
	[stride]="67108864 64 24"
	[random]="4194304 25000000"
	[chase]="262144 4000000"
	[matmul]="600"
	[tiled]="960 64"
	[phases]="67108864 32768 16"
	[threads]="65536 600000"
	[stencil]="1024 60"
	[transpose]="2048 10"
	[hash]="1048576 8000000"
	[qsort]="4000000"
	[bst]="500000 2000000"
	[hist]="67108864 8192"
	[strings]="16777216 16"
	[spmv]="200000 16 30"
)
bundled=(stream stride random chase matmul tiled phases threads)
extra=(stencil transpose hash qsort bst hist strings spmv)
case "$set_" in
bundled) programs=("${bundled[@]}") ;;
extra) programs=("${extra[@]}") ;;
*) programs=("${bundled[@]}" "${extra[@]}") ;;
esac

srcof() {
	if [ -f "$root/examples/workloads/$1.c" ]; then echo "$root/examples/workloads/$1.c"; else echo "$root/bench/extra/$1.c"; fi
}

# One run: "seconds peak_kb"; output to $tmp/out (compared with the native run's).
one() {
	local t0 t1
	t0=$(date +%s%N)
	/usr/bin/time -f %M -o "$tmp/rss" "$@" >"$tmp/out" 2>"$tmp/err"
	t1=$(date +%s%N)
	echo "$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.4f", d / 1e9 }') $(cat "$tmp/rss")"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

kinds=(native none dbi helper cachegrind)
run_kind() { # kind exe args...
	local kind=$1
	shift
	case $kind in
	native) one "$@" ;;
	none) one valgrind --tool=none -q "$@" ;;
	dbi) one "$demo" record --clock dbi -o "$tmp/p.lomas" -- "$@" ;;
	helper) LOMAS_DBI_FASTPATH=helper one "$demo" record --clock dbi -o "$tmp/p.lomas" -- "$@" ;;
	cachegrind) one valgrind --tool=cachegrind --cache-sim=yes -q \
		--cachegrind-out-file=/dev/null "$@" ;;
	esac
}

printf '%-16s %8s %7s %7s %7s %11s %9s %9s %7s\n' program native_s none_x dbi_x helper_x \
	cachegrind_x dbi/none dbi/cg rss_x
declare -A logsum
for k in none dbi helper cachegrind dn dc rss; do logsum[$k]=0; done
n=0
for cc in $compilers; do
	tag=${cc%%-*}
	for w in "${programs[@]}"; do
		exe="$tmp/$w-$tag"
		"$cc" -O2 "$(srcof "$w")" -o "$exe" -lm -pthread
		# shellcheck disable=SC2086
		$exe ${args[$w]} >"$tmp/ref"
		for k in "${kinds[@]}"; do : >"$tmp/t.$k"; : >"$tmp/m.$k"; done
		for ((r = 0; r < reps; r++)); do
			for k in "${kinds[@]}"; do
				# shellcheck disable=SC2086
				read -r t m < <(run_kind "$k" "$exe" ${args[$w]})
				if ! cmp -s "$tmp/out" "$tmp/ref"; then
					echo "dbi.sh: $w ($tag) under $k printed something else" >&2
					exit 1
				fi
				echo "$t" >>"$tmp/t.$k"
				echo "$m" >>"$tmp/m.$k"
			done
		done
		declare -A med
		for k in "${kinds[@]}"; do med[$k]=$(median <"$tmp/t.$k"); done
		rn=$(median <"$tmp/m.native")
		rd=$(median <"$tmp/m.dbi")
		awk -v w="$w-$tag" -v nt="${med[native]}" -v no="${med[none]}" -v d="${med[dbi]}" \
			-v h="${med[helper]}" -v c="${med[cachegrind]}" -v rn="$rn" -v rd="$rd" 'BEGIN {
			printf "%-16s %8.3f %7.2f %7.2f %7.2f %11.2f %9.2f %9.2f %7.2f\n", w, nt, no / nt,
				d / nt, h / nt, c / nt, d / no, d / c, rd / rn }'
		for k in none dbi helper cachegrind; do
			logsum[$k]=$(awk -v a="${logsum[$k]}" -v x="${med[$k]}" -v nt="${med[native]}" \
				'BEGIN { print a + log(x / nt) }')
		done
		logsum[dn]=$(awk -v a="${logsum[dn]}" -v d="${med[dbi]}" -v no="${med[none]}" 'BEGIN { print a + log(d / no) }')
		logsum[dc]=$(awk -v a="${logsum[dc]}" -v d="${med[dbi]}" -v c="${med[cachegrind]}" 'BEGIN { print a + log(d / c) }')
		logsum[rss]=$(awk -v a="${logsum[rss]}" -v rd="$rd" -v rn="$rn" 'BEGIN { print a + log(rd / rn) }')
		n=$((n + 1))
	done
done
awk -v n=$n -v no="${logsum[none]}" -v d="${logsum[dbi]}" -v h="${logsum[helper]}" \
	-v c="${logsum[cachegrind]}" -v dn="${logsum[dn]}" -v dc="${logsum[dc]}" -v r="${logsum[rss]}" 'BEGIN {
	printf "%-16s %8s %7.2f %7.2f %7.2f %11.2f %9.2f %9.2f %7.2f\n", "geomean", "", exp(no / n),
		exp(d / n), exp(h / n), exp(c / n), exp(dn / n), exp(dc / n), exp(r / n)
	printf "goals: dbi/none <= 1.50, dbi/cachegrind <= 0.33 (period auto; times are medians of %d)\n", '"$reps"' }'
