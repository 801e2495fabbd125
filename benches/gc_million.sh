#!/usr/bin/env bash
# gc on a volume of 1,000,000 objects (500,000 referenced by 500,000 files, 500,000
# leaked), to show gc's memory stays fixed: the listing and the references go through an
# external sort. Usage: benches/gc_million.sh [WORKDIR]   (needs ~5 GB free, ~5 minutes)
# Prints /usr/bin/time -v's peak RSS and wall time of `strata gc` and `strata fsck`.
set -euo pipefail
STRATA=${STRATA:-$(dirname "$0")/../target/release/strata}
WORK=${1:-/tmp/strata-gc-million}
FILES=${FILES:-500000}
LEAKED=${LEAKED:-500000}
rm -rf "$WORK" && mkdir -p "$WORK/bucket"

echo "== writing a dump of $FILES files"
python3 - "$WORK" "$FILES" <<'PY'
import json, sys
work, files = sys.argv[1], int(sys.argv[2])
now = 1_790_000_000_000_000_000
out = open(f"{work}/dump.json", "w")
def w(o): out.write(json.dumps(o, separators=(",", ":")) + "\n")
fmt = {"name": "gcbench", "uuid": "00000000-0000-4000-8000-00000000bench", "storage": "file",
       "bucket": f"{work}/bucket", "block_size_kib": 4096, "compression": "none", "trash_days": 0,
       "capacity": 0, "inodes": 0, "created_at": 1790000000, "meta_version": 1}
dirs = (files + 999) // 1000
w({"k": "header", "strata_dump": 1, "format": fmt,
   "counters": {"nextInode": files + dirs + 10, "nextSlice": files + 10, "nextSession": 1}, "subdir": None})
def node(ino, kind, parent, length, nlink, **extra):
    n = {"k": "node", "ino": ino, "type": kind, "mode": 0o755 if kind == 2 else 0o644, "uid": 0, "gid": 0,
         "rdev": 0, "atime": now, "mtime": now, "ctime": now, "nlink": nlink, "length": length, "parent": parent}
    n.update(extra); w(n)
nodes = entries = 0
node(1, 2, 1, 4096, 2 + dirs, usage=[dirs * 4096, dirs]); nodes += 1
ino, sid = 10, 1
for d in range(dirs):
    w({"k": "entry", "parent": 1, "name": f"d{d}", "ino": ino, "type": 2}); entries += 1
    dino = ino; ino += 1
    n = min(1000, files - d * 1000)
    node(dino, 2, 1, 4096, 2, usage=[n * 4096, n]); nodes += 1
    for f in range(n):
        w({"k": "entry", "parent": dino, "name": f"f{f}", "ino": ino, "type": 1}); entries += 1
        node(ino, 1, dino, 4, 1, chunks=[[0, [[0, sid, 4, 0, 4]]]]); nodes += 1
        ino += 1; sid += 1
node(0x7FFFFFFF10000000, 2, 1, 4096, 2, usage=[0, 0]); nodes += 1
w({"k": "end", "nodes": nodes, "entries": entries})
PY
echo "== loading it"
"$STRATA" load "sqlite3://$WORK/meta.db" "$WORK/dump.json"
echo "== writing $((FILES + LEAKED)) objects"
python3 - "$WORK/bucket/gcbench" "$FILES" "$LEAKED" <<'PY'
import os, sys
root, files, leaked = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
old = 1_700_000_000
for sid in list(range(1, files + 1)) + list(range(10_000_001, 10_000_001 + leaked)):
    d = f"{root}/chunks/{sid // 1_000_000}/{sid // 1000}"
    if sid % 1000 in (0, 1) or sid == 10_000_001:
        os.makedirs(d, exist_ok=True)
    p = f"{d}/{sid}_0_4"
    with open(p, "wb") as f:
        f.write(b"STB1" + bytes(12))  # header-sized stand-in for a 4-byte block
    os.utime(p, (old, old))
PY
echo "== strata gc (report only)"
/usr/bin/time -v "$STRATA" gc "sqlite3://$WORK/meta.db" --external-sort-dir "$WORK/sort" 2>&1 \
  | grep -E "objects:|leaked:|references|Maximum resident|Elapsed"
echo "== strata fsck"
/usr/bin/time -v "$STRATA" fsck "sqlite3://$WORK/meta.db" --external-sort-dir "$WORK/sort" 2>&1 \
  | grep -E "checked|clean|broken files|Maximum resident|Elapsed" | head -6
