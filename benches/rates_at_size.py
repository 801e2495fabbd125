#!/usr/bin/env python3
"""Metadata operation rates and latencies through a mount, for benches/rates-at-size.sh:
readdir of LEAVES random 1,000-entry leaf directories of the generated tree under /wide,
lookups (stat) of random existing files in those leaves, and create, stat, unlink of OPS
new files in a fresh directory.

It runs in three phases, each in a fresh mount (the script remounts between them), so
that no listing or lookup is answered from the mount's metadata cache at one size and
from the engine at another: a small volume's few leaves all fit the cache (session 37
found the 10k rows of earlier runs answered from it, the 100M rows from the engine).
  discover: pick the leaves (listing them on the way) and write them to STATE.
  listings: list each leaf once (timed) and write the names to STATE.
  rest:     stat random files of those leaves (timed), then create, stat and unlink OPS
            new files; print one JSON line: per operation, the rate (ops/s) and the
            p50/p99 latency (ms).

Usage: rates_at_size.py PHASE MOUNT STATE OPS LEAVES SEED
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
    phase, mnt, state_file = sys.argv[1], sys.argv[2], sys.argv[3]
    ops, leaves_wanted, seed = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    rng = random.Random(seed)
    if phase == "discover":
        leaves = leaf_dirs(os.path.join(mnt, "wide"), leaves_wanted, rng)
        save(state_file, {"leaves": [os.path.relpath(d, mnt) for d in leaves]})
        return
    state = json.load(open(state_file))
    leaves = [os.path.join(mnt, d) for d in state["leaves"]]
    warm_up(leaves)
    if phase == "listings":
        listed = {}

        def readdir(d):
            listed[d] = os.listdir(d)

        state["readdir"] = timed(readdir, leaves)
        state["names"] = {os.path.relpath(d, mnt): names for d, names in listed.items()}
        save(state_file, state)
        return
    names = {os.path.join(mnt, d): n for d, n in state["names"].items()}
    out = {"readdir": state["readdir"]}
    picks = [os.path.join(d, rng.choice(names[d])) for d in leaves for _ in range(ops // len(leaves))]
    out["lookup"] = timed(os.stat, picks)
    work = os.path.join(mnt, "rates-%d" % seed)
    os.mkdir(work)
    new = [os.path.join(work, "n%06d" % i) for i in range(ops)]
    out["create"] = timed(lambda p: os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)), new)
    out["stat"] = timed(os.stat, new)
    out["unlink"] = timed(os.unlink, new)
    os.rmdir(work)
    print(json.dumps(out))


def warm_up(leaves):
    """List the leaves' parents (never a leaf): the fresh mount's first requests open its
    engine connections, which the timed operations should not pay for."""
    for d in sorted({os.path.dirname(leaf) for leaf in leaves}):
        os.listdir(d)


def save(path, state):
    with open(path, "w") as f:
        json.dump(state, f)


if __name__ == "__main__":
    main()
