#!/usr/bin/env bash
# The main job: set up, trace a bundled workload with Valgrind lackey, analyze
# the trace with liblomas (1 in 200 references sampled) and print the report
# with its working-set graph.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
out=build/demo
mkdir -p "$out"
echo "== tracing examples/workloads/matmul (n=64) with valgrind --tool=lackey" >&2
valgrind --tool=lackey --trace-mem=yes --log-file="$out/matmul.trace" build/examples/workloads/matmul 64
echo "== lomas-demo analyze --lackey $out/matmul.trace --period 200" >&2
build/examples/lomas-demo/lomas-demo analyze --lackey "$out/matmul.trace" --period 200 -o "$out/matmul.lomas"
rm -f "$out/matmul.trace"
build/examples/lomas-demo/lomas-demo report "$out/matmul.lomas"
