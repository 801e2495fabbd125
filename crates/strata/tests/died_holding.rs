//! Clients killed with `kill -9` in the middle of something: a mount during a storm of
//! renames and links (on Redis), a mount while it compacts fragmented files, a gateway
//! during a multipart upload, `strata gc --delete` half way. Each leaves nothing behind once its session expires: `strata
//! status` no longer lists it, `strata fsck` finds the volume clean, and `strata gc`
//! finds nothing leaked, or only the blocks the dead client had uploaded and never
//! committed, which it deletes (docs/SEMANTICS.md). (Killed holding a POSIX lock and an
//! unlinked open file: `multi_client.rs`; killed mid-write: `lifecycle.rs`; a dead
//! WebDAV server's locks: `webdav.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The session id of a mount, from its `.config`.
fn sid_of(m: &Mount) -> u64 {
    let text = std::fs::read_to_string(m.path.join(".config")).unwrap();
    let config: serde_json::Value = serde_json::from_str(&text).unwrap();
    config["sid"].as_u64().unwrap()
}

/// SIGKILL the process serving mount point `path`.
fn kill_mount(vol: &Volume, path: &std::path::Path) {
    // The mount point followed by a space names that mount's process only.
    sh(
        vol.dir.path(),
        &format!("pkill -9 -f '{} '", path.display()),
    );
    let _ = Command::new("umount").arg("-l").arg(path).status();
}

/// A live client cleans the dead session `sid` up once it expires (5 heartbeats).
fn session_cleaned_up(vol: &Volume, sid: u64) {
    let sid = sid.to_string();
    let gone = || !strata(&["status", &vol.meta_url, "--session", &sid]).0;
    assert!(
        eventually(Duration::from_secs(40), gone),
        "the dead mount's session was never cleaned up"
    );
}

/// `gc` finds nothing leaked (after deleting, with `--delete`, what a dead client left).
fn gc_clean(url: &str) {
    let out = strata_ok(&["gc", url, "--delete", "--safety-window", "0"]);
    let line = out.lines().find(|l| l.starts_with("leaked: ")).unwrap();
    let leaked = line.split_whitespace().nth(1).unwrap();
    assert!(line.ends_with(&format!("deleted {leaked}")), "{out}");
    let out = strata_ok(&["gc", url, "--safety-window", "0"]);
    assert!(out.contains("leaked: 0 objects"), "{out}");
}

#[test]
fn a_mount_killed_during_renames_and_links_leaves_a_clean_volume() {
    let vol = Volume::on_engine(&network_meta_url("redis", "died"));
    let doomed = vol.mount_with("doomed", &["--heartbeat", "1"]);
    let sid = sid_of(&doomed);
    let storm = Command::new("bash")
        .arg("-c")
        .arg(
            "mkdir -p a b; for i in $(seq 0 9); do touch a/f$i; done; \
             for r in $(seq 1000); do for i in $(seq 0 9); do \
               mv a/f$i b/g$i 2>/dev/null; ln b/g$i a/f$i 2>/dev/null; \
               mv b/g$i a/h$i 2>/dev/null; rm -f a/h$i; touch a/f$i; \
             done; done",
        )
        .current_dir(&doomed.path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Let the storm get going (the mount's session shows work in flight), then kill.
    assert!(eventually(Duration::from_secs(20), || {
        // `a` may not be made yet: no entries then.
        sh(&doomed.path, "(ls a 2>/dev/null || true) | wc -l")
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
            >= 5
    }));
    std::thread::sleep(Duration::from_millis(700)); // the thing under test: a kill mid-storm
    kill_mount(&vol, &doomed.path);
    // The storm's shell would go on failing for a while on the dead mount point.
    let mut storm = storm;
    let _ = storm.kill();
    let _ = storm.wait();
    // A live client cleans the dead session once it expires (5 heartbeats).
    let survivor = vol.mount("survivor");
    session_cleaned_up(&vol, sid);
    drop(survivor);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
    gc_clean(&vol.meta_url);
}

/// A gateway killed while parts of a multipart upload were arriving: the upload is still
/// listed, another gateway process aborts it, and then nothing of it remains.
#[test]
fn a_gateway_killed_mid_multipart_leaves_an_upload_another_gateway_aborts() {
    const KEY: &str = "died-key";
    const SECRET: &str = "died-secret-123";
    let vol = Volume::new();
    let envs = [("STRATA_ACCESS_KEY", KEY), ("STRATA_SECRET_KEY", SECRET)];
    let args = ["gateway", &vol.meta_url, "127.0.0.1:0", "--cache-size", "0"];
    let doomed = Daemon::start(&vol, "gw1", &args, &envs);
    // The AWS CLI against gateway `gw`, as the user of KEY.
    let aws_cmd = |gw: &Daemon| -> Command {
        let aws = std::env::var("STRATA_TEST_AWS")
            .expect("STRATA_TEST_AWS is not set: run the tests through scripts/test.sh");
        let mut cmd = Command::new(aws);
        cmd.args(["--endpoint-url", &gw.url, "--region", "us-east-1"])
            .env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
        cmd
    };
    let aws = |gw: &Daemon, rest: &[&str]| -> String {
        let out = run(aws_cmd(gw).args(rest));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let id = aws(
        &doomed,
        &[
            "s3api",
            "create-multipart-upload",
            "--bucket",
            "e2e-vol",
            "--key",
            "big/obj",
            "--query",
            "UploadId",
            "--output",
            "text",
        ],
    );
    let part = vol.dir.path().join("part");
    std::fs::write(&part, vec![7u8; 8 << 20]).unwrap();
    aws(
        &doomed,
        &[
            "s3api",
            "upload-part",
            "--bucket",
            "e2e-vol",
            "--key",
            "big/obj",
            "--upload-id",
            &id,
            "--part-number",
            "1",
            "--body",
            part.to_str().unwrap(),
        ],
    );
    let big = vol.dir.path().join("big");
    std::fs::write(&big, vec![9u8; 96 << 20]).unwrap();
    // Part 2 is on its way when the gateway dies.
    let mut sending = aws_cmd(&doomed)
        .args([
            "s3api",
            "upload-part",
            "--bucket",
            "e2e-vol",
            "--key",
            "big/obj",
            "--upload-id",
            &id,
            "--part-number",
            "2",
            "--body",
            big.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let blocks = vol.dir.path().join("bucket/e2e-vol/chunks");
    let count = || {
        sh(
            vol.dir.path(),
            &format!("find {} -type f | wc -l", blocks.display()),
        )
    };
    let before = count().trim().parse::<u64>().unwrap();
    assert!(
        eventually(Duration::from_secs(30), || count()
            .trim()
            .parse::<u64>()
            .unwrap()
            > before + 2),
        "part 2 never started arriving"
    );
    let mut doomed = doomed;
    doomed.child.kill().unwrap();
    doomed.child.wait().unwrap();
    let _ = sending.wait();

    let other = Daemon::start(&vol, "gw2", &args, &envs);
    let listed = aws(
        &other,
        &[
            "s3api",
            "list-multipart-uploads",
            "--bucket",
            "e2e-vol",
            "--query",
            "Uploads[].UploadId",
            "--output",
            "text",
        ],
    );
    assert_eq!(listed, id, "the dead gateway's upload is still there");
    aws(
        &other,
        &[
            "s3api",
            "abort-multipart-upload",
            "--bucket",
            "e2e-vol",
            "--key",
            "big/obj",
            "--upload-id",
            &id,
        ],
    );
    let listed = aws(
        &other,
        &[
            "s3api",
            "list-multipart-uploads",
            "--bucket",
            "e2e-vol",
            "--query",
            "length(Uploads || `[]`)",
        ],
    );
    assert_eq!(listed, "0");
    other.stop();
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
    gc_clean(&vol.meta_url);
}

/// `gc --delete` killed half way through deleting leaked objects: the next run finishes
/// the job, and no object in use was touched.
#[test]
fn gc_killed_half_way_is_finished_by_the_next_run() {
    let vol = Volume::new();
    let m = vol.mount("m");
    sh(
        &m.path,
        "for i in $(seq 1 30); do head -c 100000 /dev/urandom > f$i; done; md5sum f* > ../sums",
    );
    drop(m);
    // 20,000 objects no slice uses (blocks of slice 900000, whose directory is
    // chunks/0/900), old enough to be judged.
    let blocks = vol.dir.path().join("bucket/e2e-vol/chunks/0/900");
    std::fs::create_dir_all(&blocks).unwrap();
    for i in 0..20_000u64 {
        std::fs::write(blocks.join(format!("900000_{i}_5")), b"junk!").unwrap();
    }
    sh(
        vol.dir.path(),
        &format!("touch -d '2 hours ago' {}/*", blocks.display()),
    );
    // One deletion at a time, watched closely: ten at a time deleted all 20,000 between
    // two looks a quarter of a second apart.
    let mut gc = Command::new(STRATA)
        .args(["gc", &vol.meta_url, "--delete", "-q", "--threads", "1"])
        .spawn()
        .unwrap();
    let left = || std::fs::read_dir(&blocks).map(|d| d.count()).unwrap_or(0);
    let started = Instant::now();
    while left() >= 19_900 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "gc never started deleting"
        );
        std::thread::sleep(Duration::from_millis(1)); // poll interval of a wait for the condition
    }
    gc.kill().unwrap();
    gc.wait().unwrap();
    assert!(
        left() > 0,
        "the kill came after gc was done: make the test's heap larger"
    );
    gc_clean(&vol.meta_url);
    assert_eq!(left(), 0);
    let m = vol.mount("m");
    assert_eq!(
        sh(&m.path, "md5sum f*"),
        std::fs::read_to_string(vol.dir.path().join("sums")).unwrap()
    );
    drop(m);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
}

/// A mount killed while `strata compact` had it merging fragmented files: once its session
/// expires, the files read as before, fsck is clean, and gc deletes only the merged blocks
/// it had uploaded and not yet committed.
#[test]
fn a_mount_killed_while_compacting_leaves_its_files_whole() {
    let vol = Volume::new();
    // No background jobs: only the compaction under test merges anything.
    let doomed = vol.mount_with("doomed", &["--heartbeat", "1", "--no-bgjob"]);
    let sid = sid_of(&doomed);
    // 12 files of 8 MiB, each written as 128 separate 64 KiB slices.
    sh(
        &doomed.path,
        "for j in $(seq 1 12); do for i in $(seq 0 127); do \
           dd if=/dev/urandom of=f$j bs=64k count=1 seek=$i conv=notrunc,fsync status=none; \
         done; done; md5sum f* > ../sums",
    );
    let objects = || {
        sh(vol.dir.path(), "find bucket -type f | wc -l")
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let before = objects();
    let mut compact = Command::new(STRATA)
        .args(["compact", "-q", "-p", "1"])
        .arg(&doomed.path)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while objects() == before {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "compaction never began"
        );
        assert!(
            compact.try_wait().unwrap().is_none(),
            "compact ended before uploading"
        );
    }
    kill_mount(&vol, &doomed.path);
    let status = compact.wait().unwrap();
    assert!(
        !status.success(),
        "the kill came after compaction was done: give it more files"
    );
    let survivor = vol.mount("survivor");
    session_cleaned_up(&vol, sid);
    assert_eq!(
        sh(&survivor.path, "md5sum f*"),
        std::fs::read_to_string(vol.dir.path().join("sums")).unwrap()
    );
    drop(survivor);
    let out = strata_ok(&["fsck", &vol.meta_url]);
    assert!(out.contains("volume is clean"), "{out}");
    gc_clean(&vol.meta_url);
}
