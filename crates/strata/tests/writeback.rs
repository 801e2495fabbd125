//! End-to-end tests of `mount --writeback` on real mounts: data fsynced and then the mount
//! `kill -9`ed is uploaded by the next start and readable from another client; a block
//! staged while the object store refuses writes lands when it is back; another client
//! reading a file not uploaded yet gets its bytes (waiting for them, or from the writer
//! in a cache group), never garbage;
//! `umount --flush` leaves nothing staged; fsck finds the volume clean after each.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Sizes of the files under `dir`, recursively (none if it does not exist).
fn file_sizes_under(dir: &Path) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut sizes = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sizes.extend(file_sizes_under(&path));
        } else {
            sizes.push(entry.metadata().map_or(0, |m| m.len()));
        }
    }
    sizes
}

/// Files under `dir`, recursively (0 if it does not exist).
fn files_under(dir: &Path) -> usize {
    file_sizes_under(dir).len()
}

/// Bytes of the files under `dir`, recursively.
fn bytes_under(dir: &Path) -> u64 {
    file_sizes_under(dir).iter().sum()
}

/// The staging directory of a client whose cache directory is `cache`.
fn staging(cache: &Path) -> PathBuf {
    let uuid = std::fs::read_dir(cache)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    uuid.join("staging")
}

/// Objects in the volume's bucket.
fn stored_blocks(vol: &Volume) -> usize {
    files_under(&vol.dir.path().join("bucket").join("e2e-vol").join("chunks"))
}

/// Wait until `cond` holds (bounded).
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50)); // poll interval of a wait for the condition
    }
}

/// A fresh mount reads `f` as `../expected`; then fsck finds the volume clean.
fn reader_sees_expected(vol: &Volume) {
    let reader = vol.mount("r");
    let out = sh(&reader.path, "cmp f ../expected && echo same");
    assert!(out.contains("same"), "{out}");
    drop(reader);
    fsck_clean(vol);
}

fn fsck_clean(vol: &Volume) {
    let out = run(Command::new(STRATA).args(["fsck", &vol.meta_url]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("volume is clean"), "{text}");
}

/// A writeback mount of `vol` at NAME (its cache directory is NAME-cache).
fn writeback_mount(vol: &Volume, name: &str, delay: &str) -> Mount {
    vol.mount_with(name, &["--writeback", "--upload-delay", delay])
}

#[test]
fn fsynced_data_staged_before_kill_9_is_uploaded_by_the_next_start() {
    let vol = Volume::new();
    let cache = vol.dir.path().join("w-cache");
    let m = writeback_mount(&vol, "w", "1h");
    sh(
        &m.path,
        "head -c 9000000 /dev/urandom > ../expected && cp ../expected f && sync f",
    );
    assert_eq!(
        stored_blocks(&vol),
        0,
        "an hour's delay: nothing uploaded yet"
    );
    assert!(
        bytes_under(&staging(&cache)) >= 9_000_000,
        "the blocks are staged"
    );
    kill_mount_processes(&m.path);
    let _ = Command::new("umount").arg("-l").arg(&m.path).status();
    std::mem::forget(m);

    // The next start with this cache directory uploads what was staged, even without
    // --writeback (a flag forgotten must not strand fsynced data).
    let again = vol.mount("w");
    wait_for("the staged blocks to be uploaded", || {
        files_under(&staging(&cache)) == 0
    });
    assert!(stored_blocks(&vol) >= 3);
    drop(again);
    reader_sees_expected(&vol);
}

#[test]
fn blocks_staged_while_the_store_refuses_writes_land_when_it_is_back() {
    let vol = Volume::new();
    let cache = vol.dir.path().join("w-cache");
    let bucket = vol.dir.path().join("bucket");
    let m = writeback_mount(&vol, "w", "0s");
    // The object store goes read-only (as a store refusing writes would).
    run(Command::new("mount")
        .args(["--bind"])
        .arg(&bucket)
        .arg(&bucket));
    run(Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(&bucket));
    let outcome = std::panic::catch_unwind(|| {
        sh(
            &m.path,
            "head -c 5000000 /dev/urandom > ../expected && cp ../expected f && sync f",
        );
        let stats = std::fs::read_to_string(m.path.join(".stats")).unwrap();
        assert!(
            bytes_under(&staging(&cache)) >= 5_000_000,
            "staged while the store is down: {stats}"
        );
        wait_for("a failed upload", || {
            let stats = std::fs::read_to_string(m.path.join(".stats")).unwrap();
            stats
                .lines()
                .any(|l| l.starts_with("strata_staged_upload_failures ") && !l.ends_with(" 0"))
        });
    });
    run(Command::new("umount").arg(&bucket));
    outcome.unwrap();
    wait_for("the staged blocks to land", || {
        files_under(&staging(&cache)) == 0
    });
    drop(m);
    reader_sees_expected(&vol);
}

#[test]
fn another_client_reading_a_file_not_uploaded_yet_gets_its_bytes() {
    let vol = Volume::new();
    let cache = vol.dir.path().join("w-cache");
    let writer = writeback_mount(&vol, "w", "3s");
    let reader = vol.mount("r");
    sh(
        &writer.path,
        "head -c 6000000 /dev/urandom > ../expected && cp ../expected f",
    );
    assert_eq!(
        stored_blocks(&vol),
        0,
        "not uploaded yet when the reader starts"
    );
    assert!(
        bytes_under(&staging(&cache)) >= 6_000_000,
        "staged at the writer"
    );
    let out = sh(&reader.path, "cmp f ../expected && echo same");
    assert!(out.contains("same"), "{out}");
    drop(reader);
    drop(writer);
    fsck_clean(&vol);
}

/// The value of counter `name` in a mount's `.stats`.
fn stat(mount: &Mount, name: &str) -> u64 {
    let text = std::fs::read_to_string(mount.path.join(".stats")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in .stats"))
}

#[test]
fn a_cache_group_member_gets_a_staged_block_from_its_writer() {
    let vol = Volume::new();
    let group = ["--cache-group", "g", "--group-listen", "127.0.0.1:0"];
    let mut writer_flags = vec!["--writeback", "--upload-delay", "1h", "--cache-size", "1M"];
    writer_flags.extend(group);
    // The writer's share of the ring is 1 MiB against the reader's 2 GiB: nearly every
    // block is the reader's to fetch, so it must ask the writer for the staged copy.
    let writer = vol.mount_with("w", &writer_flags);
    let mut reader_flags = vec!["--cache-size", "2G"];
    reader_flags.extend(group);
    let reader = vol.mount_with("r", &reader_flags);
    sh(
        &writer.path,
        "head -c 40000000 /dev/urandom > ../expected && cp ../expected f",
    );
    // Uploads wait an hour: without the writer's copy this read would wait 60 s, then fail.
    let out = sh(&reader.path, "cmp f ../expected && echo same");
    assert!(out.contains("same"), "{out}");
    assert_eq!(stored_blocks(&vol), 0, "nothing was uploaded");
    assert!(stat(&reader, "strata_group_staged_hits") > 0);
    assert!(stat(&reader, "strata_group_staged_bytes") > 0);
    drop(reader);
    let out = run(Command::new(STRATA)
        .args(["umount", "--flush"])
        .arg(&writer.path));
    assert!(out.status.success(), "{out:?}");
    wait_for("the unmount", || !is_mounted(&writer.path));
    reader_sees_expected(&vol);
}

#[test]
fn umount_flush_uploads_every_staged_block_first() {
    let vol = Volume::new();
    let cache = vol.dir.path().join("w-cache");
    let m = writeback_mount(&vol, "w", "1h");
    sh(
        &m.path,
        "for i in $(seq 20); do head -c 100000 /dev/urandom > small.$i; done; head -c 5000000 /dev/urandom > big",
    );
    assert!(bytes_under(&staging(&cache)) >= 7_000_000);
    let out = run(Command::new(STRATA)
        .args(["umount", "--flush"])
        .arg(&m.path));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("uploaded"),
        "{out:?}"
    );
    wait_for("the unmount", || !is_mounted(&m.path));
    assert_eq!(files_under(&staging(&cache)), 0, "nothing left staged");
    assert!(stored_blocks(&vol) >= 22);
    fsck_clean(&vol);
}

#[test]
fn fsck_names_the_writeback_client_whose_blocks_are_not_uploaded_yet() {
    let vol = Volume::new();
    let m = writeback_mount(&vol, "w", "1h");
    sh(&m.path, "head -c 100000 /dev/urandom > f");
    let out = Command::new(STRATA)
        .args(["fsck", &vol.meta_url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "the block is not in the object store yet: {text}"
    );
    assert!(
        text.contains("broken file /f") && text.contains("writes back"),
        "{text}"
    );
    // Every writeback metric of docs/METRICS.md is in the mount's metrics.
    let stats = std::fs::read_to_string(m.path.join(".stats")).unwrap();
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/METRICS.md"),
    )
    .unwrap();
    let section = &doc[doc.find("## Writeback").unwrap()..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let names: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    for name in names {
        assert!(
            stats.contains(&format!("# TYPE {name} ")),
            "{name} is documented but not served"
        );
    }
    assert!(stats.contains("strata_staged_blocks 1"), "{stats}");
    run(Command::new(STRATA)
        .args(["umount", "--flush"])
        .arg(&m.path));
    wait_for("the unmount", || !is_mounted(&m.path));
    fsck_clean(&vol);
}
