#!/usr/bin/env python3
"""Phase-guided sampling of the phases workload over environments: for each
clock, MALLOC_PERTURB_ (unset, 1, 77, 200) x the environment's size (0, 17,
40 padding variables, as meson test's own environment differs from a
shell's), `lomas-demo record --period 128` with and without --phase-guided,
both under `env -i` with the same variables. Prints samples, their ratio and
the phase-guided whole-run curve's MAE (random / LRU, pp) against exactsim of
the phase-guided run's own full trace (LOMAS_DBI_TRACE for dbi, LOMAS_TRACE
for the inline program). (docs/model.md, "Phase-guided sampling".)

    tests/dbi/phase_guided_envs.py [BUILD] [inline,dbi] [--no-curve]

PERTURBS (default "unset,1,77,200") and PADS (default "0,17,40") in the
environment choose other values.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import curve_check  # noqa: E402  (tests/curve_check.py)

BUILD = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "build"
CLOCKS = (sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].startswith("-")
          else "inline,dbi").split(",")
CURVE = "--no-curve" not in sys.argv
DEMO = os.path.join(BUILD, "examples", "lomas-demo", "lomas-demo")
EXACTSIM = os.path.join(BUILD, "tests", "tools", "exactsim")
WORKLOADS = os.path.join(BUILD, "examples", "workloads")
ARGS = ["4194304", "32768", "8"]
PERTURBS = [None if v == "unset" else int(v)
            for v in os.environ.get("PERTURBS", "unset,1,77,200").split(",")]
PADS = [int(v) for v in os.environ.get("PADS", "0,17,40").split(",")]


def env_of(perturb, pad, extra=None):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    if perturb is not None:
        env["MALLOC_PERTURB_"] = str(perturb)
    for i in range(pad):
        env[f"PADVAR{i}"] = "x" * 40
    env.update(extra or {})
    return env


def record(clock, flags, out, env):
    prog = os.path.join(WORKLOADS, "phases" + ("-inline" if clock == "inline" else ""))
    r = subprocess.run([DEMO, "record", "--clock", clock, "--period", "128"] + flags +
                       ["-o", out, "--", prog] + ARGS, env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        sys.exit(f"record failed: {r.stderr}")
    d = json.loads(subprocess.run([DEMO, "export", "--json", out], capture_output=True,
                                  text=True, check=True).stdout)
    return len(d["samples"])


def main():
    sizes = curve_check.sizes_4k_64m()
    print("clock  MALLOC_PERTURB_ pad  samples  phase-guided  ratio  MAE random/lru (pp)")
    with tempfile.TemporaryDirectory() as tmp:
        p0, p1, tr = (os.path.join(tmp, n) for n in ("p0.lomas", "p1.lomas", "t.trace"))
        for clock in CLOCKS:
            for perturb in PERTURBS:
                for pad in PADS:
                    n0 = record(clock, [], p0, env_of(perturb, pad))
                    var = "LOMAS_DBI_TRACE" if clock == "dbi" else "LOMAS_TRACE"
                    n1 = record(clock, ["--phase-guided"], p1,
                                env_of(perturb, pad, {var: tr} if CURVE else None))
                    mae = ""
                    if CURVE:
                        exact = curve_check.exact_curve(EXACTSIM, tr, sizes)
                        e = curve_check.curve_errors(exact, curve_check.model_curve(
                            DEMO, p1, sizes), sizes)
                        mae = f"{100 * e[0][0]:.2f} / {100 * e[1][0]:.2f}"
                        os.unlink(tr)
                    print(f"{clock:6s} {str(perturb):15s} {pad:3d} {n0:8d} {n1:13d} "
                          f"{n0 / n1:6.2f}  {mae}", flush=True)


main()
