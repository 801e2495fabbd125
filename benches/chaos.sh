#!/usr/bin/env bash
# The fault harness, long version, for nightly use: the same runs as CI's short one
# (crates/strata/tests/chaos.rs) for as long and with whatever seed you like, on one
# engine or all of them. Each engine runs SECS seconds of workload under network and
# object-store faults, in epochs of 400 operations each checked for linearizability;
# then fsck and gc must find the volume clean. Prints each engine's report (operations,
# faults fired, lost answers, lost commits settled) and exits non-zero on any violation,
# keeping the failing epoch's history and fault log in $TMPDIR/strata-chaos-ENGINE-SEED
# (re-check one with `strata-history-check FILE [BUDGET]`).
#
# Needs the servers of scripts/test.sh (STRATA_TEST_REDIS, STRATA_TEST_POSTGRES,
# STRATA_TEST_ETCD, STRATA_TEST_MYSQL); `source scripts/metadata-servers.sh` with WORK set starts them.
#
# Then the power-cut test (crates/strata/tests/power_cut.rs: SQLite, local bucket and
# staging on the test kit's crash file system) runs CUTS cuts in a row per volume.
#
# Usage: benches/chaos.sh [ENGINE...]        (default: sqlite redis postgres etcd mysql)
#   SECS=workload seconds per engine (600), SEED=seed (a fresh one per run, printed),
#   CUTS=power cuts per volume (30).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/strata/target}"
SECS=${SECS:-600}
SEED=${SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
ENGINES=("$@")
[ ${#ENGINES[@]} -gt 0 ] || ENGINES=(sqlite redis postgres etcd mysql)
echo "== fault harness: ${ENGINES[*]}, $SECS s each, seed $SEED"
cargo nextest run -p strata --test chaos --no-run --locked >/dev/null
status=0
for engine in "${ENGINES[@]}"; do
  started=$(date +%s)
  if STRATA_CHAOS_SECS=$SECS STRATA_CHAOS_SEED=$SEED RUST_LOG=${RUST_LOG:-error} \
    cargo nextest run -p strata --test chaos --no-capture --locked \
      -E "test(/_on_${engine}\$/)" 2>&1 | tee "/tmp/strata-chaos-$engine.log" |
      grep -E "^$engine \(seed|no order|gave up|garbage|unexpected errors: \[\"|failed:" ; then :; fi
  if grep -q "PASS \[" "/tmp/strata-chaos-$engine.log"; then
    echo "$engine: no violation in $(( $(date +%s) - started )) s"
  else
    echo "$engine: FAILED (log: /tmp/strata-chaos-$engine.log)"; status=1
  fi
done
CUTS=${CUTS:-30}
started=$(date +%s)
if STRATA_POWER_CUTS=$CUTS cargo nextest run -p strata --test power_cut --no-capture --locked \
    > /tmp/strata-power-cut.log 2>&1; then
  echo "power cut: $CUTS cuts per volume, no violation in $(( $(date +%s) - started )) s"
else
  echo "power cut: FAILED (log: /tmp/strata-power-cut.log)"; status=1
fi
exit $status
