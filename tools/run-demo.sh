#!/usr/bin/env bash
# The main job: set up, record a bundled workload built with the inline clock
# (`lomas-demo record`, period auto) and print the report with its working-set
# graph. Where the inline clock could not be built (no clang-16), the same
# workload is traced with Valgrind lackey and analyzed instead.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
out=build/demo
demo=build/examples/lomas-demo/lomas-demo
wl=build/examples/workloads
mkdir -p "$out"
if [ -x "$wl/phases-inline" ]; then
	echo "== lomas-demo record -- $wl/phases-inline (two alternating phases, inline clock)" >&2
	"$demo" record -o "$out/phases.lomas" -- "$wl/phases-inline" 8388608 32768 6
	"$demo" report "$out/phases.lomas"
else
	echo "== no instrumented workloads (clang-16 missing): tracing matmul with valgrind lackey" >&2
	valgrind --tool=lackey --trace-mem=yes --log-file="$out/matmul.trace" "$wl/matmul" 64
	"$demo" analyze --lackey "$out/matmul.trace" -o "$out/matmul.lomas"
	rm -f "$out/matmul.trace"
	"$demo" report "$out/matmul.lomas"
fi
