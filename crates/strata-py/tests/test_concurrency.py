"""One client shared by threads, and by processes forked after it was created."""

import multiprocessing
import os
import threading

N_FILES = 10_000

# The client a forked worker inherits (set before the pool forks).
_inherited = None


def test_eight_threads_read_and_write_concurrently(client):
    client.mkdir("/t")
    errors = []

    def work(n):
        try:
            for i in range(40):
                data = f"{n}:{i}:".encode() * (100 + i)
                with client.open(f"/t/{n}-{i}", "wb") as f:
                    f.write(data)
                with client.open(f"/t/{n}-{i}", "rb") as f:
                    assert f.read() == data
                # Everyone also reads what another thread wrote: its file 0 is closed
                # (complete) once its file 1 exists.
                other = (n + 1) % 8
                if client.exists(f"/t/{other}-1"):
                    assert client.open(f"/t/{other}-0", "rb").read().startswith(f"{other}:0:".encode())
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(client.listdir("/t")) == 320


def test_threads_share_one_file_object(client):
    with client.open("/shared", "wb") as f:
        f.write(os.urandom(1 << 20))
    expect = client.open("/shared", "rb").read()
    f = client.open("/shared", "rb")
    seen = []

    def read_at(off):
        data = f.raw._native.pread(4096, off)
        seen.append(data == expect[off:off + 4096])

    threads = [threading.Thread(target=read_at, args=(i * 4096,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    f.close()
    assert seen == [True] * 64


def _read_one(i):
    with _inherited.open(f"/many/{i}", "rb") as f:
        data = f.read()
    return os.getpid(), data == f"file {i}".encode() * 10


def test_forked_pool_reads_ten_thousand_files(volume):
    global _inherited
    client = volume.client()
    try:
        client.mkdir("/many")
        for i in range(N_FILES):
            with client.open(f"/many/{i}", "wb") as f:
                f.write(f"file {i}".encode() * 10)
        _inherited = client
        # The parent has used the client (and has open sessions, threads, sockets).
        assert len(client.listdir("/many")) == N_FILES
        with multiprocessing.get_context("fork").Pool(4) as pool:
            results = pool.map(_read_one, range(N_FILES), chunksize=250)
        assert all(ok for _, ok in results)
        assert len({pid for pid, _ in results} - {os.getpid()}) >= 2
        # The parent's client still works after its children came and went.
        with client.open("/after-fork", "wb") as f:
            f.write(b"parent")
        assert client.open("/after-fork", "rb").read() == b"parent"
    finally:
        _inherited = None
        client.close()


def test_a_child_writes_through_its_own_session(volume):
    client = volume.client()
    try:
        reading = client.open("/before", "wb")
        reading.write(b"parent data")
        reading.close()
        held = client.open("/before", "rb")
        pid = os.fork()
        if pid == 0:  # the child: reads the parent's open file, writes a new one
            code = 1
            try:
                ok = held.read() == b"parent data"
                with client.open("/from-child", "wb") as f:
                    f.write(b"child data")
                client.close()
                code = 0 if ok else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert client.open("/from-child", "rb").read() == b"child data"
        held.seek(0)
        assert held.read() == b"parent data"
        held.close()
    finally:
        client.close()


def test_a_file_open_for_writing_is_not_usable_in_a_child(volume):
    client = volume.client()
    try:
        w = client.open("/w", "wb", buffering=0)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                w.write(b"from child")
            except OSError as e:
                code = 0 if e.errno == 9 else 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        w.write(b"parent")
        w.close()
        assert client.open("/w", "rb").read() == b"parent"
    finally:
        client.close()
