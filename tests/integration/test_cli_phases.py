"""lomas-demo phases (CSV window,thread,start_ref,refs,phase) and
curve --phase K on a lackey-format trace written here: a small array
(64 lines, 4 KiB) and a large one (8192 lines, 512 KiB) swept in turns,
each turn 8 windows long. The expected phases and curves follow from the
trace itself: the small array's phase fits an 8 KiB cache, the large
one's misses at every touch there, and both fit 1 MiB.

Environment (set by tests/meson.build): LOMAS_DEMO, the lomas-demo executable.
"""

import csv
import io
import os
import subprocess

import pytest

DEMO = os.environ.get("LOMAS_DEMO")
pytestmark = pytest.mark.skipif(not DEMO, reason="LOMAS_DEMO is not set")

WINDOW = 5120
SEG = 8 * WINDOW
ROUNDS = 4


def demo(*args, input=None, timeout=120):
    return subprocess.run([DEMO, *map(str, args)], input=input, capture_output=True,
                          text=True, timeout=timeout)


def rows_of(text):
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


@pytest.fixture(scope="module")
def phased(tmp_path_factory):
    out = []
    small = large = 0
    for _ in range(ROUNDS):
        for _ in range(SEG):
            out.append(" L %x,8\n" % (0x10000000 + 64 * (small % 64)))
            small += 1
        for _ in range(SEG):
            out.append(" L %x,8\n" % (0x20000000 + 64 * (large % 8192)))
            large += 1
    path = tmp_path_factory.mktemp("phases") / "phased.lomas"
    r = demo("analyze", "--lackey", "-", "-o", path, "--period", 20, "--window", WINDOW,
             input="".join(out))
    assert r.returncode == 0, r.stderr
    return path


def truth(start_ref):
    return 0 if (start_ref // SEG) % 2 == 0 else 1


def test_phases_csv(phased):
    r = demo("phases", phased)
    assert r.returncode == 0, r.stderr
    header, rows = rows_of(r.stdout)
    assert header == ["window", "thread", "start_ref", "refs", "phase"]
    assert len(rows) == 2 * ROUNDS * SEG // WINDOW
    vals = [[int(x) for x in row] for row in rows]
    assert [v[0] for v in vals] == list(range(len(vals)))
    assert sum(v[3] for v in vals) == 2 * ROUNDS * SEG
    # Two phases found, one per array, for >= 90 % of the non-transition windows.
    ids = {v[4] for v in vals} - {0}
    assert len(ids) == 2, ids
    votes = {k: [0, 0] for k in ids}
    for v in vals:
        if v[4]:
            votes[v[4]][truth(v[2])] += 1
    mapping = {k: 0 if c[0] >= c[1] else 1 for k, c in votes.items()}
    assert sorted(mapping.values()) == [0, 1]
    right = sum(max(c) for c in votes.values())
    assert right >= 0.9 * sum(sum(c) for c in votes.values())
    assert sum(1 for v in vals if v[4] == 0) <= 4


def test_curve_phase(phased):
    r = demo("phases", phased)
    _, rows = rows_of(r.stdout)
    first = {}
    for row in rows:
        first.setdefault(int(row[4]), truth(int(row[2])))
    for k in (1, 2):
        c = demo("curve", "--phase", k, "--policy", "lru", "--sizes", "8K,1M", phased)
        assert c.returncode == 0, c.stderr
        header, crows = rows_of(c.stdout)
        assert header == ["size_bytes", "lru"]
        at8k, at1m = float(crows[0][1]), float(crows[1][1])
        if first[k] == 0:
            assert at8k < 0.02, (k, at8k)
        else:
            # Every touch misses but the first of each line (cold, not counted).
            exact = (ROUNDS * SEG - 8192) / (ROUNDS * SEG)
            assert abs(at8k - exact) < 0.015, (k, at8k, exact)
        assert at1m < 0.02
    # The whole run sits in between: neither phase's curve.
    whole = demo("curve", "--policy", "lru", "--sizes", "8K", phased)
    assert 0.3 < float(rows_of(whole.stdout)[1][0][1]) < 0.7


def test_phase_errors(phased):
    bad = demo("curve", "--phase", 9, phased)
    assert bad.returncode == 2 and "phase" in bad.stderr
    assert len(bad.stderr.splitlines()) == 1
    for args in (["--threshold", "1.5"], ["--buckets", "0"], ["--transition", "x"]):
        r = demo("phases", *args, phased)
        assert r.returncode == 2 and args[0] in r.stderr, r.stderr
    assert demo("phases").returncode == 2


def test_report_timeline(phased):
    r = demo("report", "--no-ci", "--no-color", phased)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("phases ("))
    assert lines[at].startswith("phases (2 found")
    strip = lines[at + 1].split("|")[1]
    assert len(strip) == 64 and set(strip) <= {".", "1", "2"}
    # The strip alternates as the trace does: 2 x ROUNDS runs of one phase.
    runs = [c for i, c in enumerate(strip) if c != "." and (i == 0 or strip[i - 1] != c)]
    assert len(runs) == 2 * ROUNDS and runs[0] != runs[1], strip
    assert all(runs[i] == runs[i % 2] for i in range(len(runs))), strip
