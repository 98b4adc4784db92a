# shellcheck shell=bash disable=SC2154
# Shared by bench/polybench-accuracy.sh and bench/phased-accuracy.sh (sourced).
# Needs: $demo, $sim, $sizes, $period, $runs, $keep_traces.

# collect_trace DIR PROGRAM [ARGS...]: the trace clock's profile DIR/trace.lomas
# (valgrind lackey, lomas-demo analyze --lackey - --period $period) and the exact
# curve of the same trace, DIR/trace.exact.csv; with keep_traces=1 also the
# trace, DIR/trace.lackey.zst. The trace streams through FIFOs, never to disk.
collect_trace() {
	local d=$1
	shift
	rm -f "$d/l.fifo" "$d/x.fifo"
	mkfifo "$d/l.fifo" "$d/x.fifo"
	valgrind --tool=lackey --trace-mem=yes --log-file="$d/l.fifo" "$@" >/dev/null 2>&1 &
	local vg=$!
	"$sim" --sizes "$sizes" --runs "$runs" - <"$d/x.fifo" >"$d/trace.exact.csv" &
	local sm=$!
	if [ "$keep_traces" = 1 ]; then
		tee "$d/x.fifo" <"$d/l.fifo" | tee >(zstd -q -1 -f -o "$d/trace.lackey.zst") |
			"$demo" analyze --lackey - --period "$period" -o "$d/trace.lomas" 2>/dev/null
	else
		tee "$d/x.fifo" <"$d/l.fifo" |
			"$demo" analyze --lackey - --period "$period" -o "$d/trace.lomas" 2>/dev/null
	fi
	wait $vg $sm
	rm -f "$d/l.fifo" "$d/x.fifo"
}

# collect_inline DIR PROGRAM [ARGS...]: the inline clock's profile DIR/inline.lomas
# (lomas-demo record, period auto) and the exact curve of the very same run
# (LOMAS_TRACE), DIR/inline.exact.csv.
collect_inline() {
	local d=$1
	shift
	rm -f "$d/t.fifo"
	mkfifo "$d/t.fifo"
	"$sim" --sizes "$sizes" --runs "$runs" - <"$d/t.fifo" >"$d/inline.exact.csv" &
	local sm=$!
	LOMAS_TRACE="$d/t.fifo" "$demo" record -o "$d/inline.lomas" -- "$@" >/dev/null 2>&1
	wait $sm
	rm -f "$d/t.fifo"
}

# recollect DIR CLOCK PROGRAM [ARGS...]: the profile again (after a change to a
# clock), the exact curve kept: the trace clock from the kept trace, the inline
# clock by running the program again (the same run: programs here are
# deterministic).
recollect() {
	local d=$1 clock=$2
	shift 2
	if [ "$clock" = trace ]; then
		[ -f "$d/trace.lackey.zst" ] || { echo "$d: no kept trace (-T)" >&2; return 1; }
		zstd -q -dc "$d/trace.lackey.zst" |
			"$demo" analyze --lackey - --period "$period" -o "$d/trace.lomas" 2>/dev/null
	else
		"$demo" record -o "$d/inline.lomas" -- "$@" >/dev/null 2>&1
	fi
}

# score NAME DATASET DIR CLOCK: model DIR/CLOCK.lomas and print its errors.
score() {
	local name=$1 ds=$2 d=$3 clock=$4 info
	"$demo" curve --sizes "$sizes" "$d/$clock.lomas" >"$d/$clock.model.csv"
	info=$("$demo" report "$d/$clock.lomas" 2>/dev/null |
		awk '/^  references/{r=$2} /^  samples/{s=$2; sub(":","",s)} END{print r, s}')
	/usr/bin/python3 "$root/bench/curve_error.py" "$name" "$ds $clock $info" \
		"$d/$clock.model.csv" "$d/$clock.exact.csv"
}

# The 57 sizes from 4 KiB to 64 MiB, 4 per octave, whole 64-byte lines.
accuracy_sizes() {
	/usr/bin/python3 -c '
s, out = 4096.0, []
while s <= 64 * 2**20 * 1.0001:
    out.append(int(round(s / 64)) * 64); s *= 2 ** 0.25
print(",".join(map(str, out)))'
}
