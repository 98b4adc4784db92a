"""lomas-demo against hostile input and a hostile system (issue 16): Valgrind
logs as Valgrind writes them, crafted numbers, untrusted text, the umask,
and saves onto a full file system (analyze -o, record -o, and an
instrumented program's own save at exit).

Crafted profiles come from tests/python/craft.py (struct and zlib, from the
format document), never from liblomas's encoder. Full file systems are
small tmpfs mounts inside a private mount namespace (unshare -m), so nothing
outlives a test; they need root (as the suite runs in CI) and are skipped,
saying why, where mount is not permitted.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from craft import NONE, sample, uniform, write_profile  # noqa: E402

DEMO = os.environ.get("LOMAS_DEMO")
WORKLOADS = os.environ.get("LOMAS_WORKLOADS")
TARGETS = os.environ.get("LOMAS_TARGETS")
VALGRIND = shutil.which("valgrind")
CLANG16 = shutil.which("clang-16")
DBL_MAX = sys.float_info.max

pytestmark = pytest.mark.skipif(not DEMO, reason="LOMAS_DEMO is not set")


def demo(*args, umask=None, env=None, timeout=300):
    return subprocess.run([DEMO, *map(str, args)], capture_output=True, timeout=timeout,
                          env=env, preexec_fn=(lambda: os.umask(umask)) if umask else None)


def one_line_error(r, cmd, *needles):
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 2, (r.returncode, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("lomas-demo: %s: " % cmd), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def terminal_safe(data):
    """No byte a terminal acts on: C0 controls but newline, DEL, raw C1 bytes
    (not UTF-8), UTF-8 encoded C1 controls, bidirectional overrides."""
    text = data.decode("utf-8")  # also: valid UTF-8
    for ch in text:
        cp = ord(ch)
        if (cp < 0x20 and ch != "\n") or 0x7f <= cp <= 0x9f or 0x202a <= cp <= 0x202e \
                or 0x2066 <= cp <= 0x2069 or cp in (0x2028, 0x2029, 0x200e, 0x200f):
            return False
    return True


# ------------------------------------------------ Valgrind's own log lines

PROG = r"""
#include <stdio.h>
#include <stdlib.h>
struct node { long v; struct node *next; };
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, sum = 0;
	struct node *a = calloc(n, sizeof *a);
	for (long i = 0; i < n; i++) {
		a[i].v = i;
		a[i].next = &a[(i * 7 + 1) % n];
	}
	for (struct node *p = a; n--; p = p->next)
		sum += p->v;
	printf("%ld\n", sum);
	free(a);
	return 0;
}
"""


def test_lackey_log_of_a_clang16_program(tmp_path):
    """Valgrind 3.19 on a clang-16 -g program (DWARF 5) writes '### unhandled
    dwarf2 abbrev form code 0x25' lines into the log: analyze takes the log
    as it is, and counts exactly the references the log holds."""
    if not VALGRIND or not CLANG16:
        pytest.skip("needs valgrind and clang-16")
    src, exe, log = tmp_path / "prog.c", tmp_path / "prog", tmp_path / "prog.lackey"
    src.write_text(PROG)
    subprocess.run([CLANG16, "-g", "-O1", "-o", exe, src], check=True)
    r = subprocess.run([VALGRIND, "--tool=lackey", "--trace-mem=yes", "--log-file=%s" % log,
                        exe, "3000"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    refs, valgrind_lines, notes = 0, 0, 0
    with open(log, "rb") as f:
        lines = f.read().split(b"\n")
    for line in lines:
        if re.match(rb"^ [LS] [0-9a-f]+,\d+$", line):
            refs += 1
        elif re.match(rb"^ M [0-9a-f]+,\d+$", line):
            refs += 2
        elif line.startswith(b"###"):
            notes += 1
        elif re.match(rb"^(==|--|\*\*)\d+(==|--|\*\*)", line):
            valgrind_lines += 1
    print("\n%d references, %d Valgrind lines, %d '###' notes" % (refs, valgrind_lines, notes))
    assert refs > 30000 and valgrind_lines > 5
    out = tmp_path / "prog.lomas"
    r = demo("analyze", "--lackey", log, "-o", out, "--period", 1)
    assert r.returncode == 0, r.stderr
    exported = json.loads(demo("export", "--json", out).stdout)
    assert sum(t["refs"] for t in exported["threads"]) == refs
    assert len(exported["samples"]) == refs  # period 1: every reference
    # Anything else that is not a trace line is still refused, by line number.
    bad = tmp_path / "bad.lackey"
    k = len(lines) // 2
    bad.write_bytes(b"\n".join(lines[:k] + [b"## not valgrind"] + lines[k:]))
    one_line_error(demo("analyze", "--lackey", bad, "-o", tmp_path / "bad.lomas"), "analyze",
                   "%s:%d:" % (bad, k + 1), "not a lackey line")
    assert not (tmp_path / "bad.lomas").exists()


# ------------------------------------------------------------------ numbers

def test_weights_near_dbl_max_are_refused(tmp_path):
    path = write_profile(tmp_path / "huge.lomas", *uniform(100, DBL_MAX / 2)[:3])
    for args in (("curve",), ("curve", "--json"), ("report",), ("export", "--csv")):
        one_line_error(demo(*args, path), args[0], "huge.lomas", "weight", "offset")
    one_line_error(demo("compare", path, path), "compare", "weight")


def test_largest_weights_give_numbers_everywhere(tmp_path):
    # 2**64 a sample (the most a sample may stand for), 30k samples.
    path = write_profile(tmp_path / "big.lomas", *uniform(30000, 2.0 ** 64, refs=1 << 62)[:3])
    r = demo("curve", path)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.decode().splitlines()
    assert rows[0] == "size_bytes,random,lru" and len(rows) == 82
    for row in rows[1:]:
        for x in row.split(",")[1:]:
            assert 0.0 <= float(x) <= 1.0, row  # float("nan") fails this
    r = demo("curve", "--json", "--cold", path)
    assert r.returncode == 0, r.stderr
    points = json.loads(r.stdout)
    assert len(points) == 81
    for p in points:  # no key silently dropped
        assert sorted(p) == ["lru", "random", "size_bytes"], p
        assert 0.0 <= p["random"] <= 1.0 and 0.0 <= p["lru"] <= 1.0
    r = demo("report", "--no-color", path)
    assert r.returncode == 0, r.stderr
    assert b"nan" not in r.stdout.lower() and b"inf" not in r.stdout.lower()
    r = demo("compare", path, path)
    assert r.returncode == 0 and b"nan" not in r.stdout.lower()


def test_clocks_and_counts_near_2_64(tmp_path):
    top = (1 << 64) - 1
    path = write_profile(tmp_path / "top.lomas", [(9, top)],
                         [(0, top // 2, 0), (top // 2, top - top // 2, 0)],
                         [sample(top - 10, top - 1, 1.0, window=1),
                          sample(5, top - 1, 2.0 ** 64),
                          sample(top - 1, NONE, 1.0, window=1, state=1)])
    r = demo("curve", "--json", path)
    assert r.returncode == 0, r.stderr
    assert all(sorted(p) == ["lru", "random", "size_bytes"] for p in json.loads(r.stdout))
    r = demo("export", "--json", path)
    assert r.returncode == 0
    assert json.loads(r.stdout)["threads"][0]["refs"] == str(top)  # above INT64_MAX: a string
    two = write_profile(tmp_path / "two.lomas", [(1, top), (2, 5)], [(0, 1, 0)],
                        [sample(0, 1, 1.0)])
    one_line_error(demo("report", two), "report", "2^64")


# ---------------------------------------------------------- untrusted text

HOSTILE = [
    ("command", b"./prog \x1b]0;owned\x07 \x1b[2J\x1b[H gone\rcarriage"),
    ("note\x1b[31m", b"key with an escape"),
    ("c1", b"raw \x9b31m and encoded \xc2\x9b31m"),
    ("bidi", "abc\u202edcba\u2066x\u2069 line\u2028sep".encode()),
    ("newline", b"one\ntwo\ttab\x7fdel"),
    ("fine", "caf\u00e9 \u20ac 100".encode()),
]


def test_report_escapes_metadata(tmp_path):
    path = write_profile(tmp_path / "meta.lomas", *uniform(500, 100.0)[:3], meta=HOSTILE)
    r = demo("report", "--no-color", path)
    assert r.returncode == 0, r.stderr
    assert terminal_safe(r.stdout), r.stdout
    out = r.stdout.decode()
    for shown in (r"\x1b]0;owned\x07", r"\x1b[2J", r"\r", r"note\x1b[31m", r"raw \x9b31m",
                  r"encoded \u009b31m", r"abc\u202edcba\u2066x\u2069", r"line\u2028sep",
                  r"one\ntwo\ttab\x7fdel", "caf\u00e9 \u20ac 100"):
        assert shown in out, shown
    # JSON export: valid JSON carrying the text (jansson escapes it), nothing raw.
    r = demo("export", "--json", path)
    assert r.returncode == 0, r.stderr
    meta = json.loads(r.stdout)["meta"]
    assert meta["command"] == HOSTILE[0][1].decode()
    assert meta["bidi"] == HOSTILE[3][1].decode()
    assert meta["c1"] == "raw \ufffd31m and encoded \u009b31m"  # a bad byte: U+FFFD
    assert b"\x1b" not in r.stdout and b"\x9b" not in r.stdout


def test_messages_escape_paths_and_file_text(tmp_path):
    evil = tmp_path / "x\x1b[31m\rname\u202e.lomas"
    evil.write_bytes(b"LOMASPRF" + b"\0" * 40)  # a corrupt profile
    for args in (("curve",), ("report",), ("export", "--json")):
        r = demo(*args, evil)
        line = one_line_error(r, args[0], r"x\x1b[31m\rname\u202e.lomas")
        assert terminal_safe(r.stderr), line
    missing = tmp_path / "gone\x1b]2;t\x07.lomas"
    r = demo("curve", missing)
    one_line_error(r, "curve", r"gone\x1b]2;t\x07.lomas")
    assert terminal_safe(r.stderr)
    # A bad trace line with control characters, in a file with one in its name.
    trace = tmp_path / "t\x1b[1m.lackey"
    trace.write_bytes(b"I  0400,3\n L 1000,4\n L \x1b[2J\x07,8\n")
    r = demo("analyze", "--lackey", trace, "-o", tmp_path / "t.lomas")
    line = one_line_error(r, "analyze", r"t\x1b[1m.lackey:3:")
    assert terminal_safe(r.stderr), line
    # An unknown command or option is the user's own text, escaped too.
    r = demo("bogus\x1b[2J")
    assert r.returncode == 2 and terminal_safe(r.stderr) and b"\\x1b[2J" in r.stderr


# ---------------------------------------------------------------- file modes

def analyze_small(tmp_path, out, umask):
    trace = tmp_path / "small.lackey"
    if not trace.exists():
        trace.write_text("".join(" L %x,8\n" % (0x1000 + 64 * (i % 50)) for i in range(5000)))
    return demo("analyze", "--lackey", trace, "-o", out, "--period", 10, umask=umask)


@pytest.mark.parametrize("umask,mode", [(0o077, 0o600), (0o022, 0o644), (0o027, 0o640),
                                        (0o002, 0o664)])
def test_new_profiles_honour_the_umask(tmp_path, umask, mode):
    out = tmp_path / "new.lomas"
    r = analyze_small(tmp_path, out, umask)
    assert r.returncode == 0, r.stderr
    assert os.stat(out).st_mode & 0o7777 == mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("new.lomas")] == ["new.lomas"]


def test_replaced_profile_keeps_its_mode(tmp_path):
    # As cp or a shell redirection would: a profile made private stays private.
    out = tmp_path / "kept.lomas"
    assert analyze_small(tmp_path, out, 0o022).returncode == 0
    os.chmod(out, 0o600)
    assert analyze_small(tmp_path, out, 0o022).returncode == 0
    assert os.stat(out).st_mode & 0o7777 == 0o600
    os.chmod(out, 0o664)
    assert analyze_small(tmp_path, out, 0o077).returncode == 0
    assert os.stat(out).st_mode & 0o7777 == 0o664


def test_inline_profile_honours_the_umask(tmp_path):
    prog = WORKLOADS and os.path.join(WORKLOADS, "chase-inline")
    if not prog or not os.path.exists(prog):
        pytest.skip("no instrumented workloads in this build")
    for umask, mode in ((0o077, 0o600), (0o022, 0o644)):
        out = tmp_path / ("inline-%o.lomas" % umask)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LOMAS_OUTPUT": str(out)}
        r = subprocess.run([prog, "1024", "20000"], env=env, capture_output=True, timeout=120,
                           preexec_fn=lambda u=umask: os.umask(u))
        assert r.returncode == 0, r.stderr
        assert os.stat(out).st_mode & 0o7777 == mode


# ------------------------------------------------------ a full file system

FULL_FS = r"""
set -u
dir="$1"; shift
mount -t tmpfs -o size=64k tmpfs "$dir" || exit 90
cp "$OLD" "$dir/p.lomas"
"$@" >"$OUTDIR/stdout" 2>"$OUTDIR/stderr"
echo $? >"$OUTDIR/status"
cmp -s "$OLD" "$dir/p.lomas" && echo same >"$OUTDIR/old" || echo changed >"$OUTDIR/old"
ls -A "$dir" >"$OUTDIR/ls"
"""


def on_full_fs(tmp_path, argv, env=None):
    """Run argv with $DIR (a 64 KiB tmpfs holding an old profile at p.lomas) in
    its arguments; returns (status, stdout, stderr, old file unchanged, ls)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("mounting a small tmpfs needs root and unshare(1)")
    mnt, outdir = tmp_path / "mnt", tmp_path / "out"
    mnt.mkdir()
    outdir.mkdir()
    old = tmp_path / "old.lomas"
    write_profile(old, *uniform(20, 100.0)[:3])
    script = tmp_path / "full.sh"
    script.write_text(FULL_FS)
    argv = [str(a).replace("$DIR", str(mnt)) for a in argv]
    full_env = dict(env if env is not None else os.environ, OLD=str(old), OUTDIR=str(outdir))
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", str(script),
                        str(mnt), *argv], env=full_env, capture_output=True, timeout=300)
    if r.returncode == 90 or not (outdir / "status").exists():
        pytest.skip("cannot mount a tmpfs here: %s" % r.stderr.decode(errors="replace"))
    read = lambda n: (outdir / n).read_bytes()  # noqa: E731
    return (int(read("status")), read("stdout"), read("stderr").decode(errors="replace"),
            read("old").strip() == b"same", read("ls").decode().split())


def test_analyze_onto_a_full_disk(tmp_path):
    trace = tmp_path / "big.lackey"
    trace.write_text("".join(" L %x,8\n" % (0x100000 + 64 * ((i * 7919) % 20000))
                             for i in range(200000)))
    status, _, err, same, ls = on_full_fs(tmp_path, [DEMO, "analyze", "--lackey", trace, "-o",
                                                     "$DIR/p.lomas", "--period", 2])
    assert status == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lomas-demo: analyze: "), err
    assert "/p.lomas" in lines[0] and "No space left on device" in lines[0], err
    assert same and ls == ["p.lomas"]  # the old profile as it was, no temporary file


def test_record_onto_a_full_disk(tmp_path):
    t_loop = TARGETS and os.path.join(TARGETS, "t_loop")
    if not t_loop or not os.path.exists(t_loop):
        pytest.skip("LOMAS_TARGETS has no t_loop")
    status, out, err, same, ls = on_full_fs(tmp_path, [DEMO, "record", "--clock", "step",
                                                       "--period", 1, "-o", "$DIR/p.lomas",
                                                       "--", t_loop, 40])
    assert status == 125, err  # lomas itself failed
    assert "No space left on device" in err and "/p.lomas" in err, err
    assert same and ls == ["p.lomas"]


def test_instrumented_program_saves_onto_a_full_disk(tmp_path):
    """The inline runtime's save at exit: the program's own output and exit
    status as without us, one clear line on stderr, nothing left behind."""
    if not WORKLOADS or not os.path.exists(os.path.join(WORKLOADS, "chase-inline")):
        pytest.skip("no instrumented workloads in this build")
    args = ["4096", "300000"]
    plain = subprocess.run([os.path.join(WORKLOADS, "chase-clang"), *args], capture_output=True,
                           timeout=120)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LOMAS_OUTPUT": "$DIR/p.lomas",
           "LOMAS_PERIOD": "20"}
    script_env = dict(env)
    status, out, err, same, ls = on_full_fs(
        tmp_path, ["env", "LOMAS_OUTPUT=$DIR/p.lomas", "LOMAS_PERIOD=20",
                   os.path.join(WORKLOADS, "chase-inline"), *args], env=script_env)
    assert status == plain.returncode == 0, err
    assert out == plain.stdout
    lines = err.splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], err
    assert same and ls == ["p.lomas"]
