#!/usr/bin/env python3
"""The pause applications see while a mount is handed over, restarted or re-mounted.

Usage: handover_probe.py MOUNTPOINT ROUNDS -- COMMAND...
Runs COMMAND (which must replace the process serving MOUNTPOINT: a new `mount` on the
same mount point, or a kill of the serving process) ROUNDS times, 0.5 s apart, while a
thread opens and fstats a file in MOUNTPOINT in a loop and a second one reads 4 KiB at a
random offset of a 64 MiB file (opened once) with O_DIRECT. Prints, per round, the longest
probe that overlapped the command and whether any probe failed, then p50/p99/max.
WRITE_MIB=N also has a third thread keep N MiB written and unflushed (no fsync) in a file,
so each hand-over commits them.
"""
import mmap, os, random, sys, threading, time

mnt, rounds, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[sys.argv.index("--") + 1:]
write_mib = int(os.environ.get("WRITE_MIB", "0"))
probe_file = os.path.join(mnt, "probe")
data_file = os.path.join(mnt, "probe.dat")
open(probe_file, "w").close()
if not os.path.exists(data_file):
    with open(data_file, "wb") as f:
        f.write(os.urandom(64 << 20))
stop = False
samples = []  # (start, took, ok)
lock = threading.Lock()


def stat_loop():
    while not stop:
        t = time.monotonic()
        ok = True
        try:
            fd = os.open(probe_file, os.O_RDONLY)
            os.fstat(fd)
            os.close(fd)
        except OSError:
            ok = False
        with lock:
            samples.append((t, time.monotonic() - t, ok))


def read_loop():
    fd = os.open(data_file, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    while not stop:
        t = time.monotonic()
        ok = True
        try:
            os.preadv(fd, [buf], random.randrange(0, (64 << 20) // 4096) * 4096)
        except OSError:
            ok = False
        with lock:
            samples.append((t, time.monotonic() - t, ok))


def write_loop():
    with open(os.path.join(mnt, "unflushed"), "wb", buffering=0) as f:
        chunk = os.urandom(1 << 20)
        while not stop:
            f.seek(0)
            for _ in range(write_mib):
                f.write(chunk)
            time.sleep(0.05)


threads = [threading.Thread(target=stat_loop), threading.Thread(target=read_loop)]
if write_mib:
    threads.append(threading.Thread(target=write_loop))
for t in threads:
    t.start()
windows = []
for _ in range(rounds):
    time.sleep(0.5)
    start = time.monotonic()
    os.spawnvp(os.P_WAIT, cmd[0], cmd)
    # Until the mount answers again (a restart returns before the new process serves).
    while True:
        try:
            os.stat(os.path.join(mnt, ".config"))
            break
        except OSError:
            time.sleep(0.001)
    windows.append((start, time.monotonic()))
time.sleep(0.5)
stop = True
for t in threads:
    t.join()
pauses, failures = [], 0
for a, b in windows:
    hits = [s for s in samples if s[0] <= b and s[0] + s[1] >= a]
    pauses.append(max((s[1] for s in hits), default=0.0))
    failures += sum(1 for s in hits if not s[2])
pauses.sort()
ms = lambda x: f"{x * 1000:.1f} ms"
print(f"{rounds} rounds, {len(samples)} probes, {failures} failed; pause p50 {ms(pauses[len(pauses) // 2])}, "
      f"p99 {ms(pauses[min(len(pauses) - 1, len(pauses) * 99 // 100)])}, max {ms(pauses[-1])}")
