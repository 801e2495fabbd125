"""Used by benches/s3_gateway.sh (through s3_list.sh): ListObjectsV2 of a prefix, page by
page (1,000 keys, StartAfter), signed with SigV4 on one kept-alive HTTP connection, so
the client's cost per page is a signature and a regex over the answer — the same for
every gateway measured. Prints `keys=N seconds=S first=S` (first: the first page's answer time).

Usage: s3_list.py PORT BUCKET PREFIX (keys from S3_ACCESS_KEY / S3_SECRET_KEY)
"""

import http.client
import os
import re
import sys
import time
import urllib.parse

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

port, bucket, prefix = int(sys.argv[1]), sys.argv[2], sys.argv[3]
creds = Credentials(os.environ["S3_ACCESS_KEY"], os.environ["S3_SECRET_KEY"])
base = "http://127.0.0.1:%d" % port
conn = http.client.HTTPConnection("127.0.0.1", port)
after, count, started, first = "", 0, time.time(), None
while True:
    query = {"list-type": "2", "max-keys": "1000", "prefix": prefix}
    if after:
        query["start-after"] = after
    req = AWSRequest(method="GET", url="%s/%s?%s" % (base, bucket, urllib.parse.urlencode(query)))
    S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
    prepared = req.prepare()
    conn.request("GET", prepared.url[len(base):], headers=dict(prepared.headers))
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        sys.exit("HTTP %d: %s" % (resp.status, body[:300]))
    keys = re.findall(rb"<Key>([^<]*)</Key>", body)
    if first is None:
        first = time.time() - started
    count += len(keys)
    if b"<IsTruncated>true</IsTruncated>" not in body:
        break
    after = keys[-1].decode()
print("keys=%d seconds=%.3f first=%.4f" % (count, time.time() - started, first or 0.0))
