"""Immutable and append-only files (set with chattr on a FUSE mount of the volume) bind
the SDK as well: every change the flags forbid is PermissionError (EPERM), on SQLite and
on Redis."""

import errno
import subprocess

import pytest


def refused(fn, *args):
    with pytest.raises(PermissionError) as caught:
        fn(*args)
    assert caught.value.errno == errno.EPERM, caught.value


def test_flags_set_on_a_mount_bind_the_sdk(volume, mount):
    client = volume.client()
    try:
        client.makedirs("/d")
        with client.open("/d/frozen", "wb") as f:
            f.write(b"as it was")
        with client.open("/d/log", "wb") as f:
            f.write(b"one\n")
        client.open("/d/other", "wb").close()
        subprocess.run(["chattr", "+i", str(mount.path / "d" / "frozen")], check=True)
        subprocess.run(["chattr", "+a", str(mount.path / "d" / "log")], check=True)

        refused(client.remove, "/d/frozen")
        refused(client.rename, "/d/frozen", "/d/moved")
        refused(client.rename, "/d/other", "/d/frozen")
        refused(client.truncate, "/d/frozen", 0)
        refused(client.open, "/d/frozen", "ab")
        refused(client.open, "/d/frozen", "wb")
        refused(client.chmod, "/d/frozen", 0o600)
        refused(client.link, "/d/frozen", "/d/alias")
        refused(client.setxattr, "/d/frozen", "user.note", b"x")
        with client.open("/d/frozen", "rb") as f:
            assert f.read() == b"as it was"

        # Append-only: appends go in; rewriting, truncating and removing do not.
        with client.open("/d/log", "ab") as f:
            f.write(b"two\n")
        refused(client.open, "/d/log", "wb")
        refused(client.open, "/d/log", "r+b")
        refused(client.remove, "/d/log")
        with client.open("/d/log", "rb") as f:
            assert f.read() == b"one\ntwo\n"

        subprocess.run(["chattr", "-i", "-a", str(mount.path / "d" / "frozen"),
                        str(mount.path / "d" / "log")], check=True)
        client.remove("/d/frozen")
        client.remove("/d/log")
    finally:
        client.close()
