"""The ctypes mirrors of the public structs against what a C compiler says:
compile a program that prints each struct's size ("TYPE - SIZE") and each
field's offset ("TYPE FIELD OFFSET"), and compare with the ctypes types.
Shared by the binding tests (test_bindings.py, test_hot.py)."""

import ctypes
import os
import shutil
import subprocess

import pytest


def check_layouts(tmp_path, source_root, c_source, types):
    """Compile and run c_source; every size and offset it prints must equal
    the ctypes type's in types (name -> type). Returns how many were checked."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler to compare the layouts with")
    src = tmp_path / "layout.c"
    src.write_text(c_source)
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-DLOMAS_EXPERIMENTAL", "-I", os.path.join(source_root, "include"), "-o", str(exe),
                    str(src)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    checked = 0
    for line in out.splitlines():
        t, field, value = line.split()
        ct = types[t]
        if field == "-":
            assert ctypes.sizeof(ct) == int(value), t
        else:
            assert getattr(ct, field).offset == int(value), (t, field)
        checked += 1
    return checked
