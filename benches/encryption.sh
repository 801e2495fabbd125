#!/usr/bin/env bash
# What encryption at rest costs: the same volume setup (SQLite + a local directory
# bucket, default flags) formatted plain, with AES-256-GCM and with ChaCha20-Poly1305
# (data key wrapped by a key-encryption key), and JuiceFS 1.4 plain and with its
# aes256gcm-rsa, side by side in one run. Rows: sequential 1 MiB write of SIZE (fsync'd
# at the end), sequential 1 MiB read of it cold, fio 4 KiB and 128 KiB random reads
# (buffered and O_DIRECT); each mount's peak RSS. Also `openssl speed` of AES-256-GCM on
# one core: the cipher's ceiling on this machine.
#
# Usage: benches/encryption.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), STRATA_B=another build (for
#   sides plain-b, aes-b, chacha-b), JUICEFS=juicefs, SIZE=file size (1G),
#   RUNTIME=seconds per fio row (10), SIDES="plain aes chacha jfs-plain jfs-rsa",
#   CACHE_ROOT=where the disk caches go (default WORKDIR: the bucket's device, where
#   Strata skips its disk cache and reads come from the bucket; /dev/shm for a warm disk
#   cache on another device, as an S3 bucket with a local cache has), ROWS_ONLY (below),
#   ROUNDS=3 (every side mounted at once; each row runs on every side
#   in turn, ROUNDS times, and the median is shown, so drift of the machine hits all
#   sides alike).
# Needs root (drops the page cache between rows), fio (Debian `fio`) and openssl.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
WORK=${1:-/tmp/strata-encryption-bench}
SIZE=${SIZE:-1G}
RUNTIME=${RUNTIME:-10}
ROUNDS=${ROUNDS:-3}
SIDES=${SIDES:-plain aes chacha jfs-plain jfs-rsa}
CACHE_ROOT=${CACHE_ROOT:-$WORK}

cleanup() {
  for m in "$WORK"/*/m; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m" 2>/dev/null || true
  done
}
trap 'cleanup; [ "$CACHE_ROOT" = "$WORK" ] || for s in $SIDES; do rm -rf "${CACHE_ROOT:?}/$s"; done' EXIT
cleanup
rm -rf "$WORK" && mkdir -p "$WORK"
for side in $SIDES; do rm -rf "${CACHE_ROOT:?}/$side/cache"; done
openssl rand -hex 32 > "$WORK/kek" && chmod 600 "$WORK/kek"
openssl genrsa -aes256 -passout pass:bench -out "$WORK/rsa.pem" 2048 2>/dev/null
export JFS_RSA_PASSPHRASE=bench

mount_side() {
  local side=$1 dir=$WORK/$1 strata=$STRATA
  mkdir -p "$dir/m"
  # A side named plain-b, aes-b or chacha-b runs the build STRATA_B (A/B of two builds).
  case $side in *-b) strata=${STRATA_B:?STRATA_B: the second build}; side=${side%-b} ;; esac
  case $side in
    plain|aes|chacha)
      local enc=()
      [ "$side" = aes ] && enc=(--encrypt-key-file "$WORK/kek" --encrypt-algo aes256gcm)
      [ "$side" = chacha ] && enc=(--encrypt-key-file "$WORK/kek" --encrypt-algo chacha20)
      "$strata" format "sqlite3://$dir/meta.db" bench --bucket "$dir/bucket" "${enc[@]}" >/dev/null
      "$strata" mount "sqlite3://$dir/meta.db" "$dir/m" -d --log "$dir/log" \
        --cache-dir "$CACHE_ROOT/$1/cache" >/dev/null ;;
    jfs-plain|jfs-rsa)
      local enc=()
      [ "$side" = jfs-rsa ] && enc=(--encrypt-rsa-key "$WORK/rsa.pem" --encrypt-algo aes256gcm-rsa)
      "$JUICEFS" format "sqlite3://$dir/meta.db" bench --storage file --bucket "$dir/bucket/" \
        "${enc[@]}" >/dev/null 2>&1
      "$JUICEFS" mount "sqlite3://$dir/meta.db" "$dir/m" -d --log "$dir/log" \
        --cache-dir "$CACHE_ROOT/$1/cache" >/dev/null 2>&1 ;;
  esac
}

# The PID serving mount point $1.
mount_pid() {
  local m=$1
  pgrep -f -- "mount .*$m( |$)" | head -1
}

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# fio row: DIR RW BS DIRECT JOBS -> "iops MiB/s p99_ms"
fio_row() {
  local dir=$1 rw=$2 bs=$3 direct=$4 jobs=$5 extra=()
  [ "$rw" = write ] && extra=(--end_fsync=1 --time_based=0)
  drop
  fio --name=r --filename="$dir/data" --rw="$rw" --bs="$bs" --direct="$direct" \
    --numjobs="$jobs" --ioengine=psync --time_based --runtime="$RUNTIME" --size="$SIZE" \
    --group_reporting --output-format=json "${extra[@]}" 2>/dev/null |
    python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
side = job["write"] if job["write"]["io_bytes"] else job["read"]
p99 = side["clat_ns"]["percentile"].get("99.000000", 0) / 1e6
print("%.0f %.0f %.2f" % (side["iops"], side["bw_bytes"] / 2**20, p99))'
}

ROWS=("write 1m 0 1" "read 1m 0 1" "randread 4k 0 1" "randread 4k 1 1" "randread 4k 1 4"
  "randread 128k 0 1" "randread 128k 1 1")
# ROWS_ONLY="write 1m 0 1;randread 4k 0 1": run only these rows (RW BS DIRECT JOBS; keep the
# write row first: it writes the file the others read).
[ -n "${ROWS_ONLY:-}" ] && IFS=';' read -ra ROWS <<< "$ROWS_ONLY"
median() { sort -g | awk '{v[NR]=$0} END {print v[int((NR+1)/2)]}'; }

declare -A RESULT
for side in $SIDES; do mount_side "$side"; done
for row in "${ROWS[@]}"; do
  set -- $row
  declare -A SAMPLES=()
  for _ in $(seq 1 "$ROUNDS"); do
    for side in $SIDES; do
      SAMPLES[$side]+="$(fio_row "$WORK/$side/m" "$1" "$2" "$3" "$4")"$'\n'
    done
  done
  for side in $SIDES; do
    col() { printf '%s' "${SAMPLES[$side]}" | awk -v c="$1" 'NF {print $c}' | median; }
    RESULT["$side,$row"]="$(col 1) $(col 2) $(col 3)"
  done
  unset SAMPLES
done
for side in $SIDES; do
  m=$WORK/$side/m
  pid=$(mount_pid "$m")
  RESULT["$side,rss"]=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null || echo "?")
  umount "$m" || umount -l "$m"
done

echo "openssl speed, AES-256-GCM, one core, 16 KiB blocks:"
openssl speed -evp aes-256-gcm -bytes 16384 -seconds 2 2>/dev/null | tail -1
echo "openssl speed, ChaCha20-Poly1305, one core, 16 KiB blocks:"
openssl speed -evp chacha20-poly1305 -bytes 16384 -seconds 2 2>/dev/null | tail -1
echo
printf '| row |'; for side in $SIDES; do printf ' %s |' "$side"; done; echo
printf '|---|'; for side in $SIDES; do printf -- '---:|'; done; echo
for row in "${ROWS[@]}"; do
  set -- $row
  name="$1 $2, $([ "$3" = 1 ] && echo O_DIRECT || echo buffered), $4 job$([ "$4" = 1 ] || echo s)"
  unit=$([ "$1" = randread ] && echo IOPS || echo MiB/s)
  printf '| %s (%s) |' "$name" "$unit"
  for side in $SIDES; do
    v=(${RESULT["$side,$row"]:-0 0 0})
    if [ "$unit" = IOPS ]; then printf ' %s (p99 %s ms) |' "${v[0]}" "${v[2]}"; else printf ' %s |' "${v[1]}"; fi
  done
  echo
done
printf '| mount peak RSS (MiB) |'; for side in $SIDES; do printf ' %s |' "${RESULT["$side,rss"]}"; done; echo
