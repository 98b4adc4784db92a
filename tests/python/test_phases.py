"""Profile.phases() and Profile.phase_profile() on a two-phase trace fed
here (a 128-line array swept by one loop, random loads over 16384 lines by
another, in turns of 10 windows), against the generator's own phases and
an exact LRU simulation of each phase's own references written here."""
import collections
import random

import pytest

import lomas

LINE = 64
WINDOW = 4096
SEG = 10 * WINDOW
ROUNDS = 4


def lru_misses(addrs, lines):
    """Non-cold misses per reference of a fully associative LRU cache of `lines`."""
    stack, seen, misses = collections.OrderedDict(), set(), 0
    for a in addrs:
        ln = a // LINE
        if ln in stack:
            stack.move_to_end(ln)
            continue
        misses += ln in seen
        seen.add(ln)
        stack[ln] = True
        if len(stack) > lines:
            stack.popitem(last=False)
    return misses / len(addrs)


@pytest.fixture(scope="module")
def run():
    rng = random.Random(5)
    own = ([], [])
    t = lomas.Trace(period=16, window=WINDOW, seed=3)
    pos = 0
    for _ in range(ROUNDS):
        a = [0x100000 + LINE * ((pos + i) % 128) for i in range(SEG)]
        pos += SEG
        t.refs(a, pc=0x401000)
        own[0].extend(a)
        b = [0x4000000 + LINE * rng.randrange(16384) for _ in range(SEG)]
        t.refs(b, pc=0x402000)
        own[1].extend(b)
    return t.finish(), own


def test_phases_records(run):
    p, own = run
    ph = p.phases()
    assert len(ph) == p.info.windows == 2 * ROUNDS * SEG // WINDOW
    assert all(isinstance(w, lomas.PhaseWindow) for w in ph)
    assert [w.window for w in ph] == list(range(len(ph)))
    assert sum(w.refs for w in ph) == 2 * ROUNDS * SEG
    truth = [(w.start_ref // SEG) % 2 for w in ph]
    ids = {w.phase for w in ph} - {0}
    assert len(ids) == 2
    votes = {k: collections.Counter(t for w, t in zip(ph, truth) if w.phase == k) for k in ids}
    mapping = {k: c.most_common(1)[0][0] for k, c in votes.items()}
    assert sorted(mapping.values()) == [0, 1]
    right = sum(mapping[w.phase] == t for w, t in zip(ph, truth) if w.phase)
    assert right >= 0.9 * sum(1 for w in ph if w.phase)
    # A stricter threshold than any cosine can reach: no phase forms.
    assert len(p.phases(threshold=1.0, transition_threshold=1000)) == len(ph)
    assert {w.phase for w in p.phases(transition_threshold=1000)} == {0}


def test_phase_profile_curves(run):
    p, own = run
    ph = p.phases()
    first = {}
    for w in ph:
        first.setdefault(w.phase, (w.start_ref // SEG) % 2)
    sizes = [4 << 10, 16 << 10, 256 << 10]
    for k in (1, 2):
        g = first[k]
        with p.phase_profile(k) as sub:
            got = [r for r in sub.curve(sizes, policy="lru")]
            assert sub.info.windows == sum(1 for w in ph if w.phase == k)
        for s, m in zip(sizes, got):
            exact = lru_misses(own[g], s // LINE)
            assert abs(m - exact) <= 0.015, (k, g, s, m, exact)


def test_phases_bad_arguments(run):
    p, _ = run
    with pytest.raises(ValueError):
        p.phases(threshold=2)
    with pytest.raises(ValueError):
        p.phase_profile(99)
    with pytest.raises(lomas.LomasError):
        p.phases(buckets=1 << 30)
