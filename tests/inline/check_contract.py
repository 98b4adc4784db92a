#!/usr/bin/env python3
"""The inline clock's contract (lib/inline/contract.h, include/lomas/inline.h)
against what was built, where no compiler checks it:

  - the runtime (liblomas-inline.a, liblomas-inline.so) defines every symbol
    the contract names, and keeps visible exactly LOMAS_ABI_EXPORTS;
  - code the pass plugin wrote (contract_probe.c as LLVM IR) names only
    runtime symbols of the contract, and declares lomas__filter with the
    contract's size, which is the size the runtime's symbol has;
  - the runtime reads exactly the LOMAS_* variables inline.h names, and
    the session backend sets only those.

Usage: check_contract.py SOURCE_ROOT CLANG LLVM_NM STATIC_A SHARED_SO [PROBE_LL]
Exit 0 when everything agrees, 1 with one line per disagreement."""

import re
import subprocess
import sys


def macros(clang, src, header, names):
    """The values of names (string literals joined, or integers) as the C
    preprocessor sees them in header."""
    # Markers by index: a macro's own name in the marker would be expanded too.
    text = "#include \"%s\"\n" % header + "".join("@%d@ %s\n" % (i, n)
                                                   for i, n in enumerate(names))
    out = subprocess.run([clang, "-E", "-P", "-I", src + "/lib", "-I", src + "/include",
                          "-x", "c", "-"], input=text, capture_output=True, text=True,
                         check=True).stdout
    vals = {}
    for i, n in enumerate(names):
        m = re.search(r"@%d@(.*)" % i, out)
        v = m.group(1).strip()
        if v.startswith('"'):
            v = "".join(re.findall(r'"([^"]*)"', v))
        else:
            v = str(eval(v.replace("u", "")))  # (1 << 16) + 8u and the like
        vals[n] = v
    return vals


def defined(nm, path, dynamic):
    """name -> size (or None) of the global symbols path defines (upper-case
    types: a hidden helper internalized by build-lto.sh is local, 't')."""
    args = [nm, "--defined-only", "-S"] + (["-D"] if dynamic else []) + [path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2 or not f[-2].isupper():
            continue
        size = f[-3] if len(f) >= 4 else ""
        syms[f[-1]] = int(size, 16) if re.fullmatch(r"[0-9a-fA-F]+", size) else None
    return syms


def main():
    src, clang, llvm_nm, static_a, shared_so = sys.argv[1:6]
    probe = sys.argv[6] if len(sys.argv) > 6 and sys.argv[6] else None
    bad = []
    syms = ["LOMAS_ABI_FAST", "LOMAS_ABI_FILTER", "LOMAS_ABI_SLOW", "LOMAS_ABI_SLOW_PM",
            "LOMAS_ABI_RANGE_CLEAN"]
    c = macros(clang, src, "inline/contract.h",
               syms + ["LOMAS_ABI_EXPORTS", "LOMAS_ABI_FILTER_SIZE", "LOMAS_ABI_FILTER_PAD"])
    names = {c[s] for s in syms}
    exports = set(c["LOMAS_ABI_EXPORTS"].split(","))
    filter_bytes = int(c["LOMAS_ABI_FILTER_SIZE"]) + int(c["LOMAS_ABI_FILTER_PAD"])
    if not names <= exports:
        bad.append("LOMAS_ABI_EXPORTS lacks %s" % sorted(names - exports))

    # The static runtime: every contract symbol defined and kept visible;
    # no other lomas__ symbol survives internalization.
    st = defined(llvm_nm, static_a, False)
    for n in sorted(names - set(st)):
        bad.append("liblomas-inline.a does not define %s" % n)
    extra = {s for s in st if s.startswith("lomas__")} - names
    if extra:
        bad.append("liblomas-inline.a exports lomas__ symbols the contract does not name: %s"
                   % sorted(extra))
    # The shared runtime (gcc-built: no preserve_most entry) and the filter's size.
    sh = defined("nm", shared_so, True)
    for n in sorted(names - {c["LOMAS_ABI_SLOW_PM"]} - set(sh)):
        bad.append("liblomas-inline.so does not define %s" % n)
    if sh.get(c["LOMAS_ABI_FILTER"]) not in (None, filter_bytes):
        bad.append("liblomas-inline.so's %s is %d bytes, the contract says %d"
                   % (c["LOMAS_ABI_FILTER"], sh[c["LOMAS_ABI_FILTER"]], filter_bytes))

    # Code the pass wrote: the runtime symbols it names, the filter's type.
    if probe:
        ir = open(probe).read()
        used = set(re.findall(r"@(lomas__\w+)", ir))
        if not used:
            bad.append("%s names no lomas__ symbol: was it built with the pass?" % probe)
        for n in sorted(used - names):
            bad.append("the pass names %s, which the contract does not" % n)
        for n in sorted(used - set(st)):
            bad.append("the pass names %s, which the static runtime does not define" % n)
        m = re.search(r"@%s = external thread_local\(initialexec\) global \[(\d+) x i8\]"
                      % c["LOMAS_ABI_FILTER"], ir)
        if not m:
            bad.append("the pass does not declare %s as initial-exec TLS bytes"
                       % c["LOMAS_ABI_FILTER"])
        elif int(m.group(1)) != filter_bytes:
            bad.append("the pass's %s is %s bytes, the contract says %d"
                       % (c["LOMAS_ABI_FILTER"], m.group(1), filter_bytes))

    # The environment: inline.h's LOMAS_ENV_* against the runtime's reads.
    header = open(src + "/include/lomas/inline.h").read()
    env = set(re.findall(r'#define LOMAS_ENV_\w+ "(LOMAS_\w+)"', header))
    runtime = open(src + "/lib/inline/runtime_env.c").read()
    read = set(re.findall(r'getenv\("(LOMAS_\w+)"\)', runtime))
    for v in sorted(env - read):
        bad.append("inline.h names %s, which runtime_env.c does not read" % v)
    for v in sorted(read - env):
        bad.append("runtime_env.c reads %s, which inline.h does not name" % v)
    backend = open(src + "/lib/session/backend_inline.c").read()
    for v in sorted(set(re.findall(r'"(LOMAS_[A-Z_]+)"', backend)) - env):
        bad.append("the inline session backend sets %s, which inline.h does not name" % v)

    for b in bad:
        print("contract:", b)
    print("contract: %d symbols, %d exports, %d-byte filter, %d variables: %s"
          % (len(names), len(exports), filter_bytes, len(env), "drift" if bad else "agree"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
