"""Who may do what through `strata gateway` (run by tests/s3_gateway.rs): users kept in
the volume on two gateway processes, bucket owners, bucket policies, ACLs, the public
access block, ownership controls, lifecycle, CORS, POST object, a skewed clock
(RequestTimeTooSkewed) and malformed XML (MalformedXML).

Environment: S3_ENDPOINT and S3_ENDPOINT2 (two gateways of one volume, --multi-buckets),
S3_ACCESS_KEY/S3_SECRET_KEY (the root user), ALICE_SECRET and BOB_SECRET (users `alice`
and `bob`, added with `strata gateway user add`). Exits non-zero if any check fails.
"""

import base64
import datetime
import hashlib
import json
import os
import sys
import types
import unittest
import urllib.error
import urllib.request
import uuid

import boto3
import botocore.auth
import urllib3
from botocore import UNSIGNED
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["S3_ENDPOINT"]
ENDPOINT2 = os.environ["S3_ENDPOINT2"]


def client(key, secret, endpoint=ENDPOINT):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"),
    )


ROOT = client(os.environ["S3_ACCESS_KEY"], os.environ["S3_SECRET_KEY"])
ALICE = client("alice", os.environ["ALICE_SECRET"])
ALICE2 = client("alice", os.environ["ALICE_SECRET"], ENDPOINT2)
BOB = client("bob", os.environ["BOB_SECRET"])
BOB2 = client("bob", os.environ["BOB_SECRET"], ENDPOINT2)
ANON = boto3.client(
    "s3",
    endpoint_url=ENDPOINT,
    region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version=UNSIGNED),
)


def clock_behind(minutes):
    """Make botocore sign as if its clock were `minutes` behind; returns the undo."""
    skew = datetime.timedelta(minutes=minutes)
    if hasattr(botocore.auth, "get_current_datetime"):  # botocore >= 1.36
        real_now = botocore.auth.get_current_datetime
        botocore.auth.get_current_datetime = lambda *a, **k: real_now(*a, **k) - skew
        return lambda: setattr(botocore.auth, "get_current_datetime", real_now)

    class Behind(datetime.datetime):  # older botocore calls datetime.datetime.utcnow()
        @classmethod
        def utcnow(cls):
            return datetime.datetime.utcnow() - skew

    shim = types.ModuleType("datetime")
    shim.__dict__.update(datetime.__dict__)
    shim.datetime = Behind
    real_module = botocore.auth.datetime
    botocore.auth.datetime = shim
    return lambda: setattr(botocore.auth, "datetime", real_module)


def code_of(err):
    return err.response["Error"]["Code"]


def policy(*statements):
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


class Access(unittest.TestCase):
    def setUp(self):
        self.bucket = "a-" + uuid.uuid4().hex[:20]
        ALICE.create_bucket(Bucket=self.bucket)
        self.arn = "arn:aws:s3:::" + self.bucket

    def fails(self, code, fn, **kwargs):
        with self.assertRaises(ClientError) as caught:
            fn(**kwargs)
        self.assertEqual(code_of(caught.exception), code, caught.exception.response)

    def denied(self, fn, **kwargs):
        self.fails("AccessDenied", fn, **kwargs)

    def refused_keys(self, client, **kwargs):
        """DeleteObjects answers a key the caller may not delete AccessDenied, in its
        answer (the request itself succeeds): the keys so refused."""
        out = client.delete_objects(**kwargs)
        errors = out.get("Errors", [])
        self.assertEqual({e["Code"] for e in errors} - {"AccessDenied"}, set(), errors)
        return [e["Key"] for e in errors]

    def test_users_own_their_buckets_on_every_gateway(self):
        b = self.bucket
        ALICE.put_object(Bucket=b, Key="k", Body=b"alice's")
        self.assertEqual(ALICE2.get_object(Bucket=b, Key="k")["Body"].read(), b"alice's")
        self.assertEqual(ROOT.get_object(Bucket=b, Key="k")["Body"].read(), b"alice's")
        for c in (BOB, BOB2):
            self.denied(c.get_object, Bucket=b, Key="k")
            self.denied(c.list_objects_v2, Bucket=b)
            self.denied(c.put_object, Bucket=b, Key="x", Body=b"x")
            self.denied(c.delete_object, Bucket=b, Key="k")
            self.assertEqual(self.refused_keys(c, Bucket=b, Delete={"Objects": [{"Key": "k"}]}), ["k"])
            self.denied(c.get_bucket_acl, Bucket=b)
            self.denied(c.delete_bucket, Bucket=b)
            self.denied(c.copy_object, Bucket=b, Key="c", CopySource={"Bucket": b, "Key": "k"})
        self.denied(ANON.get_object, Bucket=b, Key="k")
        self.fails("BucketAlreadyExists", BOB.create_bucket, Bucket=b)
        self.fails("BucketAlreadyOwnedByYou", ALICE.create_bucket, Bucket=b)
        names = lambda c: [x["Name"] for x in c.list_buckets()["Buckets"]]
        self.assertIn(b, names(ALICE))
        self.assertIn(b, names(ROOT))
        self.assertNotIn(b, names(BOB))
        self.assertEqual(ALICE.get_bucket_acl(Bucket=b)["Owner"]["ID"], "alice")
        # Bob's own bucket is his; Alice cannot copy from it into hers.
        mine = "b-" + uuid.uuid4().hex[:20]
        BOB.create_bucket(Bucket=mine)
        BOB.put_object(Bucket=mine, Key="s", Body=b"bob's")
        self.denied(ALICE.copy_object, Bucket=b, Key="c", CopySource={"Bucket": mine, "Key": "s"})

    def test_policies_allow_and_deny(self):
        b, arn = self.bucket, self.arn
        ALICE.put_object(Bucket=b, Key="pub/x", Body=b"public")
        ALICE.put_object(Bucket=b, Key="priv/x", Body=b"private")
        ALICE.put_object(Bucket=b, Key="keep/x", Body=b"keep")
        doc = policy(
            {"Sid": "read", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": arn + "/pub/*"},
            {"Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam::000000000000:user/bob"]},
             "Action": ["s3:PutObject", "s3:DeleteObject", "s3:ListBucket"], "Resource": [arn, arn + "/*"]},
            {"Effect": "Deny", "Principal": {"AWS": "bob"}, "Action": "s3:Delete*", "Resource": arn + "/keep/*"},
        )
        ALICE.put_bucket_policy(Bucket=b, Policy=doc)
        self.assertEqual(json.loads(ALICE.get_bucket_policy(Bucket=b)["Policy"]), json.loads(doc))
        self.assertTrue(ALICE.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"])
        self.assertEqual(ANON.get_object(Bucket=b, Key="pub/x")["Body"].read(), b"public")
        self.denied(ANON.get_object, Bucket=b, Key="priv/x")
        self.denied(ANON.put_object, Bucket=b, Key="pub/y", Body=b"y")
        BOB.put_object(Bucket=b, Key="drop/1", Body=b"from bob")
        self.assertEqual(len(BOB2.list_objects_v2(Bucket=b)["Contents"]), 4)
        BOB.delete_object(Bucket=b, Key="drop/1")
        self.denied(BOB.delete_object, Bucket=b, Key="keep/x")
        BOB.put_object(Bucket=b, Key="drop/2", Body=b"2")
        gone = BOB.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "keep/x"}, {"Key": "drop/2"}]})
        self.assertEqual([d["Key"] for d in gone["Deleted"]], ["drop/2"])
        self.assertEqual([(e["Key"], e["Code"]) for e in gone["Errors"]], [("keep/x", "AccessDenied")])
        self.assertEqual(ALICE.get_object(Bucket=b, Key="keep/x")["Body"].read(), b"keep")
        self.denied(BOB.get_object, Bucket=b, Key="priv/x")
        self.denied(BOB.put_bucket_policy, Bucket=b, Policy=doc)
        # A condition on a key the gateway cannot know is refused, never half-enforced.
        bad = policy({"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": arn + "/*",
                      "Condition": {"StringEquals": {"aws:PrincipalOrgID": "o-123"}}})
        self.fails("MalformedPolicy", ALICE.put_bucket_policy, Bucket=b, Policy=bad)
        other = policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:sqs:::q"})
        self.fails("MalformedPolicy", ALICE.put_bucket_policy, Bucket=b, Policy=other)
        ALICE.delete_bucket_policy(Bucket=b)
        self.fails("NoSuchBucketPolicy", ALICE.get_bucket_policy, Bucket=b)
        self.denied(ANON.get_object, Bucket=b, Key="pub/x")

    def test_policy_conditions_and_not_elements(self):
        b, arn = self.bucket, self.arn
        ALICE.put_object(Bucket=b, Key="pub/x", Body=b"public")
        ALICE.put_object(Bucket=b, Key="tagged", Body=b"t", Tagging="class=open")
        ALICE.put_object(Bucket=b, Key="plain", Body=b"p")

        def allow_bob_from(net, **extra):
            statements = [
                {"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:GetObject",
                 "Resource": arn + "/pub/*", "Condition": {"IpAddress": {"aws:SourceIp": net}}},
                {"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:ListBucket", "Resource": arn,
                 "Condition": {"StringLike": {"s3:prefix": "pub/*"}, "Bool": {"aws:SecureTransport": "false"}}},
                {"Effect": "Allow", "Principal": {"AWS": "bob"}, "Action": "s3:GetObject", "Resource": arn + "/*",
                 "Condition": {"StringEquals": {"s3:ExistingObjectTag/class": "open"}}},
                {"Effect": "Deny", "NotPrincipal": {"AWS": "alice"}, "Action": "s3:PutObject",
                 "Resource": arn + "/*",
                 "Condition": {"StringNotEquals": {"s3:x-amz-acl": "bucket-owner-full-control"}}},
                {"Effect": "Allow", "Principal": {"AWS": "bob"}, "NotAction": "s3:Delete*", "Resource": arn + "/drop/*"},
            ]
            ALICE.put_bucket_policy(Bucket=b, Policy=policy(*statements))

        allow_bob_from("127.0.0.0/8")
        self.assertEqual(BOB.get_object(Bucket=b, Key="pub/x")["Body"].read(), b"public")
        self.assertEqual(BOB2.list_objects_v2(Bucket=b, Prefix="pub/")["KeyCount"], 1)
        self.denied(BOB.list_objects_v2, Bucket=b, Prefix="priv/")
        self.denied(BOB.list_objects_v2, Bucket=b)
        self.assertEqual(BOB.get_object(Bucket=b, Key="tagged")["Body"].read(), b"t")
        self.denied(BOB.get_object, Bucket=b, Key="plain")
        # Bob may put under drop/ (NotAction) only with the owner's ACL (the Deny's condition).
        self.denied(BOB.put_object, Bucket=b, Key="drop/1", Body=b"1")
        BOB.put_object(Bucket=b, Key="drop/1", Body=b"1", ACL="bucket-owner-full-control")
        self.denied(BOB.delete_object, Bucket=b, Key="drop/1")
        allow_bob_from("10.0.0.0/8")
        self.denied(BOB.get_object, Bucket=b, Key="pub/x")
        self.denied(BOB2.get_object, Bucket=b, Key="pub/x")
        ALICE.delete_bucket_policy(Bucket=b)
        self.fails("NoSuchBucketPolicy", ALICE.get_bucket_policy_status, Bucket=b)

    def test_bypassing_governance_takes_its_own_permission(self):
        b = "g-" + uuid.uuid4().hex[:20]
        ALICE.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
        arn = "arn:aws:s3:::" + b
        until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        lock = {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": until}
        v1 = ALICE.put_object(Bucket=b, Key="k", Body=b"one", **lock)["VersionId"]
        v2 = ALICE.put_object(Bucket=b, Key="k", Body=b"two", **lock)["VersionId"]
        grant = {"Effect": "Allow", "Principal": {"AWS": "bob"},
                 "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutObjectRetention"],
                 "Resource": arn + "/*"}
        ALICE.put_bucket_policy(Bucket=b, Policy=policy(grant))
        # Bob may delete, but the lock holds, and he may not bypass it.
        self.denied(BOB.delete_object, Bucket=b, Key="k", VersionId=v1)
        self.denied(BOB.delete_object, Bucket=b, Key="k", VersionId=v1, BypassGovernanceRetention=True)
        refused = self.refused_keys(BOB2, Bucket=b, BypassGovernanceRetention=True,
                                    Delete={"Objects": [{"Key": "k", "VersionId": v1}]})
        self.assertEqual(refused, ["k"])
        bypass = dict(grant, Action=["s3:DeleteObjectVersion", "s3:BypassGovernanceRetention"])
        ALICE.put_bucket_policy(Bucket=b, Policy=policy(bypass))
        BOB2.delete_object(Bucket=b, Key="k", VersionId=v1, BypassGovernanceRetention=True)
        # The owner may bypass on her own bucket.
        ALICE2.delete_object(Bucket=b, Key="k", VersionId=v2, BypassGovernanceRetention=True)
        self.assertNotIn("Versions", ROOT.list_object_versions(Bucket=b))

    def test_versions_take_their_own_actions(self):
        b, arn = self.bucket, self.arn
        ALICE.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        v1 = ALICE.put_object(Bucket=b, Key="k", Body=b"1")["VersionId"]
        ALICE.put_object(Bucket=b, Key="k", Body=b"2")
        keep = {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObjectVersion", "Resource": arn + "/*"}
        bob = {"Effect": "Allow", "Principal": {"AWS": "bob"},
               "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], "Resource": arn + "/*"}
        ALICE.put_bucket_policy(Bucket=b, Policy=policy(keep, bob))
        # Reading or copying an older version by id takes s3:GetObjectVersion.
        self.assertEqual(BOB.get_object(Bucket=b, Key="k")["Body"].read(), b"2")
        self.denied(BOB.get_object, Bucket=b, Key="k", VersionId=v1)
        self.fails("403", BOB2.head_object, Bucket=b, Key="k", VersionId=v1)
        BOB.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "k"})
        self.denied(BOB.copy_object, Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "k", "VersionId": v1})
        # Deleting the key leaves a marker (s3:DeleteObject); deleting a version is
        # s3:DeleteObjectVersion, which the policy denies everyone, the owner too.
        BOB2.delete_object(Bucket=b, Key="k")
        self.denied(ALICE.delete_object, Bucket=b, Key="k", VersionId=v1)
        refused = self.refused_keys(ALICE2, Bucket=b, Delete={"Objects": [{"Key": "k", "VersionId": v1}]})
        self.assertEqual(refused, ["k"])
        self.assertEqual(ALICE.get_object(Bucket=b, Key="k", VersionId=v1)["Body"].read(), b"1")
        ALICE.delete_bucket_policy(Bucket=b)
        ALICE.delete_object(Bucket=b, Key="k", VersionId=v1)
        self.fails("NoSuchVersion", ALICE.get_object, Bucket=b, Key="k", VersionId=v1)

    def test_acls_of_buckets_and_objects(self):
        b = self.bucket
        ALICE.put_object(Bucket=b, Key="k", Body=b"v")
        ALICE.put_bucket_acl(Bucket=b, ACL="public-read")
        grants = ALICE.get_bucket_acl(Bucket=b)["Grants"]
        self.assertIn({"Grantee": {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
                       "Permission": "READ"}, grants)
        self.assertEqual([o["Key"] for o in ANON.list_objects_v2(Bucket=b)["Contents"]], ["k"])
        self.denied(ANON.get_object, Bucket=b, Key="k")  # bucket READ lists; objects have their own ACL
        ALICE.put_object_acl(Bucket=b, Key="k", ACL="public-read")
        self.assertEqual(ANON.get_object(Bucket=b, Key="k")["Body"].read(), b"v")
        ALICE.put_object(Bucket=b, Key="open", Body=b"o", ACL="public-read")
        self.assertEqual(ANON.get_object(Bucket=b, Key="open")["Body"].read(), b"o")
        ALICE.copy_object(Bucket=b, Key="copied", CopySource={"Bucket": b, "Key": "open"}, ACL="public-read")
        self.assertEqual(ANON.get_object(Bucket=b, Key="copied")["Body"].read(), b"o")
        up = ALICE.create_multipart_upload(Bucket=b, Key="multi", ACL="public-read")["UploadId"]
        etag = ALICE.upload_part(Bucket=b, Key="multi", UploadId=up, PartNumber=1, Body=b"m" * 10)["ETag"]
        ALICE.complete_multipart_upload(Bucket=b, Key="multi", UploadId=up,
                                        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        self.assertEqual(ANON.get_object(Bucket=b, Key="multi")["Body"].read(), b"m" * 10)
        ALICE.put_object(Bucket=b, Key="k", Body=b"new")  # a new object starts private
        self.denied(ANON.get_object, Bucket=b, Key="k")
        ALICE.put_bucket_acl(Bucket=b, GrantWrite='id="bob"', GrantRead='id="bob"')
        self.denied(ANON.list_objects_v2, Bucket=b)
        BOB.put_object(Bucket=b, Key="from-bob", Body=b"b")
        self.assertEqual(len(BOB.list_objects_v2(Bucket=b)["Contents"]), 5)
        self.denied(BOB.get_object, Bucket=b, Key="k")
        self.fails("UnresolvableGrantByEmailAddress", ALICE.put_bucket_acl, Bucket=b, GrantRead='emailAddress="a@b.c"')
        # Grants name users by id, shown with their display names; an unknown id is refused.
        grants = ALICE.get_bucket_acl(Bucket=b)["Grants"]
        self.assertIn({"Grantee": {"Type": "CanonicalUser", "ID": "bob", "DisplayName": "bob"},
                       "Permission": "READ"}, grants)
        owner = [g for g in grants if g["Permission"] == "FULL_CONTROL"][0]["Grantee"]
        self.assertEqual((owner["ID"], owner["DisplayName"]), ("alice", "alice"))
        self.fails("InvalidArgument", ALICE.put_bucket_acl, Bucket=b, GrantRead='id="nobody-known"')
        policy_doc = {"Owner": {"ID": "alice"}, "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": "nobody-known"}, "Permission": "READ"}]}
        self.fails("InvalidArgument", ALICE.put_object_acl, Bucket=b, Key="k", AccessControlPolicy=policy_doc)

    def test_canned_acls_field_by_field(self):
        b = self.bucket
        me = {"Type": "CanonicalUser", "ID": "alice", "DisplayName": "alice"}
        owner_grant = {"Grantee": me, "Permission": "FULL_CONTROL"}

        def group(name, permission):
            return {"Grantee": {"Type": "Group", "URI": "http://acs.amazonaws.com/groups/" + name},
                    "Permission": permission}

        all_users, authenticated = "global/AllUsers", "global/AuthenticatedUsers"
        shown = {
            "private": [owner_grant],
            "public-read": [owner_grant, group(all_users, "READ")],
            "public-read-write": [owner_grant, group(all_users, "READ"), group(all_users, "WRITE")],
            "authenticated-read": [owner_grant, group(authenticated, "READ")],
        }
        bucket_only = {"log-delivery-write": [owner_grant, group("s3/LogDelivery", "WRITE"),
                                              group("s3/LogDelivery", "READ_ACP")]}
        object_only = {"bucket-owner-read": [owner_grant], "bucket-owner-full-control": [owner_grant]}
        for canned, grants in {**shown, **bucket_only}.items():
            ALICE.put_bucket_acl(Bucket=b, ACL=canned)
            acl = ALICE.get_bucket_acl(Bucket=b)
            self.assertEqual((acl["Owner"], acl["Grants"]), ({"ID": "alice", "DisplayName": "alice"}, grants), canned)
        ALICE.put_bucket_acl(Bucket=b, ACL="private")
        for canned, grants in {**shown, **object_only}.items():
            ALICE.put_object(Bucket=b, Key="k", Body=b"v", ACL=canned)
            acl = ALICE.get_object_acl(Bucket=b, Key="k")
            self.assertEqual((acl["Owner"], acl["Grants"]), ({"ID": "alice", "DisplayName": "alice"}, grants), canned)

    def test_public_access_block(self):
        b, arn = self.bucket, self.arn
        ALICE.put_object(Bucket=b, Key="k", Body=b"v", ACL="public-read")
        self.assertEqual(ANON.get_object(Bucket=b, Key="k")["Body"].read(), b"v")
        conf = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
        ALICE.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration=conf)
        self.assertEqual(ALICE.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"], conf)
        self.denied(ANON.get_object, Bucket=b, Key="k")
        public = policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": arn + "/*"})
        self.denied(ALICE.put_bucket_policy, Bucket=b, Policy=public)
        self.denied(ALICE.put_bucket_acl, Bucket=b, ACL="public-read")
        self.denied(ALICE.put_object, Bucket=b, Key="p", Body=b"p", ACL="public-read")
        ALICE.delete_public_access_block(Bucket=b)
        self.fails("NoSuchPublicAccessBlockConfiguration", ALICE.get_public_access_block, Bucket=b)
        self.assertEqual(ANON.get_object(Bucket=b, Key="k")["Body"].read(), b"v")

    def test_ownership_lifecycle_and_cors_are_kept(self):
        b = self.bucket
        self.fails("OwnershipControlsNotFoundError", ALICE.get_bucket_ownership_controls, Bucket=b)
        rules = {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
        ALICE.put_bucket_ownership_controls(Bucket=b, OwnershipControls=rules)
        self.assertEqual(ALICE2.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"], rules)
        ALICE.delete_bucket_ownership_controls(Bucket=b)
        self.fails("NoSuchLifecycleConfiguration", ALICE.get_bucket_lifecycle_configuration, Bucket=b)
        life = [{"ID": "expire-tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"}, "Expiration": {"Days": 7}}]
        ALICE.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": life})
        self.assertEqual(ALICE2.get_bucket_lifecycle_configuration(Bucket=b)["Rules"], life)
        ALICE.delete_bucket_lifecycle(Bucket=b)
        self.fails("NoSuchLifecycleConfiguration", ALICE.get_bucket_lifecycle_configuration, Bucket=b)
        self.fails("NoSuchCORSConfiguration", ALICE.get_bucket_cors, Bucket=b)
        self.denied(BOB.put_bucket_cors, Bucket=b, CORSConfiguration={"CORSRules": [
            {"AllowedMethods": ["GET"], "AllowedOrigins": ["*"]}]})

    def test_cors_is_enforced(self):
        b = self.bucket
        ALICE.put_object(Bucket=b, Key="k", Body=b"v")
        rule = {"AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["GET", "PUT"],
                "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600}
        ALICE.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": [rule]})
        self.assertEqual(ALICE2.get_bucket_cors(Bucket=b)["CORSRules"], [rule])

        def preflight(origin, method):
            req = urllib.request.Request("%s/%s/k" % (ENDPOINT, b), method="OPTIONS", headers={
                "Origin": origin, "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": "content-type, x-amz-date"})
            try:
                with urllib.request.urlopen(req) as r:
                    return r.status, r.headers
            except urllib.error.HTTPError as e:
                return e.code, e.headers

        status, headers = preflight("https://app.example.com", "PUT")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Access-Control-Allow-Origin"], "https://app.example.com")
        self.assertIn("PUT", headers["Access-Control-Allow-Methods"])
        self.assertEqual(headers["Access-Control-Allow-Headers"], "content-type, x-amz-date")
        self.assertEqual(headers["Access-Control-Max-Age"], "600")
        self.assertEqual(preflight("https://evil.example.org", "GET")[0], 403)
        self.assertEqual(preflight("https://app.example.com", "DELETE")[0], 403)
        url = ALICE.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "k"}, ExpiresIn=60)
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Origin": "https://app.example.com"})) as r:
            self.assertEqual(r.headers["Access-Control-Allow-Origin"], "https://app.example.com")
            self.assertEqual(r.headers["Access-Control-Expose-Headers"], "ETag")
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Origin": "https://evil.example.org"})) as r:
            self.assertIsNone(r.headers["Access-Control-Allow-Origin"])
        ALICE.delete_bucket_cors(Bucket=b)
        self.assertEqual(preflight("https://app.example.com", "GET")[0], 403)

    def test_post_object_with_a_signed_policy(self):
        b = self.bucket
        post = ALICE.generate_presigned_post(
            b, "uploads/note.txt", Fields={"Content-Type": "text/plain"},
            Conditions=[{"Content-Type": "text/plain"}, ["starts-with", "$key", "uploads/"],
                        ["content-length-range", 1, 1024]], ExpiresIn=60)
        http = urllib3.PoolManager()
        fields = dict(post["fields"])
        fields["file"] = ("note.txt", b"posted from a form", "text/plain")
        r = http.request("POST", post["url"], fields=fields)
        self.assertIn(r.status, (200, 204), r.data)
        got = ALICE.get_object(Bucket=b, Key="uploads/note.txt")
        self.assertEqual(got["Body"].read(), b"posted from a form")
        self.assertEqual(got["ContentType"], "text/plain")
        fields["file"] = ("big.txt", b"x" * 2048, "text/plain")
        self.assertGreaterEqual(http.request("POST", post["url"], fields=fields).status, 400)
        fields = dict(post["fields"])
        fields["key"] = "elsewhere/x"
        fields["file"] = ("x", b"x", "text/plain")
        refused = http.request("POST", post["url"], fields=fields)
        self.assertIn(refused.status, (400, 403), refused.data)
        self.fails("NoSuchKey", ALICE.get_object, Bucket=b, Key="elsewhere/x")

    def test_skewed_clocks_and_malformed_xml(self):
        undo = clock_behind(minutes=30)
        try:
            self.fails("RequestTimeTooSkewed", ALICE.list_objects_v2, Bucket=self.bucket)
        finally:
            undo()
        body = b"<Delete><Object><Key>x</Oops></Delete>"
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        req = AWSRequest(method="POST", url="%s/%s?delete" % (ENDPOINT, self.bucket), data=body,
                         headers={"Content-MD5": md5})
        S3SigV4Auth(Credentials("alice", os.environ["ALICE_SECRET"]), "s3", "us-east-1").add_auth(req)
        prepared = req.prepare()
        raw = urllib.request.Request(prepared.url, data=body, headers=dict(prepared.headers), method="POST")
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(raw)
        self.assertEqual(caught.exception.code, 400)
        self.assertIn(b"<Code>MalformedXML</Code>", caught.exception.read())


if __name__ == "__main__":
    print("boto3", boto3.__version__, file=sys.stderr)
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
