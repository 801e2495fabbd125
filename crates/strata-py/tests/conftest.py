"""Fixtures: the strata binary, a Redis server (the one scripts/test.sh started, or one
started here), fresh volumes on the embedded default (SQLite + a local directory) and on
Redis, and clients of them."""

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import strata

ROOT = Path(__file__).resolve().parents[3]


def strata_bin():
    exe = os.environ.get("STRATA_BIN")
    if exe:
        return exe
    target = os.environ.get("CARGO_TARGET_DIR", str(Path.home() / ".cache/strata/target"))
    return str(Path(target) / "debug" / "strata")


def run(*args, **kw):
    """Run the strata binary; fail the test with its output if it fails."""
    done = subprocess.run([strata_bin(), *args], capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"strata {' '.join(args)}: {done.stderr}"
    return done


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what, check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)  # poll interval of a wait for the condition
    raise AssertionError(f"{what} did not happen within {timeout} s")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """STRATA_TEST_REDIS, or a redis-server started for this session on a free port."""
    url = os.environ.get("STRATA_TEST_REDIS")
    if url:
        yield url
        return
    port = _free_port()
    work = tmp_path_factory.mktemp("redis")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(work),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def answers():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    try:
        _wait("redis-server answering PING", answers)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.kill()
        server.wait()


class Volume:
    """A formatted volume: its META-URL and a work directory for mounts and caches."""

    def __init__(self, meta_url, work):
        self.meta_url = meta_url
        self.work = work

    def client(self, **options):
        options.setdefault("cache_dir", str(self.work / f"cache-{uuid.uuid4().hex[:8]}"))
        return strata.Client(self.meta_url, **options)


def make_volume(engine, work, redis):
    bucket = work / "bucket"
    if engine == "sqlite":
        url = f"sqlite3://{work}/meta.db"
    else:
        url = f"{redis}?prefix=py{os.getpid()}x{uuid.uuid4().hex[:12]}"
    run("format", url, "pyvol", "--storage", "file", "--bucket", str(bucket))
    return Volume(url, work)


@pytest.fixture(params=["sqlite", "redis"])
def volume(request, tmp_path, redis_url):
    return make_volume(request.param, tmp_path, redis_url)


@pytest.fixture
def sqlite_volume(tmp_path, redis_url):
    return make_volume("sqlite", tmp_path, redis_url)


@pytest.fixture
def client(volume):
    c = volume.client()
    yield c
    c.close()


class Mount:
    """A FUSE mount of a volume by the strata binary (unmounted at the end)."""

    def __init__(self, volume, name):
        self.path = volume.work / name
        self.path.mkdir()
        run("mount", volume.meta_url, str(self.path), "-d", "--log",
            str(volume.work / f"{name}.log"), "--cache-dir", str(volume.work / f"{name}-cache"))
        _wait("the mount", lambda: os.path.ismount(self.path))

    def close(self):
        subprocess.run([strata_bin(), "umount", str(self.path)], capture_output=True)
        if os.path.ismount(self.path):
            subprocess.run([strata_bin(), "umount", "--force", str(self.path)],
                           capture_output=True)


@pytest.fixture
def mount(volume):
    if shutil.which("fusermount3") is None and not os.path.exists("/dev/fuse"):
        raise AssertionError("FUSE is needed: install fuse3 (scripts/test.sh does)")
    m = Mount(volume, "mnt")
    yield m
    m.close()
