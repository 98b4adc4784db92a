/*
 * lomas-demo, the command-line face of liblomas: turn a memory trace into a
 * profile and a profile into working-set graphs. Uses the public API only.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "demo.h"

const struct demo_cmd demo_cmds[] = {
    {"analyze", "sample a Valgrind lackey trace into a profile",
     "Sample a Valgrind lackey trace (--trace-mem=yes) through the trace clock and\n"
     "save the profile. FILE '-' reads standard input.\n\n",
     "lomas-demo analyze --lackey FILE|- -o OUT.lomas [--period N|auto] [--seed S]\n"
     "                          [--line-size B] [--window N|auto]",
     cmd_analyze, analyze_opts, 22},
    {"curve", "miss ratio per cache size as CSV or JSON",
     "Print miss ratios (fractions) per cache size as CSV (size_bytes,random,lru) or JSON.\n"
     "\n",
     "lomas-demo curve [--sizes B1,B2,...] [--cold] [--json] [--policy random|lru|both]\n"
     "                        [--ci] [--ci-level L] [--ci-resamples N] [--seed S]\n"
     "                        [--ways W] [--phase K] PROFILE",
     cmd_curve, curve_opts, 27},
    {"report", "summary and working-set graph of a profile",
     "Summarize a profile and draw its working-set graph (miss ratio against cache\n"
     "size, random replacement and LRU) with this machine's caches marked.\n"
     "\n",
     "lomas-demo report [--cold] [--color|--no-color] [--ci|--no-ci] PROFILE", cmd_report,
     report_opts, 13},
    {"export", "a profile as JSON or CSV",
     "Write the whole profile for people and scripts to standard output.\n"
     "\n",
     "lomas-demo export --json|--csv PROFILE", cmd_export, export_opts, 11},
    {"compare", "what changed between two profiles: curves and source lines",
     "Compare two runs of a program (after a code change, another input or build):\n"
     "both working-set curves side by side with their difference, every other\n"
     "octave and at each of this machine's caches, then the source lines whose\n"
     "estimated misses changed most, matched by function and line (addresses move\n"
     "between builds).\n"
     "\n",
     "lomas-demo compare [--cache-size B] [--policy P] [--top N] [--json] [--cold]\n"
     "                      A.lomas B.lomas\n"
     "       lomas-demo compare --csv [--sizes B1,B2,...] [--cold] A.lomas B.lomas",
     cmd_compare, compare_opts, 22},
    {"hot", "the instructions that miss most, with source lines",
     "Attribute the misses of one cache size to the instructions that miss (each\n"
     "sampled reuse's miss probability, from the model `curve` uses, belongs to the\n"
     "instruction that made the reuse) and print them as CSV, most misses first:\n"
     "pc,function,location,misses,miss_ratio,share (location is file:line, or\n"
     "module+0xOFFSET without line information; misses are estimated references;\n"
     "miss_ratio is the instruction's own, share its part of all misses).\n"
     "The delinquent set (--json: each entry's \"delinquent\", and\n"
     "\"delinquent_pcs\") is the fewest instructions that cover 90% of the\n"
     "misses (\"cover90_pcs\") and every other one with 1% of them or more\n"
     "(UMI's threshold for a delinquent load).\n"
     "\n",
     "lomas-demo hot [--cache-size B] [--policy random|lru] [--top N] [--json]\n"
     "                      [--by pc|line|function] [--cold] [--debug-dir DIR] PROFILE",
     cmd_hot, hot_opts, 22},
    {"annotate", "a source file with each line's estimated misses",
     "Print a source file with each line's estimated misses at one cache size, its\n"
     "share of all misses and the line's own miss ratio, as cg_annotate does for\n"
     "Cachegrind. A line's misses are those of the instructions whose innermost\n"
     "source line it is (from the debug info of the binaries the profile maps).\n"
     "\n",
     "lomas-demo annotate [--cache-size B] [--policy random|lru] [--cold] PROFILE SOURCE",
     cmd_annotate, annotate_opts, 22},
    {"plot", "the working-set graph as an SVG document",
     "Draw the working-set graph of one or more profiles as SVG: miss ratio against\n"
     "cache size (log scale, binary units), random replacement solid and LRU dashed,\n"
     "one colour per profile with a legend below the graph, this machine's caches\n"
     "marked (sysfs), and a shaded 95% confidence band around each curve where the\n"
     "model gives one (100 bootstrap replicates: about 100 curves' work each).\n"
     "\n",
     "lomas-demo plot [--sizes B1,...] [--policy P] [--cold] [--title T] -o FILE.svg\n"
     "                      PROFILE [PROFILE...]",
     cmd_plot, plot_opts, 22},
    {"bounds", "LRU miss ratio bounds when the cache is time-shared",
     "Bound the miss ratio of an LRU cache shared with other programs that empty it\n"
     "of this program's lines every scheduling quantum: lower = the warm cache,\n"
     "upper = a cache flushed every quantum (each flush costs the misses of filling\n"
     "it again, from the profile's stack distances). CSV quantum_refs,lower,upper;\n"
     "a table over quanta of 10^3 to 10^9 references unless --quantum is given.\n"
     "\n",
     "lomas-demo bounds [--cache-size B] [--quantum N] [--cold] PROFILE", cmd_bounds, bounds_opts,
     19},
    {"info", "what this machine offers: clocks, PMU events, caches",
     "Show the clocks that work here and, for each that does not, why (no PMU,\n"
     "perf_event_paranoid, ptrace scope, no valgrind, no clang-16); the perf settings;\n"
     "the detected PMU's load and store events with their perf encodings (libpfm4);\n"
     "and this machine's caches.\n\n",
     "lomas-demo info [--json] [--pmu NAME|list]", cmd_info, info_opts, 15},
    {"phases", "the program's phases, window by window, as CSV",
     "Find the program's phases from each window's cache access signature (the set\n"
     "index of its sampled lines in a cache of --buckets sets, and its sampled pcs)\n"
     "and print CSV window,thread,start_ref,refs,phase; phase 0 marks a transition\n"
     "(a window not yet seen often enough to form a phase). `curve --phase K`\n"
     "models one phase's own references.\n"
     "\n",
     "lomas-demo phases [--buckets N] [--threshold S] [--transition N] PROFILE", cmd_phases,
     phases_opts, 19},
    {"record", "run or attach to a program under a live clock",
     "Run a program (or attach to a running one) under a live clock and save its\n"
     "profile. Exits with the program's own status (128+N if signal N killed it),\n"
     "125 when lomas fails (nothing runs when OUT cannot be written or the clock\n"
     "cannot run the program), 126 when the command cannot run, 127 when it is\n"
     "not found; like env, a file without #! that is not a binary runs with\n"
     "/bin/sh. SIGINT/SIGTERM detach and save what was collected; a program\n"
     "stopped (SIGSTOP, SIGTSTP) stays stopped until SIGCONT, as without lomas.\n\n",
     "lomas-demo record [-o OUT.lomas] [--clock C] [--period N] [...] -- COMMAND [ARGS...]\n"
     "       lomas-demo record [-o OUT.lomas] [options] -p PID",
     cmd_record, record_opts, 26},
    {NULL, NULL, NULL, NULL, NULL, NULL, 0},
};

static int usage(FILE *out)
{
	fprintf(out,
	        "usage: lomas-demo COMMAND [OPTIONS] [ARGS]\n\n"
	        "liblomas %s: sample memory references and model cache miss ratios.\n\n"
	        "commands:\n",
	        lomas_version());
	for (const struct demo_cmd *d = demo_cmds; d->name; d++) {
		fprintf(out, "  %-8s  %s\n", d->name, d->brief);
	}
	fprintf(out, "\n'lomas-demo help COMMAND' or 'lomas-demo COMMAND -h' for its options.\n"
	             "Exit status: 0 ok, 2 usage or input error, 125 lomas cannot do it.\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *name;
	/* A closed pipe on stdout becomes EPIPE, reported by demo_finish_stdout. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	name = argv[1];
	if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
		printf("lomas-demo %s (liblomas %s)\n", LOMAS_VERSION_STRING, lomas_version());
		return demo_finish_stdout("version");
	}
	if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
		usage(stdout);
		return demo_finish_stdout("help");
	}
	if (strcmp(name, "help") == 0) {
		if (argc > 3)
			return demo_fail("help", "too many arguments");
		if (argc == 3)
			return demo_help(argv[2]);
		usage(stdout);
		return demo_finish_stdout("help");
	}
	for (const struct demo_cmd *d = demo_cmds; d->name; d++)
		if (strcmp(d->name, name) == 0)
			return d->run(argc - 1, argv + 1);
	{
		char safe[1024];
		fprintf(stderr, "lomas-demo: unknown command '%s' (see 'lomas-demo help')\n",
		        demo_escape(name, safe, sizeof safe));
	}
	return EXIT_USAGE;
}
