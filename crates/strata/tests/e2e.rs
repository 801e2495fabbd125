//! End-to-end tests on a real FUSE mount, driven through the `strata` command and shell
//! tools. They need root and /dev/fuse (CI runs as root); without them they fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod common;

use common::*;

/// With the kernel's writeback cache, small unaligned writes, appends and truncates still
/// give exactly the bytes a local directory gives, also after a remount.
#[test]
fn writeback_cache_mount_keeps_exact_bytes() {
    let vol = Volume::new();
    let steps = r#"
        printf 'hello' > f; printf ' world' >> f; printf 'J' | dd of=f bs=1 seek=3 conv=notrunc 2>/dev/null
        for i in 1 2 3; do cat ../rnd >> g; done; truncate -s 500001 g; printf 'tail' >> g
        md5sum f g | cut -d' ' -f1
    "#;
    let local = vol.dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let m = vol.mount_with("wb", &["-o", "writeback_cache"]);
    let rnd = vol.dir.path().join("rnd");
    std::fs::write(
        &rnd,
        (0..300_000u32)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let want = sh(&local, steps);
    assert_eq!(want.lines().filter(|l| l.len() == 32).count(), 2, "{want}");
    let got = sh(&m.path, steps);
    assert_eq!(got, want, "{}", m.log());
    m.unmount();
    let again = vol.mount("plain");
    let reread = sh(&again.path, "md5sum f g | cut -d' ' -f1");
    assert_eq!(reread, want, "after remount");
}

/// The same shell steps on the mount and on a local directory give the same results.
#[test]
fn shell_tools_behave_like_a_local_directory() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    let local = vol.dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    let script = r#"
        umask 022
        echo hello > a; echo world >> a; cat a
        printf 'x%.0s' $(seq 1 5000) > big; truncate -s 100 big; wc -c < big; truncate -s 9000 big; od -c big | tail -3
        mkdir -p d/e; mv a d/e/b; ln d/e/b hard; ln -s d/e/b soft; readlink soft; cat soft
        chmod 640 hard; chown 1000:1000 hard; touch -d '2020-01-02 03:04:05' hard
        stat -c '%n %s %a %u %g %h %F' hard d/e/b soft d d/e big | sort; stat -c '%Y' hard
        setfattr -n user.k -v v1 hard 2>/dev/null && getfattr -n user.k --only-values hard 2>/dev/null || echo no-xattr-tools
        rm hard; ls -R | sort; stat -c '%h' d/e/b
        dd if=/dev/zero of=z bs=1k count=10 seek=5 2>/dev/null; stat -c %s z; cmp z <(head -c 15360 /dev/zero) && echo zero-ok
        mv d/e/b d/c; rmdir d/e; ls d; rm -r d; ls
    "#;
    let on_mount = sh(&m.path, script);
    let on_local = sh(&local, script);
    assert_eq!(on_mount, on_local, "mount log:\n{}", m.log());
}

#[test]
fn large_files_and_random_overlapping_writes_keep_their_bytes() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    let out = sh(
        &m.path,
        r#"
        head -c 1073741824 /dev/urandom | tee big.bin | md5sum | cut -d' ' -f1 > ../want.md5
        md5sum < big.bin | cut -d' ' -f1 > ../got.md5
        cmp ../want.md5 ../got.md5 && echo big-ok
        python3 - <<'PY'
import os, random
random.seed(7)
ref = bytearray(3_000_000)
fd = os.open("rand.bin", os.O_RDWR | os.O_CREAT, 0o644)
for i in range(400):
    off = random.randrange(0, len(ref) - 70000)
    data = os.urandom(random.randrange(1, 70000))
    ref[off:off+len(data)] = data
    os.pwrite(fd, data, off)
    if i % 50 == 0:
        os.fsync(fd)
end = max(i for i in range(len(ref)) if ref[i]) + 1 if any(ref) else 0
os.close(fd)
got = open("rand.bin", "rb").read()
assert got == bytes(ref[:len(got)]), "content differs"
assert len(got) >= end
print("random-ok")
PY
    "#,
    );
    assert!(
        out.contains("big-ok") && out.contains("random-ok"),
        "{out}\n{}",
        m.log()
    );
    // Everything is still there after unmount and remount.
    m.unmount();
    let again = vol.mount("mnt");
    let out = sh(
        &again.path,
        "md5sum < big.bin | cut -d' ' -f1 | cmp - ../want.md5 && echo remount-ok",
    );
    assert!(out.contains("remount-ok"), "{out}");
}

#[test]
fn sqlite_git_and_tar_work() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    // Asked at run time: the binary may have been built in another checkout.
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
        || env!("CARGO_MANIFEST_DIR").into(),
        std::path::PathBuf::from,
    );
    let src = crate_dir.join("../..");
    let out = sh(
        &m.path,
        &format!(
            r#"
        python3 -c "
import sqlite3
c = sqlite3.connect('t.db'); c.execute('pragma journal_mode=wal'); c.execute('create table t(a, b)')
for i in range(10000):
    c.execute('insert into t values (?, ?)', (i, str(i) * 10))
    if i % 100 == 0: c.commit()
c.commit()
print(c.execute('pragma integrity_check').fetchone()[0], c.execute('select count(*) from t').fetchone()[0])
"
        tar -C {src} -cf ../src.tar crates docs
        mkdir x && tar -C x -xf ../src.tar && mkdir ../x-local && tar -C ../x-local -xf ../src.tar
        diff -r x ../x-local && echo tar-ok
        git init -q repo && cp -r x/crates repo/ && cd repo
        git add . && git -c user.email=t@t -c user.name=t commit -qm import && git fsck --strict 2>&1 && echo git-ok
        git log --oneline | wc -l
    "#,
            src = src.display()
        ),
    );
    assert!(out.contains("ok 10000"), "sqlite: {out}\n{}", m.log());
    assert!(
        out.contains("tar-ok") && out.contains("git-ok"),
        "{out}\n{}",
        m.log()
    );
}

#[test]
fn two_mounts_see_closed_files_and_share_locks() {
    let vol = Volume::new();
    let a = vol.mount("a");
    let b = vol.mount("b");
    sh(&a.path, "echo from-a > shared.txt");
    let seen = sh(&b.path, "cat shared.txt");
    assert_eq!(seen, "from-a\n", "close-to-open visibility");
    // b's kernel now caches the file's pages; a rewrite of the same length on a must
    // still show on b at its next open.
    sh(&a.path, "echo FROM-A > shared.txt");
    let seen = sh(&b.path, "cat shared.txt");
    assert_eq!(
        seen, "FROM-A\n",
        "cached pages dropped after a change elsewhere"
    );
    let script = |other: &Path| {
        format!(
            r#"
python3 - <<'PY'
import fcntl, os, subprocess, sys
def other(code):
    return subprocess.run([sys.executable, "-c", "import fcntl, os\nfd = os.open('{other}/lock.txt', os.O_RDWR)\n" + code],
                          capture_output=True, text=True).stdout.strip()
probe = "try:\n    fcntl.{{}}(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\nexcept OSError: print('blocked')"
fd = os.open("lock.txt", os.O_RDWR | os.O_CREAT, 0o644)
print("posix-while-held:", other(probe.format("lockf")))
fcntl.lockf(fd, fcntl.LOCK_EX)
print("posix-held:", other(probe.format("lockf")))
fcntl.lockf(fd, fcntl.LOCK_UN)
print("posix-released:", other(probe.format("lockf")))
fcntl.flock(fd, fcntl.LOCK_EX)
print("flock-held:", other(probe.format("flock")))
fcntl.flock(fd, fcntl.LOCK_UN)
print("flock-released:", other(probe.format("flock")))
PY
"#,
            other = other.display()
        )
    };
    let out = sh(&a.path, &script(&b.path));
    assert!(out.contains("posix-while-held: free"), "{out}");
    assert!(
        out.contains("posix-held: blocked"),
        "POSIX locks conflict across mounts: {out}"
    );
    assert!(out.contains("posix-released: free"), "{out}");
    assert!(
        out.contains("flock-held: blocked"),
        "flock conflicts across mounts: {out}"
    );
    assert!(out.contains("flock-released: free"), "{out}");
    // Internal files: live counters and the mount's settings.
    let internal = sh(
        &a.path,
        "grep strata_object_bytes_up .stats; grep -o '\"meta_url\": \"sqlite3://[^\"]*' .config; ls -a | grep -c stats || true",
    );
    assert!(internal.contains("strata_object_bytes_up"), "{internal}");
    assert!(internal.contains(&vol.meta_url), "{internal}");
    assert!(
        internal.trim_end().ends_with('0'),
        ".stats is not listed: {internal}"
    );
    // .accesslog streams one line per operation, with its latency, while it is read.
    let log = sh(
        &a.path,
        "(timeout 2 cat .accesslog > ../access.txt || true) & sleep 0.5; ls > /dev/null; stat shared.txt > /dev/null; wait; cat ../access.txt",
    );
    assert!(log.contains("getattr") || log.contains("lookup"), "{log}");
    assert!(
        log.contains("[uid:0,gid:0,pid:") && log.contains(" <0."),
        "{log}"
    );
    // The reader's own reads are not logged (they would feed it lines forever).
    assert!(
        log.lines().count() < 100 && !log.contains(" read <"),
        "{} lines: {}",
        log.lines().count(),
        log.lines().take(5).collect::<Vec<_>>().join("\n")
    );
    // `strata info` names the file's inode, slices and block objects.
    sh(&a.path, "head -c 5000000 /dev/urandom > info.bin");
    let out = run(Command::new(STRATA)
        .arg("info")
        .arg(a.path.join("info.bin")));
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(
        info.contains("length: 5000000") && info.contains("chunk 0: 1 slices"),
        "{info}"
    );
    assert!(
        info.contains("e2e-vol/chunks/") && info.contains("_1_805696"),
        "block names: {info}"
    );
    let err = Command::new(STRATA)
        .args(["info", "/tmp"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&err.stderr);
    assert!(
        !err.status.success() && stderr.contains("not on a mounted Strata volume"),
        "{stderr}"
    );
}

#[test]
fn a_subdirectory_mounts_as_the_root() {
    let vol = Volume::new();
    let whole = vol.mount("whole");
    sh(
        &whole.path,
        "mkdir -p projects/a && echo inside > projects/a/f && echo outside > top",
    );
    let path = vol.dir.path().join("sub");
    std::fs::create_dir_all(&path).unwrap();
    run(Command::new(STRATA)
        .args(["mount", &vol.meta_url])
        .arg(&path)
        .args(["-d", "--subdir", "/projects/a", "--log"])
        .arg(vol.dir.path().join("sub.log")));
    let sub = Mount {
        path,
        log: vol.dir.path().join("sub.log"),
    };
    let out = sh(
        &sub.path,
        "ls; cat f; echo new > g; test -e top || echo no-top; grep -c strata_ .stats > /dev/null && echo stats-ok",
    );
    assert_eq!(out, "f\ninside\nno-top\nstats-ok\n", "{}", sub.log());
    assert_eq!(sh(&whole.path, "cat projects/a/g"), "new\n");
    let (ok, err) = {
        let o = Command::new(STRATA)
            .args(["mount", &vol.meta_url])
            .arg(vol.dir.path())
            .args(["--subdir", "/nope"])
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert!(!ok && err.contains("--subdir /nope"), "{err}");
}

#[test]
fn a_killed_mount_keeps_what_was_closed_and_fsynced() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "head -c 5000000 /dev/urandom > ../safe.bin; cp ../safe.bin safe.bin; sync safe.bin; \
         python3 -c \"import os; fd=os.open('safe.bin', os.O_RDONLY); os.fsync(fd)\"",
    );
    // Closed, never fsynced (the periodic sync runs every 5 s): a crash of the mount
    // process must not lose them either.
    sh(
        &m.path,
        "mkdir closed; for i in $(seq 1 20); do head -c $((i * 7000)) ../safe.bin > closed/$i; done; \
         cp ../safe.bin closed/big",
    );
    // Keep writing another file while the mount is killed.
    let mut writer = Command::new("bash")
        .arg("-c")
        .arg(
            "for i in $(seq 2000); do head -c 1000000 /dev/urandom >> unsynced.bin || exit 0; done",
        )
        .current_dir(&m.path)
        .spawn()
        .unwrap();
    // The kill lands while the file grows.
    let growing = m.path.join("unsynced.bin");
    assert!(
        eventually(Duration::from_secs(30), || std::fs::metadata(&growing)
            .is_ok_and(|md| md.len() >= 2_000_000)),
        "the writer got going"
    );
    kill_mount_processes(&m.path);
    let _ = writer.wait();
    let _ = Command::new("umount").arg("-l").arg(&m.path).status();
    let again = vol.mount("mnt");
    let out = sh(&again.path, "cmp safe.bin ../safe.bin && echo intact; ls");
    assert!(
        out.contains("intact"),
        "fsynced data survives kill -9: {out}"
    );
    let out = sh(
        &again.path,
        "cmp closed/big ../safe.bin && for i in $(seq 1 20); do \
         head -c $((i * 7000)) ../safe.bin | cmp - closed/$i || exit 1; done && echo whole",
    );
    assert!(out.contains("whole"), "closed files survive kill -9: {out}");
}

#[test]
fn a_non_root_user_gets_eacces_where_linux_would() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    let out = sh(
        &m.path,
        r#"
        mkdir private && chmod 700 private && echo secret > private/s && chmod 600 private/s
        echo open > public && chmod 644 public
        as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
        denied() { local err; err=$(as_user "$@" 2>&1 >/dev/null) && return 1; case "$err" in *"Permission denied"*) return 0;; esac; return 1; }
        as_user cat public
        denied cat private/s && echo read-denied
        denied ls private && echo list-denied
        denied sh -c 'echo x >> public' && echo write-denied
        as_user chmod 777 public 2>/dev/null || echo chmod-refused
        as_user touch own && echo create-allowed
    "#,
    );
    assert!(out.contains("open"), "{out}");
    for expected in [
        "read-denied",
        "list-denied",
        "write-denied",
        "chmod-refused",
        "create-allowed",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
}

#[test]
fn unprivileged_writes_drop_setuid_setgid_and_capabilities_as_on_local_disk() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    let script = r#"
        as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
        touch suid sgid-x sgid-nox caps && chmod 4777 suid && chmod 2777 sgid-x && chmod 2767 sgid-nox
        chmod 0777 caps && setcap cap_net_raw+ep caps
        as_user sh -c 'echo x >> suid; echo x >> sgid-x; echo x >> sgid-nox; echo x >> caps'
        touch root-keeps && chmod 4777 root-keeps && echo x >> root-keeps
        sleep 1.2
        stat -c '%n %a' suid sgid-x sgid-nox caps root-keeps
        getcap caps | wc -l
    "#;
    let local = tempfile::tempdir().unwrap();
    let expected = sh(local.path(), script);
    assert!(expected.contains("suid 777"), "local disk: {expected}");
    assert_eq!(
        sh(&m.path, script),
        expected,
        "the mount behaves like local disk"
    );
}

#[test]
fn xattrs_can_be_turned_off_like_juicefs_does_by_default() {
    let vol = Volume::new();
    let on = vol.mount_with("on", &["--enable-xattr"]);
    let out = sh(
        &on.path,
        "touch f && setfattr -n user.k -v v f && getfattr --only-values -n user.k f",
    );
    assert_eq!(out, "v");
    drop(on);
    let off = vol.mount_with("off", &["--enable-xattr=false"]);
    let out = sh(
        &off.path,
        "getfattr -n user.k f 2>&1 || true; setfattr -n user.x -v 1 f 2>&1 || true; cat f; echo ok",
    );
    assert!(out.contains("Operation not supported"), "{out}");
    assert!(out.ends_with("ok\n"), "the file itself still works: {out}");
}

#[test]
fn ls_l_asks_for_the_selinux_label_once_unless_labels_are_enabled() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    // Each lgetxattr ls makes is a FUSE request; with labels off the first "not supported"
    // makes ls stop asking for the rest of the device.
    let out = sh(
        &m.path,
        "mkdir d && (cd d && seq 1 300 | xargs touch) && \
         strace -f -e trace=getxattr,lgetxattr,listxattr,llistxattr -o ../xattr-calls ls -l d > /dev/null && \
         grep -c 'getxattr(' ../xattr-calls; \
         getfattr -n security.selinux d/1 2>&1 || true; \
         setfattr -n user.k -v v d/1 && getfattr --only-values -n user.k d/1",
    );
    let calls: usize = out.lines().next().unwrap().trim().parse().unwrap();
    assert!(
        calls <= 3,
        "ls -l of 300 files made {calls} getxattr calls: {out}"
    );
    assert!(
        out.contains("security.selinux: Operation not supported"),
        "{out}"
    );
    assert!(out.ends_with("\nv"), "other xattrs still work: {out}");
    drop(m);
    let labelled = vol.mount_with("labelled", &["--enable-selinux"]);
    let out = sh(
        &labelled.path,
        "setfattr -n security.selinux -v system_u:object_r:tmp_t:s0 d/2 && \
         getfattr --only-values -n security.selinux d/2",
    );
    assert!(out.starts_with("system_u:object_r:tmp_t:s0"), "{out}");
}

#[test]
fn random_reads_on_a_mount_fetch_segments_not_blocks() {
    let vol = Volume::new();
    let m = vol.mount("mnt");
    sh(
        &m.path,
        "head -c 16777216 /dev/urandom > ../ref.bin && cp ../ref.bin data.bin",
    );
    m.unmount();
    // A fresh mount: nothing of the file in memory.
    let m = vol.mount("mnt");
    let out = sh(
        &m.path,
        r#"
        python3 - <<'PY'
import mmap, os, random
def down():
    for line in open(".stats"):
        if line.startswith("strata_object_bytes_down "):
            return int(line.split()[1])
    return 0
ref = open("../ref.bin", "rb").read()
fd = os.open("data.bin", os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 4096)
random.seed(3)
offsets = random.sample(range(0, len(ref) // 32768), 64)
before = down()
for seg in offsets:
    off = seg * 32768 + 8192
    assert os.preadv(fd, [buf], off) == 4096
    assert buf[:] == ref[off:off + 4096], f"bytes differ at {off}"
fetched = down() - before
print("fetched", fetched)
# 64 reads in 64 distinct segments: one segment and its trailer each, no whole blocks.
assert fetched == 64 * (32768 + 8), fetched
print("segments-ok")
PY
    "#,
    );
    assert!(out.contains("segments-ok"), "{out}\n{}", m.log());
}
