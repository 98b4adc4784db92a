#!/usr/bin/env bash
# Accuracy of lomas-demo against exact simulation, as the acceptance check does:
# trace real programs with Valgrind lackey, `lomas-demo analyze --lackey T
# --period P`, `lomas-demo curve`, and compare with tests/tools/exactsim on the
# same trace. Prints the mean absolute error (percentage points) over the
# default sizes from 4 KiB to 64 MiB for random replacement and LRU.
# Usage: bench/accuracy.sh [BUILD_DIR] [PERIOD]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
period=${2:-200}
demo=$build/examples/lomas-demo/lomas-demo
sim=$build/tests/tools/exactsim
wl=$build/examples/workloads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 200000 /dev/urandom | base64 > "$tmp/input.txt"

progs=(
	"ls:/bin/ls -lR /usr/share/doc/libc6"
	"gzip:/bin/gzip -c $tmp/input.txt"
	"sort:/usr/bin/sort $tmp/input.txt"
	"matmul:$wl/matmul 64"
	"chase:$wl/chase 20000 300000"
)
printf "%-8s %10s %9s %12s %12s\n" program refs samples "random MAE" "lru MAE"
for entry in "${progs[@]}"; do
	name=${entry%%:*}
	cmd=${entry#*:}
	# shellcheck disable=SC2086
	valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/$name.trace" $cmd >/dev/null
	"$demo" analyze --lackey "$tmp/$name.trace" --period "$period" -o "$tmp/$name.lomas" 2>/dev/null
	"$demo" curve "$tmp/$name.lomas" > "$tmp/$name.model.csv"
	sizes=$(tail -n +2 "$tmp/$name.model.csv" | cut -d, -f1 | paste -sd,)
	"$sim" --sizes "$sizes" "$tmp/$name.trace" > "$tmp/$name.exact.csv"
	refs=$(awk '/^ [LS] /{n++} /^ M /{n+=2} END{print n+0}' "$tmp/$name.trace")
	samples=$("$demo" export --csv "$tmp/$name.lomas" | tail -n +2 | wc -l)
	/usr/bin/python3 bench/mae.py "$name" "$refs" "$samples" "$tmp/$name.model.csv" "$tmp/$name.exact.csv"
	rm -f "$tmp/$name.trace"
done
