#!/usr/bin/env bash
# What access control lists cost `ls -l`, beside the floor any FUSE file system pays.
#
# Once a file system supports POSIX ACLs (ext4 too), `ls -l` asks every file for
# `system.posix_acl_access`; on a FUSE mount each is a request to the server (the kernel
# keeps a file's list only once it has asked). This script lists FILES files cold (page
# cache and inodes dropped) through four mounts, round after round, and prints medians:
#   - fuse-floor (benches/fuse-floor.c, libfuse answering from memory) without and with
#     lists: what the kernel and this machine charge for those requests;
#   - Strata (SQLite, release build) formatted without and with --enable-acl.
# Then the same with the servers and ls pinned to one CPU, which removes the cross-CPU
# wake-ups that dominate a FUSE round trip on a small VM.
#
# Usage: benches/acl-ls.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), FILES=20000, ROUNDS=5
# Needs root (drops caches), gcc, pkg-config and libfuse3-dev, taskset.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
WORK=${1:-/tmp/strata-acl-ls}
FILES=${FILES:-20000}
ROUNDS=${ROUNDS:-5}
MOUNTS=(floor-noacl floor-acl strata-noacl strata-acl)

cleanup() {
  for m in "${MOUNTS[@]}"; do
    mountpoint -q "$WORK/$m" 2>/dev/null && umount -l "$WORK/$m" || true
  done
  pkill -f "$WORK/fuse-floor" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
rm -rf "$WORK" && mkdir -p "$WORK"

wait_mounted() { # dir
  for _ in $(seq 1 100); do mountpoint -q "$1" && return 0; sleep 0.1; done
  echo "$1 did not mount" >&2; exit 1
}

# shellcheck disable=SC2046 # pkg-config prints several flags
gcc -O2 -Wall -o "$WORK/fuse-floor" "$ROOT/benches/fuse-floor.c" $(pkg-config --cflags --libs fuse3)
for mode in noacl acl; do
  mkdir -p "$WORK/floor-$mode"
  "$WORK/fuse-floor" "$WORK/floor-$mode" "$FILES" "$mode" >"$WORK/floor-$mode.log" 2>&1 &
  wait_mounted "$WORK/floor-$mode"
done
for mode in noacl acl; do
  flags=(); [ "$mode" = acl ] && flags=(--enable-acl)
  dir=$WORK/strata-$mode
  mkdir -p "$dir"
  "$STRATA" format "sqlite3://$WORK/$mode.db" "acl-ls-$mode" --bucket "$WORK/$mode-data" "${flags[@]}" >/dev/null
  "$STRATA" mount "sqlite3://$WORK/$mode.db" "$dir" -d --log "$WORK/$mode.log" \
    --cache-dir "$WORK/$mode-cache" >/dev/null
  wait_mounted "$dir"
  python3 - "$dir" "$FILES" <<'PY'
import os, sys
from concurrent.futures import ThreadPoolExecutor
root, files = sys.argv[1], int(sys.argv[2])
def touch(i):
    os.close(os.open(f"{root}/file-{i:06d}", os.O_CREAT | os.O_WRONLY, 0o644))
with ThreadPoolExecutor(4) as pool:
    list(pool.map(touch, range(files)))
PY
done

server_pids() { # mount name
  case $1 in
    floor-*) pgrep -f "$WORK/fuse-floor $WORK/$1 " ;;
    strata-*) pgrep -f "mount sqlite3://$WORK/${1#strata-}.db" ;;
  esac
}

cold_ls() { # dir [taskset cpu]: seconds of one ls -l after dropping caches
  sync; echo 3 > /proc/sys/vm/drop_caches
  local t0 t1
  t0=$(date +%s.%N)
  if [ -n "${2:-}" ]; then taskset -c "$2" ls -l "$1" >/dev/null; else ls -l "$1" >/dev/null; fi
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}'
}

RESULTS=$WORK/results.txt
: > "$RESULTS"
for placement in spread one-cpu; do
  if [ "$placement" = one-cpu ]; then
    for m in "${MOUNTS[@]}"; do
      for pid in $(server_pids "$m"); do taskset -a -p -c 0 "$pid" >/dev/null; done
    done
    cpu=0
  else
    cpu=
  fi
  for _ in $(seq 1 "$ROUNDS"); do
    for m in "${MOUNTS[@]}"; do
      echo "$placement $m $(cold_ls "$WORK/$m" $cpu)" >> "$RESULTS"
    done
  done
done

python3 - "$RESULTS" "$FILES" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
files = int(sys.argv[2])
times = {}
for placement, mount, secs in rows:
    times.setdefault((placement, mount), []).append(float(secs))
print(f"| placement | mount | ls -l {files:,} cold, median | min - max | lists add per file |")
print("|---|---|---:|---:|---:|")
for placement in ("spread", "one-cpu"):
    for fs in ("floor", "strata"):
        base = statistics.median(times[(placement, f"{fs}-noacl")])
        for mode in ("noacl", "acl"):
            t = times[(placement, f"{fs}-{mode}")]
            med = statistics.median(t)
            extra = f"{(med - base) / files * 1e6:.1f} µs" if mode == "acl" else ""
            print(f"| {placement} | {fs} {mode} | {med:.2f} s | {min(t):.2f} - {max(t):.2f} s | {extra} |")
PY
