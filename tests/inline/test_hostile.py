"""The inline runtime against programs that do what it must put up with
(issue 16): a set-user-ID program run by another user, descriptors closed and
reused, fatal and interactive signals, ^C under lomas-demo record, children
that inherit the environment, thousands of short threads, small stacks, the
signal dispositions a program reads back, shared objects loaded with dlopen,
and all of it at once under load.

Each program is tests/inline/hostile.c, built with the lomas-inline recipe
(hostile-inline) and without it (hostile-plain): the plain build is the
ground truth for what the program does (output, exit status, files); the
profile is checked with lomas-demo export, whose reader validates it.
"""
import fcntl
import glob
import json
import os
import pty
import re
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import termios
import time

import pytest

BUILD = os.environ.get("LOMAS_BUILD_ROOT", "build")
SOURCE = os.environ.get("LOMAS_SOURCE_ROOT", ".")
DEMO = os.environ.get("LOMAS_DEMO", os.path.join(BUILD, "examples", "lomas-demo", "lomas-demo"))
INLINE = os.environ.get("LOMAS_HOSTILE", os.path.join(BUILD, "tests", "inline", "hostile-inline"))
PLAIN = os.environ.get("LOMAS_HOSTILE_PLAIN",
                       os.path.join(BUILD, "tests", "inline", "hostile-plain"))


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOMAS_")}
    env.update(extra or {})
    return env


def default_signals():
    """Children of a non-interactive shell may start with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def run(argv, extra=None, cwd=None, timeout=300, preexec=default_signals):
    return subprocess.run(argv, env=clean_env(extra), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=preexec)


def profile(path):
    r = subprocess.run([DEMO, "export", "--json", path], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def refs(d):
    return sum(t["refs"] for t in d["threads"])


# ------------------------------------------------------------ set-user-ID


def can_setuid_test():
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


@pytest.mark.skipif(not can_setuid_test(),
                    reason="needs root (to make a set-user-ID root program) and setpriv")
def test_setuid_program_writes_nothing_for_the_user():
    """A set-user-ID root program built with the recipe, run by nobody with
    LOMAS_OUTPUT naming a file of root's and LOMAS_TRACE one root's directory
    holds: nothing of root's is created or truncated (not even a default
    profile in the root-owned working directory), the program's output is its
    own, and one line on stderr says why no profile is written."""
    top = tempfile.mkdtemp(prefix="lomas-suid-", dir="/tmp")
    try:
        os.chmod(top, 0o755)
        exe = os.path.join(top, "hostile-inline")
        shutil.copy(INLINE, exe)
        os.chown(exe, 0, 0)
        os.chmod(exe, 0o4755)
        rootfile = os.path.join(top, "rootfile")
        with open(rootfile, "w") as f:
            f.write("root's data\n")
        os.chmod(rootfile, 0o644)
        rootdir = os.path.join(top, "rootdir")
        os.mkdir(rootdir, 0o755)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = run(as_nobody + [exe, "setuid"], cwd=rootdir)
        if "euid 0" not in probe.stdout:
            pytest.skip("set-user-ID programs do not run here (nosuid mount?): " + probe.stdout)
        plain = run(as_nobody + [PLAIN, "setuid"], cwd=rootdir)
        for extra in ({}, {"LOMAS_OUTPUT": rootfile,
                           "LOMAS_TRACE": os.path.join(rootdir, "trace"),
                           "LOMAS_PERIOD": "bogus"}):
            r = run(as_nobody + [exe, "setuid"], extra, cwd=rootdir)
            assert r.returncode == 0
            assert r.stdout.replace("euid 0", "euid 65534") == plain.stdout
            lines = r.stderr.splitlines()
            assert len(lines) == 1 and "secure execution" in lines[0], r.stderr
            with open(rootfile) as f:
                assert f.read() == "root's data\n"
            assert os.listdir(rootdir) == []
    finally:
        shutil.rmtree(top)


# ------------------------------------------------------------ descriptors


def test_program_that_closes_every_descriptor_keeps_its_own_file(tmp_path):
    """A daemon closes every descriptor, the trace's too, and opens its own
    file, which gets a number the trace had: the file holds exactly what the
    program wrote, and the trace, reopened by path, still holds every
    reference the clock counted."""
    mine, theirs = str(tmp_path / "mine.txt"), str(tmp_path / "plain.txt")
    trace, prof = str(tmp_path / "t.trace"), str(tmp_path / "p.lomas")
    base = run([PLAIN, "daemon", theirs])
    r = run([INLINE, "daemon", mine], {"LOMAS_TRACE": trace, "LOMAS_OUTPUT": prof,
                                       "LOMAS_PERIOD": "100"})
    assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    with open(mine) as a, open(theirs) as b:
        assert a.read() == b.read()
    with open(trace) as f:
        nrefs = sum(1 for _ in f)
    d = profile(prof)
    assert nrefs == refs(d) and nrefs >= 100000 * 10
    assert "incomplete" not in d["meta"]["trace"]


def test_trace_removed_and_descriptor_reused_stops_the_trace(tmp_path):
    """The same daemon also removes the trace file before it opens its own:
    the runtime cannot reopen the trace, stops it, writes nothing into the
    program's file, and the profile says the trace is incomplete."""
    mine, theirs = str(tmp_path / "mine.txt"), str(tmp_path / "plain.txt")
    trace, prof = str(tmp_path / "t.trace"), str(tmp_path / "p.lomas")
    base = run([PLAIN, "daemon", theirs, trace])
    r = run([INLINE, "daemon", mine, trace], {"LOMAS_TRACE": trace, "LOMAS_OUTPUT": prof,
                                              "LOMAS_PERIOD": "100"})
    assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    with open(mine) as a, open(theirs) as b:
        assert a.read() == b.read()
    d = profile(prof)
    assert refs(d) >= 100000 * 10
    assert "incomplete" in d["meta"]["trace"]
    assert not os.path.exists(trace)


def test_runtime_message_never_lands_in_the_programs_file(tmp_path):
    """A program closes its stderr, opens a file of its own (it gets fd 2) and
    removes the directory the profile was to be written in: the runtime
    cannot write the profile and must not say so into that file."""
    mine, theirs = str(tmp_path / "mine.txt"), str(tmp_path / "plain.txt")
    gone, gone_plain = tmp_path / "gone", tmp_path / "gone-plain"
    gone.mkdir()
    gone_plain.mkdir()
    base = run([PLAIN, "closed-stderr", theirs, str(gone_plain)])
    r = run([INLINE, "closed-stderr", mine, str(gone)], {"LOMAS_OUTPUT": str(gone / "p.lomas")})
    assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    assert base.returncode == 0
    with open(mine) as a, open(theirs) as b:
        assert a.read() == b.read()


# ---------------------------------------------------------------- threads


def peak_rss_kib(argv, extra=None):
    """Run argv; its exit status, stdout and peak RSS (KiB, wait4's ru_maxrss)."""
    p = subprocess.Popen(argv, env=clean_env(extra), stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out, ru.ru_maxrss


def test_short_threads_one_after_another_hold_no_memory(tmp_path):
    """20k threads run one after another: an exited thread's sampler is given
    back (its samples kept compactly), so the peak RSS stays within a few MiB
    of the plain build's (it was 155-430 MB), and every thread is in the
    profile with its references."""
    prof = str(tmp_path / "p.lomas")
    n = 20000
    rc0, out0, rss0 = peak_rss_kib([PLAIN, "threads", str(n)])
    rc1, out1, rss1 = peak_rss_kib([INLINE, "threads", str(n)], {"LOMAS_OUTPUT": prof})
    print(f"peak RSS: plain {rss0} KiB, inline {rss1} KiB")
    assert (rc1, out1) == (rc0, out0) and rc0 == 0
    assert rss1 <= rss0 + 16 * 1024, (rss0, rss1)
    d = profile(prof)
    assert len(d["threads"]) == n + 1
    # Each thread: 4 x 256 read-modify-writes of its TLS array (16-byte
    # vectors: a load and a store for two longs).
    assert all(t["refs"] >= 1024 for t in d["threads"][1:])
    assert len(d["samples"]) > 10000


def test_default_thread_stack_under_a_small_stack_limit(tmp_path):
    """ulimit -s 128: a default-attribute thread gets 128 KiB of stack, and the
    runtime's 64 KiB of TLS is carved out of it; the thread uses all but 32
    KiB of it and must run as it does in the plain build."""
    def small_stack():
        default_signals()
        resource.setrlimit(resource.RLIMIT_STACK, (128 * 1024, resource.RLIM_INFINITY))

    base = run([PLAIN, "stack"], preexec=small_stack)
    r = run([INLINE, "stack"], {"LOMAS_OUTPUT": str(tmp_path / "p.lomas")},
            preexec=small_stack)
    assert base.returncode == 0 and "stack 128 KiB" in base.stdout
    assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    assert len(profile(str(tmp_path / "p.lomas"))["threads"]) == 2


def test_signal_dispositions_read_back_as_the_program_set_them(tmp_path):
    """The runtime catches seven fatal signals while they are at their
    default; the program's sigaction and signal calls (the recipe wraps them)
    never see that: every disposition, flags, mask and restorer read back as
    in the plain build, before and after the program changes some."""
    base = run([PLAIN, "dispositions"])
    r = run([INLINE, "dispositions"], {"LOMAS_OUTPUT": str(tmp_path / "p.lomas")})
    assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    assert "2:dfl:" in base.stdout and "signal(INT, mine) was dfl" in base.stdout


# ---------------------------------------------------------------- signals


def start_interruptible(argv, extra, **kw):
    p = subprocess.Popen(argv, env=clean_env(extra), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=default_signals, **kw)
    assert p.stdout.readline() == "ready\n"
    time.sleep(0.2)
    return p


@pytest.mark.parametrize("how,status,ending", [("work", -signal.SIGINT, "signal 2"),
                                               ("malloc", -signal.SIGINT, "signal 2"),
                                               ("handle", 3, "exit")])
def test_sigint_standalone(how, status, ending, tmp_path):
    """SIGINT to a program built with the recipe: a program that leaves it at
    its default dies by it (the shell sees 130) after the runtime wrote the
    profile, also when the signal interrupts malloc; one that handles it
    itself runs its handler and exits as it chooses, and the profile is
    written at that exit."""
    prof = str(tmp_path / "p.lomas")
    p = start_interruptible([INLINE, "interrupt", how], {"LOMAS_OUTPUT": prof})
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == status, err
    assert err == ""
    assert out == ("got 2\n" if how == "handle" else "")
    assert profile(prof)["meta"]["ended"] == ending
    assert os.listdir(tmp_path) == ["p.lomas"]


def test_sigint_while_the_profile_cannot_be_written(tmp_path):
    """A write of the profile on SIGINT that never finishes (rename blocks
    here, as a lock the signal interrupted would) does not hang the program:
    a watchdog ends it by SIGINT, as without the runtime, within seconds; a
    second SIGINT sent meanwhile does not cut it short either."""
    shim = str(tmp_path / "stuck.so")
    src = tmp_path / "stuck.c"
    src.write_text("#include <unistd.h>\n"
                   "int rename(const char *a, const char *b) { for (;;) pause(); }\n")
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", shim], check=True)
    p = start_interruptible([INLINE, "interrupt", "work"],
                            {"LOMAS_OUTPUT": str(tmp_path / "p.lomas"), "LD_PRELOAD": shim})
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=30)
    assert p.returncode == -signal.SIGINT
    assert 4 < time.time() - t0 < 15


def inline_dirs(tmpdir):
    return glob.glob(os.path.join(tmpdir, "lomas-inline-*"))


def record_interrupted(tmp_path, how, mode):
    """lomas-demo record of `hostile-inline interrupt mode`, its own process
    group, SIGINT to record alone or to the group; its result."""
    out = str(tmp_path / "rec.lomas")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()

    def own_group():
        default_signals()
        os.setpgid(0, 0)

    p = subprocess.Popen([DEMO, "record", "-o", out, "--", INLINE, "interrupt", mode],
                         env=clean_env({"TMPDIR": str(tmpdir)}), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=own_group)
    assert p.stdout.readline() == "ready\n"
    # record installs its handlers once the session has started, which can
    # be after the target printed "ready" (a ^C before kills record).
    time.sleep(1.0)
    if how == "alone":
        p.send_signal(signal.SIGINT)
    else:
        os.killpg(p.pid, signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    return p.returncode, stdout, stderr, out, str(tmpdir)


@pytest.mark.parametrize("how", ["alone", "group"])
@pytest.mark.parametrize("mode", ["work", "handle"])
def test_sigint_to_record_with_the_inline_clock(how, mode, tmp_path):
    """^C under lomas-demo record (SIGINT to record alone, or to the whole
    process group): the target ends as the signal ends it (passed on by
    record when it did not get it), its profile is saved at -o, record exits
    with its status (130 when SIGINT killed it), no temporary directory is
    left, and record says nothing untrue ("the target runs on")."""
    rc, stdout, stderr, out, tmpdir = record_interrupted(tmp_path, how, mode)
    want = 3 if mode == "handle" else 128 + signal.SIGINT
    assert rc == want, stderr
    assert stdout == ("got 2\n" if mode == "handle" else "")
    assert "runs on" not in stderr and "lomas-inline:" not in stderr
    assert "written to " + out in stderr
    # (The message that record waits comes only when the target was still
    # running when record saw the signal: not always when both got it.)
    if how == "alone":
        assert "waiting for the target" in stderr
    assert profile(out)["meta"]["ended"] == ("exit" if mode == "handle" else "signal 2")
    assert inline_dirs(tmpdir) == []


@pytest.mark.parametrize("mode", ["work", "handle"])
def test_ctrl_c_on_a_terminal_under_record(mode, tmp_path):
    """A terminal's ^C (the line discipline signals the foreground process
    group): the target gets SIGINT once, from the terminal (record does not
    pass on a second one: the handling program prints "got 2" once), and the
    run ends as above."""
    out = str(tmp_path / "rec.lomas")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    master, slave = pty.openpty()

    def on_terminal():
        default_signals()
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([DEMO, "record", "-o", out, "--", INLINE, "interrupt", mode],
                         env=clean_env({"TMPDIR": str(tmpdir)}), stdin=slave, stdout=slave,
                         stderr=slave, preexec_fn=on_terminal, close_fds=True)
    os.close(slave)
    text = b""
    deadline = time.time() + 60
    while b"ready" not in text and time.time() < deadline:
        if select.select([master], [], [], 1)[0]:
            text += os.read(master, 4096)
    time.sleep(1.0)
    os.write(master, b"\x03")
    while p.poll() is None and time.time() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            try:
                text += os.read(master, 4096)
            except OSError:
                break
    p.wait(timeout=10)
    try:
        while select.select([master], [], [], 0.2)[0]:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            text += chunk
    except OSError:
        pass
    os.close(master)
    text = text.decode(errors="replace")
    assert p.returncode == (3 if mode == "handle" else 128 + signal.SIGINT), text
    assert text.count("got 2") == (1 if mode == "handle" else 0), text
    assert "runs on" not in text
    assert profile(out)["meta"]["ended"] == ("exit" if mode == "handle" else "signal 2")
    assert inline_dirs(str(tmpdir)) == []


# --------------------------------------------------------------- children


@pytest.mark.parametrize("mode", ["fork", "exec", "system"])
def test_children_leave_the_parents_profile_alone(mode, tmp_path):
    """A child, forked (it never samples) or running an instrumented program
    with the parent's LOMAS_OUTPUT (exec, or through a shell), writes no
    profile: LOMAS_OUTPUT holds the parent's, and nothing else is written."""
    prof = str(tmp_path / "p.lomas")
    base = run([PLAIN, mode])
    p = subprocess.Popen([INLINE, mode], env=clean_env({"LOMAS_OUTPUT": prof}),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=120)
    assert (p.returncode, out, err) == (base.returncode, base.stdout, base.stderr)
    d = profile(prof)
    assert d["meta"]["pid"] == str(p.pid)
    assert refs(d) >= 50000 * 4
    assert os.listdir(tmp_path) == ["p.lomas"]


def test_children_under_record(tmp_path):
    """Under lomas-demo record: an exec'd instrumented child writes nothing
    (the profile is the target's, its references only), and a child that
    outlives the target writes nothing either and says nothing (it printed
    "cannot write the profile" into record's removed directory)."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = str(tmp_path / "rec.lomas")
    env = {"TMPDIR": str(tmpdir)}
    base = run([PLAIN, "exec"])
    r = run([DEMO, "record", "-o", out, "--", INLINE, "exec"], env)
    assert r.returncode == 0 and r.stdout == base.stdout
    assert "lomas-inline" not in r.stderr
    d = profile(out)
    # The parent alone: 50000 x 4 read-modify-writes of 16-byte vectors (two
    # longs, a load and a store: one reference a long), not the child's
    # 20000 x 4 more.
    assert 50000 * 4 <= refs(d) < 50000 * 4 + 20000 * 4
    r = subprocess.run([DEMO, "record", "-o", out, "--", INLINE, "orphan"], env=clean_env(env),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    time.sleep(1.0)  # the late child ends 300 ms after it starts
    assert r.returncode == 0
    assert "lomas-inline" not in r.stderr
    assert inline_dirs(str(tmpdir)) == []


# ---------------------------------------------------------- shared objects


def pkg_config(*args):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(BUILD, "meson-uninstalled"))
    return subprocess.run(["pkg-config"] + list(args), env=env, capture_output=True, text=True,
                          check=True).stdout.split()


def test_dlopen_of_a_shared_object_built_with_the_recipe(tmp_path):
    """A shared object compiled with `pkg-config --cflags lomas-inline` (and
    linked without the runtime, which is the program's) loads into a program
    built with the recipe, and the program's runtime counts its references;
    a plain program cannot load it and says which symbol it lacks."""
    so = str(tmp_path / "plugin-inline.so")
    plain_so = str(tmp_path / "plugin-plain.so")
    src = os.path.join(SOURCE, "tests", "inline", "plugin.c")
    subprocess.run(["clang-16", "-O2", "-fPIC", "-shared"] + pkg_config("--cflags", "lomas-inline")
                   + [src, "-o", so], check=True)
    subprocess.run(["clang-16", "-O2", "-fPIC", "-shared", src, "-o", plain_so], check=True)
    prof = str(tmp_path / "p.lomas")
    base = run([PLAIN, "dlopen", plain_so])
    r = run([INLINE, "dlopen", so], {"LOMAS_OUTPUT": prof})
    assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    # The program's 20000 x 2 and the plugin's 20000 x 10 (16-byte vectors).
    assert refs(profile(prof)) >= 20000 * 2 + 20000 * 10
    r = run([PLAIN, "dlopen", so])
    assert r.returncode == 1 and "undefined symbol: lomas__" in r.stdout, r.stdout


# ----------------------------------------------------------------- stress


@pytest.mark.parametrize("period", ["auto", "50"])
def test_stress_threads_and_signals(period, tmp_path):
    """64 threads started, run and joined continuously (19200 of them), a
    200 us SIGALRM timer and a thread sending SIGUSR1 every 300 us, handlers
    with references of their own: output and exit status as the plain
    build's, and a valid profile with every thread."""
    prof = str(tmp_path / "p.lomas")
    base = run([PLAIN, "stress", "300"])
    r = run([INLINE, "stress", "300"], {"LOMAS_OUTPUT": prof, "LOMAS_PERIOD": period},
            timeout=600)
    assert (r.returncode, r.stdout, r.stderr) == (base.returncode, base.stdout, base.stderr)
    assert "alarms yes usr1 yes" in base.stdout
    # lomas-demo report loads (validates) the whole profile; a JSON export of
    # millions of samples takes minutes under the sanitizers.
    rep = subprocess.run([DEMO, "report", prof], capture_output=True, text=True, timeout=600)
    assert rep.returncode == 0, rep.stderr
    assert f"in {1 + 1 + 64 * 300} threads" in rep.stdout, rep.stdout
    samples = re.search(r"^\s*samples\s+(\d+):", rep.stdout, re.M)
    assert samples and int(samples.group(1)) > 5000, rep.stdout
