#!/usr/bin/env bash
# Accuracy on programs whose behaviour changes over time (bench/phased/*.c and
# the bundled phases workload): two working sets alternating in rounds,
# initialise-then-compute, phases of random lengths, and a knife edge of column
# walks, through the trace clock (lackey, --period 200) and the inline clock
# (period auto), against exactsim on the same references, cold misses excluded,
# 4 KiB-64 MiB. Prints the mean absolute and the largest error per policy.
#   bench/phased-accuracy.sh [-b BUILD] [-c trace,inline] [-w DIR] [-R] [-A] [-T]
# -w/-R/-A/-T as in bench/polybench-accuracy.sh (keep, re-model, re-collect, traces).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=build clocks=trace,inline work="" reuse=0 reanalyze=0 keep_traces=0 period=200 runs=3
while getopts "b:c:w:RATp:r:" o; do
	case $o in
	b) build=$OPTARG ;;
	c) clocks=$OPTARG ;;
	w) work=$OPTARG ;;
	R) reuse=1 ;;
	A) reanalyze=1 ;;
	T) keep_traces=1 ;;
	p) period=$OPTARG ;;
	r) runs=$OPTARG ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
build=$(cd "$build" && pwd)
demo=$build/examples/lomas-demo/lomas-demo
sim=$build/tests/tools/exactsim
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if [ -z "$work" ]; then
	[ $reuse = 1 ] || [ $reanalyze = 1 ] &&
		{ echo "phased-accuracy.sh: -R and -A need -w DIR" >&2; exit 2; }
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
# shellcheck source=bench/accuracy-lib.sh
. "$root/bench/accuracy-lib.sh"
sizes=$(accuracy_sizes)

# name:source:arguments
progs=(
	"alternate:bench/phased/alternate.c:"
	"alt-dense:bench/phased/alternate.c:65536 3145728 8 1500000 8"
	"initcompute:bench/phased/initcompute.c:"
	"randphases:bench/phased/randphases.c:"
	"randphases2:bench/phased/randphases.c:60 300000 7"
	"columns:bench/phased/columns.c:"
	"phases:examples/workloads/phases.c:1500000 16384 4"
)
/usr/bin/python3 "$root/bench/curve_error.py" --header
for entry in "${progs[@]}"; do
	IFS=: read -r name src args <<<"$entry"
	d=$work/$name
	mkdir -p "$d"
	for clock in ${clocks//,/ }; do
		bin=$d/$name.$clock
		if [ $reuse = 0 ] && [ ! -x "$bin" ]; then
			if [ "$clock" = trace ]; then
				gcc -O2 "$root/$src" -o "$bin"
			else
				# shellcheck disable=SC2046
				clang-16 -O2 $(pkg-config --cflags lomas-inline) "$root/$src" \
					$(pkg-config --libs lomas-inline) -o "$bin"
			fi
		fi
		# shellcheck disable=SC2086
		if [ $reanalyze = 1 ]; then
			recollect "$d" "$clock" "$bin" $args || continue
		elif [ $reuse = 0 ]; then
			"collect_$clock" "$d" "$bin" $args
		fi
		score "$name" "-" "$d" "$clock"
	done
done
