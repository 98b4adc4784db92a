#!/usr/bin/env bash
# test_debugreg's exact-distance tests under many environments. meson test
# gives each test a random MALLOC_PERTURB_ (malloc then fills blocks with
# memset, glibc's AVX-512 masked tail among it), and the environment's size
# moves the step clock's sample points through the static targets' startup:
# the CI-only failure of the debugreg engine (docs/architecture.md) hid there.
#   tools/dreg-env-loop.sh [BUILDDIR [FIRST [LAST]]]     (build 1 100)
# Run i: env -i, MALLOC_PERTURB_=i % 256, and (i * 7) % 61 padding variables
# of varied names and lengths. LOMAS_TEST_FILTER picks the tests (cmocka
# glob, default test_exact*); ASAN_OPTIONS passes through. Prints each
# failure's last lines and ends with "N runs, N failed".
set -uo pipefail
dir=$(cd "${1:-build}" && pwd) || exit 2
first=${2:-1}
last=${3:-100}
filter=${LOMAS_TEST_FILTER:-test_exact*}
bin=$dir/tests/integration/test_debugreg
[ -x "$bin" ] || { echo "no $bin: build first" >&2; exit 2; }
runs=0
failed=0
for i in $(seq "$first" "$last"); do
	pad=()
	for k in $(seq 1 $((i * 7 % 61))); do
		pad+=("PAD_$((k * 7919 % 1000))_$(printf '%*s' $((k % 13)) '' | tr ' ' A)=v$i$(printf '%*s' $((k * 3 % 17)) '' | tr ' ' b)")
	done
	out=$(env -i PATH="$PATH" LOMAS_TARGETS="$dir/tests/integration" \
		LOMAS_TEST_FILTER="$filter" ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} \
		MALLOC_PERTURB_=$((i % 256)) "${pad[@]}" "$bin" 2>&1)
	rc=$?
	runs=$((runs + 1))
	if [ $rc -ne 0 ]; then
		failed=$((failed + 1))
		echo "--- MALLOC_PERTURB_=$((i % 256)) with $((i * 7 % 61)) padding variables: exit $rc"
		echo "$out" | grep -v '^\[ ' | tail -5
	fi
done
echo "$runs runs, $failed failed"
