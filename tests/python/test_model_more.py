"""Profile.curve(..., ways=) and Profile.thrash_bounds() against exact
simulations written here (set-associative LRU; LRU flushed every quantum)."""
import collections

import pytest

import lomas

LINE = 64


def feed(addrs, period=1):
    t = lomas.Trace(period=period)
    t.refs(addrs)
    return t.finish()


def set_assoc_lru(addrs, sets, ways):
    """Non-cold misses per reference of an LRU cache of sets x ways lines."""
    cache = [collections.OrderedDict() for _ in range(sets)]
    seen, misses = set(), 0
    for a in addrs:
        ln = a // LINE
        s = cache[ln % sets]
        if ln in s:
            s.move_to_end(ln)
            continue
        misses += ln in seen
        seen.add(ln)
        s[ln] = True
        if len(s) > ways:
            s.popitem(last=False)
    return misses / len(addrs)


def flushed_lru(addrs, lines, quantum):
    """Misses (cold included) per reference of an LRU cache of `lines`
    emptied every `quantum` references."""
    stack, misses = collections.OrderedDict(), 0
    for i, a in enumerate(addrs):
        if i % quantum == 0:
            stack.clear()
        ln = a // LINE
        if ln in stack:
            stack.move_to_end(ln)
            continue
        misses += 1
        stack[ln] = True
        if len(stack) > lines:
            stack.popitem(last=False)
    return misses / len(addrs)


def test_curve_ways_strided():
    # 48 lines 1 KiB apart, cyclic: 16 lines apart fold onto 4 of 64 sets.
    addrs = [0x100000 + 1024 * (i % 48) for i in range(48 * 400)]
    p = feed(addrs, period=5)
    sizes = [32 << 10, 64 << 10, 256 << 10]
    for ways in (8, 16):
        got = p.curve(sizes, policy="lru", ways=ways)
        for size, r in zip(sizes, got):
            exact = set_assoc_lru(addrs, size // LINE // ways, ways)
            assert abs(r - exact) <= 0.01, (size, ways, r, exact)
    # Fully associative, every size holds the 48 lines.
    assert max(p.curve(sizes, policy="lru")) < 0.01
    assert p.curve(sizes, policy="lru", ways=0) == p.curve(sizes, policy="lru")
    with pytest.raises(ValueError):
        p.curve(sizes, ways=8, ci=True)
    with pytest.raises(lomas.LomasError):
        p.curve([1000 * LINE], ways=16)


def test_thrash_bounds_bracket_flushed_lru():
    import random
    rng = random.Random(3)
    addrs = [LINE * (rng.randrange(200) if rng.random() < 0.8 else 200 + rng.randrange(3000))
             for _ in range(120000)]
    p = feed(addrs, period=4)
    quanta = [500, 5000, 50000]
    lower, upper = p.thrash_bounds(256 * LINE, quanta, cold=True)
    assert len(upper) == 3
    warm = p.miss_ratio(256 * LINE, policy="lru", cold=True)
    assert lower == pytest.approx(warm, rel=1e-12)
    for q, up in zip(quanta, upper):
        exact = flushed_lru(addrs, 256, q)
        assert lower - 0.01 <= exact <= up + 0.01, (q, lower, exact, up)
    lo1, up1 = p.thrash_bounds(256 * LINE, 5000, cold=True)
    assert lo1 == lower and up1 == pytest.approx(upper[1])
    with pytest.raises(lomas.LomasError):
        p.thrash_bounds(256 * LINE, [0])
