"""The inline clock against real instrumented programs.

Ground truth is computed independently of the sampler: exactsim (exact
fully associative simulation, no liblomas code) over the full trace that the
very same run wrote (LOMAS_TRACE), the trace clock of liblomas over that
trace, the plain build of each workload, and what each workload is known to
do (its reference counts).
"""
import csv
import io
import json
import os
import signal
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import curve_check  # noqa: E402  (tests/curve_check.py)

BUILD = os.environ.get("LOMAS_BUILD_ROOT", "build")
SOURCE = os.environ.get("LOMAS_SOURCE_ROOT", ".")
WORKLOADS = os.environ.get("LOMAS_WORKLOADS", os.path.join(BUILD, "examples", "workloads"))
DEMO = os.environ.get("LOMAS_DEMO", os.path.join(BUILD, "examples", "lomas-demo", "lomas-demo"))
EXACTSIM = os.environ.get("LOMAS_EXACTSIM", os.path.join(BUILD, "tests", "tools", "exactsim"))
CRASH = os.environ.get("LOMAS_CRASH", os.path.join(BUILD, "tests", "inline", "crash-inline"))
SANITIZERS = os.environ.get("LOMAS_SANITIZERS", "0") == "1"
PASS = os.environ.get("LOMAS_PASS", "")  # the pass plugin, when built

# Single-threaded workloads: arguments (full traces of 0.5-2.3M references)
# and a period giving >= 10k samples (here 30k-40k).
ACCURACY = {
    "stream": (["65536", "4"], 15),
    "stride": (["3500000", "64", "4"], 12),
    "random": (["262144", "1000000"], 60),
    "chase": (["16384", "1000000"], 30),
    "matmul": (["64"], 15),
    "tiled": (["96", "16"], 40),
    "phases": (["1500000", "16384", "4"], 25),
}
ALL = sorted(list(ACCURACY) + ["threads"])


def inline(w):
    return os.path.join(WORKLOADS, w + "-inline")


def plain(w):
    return os.path.join(WORKLOADS, w + "-clang")


def run(argv, env_extra=None, cwd=None, check=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMAS_")}
    env.update(env_extra or {})
    r = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}: {r.stderr}")
    return r


def export_json(profile):
    return json.loads(run([DEMO, "export", "--json", profile]).stdout)


def export_csv(profile):
    return list(csv.DictReader(io.StringIO(run([DEMO, "export", "--csv", profile]).stdout)))


@pytest.mark.parametrize("w", sorted(ACCURACY))
def test_accuracy_against_exact_simulation(w, tmp_path):
    args, period = ACCURACY[w]
    trace, prof = str(tmp_path / "t.trace"), str(tmp_path / "p.lomas")
    run([inline(w)] + args, {"LOMAS_TRACE": trace, "LOMAS_OUTPUT": prof,
                             "LOMAS_PERIOD": str(period), "LOMAS_SEED": "1"})
    info = export_json(prof)
    with open(trace) as f:
        nrefs = sum(1 for _ in f)
    assert len(info["samples"]) >= 10000
    # The clock counted exactly the references the trace holds.
    assert sum(t["refs"] for t in info["threads"]) == nrefs
    sizes = curve_check.sizes_4k_64m()
    exact = curve_check.exact_curve(EXACTSIM, trace, sizes)
    model = curve_check.model_curve(DEMO, prof, sizes)
    errs = curve_check.curve_errors(exact, model, sizes)
    for name, (mae, _) in zip(curve_check.POLICIES, errs):
        print(f"{w} {name}: MAE {100 * mae:.3f} pp over {len(sizes)} sizes, "
              f"{len(info['samples'])} samples")
        assert mae <= 0.01, f"{w} {name}: MAE {100 * mae:.3f} pp"


@pytest.mark.parametrize("w", ["matmul", "random"])
def test_samples_equal_trace_clock_over_the_same_run(w, tmp_path):
    """The sampler and the trace clock (same seed and period) over the run's own
    trace take the same samples and measure the same reuse distances."""
    args, period = ACCURACY[w]
    trace, prof, ref = (str(tmp_path / n) for n in ("t.trace", "p.lomas", "r.lomas"))
    run([inline(w)] + args, {"LOMAS_TRACE": trace, "LOMAS_OUTPUT": prof,
                             "LOMAS_PERIOD": str(period), "LOMAS_SEED": "5"})
    run([DEMO, "analyze", "--lackey", trace, "--period", str(period), "--seed", "5", "-o", ref])
    key = ("start", "end", "state", "kind", "addr")
    mine = sorted(tuple(r[k] for k in key) for r in export_csv(prof))
    theirs = sorted(tuple(r[k] for k in key) for r in export_csv(ref))
    assert len(mine) > 1000
    assert mine == theirs


@pytest.mark.skipif(not PASS, reason="the pass plugin is not built (no LLVM 16 headers)")
@pytest.mark.parametrize("w,args", [("phases", ["400000", "8192", "3"]),
                                    ("tiled", ["96", "16"])])
def test_pass_plugin_and_sanitizer_coverage_sample_alike(w, args, tmp_path):
    """The pass plugin charges the countdown once per run of references and the
    sanitizer-coverage hooks once per reference: with the same seed and period
    the two builds of a program count the same references in every thread and
    take the same samples, with the same reuse distances. (phases' updates are
    read-modify-writes: about 1.4k of its samples start at a load whose run's
    next reference is the store to the same address, which the plugin ends at
    once and the hooks watch until that store.)"""
    got = []
    for build in (inline(w), os.path.join(WORKLOADS, w + "-sancov")):
        prof = str(tmp_path / (os.path.basename(build) + ".lomas"))
        run([build] + args, {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "40", "LOMAS_SEED": "3"})
        d = export_json(prof)
        samples = sorted((s["thread"], s["start"], s["end"], s["state"], s["kind"])
                         for s in d["samples"])
        got.append(([t["refs"] for t in d["threads"]], samples))
    assert got[0][0] == got[1][0]
    assert len(got[0][1]) > 2000
    assert got[0][1] == got[1][1]


def build_plugin_and_hooks(src, tmp_path):
    """src built with the pkg-config recipe (the pass plugin) and with the
    sanitizer-coverage hooks (LTO, the static runtime): the two executables."""
    name = os.path.splitext(os.path.basename(src))[0]
    plugin, hooks = str(tmp_path / (name + "-plugin")), str(tmp_path / (name + "-hooks"))
    subprocess.run(["clang-16", "-O2"] + pkg_config("--cflags", "lomas-inline") +
                   [src, "-o", plugin] + pkg_config("--libs", "lomas-inline"),
                   check=True, capture_output=True, text=True)
    static = os.path.join(BUILD, "lib", "inline", "liblomas-inline.a")
    subprocess.run(["clang-16", "-O2", "-fsanitize-coverage=func,trace-loads,trace-stores",
                    "-flto", "-I" + os.path.join(SOURCE, "include"), src, "-o", hooks,
                    "-fuse-ld=lld-16", "-fno-sanitize-link-runtime", static,
                    "-Wl,--wrap=pthread_create", "-lm", "-pthread"],
                   check=True, capture_output=True, text=True)
    return plugin, hooks


@pytest.mark.skipif(not PASS, reason="the pass plugin is not built (no LLVM 16 headers)")
def test_next_reference_shortcut_takes_the_hooks_samples(tmp_path):
    """A run whose next reference is at a constant offset from this one (the fields
    of a 12-byte record: a load, a read-modify-write, a store) lets the plugin end a
    sample at its start when that offset is in the same line; the samples are
    exactly those of the hooks, which watch every line, also where a field pair
    falls in two lines. The plugin ended many at once (same start and end pc,
    distance 0), the hooks almost none (only where two call sites were merged)."""
    src = os.path.join(SOURCE, "tests", "inline", "fields.c")
    plugin, hooks = build_plugin_and_hooks(src, tmp_path)
    got, shortcut, out = [], [], []
    for exe in (plugin, hooks):
        prof = exe + ".lomas"
        r = run([exe, "5000", "3"], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "7",
                                     "LOMAS_SEED": "11"})
        out.append(r.stdout)
        rows = export_csv(prof)
        # Heap addresses differ between the processes (ASLR) but not where in its
        # line each one falls, which decides the shortcut.
        got.append(sorted((r["start"], r["end"], r["state"], r["kind"], int(r["addr"], 16) % 64)
                          for r in rows))
        shortcut.append(sum(1 for r in rows if r["distance"] == "0"
                            and r["start_pc"] == r["end_pc"]))
    assert out[0] == out[1]
    assert len(got[0]) > 5000
    assert got[0] == got[1]
    assert shortcut[0] > len(got[0]) // 4 and shortcut[1] < shortcut[0] // 100, shortcut


@pytest.mark.skipif(not PASS, reason="the pass plugin is not built (no LLVM 16 headers)")
def test_group_across_the_filter_end_takes_the_hooks_samples(tmp_path):
    """A group of two references whose blocks are the filter's last byte and its
    first (a 4 MiB boundary) is tested with one 16-bit load that reads the byte
    past the filter's end, which mirrors byte 0: the reuse by the group's second
    reference of a line watched there is seen, as the hooks see it."""
    src = os.path.join(SOURCE, "tests", "inline", "wrap.c")
    plugin, hooks = build_plugin_and_hooks(src, tmp_path)
    got = []
    for exe in (plugin, hooks):
        prof = exe + ".lomas"
        run([exe], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "20", "LOMAS_SEED": "2"})
        got.append(sorted((r["start"], r["end"], r["state"], r["kind"]) for r in export_csv(prof)))
    assert len(got[0]) > 800
    assert got[0] == got[1]


def test_reproducible_with_a_fixed_seed(tmp_path):
    """Same seed: identical profiles (address-space randomization off so the
    addresses and pcs repeat too); another seed: other samples."""
    outs = []
    for i, seed in enumerate(["9", "9", "10"]):
        prof = str(tmp_path / f"{i}.lomas")
        run(["setarch", "x86_64", "-R", inline("matmul"), "48"],
            {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "30", "LOMAS_SEED": seed})
        d = export_json(prof)
        for k in ("pid", "command"):
            d["meta"].pop(k, None)
        for t in d["threads"]:
            t.pop("tid")
        outs.append(d)
    assert outs[0] == outs[1]
    assert len(outs[0]["samples"]) > 1000
    assert outs[0]["samples"] != outs[2]["samples"]


@pytest.mark.parametrize("w", ALL)
def test_program_output_and_status_unchanged(w, tmp_path):
    base = run([plain(w)])
    for extra in ({}, {"LOMAS_PERIOD": "7", "LOMAS_TRACE": str(tmp_path / "t")}):
        extra = dict(extra, LOMAS_OUTPUT=str(tmp_path / "p.lomas"))
        r = run([inline(w)], extra)
        assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    bad = run([inline(w), "0"], {"LOMAS_OUTPUT": str(tmp_path / "q.lomas")}, check=False)
    ref = run([plain(w), "0"], check=False)
    assert (bad.returncode, bad.stdout, bad.stderr) == (ref.returncode, ref.stdout, ref.stderr)


def test_four_threads_get_their_own_clocks(tmp_path):
    prof = str(tmp_path / "p.lomas")
    nodes, steps = 4096, 50000
    r = run([inline("threads"), str(nodes), str(steps)],
            {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "100"})
    assert r.stdout.count("thread ") == 4
    d = export_json(prof)
    threads = d["threads"]
    assert len(threads) == 5  # main + 4 workers, in creation order
    assert len({t["tid"] for t in threads}) == 5
    assert threads[0]["refs"] < 1000  # main only starts and joins them
    for i, t in enumerate(threads[1:]):
        known = nodes + steps * (i + 1)  # ring stores + chase loads
        assert abs(t["refs"] - known) <= 0.001 * known + 64, (i, t["refs"], known)
    for i, t in enumerate(threads):
        mine = [s for s in d["samples"] if s["thread"] == i]
        assert all(s["start"] < t["refs"] for s in mine)
        # Every window belongs to its thread and they add up to its clock.
        wins = [w for w in d["windows"] if w["thread"] == i]
        assert sum(w["refs"] for w in wins) == t["refs"]
        if i:
            assert abs(len(mine) - t["refs"] / 100) < 6 * (t["refs"] / 100) ** 0.5 + 10
            # Samples still open when a worker exited are kept, as dangling.
            assert any(s["state"] == "dangling" for s in mine), i


def test_period_auto_is_one_budget_for_all_threads(tmp_path):
    """Period auto doubles the period when all threads together have taken 20k
    samples at 128 (then every 7.5k; each thread follows at its next sample), and
    every thread's samples still stand for its references: the weights of a
    thread's samples add up to its clock."""
    prof = str(tmp_path / "p.lomas")
    nodes, steps = 4096, 600000
    run([inline("threads"), str(nodes), str(steps)], {"LOMAS_OUTPUT": prof})
    d = export_json(prof)
    refs = sum(t["refs"] for t in d["threads"])
    assert refs > 5_000_000
    # No thread alone would take 20k samples at 128: per-thread budgets would
    # keep them all at 128 (80k samples or more).
    assert all(t["refs"] / 128 < 20000 for t in d["threads"])
    weights = {s["weight"] for s in d["samples"]}
    assert min(weights) >= 128 and max(weights) >= 512, sorted(weights)
    # Held: at most the first 20k plus 4 levels of 7.5k (and what the threads
    # took before they saw a level), fewer once thinned.
    assert 18000 <= len(d["samples"]) <= 51000, len(d["samples"])
    for i, t in enumerate(d["threads"][1:], start=1):
        w = sum(s["weight"] for s in d["samples"] if s["thread"] == i)
        assert abs(w - t["refs"]) < 0.06 * t["refs"], (i, w, t["refs"])


@pytest.mark.parametrize("var,value", [("LOMAS_PERIOD", "abc"), ("LOMAS_SEED", "-3"),
                                       ("LOMAS_LINE_SIZE", "100"), ("LOMAS_WINDOW", "0"),
                                       ("LOMAS_MAX_LIVE", "0"), ("LOMAS_PHASE_GUIDED", "on"),
                                       ("LOMAS_PHASE_SAMPLES", "0"),
                                       ("LOMAS_PHASE_DIVIDE", "12")])
def test_invalid_environment_value(var, value, tmp_path):
    prof = str(tmp_path / "p.lomas")
    base = run([plain("matmul"), "32"])
    r = run([inline("matmul"), "32"], {"LOMAS_OUTPUT": prof, var: value})
    assert r.stdout == base.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and var in lines[0] and value in lines[0]
    meta = export_json(prof)["meta"]
    assert var in meta["env_error"]
    if var == "LOMAS_LINE_SIZE":
        assert meta["line_size"] == "64"


def test_unwritable_output_reported_at_start_up(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("x")
    for target in ("/nonexistent-dir/p.lomas", str(ro), str(afile / "p.lomas")):
        # stdout and stderr share one pipe: the report comes before the program's output.
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOMAS_")}
        env["LOMAS_OUTPUT"] = target
        r = subprocess.run([inline("matmul"), "32"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        lines = r.stdout.splitlines()
        assert r.returncode == 0
        assert len(lines) == 2 and "LOMAS_OUTPUT" in lines[0] and lines[1].startswith("matmul")
    assert os.listdir(ro) == []


def test_default_output_name(tmp_path):
    r = run([inline("matmul"), "32"], cwd=str(tmp_path))
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("lomas-") and files[0].endswith(".lomas")
    pid = files[0][len("lomas-"):-len(".lomas")]
    d = export_json(str(tmp_path / files[0]))
    assert d["meta"]["pid"] == pid and d["meta"]["clock"] == "inline"
    assert r.stderr == ""


@pytest.mark.parametrize("mode,sig", [("segv", signal.SIGSEGV), ("abort", signal.SIGABRT),
                                      ("term", signal.SIGTERM)])
def test_fatal_signal_flushes_the_profile(mode, sig, tmp_path):
    prof = str(tmp_path / "p.lomas")
    r = run([CRASH, mode], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "50"}, check=False)
    assert r.returncode == -sig
    d = export_json(prof)
    assert d["meta"]["ended"] == f"signal {int(sig)}"
    # The work before the crash: 4 read-write passes over 50000 longs and one
    # read pass, in 16-byte vectors: at least 225000 references.
    assert d["threads"][0]["refs"] >= 225000
    assert len(d["samples"]) > 4000


def test_signal_handler_interrupting_the_clock(tmp_path):
    """A SIGALRM handler with references of its own (66 a call) interrupts the
    program's loops every 100 us, at a short period so that its references
    often visit the slow path. Such a visit can land between the load and the
    store of an interrupted countdown update (in either instrumentation), which
    then overwrites the visit's new countdown: the clock would step back and a
    sample end before it started, and the profile could not be written. The
    runtime keeps the clock monotonic instead: every run writes a valid profile,
    none of the program's own references is lost, and the handler's are counted
    roughly (some are lost to those windows, or a few gained)."""
    quiet_prof = str(tmp_path / "quiet.lomas")
    r = run([CRASH, "quiet"], {"LOMAS_OUTPUT": quiet_prof, "LOMAS_PERIOD": "20"})
    assert "calls 0" in r.stdout
    quiet = export_json(quiet_prof)["threads"][0]["refs"]
    for i in range(2):
        prof = str(tmp_path / f"alarm{i}.lomas")
        r = run([CRASH, "alarm"], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "20"})
        assert r.stderr == ""  # no "cannot write the profile"
        calls = int(r.stdout.split("calls ")[1].split()[0])
        d = export_json(prof)  # the reader checks every sample ends after its start
        refs = d["threads"][0]["refs"]
        assert calls >= 20 and len(d["samples"]) > 100000
        assert quiet < refs <= quiet + 100 * calls, (quiet, refs, calls)


def test_exit_from_another_thread(tmp_path):
    prof = str(tmp_path / "p.lomas")
    r = run([CRASH, "thread"], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "50"}, check=False)
    assert r.returncode == 3
    d = export_json(prof)
    assert d["meta"]["ended"] == "exit"
    assert len(d["threads"]) == 2
    assert d["threads"][0]["refs"] >= 225000 and d["threads"][1]["refs"] >= 45000


def test_filter_range_test(tmp_path):
    """lomas__range_clean (what a versioned loop asks at its entry when its
    ranges span more than 8 blocks) agrees with a byte-by-byte scan of the
    filter, for ranges inside it, across its end, and longer than it."""
    prof = str(tmp_path / "p.lomas")
    r = run([CRASH, "range"], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "1000000000000"},
            check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "range: 0 wrong" in r.stdout


def test_thread_with_the_smallest_stack(tmp_path):
    """The runtime's TLS (the filter) must not make pthread_create fail for a program that
    asks for a PTHREAD_STACK_MIN stack: the thread runs and gets its own clock."""
    prof = str(tmp_path / "p.lomas")
    r = run([CRASH, "small"], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "50"}, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "small thread" in r.stdout
    d = export_json(prof)
    assert len(d["threads"]) == 2
    assert d["threads"][1]["refs"] >= 2000 * 4


@pytest.mark.skipif(SANITIZERS, reason="liblomas-inline.so is sanitized in this build")
def test_shared_library_without_lto(tmp_path):
    """liblomas-inline.so: the hooks as real calls (no LTO). The clock counts every
    reference the program's trace holds, and the program's output is unchanged."""
    exe, trace, prof = (str(tmp_path / n) for n in ("crash-shared", "t.trace", "p.lomas"))
    libdir = os.path.join(BUILD, "lib", "inline")
    subprocess.run(["clang-16", "-O2", "-fsanitize-coverage=func,trace-loads,trace-stores",
                    os.path.join(SOURCE, "tests", "inline", "crash.c"), "-o", exe,
                    "-fno-sanitize-link-runtime", "-L" + libdir, "-llomas-inline",
                    "-Wl,-rpath," + libdir, "-pthread"],
                   check=True, capture_output=True, text=True)
    r = run([exe, "ok"], {"LOMAS_TRACE": trace, "LOMAS_OUTPUT": prof, "LOMAS_PERIOD": "50"})
    assert r.stdout == run([exe, "ok"], {"LOMAS_OUTPUT": "/nonexistent-dir/p.lomas"}).stdout
    with open(trace) as f:
        nrefs = sum(1 for _ in f)
    d = export_json(prof)
    assert nrefs > 100000
    assert sum(t["refs"] for t in d["threads"]) == nrefs
    assert len(d["samples"]) > nrefs // 50 // 2


def pkg_config(*args):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(BUILD, "meson-uninstalled"))
    return subprocess.run(["pkg-config"] + list(args), env=env, capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.mark.skipif(SANITIZERS or not PASS, reason="sanitized build, or no pass plugin "
                    "(sanitizer coverage instruments 1 to 16 bytes only)")
def test_wide_vector_accesses_count(tmp_path):
    """32- and 64-byte vector accesses (an -mavx2 or -march=native build's
    vector code) are one reference each, not dropped: the program's 1024
    32-byte stores and 512 64-byte loads per round, counted in the full
    trace by size, and the clock's reference count agrees."""
    exe, prof, trace = (str(tmp_path / n) for n in ("wide", "w.lomas", "w.trace"))
    subprocess.run(["clang-16", "-O2"] + pkg_config("--cflags", "lomas-inline") +
                   [os.path.join(SOURCE, "tests", "inline", "wide.c"), "-o", exe] +
                   pkg_config("--libs", "lomas-inline"), check=True, capture_output=True,
                   text=True)
    rounds = 6
    r = run([exe, str(rounds)], {"LOMAS_OUTPUT": prof, "LOMAS_TRACE": trace,
                                 "LOMAS_PERIOD": "50"})
    assert r.stdout.startswith(f"wide {rounds} ")
    sizes = {}
    with open(trace) as f:
        for line in f:
            size = int(line.rsplit(",", 1)[1])
            sizes[(line.split()[0], size)] = sizes.get((line.split()[0], size), 0) + 1
    assert sizes.get(("S", 32), 0) == 1024 * rounds, sizes
    assert sizes.get(("L", 64), 0) == 512 * rounds, sizes
    refs = sum(t["refs"] for t in export_json(prof)["threads"])
    assert refs == sum(sizes.values()), (refs, sizes)
    assert refs <= 1536 * rounds + 16, sizes


@pytest.mark.skipif(SANITIZERS, reason="liblomas is sanitized in this build")
def test_pkg_config_recipe_and_explicit_region(tmp_path):
    """clang-16 -O2 $(pkg-config --cflags ...) prog.c $(pkg-config --libs ...) is all it
    takes, from the build tree; a harness with start/stop writes nothing at exit."""
    exe = str(tmp_path / "harness")
    cflags = pkg_config("--cflags", "lomas-inline", "lomas")
    libs = pkg_config("--libs", "lomas-inline", "lomas")
    if PASS:
        assert "-fpass-plugin=" + PASS in cflags
        assert "-flto" not in cflags + libs
    else:
        assert "-fsanitize-coverage=func,trace-loads,trace-stores" in cflags
    subprocess.run(["clang-16", "-O2"] + cflags +
                   [os.path.join(SOURCE, "tests", "inline", "harness.c"), "-o", exe] + libs,
                   check=True, capture_output=True, text=True)
    r = run([exe], {"LD_LIBRARY_PATH": BUILD}, cwd=str(tmp_path))
    assert "harness ok" in r.stdout, r.stdout + r.stderr
    assert [f for f in os.listdir(tmp_path) if f.endswith(".lomas")] == []
    # The same program with LOMAS_OUTPUT set writes the region's profile at exit?
    # No: the region ended with lomas_inline_stop, so there is nothing left to write.
    r = run([exe], {"LD_LIBRARY_PATH": BUILD, "LOMAS_OUTPUT": str(tmp_path / "x.lomas")})
    assert not os.path.exists(tmp_path / "x.lomas")
