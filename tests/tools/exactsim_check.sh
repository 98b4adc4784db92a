#!/bin/sh
# Check exactsim on a small lackey trace whose miss ratios are known by hand:
# a loop over 10 lines, 100 times (1000 loads, 10 cold), then one modify of a
# new line (a load, a cold miss, and a store that hits): 1002 references.
set -e
sim=$1
tmp=${TMPDIR:-/tmp}/exactsim_check.$$
trap 'rm -f "$tmp".*' EXIT
{
	echo "==1234== Lackey, an example Valgrind tool"
	echo "I  04001000,3"
	i=0
	while [ $i -lt 1000 ]; do
		printf ' L %x,8\n' $((0x10000 + (i % 10) * 64))
		i=$((i + 1))
	done
	echo " M 00020008,4"
	echo "--1234-- done"
	echo "**1234** note"
} > "$tmp.trace"

check() {
	if [ "$1" != "$2" ]; then
		echo "exactsim_check: expected:"; echo "$2"; echo "got:"; echo "$1"
		exit 1
	fi
}

# 1 line: every loop reference misses (990 of 1002); 9 lines: LRU still
# misses them all; 10 lines: nothing misses but the cold references.
out=$("$sim" --sizes 64,576,640,6400 "$tmp.trace" | cut -d, -f1,3)
check "$out" "size_bytes,lru
64,0.988024
576,0.988024
640,0.000000
6400,0.000000"

# Random replacement: 1 line misses like LRU; 11 lines or more hold everything.
out=$("$sim" --sizes 64,704 --runs 2 "$tmp.trace" | cut -d, -f1,2)
check "$out" "size_bytes,random
64,0.988024
704,0.000000"

# With --cold the 11 first touches count too; standard input works.
out=$("$sim" --cold --sizes 640 - < "$tmp.trace")
check "$out" "size_bytes,random,lru
640,0.010978,0.010978"

# Default sizes: 81 rows from 1 KiB to 1 GiB.
rows=$("$sim" "$tmp.trace" | tail -n +2 | wc -l)
check "$rows" "81"
check "$("$sim" "$tmp.trace" | sed -n '2p;3p;82p' | cut -d, -f1 | tr '\n' ' ')" "1024 1216 1073741824 "

# --ways: direct-mapped with 5 sets puts lines 0x400 and 0x405 (and each
# other pair 5 apart) in one set: every loop reference misses, either
# policy; 10 sets of 1 way or 5 of 2 hold the loop.
out=$("$sim" --ways 1 --sizes 320,640 "$tmp.trace")
check "$out" "size_bytes,random,lru
320,0.988024,0.988024
640,0.000000,0.000000"
out=$("$sim" --ways 2 --sizes 640 "$tmp.trace")
check "$out" "size_bytes,random,lru
640,0.000000,0.000000"

# Four lines 8 lines apart, 100 times (400 loads, 4 cold): one set of 8.
# 16 lines of 2 ways (8 sets): LRU misses every reuse, though a fully
# associative cache of 16 lines holds them; random replacement some; 4 ways
# hold them.
{
	i=0
	while [ $i -lt 400 ]; do
		printf ' L %x,8\n' $((0x40000 + (i % 4) * 512))
		i=$((i + 1))
	done
} > "$tmp.stride"
out=$("$sim" --ways 2 --sizes 1024,2048 --runs 4 "$tmp.stride")
check "$(echo "$out" | cut -d, -f1,3)" "size_bytes,lru
1024,0.990000
2048,0.000000"
check "$("$sim" --sizes 1024 "$tmp.stride" | cut -d, -f3 | tail -1)" "0.000000"
rnd=$(echo "$out" | sed -n 2p | cut -d, -f2)
check "$(awk -v r="$rnd" 'BEGIN { print (r > 0.2 && r < 0.9) ? "between" : r }')" "between"
check "$("$sim" --ways 4 --sizes 2048 "$tmp.stride" | tail -1)" "2048,0.000000,0.000000"

# --ways needs whole sets, explicit sizes, and no --per-pc.
for args in "--ways 2 --sizes 192" "--ways 2" "--ways 2 --sizes 1024 --per-pc"; do
	# shellcheck disable=SC2086
	if "$sim" $args "$tmp.stride" > /dev/null 2> "$tmp.err"; then
		echo "exactsim_check: $args accepted"; exit 1
	fi
	grep -q "ways" "$tmp.err"
done

# A malformed line is an error naming the line.
printf ' L 1000,8\n X 12\n' > "$tmp.bad"
if "$sim" "$tmp.bad" 2> "$tmp.err"; then
	echo "exactsim_check: malformed input accepted"; exit 1
fi
grep -q "line 2" "$tmp.err"
echo "exactsim_check: ok"
