#!/usr/bin/env bash
# Used by benches/s3_gateway.sh: ListObjectsV2 of a prefix, page by page (1000 keys,
# StartAfter), from one process on one kept-alive connection (benches/s3_list.py; a
# curl and a few greps per page cost more than a gateway's page did). PYTHON must have
# botocore; S3_ACCESS_KEY/S3_SECRET_KEY sign.
set -euo pipefail
exec "${PYTHON:-$HOME/.cache/strata/venvs/boto3/bin/python}" "$(dirname "$0")/s3_list.py" "$@"
