#!/usr/bin/env bash
# Phase-guided sampling (issue 21 item 2; lib/sampler/phase.c) on the bundled
# workloads: samples taken, run time and curve error without and with it.
#  - accuracy: each workload at the sizes and fixed periods of the inline
#    accuracy test (tests/inline/test_inline.py: 0.5-2.3M references, 10-40k
#    samples), seed 1, the inline build run with LOMAS_PHASE_GUIDED=0 and =1
#    (samples taken = samples in the profile at a fixed period); the exact
#    curve is exactsim over the full trace of the same program (LOMAS_TRACE,
#    through a FIFO); the MAE (4 KiB-64 MiB, cold misses excluded) per
#    policy, in pp (threads is left out, as in bench/inline-accuracy.sh: its
#    trace interleaves the threads in buffer-sized runs, not as they ran);
#  - time: the sizes of bench/inline.sh (runs of 0.1-0.5 s natively), period
#    auto (the default: the samples are those it holds after its thinning),
#    the two settings alternating REPS times (default 5), the median wall
#    time of each.
# With -c inline,dbi the dbi clock too (lomas-demo record --clock dbi
# [--phase-guided] on the plain build; its exact curve from its own trace).
#   bench/phase-guided.sh [-b BUILD] [-r REPS] [-c inline[,dbi]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=build reps=5 clocks=inline
while getopts "b:r:c:" o; do
	case $o in
	b) build=$OPTARG ;;
	r) reps=$OPTARG ;;
	c) clocks=$OPTARG ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
build=$(cd "$build" && pwd)
dir=$build/examples/workloads
demo=$build/examples/lomas-demo/lomas-demo
sim=$build/tests/tools/exactsim
if [ ! -x "$dir/phases-inline" ]; then
	echo "phase-guided.sh: $dir/phases-inline not built (needs clang-16)" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=bench/accuracy-lib.sh
. "$root/bench/accuracy-lib.sh"
sizes=$(accuracy_sizes)
# shellcheck source=bench/workloads-lib.sh
. "$root/bench/workloads-lib.sh"
# name -> "period args..." (tests/inline/test_inline.py ACCURACY)
declare -A acc=(
	[stream]="15 65536 4"
	[stride]="12 3500000 64 4"
	[random]="60 262144 1000000"
	[chase]="30 16384 1000000"
	[matmul]="15 64"
	[tiled]="40 96 16"
	[phases]="25 1500000 16384 4"
)

# samples PROFILE: the number of samples in it.
samples() {
	"$demo" export --csv "$1" | tail -n +2 | wc -l
}

# mae MODEL.csv EXACT.csv: "random lru" MAE in pp.
mae() {
	/usr/bin/python3 - "$1" "$2" <<'EOF'
import csv, sys
m = {int(r["size_bytes"]): r for r in csv.DictReader(open(sys.argv[1]))}
e = {int(r["size_bytes"]): r for r in csv.DictReader(open(sys.argv[2]))}
s = [k for k in m if k in e and 4096 <= k <= 64 << 20]
print(" ".join(f"{100 * sum(abs(float(m[k][p]) - float(e[k][p])) for k in s) / len(s):.3f}"
               for p in ("random", "lru")))
EOF
}

# now: seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }

# median of the arguments.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

for clock in ${clocks//,/ }; do
	echo "# clock $clock: accuracy (test_inline.py's sizes and periods, seed 1)"
	printf '%-8s %10s %8s %8s %6s %8s %8s %8s %8s\n' workload refs samp_off samp_on ratio \
		rnd_off rnd_on lru_off lru_on
	for w in "${bench_workloads[@]}"; do
		[ "$w" = threads ] && continue
		# shellcheck disable=SC2206
		a=(${acc[$w]})
		period=${a[0]}
		a=("${a[@]:1}")
		d=$tmp/$w.$clock
		mkdir -p "$d"
		rm -f "$d/t.fifo"
		mkfifo "$d/t.fifo"
		"$sim" --sizes "$sizes" --runs 3 - <"$d/t.fifo" >"$d/exact.csv" &
		sm=$!
		for pg in 0 1; do
			if [ "$clock" = inline ]; then
				if [ $pg = 0 ]; then
					LOMAS_TRACE=$d/t.fifo LOMAS_OUTPUT=$d/p$pg.lomas LOMAS_PHASE_GUIDED=$pg \
						LOMAS_PERIOD=$period LOMAS_SEED=1 "$dir/$w-inline" "${a[@]}" >/dev/null
				else
					LOMAS_OUTPUT=$d/p$pg.lomas LOMAS_PHASE_GUIDED=$pg LOMAS_PERIOD=$period \
						LOMAS_SEED=1 "$dir/$w-inline" "${a[@]}" >/dev/null
				fi
			else
				flag=()
				[ $pg = 1 ] && flag=(--phase-guided)
				if [ $pg = 0 ]; then
					LOMAS_DBI_TRACE=$d/t.fifo "$demo" record --clock dbi --period "$period" \
						-o "$d/p$pg.lomas" -- "$dir/$w" "${a[@]}" >/dev/null 2>&1
				else
					"$demo" record --clock dbi --period "$period" "${flag[@]}" \
						-o "$d/p$pg.lomas" -- "$dir/$w" "${a[@]}" >/dev/null 2>&1
				fi
			fi
			"$demo" curve --sizes "$sizes" "$d/p$pg.lomas" >"$d/m$pg.csv"
		done
		wait $sm
		refs=$("$demo" export --json "$d/p0.lomas" |
			/usr/bin/python3 -c 'import json,sys; print(sum(t["refs"] for t in json.load(sys.stdin)["threads"]))')
		s0=$(samples "$d/p0.lomas")
		s1=$(samples "$d/p1.lomas")
		read -r r0 l0 <<<"$(mae "$d/m0.csv" "$d/exact.csv")"
		read -r r1 l1 <<<"$(mae "$d/m1.csv" "$d/exact.csv")"
		printf '%-8s %10s %8s %8s %6.2f %8s %8s %8s %8s\n' "$w" "$refs" "$s0" "$s1" \
			"$(echo "$s0 / $s1" | bc -l)" "$r0" "$r1" "$l0" "$l1"
	done
	echo
	echo "# clock $clock: time (bench/inline.sh sizes, median of $reps, wall seconds)"
	printf '%-8s %9s %9s %7s %9s %9s %6s\n' workload t_off t_on time_x samp_off samp_on ratio
	for w in "${bench_workloads[@]}"; do
		# shellcheck disable=SC2206
		args=(${bench_timing_args[$w]})
		t0=() t1=()
		for ((i = 0; i < reps; i++)); do
			for pg in 0 1; do
				s=$(now)
				if [ "$clock" = inline ]; then
					LOMAS_OUTPUT=$tmp/t$pg.lomas LOMAS_PHASE_GUIDED=$pg "$dir/$w-inline" \
						"${args[@]}" >/dev/null
				else
					flag=()
					[ $pg = 1 ] && flag=(--phase-guided)
					"$demo" record --clock dbi "${flag[@]}" -o "$tmp/t$pg.lomas" -- "$dir/$w" \
						"${args[@]}" >/dev/null 2>&1
				fi
				e=$(now)
				if [ $pg = 0 ]; then t0+=("$(echo "$e - $s" | bc -l)"); else t1+=("$(echo "$e - $s" | bc -l)"); fi
			done
		done
		m0=$(median "${t0[@]}")
		m1=$(median "${t1[@]}")
		s0=$(samples "$tmp/t0.lomas")
		s1=$(samples "$tmp/t1.lomas")
		printf '%-8s %9.3f %9.3f %7.2f %9s %9s %6.2f\n' "$w" "$m0" "$m1" \
			"$(echo "$m1 / $m0" | bc -l)" "$s0" "$s1" "$(echo "$s0 / $s1" | bc -l)"
	done
	echo
done
