#!/usr/bin/env bash
# The automatic metadata backup (`mount --backup-meta`) of a large volume while a writer
# keeps creating files (issue 39: backups at 100M inodes without stopping writers).
# Generates FILES files (`strata bench populate`, wide; SQLite unless META says), mounts with
# --backup-meta EVERY, and times a writer's creates (one file each, in a shell loop)
# before and during the first backup; prints the backup's time and size from the mount's
# log, and the mount's peak RSS. The backup is then loaded into an empty SQLite database
# and checked with fsck.
#
# Usage: benches/backup-at-scale.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), FILES=10000000, EVERY=20s,
#   META=URL of an empty engine (default SQLite in WORKDIR; a volume made elsewhere is
#   left there afterwards), MOUNT_FLAGS="..." extra mount flags (e.g.
#   --backup-meta-no-snapshot)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
WORK=${1:-/tmp/strata-backup-scale}
FILES=${FILES:-10000000}
EVERY=${EVERY:-20s}
MNT=$WORK/mnt
cleanup() { mountpoint -q "$MNT" 2>/dev/null && umount -l "$MNT" || true; }
trap cleanup EXIT
cleanup
rm -rf "$WORK" && mkdir -p "$MNT"
META=${META:-sqlite3://$WORK/meta.db}

echo "== populate $FILES files"
/usr/bin/time -f "populate: %e s" "$STRATA" bench populate "$META" backup-scale \
  --files "$FILES" --bucket "$WORK/data" >/dev/null
# shellcheck disable=SC2086 # extra flags are words
"$STRATA" mount "$META" "$MNT" -d --log "$WORK/mount.log" --cache-dir "$WORK/cache" \
  --backup-meta "$EVERY" ${MOUNT_FLAGS:-} >/dev/null
for _ in $(seq 1 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
PID=$(pgrep -f "$(basename "$STRATA") mount .* $MNT" | head -1)
mkdir "$MNT/w"

creates() { # label: 500 creates, their time
  local t0 t1
  t0=$(date +%s.%N)
  for i in $(seq 500); do : >"$MNT/w/$1-$i"; done
  t1=$(date +%s.%N)
  printf '%-22s 500 creates in %6.3f s (%.2f ms each)\n' "$1" "$(echo "$t1 - $t0" | bc)" \
    "$(echo "($t1 - $t0) * 2" | bc -l)"
}
MOUNTED=$(date +%s)
# Creates in batches until the first backup (due EVERY after mounting) has finished.
batch=0
until grep -q "metadata backup .*inodes in" "$WORK/mount.log" 2>/dev/null; do
  batch=$((batch + 1))
  creates "b$batch t+$(( $(date +%s) - MOUNTED ))s"
done
grep -o "metadata backup .*" "$WORK/mount.log" | head -1
echo "mount peak RSS: $(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$PID/status") MiB"
umount "$MNT"
BACKUP=$(ls "$WORK"/data/backup-scale/meta/dump-*.bin | head -1)
ls -l "$BACKUP" | awk '{print "backup: " $5 " bytes"}'
/usr/bin/time -f "load of the backup: %e s, peak RSS %M KiB" \
  "$STRATA" load "sqlite3://$WORK/restored.db" "$BACKUP" >/dev/null
"$STRATA" fsck "sqlite3://$WORK/restored.db" 2>&1 | tail -2
