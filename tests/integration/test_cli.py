"""End-to-end tests of lomas-demo: real programs traced with Valgrind lackey,
sampled by the trace clock, modelled, and compared with an exact simulation.

Environment (set by tests/meson.build):
  LOMAS_DEMO         the lomas-demo executable
  LOMAS_EXACTSIM     the exact fully associative simulator (tests/tools)
  LOMAS_SOURCE_ROOT  the source tree (headers, workload sources)
  LOMAS_WORKLOADS    the build folder of examples/workloads (optional: without
                     it, e.g. in sanitizer builds, the workloads are compiled
                     here, uninstrumented, so that Valgrind can run them)

All generated files live under pytest's tmp_path.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess

import pytest

DEMO = os.environ.get("LOMAS_DEMO")
EXACTSIM = os.environ.get("LOMAS_EXACTSIM")
SOURCE_ROOT = os.environ.get("LOMAS_SOURCE_ROOT",
                             os.path.join(os.path.dirname(__file__), "..", ".."))
WORKLOADS = os.environ.get("LOMAS_WORKLOADS")
VALGRIND = shutil.which("valgrind")

pytestmark = pytest.mark.skipif(not DEMO, reason="LOMAS_DEMO is not set")

KIB, MIB = 1 << 10, 1 << 20
MAE_LIMIT = 0.01  # one percentage point (docs/benchmarks.md)
PERIOD = 200


def demo(*args, stdin=None, input=None, timeout=120):
    return subprocess.run([DEMO, *map(str, args)], stdin=stdin, input=input,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(r, cmd, *needles):
    """r failed with status 2 and one line 'lomas-demo: cmd: ...' naming needles."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("lomas-demo: %s: " % cmd), lines[0]
    for n in needles:
        assert re.search(n, lines[0]), (n, lines[0])
    return lines[0]


def parse_csv(text):
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


# ------------------------------------------------------------ the traces

def _workload(name, tmp_dir):
    if WORKLOADS:
        return os.path.join(WORKLOADS, name)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no LOMAS_WORKLOADS and no C compiler")
    exe = os.path.join(tmp_dir, name)
    if not os.path.exists(exe):
        src = os.path.join(SOURCE_ROOT, "examples", "workloads", name + ".c")
        subprocess.run([cc, "-O2", "-o", exe, src], check=True)
    return exe


class Traces:
    """Lackey traces of a few small programs, made once per module on demand."""

    def __init__(self, tmp_dir):
        self.dir = tmp_dir
        self.cache = {}

    def commands(self, name):
        small = os.path.join(self.dir, "small.txt")
        if not os.path.exists(small):
            with open(small, "w") as f:
                f.write("".join("%d lines of text to compress\n" % i for i in range(1500)))
        return {
            # ~2M data references: column walks of B.
            "matmul": [_workload("matmul", self.dir), "80"],
            # 4096 x 64 B nodes (256 KiB) in random order: an LRU cliff there.
            "chase": [_workload("chase", self.dir), "4096", "800000"],
            "ls": ["/bin/ls", "/"],
            "gzip": ["/bin/gzip", "-c", small],
        }[name]

    def get(self, name):
        if name in self.cache:
            return self.cache[name]
        if not VALGRIND:
            pytest.skip("valgrind is not installed")
        cmd = self.commands(name)
        if not os.path.exists(cmd[0]):
            pytest.skip("%s is not there" % cmd[0])
        path = os.path.join(self.dir, name + ".lackey")
        r = subprocess.run([VALGRIND, "--tool=lackey", "--trace-mem=yes",
                            "--log-file=" + path, *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        assert r.returncode == 0, r.stderr
        self.cache[name] = path
        return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return Traces(str(tmp_path_factory.mktemp("traces")))


@pytest.fixture(scope="module")
def chase_profile(traces, tmp_path_factory):
    """The chase trace analyzed at period 200, and the analyze summary line."""
    out = str(tmp_path_factory.mktemp("profiles") / "chase.lomas")
    r = demo("analyze", "--lackey", traces.get("chase"), "-o", out, "--period", PERIOD)
    assert r.returncode == 0, r.stderr
    return out, r.stderr


def samples_of(summary):
    m = re.search(r"(\d+) samples", summary)
    assert m, summary
    return int(m.group(1))


# ------------------------------------------------------ accuracy, end to end

@pytest.mark.parametrize("name", ["matmul", "chase", "ls", "gzip"])
def test_curve_matches_exact_simulation(name, traces, tmp_path):
    if not EXACTSIM:
        pytest.skip("LOMAS_EXACTSIM is not set")
    trace = traces.get(name)
    prof = tmp_path / (name + ".lomas")
    r = demo("analyze", "--lackey", trace, "-o", prof, "--period", PERIOD, "--seed", 1)
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.splitlines()) == 1 and samples_of(r.stderr) > 500, r.stderr

    r = demo("curve", prof)
    assert r.returncode == 0, r.stderr
    header, rows = parse_csv(r.stdout)
    assert header == ["size_bytes", "random", "lru"]
    sizes = [int(row[0]) for row in rows if 4 * KIB <= int(row[0]) <= 64 * MIB]
    assert len(sizes) == 4 * 14 + 1
    model = {int(row[0]): (float(row[1]), float(row[2])) for row in rows}

    r = subprocess.run([EXACTSIM, "--line-size", "64", "--sizes", ",".join(map(str, sizes)),
                        "--seed", "1", "--runs", "3", trace],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    header, rows = parse_csv(r.stdout)
    assert header == ["size_bytes", "random", "lru"]
    exact = {int(row[0]): (float(row[1]), float(row[2])) for row in rows}
    assert sorted(exact) == sizes

    mae = [sum(abs(model[s][k] - exact[s][k]) for s in sizes) / len(sizes) for k in (0, 1)]
    worst = [max(abs(model[s][k] - exact[s][k]) for s in sizes) for k in (0, 1)]
    print("\n%-7s MAE 4K-64M: random %.3f pp, lru %.3f pp (max %.2f / %.2f pp); "
          "exact at 4K %.3f/%.3f" % (name, 100 * mae[0], 100 * mae[1], 100 * worst[0],
                                     100 * worst[1], exact[sizes[0]][0], exact[sizes[0]][1]))
    assert mae[0] <= MAE_LIMIT, "random replacement MAE %.4f" % mae[0]
    assert mae[1] <= MAE_LIMIT, "LRU MAE %.4f" % mae[1]


def test_analyze_from_stdin_equals_file(traces, chase_profile, tmp_path):
    prof, _ = chase_profile
    piped = tmp_path / "stdin.lomas"
    with open(traces.get("chase")) as f:
        r = demo("analyze", "--lackey", "-", "-o", piped, "--period", PERIOD, stdin=f)
    assert r.returncode == 0, r.stderr
    a, b = demo("curve", prof), demo("curve", piped)
    assert a.returncode == 0 and b.returncode == 0
    assert a.stdout == b.stdout  # same seed, same references: the same profile
    ea, eb = demo("export", "--csv", prof), demo("export", "--csv", piped)
    assert ea.stdout == eb.stdout


def test_chase_lru_cliff(chase_profile):
    # 4096 nodes of one line each, visited in a random cycle: LRU misses on
    # every warm visit below 256 KiB of cache and hits above it.
    prof, _ = chase_profile
    r = demo("curve", "--policy", "lru", "--sizes", "128K,192K,320K,512K", prof)
    assert r.returncode == 0, r.stderr
    header, rows = parse_csv(r.stdout)
    assert header == ["size_bytes", "lru"]
    lru = {int(row[0]): float(row[1]) for row in rows}
    assert lru[128 * KIB] > lru[512 * KIB] + 0.3
    assert lru[192 * KIB] > lru[320 * KIB] + 0.3


# --------------------------------------------------------------- output forms

def test_curve_csv_and_json_agree(chase_profile):
    prof, _ = chase_profile
    r = demo("curve", prof)
    assert r.returncode == 0 and r.stderr == ""
    header, rows = parse_csv(r.stdout)
    assert r.stdout.splitlines()[0] == "size_bytes,random,lru"
    assert len(rows) == 81
    assert int(rows[0][0]) == KIB and int(rows[-1][0]) == 1 << 30
    for row in rows:
        assert re.fullmatch(r"[01]\.\d{6}", row[1]) and re.fullmatch(r"[01]\.\d{6}", row[2])
    j = demo("curve", "--json", prof)
    assert j.returncode == 0, j.stderr
    doc = json.loads(j.stdout)
    assert isinstance(doc, list) and len(doc) == 81
    for obj, row in zip(doc, rows):
        assert set(obj) == {"size_bytes", "random", "lru"}
        assert obj["size_bytes"] == int(row[0])
        assert abs(obj["random"] - float(row[1])) <= 5e-7 + 1e-12  # half the last printed digit; a tie is exact
        assert abs(obj["lru"] - float(row[2])) <= 5e-7 + 1e-12


def test_curve_sizes_with_suffixes_and_cold(chase_profile):
    prof, _ = chase_profile
    r = demo("curve", "--sizes", "32K,1MiB,2M,4096,1G", prof)
    assert r.returncode == 0, r.stderr
    _, rows = parse_csv(r.stdout)
    assert [int(row[0]) for row in rows] == [32768, 1 << 20, 2 << 20, 4096, 1 << 30]
    warm = [float(row[2]) for row in rows]
    c = demo("curve", "--cold", "--sizes", "32K,1MiB,2M,4096,1G", prof)
    assert c.returncode == 0, c.stderr
    cold = [float(row[2]) for row in parse_csv(c.stdout)[1]]
    # Cold misses only add: at 1 GiB nothing but cold misses are left.
    assert all(cv >= wv - 1e-6 for cv, wv in zip(cold, warm))
    assert cold[-1] > warm[-1]
    r = demo("curve", "--policy", "random", "--sizes", "64K", prof)
    assert r.stdout.splitlines()[0] == "size_bytes,random" and r.returncode == 0


def test_export_json_and_csv(chase_profile):
    prof, summary = chase_profile
    n = samples_of(summary)
    j = demo("export", "--json", prof)
    assert j.returncode == 0, j.stderr
    doc = json.loads(j.stdout)
    assert isinstance(doc, dict)
    lists = [v for v in doc.values() if isinstance(v, list) and len(v) == n]
    assert lists, "no top-level list with the %d samples in %s" % (n, list(doc))
    c = demo("export", "--csv", prof)
    assert c.returncode == 0, c.stderr
    assert len(c.stdout.splitlines()) == n + 1
    r = demo("export", prof)
    one_line_error(r, "export", "--json")
    r = demo("export", "--json", "--csv", prof)
    one_line_error(r, "export")


def test_report_draws_a_graph(chase_profile):
    prof, summary = chase_profile
    r = demo("report", prof)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "\x1b" not in out  # not a terminal: no colours
    assert "working-set graph" in out
    assert re.search(r"samples\s+%d" % samples_of(summary), out)
    assert "references" in out and "line size" in out
    graph = [ln for ln in out.splitlines() if re.match(r"\s*(\d+\.\d+%)? *\|", ln)]
    assert len(graph) >= 10
    assert sum(ln.count("o") + ln.count("#") for ln in graph) >= 40  # LRU curve
    assert sum(ln.count("*") + ln.count("#") for ln in graph) >= 40  # random curve
    assert re.search(r"1K\s+4K\s+16K", out) and "1G" in out
    for ln in out.splitlines():
        assert len(ln) <= 80, ln
    if os.path.exists("/sys/devices/system/cpu/cpu0/cache/index0/size"):
        assert "L1d" in out or "L2" in out
    colored = demo("report", "--color", prof)
    assert "\x1b[" in colored.stdout


def test_compare(chase_profile, traces, tmp_path):
    prof, _ = chase_profile
    other = tmp_path / "other.lomas"
    r = demo("analyze", "--lackey", traces.get("chase"), "-o", other, "--period", 400,
             "--seed", 9)
    assert r.returncode == 0, r.stderr
    r = demo("compare", "--csv", prof, other)
    assert r.returncode == 0, r.stderr
    header, rows = parse_csv(r.stdout)
    assert header[:5] == ["size_bytes", "random_a", "random_b", "lru_a", "lru_b"]
    assert len(rows) == 81
    a = {int(x[0]): x for x in parse_csv(demo("curve", prof).stdout)[1]}
    b = {int(x[0]): x for x in parse_csv(demo("curve", other).stdout)[1]}
    for row in rows:
        s = int(row[0])
        assert row[1] == a[s][1] and row[2] == b[s][1]
        assert row[3] == a[s][2] and row[4] == b[s][2]
    same = demo("compare", "--csv", "--sizes", "4K,64K", prof, prof)
    for row in parse_csv(same.stdout)[1]:
        assert row[1] == row[2] and row[3] == row[4]
    one_line_error(demo("compare", prof), "compare")


# -------------------------------------------------- exit statuses, messages

def test_version_and_help():
    with open(os.path.join(SOURCE_ROOT, "include", "lomas", "lomas.h")) as f:
        version = re.search(r'LOMAS_VERSION_STRING "([^"]+)"', f.read()).group(1)
    r = demo("--version")
    assert r.returncode == 0 and version in r.stdout
    for cmd in ("analyze", "curve", "report", "export", "compare", "record"):
        for args in (("help", cmd), (cmd, "-h"), (cmd, "--help")):
            r = demo(*args)
            assert r.returncode == 0, (args, r.stderr)
            assert r.stdout.startswith("usage: lomas-demo " + cmd), args
    r = demo("help")
    assert r.returncode == 0 and "analyze" in r.stdout
    r = demo()
    assert r.returncode == 2 and "usage" in r.stderr
    r = demo("frobnicate")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1


def test_record_exit_statuses(tmp_path):
    # Like env and timeout: 127 not found, 126 cannot run, 125 lomas itself.
    r = demo("record", "-o", tmp_path / "x.lomas", "--", "/no/such/program")
    assert r.returncode == 127, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "/no/such/program" in r.stderr
    r = demo("record", "-o", tmp_path / "x.lomas", "--", "no-such-command-lomas")
    assert r.returncode == 127 and "not found" in r.stderr
    plain = tmp_path / "not-executable"
    plain.write_text("data")
    r = demo("record", "-o", tmp_path / "x.lomas", "--", plain)
    assert r.returncode == 126 and len(r.stderr.splitlines()) == 1
    r = demo("record", "-o", tmp_path / "x.lomas", "--", tmp_path)
    assert r.returncode == 126
    r = demo("record", "-o", tmp_path / "x.lomas")
    assert r.returncode == 125 and len(r.stderr.splitlines()) == 1
    r = demo("record", "--period", "0", "--", "/bin/true")
    assert r.returncode == 125 and "period" in r.stderr
    r = demo("record", "--clock", "pmu", "-o", tmp_path / "x.lomas", "--", "/bin/true")
    assert r.returncode == 125 and len(r.stderr.splitlines()) == 1
    assert "pmu" in r.stderr
    assert not (tmp_path / "x.lomas").exists()


def test_missing_files(tmp_path):
    """One line naming the file once (the library's message names it)."""
    missing = str(tmp_path / "missing.lomas")
    for cmd in ("curve", "report"):
        line = one_line_error(demo(cmd, missing), cmd, "missing.lomas")
        assert line.count("missing.lomas") == 1, line
    line = one_line_error(demo("export", "--json", missing), "export", "missing.lomas")
    assert line.count("missing.lomas") == 1, line
    line = one_line_error(demo("analyze", "--lackey", tmp_path / "no.trace", "-o",
                               tmp_path / "x.lomas"), "analyze", "no.trace")
    assert line.count("no.trace") == 1, line
    assert not (tmp_path / "x.lomas").exists()


def test_corrupt_profile(chase_profile, tmp_path):
    prof, _ = chase_profile
    with open(prof, "rb") as f:
        data = f.read()
    bad = tmp_path / "truncated.lomas"
    bad.write_bytes(data[:len(data) * 2 // 3])
    for cmd in ("curve", "report", "compare"):
        args = [bad, prof] if cmd == "compare" else [bad]
        one_line_error(demo(cmd, *args), cmd, "truncated.lomas", "offset")


def test_malformed_trace(tmp_path):
    trace = tmp_path / "bad.lackey"
    trace.write_text("==1== Lackey\nI  04000000,3\n L 1fff000708,8\n S 1fff0007zz,8\n"
                     " L 1fff000708,8\n")
    line = one_line_error(demo("analyze", "--lackey", trace, "-o", tmp_path / "o.lomas",
                               "--period", 1), "analyze")
    assert re.search(r"line\D{0,3}4\b|:4:", line), line  # "line 4" or "FILE:4:"
    assert not (tmp_path / "o.lomas").exists()


def test_bad_options(chase_profile, traces, tmp_path):
    prof, _ = chase_profile
    trace = traces.get("chase")
    out = tmp_path / "o.lomas"
    one_line_error(demo("analyze", "--lackey", trace, "-o", out, "--period", 0),
                   "analyze", "--period")
    one_line_error(demo("analyze", "--lackey", trace, "-o", out, "--period", "x"),
                   "analyze", "--period")
    one_line_error(demo("analyze", "--lackey", trace, "-o", out, "--line-size", 100),
                   "analyze", "--line-size")
    one_line_error(demo("analyze", "--lackey", trace), "analyze", "-o")
    one_line_error(demo("analyze", "-o", out), "analyze", "--lackey")
    one_line_error(demo("analyze", "--lackey", trace, "-o"), "analyze", "-o")
    one_line_error(demo("analyze", "--lackey", trace, "-o", out, "--bogus"), "analyze",
                   "--bogus")
    assert not out.exists()
    one_line_error(demo("curve", "--sizes", "1000", prof), "curve", "--sizes", "1000")
    one_line_error(demo("curve", "--sizes", "32X", prof), "curve", "--sizes")
    one_line_error(demo("curve", "--sizes", "4K,,8K", prof), "curve", "--sizes")
    one_line_error(demo("curve", "--sizes", "0", prof), "curve", "--sizes")
    one_line_error(demo("curve", "--policy", "fifo", prof), "curve", "--policy")
    one_line_error(demo("curve", "-q", prof), "curve", "-q")
    one_line_error(demo("curve", "--sizes"), "curve", "--sizes")
    one_line_error(demo("curve"), "curve")
    one_line_error(demo("curve", prof, prof), "curve")
    one_line_error(demo("report", "--wide", prof), "report", "--wide")


def test_closed_stdout_does_not_crash(chase_profile):
    prof, _ = chase_profile
    for args in (("export", "--csv", prof), ("curve", prof), ("report", prof)):
        p = subprocess.Popen([DEMO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()  # no reader: writes fail with EPIPE
        _, err = p.communicate(timeout=60)
        assert p.returncode in (0, 2), (args, p.returncode)  # never killed by a signal
        assert len(err.splitlines()) <= 1, err
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            r = subprocess.run([DEMO, "export", "--csv", prof], stdout=full,
                               stderr=subprocess.PIPE, text=True, timeout=60)
        one_line_error(r, "export", "(?i)no space left|write")


def test_curve_ci_columns(chase_profile):
    """--ci adds random_lo,random_hi,lru_lo,lru_hi (and the JSON fields);
    the estimates are those without --ci, inside their bounds; the same
    seed gives the same bounds."""
    prof, _ = chase_profile
    sizes = "16K,64K,256K,1M"
    plain = parse_csv(demo("curve", "--sizes", sizes, prof).stdout)[1]
    r = demo("curve", "--ci", "--ci-resamples", "40", "--seed", "5", "--sizes", sizes, prof)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "size_bytes,random,lru,random_lo,random_hi,lru_lo,lru_hi"
    rows = parse_csv(r.stdout)[1]
    for row, base in zip(rows, plain):
        rnd, lru, rlo, rhi, llo, lhi = map(float, row[1:])
        assert row[:3] == base
        assert rlo <= rnd <= rhi and llo <= lru <= lhi
    again = demo("curve", "--ci", "--ci-resamples", "40", "--seed", "5", "--sizes", sizes, prof)
    assert again.stdout == r.stdout
    j = demo("curve", "--ci", "--ci-resamples", "40", "--json", "--policy", "lru", "--sizes",
             sizes, prof)
    assert j.returncode == 0, j.stderr
    for obj in json.loads(j.stdout):
        assert set(obj) == {"size_bytes", "lru", "lru_lo", "lru_hi"}
    bad = demo("curve", "--ci-level", "1.5", prof)
    assert bad.returncode == 2 and "--ci-level" in bad.stderr


def test_report_shades_confidence_bands(chase_profile):
    prof, _ = chase_profile
    r = demo("report", "--ci", "--no-color", prof)
    assert r.returncode == 0, r.stderr
    assert "95% confidence band" in r.stdout
    graph = r.stdout.split("working-set graph", 1)[1]
    assert "." in graph.split("bytes", 1)[0]
    n = demo("report", "--no-ci", "--no-color", prof)
    assert n.returncode == 0 and "confidence band" not in n.stdout
