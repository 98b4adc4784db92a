#!/usr/bin/env bash
# Run a libFuzzer target for a bounded time. New inputs go to a temporary
# folder, never into the seed corpus in the source tree; a crash input is
# copied next to the build log (artifact_prefix) so it can be added to the corpus.
set -euo pipefail
fuzzer="$1"
corpus="$2"
seconds="$3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exec_dir=$(pwd)
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
	-artifact_prefix="$exec_dir/$(basename "$fuzzer")-" "$work" "$corpus"
