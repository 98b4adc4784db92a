#!/usr/bin/env bash
# Accuracy of the inline clock as a user gets it: each bundled workload is
# recorded with `lomas-demo record` at the default settings (period auto),
# with LOMAS_TRACE writing the full trace of the very same run; exactsim
# simulates that trace exactly and the mean absolute error (percentage points,
# 4 KiB-64 MiB, 4 sizes per octave) of `lomas-demo curve` is printed per
# policy. LOMAS_PERIOD and LOMAS_SEED, when set, become record's --period and
# --seed (record sets the program's LOMAS_* from its own options).
# threads is left out: its four threads' lines reach one shared cache in the
# simulation, while the sampler measures reuse per thread (by design), and
# the trace interleaves the threads in buffer-sized runs, not as they ran.
#   bench/inline-accuracy.sh [BUILD_DIR] [small|medium]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
size=${2:-small}
demo=$build/examples/lomas-demo/lomas-demo
sim=$build/tests/tools/exactsim
wl=$build/examples/workloads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$wl/matmul-inline" ]; then
	echo "inline-accuracy.sh: $wl/matmul-inline not built (needs clang-16)" >&2
	exit 1
fi
declare -A small=(
	[stream]="65536 4" [stride]="3500000 64 4" [random]="262144 1000000"
	[chase]="16384 1000000" [matmul]="64" [tiled]="96 16" [phases]="1500000 16384 4"
)
declare -A medium=(
	[stream]="524288 8" [stride]="16777216 64 8" [random]="1048576 4000000"
	[chase]="65536 4000000" [matmul]="160" [tiled]="160 32" [phases]="4000000 32768 8"
)
declare -n args=$size
sizes=$(/usr/bin/python3 -c '
s, out = 4096.0, []
while s <= 64 * 2**20 * 1.0001:
    out.append(int(round(s / 64)) * 64); s *= 2 ** 0.25
print(",".join(map(str, out)))')
printf "%-8s %10s %9s %12s %12s\n" workload refs samples "random MAE" "lru MAE"
for w in stream stride random chase matmul tiled phases; do
	# shellcheck disable=SC2086
	LOMAS_TRACE="$tmp/t.trace" "$demo" record --period "${LOMAS_PERIOD:-auto}" \
		--seed "${LOMAS_SEED:-1}" -o "$tmp/p.lomas" -- "$wl/$w-inline" ${args[$w]} \
		>/dev/null 2>&1
	"$demo" curve --sizes "$sizes" "$tmp/p.lomas" >"$tmp/model.csv"
	"$sim" --sizes "$sizes" --runs 3 "$tmp/t.trace" >"$tmp/exact.csv"
	refs=$(wc -l <"$tmp/t.trace")
	samples=$("$demo" export --csv "$tmp/p.lomas" | tail -n +2 | wc -l)
	/usr/bin/python3 bench/mae.py "$w" "$refs" "$samples" "$tmp/model.csv" "$tmp/exact.csv"
	rm -f "$tmp/t.trace"
done
