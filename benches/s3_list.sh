#!/usr/bin/env bash
# Used by benches/s3_gateway.sh: ListObjectsV2 of a prefix, page by page (1000 keys, StartAfter)
# with curl, so the client costs next to nothing; S3_ACCESS_KEY/S3_SECRET_KEY sign.
set -euo pipefail
port=$1; b=$2; prefix=$3
U="--user $S3_ACCESS_KEY:$S3_SECRET_KEY --aws-sigv4 aws:amz:us-east-1:s3 -H x-amz-content-sha256:UNSIGNED-PAYLOAD"
enc() { printf %s "$1" | sed 's|/|%2F|g'; }
after=""; n=0; start=$(date +%s.%N)
while :; do
  url="http://127.0.0.1:$port/$b?list-type=2&max-keys=1000&prefix=$(enc "$prefix")${after:+&start-after=$(enc "$after")}"
  curl -s -o /tmp/page.$port.xml $U "$url"
  keys=$(grep -o '<Key>[^<]*</Key>' /tmp/page.$port.xml | sed 's/<[^>]*>//g')
  n=$((n + $(printf '%s\n' "$keys" | grep -c .)))
  grep -q '<IsTruncated>true' /tmp/page.$port.xml || break
  after=$(printf '%s\n' "$keys" | tail -1)
done
echo "keys=$n seconds=$(echo "$(date +%s.%N) - $start" | bc)"
