#!/usr/bin/env bash
# The pause applications see when a mount is upgraded in place or its process is killed:
# Strata's hand-over (a new `strata mount` on the mount point, with nothing buffered and
# with WRITE_MIB buffered), Strata's restart after `kill -9` of the serving process, and
# JuiceFS 1.4.2's smooth upgrade (a new `juicefs mount -d` on the mount point), each over
# ROUNDS rounds with benches/handover_probe.py timing open+fstat and 4 KiB O_DIRECT reads.
#
# Usage: benches/handover.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs, ROUNDS=20,
#   WRITE_MIB=64. Needs root and /dev/fuse.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
ROUNDS=${ROUNDS:-20}
WRITE_MIB=${WRITE_MIB:-64}
WORK=${1:-/tmp/strata-handover-bench}
PROBE="python3 $ROOT/benches/handover_probe.py"
rm -rf "$WORK" && mkdir -p "$WORK/s" "$WORK/j"
cleanup() { umount -l "$WORK/s" 2>/dev/null || true; umount -l "$WORK/j" 2>/dev/null || true; }
trap cleanup EXIT

"$STRATA" format "sqlite3://$WORK/s.db" bench --storage file --bucket "$WORK/s-data" >/dev/null
mount_strata() { "$STRATA" mount "sqlite3://$WORK/s.db" "$WORK/s" -d --log "$WORK/s.log" --cache-dir "$WORK/s-cache" >/dev/null; }
mount_strata
echo "strata hand-over, nothing buffered: $($PROBE "$WORK/s" "$ROUNDS" -- bash -c "$(declare -f mount_strata); STRATA=$STRATA WORK=$WORK mount_strata")"
echo "strata hand-over, ${WRITE_MIB} MiB buffered: $(WRITE_MIB=$WRITE_MIB $PROBE "$WORK/s" "$ROUNDS" -- bash -c "$(declare -f mount_strata); STRATA=$STRATA WORK=$WORK mount_strata")"
kill_serving() { kill -9 "$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['pid'])" "$WORK/s/.config")"; sleep 0.05; }
echo "strata restart after kill -9 (5 rounds, the supervisor's limit per minute): $($PROBE "$WORK/s" 5 -- bash -c "$(declare -f kill_serving); WORK=$WORK kill_serving")"
umount "$WORK/s"

"$JUICEFS" format "sqlite3://$WORK/j.db" bench --storage file --bucket "$WORK/j-data/" >/dev/null 2>&1
mount_juicefs() { "$JUICEFS" mount -d "sqlite3://$WORK/j.db" "$WORK/j" --log "$WORK/j.log" --cache-dir "$WORK/j-cache" >/dev/null 2>&1; }
mount_juicefs
echo "juicefs smooth upgrade, nothing buffered: $($PROBE "$WORK/j" "$ROUNDS" -- bash -c "$(declare -f mount_juicefs); JUICEFS=$JUICEFS WORK=$WORK mount_juicefs")"
echo "juicefs smooth upgrade, ${WRITE_MIB} MiB buffered: $(WRITE_MIB=$WRITE_MIB $PROBE "$WORK/j" "$ROUNDS" -- bash -c "$(declare -f mount_juicefs); JUICEFS=$JUICEFS WORK=$WORK mount_juicefs")"
umount "$WORK/j" || umount -l "$WORK/j"
