//! Running out of space says so: a full local bucket fails the writer's `fsync` or
//! `close` with ENOSPC (not EIO), and a full cache disk under `--writeback` fails nothing
//! (blocks that cannot be staged go to the store directly). Each runs on a small tmpfs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// A tmpfs of `mib` MiB mounted at `path` for the test's life.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(path: &Path, mib: u32) -> SmallDisk {
        std::fs::create_dir_all(path).unwrap();
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(path));
        SmallDisk(path.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A volume whose bucket is on a disk of `mib` MiB.
fn volume_on_small_bucket(mib: u32) -> (tempfile::TempDir, SmallDisk, String) {
    let dir = tempfile::tempdir().unwrap();
    let disk = SmallDisk::mount(&dir.path().join("bucket"), mib);
    let meta_url = format!("sqlite3://{}", dir.path().join("meta.db").display());
    let bucket = dir.path().join("bucket");
    strata_ok(&[
        "format",
        &meta_url,
        "full",
        "--trash-days",
        "0",
        "--bucket",
        bucket.to_str().unwrap(),
    ]);
    (dir, disk, meta_url)
}

#[test]
fn a_full_bucket_is_enospc_at_fsync_and_close() {
    let (_dir, _disk, meta_url) = volume_on_small_bucket(8);
    let vol = Volume::existing(&meta_url);
    let m = vol.mount("m");
    // 24 MiB into 8: the uploads fail, and the writer hears why.
    let out = Command::new("dd")
        .args(["if=/dev/urandom", "bs=1M", "count=24", "conv=fsync"])
        .arg(format!("of={}", m.path.join("big").display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "dd into a full bucket succeeded: {said}"
    );
    assert!(
        said.contains("No space left on device"),
        "the writer hears ENOSPC, not EIO: {said}"
    );
}

#[test]
fn a_full_cache_disk_under_writeback_loses_nothing() {
    let vol = Volume::new();
    // The mount's cache (and staging) directory, on 4 MiB.
    let _disk = SmallDisk::mount(&vol.dir.path().join("m-cache"), 4);
    let m = vol.mount_with("m", &["--writeback"]);
    sh(
        &m.path,
        "head -c $((20 << 20)) /dev/urandom > data.src && cp data.src data && sync data",
    );
    let written = std::fs::read(m.path.join("data")).unwrap();
    assert_eq!(written.len(), 20 << 20);
    assert_eq!(written, std::fs::read(m.path.join("data.src")).unwrap());
    m.unmount();
    let again = vol.mount("again");
    assert_eq!(std::fs::read(again.path.join("data")).unwrap(), written);
}
