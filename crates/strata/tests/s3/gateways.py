"""What the boto3 suites that take two gateways share: a client of each (S3_ENDPOINT and
S3_ENDPOINT2, path-style, SigV4, no retries, the root key pair from S3_ACCESS_KEY and
S3_SECRET_KEY) and the error code of a failed call."""

import os

import boto3
from botocore.config import Config


def client(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=os.environ["S3_ACCESS_KEY"],
        aws_secret_access_key=os.environ["S3_SECRET_KEY"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4"),
    )


A = client(os.environ["S3_ENDPOINT"])
B = client(os.environ["S3_ENDPOINT2"])


def code_of(err):
    return err.response["Error"]["Code"]
