#!/usr/bin/env python3
"""Write a JuiceFS 1.x JSON dump (the format `juicefs dump` writes and `juicefs load`
reads) of a generated volume shaped like `strata bench populate`: FILES empty files
under /wide in leaf directories of 1,000 (SHAPE wide) or all in /flat (SHAPE flat), so
benches/dump-load.sh can compare the two systems' dump and load on the same shape.

Usage: juicefs_dump_gen.py FILES [wide|flat] > dump.json
"""
import json
import sys
import time
import uuid

PER_DIR = 1000


def attr(inode, kind, nlink, now):
    mode = 0o755 if kind == "directory" else 0o644
    return (
        '{"inode":%d,"type":"%s","mode":%d,"uid":0,"gid":0,"atime":%d,"mtime":%d,'
        '"ctime":%d,"atimensec":0,"mtimensec":0,"ctimensec":0,"nlink":%d,"length":0}'
        % (inode, kind, mode, now, now, now, nlink)
    )


def main():
    files = int(sys.argv[1])
    shape = sys.argv[2] if len(sys.argv) > 2 else "wide"
    now = int(time.time())
    out = sys.stdout
    leaves = max(1, -(-files // PER_DIR)) if shape == "wide" else 1
    inodes = 2 + files + (leaves if shape == "wide" else 0)
    setting = {
        "Name": "dumpvol", "UUID": str(uuid.uuid4()), "Storage": "file",
        "Bucket": "/tmp/jfs-dump-load-data/", "BlockSize": 4096, "Compression": "none",
        "TrashDays": 1, "MetaVersion": 1, "MinClientVersion": "1.1.0-A",
        "DirStats": True, "EnableACL": False,
    }
    counters = {
        "usedSpace": 4096 * (inodes - 1), "usedInodes": inodes - 1,
        "nextInodes": inodes + 2, "nextChunk": 1, "nextSession": 1, "nextTrash": 0,
    }
    out.write('{\n"Setting": %s,\n"Counters": %s,\n"Sustained": [],\n"DelFiles": [],\n'
              % (json.dumps(setting), json.dumps(counters)))
    out.write('"FSTree": {"attr": %s, "entries": {\n' % attr(1, "directory", 3, now))
    top = 2
    out.write('"%s": {"attr": %s, "entries": {\n'
              % (shape, attr(top, "directory", 2 + (leaves if shape == "wide" else 0), now)))
    next_ino = 3
    written = 0
    for leaf in range(leaves):
        if shape == "wide":
            out.write('%s"d%d": {"attr": %s, "entries": {\n'
                      % ("," if leaf else "", leaf, attr(next_ino, "directory", 2, now)))
            next_ino += 1
        count = min(PER_DIR, files - written) if shape == "wide" else files
        parts = []
        for i in range(count):
            parts.append('"f%d": {"attr": %s}' % (written + i, attr(next_ino, "regular", 1, now)))
            next_ino += 1
            if len(parts) == 10000:
                out.write(",\n".join(parts))
                parts = []
                if i + 1 < count:
                    out.write(",\n")
        out.write(",\n".join(parts))
        written += count
        if shape == "wide":
            out.write("\n}}")
    out.write("\n}}\n}},\n")
    out.write('"Trash": {"attr": %s, "entries": {}}\n}\n'
              % attr(9223372032828243968, "directory", 2, now))


if __name__ == "__main__":
    main()
