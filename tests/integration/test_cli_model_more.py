"""lomas-demo's set-associative curves (curve --ways), time-sharing bounds
(bounds) and phases (phases, curve --phase) on lackey-format traces written
here, with the expected answers worked out from the traces themselves.

Environment (set by tests/meson.build): LOMAS_DEMO, the lomas-demo executable.
"""

import csv
import io
import os
import subprocess

import pytest

DEMO = os.environ.get("LOMAS_DEMO")
pytestmark = pytest.mark.skipif(not DEMO, reason="LOMAS_DEMO is not set")


def demo(*args, input=None, timeout=120):
    return subprocess.run([DEMO, *map(str, args)], input=input, capture_output=True,
                          text=True, timeout=timeout)


def rows_of(text):
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


def profile_of(tmp_path, name, lines, period=50):
    """A profile of the lackey trace `lines` (addresses of 8-byte loads)."""
    trace = "".join(" L %x,8\n" % a for a in lines)
    out = tmp_path / (name + ".lomas")
    r = demo("analyze", "--lackey", "-", "-o", out, "--period", period, input=trace)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def strided(tmp_path_factory):
    # 256 lines 4 KiB apart, walked 400 times: 256 lines fold onto one set
    # of a 64-set cache (4096 / 64 = 64 lines apart: 64 sets divide it).
    tmp = tmp_path_factory.mktemp("assoc")
    return profile_of(tmp, "strided",
                      [0x10000000 + 4096 * i for _ in range(400) for i in range(256)])


def test_curve_ways_shows_conflict_misses(strided):
    r = demo("curve", "--ways", "8", "--sizes", "32K,64K,2M", strided)
    assert r.returncode == 0, r.stderr
    header, rows = rows_of(r.stdout)
    assert header == ["size_bytes", "random", "lru"]
    got = {int(row[0]): (float(row[1]), float(row[2])) for row in rows}
    # 32K and 64K 8-way: 64 and 128 sets; every line in one set (or two):
    # 256 (128) lines in 8 ways miss at every touch under LRU.
    for size in (32768, 65536):
        assert got[size][1] > 0.99, got
        assert got[size][0] > 0.9, got
    # 2M 8-way: 4096 sets, the 256 lines in 64 of them, 4 per set: they fit.
    assert got[2 << 20][1] < 0.01 and got[2 << 20][0] < 0.01, got
    # The fully associative model holds all 256 lines in 32K.
    fa = demo("curve", "--sizes", "32K", strided)
    assert fa.returncode == 0, fa.stderr
    assert float(rows_of(fa.stdout)[1][0][2]) < 0.01
    # --ways 0 is the fully associative curve.
    z = demo("curve", "--ways", "0", "--sizes", "32K", strided)
    assert z.stdout == fa.stdout


def test_curve_ways_default_sizes_and_errors(strided):
    r = demo("curve", "--ways", "12", "--policy", "lru", strided)
    assert r.returncode == 0, r.stderr
    _, rows = rows_of(r.stdout)
    sizes = [int(row[0]) for row in rows]
    assert sizes == sorted(set(sizes)) and all(s % (12 * 64) == 0 for s in sizes)
    bad = demo("curve", "--ways", "12", "--sizes", "32K", strided)
    assert bad.returncode == 2 and "whole number" in bad.stderr
    assert len(bad.stderr.splitlines()) == 1
    ci = demo("curve", "--ways", "8", "--ci", strided)
    assert ci.returncode == 2 and "--ways" in ci.stderr
    neg = demo("curve", "--ways", "-1", strided)
    assert neg.returncode == 2


def test_bounds_refill_cost(strided):
    # A cyclic walk over 256 lines: a 32 KiB LRU cache holds them all, warm
    # it never misses, and a flush costs one miss per line: 256 per quantum.
    r = demo("bounds", "--cache-size", "32K", strided)
    assert r.returncode == 0, r.stderr
    header, rows = rows_of(r.stdout)
    assert header == ["quantum_refs", "lower", "upper"]
    assert len(rows) == 13 and int(rows[0][0]) == 1000
    for q, lo, up in rows:
        q, lo, up = int(q), float(lo), float(up)
        assert lo < 1e-3 and lo <= up
        assert abs(up - 256 / q) <= 0.05 * 256 / q + 2e-6, (q, up)
    one = demo("bounds", "--cache-size", "32K", "--quantum", "5000", strided)
    assert one.returncode == 0, one.stderr
    assert len(rows_of(one.stdout)[1]) == 1


def test_bounds_errors(strided):
    for args, needle in ((["--quantum", "0"], "quantum"),
                         (["--cache-size", "100"], "line size"),
                         (["--cache-size", "abc"], "cache-size")):
        r = demo("bounds", *args, strided)
        assert r.returncode == 2 and needle in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1
    assert demo("bounds", "--cache-size", "32K").returncode == 2
