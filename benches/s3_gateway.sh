#!/usr/bin/env bash
# `strata gateway` against `juicefs gateway`, same machine, same volume type (SQLite
# metadata, local-directory bucket), one run: `juicefs objbench` (1 GiB objects and 4 KiB
# objects, PUT/GET/HEAD/LIST/DELETE throughput) at 1 and 16 threads, boto3 4 KiB
# PUT/GET/HEAD ops/s with p50/p99 at 1 and 16 threads (the Python client is the limit
# there: compare ratios), and ListObjectsV2 of a 100,000-key prefix (files created through
# a mount of each volume) paged with curl (benches/s3_list.sh), plus one page from the
# middle (benches/s3_list.sh). Gateway peak RSS
# at the end.
#
# Usage: benches/s3_gateway.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs,
#   PYTHON=python with boto3 (default ~/.cache/strata/venvs/boto3/bin/python),
#   Random access: 2,000 ranged GETs of 4 KiB and of 128 KiB at random offsets of a 256 MiB
#   object (benches/s3_ranged.py). KEYS=100000 (listing), SMALL_OPS=2000, ONLY_OBJBENCH=1 (stop after the objbench runs:
#   `juicefs objbench` and `strata objbench` against both gateways).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
export PYTHON=${PYTHON:-$HOME/.cache/strata/venvs/boto3/bin/python}
WORK=${1:-/tmp/strata-s3-bench}
KEYS=${KEYS:-100000}
SMALL_OPS=${SMALL_OPS:-2000}
export S3_ACCESS_KEY=benchkey S3_SECRET_KEY=bench-secret-123
PIDS=()
cleanup() {
  for m in "$WORK"/*/m; do mountpoint -q "$m" 2>/dev/null && umount -l "$m" || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
rm -rf "$WORK"; mkdir -p "$WORK"/strata "$WORK"/juicefs

start_strata() {
  "$STRATA" format "sqlite3://$WORK/strata/meta.db" svol --bucket "$WORK/strata/data" >/dev/null
  STRATA_ACCESS_KEY=$S3_ACCESS_KEY STRATA_SECRET_KEY=$S3_SECRET_KEY \
    "$STRATA" gateway "sqlite3://$WORK/strata/meta.db" 127.0.0.1:19001 --cache-size 0 \
    >"$WORK/strata/gw.log" 2>&1 &
  PIDS+=($!); echo $! > "$WORK/strata/pid"
}
start_juicefs() {
  "$JUICEFS" format "sqlite3://$WORK/juicefs/meta.db" jvol --storage file --bucket "$WORK/juicefs/data/" \
    >/dev/null 2>&1
  MINIO_ROOT_USER=$S3_ACCESS_KEY MINIO_ROOT_PASSWORD=$S3_SECRET_KEY \
    "$JUICEFS" gateway "sqlite3://$WORK/juicefs/meta.db" 127.0.0.1:19002 --cache-size 0 --no-usage-report \
    >"$WORK/juicefs/gw.log" 2>&1 &
  PIDS+=($!); echo $! > "$WORK/juicefs/pid"
}
wait_port() {
  for _ in $(seq 1 300); do
    curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
    sleep 0.1
  done
  echo "gateway on port $1 did not start" >&2; exit 1
}
start_strata; start_juicefs; wait_port 19001; wait_port 19002

for fs in strata juicefs; do
  if [ $fs = strata ]; then port=19001; bucket=svol; else port=19002; bucket=jvol; fi
  ep="http://127.0.0.1:$port"
  echo "### $fs"
  for p in 1 16; do
    ACCESS_KEY=$S3_ACCESS_KEY SECRET_KEY=$S3_SECRET_KEY "$JUICEFS" objbench --storage s3 \
      "$ep/$bucket" -p $p --big-object-size 1024 --small-object-size 4K --small-objects 1000 \
      --skip-functional-tests 2>/dev/null | sed -n '/ITEM/,$p' | sed "s/^/objbench p=$p | /"
  done
  for p in 1 16; do
    ACCESS_KEY=$S3_ACCESS_KEY SECRET_KEY=$S3_SECRET_KEY "$STRATA" objbench --storage s3 \
      "$ep/$bucket" -p $p --big-object-size 1G --block-size 4M --small-object-size 4K \
      --small-objects 1000 | sed -n '/ITEM/,$p' | sed "s/^/strata objbench p=$p | /" \
      || echo "strata objbench p=$p | failed against $fs (see the error above)"
  done
  for r in 4096 131072; do
    "$PYTHON" "$ROOT/benches/s3_ranged.py" $port $bucket 256 $r 2000
  done
  [ -n "${ONLY_OBJBENCH:-}" ] && continue
  "$PYTHON" "$ROOT/benches/s3_gateway.py" "$ep" $bucket small 1 $((SMALL_OPS / 4))
  "$PYTHON" "$ROOT/benches/s3_gateway.py" "$ep" $bucket small 16 $SMALL_OPS
done
[ -n "${ONLY_OBJBENCH:-}" ] && exit 0

# A 100,000-key prefix, made through a mount of each volume.
mkdir -p "$WORK/strata/m" "$WORK/juicefs/m"
"$STRATA" mount "sqlite3://$WORK/strata/meta.db" "$WORK/strata/m" -d --log "$WORK/strata/mount.log" >/dev/null
"$JUICEFS" mount "sqlite3://$WORK/juicefs/meta.db" "$WORK/juicefs/m" -d --no-usage-report >/dev/null 2>&1
for fs in strata juicefs; do
  "$PYTHON" -c "
import os,sys
d=sys.argv[1]; os.makedirs(d, exist_ok=True)
for i in range(int(sys.argv[2])):
    os.close(os.open(os.path.join(d,'k%07d'%i), os.O_CREAT|os.O_WRONLY, 0o644))
" "$WORK/$fs/m/list" "$KEYS"
done
for fs in strata juicefs; do
  if [ $fs = strata ]; then port=19001; bucket=svol; else port=19002; bucket=jvol; fi
  for run in 1 2; do
    echo "$fs run $run: LIST $(bash "$ROOT/benches/s3_list.sh" $port $bucket list/)"
    U="--user $S3_ACCESS_KEY:$S3_SECRET_KEY --aws-sigv4 aws:amz:us-east-1:s3 -H x-amz-content-sha256:UNSIGNED-PAYLOAD"
    echo "$fs run $run: one page after list/k0050000: $(curl -s -o /dev/null -w '%{time_total}' $U \
      "http://127.0.0.1:$port/$bucket?list-type=2&prefix=list%2F&start-after=list%2Fk0050000") s"
  done
done
for fs in strata juicefs; do
  echo "$fs gateway peak RSS: $(grep VmHWM /proc/$(cat "$WORK/$fs/pid")/status | awk '{print $2, $3}')"
done
