"""lomas.plot: working-set graphs with matplotlib (see lomas.plot's docstring)."""

import glob
import math
import os

try:
    import matplotlib.pyplot as _plt
    from matplotlib.ticker import FuncFormatter as _FuncFormatter
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError(
        "lomas.plot needs matplotlib, which is not installed for this Python "
        "(on Debian: apt-get install python3-matplotlib): %s" % _e) from _e

# Okabe & Ito's palette, as lomas-demo plot uses.
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
          "#999999"]


def binary_size(v):
    """'64 KiB' for 65536: the size axis' labels."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    u = 0
    while v >= 1024 and u < len(units) - 1:
        v /= 1024.0
        u += 1
    return ("%.0f %s" if v == int(v) else "%.3g %s") % (v, units[u])


def machine_caches(root="/sys/devices/system/cpu/cpu0/cache"):
    """[(name, bytes)] of this machine's data and unified caches, smallest first."""
    out = {}
    for d in sorted(glob.glob(os.path.join(root, "index*"))):
        try:
            with open(os.path.join(d, "level")) as f:
                level = f.read().strip()
            with open(os.path.join(d, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(d, "size")) as f:
                size = f.read().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        try:
            b = int(size.rstrip("KMG")) * mult
        except ValueError:
            continue
        out.setdefault(b, "L%s%s" % (level, "d" if kind == "Data" else ""))
    return sorted(((n, b) for b, n in out.items()), key=lambda t: t[1])


def _band(profile, sizes, policy, cold):
    """(lo, hi) where the library gives a confidence interval, else None."""
    ci = getattr(profile, "curve_ci", None)
    if ci is None:
        return None
    try:
        return ci(sizes, policy=policy, cold=cold)
    except Exception:  # pragma: no cover - a model without intervals here
        return None


def plot(profiles, sizes=None, policies=("random", "lru"), cold=False, labels=None, ax=None,
         caches=True):
    from . import Profile, default_sizes
    if isinstance(profiles, Profile):
        profiles = [profiles]
    profiles = list(profiles)
    if not profiles:
        raise ValueError("lomas.plot needs at least one profile")
    if labels is None:
        labels = ["profile %d" % (i + 1) if len(profiles) > 1 else "profile"
                  for i in range(len(profiles))]
    if len(labels) != len(profiles):
        raise ValueError("one label per profile")
    for p in policies:
        if p not in ("random", "lru"):
            raise ValueError("policies are 'random' and 'lru', not %r" % (p,))
    if ax is None:
        _fig, ax = _plt.subplots(figsize=(8.8, 5.4))
    line = max(p.info.line_bytes for p in profiles)
    if sizes is None:
        sizes = default_sizes(line)
    sizes = sorted(sizes)
    for i, (p, label) in enumerate(zip(profiles, labels)):
        color = COLORS[i % len(COLORS)]
        for pol in policies:
            ratios = p.curve(sizes, policy=pol, cold=cold)
            ax.plot(sizes, ratios, color=color, linestyle="-" if pol == "random" else "--",
                    linewidth=2, label="%s, %s" % (label, "random" if pol == "random" else "LRU"))
            band = _band(p, sizes, pol, cold)
            if band is not None:
                ax.fill_between(sizes, band[0], band[1], color=color, alpha=0.18, linewidth=0)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(_FuncFormatter(lambda v, _pos: binary_size(v)))
    ax.set_xlim(2 ** math.floor(math.log2(sizes[0])), 2 ** math.ceil(math.log2(sizes[-1])))
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(_FuncFormatter(lambda v, _pos: "%g%%" % (100 * v)))
    ax.set_xlabel("cache size (fully associative, log scale)")
    ax.set_ylabel("miss ratio")
    ax.set_title("Working-set graph (cold misses %s)" % ("included" if cold else "excluded"),
                 pad=18)
    ax.grid(True, color="#dddddd")
    if caches:
        for name, b in machine_caches():
            if sizes[0] <= b <= sizes[-1]:
                ax.axvline(b, color="#777777", linestyle=":", linewidth=1.2)
                ax.annotate("%s %s" % (name, binary_size(b)), (b, 1.0),
                            xycoords=("data", "axes fraction"), ha="center", va="bottom",
                            fontsize=9, color="#555555")
    ax.legend(loc="upper right")
    return ax
