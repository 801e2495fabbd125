"""Close-to-open between the SDK and a FUSE mount of the same volume, both ways."""

import os


def test_sdk_writes_mount_reads_and_back(volume, mount):
    client = volume.client()
    try:
        client.makedirs("/exchange/sub")
        with client.open("/exchange/sub/from-sdk.bin", "wb") as f:
            f.write(b"sdk" * 100_000)
        client.setxattr("/exchange/sub/from-sdk.bin", "user.origin", b"sdk")
        on_mount = mount.path / "exchange" / "sub" / "from-sdk.bin"
        assert on_mount.read_bytes() == b"sdk" * 100_000
        assert os.getxattr(on_mount, "user.origin") == b"sdk"

        (mount.path / "exchange" / "from-mount.txt").write_text("written through FUSE\n")
        os.symlink("from-mount.txt", mount.path / "exchange" / "link")
        with client.open("/exchange/link") as f:
            assert f.read() == "written through FUSE\n"
        assert sorted(client.listdir("/exchange")) == ["from-mount.txt", "link", "sub"]

        # Rewrite on one side, reopen on the other: the new content shows.
        with client.open("/exchange/from-mount.txt", "a") as f:
            f.write("appended by the SDK\n")
        assert (mount.path / "exchange" / "from-mount.txt").read_text() == \
            "written through FUSE\nappended by the SDK\n"
        (mount.path / "exchange" / "sub" / "from-sdk.bin").write_bytes(b"replaced")
        assert client.open("/exchange/sub/from-sdk.bin", "rb").read() == b"replaced"
        os.rename(mount.path / "exchange" / "sub", mount.path / "exchange" / "moved")
        assert client.isdir("/exchange/moved") and not client.exists("/exchange/sub")
    finally:
        client.close()
