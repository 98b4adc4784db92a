# shellcheck shell=bash
# The bundled workloads (examples/workloads) as the timing benchmarks run them
# (sourced by bench/inline.sh and bench/phase-guided.sh, so their run times
# are of the same programs): the order of the rows, and each workload's
# arguments for runs of ~0.1-0.5 s natively (their defaults run for
# milliseconds).
# shellcheck disable=SC2034  # used by the scripts that source this file
bench_workloads=(stream stride random chase matmul tiled phases threads)
# shellcheck disable=SC2034
declare -A bench_timing_args=(
	[stream]="2097152 10"
	[stride]="67108864 64 8"
	[random]="4194304 8388608"
	[chase]="262144 4000000"
	[matmul]="480"
	[tiled]="480 32"
	[phases]="16777216 32768 8"
	[threads]="65536 1000000"
)
