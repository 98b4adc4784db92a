"""lomas-demo record's contract (docs/cli.md, issue 16 items 4 and 12), end to
end: every exit status (the target's own, 128+N, 125, 126, 127, 130/143), commands
that cannot run refused like env refuses them, nothing run when the profile could not
be written or the clock cannot run the program, and job control: a target stopped
and continued keeps its output, record blocks while it is stopped and still answers
SIGINT and SIGTERM."""
import os
import shutil
import signal
import subprocess
import time

import pytest

DEMO = os.environ["LOMAS_DEMO"]
TARGETS = os.environ.get("LOMAS_TARGETS")

needs_targets = pytest.mark.skipif(not TARGETS, reason="LOMAS_TARGETS not set")


def target(name):
    return os.path.join(TARGETS, name)


def record(*args, **kw):
    return subprocess.run([DEMO, "record", *map(str, args)], capture_output=True,
                          text=True, timeout=600, **kw)


def one_line(r):
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def proc_field(pid, i):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[i]


def state(pid):
    return proc_field(pid, 0)


def cpu_ticks(pid):
    # utime + stime (fields 14 and 15 of /proc/PID/stat, counted after the comm)
    return int(proc_field(pid, 11)) + int(proc_field(pid, 12))


def children(pid):
    kids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            kids += [int(x) for x in f.read().split()]
    return kids


# ------------------------------------------------------------ exit statuses

@needs_targets
@pytest.mark.parametrize("status", [0, 3, 255])
def test_the_targets_own_status(tmp_path, status):
    r = record("--clock", "step", "-o", tmp_path / "p.lomas", "--", target("t_marker"),
               tmp_path / "m", status)
    assert r.returncode == status, r.stderr
    assert r.stdout == "ran\n"
    assert (tmp_path / "p.lomas").exists()


@needs_targets
@pytest.mark.parametrize("how,sig", [("segv", signal.SIGSEGV), ("kill", signal.SIGTERM)])
def test_killed_by_a_signal_is_128_plus_n(tmp_path, how, sig):
    r = record("--clock", "step", "-o", tmp_path / "p.lomas", "--", target("t_crash"), how)
    assert r.returncode == 128 + sig, r.stderr


@needs_targets
def test_not_found_is_127(tmp_path):
    out = tmp_path / "p.lomas"
    r = record("-o", out, "--", tmp_path / "no-such-program")
    assert r.returncode == 127
    assert "no-such-program" in one_line(r)
    r = record("-o", out, "--", "no-such-command-anywhere-lomas", env={"PATH": str(tmp_path)})
    assert r.returncode == 127 and "not found" in one_line(r)
    # A script whose interpreter does not exist: execve says ENOENT, env says 127.
    script = tmp_path / "bad-interpreter"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    env = subprocess.run(["env", script], capture_output=True)
    r = record("--clock", "step", "-o", out, "--", script)
    assert r.returncode == env.returncode == 127, r.stderr
    assert not out.exists()


@needs_targets
def test_cannot_run_is_126(tmp_path):
    out = tmp_path / "p.lomas"
    plain = tmp_path / "not-executable"
    shutil.copy(target("t_marker"), plain)
    plain.chmod(0o644)  # no x bit: not even root may execute it
    r = record("-o", out, "--", plain, tmp_path / "m1")
    assert r.returncode == 126 and "ermission" in one_line(r)
    r = record("-o", out, "--", tmp_path)
    assert r.returncode == 126 and "directory" in one_line(r)
    # Binary garbage, executable: "Exec format error", not handed to the shell.
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x01\x02\x03garbage\x00\xff\xfe" * 16)
    garbage.chmod(0o755)
    r = record("--clock", "step", "-o", out, "--", garbage)
    assert r.returncode == 126
    assert "Exec format error" in one_line(r)
    # An ELF the kernel refuses (ENOEXEC from execve itself).
    bad_elf = tmp_path / "bad-elf"
    bad_elf.write_bytes(b"\x7fELF" + b"\x00" * 60)
    bad_elf.chmod(0o755)
    r = record("--clock", "step", "-o", out, "--", bad_elf)
    assert r.returncode == 126, r.stderr
    assert "Exec format error" in one_line(r)
    assert not out.exists()
    assert not (tmp_path / "m1").exists()


@needs_targets
def test_scripts_without_a_shebang_run_as_env_runs_them(tmp_path):
    # execvp (env, timeout, nice) hands a file without #! or ELF magic to /bin/sh.
    script = tmp_path / "no-shebang"
    script.write_text(f"{target('t_marker')} {tmp_path / 'm'} 4\nexit $?\n")
    script.chmod(0o755)
    native = subprocess.run(["env", script], capture_output=True, text=True)
    assert native.returncode == 4 and native.stdout == "ran\n"
    os.unlink(tmp_path / "m")
    r = record("--clock", "step", "--period", "100000", "-o", tmp_path / "p.lomas", "--",
               script)
    assert r.returncode == native.returncode, r.stderr
    assert r.stdout == native.stdout
    assert (tmp_path / "m").exists()
    empty = tmp_path / "empty"
    empty.write_text("")
    empty.chmod(0o755)
    assert subprocess.run(["env", empty]).returncode == 0


@needs_targets
@pytest.mark.parametrize("clock", ["step", "inline", "auto", "pmu"])
def test_unwritable_output_is_refused_before_the_target_runs(tmp_path, clock):
    marker = tmp_path / "marker"
    bad = [tmp_path / "no-such-dir" / "p.lomas", tmp_path]  # missing dir, a directory
    for out in bad:
        r = record("--clock", clock, "-o", out, "--", target("t_marker"), marker)
        assert r.returncode == 125, (out, r.stderr)
        assert str(out) in one_line(r)
        assert not marker.exists(), f"the target ran although {out} cannot be written"
    ro = tmp_path / "read-only"
    ro.mkdir()
    if os.geteuid() != 0:
        ro.chmod(0o555)
    elif subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro],
                        capture_output=True).returncode != 0:
        return  # root ignores permissions, and we may not mount here
    try:
        r = record("--clock", clock, "-o", ro / "p.lomas", "--", target("t_marker"), marker)
        assert r.returncode == 125, r.stderr
        assert "p.lomas" in one_line(r)
        assert not marker.exists()
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", ro], capture_output=True)
        ro.chmod(0o755)


@needs_targets
def test_inline_clock_without_hooks_is_refused_before_the_target_runs(tmp_path):
    marker = tmp_path / "marker"
    r = record("--clock", "inline", "-o", tmp_path / "p.lomas", "--", target("t_marker"),
               marker)
    assert r.returncode == 125
    line = one_line(r)
    assert "hooks" in line and "step" in line
    assert not marker.exists()
    assert not (tmp_path / "p.lomas").exists()


def test_lomas_failures_are_125(tmp_path):
    out = tmp_path / "p.lomas"
    for args in (["--bogus", "--", "/bin/true"], ["--period", "x", "--", "/bin/true"],
                 ["--clock", "nonsense", "--", "/bin/true"], ["-p", "notapid"],
                 ["-p", "1", "--", "/bin/true"], []):
        r = record("-o", out, *args)
        assert r.returncode == 125, (args, r.stderr)
        one_line(r)
    r = record("-o", out, "-p", "999999999")
    assert r.returncode == 125 and "999999999" in r.stderr
    assert not out.exists()


# ------------------------------------------------------------- job control

def start_record(tmp_path, *cmd, period=50):
    """record in the background, its stderr in a file (a detached target keeps it)."""
    errf = open(tmp_path / "record.err", "w+")
    p = subprocess.Popen([DEMO, "record", "--clock", "step", "--period", str(period), "-o",
                          str(tmp_path / "p.lomas"), "--", *map(str, cmd)],
                         stdout=subprocess.PIPE, stderr=errf, text=True)
    return p, errf


def wait_for_child(p, timeout=30):
    t0 = time.time()
    while time.time() - t0 < timeout:
        kids = children(p.pid)
        if kids:
            return kids[0]
        time.sleep(0.01)
    raise AssertionError("record started no target")


def wait_stopped(pid, record_pid, timeout=60):
    """Until the target makes no progress (its CPU time stays put) for 0.5 s."""
    t0 = time.time()
    last = cpu_ticks(pid)
    while time.time() - t0 < timeout:
        time.sleep(0.5)
        now = cpu_ticks(pid)
        if now == last and state(pid) in "tT":
            return
        last = now
    raise AssertionError("the target did not stop")


def reap(p, kids):
    if p.poll() is None:
        p.kill()
        p.wait()
    for k in kids:
        try:
            os.kill(k, signal.SIGKILL)
        except ProcessLookupError:
            pass


@needs_targets
def test_stopped_and_continued_from_outside_under_record(tmp_path):
    native = subprocess.run([target("t_jobctl"), "spin", "1500"], capture_output=True,
                            text=True)
    p, errf = start_record(tmp_path, target("t_jobctl"), "spin", "1500")
    kids = []
    try:
        kid = wait_for_child(p)
        kids.append(kid)
        time.sleep(0.3)
        os.kill(kid, signal.SIGSTOP)
        wait_stopped(kid, p.pid)
        # record blocks while its target is stopped: (nearly) no CPU over a second.
        c0 = cpu_ticks(p.pid)
        time.sleep(1.0)
        used = cpu_ticks(p.pid) - c0
        assert used <= 5, f"record used {used} ticks in 1 s while its target was stopped"
        os.kill(kid, signal.SIGCONT)
        out, _ = p.communicate(timeout=300)
        errf.seek(0)
        assert p.returncode == native.returncode, errf.read()
        assert out == native.stdout
    finally:
        reap(p, kids)


@needs_targets
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_record_while_its_target_is_stopped(tmp_path, sig):
    p, errf = start_record(tmp_path, target("t_jobctl"), "self", "300")
    kids = []
    try:
        kid = wait_for_child(p)
        kids.append(kid)
        wait_stopped(kid, p.pid)  # it stopped itself (raise(SIGSTOP))
        p.send_signal(sig)
        rc = p.wait(timeout=30)
        errf.seek(0)
        err = errf.read()
        assert rc == 128 + sig, err
        assert "stays stopped" in err
        assert (tmp_path / "p.lomas").exists()
        # Let go, still stopped as it was; continued, it runs to its end.
        time.sleep(0.1)
        assert state(kid) == "T"
        os.kill(kid, signal.SIGCONT)
        t0 = time.time()
        while time.time() - t0 < 30 and os.path.exists(f"/proc/{kid}") and \
                state(kid) not in "Z":
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{kid}") or state(kid) == "Z"
    finally:
        reap(p, kids)


@needs_targets
def test_target_that_stops_itself_finishes_under_record(tmp_path):
    native = subprocess.Popen([target("t_jobctl"), "self", "300"], stdout=subprocess.PIPE,
                              text=True)
    wait_stopped(native.pid, None)
    os.kill(native.pid, signal.SIGCONT)
    nout, _ = native.communicate(timeout=60)
    p, errf = start_record(tmp_path, target("t_jobctl"), "self", "300")
    kids = []
    try:
        kid = wait_for_child(p)
        kids.append(kid)
        wait_stopped(kid, p.pid)
        os.kill(kid, signal.SIGCONT)
        out, _ = p.communicate(timeout=300)
        assert p.returncode == native.returncode
        assert out == nout
    finally:
        reap(p, kids)
