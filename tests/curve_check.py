"""A profile's miss-ratio curve against exact simulation, for the Python tests
of the live clocks (tests/inline, tests/dbi).

The ground truth is exactsim (tests/tools: exact fully associative simulation,
no liblomas code) over the full trace of the same run; the model's curve is
`lomas-demo curve` of the profile. Both are read at the same sizes, 4 KiB to
64 MiB in quarter octaves, and compared per policy (random, then LRU).

A test imports it after putting tests/ on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
"""
import csv
import io
import os
import subprocess

POLICIES = ("random", "lru")


def sizes_4k_64m():
    """4 KiB to 64 MiB, four sizes an octave, each a whole number of 64-byte lines."""
    out, s = [], 4096.0
    while s <= 64 * 2**20 * 1.0001:
        out.append(int(round(s / 64)) * 64)
        s *= 2**0.25
    return out


def curve_csv(text):
    """{size_bytes: (random, lru)} from a `size_bytes,random,lru` CSV."""
    rows = csv.DictReader(io.StringIO(text))
    return {int(r["size_bytes"]): (float(r["random"]), float(r["lru"])) for r in rows}


def _run(argv):
    # No LOMAS_* variable of the test's own environment reaches the tools.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMAS_")}
    r = subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}: {r.stderr}")
    return r.stdout


def exact_curve(exactsim, trace, sizes):
    """exactsim's curve of a lackey-format trace at sizes (random: 3 runs averaged)."""
    return curve_csv(_run([exactsim, "--sizes", ",".join(map(str, sizes)), "--runs", "3",
                           trace]))


def model_curve(demo, profile, sizes):
    """lomas-demo curve of a profile at sizes."""
    return curve_csv(_run([demo, "curve", "--sizes", ",".join(map(str, sizes)), profile]))


def curve_errors(exact, model, sizes):
    """[(mean absolute error, largest error)] per policy (random, lru), as ratios."""
    out = []
    for pol in range(len(POLICIES)):
        e = [abs(exact[s][pol] - model[s][pol]) for s in sizes]
        out.append((sum(e) / len(e), max(e)))
    return out
