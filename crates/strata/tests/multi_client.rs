//! Several clients on one volume, on every metadata engine: two mounts (separate
//! processes) create files in one directory at once, race renames, see each other's closed
//! files, share locks, and clean up after a client killed with `kill -9`.
//!
//! Network engines come from `STRATA_TEST_REDIS`, `STRATA_TEST_POSTGRES` and
//! `STRATA_TEST_ETCD` (scripts/test.sh starts the servers); each test uses a fresh prefix.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

/// Run two shell scripts at once, one in each directory; both must succeed.
fn concurrently(a: (&Path, &str), b: (&Path, &str)) {
    let start = |(dir, script): (&Path, &str)| {
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(dir)
            .spawn()
            .unwrap()
    };
    let (mut x, mut y) = (start(a), start(b));
    assert!(x.wait().unwrap().success(), "first script failed");
    assert!(y.wait().unwrap().success(), "second script failed");
}

/// Objects in the volume's bucket.
fn object_count(vol: &Volume) -> usize {
    let out = sh(vol.dir.path(), "find bucket -type f | wc -l");
    out.trim().parse().unwrap()
}

/// Every directory's link count is 2 + its subdirectories, every file has one link, and
/// every entry can be stat'ed (points at a live inode).
const TREE_CHECK: &str = r#"
import os, sys
bad = 0
for root, dirs, files in os.walk(sys.argv[1]):
    if os.stat(root).st_nlink != 2 + len(dirs):
        bad += 1; print("nlink", root, os.stat(root).st_nlink, len(dirs))
    for f in files:
        st = os.stat(os.path.join(root, f))
        if st.st_nlink != 1:
            bad += 1; print("file nlink", f, st.st_nlink)
print("bad", bad)
"#;

fn two_clients_share_one_volume(meta_url: &str) {
    let vol = Volume::on_engine(meta_url);
    let fast = ["--heartbeat", "1"];
    let a = vol.mount_with("a", &fast);
    let b = vol.mount_with("b", &fast);

    // Both create 5,000 files in one directory at once: none lost, none duplicated.
    sh(&a.path, "mkdir d");
    let create =
        |tag: &str| format!("cd d && seq 0 4999 | sed 's/^/{tag}-/' | xargs -P 4 -n 250 touch");
    let (ca, cb) = (create("a"), create("b"));
    concurrently((&a.path, &ca), (&b.path, &cb));
    for m in [&a, &b] {
        let out = sh(&m.path, "ls d | wc -l; ls d | sort | uniq -d | wc -l");
        assert_eq!(out, "10000\n0\n", "{}", m.log());
    }

    // Rename races: both move the same 200 files to different directories.
    sh(
        &a.path,
        "mkdir -p r/x r/y && cd r && seq 0 199 | sed 's/^/f-/' | xargs touch",
    );
    let race = |to: &str| {
        format!("cd r; for i in $(seq 0 199); do mv f-$i {to}/ 2>/dev/null || true; done")
    };
    let (ra, rb) = (race("x"), race("y"));
    concurrently((&a.path, &ra), (&b.path, &rb));
    let fresh = vol.mount("c");
    let out = sh(
        &fresh.path,
        "ls r | grep -c '^f-' || true; (ls r/x; ls r/y) | wc -l; (ls r/x; ls r/y) | sort | uniq -d | wc -l",
    );
    assert_eq!(out, "0\n200\n0\n", "every file moved exactly once");
    let check = sh(
        &fresh.path,
        &format!("python3 - . <<'PY'\n{TREE_CHECK}\nPY"),
    );
    assert!(check.ends_with("bad 0\n"), "{check}");
    drop(fresh);

    // Close-to-open: a file closed on one mount is whole on the other's next open.
    sh(
        &a.path,
        "head -c 3000000 /dev/urandom > cto.bin; md5sum < cto.bin > ../cto.md5",
    );
    sh(&b.path, "md5sum < cto.bin | cmp - ../cto.md5");

    // Locks conflict across mounts.
    let mut holder = Command::new("flock")
        .args(["-x", "lk", "-c", "echo held; sleep 4"])
        .current_dir(&a.path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once it says so, a holds the lock.
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut said,
    )
    .unwrap();
    assert_eq!(said, "held\n");
    let out = sh(&b.path, "flock -n -x lk -c 'echo got' || echo blocked");
    assert_eq!(out, "blocked\n", "flock held on a blocks b");
    holder.wait().unwrap();
    // FUSE ends a flock() with the file's release, which the kernel sends after close()
    // without waiting for it: b may see the lock for the few ms that takes (SEMANTICS.md).
    let freed = eventually(Duration::from_secs(5), || {
        sh(&b.path, "flock -n -x lk -c 'echo got' || echo blocked") == "got\n"
    });
    assert!(freed, "released on a, free on b");

    killed_client_is_cleaned_up(&vol, &a);
}

/// A client killed while holding a lock and an unlinked-but-open file: a live client
/// cleans its session, so the lock is released and the file's data freed.
fn killed_client_is_cleaned_up(vol: &Volume, survivor: &Mount) {
    let before = object_count(vol);
    let k = vol.mount_with("k", &["--heartbeat", "1"]);
    let probe = "python3 -c \"import fcntl, os\nfd = os.open('plk', os.O_RDWR | os.O_CREAT)\ntry:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\nexcept OSError: print('blocked')\"";
    let mut holder = Command::new("python3")
        .arg("-c")
        .arg(
            "import fcntl, os, time\n\
             fd = os.open('plk', os.O_RDWR | os.O_CREAT)\n\
             fcntl.lockf(fd, fcntl.LOCK_EX)\n\
             with open('held.bin', 'wb') as f: f.write(os.urandom(3000000))\n\
             h = open('held.bin', 'rb')\n\
             os.unlink('held.bin')\n\
             print('ready', flush=True)\n\
             time.sleep(120)\n", // the thing under test: the holder stays
        )
        .current_dir(&k.path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    assert_eq!(
        sh(&survivor.path, probe),
        "blocked\n",
        "the lock is held by k"
    );
    assert_eq!(object_count(vol), before + 1, "held.bin's block exists");
    // The mount point followed by a space names k's mount process only.
    sh(
        vol.dir.path(),
        &format!("pkill -9 -f '{} '", k.path.display()),
    );
    let _ = holder.kill();
    let _ = holder.wait();
    let _ = Command::new("umount").arg("-l").arg(&k.path).status();
    assert!(
        eventually(Duration::from_secs(40), || sh(&survivor.path, probe)
            == "free\n"),
        "the dead client's lock is released: {}",
        survivor.log()
    );
    assert!(
        eventually(Duration::from_secs(40), || object_count(vol) == before),
        "the dead client's unlinked file is freed ({} objects, {before} before): {}",
        object_count(vol),
        survivor.log()
    );
}

#[test]
fn two_clients_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite3://{}", dir.path().join("shared.db").display());
    two_clients_share_one_volume(&url);
}

#[test]
fn two_clients_on_redis() {
    two_clients_share_one_volume(&network_meta_url("redis", "e"));
}

#[test]
fn two_clients_on_postgres() {
    two_clients_share_one_volume(&network_meta_url("postgres", "e"));
}

#[test]
fn two_clients_on_mysql() {
    two_clients_share_one_volume(&network_meta_url("mysql", "e"));
}

#[test]
fn two_clients_on_etcd() {
    two_clients_share_one_volume(&network_meta_url("etcd", "e"));
}

/// A client opened on an engine with a change feed returns from `open` with the feed up:
/// commits made before its first beat came back were never announced to it, and what
/// they wrote stayed untrusted by its cache for good (1,000 files created right after
/// opening then cost a round trip per `stat`: 9k/s instead of 180k/s on Redis).
#[test]
fn clients_open_with_their_change_feed_up() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for engine in ["redis", "postgres", "etcd"] {
        let dir = tempfile::tempdir().unwrap();
        let url = network_meta_url(engine, "feedup");
        let bucket = dir.path().join("bucket");
        strata_ok(&[
            "format",
            &url,
            "feedup",
            "--bucket",
            bucket.to_str().unwrap(),
        ]);
        let opts = strata_client::ClientOptions {
            cache_dir: Some(dir.path().join("cache").to_string_lossy().into_owned()),
            backup_meta: Duration::ZERO,
            backup_meta_no_snapshot: false,
            ..strata_client::ClientOptions::default()
        };
        runtime.block_on(async {
            let client = strata_client::Client::open(
                &strata_types::MetaUrl::new(&url),
                &opts,
                strata_vfs::VfsOptions::default(),
                "feedup",
            )
            .await
            .unwrap();
            assert!(
                client.meta.cache_trusted(),
                "{engine}: open returned before the feed was up"
            );
            client.close().await.unwrap();
        });
    }
}
