#!/usr/bin/env bash
# Do metadata operations slow down as a volume grows? (issue 39: create, stat, lookup,
# readdir, unlink rates and p99 at 10k, 1M and 10M files, goal flat within 20 %.)
# For each size a fresh volume of that many files is generated (`strata bench populate`,
# shape wide: leaf directories of 1,000 files) and benches/rates_at_size.py runs in three
# mounts, each with the kernel's caches off (every operation reaches Strata) and a fresh
# metadata cache (every listing and lookup reaches the engine, at every size): one picks
# LEAVES random leaves, one lists them, one stats random files in them and creates,
# stats and unlinks OPS files in a new directory. One table: rate and p50/p99 per
# operation and size.
#
# Usage: benches/rates-at-size.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), SIZES="10000 1000000 10000000",
#   OPS=5000, LEAVES=50, META=engine URL prefix: "sqlite" (default, a file per size) or a
#   Redis/PostgreSQL URL (a fresh ?prefix=ratesPID_SIZE per size is added; those volumes
#   are left in the engine: drop them afterwards); KEEP=1 keeps the SQLite
#   databases (for the tools at size).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
WORK=${1:-/tmp/strata-rates}
SIZES=${SIZES:-10000 1000000 10000000}
OPS=${OPS:-5000}
LEAVES=${LEAVES:-50}
META=${META:-sqlite}
MNT=$WORK/mnt
cleanup() { mountpoint -q "$MNT" 2>/dev/null && umount -l "$MNT" || true; }
trap cleanup EXIT
cleanup
rm -rf "$WORK" && mkdir -p "$MNT"

# Mounts volume $1 with every cache of the kernel off (each operation reaches Strata).
mount_volume() {
  "$STRATA" mount "$1" "$MNT" -d --log "$WORK/mount-$2.log" --cache-dir "$WORK/cache" \
    --attr-cache 0 --entry-cache 0 --dir-entry-cache 0 >/dev/null
  for _ in $(seq 1 100); do mountpoint -q "$MNT" && return; sleep 0.1; done
  echo "mount of $1 did not come up" >&2; return 1
}

for size in $SIZES; do
  if [ "$META" = sqlite ]; then
    url=sqlite3://$WORK/meta-$size.db
  else
    sep='?'; case $META in *\?*) sep='&';; esac
    url="$META${sep}prefix=rates$$_$size"
  fi
  /usr/bin/time -f "populate $size: %e s, peak RSS %M KiB" \
    "$STRATA" bench populate "$url" rates --files "$size" --bucket "$WORK/data-$size" >/dev/null
  if [ "$META" = sqlite ]; then
    bytes=$(du -cb "$WORK/meta-$size.db"* | tail -1 | cut -f1)
    echo "SQLite database: $bytes bytes, $(( bytes / size )) per file"
  fi
  state=$WORK/state-$size.json
  phase() {
    mount_volume "$url" "$size"
    python3 "$ROOT/benches/rates_at_size.py" "$1" "$MNT" "$state" "$OPS" "$LEAVES" 7
    umount "$MNT"
  }
  sync; echo 3 >/proc/sys/vm/drop_caches
  phase discover
  phase listings
  echo "{\"files\": $size, \"ops\": $(phase rest)}" | tee -a "$WORK/results.jsonl"
  [ "$META" = sqlite ] && [ "${KEEP:-0}" != 1 ] && rm -f "$WORK/meta-$size.db"*
done

python3 - "$WORK/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ops = ["create", "stat", "lookup", "readdir", "unlink"]
print("| files | " + " | ".join(f"{o} /s (p50, p99 ms)" for o in ops) + " |")
print("|---:|" + "---:|" * len(ops))
for r in rows:
    cells = [f"{r['ops'][o]['rate']:,.0f} ({r['ops'][o]['p50_ms']}, {r['ops'][o]['p99_ms']})" for o in ops]
    print(f"| {r['files']:,} | " + " | ".join(cells) + " |")
base = rows[0]["ops"]
for r in rows[1:]:
    worst = max(base[o]["rate"] / r["ops"][o]["rate"] for o in ops)
    print(f"{r['files']:,} files: slowest operation at {1 / worst:.2f}x the rate at {rows[0]['files']:,}")
PY
