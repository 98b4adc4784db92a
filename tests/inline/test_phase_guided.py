"""Phase-guided sampling (issue 21 item 2) on real programs: the inline clock
(LOMAS_PHASE_GUIDED) and lomas-demo record --phase-guided for the inline and
dbi clocks.

Ground truth is independent of the sampler: exactsim (exact fully
associative simulation, no liblomas code) over the full trace the same
program writes (LOMAS_TRACE), and the reference counts of the runs.
"""
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import curve_check  # noqa: E402  (tests/curve_check.py)

BUILD = os.environ.get("LOMAS_BUILD_ROOT", "build")
WORKLOADS = os.environ.get("LOMAS_WORKLOADS", os.path.join(BUILD, "examples", "workloads"))
DEMO = os.environ.get("LOMAS_DEMO", os.path.join(BUILD, "examples", "lomas-demo", "lomas-demo"))
EXACTSIM = os.environ.get("LOMAS_EXACTSIM", os.path.join(BUILD, "tests", "tools", "exactsim"))
DBI_BUILT = os.environ.get("LOMAS_DBI_TOOL_BUILT", "0") == "1"
SANITIZERS = os.environ.get("LOMAS_SANITIZERS", "0") == "1"

# The phases workload at its defaults: 8 rounds of a 4 MiB sweep and random
# reads of 32 KiB (4.5M references), at a fixed period.
PHASED = ["4194304", "32768", "8"]
PERIOD = "128"
# The same, 16 rounds (8.9M references), for the savings. Phase-guided
# sampling pays a fixed cost, each phase's first min_samples (2000) and the
# windows of 1024 samples its decision lags by, then takes 1/16 of the rest:
# at 8 rounds (34875 samples, a phase 2 windows long, and the
# initialisation a phase of its own) about 7000 full-rate samples and 1700
# more leave 4.5x at best, and 3.2x to 4.1x were seen over seeds and ASLR
# (CI, 2026-11-30: 3.21x); at 16 rounds 5.65x to 6.27x.
PHASED_LONG = ["4194304", "32768", "16"]


def run(argv, env_extra=None, check=True, drop=()):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMAS_") and k not in drop}
    env.update(env_extra or {})
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}: {r.stderr}")
    return r


def export_json(profile):
    return json.loads(run([DEMO, "export", "--json", profile]).stdout)


def errors(prof, exact, sizes):
    """(MAE, largest error) per policy of prof's curve against exact."""
    return curve_check.curve_errors(exact, curve_check.model_curve(DEMO, prof, sizes), sizes)


def inline(w):
    return os.path.join(WORKLOADS, w + "-inline")


def test_phased_program_fewer_samples_curve_within_1pp(tmp_path):
    """The alternating-phase workload (16 rounds): >= 4x fewer samples with
    each of three seeds, each sample's weight its period (x16 at the lower
    rate), and the whole-run curve within 1 pp (mean) of exact simulation,
    both policies (the largest error is printed: at the full rate too it
    passes 5 pp at the cliff of the 32 KiB phase)."""
    trace, p0, p1 = (str(tmp_path / n) for n in ("t.trace", "p0.lomas", "p1.lomas"))
    base = {"LOMAS_PERIOD": PERIOD, "LOMAS_SEED": "1"}
    r0 = run([inline("phases")] + PHASED_LONG, dict(base, LOMAS_OUTPUT=p0, LOMAS_TRACE=trace))
    # Phase-guided runs with three seeds: each is one draw of the samples
    # (one seed's MAE moved from 0.33 to 1.08 pp with the environment, whose
    # size moves the references before main, 2026-11-29); the mean of the
    # three is held to 1 pp, each to 1.5 pp.
    pgs = [str(tmp_path / f"pg{k}.lomas") for k in range(3)]
    for k, prof in enumerate(pgs):
        r1 = run([inline("phases")] + PHASED_LONG,
                 dict(base, LOMAS_OUTPUT=prof, LOMAS_PHASE_GUIDED="1", LOMAS_SEED=str(k + 1)))
        assert r0.stdout == r1.stdout and r1.stderr == ""
    p1 = pgs[0]
    full, pg = export_json(p0), export_json(p1)
    refs = sum(t["refs"] for t in full["threads"])
    assert refs == sum(t["refs"] for t in pg["threads"])
    with open(trace) as f:
        assert refs == sum(1 for _ in f)
    n0, n1 = len(full["samples"]), len(pg["samples"])
    print(f"phases: {refs} references, {n0} samples, phase-guided {n1} ({n0 / n1:.2f}x fewer)")
    assert n0 >= 4 * n1
    weights = {s["weight"] for s in pg["samples"]}
    assert weights == {128.0, 2048.0}
    w = sum(s["weight"] for s in pg["samples"])
    assert abs(w - refs) < 0.03 * refs, (w, refs)
    sizes = curve_check.sizes_4k_64m()
    exact = curve_check.exact_curve(EXACTSIM, trace, sizes)
    for pol, (mae, worst) in zip(curve_check.POLICIES, errors(p0, exact, sizes)):
        print(f"full {pol}: MAE {100 * mae:.3f} pp, largest {100 * worst:.2f} pp")
        assert mae <= 0.01, ("full", pol, mae, worst)
    maes = {pol: [] for pol in curve_check.POLICIES}
    for k, prof in enumerate(pgs):
        nk = len(export_json(prof)["samples"])
        print(f"phase-guided ({k}): {nk} samples ({n0 / nk:.2f}x fewer)")
        assert nk * 4 <= n0
        for pol, (mae, worst) in zip(curve_check.POLICIES, errors(prof, exact, sizes)):
            print(f"phase-guided ({k}) {pol}: MAE {100 * mae:.3f} pp, largest {100 * worst:.2f} pp")
            assert mae <= 0.015, ("phase-guided", k, pol, mae, worst)
            maes[pol].append(mae)
    for pol, m in maes.items():
        assert sum(m) / len(m) <= 0.01, ("phase-guided mean", pol, m)


@pytest.mark.parametrize("w,args,period", [("random", ["262144", "1000000"], "30"),
                                           ("matmul", ["64"], "15")])
def test_non_phased_program_curve_unaffected(w, args, period, tmp_path):
    """A program of one phase: its curve stays within 1 pp of exact with
    phase-guided sampling, as without; LOMAS_PHASE_GUIDED=0 takes exactly the
    samples of a run without the variable."""
    trace, p0, p1, off = (str(tmp_path / n) for n in ("t", "p0.lomas", "p1.lomas", "off.lomas"))
    base = {"LOMAS_PERIOD": period, "LOMAS_SEED": "3"}
    run([inline(w)] + args, dict(base, LOMAS_OUTPUT=p0, LOMAS_TRACE=trace))
    run([inline(w)] + args, dict(base, LOMAS_OUTPUT=p1, LOMAS_PHASE_GUIDED="1"))
    run([inline(w)] + args, dict(base, LOMAS_OUTPUT=off, LOMAS_PHASE_GUIDED="0"))
    plain = run([inline(w)] + args, dict(base, LOMAS_OUTPUT=str(tmp_path / "x.lomas")))
    assert plain.stderr == ""
    key = ("start", "end", "state", "weight")  # (addresses move with ASLR)
    a = sorted(tuple(s[k] for k in key) for s in export_json(str(tmp_path / "x.lomas"))["samples"])
    b = sorted(tuple(s[k] for k in key) for s in export_json(off)["samples"])
    assert a == b and len(a) > 10000
    sizes = curve_check.sizes_4k_64m()
    exact = curve_check.exact_curve(EXACTSIM, trace, sizes)
    n1 = len(export_json(p1)["samples"])
    for name, prof in (("full", p0), ("phase-guided", p1)):
        for pol, (mae, worst) in zip(curve_check.POLICIES, errors(prof, exact, sizes)):
            print(f"{w} {name} ({n1 if prof == p1 else len(a)} samples) {pol}: "
                  f"MAE {100 * mae:.3f} pp, largest {100 * worst:.2f} pp")
            assert mae <= 0.01, (name, pol, mae)


def record_pair(clock, env_extra, tmp_path, trace=None):
    """Samples and references of `record --period 128` without and with
    --phase-guided, both under env_extra; the second writes its full trace
    to trace when given."""
    prog = inline("phases") if clock == "inline" else os.path.join(WORKLOADS, "phases")
    out = {}
    for flag in ([], ["--phase-guided"]):
        prof = str(tmp_path / f"p{len(flag)}.lomas")
        extra = dict(env_extra)
        if trace and flag:
            extra["LOMAS_DBI_TRACE" if clock == "dbi" else "LOMAS_TRACE"] = trace
        # MALLOC_PERTURB_ only as env_extra says (not meson test's own value).
        run([DEMO, "record", "--clock", clock, "--period", PERIOD] + flag +
            ["-o", prof, "--", prog] + PHASED, extra, drop=("MALLOC_PERTURB_",))
        out[len(flag)] = export_json(prof)
    return out, str(tmp_path / "p1.lomas")


def test_record_phase_guided_inline(tmp_path):
    """lomas-demo record --phase-guided reaches the inline clock: fewer
    samples, the same references, weights x16 at the lower rate."""
    out, _ = record_pair("inline", {}, tmp_path)
    refs = [sum(t["refs"] for t in out[k]["threads"]) for k in (0, 1)]
    n = [len(out[k]["samples"]) for k in (0, 1)]
    print(f"inline: {refs[0]} references, {n[0]} samples, --phase-guided {n[1]}")
    assert refs[0] == refs[1]
    assert n[0] >= 3 * n[1]
    assert {s["weight"] for s in out[0]["samples"]} == {128.0}
    assert {s["weight"] for s in out[1]["samples"]} == {128.0, 2048.0}


@pytest.mark.parametrize("perturb", [None, "1", "77", "200"])
def test_record_phase_guided_dbi(perturb, tmp_path):
    """lomas-demo record --phase-guided under the dbi clock, with
    MALLOC_PERTURB_ set here rather than left to meson test's random value:
    with it glibc fills the workload's 4 MiB array with a byte memset (4.2M
    more references, the phase boundaries off the window grid), the case
    that cut the ratio to 1.9-3.5x before the tracker's lenient, mixture and
    early-return rules (docs/model.md, "Phase-guided sampling"). >= 4x fewer
    samples (4.98-6.61x measured over these values and three environment
    sizes), the same references, weights x16 at the lower rate, and the
    whole-run curve within 1 pp (mean) of exactsim over the phase-guided
    run's own full trace, both policies."""
    if not DBI_BUILT or SANITIZERS:
        pytest.skip("the dbi tool is not built (or a sanitized build)")
    env = {"MALLOC_PERTURB_": perturb} if perturb else {}
    trace = str(tmp_path / "t.trace")
    out, prof = record_pair("dbi", env, tmp_path, trace)
    refs = [sum(t["refs"] for t in out[k]["threads"]) for k in (0, 1)]
    n = [len(out[k]["samples"]) for k in (0, 1)]
    print(f"dbi MALLOC_PERTURB_={perturb}: {refs[0]} references, {n[0]} samples, "
          f"--phase-guided {n[1]} ({n[0] / n[1]:.2f}x fewer)")
    assert refs[0] == refs[1]
    assert n[0] >= 4 * n[1]
    assert {s["weight"] for s in out[0]["samples"]} == {128.0}
    assert {s["weight"] for s in out[1]["samples"]} == {128.0, 2048.0}
    sizes = curve_check.sizes_4k_64m()
    exact = curve_check.exact_curve(EXACTSIM, trace, sizes)
    os.unlink(trace)
    for pol, (mae, worst) in zip(curve_check.POLICIES, errors(prof, exact, sizes)):
        print(f"dbi phase-guided {pol}: MAE {100 * mae:.3f} pp, largest {100 * worst:.2f} pp")
        assert mae <= 0.01, (pol, mae, worst)
