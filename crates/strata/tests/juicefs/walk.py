"""Print every entry under ROOT (argv[1]) as JSON: type, mode, owner, mtime (ns), link
count, symlink target or size and SHA-256 of the bytes, and extended attributes.
The client's own files at the root (.stats, .config, .trash, ...) are left out."""
import hashlib
import json
import os
import stat
import sys

SKIP = {".stats", ".config", ".accesslog", ".control", ".trash"}


def record(path):
    st = os.lstat(path)
    rec = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
           st.st_mtime_ns, st.st_nlink]
    if stat.S_ISLNK(st.st_mode):
        rec.append(os.fsencode(os.readlink(path)).hex())
    elif stat.S_ISREG(st.st_mode):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        rec += [st.st_size, digest.hexdigest()]
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        names = []
    rec.append(sorted((n, os.getxattr(path, n, follow_symlinks=False).hex()) for n in names))
    return rec


def main(root):
    out = {}
    for dirpath, dirs, files in os.walk(root):
        if dirpath == root:
            dirs[:] = [d for d in dirs if d not in SKIP]
            files = [f for f in files if f not in SKIP]
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            out[os.fsencode(os.path.relpath(path, root)).hex()] = record(path)
    json.dump(out, sys.stdout, sort_keys=True, indent=0)


main(sys.argv[1])
