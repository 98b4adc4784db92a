"""Run examples/embed and check its curve: the header, one line per size, miss
ratios in [0, 1] and non-increasing, LRU ~1 below the loop's 256 KiB and ~0
above it (a cyclic sweep: every reuse is at stack distance 4096 lines)."""
import subprocess
import sys

out = subprocess.run([sys.argv[1]], capture_output=True, text=True, check=False)
if out.returncode != 0:
    sys.exit(f"embed exited {out.returncode}: {out.stderr}")
lines = out.stdout.splitlines()
if len(lines) != 6 or lines[0] != "size_bytes,random,lru":
    sys.exit(f"expected a header and 5 rows, got:\n{out.stdout}")
rows = [tuple(float(x) for x in line.split(",")) for line in lines[1:]]
for col in (1, 2):
    vals = [r[col] for r in rows]
    if any(not 0.0 <= v <= 1.0 for v in vals):
        sys.exit(f"a miss ratio outside [0, 1]: {vals}")
    if any(b > a + 1e-9 for a, b in zip(vals, vals[1:])):
        sys.exit(f"a curve that rises with the cache size: {vals}")
for size, _, lru in rows:
    want = 1.0 if size < 256 * 1024 else 0.0
    if abs(lru - want) > 0.05:
        sys.exit(f"LRU at {size:.0f} bytes is {lru}, expected about {want}")
print(out.stdout, end="")
