#!/usr/bin/env bash
# Every test: set up, then
#   1. the normal build's suites (unit, fuzz corpus replay, Python bindings, CLI integration)
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   3. libFuzzer targets (clang-16, sanitized) for LOMAS_FUZZ_SECONDS each (default 60)
#   4. clang-format check of all C and C++ sources
# and end with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh || { echo "bootstrap failed"; echo "0 passed, 1 failed"; exit 1; }

FUZZ_SECONDS=${LOMAS_FUZZ_SECONDS:-60}
pass=0
fail=0

# Count a meson build's results from its testlog.json.
tally() {
	local log="$1/meson-logs/testlog.json" p f
	if [ ! -f "$log" ]; then
		fail=$((fail + 1))
		return
	fi
	p=$(grep -c '"result": "\(OK\|EXPECTEDFAIL\)"' "$log")
	f=$(grep -c '"result": "\(FAIL\|TIMEOUT\|ERROR\|UNEXPECTEDPASS\)"' "$log")
	pass=$((pass + p))
	fail=$((fail + f))
}

run_suite() { # name builddir meson-test-args...
	local name="$1" dir="$2"
	shift 2
	echo "=== $name"
	rm -f "$dir/meson-logs/testlog.json"
	meson test -C "$dir" --print-errorlogs --num-processes 2 "$@"
	local rc=$? before=$fail
	tally "$dir"
	# A run that was interrupted (killed, out of memory) leaves a partial
	# testlog with no failure in it: it is one.
	if [ "$rc" -ne 0 ] && [ "$fail" -eq "$before" ]; then
		echo "$name: meson test exited $rc with no failed test in its log"
		fail=$((fail + 1))
	fi
}

run_suite "normal build" build

if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Dsanitizers=true -Db_lundef=false >/dev/null
fi
if ninja -C build-asan >/dev/null; then
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		run_suite "ASan+UBSan build" build-asan
else
	echo "ASan build failed"
	fail=$((fail + 1))
fi

if [ ! -f build-fuzz/build.ninja ]; then
	CC=clang-16 meson setup build-fuzz -Dsanitizers=true -Dfuzzing=true \
		-Dpython_tests=false -Db_lundef=false -Dfuzz_seconds="$FUZZ_SECONDS" >/dev/null
else
	meson configure build-fuzz -Dfuzz_seconds="$FUZZ_SECONDS" >/dev/null
fi
if ninja -C build-fuzz >/dev/null; then
	run_suite "libFuzzer (${FUZZ_SECONDS}s per target)" build-fuzz --suite fuzz
else
	echo "fuzz build failed"
	fail=$((fail + 1))
fi

echo "=== clang-format"
if command -v clang-format-16 >/dev/null; then
	bad=$(git ls-files '*.c' '*.h' '*.cpp' | xargs clang-format-16 --dry-run 2>&1 | grep -c 'warning:' || true)
	if [ "$bad" -eq 0 ]; then
		echo "clang-format: clean"
		pass=$((pass + 1))
	else
		git ls-files '*.c' '*.h' | xargs clang-format-16 --dry-run 2>&1 | grep 'warning:' | head -20
		echo "clang-format: $bad places differ from .clang-format"
		fail=$((fail + 1))
	fi
fi

echo
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
