"""Versioned writes across gateway crashes (run by tests/s3_gateway.rs, which kills the
gateway with SIGKILL while `write` runs, restarts it, and calls `verify`).

    killed.py write BUCKET ACKS   two threads PUT versions of one key (and one DELETE
                                  now and then) until the gateway goes away; each
                                  acknowledged version id is appended to ACKS
    killed.py verify BUCKET ACKS  every acknowledged version is listed and reads back
                                  its bytes; every listed version reads; the key's
                                  current version is the newest listed, and the mount
                                  (FUSE_ROOT) shows its bytes

Environment: S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, FUSE_ROOT.
"""

import os
import sys
import threading

import boto3
from botocore.config import Config

KEY = "crash/key"


def client():
    return boto3.client(
        "s3",
        endpoint_url=os.environ["S3_ENDPOINT"],
        aws_access_key_id=os.environ["S3_ACCESS_KEY"],
        aws_secret_access_key=os.environ["S3_SECRET_KEY"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                      connect_timeout=5, read_timeout=30),
    )


def body_of(writer, n):
    return ("writer %s write %d " % (writer, n)).encode() * 100


def write(bucket, acks):
    lock = threading.Lock()
    out = open(acks, "a")

    def run(writer):
        s3 = client()
        n = 0
        while True:
            n += 1
            try:
                if n % 7 == 0:
                    s3.delete_object(Bucket=bucket, Key=KEY)
                    continue
                got = s3.put_object(Bucket=bucket, Key=KEY, Body=body_of(writer, n))
            except Exception:  # the gateway was killed: stop
                return
            with lock:
                out.write("%s %s %d\n" % (got["VersionId"], writer, n))
                out.flush()

    threads = [threading.Thread(target=run, args=(w,)) for w in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def verify(bucket, acks):
    s3 = client()
    versions, markers = [], []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=KEY):
        versions += page.get("Versions", [])
        markers += page.get("DeleteMarkers", [])
    listed = {v["VersionId"]: v for v in versions}
    problems = []
    if len(listed) != len(versions):
        problems.append("a version id is listed twice")
    acked = [line.split() for line in open(acks) if line.strip()]
    for vid, writer, n in acked:
        if vid not in listed:
            problems.append("acknowledged version %s (%s %s) is not listed" % (vid, writer, n))
            continue
        got = s3.get_object(Bucket=bucket, Key=KEY, VersionId=vid)["Body"].read()
        if got != body_of(writer, int(n)):
            problems.append("version %s reads other bytes" % vid)
    for vid in listed:
        s3.head_object(Bucket=bucket, Key=KEY, VersionId=vid)
    latest = [v for v in versions if v["IsLatest"]] + [m for m in markers if m["IsLatest"]]
    if len(latest) != 1:
        problems.append("%d entries are latest" % len(latest))
    path = os.path.join(os.environ["FUSE_ROOT"], bucket, KEY)
    if latest and "Size" in latest[0]:
        current = s3.get_object(Bucket=bucket, Key=KEY)
        if current["VersionId"] != latest[0]["VersionId"]:
            problems.append("GET answers %s, the listing %s" % (current["VersionId"], latest[0]["VersionId"]))
        data = current["Body"].read()
        with open(path, "rb") as f:
            if f.read() != data:
                problems.append("the mount shows other bytes than the current version")
    elif os.path.exists(path):
        problems.append("the key is deleted, yet the mount shows a file")
    print("%d acknowledged, %d versions, %d delete markers listed" % (len(acked), len(versions), len(markers)))
    for p in problems:
        print("PROBLEM:", p)
    return not problems


if __name__ == "__main__":
    mode, bucket, acks = sys.argv[1:4]
    if mode == "write":
        write(bucket, acks)
    else:
        sys.exit(0 if verify(bucket, acks) else 1)
