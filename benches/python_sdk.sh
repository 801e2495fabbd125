#!/usr/bin/env bash
# Reading from Python: the Strata SDK (no FUSE) vs the same volume through a Strata FUSE
# mount vs a JuiceFS FUSE mount of a JuiceFS volume, same machine, one run: 10,000 4 KiB
# files (open + read + close each, files/s), one 1 GiB file (4 MiB reads, MiB/s), and
# random reads in it (3,000 of 4 KiB, 1,000 of 128 KiB, at aligned random offsets:
# unbuffered SDK file seek+read vs os.pread on the mounts; reads/s).
# Each row is the median of RUNS passes in one long-lived Python process (as a data
# loader runs; the mounts are long-lived too), after one unmeasured pass. "cold": the
# kernel's page cache is dropped before each pass (the bucket's files too), so no path
# reads file data from a cache of earlier passes; "warm": caches as they are (a second
# epoch over a dataset). Mounts and the SDK use --cache-size 0 (the bucket
# is a local directory: data comes from it, through the kernel's page cache when warm).
#
# Usage: benches/python_sdk.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs,
#   PY=python with the strata package installed (default python3), RUNS=3, FILES=10000,
#   REDIS=redis://HOST:PORT (both volumes' metadata there, databases 3 and 4, flushed
#   first, instead of SQLite)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
PY=${PY:-python3}
export RUNS=${RUNS:-3}
export FILES=${FILES:-10000}
WORK=${1:-/tmp/strata-python-bench}
SMNT="$WORK/smnt"; JMNT="$WORK/jmnt"
cleanup() {
  "$STRATA" umount "$SMNT" >/dev/null 2>&1 || true
  "$JUICEFS" umount "$JMNT" >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup
rm -rf "$WORK"; mkdir -p "$WORK"/strata "$WORK"/juicefs "$SMNT" "$JMNT"
if [ -n "${REDIS:-}" ]; then
  SMETA="$REDIS/3"; JMETA="$REDIS/4"
  redis-cli -u "$SMETA" flushdb >/dev/null; redis-cli -u "$JMETA" flushdb >/dev/null
else
  SMETA="sqlite3://$WORK/strata/meta.db"; JMETA="sqlite3://$WORK/juicefs/meta.db"
fi
"$STRATA" format "$SMETA" svol --bucket "$WORK/strata/data" >/dev/null
"$JUICEFS" format "$JMETA" jvol --storage file --bucket "$WORK/juicefs/data/" >/dev/null 2>&1
"$STRATA" mount "$SMETA" "$SMNT" -d --cache-size 0 --log "$WORK/strata/mount.log"
"$JUICEFS" mount "$JMETA" "$JMNT" -d --cache-size 0 --no-usage-report \
  --log "$WORK/juicefs/mount.log" >/dev/null 2>&1

echo "== writing $FILES 4 KiB files and a 1 GiB file on each volume"
head -c 1G /dev/urandom > "$WORK/big.bin"
for mnt in "$SMNT" "$JMNT"; do
  "$PY" - "$mnt" <<'PYEOF'
import os, sys
root = sys.argv[1]
n = int(os.environ["FILES"])
for d in range((n + 999) // 1000):
    os.makedirs(f"{root}/small/d{d}", exist_ok=True)
data = os.urandom(4096)
for i in range(n):
    with open(f"{root}/small/d{i // 1000}/f{i}", "wb") as f:
        f.write(data)
os.makedirs(f"{root}/big", exist_ok=True)
PYEOF
  cp "$WORK/big.bin" "$mnt/big/one.bin"
done
sync

measure() { # label, how, where, workload, cold|warm
  "$PY" "$ROOT/benches/python_sdk_bench.py" "$2" "$3" "$4" "$5" | "$PY" -c '
import json, sys, statistics
rows = [json.loads(l) for l in sys.stdin]
key = next(k for k in ("files_per_s", "mib_per_s", "reads_per_s") if k in rows[0])
vals = sorted(r[key] for r in rows)
cpu = [r["cpu_s"] for r in rows]
print(f"{sys.argv[1]:<40} {key:>12} median {statistics.median(vals):>8}  all {vals}  reader cpu_s {cpu}")
' "$1"
}

echo "== results (median of $RUNS)"
for mode in cold warm; do
  for w in small big random4k random128k; do
    measure "$mode $w: Strata SDK" sdk "$SMETA" $w $mode
    measure "$mode $w: Strata FUSE mount" fs "$SMNT" $w $mode
    measure "$mode $w: JuiceFS FUSE mount" fs "$JMNT" $w $mode
  done
done
