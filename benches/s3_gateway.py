"""Latency and listing benchmark of an S3 endpoint (used by benches/s3_gateway.sh).

Usage: s3_gateway.py ENDPOINT BUCKET small THREADS OPS   -> 4 KiB PUT/GET/HEAD ops/s, p50, p99
Keys come from S3_ACCESS_KEY / S3_SECRET_KEY.
"""
import os
import sys
import threading
import time

import boto3
from botocore.config import Config


def client(endpoint):
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=os.environ["S3_ACCESS_KEY"], aws_secret_access_key=os.environ["S3_SECRET_KEY"],
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                      max_pool_connections=64, retries={"max_attempts": 1}))


def small(endpoint, bucket, threads, ops):
    body = os.urandom(4096)
    clients = [client(endpoint) for _ in range(threads)]
    for op in ("PUT", "GET", "HEAD"):
        lat = [[] for _ in range(threads)]

        def work(t):
            s3 = clients[t]
            for i in range(t, ops, threads):
                key = "small/%06d" % i
                start = time.perf_counter()
                if op == "PUT":
                    s3.put_object(Bucket=bucket, Key=key, Body=body)
                elif op == "GET":
                    s3.get_object(Bucket=bucket, Key=key)["Body"].read()
                else:
                    s3.head_object(Bucket=bucket, Key=key)
                lat[t].append(time.perf_counter() - start)

        start = time.perf_counter()
        ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.perf_counter() - start
        all_lat = sorted(x for l in lat for x in l)
        p = lambda q: all_lat[min(len(all_lat) - 1, int(q * len(all_lat)))] * 1000
        print("%s 4KiB threads=%d ops/s=%.0f p50_ms=%.2f p99_ms=%.2f" % (op, threads, ops / wall, p(0.5), p(0.99)))


if __name__ == "__main__":
    endpoint, bucket, what = sys.argv[1:4]
    small(endpoint, bucket, int(sys.argv[4]), int(sys.argv[5]))
