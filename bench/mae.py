#!/usr/bin/python3
"""One line of an accuracy table: the mean absolute error, in percentage points, of a
model curve against an exact one (lomas-demo curve / exactsim CSVs) over the sizes
both hold, per policy.
    mae.py NAME REFS SAMPLES MODEL.csv EXACT.csv"""
import csv
import sys

name, refs, samples, model, exact = sys.argv[1:]
m = {int(r["size_bytes"]): r for r in csv.DictReader(open(model))}
e = {int(r["size_bytes"]): r for r in csv.DictReader(open(exact))}
sizes = [s for s in m if s in e and 4096 <= s <= 64 << 20]
mae = {pol: 100 * sum(abs(float(m[s][pol]) - float(e[s][pol])) for s in sizes) / len(sizes)
       for pol in ("random", "lru")}
print(f"{name:8s} {refs:>10s} {samples:>9s} {mae['random']:10.3f}pp {mae['lru']:10.3f}pp")
