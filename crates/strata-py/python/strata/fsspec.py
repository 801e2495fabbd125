"""fsspec file system for Strata volumes: protocol "strata".

    fs = fsspec.filesystem("strata", meta_url="redis://host:6379/1")
    pandas.read_parquet("strata:///data/t.parquet", storage_options={"meta_url": ...})

The META-URL comes from `meta_url` or the environment variable STRATA_META_URL; other
keyword arguments are strata.Client options. Paths are from the volume's root.
"""

import os
import stat as _stat

from fsspec.spec import AbstractFileSystem

from . import Client


# Options fsspec itself takes; everything else is a strata.Client option.
_FSSPEC_OPTIONS = {"skip_instance_cache", "use_listings_cache", "listings_expiry_time",
                   "max_paths", "asynchronous", "loop"}


class StrataFileSystem(AbstractFileSystem):
    protocol = "strata"
    root_marker = "/"

    def __init__(self, meta_url=None, **options):
        client_options = {k: v for k, v in options.items() if k not in _FSSPEC_OPTIONS}
        super().__init__(meta_url=meta_url, **options)
        url = meta_url or os.environ.get("STRATA_META_URL")
        if not url:
            raise ValueError("strata: give meta_url=... or set STRATA_META_URL")
        self.client = Client(url, **client_options)

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = str(path)
        if path.startswith("strata://"):
            path = path[len("strata://"):]
        path = "/" + path.strip("/")
        return path

    def _info(self, path, st):
        kind = "directory" if _stat.S_ISDIR(st.st_mode) else (
            "file" if _stat.S_ISREG(st.st_mode) else "other")
        return {
            "name": path, "size": st.st_size, "type": kind, "mode": st.st_mode,
            "ino": st.st_ino, "nlink": st.st_nlink, "uid": st.st_uid, "gid": st.st_gid,
            "mtime": st.st_mtime, "created": st.st_ctime,
            "islink": _stat.S_ISLNK(st.st_mode),
        }

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        return self._info(path, self.client.stat(path))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        st = self.client.stat(path)
        if not _stat.S_ISDIR(st.st_mode):
            return [self._info(path, st) if detail else path]
        base = path.rstrip("/")
        out = []
        for e in self.client.scandir(path):
            full = f"{base}/{e.name}"
            if detail:
                out.append(self._info(full, e.stat()))
            else:
                out.append(full)
        return out

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        path = self._strip_protocol(path)
        buffering = block_size if block_size and block_size > 1 else -1
        if set(mode) & set("wax"):
            # As on object stores, writing a file makes its missing parent directories.
            parent = path.rsplit("/", 1)[0]
            if parent:
                self.client.makedirs(parent, exist_ok=True)
        return self.client.open(path, mode, buffering=buffering)

    def mkdir(self, path, create_parents=True, **kwargs):
        path = self._strip_protocol(path)
        if create_parents:
            self.client.makedirs(path, exist_ok=True)
        else:
            self.client.mkdir(path)

    def makedirs(self, path, exist_ok=False):
        self.client.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def rmdir(self, path):
        self.client.rmdir(self._strip_protocol(path))

    def _rm(self, path):
        path = self._strip_protocol(path)
        if self.client.isdir(path):
            self.client.rmdir(path)
        else:
            self.client.remove(path)

    def rm_file(self, path):
        # fsspec's recursive rm calls this for every path, directories last.
        self._rm(path)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        self.client.rename(self._strip_protocol(path1), self._strip_protocol(path2))

    def cp_file(self, path1, path2, **kwargs):
        """A copy that shares the source's data (metadata only)."""
        self.client.clone(self._strip_protocol(path1), self._strip_protocol(path2))

    def created(self, path):
        import datetime
        return datetime.datetime.fromtimestamp(self.info(path)["created"], datetime.timezone.utc)

    def modified(self, path):
        import datetime
        return datetime.datetime.fromtimestamp(self.info(path)["mtime"], datetime.timezone.utc)

    def touch(self, path, truncate=True, **kwargs):
        path = self._strip_protocol(path)
        if truncate or not self.client.exists(path):
            with self.client.open(path, "wb"):
                pass
        else:
            self.client.utime(path)
