#!/usr/bin/env bash
# `strata webdav` against `juicefs webdav`, same machine, same volume type (SQLite
# metadata, local-directory bucket), one run: 1 GiB PUT and GET with curl (MiB/s), 4 KiB
# PUT/GET ops/s with p50/p99 at 1 and 16 connections (benches/webdav_bench.py, a Python
# client: compare ratios), PROPFIND Depth 1 of a 10,000-entry directory (allprop, and the
# four properties file managers ask for), random ranged GETs of 4 KiB and 128 KiB within
# the 1 GiB file (benches/webdav_bench.py ranged: random access). With `wrk` installed (Debian package), 4 KiB
# GETs of one file at 1 and 16 connections from a client that is not the limit (the
# Python client is, at 16 threads). Server peak RSS and CPU time at the end.
#
# Usage: benches/webdav.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs,
#   SMALL_OPS=2000 (4 KiB operations at 16 connections; a quarter at 1), ENTRIES=10000,
#   REDIS=redis://HOST:PORT (both volumes' metadata on this Redis, databases 1 and 2,
#   flushed first, instead of SQLite: where round trips decide)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
WORK=${1:-/tmp/strata-webdav-bench}
SMALL_OPS=${SMALL_OPS:-2000}
ENTRIES=${ENTRIES:-10000}
export WEBDAV_USER=bench WEBDAV_PASSWORD=bench-password
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
rm -rf "$WORK"; mkdir -p "$WORK"/strata "$WORK"/juicefs

if [ -n "${REDIS:-}" ]; then
  SMETA="$REDIS/1"; JMETA="$REDIS/2"
  redis-cli -u "$SMETA" flushdb >/dev/null; redis-cli -u "$JMETA" flushdb >/dev/null
else
  SMETA="sqlite3://$WORK/strata/meta.db"; JMETA="sqlite3://$WORK/juicefs/meta.db"
fi
"$STRATA" format "$SMETA" svol --bucket "$WORK/strata/data" >/dev/null
"$STRATA" webdav "$SMETA" 127.0.0.1:19011 --cache-size 0 \
  >"$WORK/strata/dav.log" 2>&1 &
PIDS+=($!); echo $! > "$WORK/strata/pid"
"$JUICEFS" format "$JMETA" jvol --storage file --bucket "$WORK/juicefs/data/" \
  >/dev/null 2>&1
"$JUICEFS" webdav "$JMETA" 127.0.0.1:19012 --cache-size 0 --no-usage-report \
  --log "$WORK/juicefs/dav.log" >"$WORK/juicefs/out.log" 2>&1 &
PIDS+=($!); echo $! > "$WORK/juicefs/pid"
for port in 19011 19012; do
  for _ in $(seq 1 300); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -u "$WEBDAV_USER:$WEBDAV_PASSWORD" \
      -X PROPFIND -H 'Depth: 0' "http://127.0.0.1:$port/" || true)
    [ "$code" = 207 ] && break
    sleep 0.1
  done
  [ "$code" = 207 ] || { echo "WebDAV server on port $port did not start" >&2; exit 1; }
done

head -c 1G /dev/urandom > "$WORK/big"
for fs in strata juicefs; do
  if [ $fs = strata ]; then port=19011; else port=19012; fi
  url="http://127.0.0.1:$port"
  echo "### $fs"
  for run in 1 2; do
    put=$(curl -s -o /dev/null -w '%{speed_upload}' -u "$WEBDAV_USER:$WEBDAV_PASSWORD" \
      -T "$WORK/big" "$url/big-$run")
    get=$(curl -s -o /dev/null -w '%{speed_download}' -u "$WEBDAV_USER:$WEBDAV_PASSWORD" \
      "$url/big-$run")
    echo "1 GiB run $run: PUT $((${put%.*} >> 20)) MiB/s, GET $((${get%.*} >> 20)) MiB/s"
  done
  for size in 4096 131072; do
    python3 "$ROOT/benches/webdav_bench.py" "$url" "$WEBDAV_USER" "$WEBDAV_PASSWORD" ranged /big-2 $size 1000
  done
  python3 "$ROOT/benches/webdav_bench.py" "$url" "$WEBDAV_USER" "$WEBDAV_PASSWORD" small 1 $((SMALL_OPS / 4))
  curl -s -o /dev/null -u "$WEBDAV_USER:$WEBDAV_PASSWORD" -X DELETE "$url/bench-small/"
  python3 "$ROOT/benches/webdav_bench.py" "$url" "$WEBDAV_USER" "$WEBDAV_PASSWORD" small 16 "$SMALL_OPS"
  python3 "$ROOT/benches/webdav_bench.py" "$url" "$WEBDAV_USER" "$WEBDAV_PASSWORD" propfind dir10k "$ENTRIES"
  if command -v wrk >/dev/null 2>&1; then
    head -c 4096 /dev/urandom | curl -s -o /dev/null -u "$WEBDAV_USER:$WEBDAV_PASSWORD" -T - "$url/wrk-4k"
    auth="Authorization: Basic $(printf '%s:%s' "$WEBDAV_USER" "$WEBDAV_PASSWORD" | base64)"
    for c in 1 16; do
      echo "wrk 4 KiB GET c=$c: $(wrk -t1 -c$c -d5s -H "$auth" "$url/wrk-4k" |
        awk '/Requests\/sec/ {r=$2} /Latency/ {l=$2} END {print r " req/s, mean latency " l}')"
    done
  fi
  pid=$(cat "$WORK/$fs/pid")
  rss=$(awk '/VmHWM/ {print int($2/1024)}' "/proc/$pid/status")
  cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14+$15)/hz}' "/proc/$pid/stat")
  echo "server peak RSS ${rss} MiB, CPU ${cpu} s"
done
