"""End-to-end checks of `strata gateway` with boto3 (run by tests/s3_gateway.rs under the
current boto3 and under boto3 < 1.36, whose checksum behaviour differs).

Environment: S3_ENDPOINT and S3_ENDPOINT2 (two gateway processes of one volume, started
with --multi-buckets; without S3_ENDPOINT2 both are the first), S3_ACCESS_KEY,
S3_SECRET_KEY and FUSE_ROOT (a mount of the same volume). Every test uses its own
bucket. Exits non-zero if any check fails.
"""

import base64
import email.header
import email.utils
import hashlib
import hmac
import json
import os
import re
import sys
import time
import unittest
import urllib.error
import urllib.request
import uuid
import zlib

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["S3_ENDPOINT"]
ENDPOINT2 = os.environ.get("S3_ENDPOINT2", ENDPOINT)
KEY = os.environ["S3_ACCESS_KEY"]
SECRET = os.environ["S3_SECRET_KEY"]
FUSE_ROOT = os.environ["FUSE_ROOT"]
MIB = 1 << 20


def client(secret=SECRET, endpoint=ENDPOINT, **config):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4", **config),
    )


S3 = client()
S3B = client(endpoint=ENDPOINT2)  # the second gateway: reads what the first wrote


def code_of(err):
    return err.response["Error"]["Code"]


class Case(unittest.TestCase):
    def setUp(self):
        self.bucket = "t-" + uuid.uuid4().hex[:20]
        S3.create_bucket(Bucket=self.bucket)

    def fails(self, code, fn, **kwargs):
        with self.assertRaises(ClientError) as caught:
            fn(**kwargs)
        got = code_of(caught.exception)
        self.assertEqual(got, code, caught.exception.response)
        return caught.exception

    def put(self, key, body=b"x", **kwargs):
        return S3.put_object(Bucket=self.bucket, Key=key, Body=body, **kwargs)

    def keys(self, **kwargs):
        out = S3.list_objects_v2(Bucket=self.bucket, **kwargs)
        return [o["Key"] for o in out.get("Contents", [])], [p["Prefix"] for p in out.get("CommonPrefixes", [])], out


class Buckets(Case):
    def test_create_list_head_delete(self):
        names = [b["Name"] for b in S3.list_buckets()["Buckets"]]
        self.assertIn(self.bucket, names)
        S3.head_bucket(Bucket=self.bucket)
        self.fails("BucketAlreadyOwnedByYou", S3.create_bucket, Bucket=self.bucket)
        self.put("k")
        self.fails("BucketNotEmpty", S3.delete_bucket, Bucket=self.bucket)
        S3.delete_object(Bucket=self.bucket, Key="k")
        S3.delete_bucket(Bucket=self.bucket)
        self.fails("NoSuchBucket", S3.list_objects_v2, Bucket=self.bucket)
        self.assertFalse(os.path.exists(os.path.join(FUSE_ROOT, self.bucket)))


class Objects(Case):
    def test_put_get_head_with_headers_and_metadata(self):
        body = os.urandom(3 * MIB + 17)
        # boto3 sends only ASCII metadata (UTF-8 values are checked with the AWS CLI).
        meta = {"name": "value with spaces", "empty": "", "mixed-case": "MiXeD"}
        out = self.put("dir/sub/obj.bin", body, ContentType="application/x-test", Metadata=meta,
                       CacheControl="max-age=60", ContentDisposition="attachment", ContentLanguage="de")
        self.assertEqual(out["ETag"], '"%s"' % hashlib.md5(body).hexdigest())
        got = S3.get_object(Bucket=self.bucket, Key="dir/sub/obj.bin")
        self.assertEqual(got["Body"].read(), body)
        self.assertEqual(got["ContentType"], "application/x-test")
        self.assertEqual(got["Metadata"], meta)
        self.assertEqual(got["CacheControl"], "max-age=60")
        self.assertEqual(got["ContentDisposition"], "attachment")
        self.assertEqual(got["ContentLanguage"], "de")
        head = S3.head_object(Bucket=self.bucket, Key="dir/sub/obj.bin")
        self.assertEqual(head["ContentLength"], len(body))
        self.assertEqual(head["ETag"], out["ETag"])
        # The same bytes through the mount.
        with open(os.path.join(FUSE_ROOT, self.bucket, "dir/sub/obj.bin"), "rb") as f:
            self.assertEqual(f.read(), body)

    def test_encoded_word_metadata_is_stored_decoded(self):
        # S3 decodes RFC 2047 encoded words in x-amz-meta-* before storing, and sends
        # values that are not ASCII encoded again.
        b_word = "=?UTF-8?B?%s?=" % base64.b64encode("Grüße".encode()).decode()
        q_word = "=?utf-8?q?caf=C3=A9?="
        self.put("m", Metadata={"greeting": b_word, "drink": q_word, "plain": "ascii"})
        got = S3B.head_object(Bucket=self.bucket, Key="m")["Metadata"]
        words = {k: str(email.header.make_header(email.header.decode_header(v))) for k, v in got.items()}
        self.assertEqual(words, {"greeting": "Grüße", "drink": "café", "plain": "ascii"})
        self.assertEqual(got["plain"], "ascii")
        record = json.loads(os.getxattr(os.path.join(FUSE_ROOT, self.bucket, "m"), "user.s3.object"))
        self.assertEqual(record["meta"], {"greeting": "Grüße", "drink": "café", "plain": "ascii"})

    def test_ranges(self):
        body = bytes(range(256)) * 4096
        self.put("r", body)
        for rng, want in [("bytes=0-9", body[:10]), ("bytes=100-", body[100:]), ("bytes=-5", body[-5:]),
                          ("bytes=1048570-1048580", body[1048570:1048581])]:
            got = S3.get_object(Bucket=self.bucket, Key="r", Range=rng)
            self.assertEqual(got["Body"].read(), want, rng)
            self.assertEqual(got["ResponseMetadata"]["HTTPStatusCode"], 206)
        self.fails("InvalidRange", S3.get_object, Bucket=self.bucket, Key="r", Range="bytes=%d-" % len(body))

    def test_missing_keys_and_paths_that_are_not_objects(self):
        self.fails("NoSuchKey", S3.get_object, Bucket=self.bucket, Key="nope")
        self.put("a/b", b"1")
        self.fails("NoSuchKey", S3.get_object, Bucket=self.bucket, Key="a")  # a directory
        self.fails("NoSuchKey", S3.get_object, Bucket=self.bucket, Key="a/b/c")  # under a file
        # A key whose parent path is an object, and an object where keys live below.
        self.fails("XMinioParentIsObject", self.put, key="a/b/c")
        self.fails("XMinioObjectExistsAsDirectory", self.put, key="a")

    def test_directory_keys(self):
        self.put("folder/", b"")
        keys, _, _ = self.keys()
        self.assertEqual(keys, ["folder/"])
        got = S3.get_object(Bucket=self.bucket, Key="folder/")
        self.assertEqual(got["Body"].read(), b"")
        self.assertTrue(os.path.isdir(os.path.join(FUSE_ROOT, self.bucket, "folder")))
        S3.delete_object(Bucket=self.bucket, Key="folder/")
        self.assertEqual(self.keys()[0], [])

    def test_replace_is_atomic_for_readers_and_if_none_match(self):
        self.put("k", b"one")
        self.put("k", b"two")
        self.assertEqual(S3.get_object(Bucket=self.bucket, Key="k")["Body"].read(), b"two")
        self.fails("PreconditionFailed", self.put, key="k", body=b"three", IfNoneMatch="*")
        self.put("fresh", b"new", IfNoneMatch="*")
        # No temporary file is ever visible in the bucket.
        self.assertEqual(sorted(os.listdir(os.path.join(FUSE_ROOT, self.bucket))), ["fresh", "k"])

    def test_conditional_get_and_head(self):
        etag = self.put("c", b"data")["ETag"]
        S3.get_object(Bucket=self.bucket, Key="c", IfMatch=etag)
        self.fails("PreconditionFailed", S3.get_object, Bucket=self.bucket, Key="c", IfMatch='"0000"')
        self.fails("304", S3.head_object, Bucket=self.bucket, Key="c", IfNoneMatch=etag)
        past = time.time() - 3600
        import datetime
        S3.get_object(Bucket=self.bucket, Key="c", IfModifiedSince=datetime.datetime.fromtimestamp(past))
        self.fails("PreconditionFailed", S3.get_object, Bucket=self.bucket, Key="c",
                   IfUnmodifiedSince=datetime.datetime.fromtimestamp(past))

    def test_checksums_are_verified_and_returned(self):
        body = b"checksummed" * 1000
        # CRC32C and CRC64NVME need botocore[crt]; the AWS CLI test covers CRC32C.
        for algo in ["CRC32", "SHA1", "SHA256"]:
            out = self.put("ck-" + algo, body, ChecksumAlgorithm=algo)
            self.assertIn("Checksum" + algo, out)
            head = S3.head_object(Bucket=self.bucket, Key="ck-" + algo, ChecksumMode="ENABLED")
            self.assertEqual(head["Checksum" + algo], out["Checksum" + algo])
        crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
        self.put("ck-given", body, ChecksumCRC32=crc)
        bad = base64.b64encode((zlib.crc32(body) ^ 1).to_bytes(4, "big")).decode()
        self.fails("BadDigest", self.put, key="ck-bad", body=body, ChecksumCRC32=bad)
        md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
        self.fails("BadDigest", self.put, key="ck-md5", body=body, ContentMD5=md5)
        self.assertNotIn("ck-bad", self.keys()[0])

    def test_bad_keys_never_escape(self):
        for key in ["../escape", "a/../../b", "a//b", "./x"]:
            err = self.fails("InvalidArgument", self.put, key=key)
            self.assertIn("path", err.response["Error"]["Message"])
        self.fails("KeyTooLongError", self.put, key="k" * 1025)
        self.fails("KeyTooLongError", self.put, key="d/" + "n" * 256)
        self.assertEqual(self.keys()[0], [])

    def test_files_written_through_the_mount_are_objects(self):
        os.makedirs(os.path.join(FUSE_ROOT, self.bucket, "posix/dir"))
        with open(os.path.join(FUSE_ROOT, self.bucket, "posix/dir/f.txt"), "wb") as f:
            f.write(b"from fuse")
        got = S3.get_object(Bucket=self.bucket, Key="posix/dir/f.txt")
        self.assertEqual(got["Body"].read(), b"from fuse")
        listed = S3.list_objects_v2(Bucket=self.bucket)["Contents"][0]
        self.assertEqual(listed["ETag"], got["ETag"])
        # Changed through the mount after an S3 PUT: a new ETag, not the stale MD5.
        etag = self.put("posix/dir/g", b"v1")["ETag"]
        with open(os.path.join(FUSE_ROOT, self.bucket, "posix/dir/g"), "ab") as f:
            f.write(b"+")
        head = S3.head_object(Bucket=self.bucket, Key="posix/dir/g")
        self.assertNotEqual(head["ETag"], etag)
        self.assertEqual(head["ContentLength"], 3)


class Listing(Case):
    def test_byte_order_of_whole_keys(self):
        keys = ["a/b", "a-b", "a.c", "a/c/d", "a0", "a", "b/", "aa/x", "a!/y", "z"]
        for k in keys:
            if k == "a":
                continue  # `a` cannot be an object and a prefix at once
            self.put(k, b"" if k.endswith("/") else b"v")
        want = sorted(k for k in keys if k != "a")
        self.assertEqual(self.keys()[0], want)
        # Page by page with MaxKeys 1..3, through continuation tokens and StartAfter.
        for page in (1, 2, 3):
            seen, token = [], None
            while True:
                kw = {"MaxKeys": page}
                if token:
                    kw["ContinuationToken"] = token
                got, _, out = self.keys(**kw)
                seen += got
                if not out["IsTruncated"]:
                    break
                token = out["NextContinuationToken"]
            self.assertEqual(seen, want, page)
        for i, after in enumerate(want):
            self.assertEqual(self.keys(StartAfter=after)[0], want[i + 1:], after)
        self.assertEqual(self.keys(StartAfter="a-a")[0], [k for k in want if k > "a-a"])

    def test_delimiter_prefix_and_max_keys(self):
        for k in ["photos/2024/a.jpg", "photos/2024/b.jpg", "photos/2025/c.jpg", "photos/x.jpg", "photos-old", "readme"]:
            self.put(k)
        keys, prefixes, _ = self.keys(Delimiter="/")
        self.assertEqual((keys, prefixes), (["photos-old", "readme"], ["photos/"]))
        keys, prefixes, _ = self.keys(Delimiter="/", Prefix="photos/")
        self.assertEqual((keys, prefixes), (["photos/x.jpg"], ["photos/2024/", "photos/2025/"]))
        keys, prefixes, _ = self.keys(Prefix="photos/20")
        self.assertEqual(keys, ["photos/2024/a.jpg", "photos/2024/b.jpg", "photos/2025/c.jpg"])
        keys, prefixes, _ = self.keys(Delimiter="-")
        self.assertEqual(prefixes, ["photos-"])
        _, _, out = self.keys(MaxKeys=0)
        self.assertEqual(out["KeyCount"], 0)
        self.assertFalse(out["IsTruncated"])
        # Prefixes count toward MaxKeys, in key order with the keys.
        keys, prefixes, out = self.keys(Delimiter="/", Prefix="photos/", MaxKeys=2)
        self.assertEqual((keys, prefixes, out["IsTruncated"]), ([], ["photos/2024/", "photos/2025/"], True))
        rest, prefixes2, _ = self.keys(Delimiter="/", Prefix="photos/", ContinuationToken=out["NextContinuationToken"])
        self.assertEqual((rest, prefixes2), (["photos/x.jpg"], []))
        self.assertEqual(self.keys(Prefix="nothing/here")[0], [])

    def test_list_objects_v1_markers_and_url_encoding(self):
        for k in ["a b/c", "a+b", "ü/x", "plain"]:
            self.put(k)
        out = S3.list_objects(Bucket=self.bucket, MaxKeys=2)
        self.assertTrue(out["IsTruncated"])
        rest = S3.list_objects(Bucket=self.bucket, Marker=out["Contents"][-1]["Key"])
        self.assertEqual([o["Key"] for o in out["Contents"] + rest["Contents"]], sorted(["a b/c", "a+b", "ü/x", "plain"]))
        out = S3.list_objects(Bucket=self.bucket, Delimiter="/", MaxKeys=1)
        self.assertEqual(out.get("NextMarker"), "a b/")
        # Asked for explicitly, url encoding reaches the caller as sent.
        out = S3.list_objects_v2(Bucket=self.bucket, EncodingType="url")
        self.assertEqual(sorted(o["Key"] for o in out["Contents"]), ["%C3%BC/x", "a%20b/c", "a%2Bb", "plain"])

    def test_a_big_directory_lists_page_by_page(self):
        os.makedirs(os.path.join(FUSE_ROOT, self.bucket, "big"))
        for i in range(2500):
            open(os.path.join(FUSE_ROOT, self.bucket, "big", "f%05d" % i), "wb").close()
        pages = S3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix="big/")
        keys = [o["Key"] for p in pages for o in p.get("Contents", [])]
        self.assertEqual(keys, ["big/f%05d" % i for i in range(2500)])


class Multipart(Case):
    def upload(self, key, parts):
        up = S3.create_multipart_upload(Bucket=self.bucket, Key=key, ContentType="video/x-test", Metadata={"m": "1"})
        uid = up["UploadId"]
        done = []
        for i, body in enumerate(parts, 1):
            etag = S3.upload_part(Bucket=self.bucket, Key=key, UploadId=uid, PartNumber=i, Body=body)["ETag"]
            done.append({"PartNumber": i, "ETag": etag})
        return uid, done

    def test_complete_etag_part_numbers_and_twice(self):
        parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), b"tail"]
        uid, done = self.upload("mp/obj", parts)
        listed = S3.list_parts(Bucket=self.bucket, Key="mp/obj", UploadId=uid)["Parts"]
        self.assertEqual([p["Size"] for p in listed], [5 * MIB, 5 * MIB, 4])
        ups = S3.list_multipart_uploads(Bucket=self.bucket)["Uploads"]
        self.assertEqual([(u["Key"], u["UploadId"]) for u in ups], [("mp/obj", uid)])
        out = S3.complete_multipart_upload(Bucket=self.bucket, Key="mp/obj", UploadId=uid, MultipartUpload={"Parts": done})
        md5s = b"".join(hashlib.md5(p).digest() for p in parts)
        want = '"%s-3"' % hashlib.md5(md5s).hexdigest()
        self.assertEqual(out["ETag"], want)
        again = S3.complete_multipart_upload(Bucket=self.bucket, Key="mp/obj", UploadId=uid, MultipartUpload={"Parts": done})
        self.assertEqual(again["ETag"], want)
        got = S3.get_object(Bucket=self.bucket, Key="mp/obj")
        self.assertEqual(got["Body"].read(), b"".join(parts))
        self.assertEqual(got["ContentType"], "video/x-test")
        self.assertEqual(got["Metadata"], {"m": "1"})
        second = S3.get_object(Bucket=self.bucket, Key="mp/obj", PartNumber=2)
        self.assertEqual(second["Body"].read(), parts[1])
        self.assertEqual(second["PartsCount"], 3)
        self.assertEqual(S3.list_multipart_uploads(Bucket=self.bucket).get("Uploads", []), [])

    def test_part_errors(self):
        uid, done = self.upload("e", [b"small", os.urandom(5 * MIB)])
        self.fails("EntityTooSmall", S3.complete_multipart_upload, Bucket=self.bucket, Key="e", UploadId=uid,
                   MultipartUpload={"Parts": done})
        self.fails("InvalidPartOrder", S3.complete_multipart_upload, Bucket=self.bucket, Key="e", UploadId=uid,
                   MultipartUpload={"Parts": list(reversed(done))})
        bad = [{"PartNumber": 1, "ETag": '"%s"' % ("0" * 32)}]
        self.fails("InvalidPart", S3.complete_multipart_upload, Bucket=self.bucket, Key="e", UploadId=uid,
                   MultipartUpload={"Parts": bad})
        S3.abort_multipart_upload(Bucket=self.bucket, Key="e", UploadId=uid)
        self.fails("NoSuchUpload", S3.list_parts, Bucket=self.bucket, Key="e", UploadId=uid)
        self.fails("NoSuchUpload", S3.upload_part, Bucket=self.bucket, Key="e", UploadId="f" * 32, PartNumber=1, Body=b"")
        self.assertEqual(self.keys()[0], [])

    def test_upload_part_copy_and_transfer_manager(self):
        src = os.urandom(6 * MIB)
        self.put("src", src)
        up = S3.create_multipart_upload(Bucket=self.bucket, Key="dst")
        uid = up["UploadId"]
        p1 = S3.upload_part_copy(Bucket=self.bucket, Key="dst", UploadId=uid, PartNumber=1,
                                 CopySource={"Bucket": self.bucket, "Key": "src"})["CopyPartResult"]["ETag"]
        p2 = S3.upload_part_copy(Bucket=self.bucket, Key="dst", UploadId=uid, PartNumber=2,
                                 CopySource={"Bucket": self.bucket, "Key": "src"},
                                 CopySourceRange="bytes=10-1009")["CopyPartResult"]["ETag"]
        self.assertEqual(p2, '"%s"' % hashlib.md5(src[10:1010]).hexdigest())
        S3.complete_multipart_upload(Bucket=self.bucket, Key="dst", UploadId=uid,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1}, {"PartNumber": 2, "ETag": p2}]})
        self.assertEqual(S3.get_object(Bucket=self.bucket, Key="dst")["Body"].read(), src + src[10:1010])
        # boto3's managed transfer (multipart above 8 MiB, parallel parts).
        path = os.path.join(FUSE_ROOT, "..", "upload-%s.bin" % self.bucket)
        data = os.urandom(21 * MIB)
        with open(path, "wb") as f:
            f.write(data)
        S3.upload_file(path, self.bucket, "managed.bin")
        S3.download_file(self.bucket, "managed.bin", path + ".back")
        with open(path + ".back", "rb") as f:
            self.assertEqual(hashlib.md5(f.read()).digest(), hashlib.md5(data).digest())


class CopyAndDelete(Case):
    def test_copy_directives_and_conditions(self):
        etag = self.put("s", b"source", ContentType="text/plain", Metadata={"a": "1"})["ETag"]
        S3.copy_object(Bucket=self.bucket, Key="d1", CopySource={"Bucket": self.bucket, "Key": "s"})
        h = S3.head_object(Bucket=self.bucket, Key="d1")
        self.assertEqual((h["ETag"], h["ContentType"], h["Metadata"]), (etag, "text/plain", {"a": "1"}))
        S3.copy_object(Bucket=self.bucket, Key="d2", CopySource={"Bucket": self.bucket, "Key": "s"},
                       MetadataDirective="REPLACE", ContentType="text/x-new", Metadata={"b": "2"})
        h = S3.head_object(Bucket=self.bucket, Key="d2")
        self.assertEqual((h["ContentType"], h["Metadata"]), ("text/x-new", {"b": "2"}))
        self.fails("InvalidRequest", S3.copy_object, Bucket=self.bucket, Key="s", CopySource={"Bucket": self.bucket, "Key": "s"})
        self.fails("PreconditionFailed", S3.copy_object, Bucket=self.bucket, Key="d3",
                   CopySource={"Bucket": self.bucket, "Key": "s"}, CopySourceIfMatch='"nope"')
        self.fails("PreconditionFailed", S3.copy_object, Bucket=self.bucket, Key="d3",
                   CopySource={"Bucket": self.bucket, "Key": "s"}, CopySourceIfNoneMatch=etag)
        self.assertEqual(S3.get_object(Bucket=self.bucket, Key="d2")["Body"].read(), b"source")

    def test_delete_objects_with_directory_keys_and_quiet(self):
        for k in ["x/1", "x/2", "y/", "z"]:
            self.put(k, b"" if k.endswith("/") else b"v")
        out = S3.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in ["x/1", "y/", "missing"]]})
        self.assertEqual(sorted(d["Key"] for d in out["Deleted"]), ["missing", "x/1", "y/"])
        self.assertEqual(self.keys()[0], ["x/2", "z"])
        out = S3.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": "x/2"}, {"Key": "z"}], "Quiet": True})
        self.assertEqual(out.get("Deleted", []), [])
        self.assertEqual(self.keys()[0], [])
        # Directories emptied by deletes go with them.
        self.assertEqual(os.listdir(os.path.join(FUSE_ROOT, self.bucket)), [])


class Tagging(Case):
    def test_object_tags_through_put_copy_multipart_and_the_tagging_calls(self):
        self.put("t", b"tagged", Tagging="project=alpha&team=ml%20ops")
        tags = S3.get_object_tagging(Bucket=self.bucket, Key="t")["TagSet"]
        self.assertEqual(tags, [{"Key": "project", "Value": "alpha"}, {"Key": "team", "Value": "ml ops"}])
        self.assertEqual(S3.get_object(Bucket=self.bucket, Key="t")["TagCount"], 2)
        S3.put_object_tagging(Bucket=self.bucket, Key="t", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
        self.assertEqual(S3.get_object_tagging(Bucket=self.bucket, Key="t")["TagSet"], [{"Key": "k", "Value": "v"}])
        # Tagging does not change the object.
        self.assertEqual(S3.get_object(Bucket=self.bucket, Key="t")["Body"].read(), b"tagged")
        S3.copy_object(Bucket=self.bucket, Key="copied", CopySource={"Bucket": self.bucket, "Key": "t"})
        self.assertEqual(S3.get_object_tagging(Bucket=self.bucket, Key="copied")["TagSet"], [{"Key": "k", "Value": "v"}])
        S3.copy_object(Bucket=self.bucket, Key="retagged", CopySource={"Bucket": self.bucket, "Key": "t"},
                       TaggingDirective="REPLACE", Tagging="new=1")
        self.assertEqual(S3.get_object_tagging(Bucket=self.bucket, Key="retagged")["TagSet"], [{"Key": "new", "Value": "1"}])
        S3.delete_object_tagging(Bucket=self.bucket, Key="t")
        self.assertEqual(S3.get_object_tagging(Bucket=self.bucket, Key="t")["TagSet"], [])
        up = S3.create_multipart_upload(Bucket=self.bucket, Key="mp", Tagging="from=upload")
        etag = S3.upload_part(Bucket=self.bucket, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p")["ETag"]
        S3.complete_multipart_upload(Bucket=self.bucket, Key="mp", UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        self.assertEqual(S3.get_object_tagging(Bucket=self.bucket, Key="mp")["TagSet"], [{"Key": "from", "Value": "upload"}])
        # A file written through the mount can be tagged too.
        with open(os.path.join(FUSE_ROOT, self.bucket, "posix"), "wb") as f:
            f.write(b"posix")
        S3.put_object_tagging(Bucket=self.bucket, Key="posix", Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
        self.assertEqual(S3.get_object_tagging(Bucket=self.bucket, Key="posix")["TagSet"], [{"Key": "a", "Value": "b"}])
        self.fails("InvalidTag", self.put, key="bad", Tagging="a=1&a=2")
        too_many = {"TagSet": [{"Key": "k%d" % i, "Value": "v"} for i in range(11)]}
        self.fails("InvalidTag", S3.put_object_tagging, Bucket=self.bucket, Key="t", Tagging=too_many)

    def test_bucket_tags(self):
        self.fails("NoSuchTagSet", S3.get_bucket_tagging, Bucket=self.bucket)
        S3.put_bucket_tagging(Bucket=self.bucket, Tagging={"TagSet": [{"Key": "owner", "Value": "data-team"}]})
        self.assertEqual(S3.get_bucket_tagging(Bucket=self.bucket)["TagSet"], [{"Key": "owner", "Value": "data-team"}])
        S3.delete_bucket_tagging(Bucket=self.bucket)
        self.fails("NoSuchTagSet", S3.get_bucket_tagging, Bucket=self.bucket)

    def test_get_object_attributes(self):
        out = self.put("a", b"attributes", ChecksumAlgorithm="SHA256")
        attrs = S3B.get_object_attributes(Bucket=self.bucket, Key="a",
                                          ObjectAttributes=["ETag", "Checksum", "ObjectParts", "ObjectSize", "StorageClass"])
        # This call alone gives the ETag without quotes.
        self.assertEqual(attrs["ETag"], out["ETag"].strip('"'))
        self.assertEqual(attrs["ObjectSize"], 10)
        self.assertEqual(attrs["Checksum"]["ChecksumSHA256"], out["ChecksumSHA256"])
        self.assertEqual(attrs["StorageClass"], "STANDARD")
        self.assertIn("LastModified", attrs)
        self.assertNotIn("ObjectParts", attrs)  # not uploaded in parts
        plain = S3.get_object_attributes(Bucket=self.bucket, Key="a", ObjectAttributes=["ObjectSize"])
        self.assertNotIn("ETag", plain)
        self.assertNotIn("Checksum", plain)
        self.fails("InvalidArgument", S3.get_object_attributes, Bucket=self.bucket, Key="a",
                   ObjectAttributes=["ETag", "Invalid_argument"])
        self.fails("NoSuchKey", S3.get_object_attributes, Bucket=self.bucket, Key="missing", ObjectAttributes=["ETag"])
        self.fails("NoSuchKey", S3.get_object_attributes, Bucket=self.bucket, Key="a/below", ObjectAttributes=["ETag"])
        # Parts: counted for any multipart object, listed only when uploaded with a checksum.
        parts = [os.urandom(5 * MIB), b"end"]
        up = S3.create_multipart_upload(Bucket=self.bucket, Key="m")
        done = [{"PartNumber": i, "ETag": S3.upload_part(Bucket=self.bucket, Key="m", UploadId=up["UploadId"],
                                                           PartNumber=i, Body=b)["ETag"]} for i, b in enumerate(parts, 1)]
        S3.complete_multipart_upload(Bucket=self.bucket, Key="m", UploadId=up["UploadId"], MultipartUpload={"Parts": done})
        attrs = S3.get_object_attributes(Bucket=self.bucket, Key="m", ObjectAttributes=["ObjectParts", "ObjectSize"])
        self.assertEqual(attrs["ObjectParts"]["TotalPartsCount"], 2)
        self.assertNotIn("Parts", attrs["ObjectParts"])
        self.assertEqual(attrs["ObjectSize"], 5 * MIB + 3)
        # Any version, by id.
        S3.put_bucket_versioning(Bucket=self.bucket, VersioningConfiguration={"Status": "Enabled"})
        first = self.put("v", b"one")["VersionId"]
        second = self.put("v", b"second")["VersionId"]
        old = S3B.get_object_attributes(Bucket=self.bucket, Key="v", VersionId=first, ObjectAttributes=["ObjectSize"])
        self.assertEqual((old["ObjectSize"], old["VersionId"]), (3, first))
        new = S3.get_object_attributes(Bucket=self.bucket, Key="v", ObjectAttributes=["ObjectSize"])
        self.assertEqual((new["ObjectSize"], new["VersionId"]), (6, second))


class ChecksumUploads(Case):
    """Multipart uploads created with a checksum, as S3 makes and answers them."""

    def new_model(self):
        members = S3.meta.service_model.operation_model("CreateMultipartUpload").input_shape.members
        return "ChecksumType" in members  # botocore >= 1.36 knows checksum types

    def test_composite_sha256(self):
        parts = [os.urandom(5 * MIB), b"the tail"]
        up = S3.create_multipart_upload(Bucket=self.bucket, Key="ck", ChecksumAlgorithm="SHA256")
        self.assertEqual(up["ChecksumAlgorithm"], "SHA256")
        if self.new_model():
            self.assertEqual(up["ChecksumType"], "COMPOSITE")
        uid = up["UploadId"]
        done = []
        for i, body in enumerate(parts, 1):
            out = S3.upload_part(Bucket=self.bucket, Key="ck", UploadId=uid, PartNumber=i, Body=body,
                                 ChecksumAlgorithm="SHA256")
            want = base64.b64encode(hashlib.sha256(body).digest()).decode()
            self.assertEqual(out["ChecksumSHA256"], want)
            done.append({"PartNumber": i, "ETag": out["ETag"], "ChecksumSHA256": want})
        listed = S3B.list_parts(Bucket=self.bucket, Key="ck", UploadId=uid)
        self.assertEqual(listed["ChecksumAlgorithm"], "SHA256")
        self.assertEqual([p["ChecksumSHA256"] for p in listed["Parts"]], [d["ChecksumSHA256"] for d in done])
        upload = S3B.list_multipart_uploads(Bucket=self.bucket)["Uploads"][0]
        self.assertEqual(upload["ChecksumAlgorithm"], "SHA256")
        # Each part's checksum must be named, and be the stored one.
        bare = [{"PartNumber": d["PartNumber"], "ETag": d["ETag"]} for d in done]
        err = self.fails("InvalidRequest", S3.complete_multipart_upload, Bucket=self.bucket, Key="ck", UploadId=uid,
                         MultipartUpload={"Parts": bare})
        self.assertIn("missing for part 1", err.response["Error"]["Message"])
        swapped = [dict(done[0], ChecksumSHA256=done[1]["ChecksumSHA256"]), done[1]]
        self.fails("InvalidPart", S3.complete_multipart_upload, Bucket=self.bucket, Key="ck", UploadId=uid,
                   MultipartUpload={"Parts": swapped})
        self.fails("BadDigest", S3.complete_multipart_upload, Bucket=self.bucket, Key="ck", UploadId=uid,
                   MultipartUpload={"Parts": done}, ChecksumSHA256=done[0]["ChecksumSHA256"])
        out = S3B.complete_multipart_upload(Bucket=self.bucket, Key="ck", UploadId=uid, MultipartUpload={"Parts": done})
        digests = b"".join(hashlib.sha256(p).digest() for p in parts)
        composite = base64.b64encode(hashlib.sha256(digests).digest()).decode()
        self.assertEqual(out["ChecksumSHA256"], composite + "-2")
        head = S3.head_object(Bucket=self.bucket, Key="ck", ChecksumMode="ENABLED")
        self.assertEqual(head["ChecksumSHA256"], composite + "-2")
        part = S3B.head_object(Bucket=self.bucket, Key="ck", PartNumber=2, ChecksumMode="ENABLED")
        self.assertEqual((part["ChecksumSHA256"], part["PartsCount"], part["ContentLength"]),
                         (done[1]["ChecksumSHA256"], 2, len(parts[1])))
        attrs = S3.get_object_attributes(Bucket=self.bucket, Key="ck", ObjectAttributes=["Checksum", "ObjectParts"],
                                         MaxParts=1)
        self.assertEqual(attrs["Checksum"]["ChecksumSHA256"], composite)
        page = attrs["ObjectParts"]
        self.assertEqual((page["TotalPartsCount"], page["IsTruncated"], page["NextPartNumberMarker"]), (2, True, 1))
        self.assertEqual(page["Parts"], [{"PartNumber": 1, "Size": 5 * MIB, "ChecksumSHA256": done[0]["ChecksumSHA256"]}])
        rest = S3.get_object_attributes(Bucket=self.bucket, Key="ck", ObjectAttributes=["ObjectParts"],
                                        PartNumberMarker=1)["ObjectParts"]
        self.assertEqual([p["PartNumber"] for p in rest["Parts"]], [2])
        self.assertFalse(rest["IsTruncated"])

    def test_part_copies_carry_the_checksum(self):
        self.put("src", os.urandom(5 * MIB + 7))
        up = S3.create_multipart_upload(Bucket=self.bucket, Key="copy", ChecksumAlgorithm="CRC32")["UploadId"]
        copied = S3.upload_part_copy(Bucket=self.bucket, Key="copy", UploadId=up, PartNumber=1,
                                     CopySource={"Bucket": self.bucket, "Key": "src"})["CopyPartResult"]
        body = S3.get_object(Bucket=self.bucket, Key="src")["Body"].read()
        crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
        self.assertEqual(copied["ChecksumCRC32"], crc)
        out = S3.complete_multipart_upload(Bucket=self.bucket, Key="copy", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": copied["ETag"], "ChecksumCRC32": crc}]})
        composite = base64.b64encode(zlib.crc32(base64.b64decode(crc)).to_bytes(4, "big")).decode()
        self.assertEqual(out["ChecksumCRC32"], composite + "-1")

    def test_full_object_crc32_and_the_rules_of_create(self):
        if not self.new_model():
            return  # boto3 < 1.36 cannot send x-amz-checksum-type
        parts = [os.urandom(5 * MIB), os.urandom(1000)]
        up = S3.create_multipart_upload(Bucket=self.bucket, Key="full", ChecksumAlgorithm="CRC32",
                                        ChecksumType="FULL_OBJECT")
        self.assertEqual(up["ChecksumType"], "FULL_OBJECT")
        done = []
        for i, body in enumerate(parts, 1):
            out = S3.upload_part(Bucket=self.bucket, Key="full", UploadId=up["UploadId"], PartNumber=i, Body=body,
                                 ChecksumAlgorithm="CRC32")
            done.append({"PartNumber": i, "ETag": out["ETag"], "ChecksumCRC32": out["ChecksumCRC32"]})
        out = S3B.complete_multipart_upload(Bucket=self.bucket, Key="full", UploadId=up["UploadId"],
                                            MultipartUpload={"Parts": done})
        whole = base64.b64encode(zlib.crc32(b"".join(parts)).to_bytes(4, "big")).decode()
        self.assertEqual((out["ChecksumCRC32"], out["ChecksumType"]), (whole, "FULL_OBJECT"))
        head = S3.head_object(Bucket=self.bucket, Key="full", ChecksumMode="ENABLED")
        self.assertEqual((head["ChecksumCRC32"], head["ChecksumType"]), (whole, "FULL_OBJECT"))
        for algo, kind in [("SHA256", "FULL_OBJECT"), ("CRC64NVME", "COMPOSITE")]:
            self.fails("InvalidRequest", S3.create_multipart_upload, Bucket=self.bucket, Key="x",
                       ChecksumAlgorithm=algo, ChecksumType=kind)
        self.fails("InvalidRequest", S3.create_multipart_upload, Bucket=self.bucket, Key="x", ChecksumType="COMPOSITE")
        # A part of a SHA256 upload sent with another algorithm is refused.
        uid = S3.create_multipart_upload(Bucket=self.bucket, Key="y", ChecksumAlgorithm="SHA256")["UploadId"]
        self.fails("InvalidRequest", S3.upload_part, Bucket=self.bucket, Key="y", UploadId=uid, PartNumber=1,
                   Body=b"p", ChecksumAlgorithm="CRC32")


class ExactAnswers(Case):
    """Answers AWS documents and SDKs check, beyond the happy path."""

    def test_delete_objects_takes_at_most_1000_keys(self):
        keys = [{"Key": "k%d" % i} for i in range(1001)]
        self.fails("MalformedXML", S3.delete_objects, Bucket=self.bucket, Delete={"Objects": keys})
        out = S3.delete_objects(Bucket=self.bucket, Delete={"Objects": keys[:1000], "Quiet": True})
        self.assertNotIn("Errors", out)

    def test_lifecycle_rules_aws_refuses(self):
        def rule(rid="r", status="Enabled", **expiration):
            return {"ID": rid, "Status": status, "Filter": {"Prefix": "tmp/"},
                    "Expiration": expiration or {"Days": 7}}

        put = S3.put_bucket_lifecycle_configuration
        for rules, code in [([rule(), rule()], "InvalidArgument"),
                            ([rule(rid="x" * 256)], "InvalidArgument"),
                            ([rule(Days=0)], "InvalidArgument"),
                            ([rule(Date="2030-01-01T12:00:00Z")], "InvalidArgument")]:
            self.fails(code, put, Bucket=self.bucket, LifecycleConfiguration={"Rules": rules})
        put(Bucket=self.bucket, LifecycleConfiguration={"Rules": [rule(), rule(rid="s", Date="2030-01-01T00:00:00Z")]})
        self.assertEqual(len(S3.get_bucket_lifecycle_configuration(Bucket=self.bucket)["Rules"]), 2)

    def test_part_numbers(self):
        # Part 1 of an object not uploaded in parts is all of it; other parts are 400.
        self.put("single", b"body")
        got = S3B.get_object(Bucket=self.bucket, Key="single", PartNumber=1)
        self.assertEqual(got["Body"].read(), b"body")
        self.assertNotIn("PartsCount", got)
        self.fails("InvalidPart", S3.get_object, Bucket=self.bucket, Key="single", PartNumber=2)
        self.fails("400", S3.head_object, Bucket=self.bucket, Key="single", PartNumber=2)
        self.fails("InvalidArgument", S3.get_object, Bucket=self.bucket, Key="single", PartNumber=10001)
        # Past the last part of a multipart object: 416.
        up = S3.create_multipart_upload(Bucket=self.bucket, Key="mp")["UploadId"]
        etag = S3.upload_part(Bucket=self.bucket, Key="mp", UploadId=up, PartNumber=1, Body=b"p")["ETag"]
        S3.complete_multipart_upload(Bucket=self.bucket, Key="mp", UploadId=up,
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
        err = self.fails("InvalidPartNumber", S3B.get_object, Bucket=self.bucket, Key="mp", PartNumber=2)
        self.assertEqual(err.response["ResponseMetadata"]["HTTPStatusCode"], 416)
        self.assertEqual(S3.get_object(Bucket=self.bucket, Key="mp", PartNumber=1)["PartsCount"], 1)

    def test_listings_name_the_owner(self):
        self.put("k")
        v1 = S3.list_objects(Bucket=self.bucket)["Contents"][0]
        self.assertEqual(v1["Owner"]["DisplayName"], "strata")
        self.assertIn("ID", v1["Owner"])
        v2 = S3.list_objects_v2(Bucket=self.bucket)["Contents"][0]
        self.assertNotIn("Owner", v2)
        fetched = S3.list_objects_v2(Bucket=self.bucket, FetchOwner=True)["Contents"][0]
        self.assertEqual(fetched["Owner"], v1["Owner"])


class Identity(Case):
    def sigv2_put(self, date, auth=None, key=KEY, secret=SECRET, endpoint=ENDPOINT):
        """A SigV2-signed PUT sent by hand: its status and error code."""
        path = "/%s/sigv2" % self.bucket
        headers = {"Content-Type": "application/octet-stream"}
        if date is not None:
            headers["Date"] = date
        string = "PUT\n\napplication/octet-stream\n%s\n%s" % (date or "", path)
        sig = base64.b64encode(hmac.new(secret.encode(), string.encode(), hashlib.sha1).digest()).decode()
        headers["Authorization"] = auth or "AWS %s:%s" % (key, sig)
        req = urllib.request.Request(endpoint + path, data=b"v2", method="PUT", headers=headers)
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status, None
        except urllib.error.HTTPError as e:
            found = re.search("<Code>(.*?)</Code>", e.read().decode())
            return e.code, found.group(1) if found else None

    def test_sigv2_dates_and_authorization(self):
        now = email.utils.formatdate(usegmt=True)
        self.assertEqual(self.sigv2_put(now), (200, None))
        self.assertEqual(S3B.get_object(Bucket=self.bucket, Key="sigv2")["Body"].read(), b"v2")
        self.assertEqual(self.sigv2_put(now, endpoint=ENDPOINT2), (200, None))
        for date, answer in [(None, (403, "AccessDenied")),
                             ("", (403, "AccessDenied")),
                             ("Bad Date", (403, "AccessDenied")),
                             ("Tue, 07 Jul 1950 21:53:04 GMT", (403, "AccessDenied")),
                             ("Tue, 07 Jul 2010 21:53:04 GMT", (403, "RequestTimeTooSkewed")),
                             ("Tue, 07 Jul 9999 21:53:04 GMT", (403, "RequestTimeTooSkewed"))]:
            self.assertEqual(self.sigv2_put(date), answer, date)
        self.assertEqual(self.sigv2_put(now, auth="AWS HAHAHA"), (400, "InvalidArgument"))
        self.assertEqual(self.sigv2_put(now, key="AKIAIGR7ZNNBHC5BKSUB"), (403, "InvalidAccessKeyId"))
        self.assertEqual(self.sigv2_put(now, secret="wrong-secret"), (403, "SignatureDoesNotMatch"))

    def test_wrong_secret_unknown_key_and_anonymous(self):
        self.put("k", b"v")
        self.fails("SignatureDoesNotMatch", client(secret="wrong-secret-123").get_object, Bucket=self.bucket, Key="k")
        other = boto3.client("s3", endpoint_url=ENDPOINT, aws_access_key_id="nobody", aws_secret_access_key="x" * 12,
                             region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
        self.fails("InvalidAccessKeyId", other.get_object, Bucket=self.bucket, Key="k")
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen("%s/%s/k" % (ENDPOINT, self.bucket))
        self.assertEqual(caught.exception.code, 403)

    def test_presigned_urls(self):
        self.put("k", b"presigned body")
        url = S3.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "k"}, ExpiresIn=60)
        self.assertEqual(urllib.request.urlopen(url).read(), b"presigned body")
        put_url = S3.generate_presigned_url("put_object", Params={"Bucket": self.bucket, "Key": "up"}, ExpiresIn=60)
        req = urllib.request.Request(put_url, data=b"via url", method="PUT")
        urllib.request.urlopen(req).read()
        self.assertEqual(S3.get_object(Bucket=self.bucket, Key="up")["Body"].read(), b"via url")
        expired = S3.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "k"}, ExpiresIn=1)
        deadline = time.time() + 10
        while True:
            try:
                urllib.request.urlopen(expired).read()
            except urllib.error.HTTPError as e:
                self.assertEqual(e.code, 403)
                refusal = e.read()
                break
            self.assertLess(time.time(), deadline, "a presigned URL outlived its expiry")
            time.sleep(0.2)  # poll interval of a wait for the condition
        self.assertIn(b"<Code>AccessDenied</Code><Message>Request has expired</Message>", refusal)
        # An edited X-Amz-Expires is refused before the signature is checked, as AWS does.
        for bad, said in [("604801", b"less than a week"), ("-5", b"non-negative"), ("soon", b"a number")]:
            edited = url.replace("X-Amz-Expires=60", "X-Amz-Expires=" + bad)
            with self.assertRaises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(edited).read()
            body = caught.exception.read()
            self.assertEqual(caught.exception.code, 400, body)
            self.assertIn(b"<Code>AuthorizationQueryParametersError</Code>", body)
            self.assertIn(said, body)


if __name__ == "__main__":
    print("boto3", boto3.__version__, "botocore", botocore.__version__, file=sys.stderr)
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
