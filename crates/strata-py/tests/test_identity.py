"""Identity mapping through the SDK, as on a mount: `all_squash`, `root_squash`,
`uid_map`/`gid_map` and `umask` options decide whom a client acts as and how it shows
owners; a plain client of the same volume shows what was stored."""

import os

import pytest


def test_all_squash_and_umask_decide_owner_and_mode(volume):
    plain = volume.client()
    squashed = volume.client(all_squash="1500:1600", umask="077")
    try:
        plain.mkdir("/open")
        plain.chmod("/open", 0o777)
        with squashed.open("/open/f", "wb") as f:
            f.write(b"x")
        squashed.mkdir("/open/d")
        f = plain.stat("/open/f")
        d = plain.stat("/open/d")
        assert (f.st_uid, f.st_gid, f.st_mode & 0o777) == (1500, 1600, 0o600)
        assert (d.st_uid, d.st_gid, d.st_mode & 0o777) == (1500, 1600, 0o700)
        plain.chmod("/open/f", 0o600)
        plain.chown("/open/f", 0, 0)
        with pytest.raises(PermissionError):
            squashed.open("/open/f", "rb")
    finally:
        squashed.close()
        plain.close()


def test_root_squash_maps_only_root(volume):
    assert os.geteuid() == 0, "the test runs as root (CI does)"
    plain = volume.client()
    squashed = volume.client(root_squash="1234:1235")
    try:
        plain.mkdir("/open")
        plain.chmod("/open", 0o777)
        with squashed.open("/open/by-root", "wb") as f:
            f.write(b"x")
        st = plain.stat("/open/by-root")
        assert (st.st_uid, st.st_gid) == (1234, 1235)
    finally:
        squashed.close()
        plain.close()


def test_maps_go_both_ways(volume):
    plain = volume.client()
    mapped = volume.client(uid_map="0:2000", gid_map="0:2000")
    try:
        plain.mkdir("/open")
        plain.chmod("/open", 0o777)
        with mapped.open("/open/mine", "wb") as f:
            f.write(b"x")
        mapped.chown("/open/mine", 0, 0)
        assert (plain.stat("/open/mine").st_uid, plain.stat("/open/mine").st_gid) == (2000, 2000)
        st = mapped.stat("/open/mine")
        assert (st.st_uid, st.st_gid) == (0, 0), "shown in this host's numbering"
    finally:
        mapped.close()
        plain.close()


def test_bad_identity_options_name_the_option(volume):
    for option, value in [("all_squash", "1500"), ("uid_map", "1:2,1:3"), ("umask", "888")]:
        with pytest.raises(ValueError, match=option.replace("_", "-")):
            volume.client(**{option: value})
