"""Strata volumes from Python, without FUSE.

    import strata
    client = strata.Client("redis://127.0.0.1:6379/1")
    with client.open("/data/a.txt", "w") as f:
        f.write("hello")
    client.listdir("/data")

Paths are str, bytes or os.PathLike, absolute from the volume's root (or the client's
`subdir`); a relative path is taken from that root too. Errors are OSError subclasses
with the errno set (FileNotFoundError, PermissionError, FileExistsError, ...).
I/O runs without the GIL; one client may be shared by threads, and after os.fork() the
child transparently opens its own session on first use.
"""

import atexit
import os
import stat as _stat
import weakref

from . import _io
from ._native import Client as _NativeClient
from ._native import __version__
from ._options import native_options

__all__ = ["Client", "DirEntry", "__version__"]

_live_clients = weakref.WeakSet()


def _path(path):
    return os.fsencode(path)


def _stat_result(t):
    mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime, blocks, rdev = t
    return os.stat_result(
        (mode, ino, dev, nlink, uid, gid, size,
         atime // 1_000_000_000, mtime // 1_000_000_000, ctime // 1_000_000_000,
         atime / 1e9, mtime / 1e9, ctime / 1e9, atime, mtime, ctime,
         4096, blocks, rdev)
    )


class DirEntry:
    """What Client.scandir yields, like os.DirEntry."""

    __slots__ = ("name", "path", "_ino", "_kind", "_stat", "_client")

    def __init__(self, client, top, raw):
        name, ino, kind, st = raw
        self.name = os.fsdecode(name) if isinstance(top, str) else name
        sep = "/" if isinstance(top, str) else b"/"
        self.path = top.rstrip(sep) + sep + self.name if top.rstrip(sep) else sep + self.name
        self._ino, self._kind, self._client = ino, kind, client
        self._stat = _stat_result(st) if st is not None else None

    def inode(self):
        return self._ino

    def is_dir(self, *, follow_symlinks=True):
        if self._kind == "l" and follow_symlinks:
            return self._followed(_stat.S_ISDIR)
        return self._kind == "d"

    def is_file(self, *, follow_symlinks=True):
        if self._kind == "l" and follow_symlinks:
            return self._followed(_stat.S_ISREG)
        return self._kind == "f"

    def is_symlink(self):
        return self._kind == "l"

    def stat(self, *, follow_symlinks=True):
        if self._kind == "l" and follow_symlinks:
            return self._client.stat(self.path)
        if self._stat is None:
            self._stat = self._client.lstat(self.path)
        return self._stat

    def _followed(self, test):
        try:
            return test(self._client.stat(self.path).st_mode)
        except FileNotFoundError:
            return False

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"<strata.DirEntry {self.name!r}>"


class Client:
    """A Strata volume opened in this process.

    Keyword options are the mount's client flags: cache_dir, cache_size ("100G"),
    free_space_ratio, buffer_size ("300M"), cache_partial_only, max_readahead, prefetch,
    max_uploads, max_downloads, upload_limit, download_limit (Mbps), io_retries,
    get_timeout, put_timeout ("60s"), subdir, no_bgjob, backup_meta, heartbeat,
    meta_cache, open_cache, meta_cache_size ("32M"); plus read_only.
    """

    def __init__(self, meta_url, *, read_only=False, **options):
        if not isinstance(meta_url, str):
            raise TypeError("meta_url must be a str such as 'sqlite3:///path/strata.db'")
        self.meta_url = meta_url
        self._native = _NativeClient(meta_url, native_options(options), read_only)
        _live_clients.add(self)

    def close(self):
        """Flush buffered writes and close the session (also done at interpreter exit)."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        # The META-URL may hold a password: show only its scheme.
        return f"<strata.Client {self.meta_url.split('://', 1)[0]}://...>"

    # files
    def open(self, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None):
        """Like the built-in open(): binary or text, buffered or not."""
        parsed = _io.parse_mode(mode)
        native = self._native.open(_path(path), parsed[0], 0o666)
        return _io.open_file(native, path, mode, parsed, buffering, encoding, errors, newline)

    # attributes
    def stat(self, path, *, follow_symlinks=True):
        return _stat_result(self._native.stat(_path(path), follow_symlinks))

    def lstat(self, path):
        return self.stat(path, follow_symlinks=False)

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isdir(self, path):
        try:
            return _stat.S_ISDIR(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isfile(self, path):
        try:
            return _stat.S_ISREG(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def chmod(self, path, mode, *, follow_symlinks=True):
        self._native.setattr(_path(path), follow_symlinks, mode=mode)

    def chown(self, path, uid, gid, *, follow_symlinks=True):
        self._native.setattr(
            _path(path), follow_symlinks,
            uid=None if uid == -1 else uid, gid=None if gid == -1 else gid,
        )

    def utime(self, path, times=None, *, ns=None, follow_symlinks=True):
        """Set access and modification times: (atime, mtime) seconds, or ns=(a, m)."""
        if times is not None and ns is not None:
            raise ValueError("utime: you may specify either 'times' or 'ns' but not both")
        p = _path(path)
        if ns is not None:
            self._native.setattr(p, follow_symlinks, atime_ns=int(ns[0]), mtime_ns=int(ns[1]))
        elif times is not None:
            a, m = times
            self._native.setattr(p, follow_symlinks, atime_ns=int(a * 1e9), mtime_ns=int(m * 1e9))
        else:
            self._native.setattr(p, follow_symlinks, touch=True)

    def truncate(self, path, length):
        if length < 0:
            raise OSError(22, "Invalid argument", path)
        self._native.setattr(_path(path), True, size=length)

    # directories
    def listdir(self, path="/"):
        names = [e[0] for e in self._native.scandir(_path(path))]
        return names if isinstance(path, bytes) else [os.fsdecode(n) for n in names]

    def scandir(self, path="/"):
        top = os.fspath(path)
        return iter([DirEntry(self, top, e) for e in self._native.scandir(_path(top))])

    def mkdir(self, path, mode=0o777):
        self._native.mkdir(_path(path), mode)

    def makedirs(self, path, mode=0o777, exist_ok=False):
        """Create path and missing parents, like os.makedirs."""
        p = os.fsdecode(path)
        head = p.rstrip("/").rpartition("/")[0]
        if head and not self.exists(head):
            try:
                self.makedirs(head, mode, exist_ok=True)
            except FileExistsError:
                pass
        try:
            self.mkdir(p, mode)
        except OSError:
            if not exist_ok or not self.isdir(p):
                raise

    def rmdir(self, path):
        self._native.rmdir(_path(path))

    def remove(self, path):
        self._native.unlink(_path(path))

    unlink = remove

    def rename(self, src, dst):
        """rename(2): replaces an existing dst (a file, or an empty directory)."""
        self._native.rename(_path(src), _path(dst), 0)

    replace = rename

    def walk(self, top="/", topdown=True, onerror=None, followlinks=False):
        """Like os.walk."""
        try:
            entries = list(self.scandir(top))
        except OSError as e:
            if onerror is not None:
                onerror(e)
            return
        dirs, files = [], []
        for e in entries:
            (dirs if e.is_dir(follow_symlinks=followlinks) else files).append(e.name)
        if topdown:
            yield top, dirs, files
        sep = "/" if isinstance(top, str) else b"/"
        for d in dirs:
            yield from self.walk(top.rstrip(sep) + sep + d, topdown, onerror, followlinks)
        if not topdown:
            yield top, dirs, files

    # links
    def symlink(self, target, path):
        self._native.symlink(_path(target), _path(path))

    def readlink(self, path):
        target = self._native.readlink(_path(path))
        return target if isinstance(path, bytes) else os.fsdecode(target)

    def link(self, src, dst):
        self._native.link(_path(src), _path(dst))

    # extended attributes
    def getxattr(self, path, attribute, *, follow_symlinks=True):
        return self._native.getxattr(_path(path), os.fsencode(attribute), follow_symlinks)

    def setxattr(self, path, attribute, value, flags=0, *, follow_symlinks=True):
        self._native.setxattr(_path(path), os.fsencode(attribute), bytes(value), flags, follow_symlinks)

    def listxattr(self, path, *, follow_symlinks=True):
        return [os.fsdecode(n) for n in self._native.listxattr(_path(path), follow_symlinks)]

    def removexattr(self, path, attribute, *, follow_symlinks=True):
        self._native.removexattr(_path(path), os.fsencode(attribute), follow_symlinks)

    # tools
    def summary(self, path="/", depth=0):
        """Bytes, files and directories below path: a list of dicts, path itself first,
        then each directory down to `depth` levels (as `strata summary`)."""
        rows = self._native.summary(_path(path), depth)
        return [
            {"path": os.fsdecode(p) or ".", "bytes": b, "files": f, "dirs": d}
            for p, b, f, d in rows
        ]

    def clone(self, src, dst, *, preserve=False):
        """Copy a file or tree sharing its data (metadata only); returns inodes made."""
        return self._native.clone(_path(src), _path(dst), preserve)

    def warmup(self, path):
        """Fetch the blocks of every file at or below path into the cache that owns them
        (this client's, or the owners' in a cache group): (files, bytes)."""
        return self._native.warmup(_path(path))

    def statvfs(self):
        total, avail, used_inodes, avail_inodes = self._native.statvfs()
        return {"total_bytes": total, "available_bytes": avail,
                "used_inodes": used_inodes, "available_inodes": avail_inodes}


@atexit.register
def _close_clients():
    for client in list(_live_clients):
        try:
            client.close()
        except Exception as e:  # noqa: BLE001 - report every failure, keep closing
            import sys
            print(f"strata: closing a client at exit: {e}", file=sys.stderr)
