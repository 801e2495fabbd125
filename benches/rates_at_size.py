#!/usr/bin/env python3
"""Metadata operation rates and latencies through a mount, for benches/rates-at-size.sh:
create, stat, unlink of OPS new files in a fresh directory, readdir of LEAVES random
1,000-entry leaf directories of the generated tree under /wide (cold: the mount runs
with its caches off), and lookups (stat) of random existing files in those leaves.
Prints one JSON line: per operation, the rate (ops/s) and the p50/p99 latency (ms).

Usage: rates_at_size.py MOUNT OPS LEAVES SEED
"""
import json
import os
import random
import sys
import time


def timed(fn, items):
    lat = []
    t0 = time.perf_counter()
    for item in items:
        s = time.perf_counter()
        fn(item)
        lat.append(time.perf_counter() - s)
    total = time.perf_counter() - t0
    lat.sort()
    return {
        "rate": round(len(items) / total, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 3),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 3),
    }


def leaf_dirs(top, want, rng):
    """`want` random leaf directories (those holding files), by random descent."""
    leaves = set()
    listings = {}
    tries = 0
    while len(leaves) < want and tries < want * 20:
        tries += 1
        d = top
        while True:
            if d not in listings:
                listings[d] = sorted(os.listdir(d))
            names = listings[d]
            if not names or names[0].startswith("f"):
                break
            d = os.path.join(d, rng.choice(names))
        leaves.add(d)
    return sorted(leaves)


def main():
    mnt, ops, leaves_wanted, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    top = os.path.join(mnt, "wide")
    # Leaves are picked by listing the levels above them (not timed).
    leaves = leaf_dirs(top, leaves_wanted, rng)
    listed = {}

    def readdir(d):
        listed[d] = os.listdir(d)

    out = {"readdir": timed(readdir, leaves)}
    picks = [os.path.join(d, rng.choice(listed[d])) for d in leaves for _ in range(ops // len(leaves))]
    out["lookup"] = timed(os.stat, picks)
    work = os.path.join(mnt, "rates-%d" % seed)
    os.mkdir(work)
    names = [os.path.join(work, "n%06d" % i) for i in range(ops)]
    out["create"] = timed(lambda p: os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)), names)
    out["stat"] = timed(os.stat, names)
    out["unlink"] = timed(os.unlink, names)
    os.rmdir(work)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
