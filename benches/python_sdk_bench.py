"""Measurements of benches/python_sdk.sh: read N small files or one big file from
Python, through the SDK (`sdk META-URL`) or through a mount (`fs DIR`), in one long-lived
process as a data loader would: one unmeasured pass, then PASSES measured ones, the
kernel's page cache dropped before each when `cold`. Prints one JSON line per pass:
seconds, files/s or MiB/s, and the CPU seconds of the pass."""

import json
import os
import resource
import sys
import time


def small(open_file, names):
    t = time.perf_counter()
    total = 0
    for name in names:
        with open_file(name) as f:
            total += len(f.read())
    return time.perf_counter() - t, total


def big(open_file, name, piece=4 << 20):
    t = time.perf_counter()
    total = 0
    with open_file(name) as f:
        while data := f.read(piece):
            total += len(data)
    return time.perf_counter() - t, total


def random_reads(open_raw, size, reads):
    """`reads` reads of `size` bytes at random aligned offsets of the 1 GiB file."""
    import random
    rng = random.Random(size)
    offsets = [rng.randrange((1 << 30) // size) * size for _ in range(reads)]
    f = open_raw("big/one.bin")
    t = time.perf_counter()
    total = 0
    for off in offsets:
        total += len(f.pread(size, off))
    seconds = time.perf_counter() - t
    f.close()
    return seconds, total


class _FdFile:
    """os.pread on a descriptor of a mount (what a random reader through FUSE does)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY)

    def pread(self, size, off):
        return os.pread(self.fd, size, off)

    def close(self):
        os.close(self.fd)


class _SdkRaw:
    """An unbuffered SDK file: seek + read, as a random reader in Python does."""

    def __init__(self, f):
        self.f = f

    def pread(self, size, off):
        self.f.seek(off)
        return self.f.read(size)

    def close(self):
        self.f.close()


RANDOM = {"random4k": (4096, 3000), "random128k": (128 << 10, 1000)}


def one_pass(open_file, workload, count, open_raw=None):
    if workload in RANDOM:
        size, reads = RANDOM[workload]
        seconds, total = random_reads(open_raw, size, reads)
        return seconds, total, {"reads_per_s": round(reads / seconds)}
    if workload == "small":
        names = [f"small/d{i // 1000}/f{i}" for i in range(count)]
        seconds, total = small(open_file, names)
        return seconds, total, {"files_per_s": round(count / seconds)}
    seconds, total = big(open_file, "big/one.bin")
    return seconds, total, {"mib_per_s": round(total / seconds / (1 << 20))}


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main():
    how, where, workload, mode = sys.argv[1:5]
    count = int(os.environ.get("FILES", "10000"))
    passes = int(os.environ.get("RUNS", "3"))
    client = None
    if how == "sdk":
        import strata
        client = strata.Client(where, cache_size=0, no_bgjob=True)
        open_file = lambda p: client.open("/" + p, "rb")  # noqa: E731
        open_raw = lambda p: _SdkRaw(client.open("/" + p, "rb", buffering=0))  # noqa: E731
    else:
        open_file = lambda p: open(os.path.join(where, p), "rb")  # noqa: E731
        open_raw = lambda p: _FdFile(os.path.join(where, p))  # noqa: E731
    one_pass(open_file, workload, count, open_raw)
    for _ in range(passes):
        if mode == "cold":
            drop_caches()
        before = resource.getrusage(resource.RUSAGE_SELF)
        seconds, total, rate = one_pass(open_file, workload, count, open_raw)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(json.dumps({"how": how, "workload": workload, "seconds": round(seconds, 3),
                          "bytes": total, "cpu_s": round(cpu, 2), **rate}), flush=True)
    if client is not None:
        client.close()


if __name__ == "__main__":
    main()
