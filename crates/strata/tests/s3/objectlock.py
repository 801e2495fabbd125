"""S3 object lock through `strata gateway` with boto3 (run by tests/s3_gateway.rs under the
current boto3 and under boto3 < 1.36): two gateway processes of one volume take turns,
and a FUSE mount of the same volume, used as root, must not be able to change or remove
a locked object's file.

Environment: S3_ENDPOINT and S3_ENDPOINT2 (two gateways, --multi-buckets),
S3_ACCESS_KEY/S3_SECRET_KEY and FUSE_ROOT (a mount of the volume). Exits non-zero if any
check fails.
"""

import datetime
import errno
import os
import sys
import time
import unittest
import uuid

from botocore.exceptions import ClientError

from gateways import A, B, code_of  # tests/s3/gateways.py

FUSE_ROOT = os.environ["FUSE_ROOT"]


def hours(n):
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=n)


class Case(unittest.TestCase):
    def setUp(self):
        self.bucket = "l-" + uuid.uuid4().hex[:20]
        A.create_bucket(Bucket=self.bucket, ObjectLockEnabledForBucket=True)

    def fails(self, code, fn, **kwargs):
        with self.assertRaises(ClientError) as caught:
            fn(Bucket=self.bucket, **kwargs)
        self.assertEqual(code_of(caught.exception), code, caught.exception.response)
        return caught.exception

    def put(self, key, body, s3=A, **kwargs):
        return s3.put_object(Bucket=self.bucket, Key=key, Body=body, **kwargs)["VersionId"]

    def get(self, key, s3=B, **kwargs):
        return s3.get_object(Bucket=self.bucket, Key=key, **kwargs)["Body"].read()

    def path(self, key):
        return os.path.join(FUSE_ROOT, self.bucket, key)


class Configuration(Case):
    def test_a_locked_bucket_is_versioned_for_good(self):
        self.assertEqual(B.get_bucket_versioning(Bucket=self.bucket)["Status"], "Enabled")
        conf = B.get_object_lock_configuration(Bucket=self.bucket)["ObjectLockConfiguration"]
        self.assertEqual(conf["ObjectLockEnabled"], "Enabled")
        self.assertNotIn("Rule", conf)
        self.fails("InvalidBucketState", A.put_bucket_versioning,
                   VersioningConfiguration={"Status": "Suspended"})

    def test_default_retention_is_kept_checked_and_given_to_new_objects(self):
        rule = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}
        A.put_object_lock_configuration(
            Bucket=self.bucket,
            ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": rule},
        )
        got = B.get_object_lock_configuration(Bucket=self.bucket)["ObjectLockConfiguration"]
        self.assertEqual(got["Rule"], rule)
        for bad, code in [
            ({"Mode": "GOVERNANCE", "Days": 1, "Years": 1}, "MalformedXML"),
            ({"Mode": "GOVERNANCE", "Days": 0}, "InvalidArgument"),
        ]:
            self.fails(code, A.put_object_lock_configuration, ObjectLockConfiguration={
                "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": bad}})
        self.put("k", b"kept")
        head = B.head_object(Bucket=self.bucket, Key="k")
        self.assertEqual(head["ObjectLockMode"], "GOVERNANCE")
        left = head["ObjectLockRetainUntilDate"] - datetime.datetime.now(datetime.timezone.utc)
        self.assertTrue(datetime.timedelta(hours=23) < left <= datetime.timedelta(days=1), left)
        retention = B.get_object_retention(Bucket=self.bucket, Key="k")["Retention"]
        self.assertEqual(retention["Mode"], "GOVERNANCE")

    def test_buckets_without_lock_refuse_lock_requests(self):
        plain = "p-" + uuid.uuid4().hex[:20]
        A.create_bucket(Bucket=plain)
        with self.assertRaises(ClientError) as caught:
            B.get_object_lock_configuration(Bucket=plain)
        self.assertEqual(code_of(caught.exception), "ObjectLockConfigurationNotFoundError")
        with self.assertRaises(ClientError) as caught:
            A.put_object(Bucket=plain, Key="k", Body=b"x", ObjectLockMode="GOVERNANCE",
                         ObjectLockRetainUntilDate=hours(1))
        self.assertEqual(code_of(caught.exception), "InvalidRequest")
        # Versioning first: then the configuration is taken.
        conf = {"ObjectLockEnabled": "Enabled"}
        with self.assertRaises(ClientError) as caught:
            A.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration=conf)
        self.assertEqual(code_of(caught.exception), "InvalidBucketState")
        A.put_bucket_versioning(Bucket=plain, VersioningConfiguration={"Status": "Enabled"})
        A.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration=conf)
        self.assertEqual(B.get_object_lock_configuration(Bucket=plain)["ObjectLockConfiguration"], conf)

    def test_lock_headers_are_checked(self):
        self.fails("InvalidArgument", A.put_object, Key="k", Body=b"x", ObjectLockMode="COMPLIANCE")
        self.fails("InvalidArgument", A.put_object, Key="k", Body=b"x",
                   ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=hours(-1))
        vid = self.put("plain", b"no lock")
        self.fails("NoSuchObjectLockConfiguration", B.get_object_retention, Key="plain", VersionId=vid)
        # Never held: no legal hold to show (a lifted one shows OFF: below).
        self.fails("NoSuchObjectLockConfiguration", B.get_object_legal_hold, Key="plain")


class Retention(Case):
    def test_compliance_keeps_the_version_whatever_happens_to_the_key(self):
        until = hours(1)
        v1 = self.put("doc", b"signed", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)
        head = B.head_object(Bucket=self.bucket, Key="doc")
        self.assertEqual(head["ObjectLockMode"], "COMPLIANCE")
        self.assertEqual(int(head["ObjectLockRetainUntilDate"].timestamp()), int(until.timestamp()))
        for s3 in (A, B):
            with self.assertRaises(ClientError) as caught:
                s3.delete_object(Bucket=self.bucket, Key="doc", VersionId=v1, BypassGovernanceRetention=True)
            self.assertEqual(code_of(caught.exception), "AccessDenied")
        out = B.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": "doc", "VersionId": v1}]})
        self.assertEqual([e["Code"] for e in out["Errors"]], ["AccessDenied"])
        # Never shortened, not even with the bypass; extended freely.
        shorter = {"Mode": "COMPLIANCE", "RetainUntilDate": hours(0.5)}
        self.fails("AccessDenied", A.put_object_retention, Key="doc", VersionId=v1,
                   Retention=shorter, BypassGovernanceRetention=True)
        self.fails("AccessDenied", A.put_object_retention, Key="doc", VersionId=v1,
                   Retention={"Mode": "GOVERNANCE", "RetainUntilDate": hours(2)})
        B.put_object_retention(Bucket=self.bucket, Key="doc", VersionId=v1,
                               Retention={"Mode": "COMPLIANCE", "RetainUntilDate": hours(2)})
        # Tags and ACLs of a locked version may change, as S3 allows; its data may not.
        tags = {"TagSet": [{"Key": "case", "Value": "42"}]}
        A.put_object_tagging(Bucket=self.bucket, Key="doc", VersionId=v1, Tagging=tags)
        got = B.get_object_tagging(Bucket=self.bucket, Key="doc", VersionId=v1)
        self.assertEqual(got["TagSet"], tags["TagSet"])
        A.put_object_acl(Bucket=self.bucket, Key="doc", VersionId=v1, ACL="public-read")
        # The key moves on: a new version, a delete marker; the locked one stays readable.
        v2 = self.put("doc", b"draft", s3=B)
        self.assertEqual(self.get("doc", s3=A), b"draft")
        A.delete_object(Bucket=self.bucket, Key="doc")
        self.assertEqual(self.get("doc", VersionId=v1), b"signed")
        A.delete_object(Bucket=self.bucket, Key="doc", VersionId=v2)
        listed = B.list_object_versions(Bucket=self.bucket)["Versions"]
        self.assertEqual([v["VersionId"] for v in listed], [v1])
        self.fails("BucketNotEmpty", A.delete_bucket)

    def test_governance_gives_way_only_to_the_bypass(self):
        v1 = self.put("g", b"gov", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=hours(1))
        self.fails("AccessDenied", A.delete_object, Key="g", VersionId=v1)
        self.fails("AccessDenied", A.put_object_retention, Key="g", VersionId=v1,
                   Retention={"Mode": "GOVERNANCE", "RetainUntilDate": hours(0.5)})
        B.put_object_retention(Bucket=self.bucket, Key="g", VersionId=v1, BypassGovernanceRetention=True,
                               Retention={"Mode": "GOVERNANCE", "RetainUntilDate": hours(0.5)})
        B.delete_object(Bucket=self.bucket, Key="g", VersionId=v1, BypassGovernanceRetention=True)
        self.assertNotIn("Versions", A.list_object_versions(Bucket=self.bucket))

    def test_legal_hold_holds_until_lifted(self):
        v1 = self.put("h", b"evidence", ObjectLockLegalHoldStatus="ON")
        self.assertEqual(B.head_object(Bucket=self.bucket, Key="h")["ObjectLockLegalHoldStatus"], "ON")
        self.assertNotIn("ObjectLockMode", B.head_object(Bucket=self.bucket, Key="h"))
        self.fails("AccessDenied", A.delete_object, Key="h", VersionId=v1, BypassGovernanceRetention=True)
        B.put_object_legal_hold(Bucket=self.bucket, Key="h", VersionId=v1, LegalHold={"Status": "OFF"})
        self.assertEqual(A.get_object_legal_hold(Bucket=self.bucket, Key="h")["LegalHold"]["Status"], "OFF")
        A.delete_object(Bucket=self.bucket, Key="h", VersionId=v1)

    def test_copies_and_multipart_uploads_take_lock_headers(self):
        self.put("src", b"source")
        lock = {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": hours(1)}
        A.copy_object(Bucket=self.bucket, Key="copy", CopySource={"Bucket": self.bucket, "Key": "src"},
                      ObjectLockLegalHoldStatus="ON", **lock)
        head = B.head_object(Bucket=self.bucket, Key="copy")
        self.assertEqual((head["ObjectLockMode"], head["ObjectLockLegalHoldStatus"]), ("GOVERNANCE", "ON"))
        upload = A.create_multipart_upload(Bucket=self.bucket, Key="big", **lock)["UploadId"]
        part = B.upload_part(Bucket=self.bucket, Key="big", UploadId=upload, PartNumber=1, Body=b"p" * 100)
        B.complete_multipart_upload(Bucket=self.bucket, Key="big", UploadId=upload, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
        self.assertEqual(A.head_object(Bucket=self.bucket, Key="big")["ObjectLockMode"], "GOVERNANCE")
        self.assertEqual(A.get_object_retention(Bucket=self.bucket, Key="big")["Retention"]["Mode"], "GOVERNANCE")


class Mount(Case):
    """The mount runs as root here: a lock binds root too."""

    def assertRefused(self, fn, *args):
        with self.assertRaises(OSError) as caught:
            fn(*args)
        self.assertEqual(caught.exception.errno, errno.EPERM, caught.exception)

    def test_a_mount_cannot_change_or_remove_a_locked_object(self):
        self.put("dir/locked", b"immutable", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=hours(1))
        self.put("dir/other", b"free")
        path = self.path("dir/locked")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"immutable")
        self.assertRefused(os.remove, path)
        self.assertRefused(os.rename, path, self.path("dir/moved"))
        self.assertRefused(os.rename, self.path("dir/other"), path)
        self.assertRefused(os.truncate, path, 0)
        self.assertRefused(open, path, "ab")
        self.assertRefused(open, path, "r+b")
        self.assertRefused(os.chmod, path, 0o600)
        self.assertRefused(os.link, path, self.path("dir/alias"))
        self.assertRefused(os.setxattr, path, "user.note", b"x")
        self.assertEqual(self.get("dir/locked"), b"immutable")
        # The key still moves on through S3; the mount shows the new version once the
        # kernel's entry for the name (cached above) expires.
        self.put("dir/locked", b"next")
        deadline = time.monotonic() + 30
        while True:
            with open(path, "rb") as f:
                now = f.read()
            if now == b"next" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(now, b"next")


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
