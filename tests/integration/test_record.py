"""lomas-demo record end to end: live clocks through the session API, the
target's own output and exit status, crashes, SIGINT detaching with a saved
partial profile, attach/detach, and inline-hook detection."""
import json
import os
import signal
import subprocess
import time

import pytest

DEMO = os.environ["LOMAS_DEMO"]
TARGETS = os.environ.get("LOMAS_TARGETS")
WORKLOADS = os.environ.get("LOMAS_WORKLOADS")

needs_targets = pytest.mark.skipif(not TARGETS, reason="LOMAS_TARGETS not set")


def target(name):
    return os.path.join(TARGETS, name)


def demo(*args, **kw):
    return subprocess.run([DEMO, *map(str, args)], capture_output=True, text=True,
                          timeout=600, **kw)


def export(path):
    r = demo("export", "--json", path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def children(pid):
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(x) for x in f.read().split()]
    return kids


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def maps_perms(pid):
    with open(f"/proc/{pid}/maps") as f:
        return [line.split()[:2] for line in f]


@needs_targets
def test_step_record_keeps_output_and_exit_status(tmp_path):
    native = subprocess.run([target("t_threads")], capture_output=True, text=True)
    out = tmp_path / "t.lomas"
    r = demo("record", "--clock", "step", "--period", "300", "-o", out, "--",
             target("t_threads"))
    assert r.returncode == native.returncode, r.stderr
    assert r.stdout == native.stdout
    prof = export(out)
    assert prof["meta"]["clock"] == "step"
    assert len(prof["threads"]) >= 2
    assert len(prof["samples"]) > 0


@needs_targets
@pytest.mark.parametrize("how,sig", [("segv", signal.SIGSEGV), ("abort", signal.SIGABRT)])
def test_step_record_reports_the_crash_signal(tmp_path, how, sig):
    native = subprocess.run([target("t_crash"), how], capture_output=True)
    assert native.returncode == -sig
    out = tmp_path / "c.lomas"
    r = demo("record", "--clock", "step", "-o", out, "--", target("t_crash"), how)
    assert r.returncode == 128 + sig, r.stderr
    assert out.exists()


@needs_targets
def test_sigint_detaches_and_saves_partial_profile(tmp_path):
    out = tmp_path / "spin.lomas"
    # stderr to a file: the detached target keeps its copy open, a pipe never ends.
    errf = open(tmp_path / "stderr", "w+")
    p = subprocess.Popen([DEMO, "record", "--clock", "step", "--period", "100", "-o",
                          str(out), "--", target("t_spin")],
                         stdout=subprocess.PIPE, stderr=errf, text=True)
    kids = []
    try:
        assert p.stdout.readline() == "ready\n"
        time.sleep(1.5)
        kids = children(p.pid)
        assert len(kids) == 1
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=60)
        errf.seek(0)
        err = errf.read()
        assert rc == 128 + signal.SIGINT, err
        assert "detached" in err
        prof = export(out)
        assert len(prof["samples"]) > 0
        # The target runs on, not stopped, with no page left protected by us.
        time.sleep(0.2)
        assert proc_state(kids[0]) in "RS"
        # A static t_spin has no PROT_NONE mapping of its own: any would be ours.
        assert not [m for m in maps_perms(kids[0]) if m[1] == "---p"]
    finally:
        if p.poll() is None:
            kids += children(p.pid)
            p.kill()
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass


@needs_targets
def test_attach_then_detach_leaves_target_unharmed(tmp_path):
    t = subprocess.Popen([target("t_spin")], stdout=subprocess.PIPE, text=True)
    try:
        assert t.stdout.readline() == "ready\n"
        before = maps_perms(t.pid)
        out = tmp_path / "a.lomas"
        p = subprocess.Popen([DEMO, "record", "--period", "100", "-o", str(out), "-p",
                              str(t.pid)], stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=60)
        err = p.stderr.read()
        assert rc == 128 + signal.SIGINT, err
        prof = export(out)
        assert len(prof["samples"]) > 0
        # Its caches were warm when we came: the model must not take them for empty.
        assert prof["meta"].get("start") == "attached"
        time.sleep(0.2)
        assert t.poll() is None
        assert proc_state(t.pid) in "RS"
        assert maps_perms(t.pid) == before
    finally:
        t.kill()
        t.wait()


@pytest.mark.skipif(not WORKLOADS or not os.path.exists(os.path.join(WORKLOADS or "",
                                                                      "matmul-inline")),
                    reason="instrumented workloads not built")
def test_auto_clock_picks_inline_for_instrumented_programs(tmp_path):
    plain = subprocess.run([os.path.join(WORKLOADS, "matmul"), "48"], capture_output=True,
                           text=True)
    out = tmp_path / "m.lomas"
    r = demo("record", "-o", out, "--", os.path.join(WORKLOADS, "matmul-inline"), "48")
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    prof = export(out)
    assert prof["meta"]["clock"] == "inline"
    assert "start" not in prof["meta"]  # launched by us: from its first reference
    assert len(prof["samples"]) > 100


@needs_targets
def test_target_killed_under_us_keeps_partial_profile(tmp_path):
    t = subprocess.Popen([target("t_spin")], stdout=subprocess.PIPE, text=True)
    p = None
    try:
        assert t.stdout.readline() == "ready\n"
        out = tmp_path / "k.lomas"
        p = subprocess.Popen([DEMO, "record", "--period", "100", "-o", str(out), "-p",
                              str(t.pid)], stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        t.kill()
        rc = p.wait(timeout=60)
        err = p.stderr.read()
        assert rc == 128 + signal.SIGKILL, err
        prof = export(out)
        assert prof["meta"]["clock"] == "step"
        assert len(prof["threads"]) == 1
    finally:
        # record first: while it traces the target, the target cannot be
        # reaped (a record that never returned left this wait hanging).
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
        t.kill()
        t.wait()
