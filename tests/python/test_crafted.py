"""Crafted profiles through the bindings: numbers a hostile file can carry.

No model call may return NaN or infinity. Sample weights outside
2**-64..2**64 (weights near the largest double made the model's sums
infinite and its curves NaN) and threads whose references add up past
2**64-1 are refused at load (EFORMAT) and at merge (ERANGE); everything the
library accepts models to finite ratios in [0, 1]. The files are built by
craft.py from the format document, not by the library.
"""

import math
import sys

import pytest

import lomas
from craft import NONE, U64_MAX, sample, uniform, write_profile

DBL_MAX = sys.float_info.max


def all_ratios(p):
    out = []
    for policy in ("random", "lru"):
        for cold in (False, True):
            out += p.curve(policy=policy, cold=cold)  # 81 sizes: the grid solver
            out += p.curve([4096, 65536, 1 << 20], policy=policy, cold=cold)  # exact roots
            out.append(p.miss_ratio(32768, policy=policy, cold=cold))
    return out


def assert_sane(p):
    r = all_ratios(p)
    bad = [x for x in r if not (math.isfinite(x) and 0.0 <= x <= 1.0)]
    assert not bad, bad[:5]
    assert math.isfinite(p.info.sample_weight)


@pytest.mark.parametrize("weight", [DBL_MAX, DBL_MAX / 3, 1e300, 2.0 ** 64 * 2, math.inf, math.nan,
                                    0.0, -1.0, 2.0 ** -65, 5e-324])
def test_weights_out_of_range_are_refused(tmp_path, weight):
    path = write_profile(tmp_path / "w.lomas", *uniform(50, weight)[:3])
    with pytest.raises(lomas.LomasError) as e:
        lomas.Profile.load(path)
    assert e.value.status == lomas.EFORMAT
    assert "weight" in e.value.message and "offset" in e.value.message, e.value.message


@pytest.mark.parametrize("weight", [2.0 ** 64, 2.0 ** 63 * 1.5, 2.0 ** -64, 1.0, 1e-10])
def test_extreme_weights_in_range_model_finite(tmp_path, weight):
    path = write_profile(tmp_path / "w.lomas", *uniform(4000, weight)[:3])
    with lomas.Profile.load(path) as p:
        assert p.info.sample_weight == pytest.approx(4000 * weight)
        assert_sane(p)


def test_many_merges_of_the_largest_weights_stay_finite(tmp_path):
    # 2**64 a sample, 20k samples, merged 16 times: sums near 2**82, far from overflow.
    path = write_profile(tmp_path / "big.lomas", *uniform(20000, 2.0 ** 64, refs=1 << 40)[:3])
    with lomas.Profile.load(path) as p:
        for _ in range(16):
            with lomas.Profile.load(path) as q:
                p.merge(q)
        assert p.info.samples == 17 * 20000
        assert p.info.sample_weight == pytest.approx(17 * 20000 * 2.0 ** 64)
        assert_sane(p)


def test_clocks_near_2_64(tmp_path):
    top = U64_MAX
    threads = [(7, top)]
    windows = [(0, top // 2, 0), (top // 2, top - top // 2, 0)]
    samples = [
        sample(top - 10, top - 1, 1.0, window=1),  # distance 8, ends at the last clock
        sample(top - 3, NONE, 1.0, window=1, state=2),  # censored... at NONE: after start
        sample(5, top - 1, 2.0 ** 64, window=0),  # distance near 2**64
        sample(0, 1, 2.0 ** 64, window=0),  # distance 0
        sample(top - 1, NONE, 1.0, window=1, state=1),
    ]
    path = write_profile(tmp_path / "top.lomas", threads, windows, samples)
    with lomas.Profile.load(path) as p:
        info = p.info
        assert info.refs == top and info.samples == 5
        assert_sane(p)


def test_references_that_overflow_are_refused(tmp_path):
    top = U64_MAX
    path = write_profile(tmp_path / "two.lomas", [(1, top), (2, 1)], [(0, 1, 0)],
                         [sample(0, 1, 1.0)])
    with pytest.raises(lomas.LomasError) as e:
        lomas.Profile.load(path)
    assert e.value.status == lomas.EFORMAT
    assert "2^64" in e.value.message, e.value.message
    # Each on its own is fine; merged they would not add up.
    a = write_profile(tmp_path / "a.lomas", [(1, top - 5)], [(0, 1, 0)], [sample(0, 1, 1.0)])
    with lomas.Profile.load(a) as p, lomas.Profile.load(a) as q:
        before = p.info
        with pytest.raises(lomas.LomasError) as e:
            p.merge(q)
        assert e.value.status == lomas.ERANGE
        assert p.info == before  # nothing merged
        assert_sane(p)
