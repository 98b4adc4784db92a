#!/usr/bin/env bash
# Accuracy on a published benchmark suite nobody here wrote: the 30 kernels of
# PolyBench/C 4.2 (fetch it yourself; it is never part of this repository),
# through the two clocks a user has without a PMU, against exact fully
# associative simulation (tests/tools/exactsim) of the very same references,
# cold misses excluded, 4 KiB-64 MiB, 4 sizes per octave:
#   trace   gcc -O2 build, valgrind --tool=lackey --trace-mem=yes,
#           lomas-demo analyze --lackey T --period 200, lomas-demo curve
#   inline  clang-16 -O2 $(pkg-config --cflags lomas-inline) ... (the user's
#           recipe), lomas-demo record (period auto) with LOMAS_TRACE writing
#           the exact trace of the same run, lomas-demo curve
# Prints per kernel and clock the mean absolute error and the largest error
# (percentage points, with the size where it is) per policy; the budget
# (docs/benchmarks.md) is MAE <= 1 pp and no size more than 5 pp off.
#
#   bench/polybench-accuracy.sh [options] POLYBENCH_DIR
#     -b BUILD    the build directory (default build)
#     -d DATASET  MINI|SMALL|MEDIUM|LARGE, or auto: per kernel the largest of
#                 those whose run makes at most -m references (default MEDIUM)
#     -m REFS     the reference budget of -d auto (default 40000000)
#     -c CLOCKS   trace,inline (default both)
#     -k KERNELS  a comma-separated subset (default all of utilities/benchmark_list)
#     -w DIR      keep binaries, profiles and exact curves in DIR (default: a
#                 temporary directory removed at exit)
#     -R          re-model only: take the profiles and exact curves kept in -w
#                 DIR by an earlier run (after a change to the model)
#     -T          also keep the lackey traces in DIR (zstd), for -A
#     -A          re-collect the profiles only (after a change to a clock): the
#                 trace clock from the traces -T kept, the inline clock by
#                 running the kept binary again; the exact curves are kept
#     -p PERIOD   the trace clock's period (default 200)
#     -r RUNS     exactsim's random-replacement runs per size (default 3)
# Lackey traces run ~100x slower than the program: MEDIUM takes about an hour
# for the 30 kernels on a 2-core machine (exactsim's random replacement is
# most of it), SMALL a few minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=build dataset=MEDIUM maxrefs=40000000 clocks=trace,inline kernels="" work=""
reuse=0 keep_traces=0 reanalyze=0 period=200 runs=3
while getopts "b:d:m:c:k:w:RTAp:r:" o; do
	case $o in
	b) build=$OPTARG ;;
	d) dataset=$OPTARG ;;
	m) maxrefs=$OPTARG ;;
	c) clocks=$OPTARG ;;
	k) kernels=$OPTARG ;;
	w) work=$OPTARG ;;
	R) reuse=1 ;;
	T) keep_traces=1 ;;
	A) reanalyze=1 ;;
	p) period=$OPTARG ;;
	r) runs=$OPTARG ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 1 ] || [ ! -f "$1/utilities/benchmark_list" ]; then
	echo "usage: polybench-accuracy.sh [options] POLYBENCH_DIR (with utilities/benchmark_list)" >&2
	exit 2
fi
pb=$(cd "$1" && pwd)
build=$(cd "$build" && pwd)
demo=$build/examples/lomas-demo/lomas-demo
sim=$build/tests/tools/exactsim
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if [ -z "$work" ]; then
	[ $reuse = 1 ] || [ $reanalyze = 1 ] &&
		{ echo "polybench-accuracy.sh: -R and -A need -w DIR" >&2; exit 2; }
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
case ,$clocks, in *,inline,*)
	if [ $reuse = 0 ] && { ! command -v clang-16 >/dev/null || ! pkg-config --exists lomas-inline; }; then
		echo "polybench-accuracy.sh: the inline clock needs clang-16 and lomas-inline.pc" >&2
		exit 1
	fi
esac

if [ -z "$kernels" ]; then
	list=$(sed 's|^\./||' "$pb/utilities/benchmark_list")
else
	list=""
	for k in ${kernels//,/ }; do
		f=$(sed 's|^\./||' "$pb/utilities/benchmark_list" | grep "/$k/$k\.c$" || true)
		[ -n "$f" ] || { echo "polybench-accuracy.sh: no kernel $k" >&2; exit 2; }
		list="$list $f"
	done
fi

# build KERNEL_SRC DATASET CLOCK OUT: the plain (gcc) or instrumented (clang) binary.
build_one() {
	local src=$1 ds=$2 clock=$3 out=$4 dir
	dir=$pb/$(dirname "$src")
	[ -x "$out" ] && return 0
	if [ "$clock" = trace ]; then
		gcc -O2 -I "$pb/utilities" -I "$dir" "$pb/utilities/polybench.c" "$pb/$src" \
			-D"${ds}_DATASET" -lm -o "$out"
	else
		# shellcheck disable=SC2046
		clang-16 -O2 $(pkg-config --cflags lomas-inline) -I "$pb/utilities" -I "$dir" \
			"$pb/utilities/polybench.c" "$pb/$src" -D"${ds}_DATASET" \
			$(pkg-config --libs lomas-inline) -o "$out"
	fi
}

# The references a run of the instrumented binary makes (0 if over 60 s).
count_refs() {
	local out
	out=$(timeout 60 "$demo" record --period 1000000 -o "$work/count.lomas" -- "$1" 2>&1 >/dev/null) || true
	rm -f "$work/count.lomas"
	echo "$out" | sed -n 's/.* over \([0-9]*\) references.*/\1/p' | tail -1 | grep . || echo 0
}

# Pick the dataset of kernel src (auto: the largest within the budget).
pick_dataset() {
	local src=$1 k=$2 best=MINI ds n
	[ "$dataset" != auto ] && { echo "$dataset"; return; }
	[ -f "$work/$k/dataset" ] && { cat "$work/$k/dataset"; return; }
	for ds in MINI SMALL MEDIUM LARGE; do
		build_one "$src" "$ds" inline "$work/$k/$k.$ds.inl" >/dev/null
		n=$(count_refs "$work/$k/$k.$ds.inl")
		if [ "$n" -gt 0 ] && [ "$n" -le "$maxrefs" ]; then best=$ds; else break; fi
	done
	echo "$best" >"$work/$k/dataset"
	echo "$best"
}

# shellcheck source=bench/accuracy-lib.sh
. "$root/bench/accuracy-lib.sh"
sizes=$(accuracy_sizes)

/usr/bin/python3 "$root/bench/curve_error.py" --header
for src in $list; do
	k=$(basename "$(dirname "$src")")
	mkdir -p "$work/$k"
	if [ $reuse = 1 ] || [ $reanalyze = 1 ]; then
		ds=$(cat "$work/$k/dataset" 2>/dev/null || echo "$dataset")
	else
		ds=$(pick_dataset "$src" "$k")
		echo "$ds" >"$work/$k/dataset"
	fi
	for clock in ${clocks//,/ }; do
		d=$work/$k
		suffix=$([ "$clock" = trace ] && echo gcc || echo inl)
		if [ $reanalyze = 1 ]; then
			recollect "$d" "$clock" "$d/$k.$ds.$suffix" || continue
		elif [ $reuse = 0 ]; then
			build_one "$src" "$ds" "$clock" "$d/$k.$ds.$suffix"
			"collect_$clock" "$d" "$d/$k.$ds.$suffix"
		fi
		[ -f "$d/$clock.lomas" ] || { echo "$k: no $clock profile" >&2; continue; }
		score "$k" "$ds" "$d" "$clock"
	done
done
