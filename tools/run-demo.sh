#!/usr/bin/env bash
# The main job: set up, trace a bundled workload with Valgrind lackey, analyze
# the trace with liblomas (adaptive period) and print the report
# with its working-set graph.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
out=build/demo
mkdir -p "$out"
echo "== tracing examples/workloads/matmul (n=64) with valgrind --tool=lackey" >&2
valgrind --tool=lackey --trace-mem=yes --log-file="$out/matmul.trace" build/examples/workloads/matmul 64
echo "== lomas-demo analyze --lackey $out/matmul.trace (adaptive period: ~20k-40k samples)" >&2
build/examples/lomas-demo/lomas-demo analyze --lackey "$out/matmul.trace" -o "$out/matmul.lomas"
rm -f "$out/matmul.trace"
build/examples/lomas-demo/lomas-demo report "$out/matmul.lomas"
