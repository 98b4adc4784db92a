"""Hand-built profile files for tests, written from docs/profile-format.md
with struct and zlib only (never liblomas's encoder), so that a test can
give the reader what no writer of ours would: weights near the largest
double, clocks and counts near 2**64, metadata with control characters.

Used by tests/python and tests/integration (which adds this folder to
sys.path).
"""

import struct
import zlib

U64_MAX = (1 << 64) - 1
NONE = U64_MAX  # the end of a dangling sample

REUSED, DANGLING, CENSORED = 0, 1, 2
LOAD, STORE = 0, 1


def sample(start, end, weight, thread=0, window=0, state=REUSED, addr=0x1000, start_pc=0x400000,
           end_pc=0x400010, kind=LOAD, flags=0):
    """One lomas_sample as a tuple in file order."""
    return (start, end, addr, start_pc, end_pc, weight, thread, window, kind, state, flags)


def _strings(pairs):
    out = struct.pack("<I", len(pairs))
    for k, v in pairs:
        k = k.encode("utf-8", "surrogateescape") if isinstance(k, str) else k
        v = v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v
        out += struct.pack("<I", len(k)) + k + struct.pack("<I", len(v)) + v
    return out


def profile_bytes(threads, windows, samples, line_size=64, meta=()):
    """A format 2.0 file: threads [(tid, refs)], windows [(start, refs,
    thread)], samples (see sample()) in a SAMPLES section, meta [(key,
    value)] (str or bytes)."""
    secs = [(2, struct.pack("<II", line_size, 0))]
    if meta:
        secs.append((1, _strings(list(meta))))
    secs.append((4, struct.pack("<Q", len(threads))
                 + b"".join(struct.pack("<QQ", tid, refs) for tid, refs in threads)))
    secs.append((5, struct.pack("<Q", len(windows))
                 + b"".join(struct.pack("<QQII", s, r, t, 0) for s, r, t in windows)))
    secs.append((6, struct.pack("<Q", len(samples))
                 + b"".join(struct.pack("<5QdIIBBHI", *s, 0) for s in samples)))
    table_off = 32
    at = table_off + 32 * len(secs)
    table, body = b"", b""
    for typ, payload in secs:
        pad = (-at) % 8
        body += b"\0" * pad
        at += pad
        table += struct.pack("<IIQQII", typ, 0, at, len(payload), zlib.crc32(payload), 0)
        body += payload
        at += len(payload)
    header = b"LOMASPRF" + struct.pack("<IIIIQ", 0x00020000, 0, len(secs), zlib.crc32(table),
                                       table_off)
    return header + table + body


def write_profile(path, threads, windows, samples, **kw):
    with open(path, "wb") as f:
        f.write(profile_bytes(threads, windows, samples, **kw))
    return path


def uniform(n, weight, distance=1000, refs=None, meta=()):
    """(threads, windows, samples, meta) of one thread and window holding n
    samples of the same weight: reused at distance, one in 4 dangling."""
    refs = refs if refs is not None else max(n * 2000, 1)
    samples = []
    for i in range(n):
        start = i * 7
        if i % 4 == 3:
            samples.append(sample(start, NONE, weight, state=DANGLING, end_pc=0,
                                  addr=0x10000 + 64 * i))
        else:
            samples.append(sample(start, start + 1 + distance * (1 + i % 5), weight,
                                  addr=0x10000 + 64 * i))
    return [(1, refs)], [(0, refs, 0)], samples, meta
