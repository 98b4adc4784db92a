#!/bin/sh
# Build (if needed) and run the benchmarks; BUILD=dir picks the build folder.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-bench}
if [ ! -d "$build" ]; then
	meson setup "$build" "$root" --buildtype=release -Dtests=false >/dev/null
fi
targets="bench/bench_model bench/bench_monitor bench/monitor_target"
# shellcheck disable=SC2086
ninja -C "$build" $targets >/dev/null || ninja -C "$build" $targets
"$build/bench/bench_model"
echo
"$build/bench/bench_monitor" "$build/bench/monitor_target"
