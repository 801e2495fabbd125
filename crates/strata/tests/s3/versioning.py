"""Versioned buckets through `strata gateway` with boto3 (run by tests/s3_gateway.rs under
the current boto3 and under boto3 < 1.36): two gateway processes of one volume take turns
(every write on one is read back on the other), and a FUSE mount of the same volume shows
the current version of each key.

Environment: S3_ENDPOINT and S3_ENDPOINT2 (two gateways, --multi-buckets),
S3_ACCESS_KEY/S3_SECRET_KEY and FUSE_ROOT (a mount of the volume). Exits non-zero if any
check fails.
"""

import concurrent.futures
import os
import sys
import unittest
import uuid

import boto3
import botocore
from botocore.exceptions import ClientError

from gateways import A, B, code_of  # tests/s3/gateways.py

FUSE_ROOT = os.environ["FUSE_ROOT"]


class Case(unittest.TestCase):
    def setUp(self):
        self.bucket = "v-" + uuid.uuid4().hex[:20]
        A.create_bucket(Bucket=self.bucket)

    def enable(self, status="Enabled", s3=A):
        s3.put_bucket_versioning(Bucket=self.bucket, VersioningConfiguration={"Status": status})

    def fails(self, code, fn, **kwargs):
        with self.assertRaises(ClientError) as caught:
            fn(Bucket=self.bucket, **kwargs)
        self.assertEqual(code_of(caught.exception), code, caught.exception.response)
        return caught.exception

    def get(self, key, s3=B, **kwargs):
        return s3.get_object(Bucket=self.bucket, Key=key, **kwargs)["Body"].read()

    def versions(self, s3=B, **kwargs):
        """(key, version id, is latest, is a delete marker) in the listing's order."""
        out = s3.list_object_versions(Bucket=self.bucket, **kwargs)
        rows = [(v["Key"], v["VersionId"], v["IsLatest"], False) for v in out.get("Versions", [])]
        rows += [(m["Key"], m["VersionId"], m["IsLatest"], True) for m in out.get("DeleteMarkers", [])]
        return out, rows

    def mounted(self, key):
        path = os.path.join(FUSE_ROOT, self.bucket, key)
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return f.read()


class State(Case):
    def test_status_moves_from_unset_to_enabled_and_suspended(self):
        self.assertNotIn("Status", A.get_bucket_versioning(Bucket=self.bucket))
        self.enable()
        self.assertEqual(B.get_bucket_versioning(Bucket=self.bucket)["Status"], "Enabled")
        self.enable("Suspended", B)
        self.assertEqual(A.get_bucket_versioning(Bucket=self.bucket)["Status"], "Suspended")
        self.fails("MalformedXML", A.put_bucket_versioning, VersioningConfiguration={"Status": "On"})

    def test_unversioned_bucket_lists_null_versions(self):
        A.put_object(Bucket=self.bucket, Key="k", Body=b"1")
        A.put_object(Bucket=self.bucket, Key="k", Body=b"2")
        _, rows = self.versions()
        self.assertEqual(rows, [("k", "null", True, False)])
        self.assertEqual(self.get("k", VersionId="null"), b"2")


class Versions(Case):
    def test_every_put_keeps_the_previous_version(self):
        self.enable()
        ids = []
        for i, s3 in enumerate([A, B, A]):
            out = s3.put_object(Bucket=self.bucket, Key="d/k", Body=b"v%d" % i)
            ids.append(out["VersionId"])
        self.assertEqual(len(set(ids)), 3)
        _, rows = self.versions()
        self.assertEqual(rows, [("d/k", ids[2], True, False), ("d/k", ids[1], False, False),
                                ("d/k", ids[0], False, False)])
        for i, vid in enumerate(ids):
            self.assertEqual(self.get("d/k", VersionId=vid), b"v%d" % i)
            head = A.head_object(Bucket=self.bucket, Key="d/k", VersionId=vid)
            self.assertEqual(head["VersionId"], vid)
            self.assertEqual(head["ContentLength"], 2)
        self.assertEqual(self.get("d/k"), b"v2")
        self.assertEqual(A.get_object(Bucket=self.bucket, Key="d/k")["VersionId"], ids[2])
        # Only the current version is a key, and only it shows in the mount.
        keys = [o["Key"] for o in B.list_objects_v2(Bucket=self.bucket).get("Contents", [])]
        self.assertEqual(keys, ["d/k"])
        self.assertEqual(self.mounted("d/k"), b"v2")
        self.assertEqual(sorted(os.listdir(os.path.join(FUSE_ROOT, self.bucket, "d"))), ["k"])

    def test_objects_from_before_versioning_are_the_null_version(self):
        A.put_object(Bucket=self.bucket, Key="k", Body=b"old")
        self.enable()
        new = B.put_object(Bucket=self.bucket, Key="k", Body=b"new")["VersionId"]
        _, rows = self.versions()
        self.assertEqual(rows, [("k", new, True, False), ("k", "null", False, False)])
        self.assertEqual(self.get("k", VersionId="null"), b"old")

    def test_delete_leaves_a_marker_and_removing_it_brings_the_object_back(self):
        self.enable()
        v1 = A.put_object(Bucket=self.bucket, Key="a/b", Body=b"one")["VersionId"]
        out = B.delete_object(Bucket=self.bucket, Key="a/b")
        self.assertTrue(out["DeleteMarker"])
        marker = out["VersionId"]
        self.assertNotEqual(marker, v1)
        err = self.fails("NoSuchKey", A.get_object, Key="a/b")
        self.assertEqual(err.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-delete-marker"), "true")
        self.assertIsNone(self.mounted("a/b"))
        _, rows = self.versions()
        self.assertEqual(sorted(rows), sorted([("a/b", v1, False, False), ("a/b", marker, True, True)]))
        err = self.fails("MethodNotAllowed", A.get_object, Key="a/b", VersionId=marker)
        self.assertEqual(err.response["ResponseMetadata"]["HTTPStatusCode"], 405)
        self.assertEqual(self.get("a/b", VersionId=v1), b"one")
        gone = A.delete_object(Bucket=self.bucket, Key="a/b", VersionId=marker)
        self.assertTrue(gone["DeleteMarker"])
        self.assertEqual(gone["VersionId"], marker)
        self.assertEqual(self.get("a/b"), b"one")
        self.assertEqual(self.mounted("a/b"), b"one")
        _, rows = self.versions()
        self.assertEqual(rows, [("a/b", v1, True, False)])

    def test_deleting_the_current_version_makes_the_previous_one_current(self):
        self.enable()
        v1 = A.put_object(Bucket=self.bucket, Key="k", Body=b"first")["VersionId"]
        v2 = B.put_object(Bucket=self.bucket, Key="k", Body=b"second")["VersionId"]
        out = A.delete_object(Bucket=self.bucket, Key="k", VersionId=v2)
        self.assertEqual(out["VersionId"], v2)
        self.assertNotIn("DeleteMarker", out)
        self.assertEqual(self.get("k"), b"first")
        self.assertEqual(self.mounted("k"), b"first")
        _, rows = self.versions()
        self.assertEqual(rows, [("k", v1, True, False)])
        self.fails("NoSuchVersion", B.get_object, Key="k", VersionId=v2)
        A.delete_object(Bucket=self.bucket, Key="k", VersionId=v1)
        self.assertEqual(self.versions()[1], [])
        self.assertIsNone(self.mounted("k"))
        # With no versions left the bucket can go.
        A.delete_bucket(Bucket=self.bucket)

    def test_bad_and_unknown_version_ids(self):
        self.enable()
        A.put_object(Bucket=self.bucket, Key="k", Body=b"x")
        self.fails("InvalidArgument", A.get_object, Key="k", VersionId="not-a-version")
        self.fails("NoSuchVersion", A.get_object, Key="k", VersionId="0" * 32)
        self.fails("InvalidArgument", A.list_object_versions, VersionIdMarker="0" * 32)

    def test_suspended_writes_replace_the_null_version(self):
        self.enable()
        kept = A.put_object(Bucket=self.bucket, Key="k", Body=b"kept")["VersionId"]
        self.enable("Suspended")
        self.assertEqual(B.put_object(Bucket=self.bucket, Key="k", Body=b"n1").get("VersionId"), "null")
        B.put_object(Bucket=self.bucket, Key="k", Body=b"n2")
        _, rows = self.versions()
        self.assertEqual(rows, [("k", "null", True, False), ("k", kept, False, False)])
        self.assertEqual(self.get("k", VersionId="null"), b"n2")
        out = A.delete_object(Bucket=self.bucket, Key="k")
        self.assertEqual((out["DeleteMarker"], out["VersionId"]), (True, "null"))
        _, rows = self.versions()
        self.assertEqual(sorted(rows), sorted([("k", "null", True, True), ("k", kept, False, False)]))
        self.assertEqual(self.get("k", VersionId=kept), b"kept")

    def test_copy_of_an_old_version_restores_it(self):
        self.enable()
        v1 = A.put_object(Bucket=self.bucket, Key="k", Body=b"good")["VersionId"]
        B.put_object(Bucket=self.bucket, Key="k", Body=b"bad")
        out = A.copy_object(Bucket=self.bucket, Key="k",
                            CopySource={"Bucket": self.bucket, "Key": "k", "VersionId": v1})
        self.assertEqual(out["CopySourceVersionId"], v1)
        self.assertNotIn(out["VersionId"], (v1, None))
        self.assertEqual(self.get("k"), b"good")
        self.assertEqual(self.mounted("k"), b"good")
        self.assertEqual(len(self.versions()[1]), 3)

    def test_multipart_upload_makes_a_version(self):
        self.enable()
        v1 = A.put_object(Bucket=self.bucket, Key="big", Body=b"small")["VersionId"]
        up = B.create_multipart_upload(Bucket=self.bucket, Key="big")["UploadId"]
        part = os.urandom(5 << 20)
        etag = B.upload_part(Bucket=self.bucket, Key="big", UploadId=up, PartNumber=1, Body=part)["ETag"]
        done = B.complete_multipart_upload(Bucket=self.bucket, Key="big", UploadId=up,
                                           MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
        self.assertNotIn(done["VersionId"], (v1, None))
        self.assertEqual(self.get("big"), part)
        self.assertEqual(self.get("big", VersionId=v1), b"small")

    def test_delete_objects_with_and_without_version_ids(self):
        self.enable()
        ids = {k: A.put_object(Bucket=self.bucket, Key=k, Body=k.encode())["VersionId"] for k in ["x", "y"]}
        out = B.delete_objects(Bucket=self.bucket, Delete={"Objects": [
            {"Key": "x"}, {"Key": "y", "VersionId": ids["y"]}]})
        deleted = {d["Key"]: d for d in out["Deleted"]}
        self.assertTrue(deleted["x"]["DeleteMarker"])
        self.assertIn("DeleteMarkerVersionId", deleted["x"])
        self.assertEqual(deleted["y"]["VersionId"], ids["y"])
        _, rows = self.versions()
        self.assertEqual(sorted((k, m) for k, _, _, m in rows), [("x", False), ("x", True)])
        self.fails("BucketNotEmpty", A.delete_bucket)

    def test_listing_pages_by_key_and_version_markers(self):
        self.enable()
        want = []
        for k in ["a", "b/c", "b/d", "e"]:
            ids = [A.put_object(Bucket=self.bucket, Key=k, Body=b"%d" % i)["VersionId"] for i in range(3)]
            want += [(k, vid) for vid in reversed(ids)]
        got, kwargs = [], {}
        while True:
            out, rows = self.versions(MaxKeys=5, **kwargs)
            self.assertLessEqual(len(rows), 5)
            got += [(k, v) for k, v, _, _ in rows]
            if not out["IsTruncated"]:
                break
            kwargs = {"KeyMarker": out["NextKeyMarker"], "VersionIdMarker": out["NextVersionIdMarker"]}
        self.assertEqual(got, want)
        out, rows = self.versions(Delimiter="/")
        self.assertEqual([p["Prefix"] for p in out["CommonPrefixes"]], ["b/"])
        self.assertEqual(sorted({k for k, _, _, _ in rows}), ["a", "e"])
        _, rows = self.versions(Prefix="b/")
        self.assertEqual(len(rows), 6)

    def test_concurrent_writers_on_two_gateways_lose_no_version(self):
        self.enable()
        bodies = [b"w%03d" % i for i in range(24)]

        def put(i):
            s3 = A if i % 2 else B
            return s3.put_object(Bucket=self.bucket, Key="hot", Body=bodies[i])["VersionId"]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(put, range(len(bodies))))
        _, rows = self.versions()
        self.assertEqual(sorted(v for _, v, _, _ in rows), sorted(ids))
        self.assertEqual(sum(1 for r in rows if r[2]), 1)
        for i, vid in enumerate(ids):
            self.assertEqual(self.get("hot", VersionId=vid), bodies[i])


if __name__ == "__main__":
    print("boto3", boto3.__version__, "botocore", botocore.__version__, file=sys.stderr)
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
