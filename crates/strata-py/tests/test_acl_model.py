"""Model-based: random modes, owners and access control lists on a small tree, made
alike on a local directory (where the kernel decides, as on ext4) and on a volume through
the SDK (where Strata decides: no kernel checks anything for the SDK); then every user
tries every step — open for reading, writing or both, stat, list a directory, create in
it — on both, and each step must end alike: success on both or the same errno. The
mount's model test (crates/strata/tests/acl_model.rs) runs changes step by step; this
one checks the SDK's access decisions over many random states."""

import errno
import os
import random
from collections import Counter
import shutil
import tempfile

import pytest

import strata

from test_acl import acl, acl_url, client_as  # noqa: F401 (acl_url is a fixture)

# (uid, gid, supplementary groups) of the users who try the steps.
USERS = [(1001, 1001, ()), (1002, 1002, (300,)), (1003, 300, ()), (1004, 1004, (300, 1001))]
NAMED_USERS = [1001, 1002, 1003, 1004]
NAMED_GROUPS = [300, 1001, 1002]
OWNERS = [(0, 0), (1001, 1001), (1002, 300), (1003, 1003)]
DIRS = ["d", "d/sub"]
FILES = ["d/f", "d/sub/g"]
STATES = 100
ACCESS = "system.posix_acl_access"


def random_acl(rng):
    """A valid access list: owner, group and other entries, up to two named users and two
    named groups, and a mask when there are named entries."""
    perm = lambda: rng.randint(0, 7)
    users = sorted(rng.sample(NAMED_USERS, rng.randint(0, 2)))
    groups = sorted(rng.sample(NAMED_GROUPS, rng.randint(0, 2)))
    mask = perm() if users or groups else None
    return acl(perm(), perm(), perm(), mask=mask,
               users=[(u, perm()) for u in users], groups=[(g, perm()) for g in groups])


def random_state(rng):
    """For each path, in creation order: owner, mode, and an access list or None."""
    return [(path, rng.choice(OWNERS), rng.randint(0, 0o777),
             random_acl(rng) if rng.random() < 0.6 else None)
            for path in DIRS + FILES]


def make_local(base, state):
    for path, (uid, gid), mode, lists in state:
        full = os.path.join(base, path)
        if path in DIRS:
            os.mkdir(full, 0o700)
        else:
            os.close(os.open(full, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chown(full, uid, gid)
        os.chmod(full, mode)
        if lists is not None:
            os.setxattr(full, ACCESS, lists)


def make_volume(client, base, state):
    for path, (uid, gid), mode, lists in state:
        full = f"{base}/{path}"
        if path in DIRS:
            client.mkdir(full, 0o700)
        else:
            with client.open(full, "wb"):
                pass
        client.chown(full, uid, gid)
        client.chmod(full, mode)
        if lists is not None:
            client.setxattr(full, ACCESS, lists)


def steps(tag):
    """Each step: a name and the path it acts on (relative to the tree)."""
    out = []
    for path in FILES:
        out += [("read", path), ("write", path), ("readwrite", path), ("stat", path)]
    for path in DIRS:
        out += [("list", path), ("create", f"{path}/new-{tag}")]
    return out


def outcome(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def local_step(base, step, path):
    full = os.path.join(base, path)
    flags = {"read": os.O_RDONLY, "write": os.O_WRONLY | os.O_APPEND, "readwrite": os.O_RDWR,
             "create": os.O_WRONLY | os.O_CREAT | os.O_TRUNC}
    if step in flags:
        return outcome(lambda: os.close(os.open(full, flags[step], 0o644)))
    if step == "stat":
        return outcome(lambda: os.stat(full))
    return outcome(lambda: os.listdir(full))


def sdk_step(client, base, step, path):
    full = f"{base}/{path}"
    modes = {"read": "rb", "write": "ab", "readwrite": "r+b", "create": "wb"}
    if step in modes:
        return outcome(lambda: client.open(full, modes[step]).close())
    if step == "stat":
        return outcome(lambda: client.stat(full))
    return outcome(lambda: client.listdir(full))


def local_outcomes(base, user, todo):
    """The steps' outcomes on the local tree, run by a child process as `user`."""
    uid, gid, groups = user
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            got = [local_step(base, step, path) for step, path in todo]
            os.write(write_end, "\n".join(got).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    return text.split("\n")


def test_random_lists_decide_alike_on_local_disk_and_through_the_sdk(acl_url, tmp_path):
    assert os.geteuid() == 0, "the test switches to other users (CI runs as root)"
    root = strata.Client(acl_url, cache_dir=str(tmp_path / "root-cache"))
    root.chmod("/", 0o755)
    clients = {user: client_as(user[0], acl_url, user[1], user[2]) for user in USERS}
    local_root = tempfile.mkdtemp(prefix="strata-acl-model-")
    os.chmod(local_root, 0o755)
    rng = random.Random(20261205)
    seen = Counter()
    try:
        for n in range(STATES):
            state = random_state(rng)
            base = f"s{n}"
            os.mkdir(os.path.join(local_root, base), 0o755)
            make_local(os.path.join(local_root, base), state)
            root.mkdir(f"/{base}", 0o755)
            make_volume(root, f"/{base}", state)
            for user in USERS:
                todo = steps(f"{user[0]}")
                local = local_outcomes(os.path.join(local_root, base), user, todo)
                sdk = [sdk_step(clients[user], f"/{base}", step, path) for step, path in todo]
                for (step, path), want, got in zip(todo, local, sdk):
                    assert got == want, (
                        f"state {n} {state}: user {user} {step} {path}: "
                        f"local disk {want}, SDK {got}")
                    seen[want] += 1
        # The random states allow and refuse alike often, so agreement means something.
        assert seen["ok"] > 500 and seen["EACCES"] > 500, seen
    finally:
        shutil.rmtree(local_root)
        for client in clients.values():
            client.close()
        root.close()
