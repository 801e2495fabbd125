"""One measurement of benches/python_sdk.sh: read N small files or one big file from
Python, through the SDK (`sdk META-URL`) or through a mount (`fs DIR`). Prints one JSON
line: seconds, files/s or MiB/s, and the process's CPU seconds."""

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


def main():
    how, where, workload = sys.argv[1], sys.argv[2], sys.argv[3]
    count = int(os.environ.get("FILES", "10000"))
    client = None
    if how == "sdk":
        import strata
        client = strata.Client(where, cache_size=0, no_bgjob=True)
        open_file = lambda p: client.open("/" + p, "rb")  # noqa: E731
    else:
        open_file = lambda p: open(os.path.join(where, p), "rb")  # noqa: E731
    if workload == "small":
        names = [f"small/d{i // 1000}/f{i}" for i in range(count)]
        seconds, total = small(open_file, names)
        rate = {"files_per_s": round(count / seconds)}
    else:
        seconds, total = big(open_file, "big/one.bin")
        rate = {"mib_per_s": round(total / seconds / (1 << 20))}
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"how": how, "workload": workload, "seconds": round(seconds, 3),
                      "bytes": total, "cpu_s": round(cpu.ru_utime + cpu.ru_stime, 2),
                      **rate}))
    if client is not None:
        client.close()


if __name__ == "__main__":
    main()
