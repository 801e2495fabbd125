"""Every namespace call of strata.Client, and the errno each failure carries, on the
embedded default and on Redis."""

import errno
import json
import os
import stat
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_mkdir_listdir_scandir_rmdir(client):
    client.mkdir("/d")
    client.mkdir("/d/sub", 0o700)
    for name in ("b", "a", "c"):
        with client.open(f"/d/{name}", "wb") as f:
            f.write(name.encode() * 3)
    assert sorted(client.listdir("/d")) == ["a", "b", "c", "sub"]
    assert client.listdir(b"/d")[0].__class__ is bytes
    entries = {e.name: e for e in client.scandir("/d")}
    assert entries["sub"].is_dir() and not entries["sub"].is_file()
    assert entries["a"].is_file() and entries["a"].stat().st_size == 3
    assert entries["a"].path == "/d/a"
    assert stat.S_IMODE(client.stat("/d/sub").st_mode) == 0o700
    with pytest.raises(FileExistsError) as e:
        client.mkdir("/d")
    assert e.value.errno == errno.EEXIST and e.value.filename == "/d"
    with pytest.raises(FileNotFoundError):
        client.mkdir("/missing/x")
    with pytest.raises(OSError) as e:
        client.rmdir("/d")
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(NotADirectoryError):
        client.rmdir("/d/a")
    with pytest.raises(NotADirectoryError):
        client.listdir("/d/a")
    client.rmdir("/d/sub")
    assert "sub" not in client.listdir("/d")


def test_listing_of_a_directory_larger_than_one_page(client):
    client.mkdir("/many")
    for i in range(2500):
        with client.open(f"/many/f{i:05}", "wb"):
            pass
    names = client.listdir("/many")
    assert len(names) == 2500 and len(set(names)) == 2500
    assert sorted(names) == [f"f{i:05}" for i in range(2500)]


def test_makedirs_exists_isdir_isfile(client):
    client.makedirs("/x/y/z")
    assert client.isdir("/x/y/z") and client.exists("/x/y")
    client.makedirs("/x/y/z", exist_ok=True)
    with pytest.raises(FileExistsError):
        client.makedirs("/x/y/z")
    with client.open("/x/f", "w") as f:
        f.write("1")
    assert client.isfile("/x/f") and not client.isdir("/x/f")
    assert not client.exists("/x/nope") and not client.exists("/x/f/below")
    with pytest.raises(FileExistsError):
        client.makedirs("/x/f", exist_ok=True)


def test_stat_lstat_and_times(client):
    before = time.time_ns()
    with client.open("/t", "wb") as f:
        f.write(b"x" * 5000)
    st = client.stat("/t")
    assert stat.S_ISREG(st.st_mode) and st.st_size == 5000 and st.st_nlink == 1
    assert st.st_uid == os.geteuid() and st.st_gid == os.getegid()
    assert st.st_mtime_ns >= before - 1_000_000_000 and st.st_blocks >= 8
    assert stat.S_IMODE(st.st_mode) == 0o666 & ~_umask()
    client.utime("/t", (1_000_000, 2_000_000))
    st = client.stat("/t")
    assert (st.st_atime, st.st_mtime) == (1_000_000, 2_000_000)
    client.utime("/t", ns=(5, 7_000_000_123))
    assert client.stat("/t").st_mtime_ns == 7_000_000_123
    client.utime("/t")
    assert client.stat("/t").st_mtime_ns >= before
    with pytest.raises(FileNotFoundError):
        client.stat("/nope")
    with pytest.raises(NotADirectoryError):
        client.stat("/t/below")
    with pytest.raises(ValueError):
        client.utime("/t", (1, 2), ns=(1, 2))


def _umask():
    old = os.umask(0o022)
    os.umask(old)
    return old


def test_chmod_chown_truncate(client):
    with client.open("/f", "wb") as f:
        f.write(b"0123456789")
    client.chmod("/f", 0o640)
    assert stat.S_IMODE(client.stat("/f").st_mode) == 0o640
    client.chown("/f", 1234, -1)
    st = client.stat("/f")
    assert (st.st_uid, st.st_gid) == (1234, os.getegid())
    client.chown("/f", -1, 4321)
    assert client.stat("/f").st_gid == 4321
    client.truncate("/f", 4)
    assert client.open("/f", "rb").read() == b"0123"
    client.truncate("/f", 6)
    assert client.open("/f", "rb").read() == b"0123\0\0"
    with pytest.raises(OSError) as e:
        client.truncate("/f", -1)
    assert e.value.errno == errno.EINVAL
    client.mkdir("/d")
    with pytest.raises(IsADirectoryError):
        client.truncate("/d", 0)
    with pytest.raises(FileNotFoundError):
        client.chmod("/nope", 0o600)


def test_rename_and_replace(client):
    for name, data in (("a", b"A"), ("b", b"B")):
        with client.open(f"/{name}", "wb") as f:
            f.write(data)
    client.rename("/a", "/b")
    assert not client.exists("/a") and client.open("/b", "rb").read() == b"A"
    client.mkdir("/d1")
    client.mkdir("/d2")
    with client.open("/d2/f", "wb"):
        pass
    with pytest.raises(OSError) as e:
        client.rename("/d1", "/d2")
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(IsADirectoryError):
        client.replace("/b", "/d1")
    with pytest.raises(NotADirectoryError):
        client.rename("/d1", "/b")
    client.replace("/b", "/d1/moved")
    assert client.listdir("/d1") == ["moved"]
    with pytest.raises(FileNotFoundError):
        client.rename("/nope", "/x")
    with pytest.raises(OSError) as e:
        client.rename("/d1", "/d1/inside")
    assert e.value.errno == errno.EINVAL


def test_remove(client):
    with client.open("/f", "w"):
        pass
    client.remove("/f")
    assert not client.exists("/f")
    with pytest.raises(FileNotFoundError):
        client.unlink("/f")
    client.mkdir("/d")
    with pytest.raises(IsADirectoryError):
        client.remove("/d")


def test_symlink_readlink_link(client):
    client.makedirs("/a/b")
    with client.open("/a/b/target", "w") as f:
        f.write("data")
    client.symlink("b/target", "/a/rel")
    client.symlink("/a/b", "/abs")
    assert client.readlink("/a/rel") == "b/target"
    assert client.open("/a/rel").read() == "data"
    assert client.open("/abs/target").read() == "data"
    assert stat.S_ISLNK(client.lstat("/a/rel").st_mode)
    assert stat.S_ISREG(client.stat("/a/rel").st_mode)
    client.symlink("../../a/b/target", "/a/b/up")
    assert client.open("/a/b/up").read() == "data"
    client.symlink("/loop2", "/loop1")
    client.symlink("/loop1", "/loop2")
    with pytest.raises(OSError) as e:
        client.stat("/loop1")
    assert e.value.errno == errno.ELOOP
    with pytest.raises(OSError) as e:
        client.readlink("/a/b/target")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(FileExistsError):
        client.symlink("x", "/a/rel")
    client.link("/a/b/target", "/hard")
    assert client.stat("/hard").st_nlink == 2
    assert client.stat("/hard").st_ino == client.stat("/a/b/target").st_ino
    with pytest.raises(PermissionError):
        client.link("/a", "/dirlink")
    with pytest.raises(FileNotFoundError):
        client.link("/nope", "/x")


def test_paths_cannot_leave_the_client_root(volume):
    c = volume.client()
    c.makedirs("/top/inner")
    with c.open("/outside", "w") as f:
        f.write("root file")
    c.close()
    sub = volume.client(subdir="/top")
    try:
        assert sub.listdir("/") == ["inner"]
        assert sub.listdir("/../..") == ["inner"]
        assert not sub.exists("/../outside") and not sub.exists("../../outside")
        sub.symlink("/../../outside", "/inner/escape")
        with pytest.raises(FileNotFoundError):
            sub.open("/inner/escape")
        assert sub.listdir("inner/../") == ["inner"]
    finally:
        sub.close()


def test_xattrs(client):
    with client.open("/f", "w"):
        pass
    client.setxattr("/f", "user.one", b"1")
    client.setxattr("/f", "user.two", b"22")
    assert sorted(client.listxattr("/f")) == ["user.one", "user.two"]
    assert client.getxattr("/f", "user.two") == b"22"
    with pytest.raises(FileExistsError):
        client.setxattr("/f", "user.one", b"x", os.XATTR_CREATE)
    with pytest.raises(OSError) as e:
        client.setxattr("/f", "user.three", b"x", os.XATTR_REPLACE)
    assert e.value.errno == errno.ENODATA
    client.removexattr("/f", "user.one")
    with pytest.raises(OSError) as e:
        client.getxattr("/f", "user.one")
    assert e.value.errno == errno.ENODATA
    assert client.listxattr("/f") == ["user.two"]


def test_summary_clone_warmup_statvfs(client):
    client.makedirs("/src/sub")
    with client.open("/src/a", "wb") as f:
        f.write(b"a" * 10_000)
    with client.open("/src/sub/b", "wb") as f:
        f.write(b"b" * 5_000_000)
    rows = client.summary("/src", depth=1)
    assert [r["path"] for r in rows] == [".", "sub"]
    assert rows[0]["files"] == 2 and rows[0]["dirs"] == 1 and rows[1]["files"] == 1
    assert rows[0]["bytes"] >= 5_010_000
    assert client.clone("/src", "/copy") == 4
    assert client.open("/copy/sub/b", "rb").read() == b"b" * 5_000_000
    with client.open("/copy/a", "r+b") as f:
        f.write(b"CHANGED")
    assert client.open("/src/a", "rb").read(7) == b"aaaaaaa"
    with pytest.raises(FileExistsError):
        client.clone("/src", "/copy")
    assert client.warmup("/src") == (2, 5_010_000)
    assert client.warmup("/src/a") == (1, 10_000)
    with pytest.raises(FileNotFoundError):
        client.warmup("/nope")
    fs = client.statvfs()
    assert fs["total_bytes"] > fs["available_bytes"] > 0 and fs["used_inodes"] >= 6


def test_read_only_client(volume):
    c = volume.client()
    with c.open("/f", "w") as f:
        f.write("x")
    c.close()
    ro = volume.client(read_only=True)
    try:
        assert ro.open("/f").read() == "x"
        for call in (lambda: ro.mkdir("/d"), lambda: ro.open("/g", "w"),
                     lambda: ro.remove("/f"), lambda: ro.chmod("/f", 0o600)):
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno == errno.EROFS
    finally:
        ro.close()


def test_closed_client_raises_value_error(volume):
    c = volume.client()
    c.close()
    with pytest.raises(ValueError, match="closed client"):
        c.listdir("/")
    c.close()


def test_directory_cache_follows_renames(volume):
    a = volume.client()
    b = volume.client()
    try:
        a.makedirs("/old/sub")
        with a.open("/old/sub/f", "w") as f:
            f.write("x")
        assert a.open("/old/sub/f").read() == "x"  # /old and /old/sub now remembered
        a.rename("/old", "/new")
        with pytest.raises(FileNotFoundError):
            a.stat("/old/sub/f")  # this client's own rename shows at once
        assert a.open("/new/sub/f").read() == "x"
        b.rename("/new", "/newer")  # another client's shows within the TTL (1 s)
        deadline = time.monotonic() + 5
        while a.exists("/new/sub/f") and time.monotonic() < deadline:
            time.sleep(0.05)  # poll interval of a wait for the condition
        assert not a.exists("/new/sub/f") and a.open("/newer/sub/f").read() == "x"
        a.remove("/newer/sub/f")
        a.rmdir("/newer/sub")
        with pytest.raises(FileNotFoundError):
            a.open("/newer/sub/g", "w")
    finally:
        a.close()
        b.close()


def test_the_path_table_reads_as_through_every_front_end(volume):
    """The path table every front end's tests read (crates/strata-vfs/src/path_table.json):
    the SDK resolves each path with the VFS's one walker, from its root (here a subdir,
    as a gateway's bucket or a WebDAV user's directory), so it reads what the gateway,
    WebDAV and sync read, plus the rows with `..` those cannot express."""
    table = json.loads((ROOT / "crates/strata-vfs/src/path_table.json").read_text())
    c = volume.client()
    c.makedirs("/top")
    c.close()
    top = volume.client(subdir="/top")
    try:
        tree = table["tree"]
        for d in tree["dirs"]:
            top.makedirs(f"/{d}", exist_ok=True)
        for path, content in tree["files"].items():
            with top.open(f"/{path}", "w") as f:
                f.write(content)
        for path, target in tree["symlinks"].items():
            top.symlink(target, f"/{path}")
        assert len(table["rows"]) >= 15
        for row in table["rows"]:
            if "error" in row:
                with pytest.raises(OSError) as e:
                    with top.open(row["path"]) as f:
                        f.read()
                assert e.value.errno == getattr(errno, row["error"]), row["path"]
            else:
                with top.open(row["path"]) as f:
                    assert f.read() == row["expect"], row["path"]
    finally:
        top.close()
