"""Tests of the ctypes bindings (bindings/python/lomas) against liblomas.

Ground truth is computed here, independently of the library: exact forward
reuse distances and an exact LRU simulation of the same reference streams.
"""

import collections
import ctypes
import os
import random
import re

import pytest

import lomas
from layout import check_layouts

LINE = 64
SOURCE_ROOT = os.environ.get("LOMAS_SOURCE_ROOT",
                             os.path.join(os.path.dirname(__file__), "..", ".."))


# ----------------------------------------------------------------- helpers

def feed(addrs, thread=0, **options):
    """A Profile from the trace clock fed addrs (loads by one thread)."""
    options.setdefault("period", 1)
    t = lomas.Trace(**options)
    t.refs(addrs, thread=thread)
    return t.finish()


def cyclic(k_lines, passes, base=0x10000):
    return [base + LINE * (i % k_lines) for i in range(k_lines * passes)]


def exact_forward_distances(addrs, line=LINE):
    """For each reference, the references strictly between it and the next
    touch of its line (None if never touched again)."""
    nxt = {}
    out = [None] * len(addrs)
    for i in range(len(addrs) - 1, -1, -1):
        ln = addrs[i] // line
        if ln in nxt:
            out[i] = nxt[ln] - i - 1
        nxt[ln] = i
    return out


def exact_lru_miss_ratio(addrs, cache_lines, line=LINE, cold=False):
    """Fully associative LRU: misses per reference (cold misses excluded
    unless cold)."""
    stack = collections.OrderedDict()
    seen = set()
    misses = 0
    for a in addrs:
        ln = a // line
        if ln in stack:
            stack.move_to_end(ln)
            continue
        if ln in seen or cold:
            misses += 1
        seen.add(ln)
        stack[ln] = True
        if len(stack) > cache_lines:
            stack.popitem(last=False)
    return misses / len(addrs)


@pytest.fixture
def mixed():
    """A reproducible stream with short and long reuses over 300 lines."""
    rng = random.Random(7)
    addrs = []
    for _ in range(6000):
        if rng.random() < 0.6:
            addrs.append(0x40000 + LINE * rng.randrange(16) + rng.randrange(LINE))
        else:
            addrs.append(0x80000 + LINE * rng.randrange(300))
    return addrs


# ----------------------------------------------------------- basic surface

def test_version_matches_header():
    with open(os.path.join(SOURCE_ROOT, "include", "lomas", "lomas.h")) as f:
        header = f.read()
    m = re.search(r'#define LOMAS_VERSION_STRING "([^"]+)"', header)
    assert m
    assert lomas.version() == m.group(1)
    major, minor, patch = (int(x) for x in m.group(1).split("."))
    assert lomas.version_number() == major * 10000 + minor * 100 + patch


LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "lomas/lomas.h"
#define F(T, f) printf("%s %s %zu\n", #T, #f, offsetof(T, f));
int main(void)
{
	printf("lomas_sample - %zu\n", sizeof(lomas_sample));
	printf("lomas_window - %zu\n", sizeof(lomas_window));
	printf("lomas_thread - %zu\n", sizeof(lomas_thread));
	printf("lomas_profile_info - %zu\n", sizeof(lomas_profile_info));
	F(lomas_sample, start) F(lomas_sample, end) F(lomas_sample, addr)
	F(lomas_sample, start_pc) F(lomas_sample, end_pc) F(lomas_sample, weight)
	F(lomas_sample, thread) F(lomas_sample, window) F(lomas_sample, kind)
	F(lomas_sample, state) F(lomas_sample, flags) F(lomas_sample, reserved)
	F(lomas_window, start) F(lomas_window, refs) F(lomas_window, thread)
	F(lomas_window, reserved) F(lomas_thread, tid) F(lomas_thread, refs)
	F(lomas_profile_info, size) F(lomas_profile_info, line_bytes)
	F(lomas_profile_info, samples)
	F(lomas_profile_info, reused) F(lomas_profile_info, dangling)
	F(lomas_profile_info, censored) F(lomas_profile_info, windows)
	F(lomas_profile_info, threads) F(lomas_profile_info, refs)
	F(lomas_profile_info, sample_weight)
	return 0;
}
"""


def test_struct_layouts_match_c(tmp_path):
    types = {"lomas_sample": lomas._CSample, "lomas_window": lomas._CWindow,
             "lomas_thread": lomas._CThread, "lomas_profile_info": lomas._CProfileInfo}
    assert check_layouts(tmp_path, SOURCE_ROOT, LAYOUT_C, types) == 4 + 12 + 4 + 2 + 10


def test_default_sizes():
    sizes = lomas.default_sizes(64)
    assert len(sizes) == 81
    assert sizes[0] == 1024 and sizes[-1] == 1 << 30
    for k, s in enumerate(sizes):
        assert s % 64 == 0
        assert abs(s - 1024 * 2 ** (k / 4)) <= 64
    assert sizes == sorted(set(sizes))
    big = lomas.default_sizes(4096)
    assert all(s % 4096 == 0 for s in big)


# ------------------------------------------------------------------- errors

def test_config_set_get_and_errors():
    c = lomas.Config(period=500, seed=9)
    assert c.get("period") == "500"
    assert c.get("seed") == "9"
    c.set("line_size", 128)
    assert c.get("line_size") == "128"
    c.set("period", "auto")
    assert c.get("period") == "auto"
    with pytest.raises(lomas.LomasError) as e:
        c.set("period", 0)
    assert e.value.status == lomas.EINVAL
    assert "period" in e.value.message
    with pytest.raises(lomas.LomasError) as e:
        c.set("line_size", 100)
    assert e.value.status == lomas.EINVAL and "line_size" in e.value.message
    with pytest.raises(lomas.LomasError) as e:
        c.set("no_such_key", "1")
    assert e.value.status == lomas.EINVAL and "no_such_key" in e.value.message
    with pytest.raises(lomas.LomasError) as e:
        c.get("no_such_key")
    assert e.value.status == lomas.ENOENT
    assert e.value.name == lomas.strerror(lomas.ENOENT)
    c.close()
    c.close()  # idempotent
    with pytest.raises(ValueError):
        c.get("period")


def test_load_missing_file(tmp_path):
    path = tmp_path / "nope.lomas"
    with pytest.raises(lomas.LomasError) as e:
        lomas.Profile.load(path)
    assert e.value.status == lomas.ENOENT
    assert "nope.lomas" in e.value.message


def test_load_corrupt_file(tmp_path, mixed):
    good = tmp_path / "good.lomas"
    with feed(mixed[:500]) as p:
        p.save(good)
    data = good.read_bytes()
    for cut in (0, 7, len(data) // 2, len(data) - 1):
        bad = tmp_path / ("cut%d.lomas" % cut)
        bad.write_bytes(data[:cut])
        with pytest.raises(lomas.LomasError) as e:
            lomas.Profile.load(bad)
        assert e.value.status == lomas.EFORMAT, cut
        assert e.value.message
    junk = tmp_path / "junk.lomas"
    junk.write_bytes(b"this is not a profile at all" * 10)
    with pytest.raises(lomas.LomasError) as e:
        lomas.Profile.load(junk)
    assert e.value.status == lomas.EFORMAT


def test_bad_sizes_raise(mixed):
    with feed(mixed) as p:
        for size in (0, 1000, 64 * 3 + 1):
            with pytest.raises(lomas.LomasError) as e:
                p.miss_ratio(size)
            assert e.value.status == lomas.EINVAL, size
        with pytest.raises(lomas.LomasError) as e:
            p.curve([4096, 1000, 8192], policy="lru")
        assert e.value.status == lomas.EINVAL
        with pytest.raises(lomas.LomasError) as e:
            p.miss_ratio(4096, line_bytes=128)  # not the profile's line size
        assert e.value.status == lomas.EINVAL
        with pytest.raises(ValueError):
            p.miss_ratio(4096, policy="fifo")
        with pytest.raises(ValueError):
            p.miss_ratio(-64)


def test_closed_objects_raise(mixed):
    p = feed(mixed[:100])
    p.close()
    assert p.closed
    with pytest.raises(ValueError):
        p.info
    t = lomas.Trace(period=1)
    t.ref(0x1000)
    t.finish().close()
    with pytest.raises(ValueError):
        t.ref(0x1000)
    with pytest.raises(ValueError):
        lomas.Trace(config=lomas.Config(), period=3)


def test_malformed_lackey_names_line(tmp_path):
    path = tmp_path / "bad.trace"
    path.write_text(" L 00001000,8\n S 00001040,8\n L zzzz,8\n")
    with pytest.raises(lomas.LomasError) as e:
        lomas.analyze_lackey(path, period=1)
    assert e.value.status == lomas.EFORMAT
    assert re.search(r"\b3\b", e.value.message), e.value.message


# ------------------------------------------------------ profile contents

def test_info_and_samples_at_period_1(mixed):
    dist = exact_forward_distances(mixed)
    with feed(mixed, period=1) as p:
        info = p.info
        samples = p.samples()
    n = len(mixed)
    lines = {a // LINE for a in mixed}
    assert info.line_bytes == LINE
    assert info.refs == n
    assert info.threads == 1
    assert info.samples == n  # period 1: every reference is a sample
    assert info.dangling == len(lines)  # each line's last touch
    assert info.censored == 0
    assert info.reused == n - len(lines)
    assert info.reused + info.dangling + info.censored == info.samples
    assert info.sample_weight == pytest.approx(n)
    assert info.windows >= 1
    assert len(samples) == n
    by_start = sorted(samples, key=lambda s: s.start)
    for i, s in enumerate(by_start):
        assert s.start == i
        assert s.addr == mixed[i]
        assert s.thread == 0 and s.kind == lomas.REF_LOAD
        if dist[i] is None:
            assert s.state == lomas.SAMPLE_DANGLING and s.end == 2 ** 64 - 1
        else:
            assert s.state == lomas.SAMPLE_REUSED
            assert s.end - s.start - 1 == dist[i]


def test_threads_counted_separately():
    t = lomas.Trace(period=1)
    for i in range(300):
        t.ref(0x1000 + LINE * (i % 10), thread=11)
        if i % 3 == 0:
            t.ref(0x9000 + LINE * (i % 4), thread=22, kind="store")
    with t.finish() as p:
        info = p.info
        threads = sorted(p.threads())
        samples = p.samples()
    assert info.threads == 2
    assert info.refs == 400
    assert sorted(th.refs for th in threads) == [100, 300]
    assert len({th.tid for th in threads}) == 2
    stores = [s for s in samples if s.kind == lomas.REF_STORE]
    assert len(stores) == 100


def test_save_load_round_trip(tmp_path, mixed):
    path = tmp_path / "p.lomas"
    with feed(mixed, period=7, seed=3) as p:
        p.meta_set("command", "python test")
        info, samples, meta = p.info, p.samples(), p.meta
        windows, threads = p.windows(), p.threads()
        curve = p.curve(policy="lru")
        p.save(path)
    assert info.samples > 300  # period 7 over 6000 references
    with lomas.Profile.load(str(path)) as q:
        assert q.info == info
        assert q.samples() == samples
        assert q.windows() == windows
        assert q.threads() == threads
        assert q.meta == meta
        assert q.meta_get("command") == "python test"
        assert q.curve(policy="lru") == curve
        with pytest.raises(lomas.LomasError) as e:
            q.meta_get("no such key")
        assert e.value.status == lomas.ENOENT


def test_same_seed_same_profile(mixed):
    with feed(mixed, period=10, seed=5) as a, feed(mixed, period=10, seed=5) as b:
        assert a.samples() == b.samples()
    with feed(mixed, period=10, seed=5) as a, feed(mixed, period=10, seed=6) as b:
        assert a.samples() != b.samples()


def test_merge_adds_everything(mixed):
    with feed(mixed[:3000], period=5) as a, feed(mixed[3000:], period=5, seed=2) as b:
        ia, ib = a.info, b.info
        a.merge(b)
        m = a.info
    assert m.samples == ia.samples + ib.samples
    assert m.refs == ia.refs + ib.refs
    assert m.threads == ia.threads + ib.threads
    assert m.windows == ia.windows + ib.windows
    with feed(mixed[:100]) as a, lomas.Profile.new(128) as other:
        with pytest.raises(lomas.LomasError) as e:
            a.merge(other)  # different line sizes
        assert e.value.status == lomas.EINVAL


# ------------------------------------------------------------------ model

def test_curve_equals_miss_ratio_per_size(mixed):
    sizes = [64, 1024, 4096, 8192, 12800, 20480, 1 << 20]
    with feed(mixed, period=3) as p:
        for policy in ("random", "lru"):
            for cold in (False, True):
                curve = p.curve(sizes, policy=policy, cold=cold)
                assert len(curve) == len(sizes)
                for s, r in zip(sizes, curve):
                    # The root finder stops within 1e-10 (docs/model.md).
                    assert r == pytest.approx(p.miss_ratio(s, policy, cold), abs=1e-8)
                    assert 0.0 <= r <= 1.0
        lru = p.curve(sizes, policy="lru")
        assert all(x >= y - 1e-12 for x, y in zip(lru, lru[1:]))
        assert p.curve([], policy="lru") == []
        default = p.curve(policy="random")
        assert len(default) == len(lomas.default_sizes(LINE))


@pytest.mark.parametrize("k_lines", [16, 100])
def test_cyclic_trace_lru_cliff(k_lines):
    passes = 60
    addrs = cyclic(k_lines, passes)
    with feed(addrs, period=1) as p:
        for lines in (1, k_lines // 2, k_lines - 1, k_lines, k_lines + 1, 2 * k_lines, 4096):
            exact = exact_lru_miss_ratio(addrs, lines)
            model = p.miss_ratio(lines * LINE, policy="lru")
            if lines < k_lines:
                assert exact == pytest.approx(1 - 1 / passes)  # all but the first pass miss
            else:
                assert exact == 0
            assert model == pytest.approx(exact, abs=1e-3), lines
            cold_exact = exact_lru_miss_ratio(addrs, lines, cold=True)
            cold_model = p.miss_ratio(lines * LINE, policy="lru", cold=True)
            assert cold_model == pytest.approx(cold_exact, abs=1e-3), lines


def test_random_replacement_bounds():
    # A cycle over K lines: a cache of at least K lines never misses under any
    # policy; a 1-line cache misses on every warm reference.
    k_lines, passes = 32, 50
    addrs = cyclic(k_lines, passes)
    with feed(addrs, period=1) as p:
        assert p.miss_ratio(k_lines * LINE * 4, policy="random") == pytest.approx(0, abs=1e-6)
        assert p.miss_ratio(LINE, policy="random") == pytest.approx(1 - 1 / passes, abs=1e-3)
        mid = p.miss_ratio(k_lines // 2 * LINE, policy="random")
        assert 0.05 < mid < 1 - 1 / passes


def test_analyze_lackey_counts(tmp_path):
    rng = random.Random(3)
    lines, n = [], 0
    lines.append("==1== Lackey, an example Valgrind tool")
    for i in range(2000):
        kind = "L" if rng.random() < 0.7 else "S"
        lines.append(" %s %08x,8" % (kind, 0x5000 + 8 * rng.randrange(512)))
        n += 1
    path = tmp_path / "t.trace"
    path.write_text("\n".join(lines) + "\n")
    with lomas.analyze_lackey(path, period=1, line_bytes=128) as p:
        info = p.info
    assert info.refs == n
    assert info.samples == n
    assert info.line_bytes == 128


# ---------------------------------------------- arguments C cannot hold

def test_nul_in_strings_is_refused(tmp_path, mixed):
    # A C string ends at its first NUL: "a.lomas\0.txt" would be "a.lomas".
    cut = str(tmp_path / "a.lomas") + "\0.txt"
    with pytest.raises(ValueError, match="null"):
        lomas.Profile.load(cut)
    with pytest.raises(ValueError, match="null"):
        lomas.analyze_lackey(cut, period=1)
    with feed(mixed[:200]) as p:
        with pytest.raises(ValueError, match="null"):
            p.save(cut)
        assert not (tmp_path / "a.lomas").exists()
        with pytest.raises(ValueError, match="null"):
            p.save(os.fsencode(cut))
        with pytest.raises(ValueError, match="null"):
            p.meta_set("key\0hidden", "v")
        with pytest.raises(ValueError, match="null"):
            p.meta_set("key", "value\0hidden")
        with pytest.raises(ValueError, match="null"):
            p.meta_get("clock\0")
        assert "key" not in p.meta
    with lomas.Config() as c:
        with pytest.raises(ValueError, match="null"):
            c.set("period\0x", 5)
        with pytest.raises(ValueError, match="null"):
            c.set("period", "5\0" + "0")
        assert c.get("period") == "auto"
    with pytest.raises(ValueError, match="null"):
        lomas.Trace(period="1\0" + "00")


def test_integers_out_of_range_are_refused_not_wrapped(mixed):
    # Each of these used to reach C wrapped to 32 or 64 bits.
    for bad in (2 ** 33 + 64, 2 ** 32 + 64, -64, 2 ** 64):
        with pytest.raises(ValueError):
            lomas.Profile.new(bad)
    for bad in (64.0, "64", None, True):
        with pytest.raises(TypeError):
            lomas.Profile.new(bad)
    for bad in (2 ** 40, 2 ** 32 + 64, -1):
        with pytest.raises(ValueError):
            lomas.default_sizes(bad)
    with feed(mixed[:500]) as p:
        for bad in (2 ** 40, 2 ** 32 + 64, -64):
            with pytest.raises(ValueError):
                p.miss_ratio(4096, line_bytes=bad)
            with pytest.raises(ValueError):
                p.curve([4096], line_bytes=bad)
        for bad in (-1, 2 ** 64, 2 ** 64 + 4096):
            with pytest.raises(ValueError):
                p.miss_ratio(bad)
            with pytest.raises(ValueError):
                p.curve([4096, bad])
        with pytest.raises(TypeError):
            p.miss_ratio(4096.0)
        for bad in (True, 2, -1, "fifo", None, 0.0):
            with pytest.raises(ValueError):
                p.curve([4096], policy=bad)
    with pytest.raises(ValueError):
        lomas.strerror(2 ** 40)
    assert lomas.strerror(lomas.EIO) == "input/output error"


def test_trace_arguments_are_checked():
    t = lomas.Trace(period=1)
    for kw in ({"addr": -1}, {"addr": 2 ** 64}, {"addr": 0x10, "thread": -1},
               {"addr": 0x10, "thread": 2 ** 64}, {"addr": 0x10, "pc": -5},
               {"addr": 0x10, "pc": 2 ** 70}):
        with pytest.raises(ValueError):
            t.ref(**kw)
    for kind in ("bogus", "LOAD", 2, -1, 2 ** 32, True, None):
        with pytest.raises(ValueError):
            t.ref(0x10, kind=kind)
    with pytest.raises(TypeError):
        t.ref(16.0)
    with pytest.raises(ValueError):
        t.refs([0x10, 0x20, -0x30])
    with pytest.raises(ValueError):
        t.refs([0x10], kind="bogus")
    t.ref(0x10, kind="store")
    t.ref(2 ** 64 - 1, thread=2 ** 64 - 1, pc=2 ** 64 - 1, kind=lomas.REF_LOAD)
    with t.finish() as p:
        info = p.info
    # Only the references that were valid reached the clock: 0x10 and 0x20, then two more.
    assert info.refs == 4
    assert info.threads == 2


def test_profile_from_a_handle_is_refused():
    # A Profile over an arbitrary pointer made the library read it (SIGSEGV).
    for h in (12345, 0, None, ctypes.c_void_p(12345), "x"):
        with pytest.raises(TypeError):
            lomas.Profile(h)
    with pytest.raises(TypeError):
        lomas.Profile()


def test_foreign_and_closed_objects(tmp_path, mixed):
    a, b = feed(mixed[:300]), feed(mixed[300:600])
    with pytest.raises(TypeError):
        a.merge("b.lomas")
    with pytest.raises(TypeError):
        a.merge(lomas.Config())
    with pytest.raises(lomas.LomasError) as e:
        a.merge(a)
    assert e.value.status == lomas.EINVAL
    b.close()
    with pytest.raises(ValueError):
        a.merge(b)
    a.close()
    a.close()  # twice is fine
    path = tmp_path / "x.lomas"
    for call in (lambda: a.info, lambda: a.meta, lambda: a.meta_get("clock"),
                 lambda: a.meta_set("k", "v"), lambda: a.samples(), lambda: a.windows(),
                 lambda: a.threads(), lambda: a.miss_ratio(4096), lambda: a.curve([4096]),
                 lambda: a.save(path), lambda: b.merge(a)):
        with pytest.raises(ValueError):
            call()
    assert not path.exists()
    assert repr(a) == "<lomas.Profile closed>"
    cfg = lomas.Config(period=1)
    cfg.close()
    for call in (lambda: cfg.set("period", 2), lambda: cfg.get("period"),
                 lambda: lomas.Trace(config=cfg), lambda: lomas.analyze_lackey(path, config=cfg)):
        with pytest.raises(ValueError):
            call()
    for bad in ("period=1", {"period": 1}, 5):
        with pytest.raises(TypeError):
            lomas.Trace(config=bad)
        with pytest.raises(TypeError):
            lomas.analyze_lackey(path, config=bad)
    t = lomas.Trace(period=1)
    t.ref(0x40)
    t.finish().close()
    for call in (lambda: t.ref(0x40), lambda: t.refs([0x40]), lambda: t.finish()):
        with pytest.raises(ValueError):
            call()


def test_error_message_is_cleared_by_a_later_success(tmp_path, mixed):
    with pytest.raises(lomas.LomasError):
        lomas.Profile.load(tmp_path / "missing.lomas")
    assert lomas._lomas_error_message() != b""
    with feed(mixed[:200]) as p:  # Trace new, ref, finish: each succeeds
        assert lomas._lomas_error_message() == b""
        with pytest.raises(lomas.LomasError):
            p.meta_get("no such key")
        p.info
        assert lomas._lomas_error_message() == b""


# -------------------------------------------------------- confidence intervals

def test_curve_ci(mixed):
    """ci=True: (ratio, lo, hi) per size, the ratio that of curve(),
    lo <= ratio <= hi, deterministic for a seed, wider at a higher level."""
    with feed(mixed, period=5, seed=3) as p:
        sizes = [1024, 4096, 16384]
        for policy in ("random", "lru"):
            plain = p.curve(sizes, policy=policy)
            ci = p.curve(sizes, policy=policy, ci=True, resamples=60, seed=9)
            assert [r for r, _, _ in ci] == plain
            assert all(lo <= r <= hi for r, lo, hi in ci)
            assert ci == p.curve(sizes, policy=policy, ci=True, resamples=60, seed=9)
            narrow = p.curve(sizes, policy=policy, ci=True, level=0.5, resamples=60, seed=9)
            assert all(n[1] >= w[1] and n[2] <= w[2] for n, w in zip(narrow, ci))
        with pytest.raises(ValueError):
            p.curve(sizes, ci=True, level=1.5)
        with pytest.raises(ValueError):
            p.curve(sizes, ci=True, resamples=1)
