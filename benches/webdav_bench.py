#!/usr/bin/env python3
"""WebDAV client workloads for benches/webdav.sh (stdlib only, keep-alive connections).

  webdav_bench.py URL USER PASSWORD small THREADS OPS
      4 KiB PUTs then GETs of the same files, OPS in all over THREADS connections:
      ops/s, p50 and p99 latency of each.
  webdav_bench.py URL USER PASSWORD ranged PATH SIZE COUNT
      COUNT GETs of SIZE bytes at random offsets of the file PATH (one connection):
      ops/s, MiB/s, p50 and p99.
  webdav_bench.py URL USER PASSWORD propfind DIR ENTRIES
      make DIR with ENTRIES small files (16 connections), then PROPFIND Depth 1 of it,
      allprop and the properties file managers ask for: seconds (best of 3).
"""
import base64
import http.client
import sys
import threading
import time
import urllib.parse

URL, USER, PASSWORD, MODE = sys.argv[1:5]
parsed = urllib.parse.urlparse(URL)
AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def connect():
    return http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=600)


def request(conn, method, path, body=None, headers=None):
    h = {"Authorization": AUTH}
    h.update(headers or {})
    conn.request(method, path, body=body, headers=h)
    resp = conn.getresponse()
    data = resp.read()
    if resp.status >= 300 and resp.status != 207:
        raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
    return data


def in_threads(threads, work):
    """Run work(thread_index) in each thread; returns wall seconds."""
    errors = []

    def run(i):
        try:
            work(i)
        except Exception as e:  # reported below, the benchmark fails
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000


def small(threads, ops):
    per = ops // threads
    body = b"x" * 4096
    conn0 = connect()
    request(conn0, "MKCOL", "/bench-small/", headers={})
    lat = {"PUT": [], "GET": []}
    lock = threading.Lock()

    def phase(method):
        def work(i):
            conn = connect()
            mine = []
            for j in range(per):
                t = time.perf_counter()
                request(conn, method, f"/bench-small/t{i}-{j}", body if method == "PUT" else None)
                mine.append(time.perf_counter() - t)
            with lock:
                lat[method].extend(mine)
        return work

    for method in ("PUT", "GET"):
        secs = in_threads(threads, phase(method))
        n = per * threads
        print(f"4 KiB {method} threads={threads}: {n / secs:,.0f} ops/s "
              f"p50 {pct(lat[method], 0.5):.2f} ms p99 {pct(lat[method], 0.99):.2f} ms")


PROPS = ('<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop>'
         "<D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/>"
         "</D:prop></D:propfind>")


def propfind(directory, entries):
    conn0 = connect()
    request(conn0, "MKCOL", f"/{directory}/")
    per = entries // 16

    def make(i):
        conn = connect()
        for j in range(per):
            request(conn, "PUT", f"/{directory}/f{i}-{j}", b"1")

    in_threads(16, make)
    for label, body in (("allprop", None), ("named properties", PROPS)):
        best = None
        for _ in range(3):
            t = time.perf_counter()
            data = request(conn0, "PROPFIND", f"/{directory}/", body,
                           {"Depth": "1", "Content-Type": "application/xml"})
            secs = time.perf_counter() - t
            best = secs if best is None else min(best, secs)
        count = data.count(b"<D:response>") + data.count(b"<D:response ") \
            + data.count(b"<d:response>") + data.count(b"<D:response\n")
        print(f"PROPFIND Depth 1 of {per * 16:,} entries ({label}): {best:.3f} s "
              f"({count} responses, {len(data) >> 10} KiB)")


def ranged(path, size, count):
    import random
    conn = connect()
    conn.request("HEAD", path, headers={"Authorization": AUTH})
    resp = conn.getresponse()
    resp.read()
    length = int(resp.getheader("Content-Length"))
    rng = random.Random(1)
    lat = []
    start = time.perf_counter()
    for _ in range(count):
        off = rng.randrange(0, length - size) // 4096 * 4096
        t = time.perf_counter()
        data = request(conn, "GET", path, None, {"Range": f"bytes={off}-{off + size - 1}"})
        lat.append(time.perf_counter() - t)
        if len(data) != size:
            raise RuntimeError(f"range at {off}: {len(data)} bytes")
    secs = time.perf_counter() - start
    print(f"random {size >> 10} KiB ranged GET: {count / secs:,.0f} ops/s "
          f"{count * size / secs / 2**20:,.0f} MiB/s p50 {pct(lat, 0.5):.2f} ms "
          f"p99 {pct(lat, 0.99):.2f} ms")


if MODE == "small":
    small(int(sys.argv[5]), int(sys.argv[6]))
elif MODE == "ranged":
    ranged(sys.argv[5], int(sys.argv[6]), int(sys.argv[7]))
elif MODE == "propfind":
    propfind(sys.argv[5], int(sys.argv[6]))
else:
    sys.exit(f"unknown mode {MODE}")
