#!/bin/sh
# Build (if needed) and run the benchmarks; BUILD=dir picks the build folder.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-bench}
if [ ! -d "$build" ]; then
	meson setup "$build" "$root" --buildtype=release -Dtests=false >/dev/null
fi
ninja -C "$build" bench/bench_model >/dev/null || ninja -C "$build" bench/bench_model
"$build/bench/bench_model"
