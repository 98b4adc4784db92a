# Shared by bench/inline.sh and bench/inline-extra.sh (sourced; needs $tmp).

# One run: prints "microseconds peak_rss_kb"; the program's output goes to $tmp/out.
# The previous run's profile ($LOMAS_OUTPUT) is removed first, outside the timed
# part: a program writing over an existing profile also pays for the old one's
# unlink (0.3 ms on ext4 for a 500 KB file), which a run writing a fresh
# lomas-<pid>.lomas (the default) or into lomas-demo's private directory does not.
one() {
	local t0 t1
	[ -n "${LOMAS_OUTPUT:-}" ] && rm -f "$LOMAS_OUTPUT"
	t0=$(date +%s%N)
	/usr/bin/time -f %M -o "$tmp/rss" "$@" >"$tmp/out"
	t1=$(date +%s%N)
	echo "$(( (t1 - t0) / 1000 )) $(cat "$tmp/rss")"
}

# REPS alternating runs of PLAIN and INLINE (each with ARGS...): sets pt and
# it (the fastest run of each, microseconds) and pm and im (the median peak
# RSS, KB). With same_output=1, exits 1 when INLINE prints differently.
# Usage: measure_pair NAME PLAIN INLINE ARGS...   (needs $reps; LOMAS_OUTPUT=$tmp/p.lomas)
measure_pair() {
	local name=$1 plain=$2 inst=$3 r t m
	shift 3
	: >"$tmp/pt"; : >"$tmp/it"; : >"$tmp/pm"; : >"$tmp/im"
	for ((r = 0; r < reps; r++)); do
		read -r t m < <(one "$plain" "$@")
		cp "$tmp/out" "$tmp/out.plain"
		echo "$t" >>"$tmp/pt"; echo "$m" >>"$tmp/pm"
		read -r t m < <(LOMAS_OUTPUT="$tmp/p.lomas" one "$inst" "$@")
		if [ "${same_output:-0}" = 1 ] && ! cmp -s "$tmp/out" "$tmp/out.plain"; then
			echo "$(basename "$0"): $name prints differently with the sampler" >&2
			exit 1
		fi
		echo "$t" >>"$tmp/it"; echo "$m" >>"$tmp/im"
	done
	pt=$(sort -n "$tmp/pt" | head -1); it=$(sort -n "$tmp/it" | head -1)
	pm=$(median <"$tmp/pm"); im=$(median <"$tmp/im")
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# The geometric means of the ratios (sums of logs over n rows) and the goals.
# Usage: footer WIDTH LOGSUM_TIME LOGSUM_RSS N
footer() {
	awk -v wd="$1" -v t="$2" -v m="$3" -v n="$4" 'BEGIN {
		printf "%-" wd "s %10s %10s %7.2f %10s %10s %7.2f\n", "geomean", "", "", exp(t / n), "", "", exp(m / n)
		printf "goals: time <= 1.50x, peak RSS <= 1.10x (settings: LOMAS_PERIOD=%s)\n", ENVIRON["LOMAS_PERIOD"] ? ENVIRON["LOMAS_PERIOD"] : "auto" }'
}
