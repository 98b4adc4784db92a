"""Profile.hot_pcs and lomas.plot: the ctypes view of lomas_profile_hot_pcs
(layouts checked against a C compiler), its records against exact counts
of a stream the test builds, and the matplotlib helper (skipped, with the
reason, where python3-matplotlib is not installed)."""

import os

import pytest

import lomas
from layout import check_layouts

SOURCE_ROOT = os.environ.get("LOMAS_SOURCE_ROOT",
                             os.path.join(os.path.dirname(__file__), "..", ".."))

LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "lomas/lomas.h"
#define F(T, f) printf("%s %s %zu\n", #T, #f, offsetof(T, f));
int main(void)
{
	printf("lomas_hot_pc - %zu\n", sizeof(lomas_hot_pc));
	printf("lomas_hot_info - %zu\n", sizeof(lomas_hot_info));
	printf("lomas_hot_frame - %zu\n", sizeof(lomas_hot_frame));
	F(lomas_hot_pc, size) F(lomas_hot_pc, reserved)
	F(lomas_hot_pc, pc) F(lomas_hot_pc, misses) F(lomas_hot_pc, unseen_misses)
	F(lomas_hot_pc, refs) F(lomas_hot_pc, miss_ratio) F(lomas_hot_pc, share)
	F(lomas_hot_pc, samples_started) F(lomas_hot_pc, samples_ended)
	F(lomas_hot_pc, delinquent) F(lomas_hot_pc, sym) F(lomas_hot_pc, sym_detail)
	F(lomas_hot_pc, module) F(lomas_hot_pc, module_offset) F(lomas_hot_pc, function)
	F(lomas_hot_pc, file) F(lomas_hot_pc, line) F(lomas_hot_pc, column)
	F(lomas_hot_pc, inlined)
	F(lomas_hot_info, size) F(lomas_hot_info, cache_bytes) F(lomas_hot_info, line_bytes) F(lomas_hot_info, policy)
	F(lomas_hot_info, flags) F(lomas_hot_info, count) F(lomas_hot_info, delinquent)
	F(lomas_hot_info, misses) F(lomas_hot_info, refs) F(lomas_hot_info, has_maps)
	F(lomas_hot_info, cover90)
	F(lomas_hot_frame, function) F(lomas_hot_frame, file) F(lomas_hot_frame, line)
	F(lomas_hot_frame, column)
	return 0;
}
"""


def test_layouts_match_c(tmp_path):
    types = {"lomas_hot_pc": lomas._CHotPC, "lomas_hot_info": lomas._CHotInfo,
             "lomas_hot_frame": lomas._CHotFrame}
    assert check_layouts(tmp_path, SOURCE_ROOT, LAYOUT_C, types) == 3 + 20 + 11 + 4


STREAM_PC, HOT_PC = 0x401000, 0x402000


def stream_profile(steps=20000):
    """Each step: two loads of an 8-line hot set, one of a 4096-line cycle.
    Exactly: in an LRU cache of 64..4095 lines every stream load misses
    (its line was last touched 4096 steps ago) and no hot load does."""
    t = lomas.Trace(period=3, seed=5)
    for s in range(steps):
        t.ref(0x100000 + 64 * (s % 8), pc=HOT_PC)
        t.ref(0x100000 + 64 * ((s + 3) % 8), pc=HOT_PC)
        t.ref(0x800000 + 64 * (s % 4096), pc=STREAM_PC)
    return t.finish()


def test_hot_pcs_records():
    steps = 20000
    with stream_profile(steps) as p:
        h = p.hot_pcs(64 * 1024, policy="lru")
        assert isinstance(h, lomas.HotPCs)
        assert h.policy == "lru" and h.cache_bytes == 65536 and h.line_bytes == 64
        assert not h.cold and not h.has_maps
        assert h.refs == 3 * steps
        assert h.misses / h.refs == pytest.approx(p.miss_ratio(65536, policy="lru"), rel=1e-9)
        assert [r.pc for r in h] == [STREAM_PC, HOT_PC]
        top, hot = h
        assert h.delinquent == 1 and h.cover90 == 1 and top.delinquent and not hot.delinquent
        # Exactly: the stream's reuses (all but its first 4096 loads) all miss.
        assert top.misses == pytest.approx(steps - 4096, rel=0.1)
        assert top.share == pytest.approx(1.0)
        assert top.refs == pytest.approx(steps, rel=0.1)
        assert top.miss_ratio == pytest.approx((steps - 4096) / steps, abs=0.1)
        assert hot.misses == 0 and hot.refs == pytest.approx(2 * steps, rel=0.1)
        # No maps (a trace fed by hand): said so, not guessed.
        assert top.sym == "no_maps" and top.function is None and top.file is None
        assert top.module is None and top.line is None and top.inlined == []
        assert "no memory maps" in top.sym_detail
        bare = p.hot_pcs(64 * 1024, policy="lru", symbols=False)
        assert [r.sym for r in bare] == ["none", "none"]
        assert [r.misses for r in bare] == [r.misses for r in h]


def test_hot_pcs_errors():
    with stream_profile(2000) as p:
        with pytest.raises(lomas.LomasError) as e:
            p.hot_pcs(100)
        assert e.value.status == lomas.EINVAL and "100 bytes" in e.value.message
        with pytest.raises(ValueError):
            p.hot_pcs(4096, policy="fifo")
        with pytest.raises(ValueError):
            p.hot_pcs(-1)
        with pytest.raises(ValueError):
            p.hot_pcs(4096, debug_path="a\0b")
    with lomas.Profile.new() as empty:
        with pytest.raises(lomas.LomasError) as e:
            empty.hot_pcs(4096)
        assert e.value.status == lomas.ERANGE


def _have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def test_plot_without_matplotlib_says_what_to_install():
    if _have_matplotlib():
        pytest.skip("python3-matplotlib is installed: its absence cannot be tested here")
    with stream_profile(2000) as p:
        with pytest.raises(ImportError) as e:
            lomas.plot(p)
    assert "python3-matplotlib" in str(e.value)


@pytest.mark.skipif(not _have_matplotlib(), reason="python3-matplotlib is not installed")
def test_plot_draws_the_curves(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    with stream_profile(6000) as p, stream_profile(3000) as q:
        sizes = lomas.default_sizes(64)
        ax = lomas.plot([p, q], labels=["long", "short"])
        lines = [ln for ln in ax.get_lines() if ln.get_label() in
                 ("long, random", "long, LRU", "short, random", "short, LRU")]
        assert len(lines) == 4
        want = {"long, random": p.curve(sizes, policy="random"),
                "long, LRU": p.curve(sizes, policy="lru"),
                "short, random": q.curve(sizes, policy="random"),
                "short, LRU": q.curve(sizes, policy="lru")}
        for ln in lines:
            assert list(ln.get_xdata()) == sizes
            assert list(ln.get_ydata()) == pytest.approx(want[ln.get_label()])
        assert ax.get_xscale() == "log"
        ax.figure.savefig(tmp_path / "g.png")
        assert (tmp_path / "g.png").stat().st_size > 1000
