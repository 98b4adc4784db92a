#!/usr/bin/python3
"""Errors of a model curve against an exact one (lomas-demo curve / exactsim CSVs),
in percentage points over the sizes both hold from 4 KiB to 64 MiB, per policy: the
mean absolute error, the largest error and the size where it is.
    curve_error.py [--header] NAME EXTRA MODEL.csv EXACT.csv
EXTRA is printed as it is after the name (e.g. "MEDIUM trace 1234567 5000").
With --header, prints the column names first."""
import csv
import sys

args = sys.argv[1:]
if args and args[0] == "--header":
    args = args[1:]
    print(f"{'program':14s} {'info':34s} {'rnd MAE':>8s} {'rnd max':>8s} {'at':>7s} "
          f"{'lru MAE':>8s} {'lru max':>8s} {'at':>7s}")
    if not args:
        sys.exit(0)
name, extra, model, exact = args


def size_str(b):
    if b >= 1 << 20:
        return f"{b / (1 << 20):.3g}M"
    return f"{b / 1024:.3g}K"


m = {int(r["size_bytes"]): r for r in csv.DictReader(open(model))}
e = {int(r["size_bytes"]): r for r in csv.DictReader(open(exact))}
sizes = sorted(s for s in m if s in e and 4096 <= s <= 64 << 20)
if not sizes:
    sys.exit("curve_error.py: no common sizes from 4 KiB to 64 MiB")
out = f"{name:14s} {extra:34s}"
for pol in ("random", "lru"):
    errs = [(100 * (float(m[s][pol]) - float(e[s][pol])), s) for s in sizes]
    mae = sum(abs(x) for x, _ in errs) / len(errs)
    worst = max(errs, key=lambda t: abs(t[0]))
    out += f" {mae:8.3f} {worst[0]:+8.2f} {size_str(worst[1]):>7s}"
print(out)
