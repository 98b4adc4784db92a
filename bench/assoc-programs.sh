#!/usr/bin/env bash
# Set-associative accuracy (issue 21 item 4) on small programs with
# power-of-two strides (bench/assoc/*.c: column sums, a transposition, a
# stencil, strided walks) and the phased ones (bench/phased/*.c), recorded as
# a user would: gcc -O1 -gdwarf-4, `lomas-demo record --clock dbi` with
# LOMAS_DBI_TRACE writing the exact trace of the same run, `lomas-demo curve
# --ways W` against `exactsim --ways W` (random replacement: the mean of 2
# runs), cold misses excluded, at 32 KiB, 64 KiB, 256 KiB and 1 MiB. Prints
# per program and associativity each size's exact ratio and the model's
# error (percentage points) for random replacement (r) and LRU (l).
#
#   bench/assoc-programs.sh [-b BUILD] [-w DIR] [-R] [PROGRAM...]
#     -b BUILD   the build directory (default build; needs tests/tools/exactsim)
#     -w DIR     keep binaries, profiles and exact results in DIR
#     -R         re-model only: the profiles and exact results kept in -w DIR
#     PROGRAM    names in bench/assoc or bench/phased (default: all of them)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=build work="" reuse=0
while getopts "b:w:R" o; do
	case $o in
	b) build=$OPTARG ;;
	w) work=$OPTARG ;;
	R) reuse=1 ;;
	*) sed -n '2,16p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case $build in /*) ;; *) build=$root/$build ;; esac
demo=$build/examples/lomas-demo/lomas-demo exactsim=$build/tests/tools/exactsim
for x in "$demo" "$exactsim"; do
	[ -x "$x" ] || { echo "assoc-programs: $x not built (meson setup with tests)" >&2; exit 2; }
done
if [ -z "$work" ]; then
	[ $reuse = 0 ] || { echo "assoc-programs: -R needs -w DIR" >&2; exit 2; }
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
progs=("$@")
if [ ${#progs[@]} -eq 0 ]; then
	for f in "$root"/bench/assoc/*.c "$root"/bench/phased/*.c; do progs+=("$(basename "$f" .c)"); done
fi
sizes=32768,65536,262144,1048576
for p in "${progs[@]}"; do
	src=$root/bench/assoc/$p.c
	[ -f "$src" ] || src=$root/bench/phased/$p.c
	[ -f "$src" ] || { echo "assoc-programs: no program $p" >&2; exit 2; }
	cd "$work"
	if [ $reuse = 0 ]; then
		gcc -O1 -gdwarf-4 "$src" -o "$p"
		LOMAS_DBI_TRACE=$work/$p.t "$demo" record --clock dbi -o "$p.lomas" -- "./$p" >/dev/null 2>&1
		for W in 8 16; do
			"$exactsim" --ways $W --runs 2 --sizes $sizes "$p.t" | tail -4 >"$p.ex$W"
		done
		rm -f "$p.t"
	fi
	for W in 8 16; do
		"$demo" curve --ways $W --sizes $sizes "$p.lomas" | tail -4 >"$p.m$W"
		paste -d, "$p.ex$W" "$p.m$W" | awk -F, -v p="$p" -v W=$W '
			{ line = line sprintf("  %4dK r %5.2f(%+5.2f) l %5.2f(%+5.2f)", $1 / 1024,
			      100 * $2, 100 * ($5 - $2), 100 * $3, 100 * ($6 - $3)) }
			END { printf "%-12s %2s-way%s\n", p, W, line }'
	done
done
