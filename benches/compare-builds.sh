#!/usr/bin/env bash
# Two builds of Strata through the same metadata workloads, so a slide is seen when it
# lands: `benches/metadata.sh` (ONLY=strata) runs with the binary built from OLD (a git
# revision: the previous release, or the commit before a change) and with the current
# one, round after round, alternating; then one table gives each workload's median for
# both, the ratio, and SLIDE where the current build is more than 10 % slower (or its
# mount's peak RSS more than 10 % higher).
#
# Usage: benches/compare-builds.sh OLD-REV [WORKDIR]
#   NEW=path/to/strata (default target/release/strata, built by the caller), ROUNDS=3,
#   ENGINES=redis, DELAYS=0, FILES, OPS (passed on to metadata.sh).
# OLD is built in a worktree under WORKDIR with its own target directory, kept between
# runs (the first build takes about ten minutes on 2 cores). Needs what metadata.sh needs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD_REV=${1:?usage: benches/compare-builds.sh OLD-REV [WORKDIR]}
WORK=${2:-/tmp/strata-compare}
NEW=${NEW:-$ROOT/target/release/strata}
ROUNDS=${ROUNDS:-3}
export ENGINES=${ENGINES:-redis} DELAYS=${DELAYS:-0} ONLY=strata
PROXY=${PROXY:-$(dirname "$NEW")/strata-delay-proxy}
[ -x "$NEW" ] && [ -x "$PROXY" ] || {
  echo "build the current binaries first: cargo build --release -p strata -p strata-testkit" >&2
  exit 1
}
mkdir -p "$WORK"

# The old build, in its own worktree and target directory.
OLD_SRC=$WORK/old-src
OLD_COMMIT=$(git -C "$ROOT" rev-parse --verify "$OLD_REV^{commit}")
if [ ! -d "$OLD_SRC" ]; then
  git -C "$ROOT" worktree add -q --detach "$OLD_SRC" "$OLD_COMMIT"
else
  git -C "$OLD_SRC" checkout -q --detach "$OLD_COMMIT"
fi
echo "== building $OLD_REV ($OLD_COMMIT)" >&2
(cd "$OLD_SRC" && CARGO_TARGET_DIR=$WORK/old-target cargo build -q --release --locked -p strata)
OLD=$WORK/old-target/release/strata

for round in $(seq 1 "$ROUNDS"); do
  for build in old new; do
    bin=$OLD; [ "$build" = new ] && bin=$NEW
    echo "== round $round, $build build" >&2
    STRATA=$bin PROXY=$PROXY "$ROOT/benches/metadata.sh" "$WORK/run" >/dev/null
    cp "$WORK/run/results.jsonl" "$WORK/$build-$round.jsonl"
  done
done

python3 - "$WORK" "$ROUNDS" "$OLD_REV" <<'PY'
import json, statistics, sys
work, rounds, old_rev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(build):
    rows = {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{build}-{r}.jsonl"):
            row = json.loads(line)
            rows.setdefault((row["engine"], row["delay"]), []).append(row)
    return rows
old, new = load("old"), load("new")
print(f"| engine, delay | workload | {old_rev} | current | current / old | |")
print("|---|---|---:|---:|---:|---|")
slides = 0
for where in sorted(old.keys() & new.keys()):
    keys = [k for k in old[where][0] if isinstance(old[where][0][k], (int, float))
            and not k.endswith(".rt") and k != "delay"]
    for key in keys:
        o = statistics.median(r[key] for r in old[where])
        n = statistics.median(r[key] for r in new[where])
        unit = "MiB" if key == "peak_rss" else "s"
        ratio = n / o if o else float("inf")
        slide = ratio > 1.10
        slides += slide
        print(f"| {where[0]}, +{where[1]} µs | {key} | {o:.3f} {unit} | {n:.3f} {unit} "
              f"| {ratio:.2f} | {'SLIDE' if slide else ''} |")
print(f"\n{slides} workload(s) more than 10 % worse than {old_rev} "
      f"(medians of {rounds} rounds; lower is better everywhere).")
PY
