"""File objects from Client.open behave like Python's own: modes, buffering, text,
seek/tell, readinto, readline, iteration, flush, close, context managers."""

import errno
import io
import os

import pytest


def test_binary_write_read_seek_tell(client):
    with client.open("/f", "wb") as f:
        assert isinstance(f, io.BufferedWriter) and f.writable() and not f.readable()
        assert f.write(b"hello ") == 6
        assert f.tell() == 6
        f.write(memoryview(b"world"))
    assert f.closed
    with client.open("/f", "rb") as f:
        assert f.read(5) == b"hello"
        assert f.tell() == 5
        assert f.seek(-5, os.SEEK_END) == 6
        assert f.read() == b"world"
        assert f.read() == b""
        f.seek(0)
        buf = bytearray(4)
        assert f.readinto(buf) == 4 and buf == b"hell"
        assert f.seek(2, os.SEEK_CUR) == 6
        assert f.read1(100) == b"world"
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")
        with pytest.raises(io.UnsupportedOperation):
            f.fileno()


def test_text_mode_lines_and_iteration(client):
    with client.open("/t.txt", "w", encoding="utf-8") as f:
        assert isinstance(f, io.TextIOWrapper)
        f.write("première ligne\nsecond\n")
        print("third", file=f)
    with client.open("/t.txt", encoding="utf-8") as f:
        assert f.readline() == "première ligne\n"
        assert list(f) == ["second\n", "third\n"]
    with client.open("/t.txt", "rb") as f:
        assert f.readlines()[0] == "première ligne\n".encode()


def test_modes_truncate_append_exclusive_update(client):
    with client.open("/m", "w") as f:
        f.write("0123456789")
    with client.open("/m", "w") as f:
        f.write("ab")
    assert client.open("/m").read() == "ab"
    with client.open("/m", "a") as f:
        f.write("cd")
        assert f.tell() == 4
    assert client.open("/m").read() == "abcd"
    with pytest.raises(FileExistsError):
        client.open("/m", "x")
    with client.open("/new", "xb") as f:
        f.write(b"1")
    with client.open("/m", "r+b") as f:
        f.seek(1)
        f.write(b"XY")
        f.seek(0)
        assert f.read() == b"aXYd"
        f.truncate(2)
    assert client.open("/m", "rb").read() == b"aX"
    with client.open("/m", "w+b") as f:
        f.write(b"fresh")
        f.seek(0)
        assert f.read() == b"fresh"
    with client.open("/m", "a+b") as f:
        f.write(b"!")
        f.seek(0)
        assert f.read() == b"fresh!"


def test_unbuffered_files(client):
    with client.open("/u", "wb", buffering=0) as f:
        assert f.write(b"raw") == 3
    with client.open("/u", "rb", buffering=0) as f:
        assert f.read(2) == b"ra" and f.readall() == b"w"
    with pytest.raises(ValueError):
        client.open("/u", "r", buffering=0)


def test_bad_modes_are_value_errors_and_create_nothing(client):
    for mode in ("rw", "z", "rr", "wbt", "", "r+w", "ab+x"):
        with pytest.raises(ValueError):
            client.open(f"/bad-{len(mode)}", mode)
    with pytest.raises(TypeError):
        client.open("/bad", 5)
    assert not [n for n in client.listdir("/") if n.startswith("bad")]


def test_open_errors(client):
    client.mkdir("/d")
    with pytest.raises(IsADirectoryError):
        client.open("/d")
    with pytest.raises(IsADirectoryError):
        client.open("/d", "w")
    with pytest.raises(FileNotFoundError):
        client.open("/nope")
    with pytest.raises(FileNotFoundError):
        client.open("/nodir/f", "w")
    with client.open("/f", "w"):
        pass
    with pytest.raises(NotADirectoryError):
        client.open("/f/g", "w")


def test_closed_file_operations_raise_value_error(client):
    f = client.open("/c", "wb")
    f.write(b"1")
    f.close()
    f.close()
    for call in (lambda: f.write(b"x"), lambda: f.tell(), lambda: f.flush()):
        with pytest.raises(ValueError):
            call()
    r = client.open("/c", "rb")
    r.close()
    with pytest.raises(ValueError):
        r.read()


def test_large_file_spanning_chunks(client):
    piece = bytes(range(256)) * 4096  # 1 MiB
    with client.open("/big", "wb") as f:
        for i in range(70):
            f.write(piece[i:] + piece[:i])
    assert client.stat("/big").st_size == 70 << 20
    with client.open("/big", "rb") as f:
        f.seek((64 << 20) - 3)
        tail = f.read(6)
        i = 63
        expect_end = (piece[i:] + piece[:i])[-3:]
        assert tail[:3] == expect_end
        f.seek(0)
        total = 0
        while chunk := f.read(3 << 20):
            total += len(chunk)
        assert total == 70 << 20
    with client.open("/big", "rb") as f:
        assert len(f.read()) == 70 << 20


def test_fsync_and_flush_commit_for_other_clients(volume):
    writer = volume.client()
    reader = volume.client()
    try:
        f = writer.open("/shared", "wb")
        f.write(b"visible after flush")
        f.flush()
        assert reader.open("/shared", "rb").read() == b"visible after flush"
        f.raw.fsync()
        f.close()
    finally:
        writer.close()
        reader.close()


def test_a_file_dropped_without_close_is_committed_by_client_close(volume):
    c = volume.client()
    f = c.open("/dropped", "wb")
    f.write(b"kept")
    del f
    c.close()
    c2 = volume.client()
    try:
        assert c2.open("/dropped", "rb").read() == b"kept"
    finally:
        c2.close()


def test_errno_attribute_on_failures(client):
    with pytest.raises(OSError) as e:
        client.open("/missing/x")
    assert e.value.errno == errno.ENOENT and e.value.strerror


def test_close_to_open_across_clients_every_time(volume):
    # Each open after another client's close sees that close's data, also when the
    # open takes its attributes from the lookup it just made (on engines with a feed).
    writer = volume.client()
    reader = volume.client()
    try:
        with reader.open("/c2o", "wb"):
            pass
        assert reader.open("/c2o", "rb").read() == b""
        for i in range(50):
            data = f"version {i} ".encode() * (i + 1)
            with writer.open("/c2o", "wb") as f:
                f.write(data)
            with reader.open("/c2o", "rb") as f:
                assert f.read() == data, f"round {i}"
    finally:
        writer.close()
        reader.close()
