"""POSIX access control lists through the SDK: a client opened by another user is held to
the lists Strata keeps (the SDK checks nothing itself; the metadata layer does), and
lists are set and read as the kernel's `system.posix_acl_*` attributes."""

import os
import struct
import tempfile
import uuid

import pytest

import strata

from conftest import run

BOB = 1001
UNDEFINED = 0xFFFFFFFF


def acl(owner, group, other, mask=None, users=(), groups=()):
    """A list in the kernel's binary form (version 2, entries in canonical order)."""
    entries = [(0x01, owner, UNDEFINED)]
    entries += [(0x02, perm, uid) for uid, perm in users]
    entries.append((0x04, group, UNDEFINED))
    entries += [(0x08, perm, gid) for gid, perm in groups]
    if mask is not None:
        entries.append((0x10, mask, UNDEFINED))
    entries.append((0x20, other, UNDEFINED))
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def client_as(uid, url, gid=None, groups=()):
    """A client opened with `uid`'s identity (group `gid`, by default the uid, and the
    supplementary `groups`); the test process itself goes back to root at once."""
    cache = tempfile.mkdtemp(prefix="strata-acl-")
    os.chmod(cache, 0o777)
    saved = os.getgroups()
    os.setgroups(list(groups))
    os.setegid(uid if gid is None else gid)
    os.seteuid(uid)
    try:
        return strata.Client(url, cache_dir=os.path.join(cache, "c"))
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(saved)


@pytest.fixture
def acl_url(redis_url, tmp_path):
    url = f"{redis_url}?prefix=pyacl{uuid.uuid4().hex[:12]}"
    # Memory storage: this test reads no data, and another user could not read a bucket
    # directory made for root.
    run("format", url, "pyacl", "--storage", "mem", "--enable-acl")
    return url


def test_a_named_user_reads_what_the_list_grants_and_the_mask_limits(acl_url, tmp_path):
    assert os.geteuid() == 0, "the test switches to another user (CI runs as root)"
    root = strata.Client(acl_url, cache_dir=str(tmp_path / "root-cache"))
    root.mkdir("/team", 0o770)
    with root.open("/team/notes", "wb"):
        pass
    root.chmod("/team/notes", 0o600)
    bob = client_as(BOB, acl_url)
    with pytest.raises(PermissionError):
        bob.listdir("/team")

    root.setxattr("/team", "system.posix_acl_access",
                  acl(7, 7, 0, mask=7, users=[(BOB, 5)]))
    root.setxattr("/team/notes", "system.posix_acl_access",
                  acl(6, 0, 0, mask=6, users=[(BOB, 6)]))
    assert oct(root.stat("/team/notes").st_mode & 0o777) == oct(0o660)
    assert root.getxattr("/team/notes", "system.posix_acl_access") == \
        acl(6, 0, 0, mask=6, users=[(BOB, 6)])
    assert bob.listdir("/team") == ["notes"]
    with bob.open("/team/notes", "rb") as f:
        assert f.read() == b""
    with bob.open("/team/notes", "ab"):
        pass
    # The list's directory entry gives r-x: no creating there.
    with pytest.raises(PermissionError):
        bob.open("/team/mine", "wb")
    # chmod g-w lowers the mask: bob keeps reading, loses writing.
    root.chmod("/team/notes", 0o640)
    with bob.open("/team/notes", "rb"):
        pass
    with pytest.raises(PermissionError):
        bob.open("/team/notes", "ab")
    # Not the owner: bob cannot change the list.
    with pytest.raises(PermissionError):
        bob.setxattr("/team/notes", "system.posix_acl_access", acl(7, 7, 7))
    bob.close()
    root.close()


def test_new_files_inherit_the_default_list(acl_url, tmp_path):
    root = strata.Client(acl_url, cache_dir=str(tmp_path / "root-cache"))
    root.mkdir("/shared", 0o777)
    root.chmod("/shared", 0o777)
    root.setxattr("/shared", "system.posix_acl_default",
                  acl(7, 5, 0, mask=7, users=[(BOB, 7)]))
    with root.open("/shared/f", "wb"):
        pass
    # Created 0666: the default list cut to it, the process umask not applied.
    assert root.stat("/shared/f").st_mode & 0o777 == 0o660
    assert root.getxattr("/shared/f", "system.posix_acl_access") == \
        acl(6, 5, 0, mask=6, users=[(BOB, 7)])
    bob = client_as(BOB, acl_url)
    with bob.open("/shared/f", "ab"):
        pass
    bob.close()
    root.close()
