#!/usr/bin/env bash
# Three clients read one dataset once each from an S3 server (s3s-fs on loopback) made
# 20 ms distant on every request (STRATA_OBJECT_DELAY on the readers), without and with
# a cache group: first one after the other, then all three at once. Reports per client
# the wall time (and, one by one, the object-store GETs and bytes), and per run the
# totals: with the group the dataset should cross from the object store once instead of
# three times, and the second and third reads run at the speed of the peers' caches
# (compare "a again, own disk cache").
#
#   benches/cache_group.sh              # 4 GiB in 16 files, 20 ms
#   SIZE_MIB=1024 FILES=8 DELAY=20ms benches/cache_group.sh
#
# Needs root (FUSE), a release build with the simulated distance (`cargo build --release
# -p strata --features object-delay`: STRATA_OBJECT_DELAY is not in ordinary builds;
# STRATA=... to use another) and s3s-fs (S3S_FS_BIN=..., installed by scripts/test.sh). Scratch space: about 3x the dataset under WORK_ROOT (/var/tmp).
set -euo pipefail

STRATA=${STRATA:-$HOME/.cache/strata/target/release/strata}
if ! grep -q STRATA_OBJECT_DELAY "$STRATA"; then
  echo "$STRATA has no STRATA_OBJECT_DELAY: build it with --features object-delay" >&2
  exit 1
fi
S3S_FS=${S3S_FS_BIN:-$HOME/.cache/strata/tools/bin/s3s-fs}
SIZE_MIB=${SIZE_MIB:-4096}
FILES=${FILES:-16}
DELAY=${DELAY:-20ms}
READERS=${READERS:-4}
# The caches keep this fraction of the disk free (the default 0.1 evicts early on a
# nearly full scratch disk, which would measure evictions, not the group).
FREE_RATIO=${FREE_RATIO:-0.02}
WORK=$(mktemp -d "${WORK_ROOT:-/var/tmp}/strata-group-bench.XXXXXX")
KEY=bench-access SECRET=bench-secret-key
S3PID=
cleanup() {
  for m in "$WORK"/mnt-*; do
    [ -d "$m" ] && mountpoint -q "$m" && { "$STRATA" umount "$m" >/dev/null 2>&1 || umount -l "$m"; }
  done
  [ -n "$S3PID" ] && kill "$S3PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/s3/bench"
"$S3S_FS" --host 127.0.0.1 --port "$port" --access-key "$KEY" --secret-key "$SECRET" "$WORK/s3" \
  >"$WORK/s3s.log" 2>&1 &
S3PID=$!
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.05; done

echo "== dataset: $FILES files, $SIZE_MIB MiB in all"
mkdir -p "$WORK/src"
per=$((SIZE_MIB / FILES))
for i in $(seq 1 "$FILES"); do head -c "${per}M" /dev/urandom >"$WORK/src/f$i"; done

stat_of() { # MOUNT NAME -> value of a .stats line
  awk -v n="$2" '$1 == n { print $2 }' "$1/.stats"
}

mount_client() { # META NAME EXTRA... ; with the delay
  local meta=$1 name=$2; shift 2
  mkdir -p "$WORK/mnt-$name"
  STRATA_OBJECT_DELAY=$DELAY "$STRATA" mount "$meta" "$WORK/mnt-$name" -d --log "$WORK/$name.log" \
    --cache-dir "$WORK/cache-$name" --cache-size 50G --free-space-ratio "$FREE_RATIO" \
    --heartbeat 1 "$@"
}

gets_stat='strata_object_requests{op="get",result="ok"}'
sum_stat() { # RUN NAME -> the sum over the run's three clients
  for c in a b c; do stat_of "$WORK/mnt-$1-$c" "$2"; done | paste -sd+ | bc
}
read_all() { # MOUNT -> seconds taken to read every file of the dataset
  local t0 t1
  t0=$(date +%s.%N)
  find "$1/data" -type f | xargs -P "$READERS" -n 1 cat >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
declare -A LABEL=([seq-plain]="one by one, no group" [seq-group]="one by one, group"
  [par-plain]="all at once, no group" [par-group]="all at once, group")
row() { # RUN CLIENT SECONDS GETS BYTES
  printf '| %s | %s | %.1f s | %.0f MiB/s | %s | %s |\n' "${LABEL[$1]}" "$2" "$3" "$(echo "$SIZE_MIB / $3" | bc -l)" "$4" "$5"
}

setup() { # RUN GROUP(yes|no): a volume with the dataset, three reading clients
  local run=$1 meta="sqlite3://$WORK/$1.db" extra=()
  "$STRATA" format "$meta" "vol-$run" --storage s3 --bucket "http://127.0.0.1:$port/bench" \
    --access-key "$KEY" --secret-key "$SECRET" --trash-days 0 >/dev/null
  mkdir -p "$WORK/mnt-w-$run"
  "$STRATA" mount "$meta" "$WORK/mnt-w-$run" -d --log "$WORK/w-$run.log" --cache-size 0 >/dev/null
  cp -r "$WORK/src" "$WORK/mnt-w-$run/data"
  "$STRATA" umount "$WORK/mnt-w-$run"
  [ "$2" = yes ] && extra=(--cache-group bench --group-listen 127.0.0.1:0)
  for c in a b c; do mount_client "$meta" "$run-$c" "${extra[@]}" >/dev/null; done
  if [ "$2" = yes ]; then
    for c in a b c; do
      until [ "$(stat_of "$WORK/mnt-$run-$c" strata_group_members)" = 3 ]; do sleep 0.1; done
    done
  fi
}

totals() { # RUN: GETs, bytes and peak RSS of the run's clients
  local run=$1 gets bytes rss
  gets=$(sum_stat "$run" "$gets_stat")
  bytes=$(sum_stat "$run" strata_object_bytes_down)
  rss=$(for c in a b c; do
    pid=$(pgrep -f "strata mount .*$WORK/mnt-$run-$c " | head -1)
    awk '/VmHWM/ { printf "%d\n", $2 / 1024 }' "/proc/$pid/status"
  done | paste -sd' ')
  printf '| %s | **total** | | | %d | %.0f MiB = **%.2f× the dataset**; peak RSS a b c %s MiB |\n' \
    "${LABEL[$run]}" "$gets" "$(echo "$bytes / 1048576" | bc -l)" "$(echo "$bytes / 1048576 / $SIZE_MIB" | bc -l)" "$rss"
}

teardown() { # RUN
  for c in a b c; do "$STRATA" umount "$WORK/mnt-$1-$c"; done
  rm -rf "$WORK"/cache-* "$WORK/s3/bench/vol-$run"
}

one_after_another() { # RUN GROUP
  local run=$1
  setup "$run" "$2"
  for c in a b c; do
    local g0 b0 secs
    g0=$(sum_stat "$run" "$gets_stat")
    b0=$(sum_stat "$run" strata_object_bytes_down)
    secs=$(read_all "$WORK/mnt-$run-$c")
    row "$run" "$c" "$secs" $(($(sum_stat "$run" "$gets_stat") - g0)) \
      "$(echo "($(sum_stat "$run" strata_object_bytes_down) - $b0) / 1048576" | bc) MiB"
  done
  totals "$run"
  if [ "$2" = no ]; then
    # The reference: client a again, from its own disk cache (page cache dropped).
    "$STRATA" umount "$WORK/mnt-$run-a"
    mount_client "sqlite3://$WORK/$run.db" "$run-a" >/dev/null
    sync
    echo 3 >/proc/sys/vm/drop_caches
    local g0 secs
    g0=$(stat_of "$WORK/mnt-$run-a" "$gets_stat")
    secs=$(read_all "$WORK/mnt-$run-a")
    row "$run" "a again, own disk cache" "$secs" $(($(stat_of "$WORK/mnt-$run-a" "$gets_stat") - g0)) ""
  fi
  teardown "$run"
}

all_at_once() { # RUN GROUP: the three clients read at the same time
  local run=$1
  setup "$run" "$2"
  local readers=()
  for c in a b c; do
    read_all "$WORK/mnt-$run-$c" >"$WORK/secs-$c" &
    readers+=($!)
  done
  wait "${readers[@]}"
  for c in a b c; do row "$run" "$c" "$(cat "$WORK/secs-$c")" "" ""; done
  totals "$run"
  teardown "$run"
}

echo "| run | client | wall | read rate | object GETs | object bytes |"
echo "|---|---|---:|---:|---:|---:|"
one_after_another seq-plain no
one_after_another seq-group yes
all_at_once par-plain no
all_at_once par-group yes
