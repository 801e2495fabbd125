"""An encrypted volume through the SDK: written and read with its key-encryption key
(from a file, a variable or a command), nothing planted readable in the bucket or the
cache, and a missing or wrong key one clear error at open, never EIO later."""

import os
import secrets
import subprocess
import uuid
from pathlib import Path

import pytest

import strata

from conftest import Volume, run

PLANTED = b"SDK-PLANTED-PLAINTEXT-0123456789"


def files_under(root):
    for dirpath, _, names in os.walk(root):
        for name in names:
            yield Path(dirpath) / name


@pytest.fixture
def encrypted(tmp_path):
    kek = tmp_path / "kek"
    kek.write_text(secrets.token_hex(32) + "\n")
    kek.chmod(0o600)
    url = f"sqlite3://{tmp_path}/meta.db"
    run("format", url, "encvol", "--bucket", str(tmp_path / "bucket"),
        "--encrypt-key-file", str(kek), "--encrypt-algo", "chacha20")
    return Volume(url, tmp_path), kek


def test_an_encrypted_volume_reads_back_and_stores_no_plaintext(encrypted, tmp_path):
    volume, kek = encrypted
    data = PLANTED * 70_000  # 2.2 MB: several segments, a whole block
    # The key file recorded at format time is used when none is given; a cache on
    # another device than the bucket (/dev/shm) so the disk cache is used.
    cache = Path("/dev/shm") / f"strata-sdk-{uuid.uuid4().hex[:8]}"
    try:
        with strata.Client(volume.meta_url, cache_dir=str(cache)) as c:
            with c.open("/f", "wb") as f:
                f.write(data)
            with c.open("/f", "rb") as f:
                f.seek(1_000_003)
                assert f.read(4096) == data[1_000_003:1_000_003 + 4096]
                f.seek(0)
                assert f.read() == data
        cached = list(files_under(cache))
        assert cached, "the disk cache holds the blocks read"
        for path in [*files_under(tmp_path / "bucket"), *cached]:
            assert PLANTED not in path.read_bytes(), path
        # The key from a variable or a command reads it too.
        env = {"MY_VOLUME_KEK": kek.read_text().strip()}
        os.environ.update(env)
        try:
            with strata.Client(volume.meta_url, cache_size=0,
                               encrypt_key_env="MY_VOLUME_KEK") as c:
                with c.open("/f", "rb") as f:
                    assert f.read() == data
        finally:
            del os.environ["MY_VOLUME_KEK"]
        with strata.Client(volume.meta_url, cache_size=0,
                           encrypt_key_cmd=f"cat {kek}") as c:
            assert c.stat("/f").st_size == len(data)
            with c.open("/f", "rb") as f:
                assert f.read(len(PLANTED)) == PLANTED
    finally:
        subprocess.run(["rm", "-rf", str(cache)], check=False)


def test_a_wrong_or_missing_key_fails_at_open(encrypted, tmp_path):
    volume, kek = encrypted
    wrong = tmp_path / "wrong"
    wrong.write_text(secrets.token_hex(32))
    with pytest.raises(PermissionError, match="wrong key"):
        strata.Client(volume.meta_url, encrypt_key_file=str(wrong))
    kek.unlink()
    with pytest.raises(PermissionError, match="key-encryption key file"):
        strata.Client(volume.meta_url)


def test_an_rsa_volume_opens_with_its_passphrase(tmp_path, monkeypatch):
    pem = tmp_path / "key.pem"
    subprocess.run(["openssl", "genrsa", "-aes256", "-passout", "pass:py-pass", "-out",
                    str(pem), "2048"], check=True, capture_output=True)
    monkeypatch.setenv("JFS_RSA_PASSPHRASE", "py-pass")
    url = f"sqlite3://{tmp_path}/meta.db"
    run("format", url, "rsavol", "--bucket", str(tmp_path / "bucket"),
        "--encrypt-rsa-key", str(pem))
    data = PLANTED * 40_000
    with strata.Client(url, cache_size=0) as c:
        with c.open("/r", "wb") as f:
            f.write(data)
    with strata.Client(url, cache_size=0) as c:
        with c.open("/r", "rb") as f:
            assert f.read() == data
    for path in files_under(tmp_path / "bucket"):
        assert PLANTED not in path.read_bytes(), path
    monkeypatch.setenv("JFS_RSA_PASSPHRASE", "not-it")
    with pytest.raises(PermissionError, match="wrong passphrase"):
        strata.Client(url, cache_size=0)
