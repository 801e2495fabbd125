#!/usr/bin/env bash
# Hundreds of clients on one volume: N SDK clients in separate processes (or N FUSE
# mounts, MOUNTS=1) create then stat FILES files each in their own directory, all started
# at once; prints the aggregate rates against one client's, each client's RSS, the
# engine's connections per client, and the engine's work per idle client per second
# (Redis commands, PostgreSQL transactions) over IDLE seconds after the workload.
#
# Usage: benches/many-clients.sh META-URL
#   COUNTS="1 2 4 8 16 32 64 128", FILES=1000 (per client), IDLE=30,
#   STRATA=target/release/strata, PY=python with the strata package (release wheel),
#   MOUNTS=1 (FUSE mounts instead of SDK clients; WORK=/tmp/strata-many-clients),
#   OPTIONS='{"cache_size": 0}' (SDK client keyword options, JSON; the default),
#   ENGINE_URL= what redis-cli/psql are given (default: META-URL without its ?query).
# The volume is formatted first: META-URL must name an empty database (or prefix).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
META=${1:?usage: many-clients.sh META-URL}
STRATA=${STRATA:-$ROOT/target/release/strata}
PY=${PY:-python3}
COUNTS=${COUNTS:-1 2 4 8 16 32 64 128}
WORK=${WORK:-/tmp/strata-many-clients}
case "$META" in
  redis*) KIND=redis ;;
  postgres*) KIND=postgres ;;
  *) KIND=other ;;
esac
ENGINE_URL=${ENGINE_URL:-${META%%\?*}}
rm -rf "$WORK"; mkdir -p "$WORK"
"$STRATA" format "$META" many --bucket "$WORK/data" --trash-days 0 >/dev/null
mounts=()
cleanup() { for m in "${mounts[@]}"; do "$STRATA" umount "$m" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
URL=$META
if [ "${MOUNTS:-0}" = 1 ]; then
  max=0; for n in $COUNTS; do [ "$n" -gt "$max" ] && max=$n; done
  for ((i = 0; i < max; i++)); do
    m="$WORK/m$i"; mkdir -p "$m"
    "$STRATA" mount "$META" "$m" -d --cache-size 0 --log "$WORK/mount$i.log"
    mounts+=("$m")
  done
  URL="mount:$WORK/m{i}"
  CLIENTS_UP=$max  # every mount heartbeats through every idle interval
  echo "== $max mounts up; mount RSS (KiB) is reported after the run"
fi
counts_json=$(printf '%s\n' $COUNTS | paste -sd, -)
export MANY_CLIENTS="{\"url\": \"$URL\", \"files\": ${FILES:-1000}, \"idle\": ${IDLE:-30},
  \"counts\": [$counts_json], \"engine_kind\": \"$KIND\", \"engine_url\": \"$ENGINE_URL\",
  \"options\": ${OPTIONS:-{\"cache_size\": 0\}}, \"clients_up\": ${CLIENTS_UP:-0}}"
echo "== $KIND, $(printf '%s' "$META" | sed -E 's#://([^:@/]*):[^@]*@#://\1:***@#'), ${FILES:-1000} files per client"
"$PY" "$ROOT/benches/many_clients.py" driver
if [ "${MOUNTS:-0}" = 1 ]; then
  for m in "${mounts[@]}"; do
    pid=$(pgrep -f "strata mount .* $m( |\$)" | head -1 || true)
    [ -n "$pid" ] && grep -E '^VmHWM' /proc/"$pid"/status | sed "s#^#$m #"
  done | sort -k3 -n | awk '{print} END {print "== mounts peak RSS above, ascending"}' | tail -4
fi
