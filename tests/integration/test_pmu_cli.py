"""The pmu clock's command-line face (issue 20, items 6 and 7): `lomas-demo info`
(text, --json, --pmu NAME) and record's capability errors: exit 125 with one line
naming the cause and the clock to use, nothing run; --clock auto says which clock
it chose. On a machine with a PMU the no-PMU cases are skipped."""
import json
import os
import subprocess

import pytest

DEMO = os.environ["LOMAS_DEMO"]
TARGETS = os.environ.get("LOMAS_TARGETS")

needs_targets = pytest.mark.skipif(not TARGETS, reason="LOMAS_TARGETS not set")


def demo(*args):
    return subprocess.run([DEMO, *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def info():
    r = demo("info", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def works(name):
    return next(c for c in info()["clocks"] if c["name"] == name)["works"]


def pmu_works():
    return works("pmu")


def fallback():
    """The clock record names for a program without the inline hooks (docs/architecture.md, the clocks:
    dbi where Valgrind and the tool are, else step)."""
    return "dbi" if works("dbi") else "step"


def test_info_lists_every_clock_and_why_not():
    d = info()
    names = [c["name"] for c in d["clocks"]]
    assert {"pmu", "step", "inline", "trace"} <= set(names)
    for c in d["clocks"]:
        assert isinstance(c["works"], bool)
        if not c["works"]:
            assert c["why"] and "\n" not in c["why"]
    assert d["perf_event_paranoid"] == int(open("/proc/sys/kernel/perf_event_paranoid").read())
    # Text: one line per clock, the caches of this machine.
    r = demo("info")
    assert r.returncode == 0
    for n in names:
        assert f"  {n} " in r.stdout
    assert "caches:" in r.stdout


@pytest.mark.parametrize("pmu, events", [
    ("nhm", [("load", 0x0b, 0x01), ("store", 0x0b, 0x02)]),
    ("skl", [("load", 0xd0, 0x81), ("store", 0xd0, 0x82)]),
    ("amd64_fam19h_zen3", [("load", 0x29, 0x01), ("store", 0x29, 0x02)]),
])
def test_info_pmu_tables(pmu, events):
    """--pmu NAME: that PMU's events; event select and umask as the vendors document."""
    r = demo("info", "--json", "--pmu", pmu)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["pmu"]["name"] == pmu and d["pmu"]["forced"]
    got = [(e["kind"], int(e["config"], 16) & 0xff, int(e["config"], 16) >> 8 & 0xff)
           for e in d["pmu"]["events"]]
    assert got == events
    assert d["pmu"]["approximate"] == pmu.startswith("amd64")
    # A forced table is not this machine's: the pmu clock is not offered on it.
    assert not next(c for c in d["clocks"] if c["name"] == "pmu")["works"]


@pytest.mark.parametrize("formats,want", [
    ({"cnt_ctl": "config:19", "swfilt": "config2:0"}, "IBS op (ops; kernel samples filtered"),
    ({"cnt_ctl": "config:19"}, "IBS op (ops; kernel samples dropped by lomas)"),
    ({}, "none (IBS op counts cycles only here)"),
])
def test_info_precise_ibs(tmp_path, formats, want):
    """Which unit --pmu-sample precise uses: an AMD kernel's ibs_op PMU (sysfs) and its format."""
    fmt = tmp_path / "bus" / "event_source" / "devices" / "ibs_op" / "format"
    fmt.mkdir(parents=True)
    (fmt.parent / "type").write_text("11\n")
    for name, text in formats.items():
        (fmt / name).write_text(text + "\n")
    r = subprocess.run([DEMO, "info", "--json", "--pmu", "amd64_fam19h_zen3"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, LOMAS_SYSFS_ROOT=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)["pmu"]
    assert d["ibs_op"] and d["precise"].startswith(want)
    r = demo("info", "--json", "--pmu", "skl")
    assert json.loads(r.stdout)["pmu"]["precise"] == "PEBS with the data address"


def test_info_bad_pmu():
    r = demo("info", "--pmu", "no_such_pmu")
    assert r.returncode == 2
    assert "no_such_pmu" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = demo("info", "--pmu", "list", "--json")
    assert r.returncode == 0
    names = [p["name"] for p in json.loads(r.stdout)["pmus"]]
    assert "nhm" in names and "skl" in names


@needs_targets
def test_record_pmu_without_pmu_is_125_and_runs_nothing(tmp_path):
    if pmu_works():
        pytest.skip("this machine has a PMU")
    marker = tmp_path / "ran"
    r = demo("record", "-o", tmp_path / "p.lomas", "--clock", "pmu", "--",
             os.path.join(TARGETS, "t_marker"), marker)
    assert r.returncode == 125
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "PMU" in lines[0] or "perf_event_paranoid" in lines[0]
    assert f"--clock={fallback()}" in lines[0]
    assert not marker.exists()
    assert not (tmp_path / "p.lomas").exists()


def test_record_pmu_true_is_125(tmp_path):
    if pmu_works():
        pytest.skip("this machine has a PMU")
    r = demo("record", "-o", tmp_path / "p.lomas", "--clock", "pmu", "--", "/bin/true")
    assert r.returncode == 125
    assert len(r.stderr.strip().splitlines()) == 1


@needs_targets
def test_record_unknown_event_is_125(tmp_path):
    marker = tmp_path / "ran"
    r = demo("record", "-o", tmp_path / "p.lomas", "--clock", "pmu", "--events",
             "NO_SUCH_EVENT", "--", os.path.join(TARGETS, "t_marker"), marker)
    assert r.returncode == 125
    assert len(r.stderr.strip().splitlines()) == 1 and "NO_SUCH_EVENT" in r.stderr
    assert not marker.exists()


@needs_targets
def test_record_auto_says_which_clock(tmp_path):
    marker = tmp_path / "ran"
    r = demo("record", "-o", tmp_path / "p.lomas", "--clock", "auto", "--",
             os.path.join(TARGETS, "t_marker"), marker, 3)
    assert r.returncode == 3
    chosen = "pmu" if pmu_works() else fallback()
    assert f"--clock auto: using the {chosen} clock" in r.stderr
    assert marker.exists()
