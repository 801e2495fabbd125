"""File objects: a raw file over the native handle, with Python's own io.Buffered* and
io.TextIOWrapper on top, so what `Client.open` returns behaves like what `open` does."""

import io
import os

_DEFAULT_BUFFER = 1 << 20


def parse_mode(mode):
    """(os flags, readable, writable, append, text) for an open() mode string."""
    if not isinstance(mode, str):
        raise TypeError(f"open() argument 'mode' must be str, not {type(mode).__name__}")
    chars = set(mode)
    if len(chars) != len(mode) or not chars <= set("rwaxbt+") or len(chars & set("rwax")) != 1:
        raise ValueError(f"invalid mode: {mode!r}")
    if "b" in chars and "t" in chars:
        raise ValueError("can't have text and binary mode at once")
    plus = "+" in chars
    if "r" in chars:
        flags, readable, writable = (os.O_RDWR if plus else os.O_RDONLY), True, plus
    elif "w" in chars:
        flags = (os.O_RDWR if plus else os.O_WRONLY) | os.O_CREAT | os.O_TRUNC
        readable, writable = plus, True
    elif "a" in chars:
        flags = (os.O_RDWR if plus else os.O_WRONLY) | os.O_CREAT | os.O_APPEND
        readable, writable = plus, True
    else:
        flags = (os.O_RDWR if plus else os.O_WRONLY) | os.O_CREAT | os.O_EXCL
        readable, writable = plus, True
    return flags, readable, writable, "a" in chars, "b" not in chars


class RawFile(io.RawIOBase):
    """An unbuffered file of a Strata volume (what open(..., buffering=0) returns)."""

    def __init__(self, native, name, mode, readable, writable, append):
        super().__init__()
        self._native = native
        self.name = name
        self.mode = mode
        self._readable = readable
        self._writable = writable
        self._pos = native.size() if append else 0

    def readable(self):
        self._checkClosed()
        return self._readable

    def writable(self):
        self._checkClosed()
        return self._writable

    def seekable(self):
        self._checkClosed()
        return True

    def fileno(self):
        raise io.UnsupportedOperation("a Strata file has no OS file descriptor")

    def _check_readable(self):
        self._checkClosed()
        if not self._readable:
            raise io.UnsupportedOperation("File not open for reading")

    def _check_writable(self):
        self._checkClosed()
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")

    def readinto(self, b):
        self._check_readable()
        view = memoryview(b).cast("B")
        n, short = self._native.readinto(view, self._pos)
        if short is not None:
            view[:n] = short
        self._pos += n
        return n

    def read(self, size=-1):
        self._check_readable()
        if size is None or size < 0:
            return self.readall()
        data = self._native.pread(size, self._pos)
        self._pos += len(data)
        return data

    def readall(self):
        self._check_readable()
        data = self._native.readall(self._pos)
        self._pos += len(data)
        return data

    def write(self, b):
        self._check_writable()
        n, end = self._native.pwrite(b, self._pos)
        self._pos = end
        return n

    def seek(self, offset, whence=os.SEEK_SET):
        self._checkClosed()
        if whence == os.SEEK_SET:
            pos = offset
        elif whence == os.SEEK_CUR:
            pos = self._pos + offset
        elif whence == os.SEEK_END:
            pos = self._native.size() + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if pos < 0:
            raise OSError(22, "Invalid argument", self.name)
        self._pos = pos
        return pos

    def tell(self):
        self._checkClosed()
        return self._pos

    def truncate(self, size=None):
        self._check_writable()
        size = self._pos if size is None else size
        self._native.truncate(size)
        return size

    def flush(self):
        self._checkClosed()
        if self._writable:
            self._native.flush()

    def fsync(self):
        """Commit and make durable what was written (os.fsync has no descriptor to take)."""
        self._checkClosed()
        self._native.fsync()

    def close(self):
        if self.closed:
            return
        try:
            super().close()
        finally:
            self._native.close()

    def __repr__(self):
        return f"<strata.RawFile name={self.name!r} mode={self.mode!r}>"


class _CommitOnFlush:
    """flush() of Python's buffered files stops at the raw file's write(); for a file of
    a volume it also commits, so other clients see the data (as os.write would)."""

    def flush(self):
        super().flush()
        if not self.raw.closed:
            self.raw.flush()


class BufferedWriter(_CommitOnFlush, io.BufferedWriter):
    pass


class BufferedRandom(_CommitOnFlush, io.BufferedRandom):
    pass


def open_file(native, name, mode, parsed, buffering, encoding, errors, newline):
    """Wrap a native handle the way open() wraps a descriptor (`parsed`: parse_mode(mode))."""
    _, readable, writable, append, text = parsed
    raw = RawFile(native, name, mode, readable, writable, append)
    try:
        if buffering == 0:
            if text:
                raise ValueError("can't have unbuffered text I/O")
            return raw
        line_buffering = buffering == 1 and text
        size = _DEFAULT_BUFFER if buffering in (-1, 1) else buffering
        if readable and writable:
            buffer = BufferedRandom(raw, size)
        elif writable:
            buffer = BufferedWriter(raw, size)
        else:
            buffer = io.BufferedReader(raw, size)
        if not text:
            return buffer
        wrapper = io.TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
        wrapper.mode = mode
        return wrapper
    except BaseException:
        raw.close()
        raise
