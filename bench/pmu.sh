#!/usr/bin/env bash
# The pmu clock on a machine with a PMU (docs/benchmarks.md: <= 5 % at ~20k samples).
# For each bundled workload: run time natively and under `lomas-demo record
# --clock pmu` side by side, alternating, REPS times (fastest of each: the
# least disturbed), with the period chosen for ~20k samples from the
# reference count of a first run; single-steps and faults per sample (the
# profile's pmu.clock_steps + pmu.retry_steps: the thread runs free between
# samples, docs/pmu-clock.md; and step.reuse_by_fault); and the curve's mean
# absolute error (4 KiB-64 MiB, percentage points) against the exact
# simulation of the inline clock's full trace of the same program
# (LOMAS_TRACE on the -inline build; skipped where clang-16 built none).
# Where the pmu clock cannot run (no PMU, perf_event_paranoid, our build
# machines) it prints why, from `lomas-demo info`, and exits 77 (skipped).
# Each workload is measured in each sampling mode of LOMAS_PMU_MODES (default
# "skid precise": single-steps to the point, or PEBS/IBS records with no
# step; docs/pmu-clock.md); a mode the machine refuses (precise without
# PEBS data addresses or IBS) prints its reason on its row.
#   bench/pmu.sh [BUILD_DIR] [REPS]      (LOMAS_PMU_EVENTS: --events for record)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-5}
demo=$build/examples/lomas-demo/lomas-demo
sim=$build/tests/tools/exactsim
wl=$build/examples/workloads
if [ ! -x "$demo" ]; then
	echo "pmu.sh: $demo not built" >&2
	exit 1
fi
why=$("$demo" info --json | /usr/bin/python3 -c '
import json, sys
c = next(c for c in json.load(sys.stdin)["clocks"] if c["name"] == "pmu")
print("" if c["works"] else c.get("why", "the pmu clock does not work here"))')
if [ -n "$why" ]; then
	echo "pmu.sh: cannot measure the pmu clock on this machine: $why" >&2
	echo "pmu.sh: run it where 'lomas-demo info' lists the pmu clock as working" >&2
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
events=()
[ -n "${LOMAS_PMU_EVENTS:-}" ] && events=(--events "$LOMAS_PMU_EVENTS")
modes=${LOMAS_PMU_MODES:-skid precise}
declare -A args=(
	[stream]="2097152 10" [stride]="67108864 64 8" [random]="4194304 8388608"
	[chase]="262144 4000000" [matmul]="480" [tiled]="480 32" [phases]="4000000 32768 8"
)
sizes=$(/usr/bin/python3 -c '
s, out = 4096.0, []
while s <= 64 * 2**20 * 1.0001:
    out.append(int(round(s / 64)) * 64); s *= 2 ** 0.25
print(",".join(map(str, out)))')
secs() { /usr/bin/python3 -c 'import sys,time,subprocess; t=time.monotonic(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(f"{time.monotonic()-t:.4f}")' "$@"; }
meta() { "$demo" export --json "$1" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin); m = d.get("metadata", d.get("meta", {}))
print(m.get(sys.argv[1], "0"))' "$2"; }
printf "%-8s %-8s %10s %8s %9s %9s %8s %10s %10s %10s %10s\n" workload mode refs samples \
	native_s pmu_s overhead steps/smp faults/smp "rand MAE" "lru MAE"
for w in stream stride random chase matmul tiled phases; do
for mode in $modes; do
	prog=$wl/$w
	[ -x "$prog" ] || continue
	ev=("${events[@]}" --pmu-sample "$mode")
	# shellcheck disable=SC2086
	if ! err=$("$demo" record --clock pmu "${ev[@]}" -o "$tmp/p0.lomas" -- "$prog" \
		${args[$w]} 2>&1 >/dev/null); then
		printf "%-8s %-8s cannot run: %s\n" "$w" "$mode" "$(echo "$err" | tail -n 1)"
		continue
	fi
	refs=$("$demo" export --json "$tmp/p0.lomas" | /usr/bin/python3 -c '
import json, sys
print(sum(t["refs"] for t in json.load(sys.stdin)["threads"]))')
	period=$((refs / 20000 > 1 ? refs / 20000 : 1))
	best_n=999999 best_p=999999
	for _ in $(seq "$reps"); do
		# shellcheck disable=SC2086
		n=$(secs "$prog" ${args[$w]})
		# shellcheck disable=SC2086
		p=$(secs "$demo" record --clock pmu "${ev[@]}" --period "$period" \
			-o "$tmp/p.lomas" -- "$prog" ${args[$w]})
		best_n=$(/usr/bin/python3 -c "print(min($best_n, $n))")
		best_p=$(/usr/bin/python3 -c "print(min($best_p, $p))")
	done
	samples=$("$demo" export --csv "$tmp/p.lomas" | tail -n +2 | wc -l)
	# The monitor's single steps: to the points, and the ones it needs between
	# them while the thread runs free (faults retried, system calls stepped over).
	steps=$(($(meta "$tmp/p.lomas" pmu.clock_steps) + $(meta "$tmp/p.lomas" pmu.retry_steps)))
	faults=$(meta "$tmp/p.lomas" step.reuse_by_fault)
	mae="- -"
	if [ -x "$wl/$w-inline" ] && [ -x "$sim" ]; then
		# shellcheck disable=SC2086
		LOMAS_TRACE="$tmp/t.trace" "$demo" record --clock inline -o "$tmp/i.lomas" -- \
			"$wl/$w-inline" ${args[$w]} >/dev/null 2>&1
		"$sim" --sizes "$sizes" --runs 3 "$tmp/t.trace" >"$tmp/exact.csv"
		"$demo" curve --sizes "$sizes" "$tmp/p.lomas" >"$tmp/model.csv"
		mae=$(/usr/bin/python3 bench/mae.py "$w" 0 0 "$tmp/model.csv" "$tmp/exact.csv" |
			awk '{print $(NF-1), $NF}')
		rm -f "$tmp/t.trace"
	fi
	/usr/bin/python3 -c "
import sys
w, refs, smp, n, p, st, fa, mae = sys.argv[1:]
smp = max(int(smp), 1)
print(f'{w:8s} {sys.argv[9]:8s} {int(refs):10d} {smp:8d} {float(n):9.3f} {float(p):9.3f} '
      f'{(float(p) / float(n) - 1) * 100:7.1f}% {int(st) / smp:10.1f} {int(fa) / smp:10.2f} '
      f'{mae.split()[0]:>10s} {mae.split()[-1]:>10s}')" \
		"$w" "$refs" "$samples" "$best_n" "$best_p" "$steps" "$faults" "$mae" "$mode"
done
done
echo "goal: overhead <= 5 % at ~20k samples (docs/benchmarks.md); MAE <= 1 point"
