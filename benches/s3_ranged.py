"""Used by benches/s3_gateway.sh: random ranged GETs of one big object — the random-access
row of the gateway comparison. Uploads SIZE_MIB of random bytes to KEY, then issues N
GETs of RANGE bytes at random aligned offsets on one kept-alive connection, checking each
answer's bytes; prints ops/s, MiB/s and p50/p99 latency.

Usage: s3_ranged.py PORT BUCKET SIZE_MIB RANGE N (keys from S3_ACCESS_KEY / S3_SECRET_KEY)
"""

import http.client
import os
import random
import sys
import time

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

port, bucket = int(sys.argv[1]), sys.argv[2]
size, rng, count = int(sys.argv[3]) << 20, int(sys.argv[4]), int(sys.argv[5])
creds = Credentials(os.environ["S3_ACCESS_KEY"], os.environ["S3_SECRET_KEY"])
base = "http://127.0.0.1:%d" % port
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
path = "/%s/ranged-bench.bin" % bucket


def call(method, headers=None, body=None):
    req = AWSRequest(method=method, url=base + path, data=body, headers=headers or {})
    S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    prepared = req.prepare()
    conn.request(method, path, body=body, headers=dict(prepared.headers))
    resp = conn.getresponse()
    data = resp.read()
    if resp.status not in (200, 206):
        sys.exit("HTTP %d: %s" % (resp.status, data[:300]))
    return data


data = os.urandom(size)
call("PUT", body=data)
latencies = []
started = time.time()
for _ in range(count):
    off = random.randrange(0, size // rng) * rng
    t = time.time()
    got = call("GET", headers={"Range": "bytes=%d-%d" % (off, off + rng - 1)})
    latencies.append(time.time() - t)
    if got != data[off:off + rng]:
        sys.exit("wrong bytes at %d" % off)
elapsed = time.time() - started
latencies.sort()
print("ranged GET %dK x %d over %d MiB: ops/s=%.0f MiB/s=%.1f p50_ms=%.2f p99_ms=%.2f" % (
    rng >> 10, count, size >> 20, count / elapsed, count * rng / elapsed / (1 << 20),
    latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000))
