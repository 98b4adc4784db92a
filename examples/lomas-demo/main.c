/*
 * lomas-demo, the command-line face of liblomas: turn a memory trace into a
 * profile and a profile into working-set graphs. Uses the public API only.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "demo.h"
#include "record_session.h"

const struct demo_cmd demo_cmds[] = {
    {"analyze", "sample a Valgrind lackey trace into a profile",
     "Sample a Valgrind lackey trace (--trace-mem=yes) through the trace clock and\n"
     "save the profile. FILE '-' reads standard input.\n\n"
     "  --lackey FILE|-     the lackey output to read (required)\n"
     "  -o, --output OUT    the profile to write (required)\n"
     "  --period N|auto     mean sampling period in references (default auto)\n"
     "  --seed S            seed of the sampling generator (default 1)\n"
     "  --line-size B       cache line size in bytes (default 64)\n"
     "  --window N|auto     window length in references (default auto)\n",
     "lomas-demo analyze --lackey FILE|- -o OUT.lomas [--period N|auto] [--seed S]\n"
     "                          [--line-size B] [--window N|auto]",
     cmd_analyze},
    {"curve", "miss ratio per cache size as CSV or JSON",
     "Print miss ratios (fractions) per cache size as CSV (size_bytes,random,lru) or JSON.\n\n"
     "  --sizes B1,B2,...        cache sizes in bytes; K/KiB, M/MiB, G/GiB allowed\n"
     "                           (default: 1 KiB to 1 GiB, 4 per octave)\n"
     "  --policy random|lru|both replacement policies to model (default both)\n"
     "  --cold                   count cold misses (excluded by default)\n"
     "  --json                   a JSON array of {size_bytes, random, lru}\n"
     "  --ci                     a confidence interval per size: the columns (and JSON\n"
     "                           fields) random_lo,random_hi,lru_lo,lru_hi, from a\n"
     "                           Poisson bootstrap of the samples (sampling noise only)\n"
     "  --ci-level L             its level (default 0.95; implies --ci)\n"
     "  --ci-resamples N         bootstrap replicates (default 200; implies --ci)\n"
     "  --seed S                 the bootstrap's seed (default 1): same seed, same bounds\n"
     "  --ways W                 W-way set-associative caches (0: fully associative, the\n"
     "                           default); sizes whole sets (the default sizes rounded\n"
     "                           up); a line's set is its line number modulo the sets\n"
     "  --phase K                the curve of phase K's windows alone (see 'phases')\n",
     "lomas-demo curve [--sizes B1,B2,...] [--cold] [--json] [--policy random|lru|both]\n"
     "                        [--ci] [--ci-level L] [--ci-resamples N] [--seed S]\n"
     "                        [--ways W] [--phase K] PROFILE",
     cmd_curve},
    {"report", "summary and working-set graph of a profile",
     "Summarize a profile and draw its working-set graph (miss ratio against cache\n"
     "size, random replacement and LRU) with this machine's caches marked.\n\n"
     "  --cold     count cold misses (excluded by default)\n"
     "  --color    colour the graph even when standard output is not a terminal\n"
     "  --no-color never colour the graph\n"
     "  --ci       shade 95% confidence bands (a bootstrap of the samples; the\n"
     "             default for profiles of up to 200000 samples)\n"
     "  --no-ci    no bands\n",
     "lomas-demo report [--cold] [--color|--no-color] [--ci|--no-ci] PROFILE", cmd_report},
    {"export", "a profile as JSON or CSV",
     "Write the whole profile for people and scripts to standard output.\n\n"
     "  --json   one JSON document: metadata, threads, windows, samples\n"
     "  --csv    one row per sample, with a header line\n",
     "lomas-demo export --json|--csv PROFILE", cmd_export},
    {"compare", "what changed between two profiles: curves and source lines",
     "Compare two runs of a program (after a code change, another input or build):\n"
     "both working-set curves side by side with their difference, every other\n"
     "octave and at each of this machine's caches, then the source lines whose\n"
     "estimated misses changed most, matched by function and line (addresses move\n"
     "between builds).\n\n"
     "  --cache-size B      the cache of the line comparison (default: L1d, sysfs)\n"
     "  --policy random|lru its replacement policy (default random)\n"
     "  --top N             lines to show (default 10; 0 = all)\n"
     "  --cold              count cold misses (excluded by default)\n"
     "  --json              the same as one JSON object\n"
     "  --debug-dir DIR     separate debug files under DIR (default /usr/lib/debug)\n"
     "  --csv               only the curves, as CSV: size_bytes,random_a,random_b,\n"
     "                      lru_a,lru_b,random_diff,lru_diff (diff = b - a)\n"
     "  --sizes B1,B2,...   with --csv: cache sizes (default: 1 KiB to 1 GiB, 4 per\n"
     "                      octave)\n",
     "lomas-demo compare [--cache-size B] [--policy P] [--top N] [--json] [--cold]\n"
     "                      A.lomas B.lomas\n"
     "       lomas-demo compare --csv [--sizes B1,B2,...] [--cold] A.lomas B.lomas",
     cmd_compare},
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
     "(UMI's threshold for a delinquent load).\n\n"
     "  --cache-size B      the cache size (default: this machine's L1d, from sysfs)\n"
     "  --policy random|lru replacement policy of the model (default random)\n"
     "  --top N             print the N largest (default 20; 0 = all)\n"
     "  --by pc|line|function  one row per instruction (default), per source line\n"
     "                      (location,function,misses,miss_ratio,share,pcs) or per\n"
     "                      function (function,location,...)\n"
     "  --json              one JSON object with the totals and the entries\n"
     "  --cold              count cold misses (excluded by default)\n"
     "  --debug-dir DIR     separate debug files under DIR (default /usr/lib/debug)\n",
     "lomas-demo hot [--cache-size B] [--policy random|lru] [--top N] [--json]\n"
     "                      [--by pc|line|function] [--cold] [--debug-dir DIR] PROFILE",
     cmd_hot},
    {"annotate", "a source file with each line's estimated misses",
     "Print a source file with each line's estimated misses at one cache size, its\n"
     "share of all misses and the line's own miss ratio, as cg_annotate does for\n"
     "Cachegrind. A line's misses are those of the instructions whose innermost\n"
     "source line it is (from the debug info of the binaries the profile maps).\n\n"
     "  --cache-size B      the cache size (default: this machine's L1d, from sysfs)\n"
     "  --policy random|lru replacement policy of the model (default random)\n"
     "  --cold              count cold misses (excluded by default)\n"
     "  --debug-dir DIR     separate debug files under DIR (default /usr/lib/debug)\n",
     "lomas-demo annotate [--cache-size B] [--policy random|lru] [--cold] PROFILE SOURCE",
     cmd_annotate},
    {"plot", "the working-set graph as an SVG document",
     "Draw the working-set graph of one or more profiles as SVG: miss ratio against\n"
     "cache size (log scale, binary units), random replacement solid and LRU dashed,\n"
     "one colour per profile with a legend below the graph, this machine's caches\n"
     "marked (sysfs), and a shaded 95% confidence band around each curve where the\n"
     "model gives one (100 bootstrap replicates: about 100 curves' work each).\n\n"
     "  -o, --output FILE   the SVG file to write ('-' for standard output; required)\n"
     "  --sizes B1,B2,...   cache sizes (default: 1 KiB to 1 GiB, 4 per octave)\n"
     "  --policy random|lru|both  the curves to draw (default both)\n"
     "  --cold              count cold misses (excluded by default)\n"
     "  --title TEXT        the graph's title\n"
     "  --no-bands          no confidence bands (faster on large profiles)\n",
     "lomas-demo plot [--sizes B1,...] [--policy P] [--cold] [--title T] -o FILE.svg\n"
     "                      PROFILE [PROFILE...]",
     cmd_plot},
    {"bounds", "LRU miss ratio bounds when the cache is time-shared",
     "Bound the miss ratio of an LRU cache shared with other programs that empty it\n"
     "of this program's lines every scheduling quantum: lower = the warm cache,\n"
     "upper = a cache flushed every quantum (each flush costs the misses of filling\n"
     "it again, from the profile's stack distances). CSV quantum_refs,lower,upper;\n"
     "a table over quanta of 10^3 to 10^9 references unless --quantum is given.\n\n"
     "  --cache-size B   the cache (default: this machine's L1d, from sysfs)\n"
     "  --quantum N      one quantum of N of the program's references\n"
     "  --cold           count cold misses (excluded by default)\n",
     "lomas-demo bounds [--cache-size B] [--quantum N] [--cold] PROFILE", cmd_bounds},
    {"info", "what this machine offers: clocks, PMU events, caches",
     "Show the clocks that work here and, for each that does not, why (no PMU,\n"
     "perf_event_paranoid, ptrace scope, no valgrind, no clang-16); the perf settings;\n"
     "the detected PMU's load and store events with their perf encodings (libpfm4);\n"
     "and this machine's caches.\n\n"
     "  --json       the same as one JSON document\n"
     "  --pmu NAME   the tables of any PMU libpfm4 knows (nhm, snb, skl, spr,\n"
     "               amd64_fam19h_zen3, ...) instead of this machine's; 'list' names them\n",
     "lomas-demo info [--json] [--pmu NAME|list]", cmd_info},
    {"phases", "the program's phases, window by window, as CSV",
     "Find the program's phases from each window's cache access signature (the set\n"
     "index of its sampled lines in a cache of --buckets sets, and its sampled pcs)\n"
     "and print CSV window,thread,start_ref,refs,phase; phase 0 marks a transition\n"
     "(a window not yet seen often enough to form a phase). `curve --phase K`\n"
     "models one phase's own references.\n\n"
     "  --buckets N      sets of the signature's cache (default 1024)\n"
     "  --threshold S    the similarity (cosine) that joins a phase (default 0.8)\n"
     "  --transition N   windows alike that make a new phase (default 2)\n",
     "lomas-demo phases [--buckets N] [--threshold S] [--transition N] PROFILE", cmd_phases},
    {"record", "run or attach to a program under a live clock",
     "Run a program (or attach to a running one) under a live clock and save its\n"
     "profile. Exits with the program's own status (128+N if signal N killed it),\n"
     "125 when lomas fails (nothing runs when OUT cannot be written or the clock\n"
     "cannot run the program), 126 when the command cannot run, 127 when it is\n"
     "not found; like env, a file without #! that is not a binary runs with\n"
     "/bin/sh. SIGINT/SIGTERM detach and save what was collected; a program\n"
     "stopped (SIGSTOP, SIGTSTP) stays stopped until SIGCONT, as without lomas.\n\n"
     "  -o, --output OUT        the profile to write (default lomas.lomas)\n"
     "  --clock auto|inline|dbi|step|pmu  the clock (default auto: pmu where the\n"
     "                          counters open, else inline when the program carries\n"
     "                          the lomas-inline hooks, else dbi (under Valgrind,\n"
     "                          any x86-64 program) when Valgrind is installed,\n"
     "                          else step; says which); dbi cannot attach (-p)\n"
     "  --events LOAD,STORE     pmu: libpfm4 event names (default: the PMU's table)\n"
     "  --watch auto|mprotect|debugreg  the watchpoint engine\n"
     "  --period N|auto         mean sampling period in references\n"
     "  --seed S                seed of the sampling generator (default 1)\n"
     "  --line-size B           cache line size in bytes (default 64)\n"
     "  --window N|auto         window length in references\n"
     "  --max-skid N            simulated (step) or real (pmu) overflow skid\n"
     "  --phase-guided          inline, dbi: sample known phases 16x less often\n"
     "  -p, --pid PID           attach to a running process instead\n",
     "lomas-demo record [-o OUT.lomas] [--clock C] [--period N] [...] -- COMMAND [ARGS...]\n"
     "       lomas-demo record [-o OUT.lomas] [options] -p PID",
     cmd_record},
    {NULL, NULL, NULL, NULL, NULL},
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

int cmd_record(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return demo_help("record");
	return record_main(argc, argv);
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
