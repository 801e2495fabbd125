//! The crash file system keeps what was `fsync`ed and loses the rest at a power cut, on a
//! real FUSE mount.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use strata_testkit::crashfs::CrashFs;

struct Dirs {
    root: PathBuf,
    backing: PathBuf,
    mnt: PathBuf,
}

fn dirs(name: &str) -> Dirs {
    let root = std::env::temp_dir().join(format!("crashfs-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let (backing, mnt) = (root.join("backing"), root.join("mnt"));
    fs::create_dir_all(&backing).unwrap();
    fs::create_dir_all(&mnt).unwrap();
    Dirs { root, backing, mnt }
}

#[test]
fn a_power_cut_keeps_fsynced_bytes_and_names_and_loses_the_rest() {
    let d = dirs("cut");
    let fs_ = CrashFs::mount(&d.backing, &d.mnt).unwrap();
    fs::create_dir(d.mnt.join("dir")).unwrap();
    let mut synced = File::create(d.mnt.join("dir/synced")).unwrap();
    synced.write_all(&[1u8; 10_000]).unwrap();
    synced.sync_all().unwrap();
    synced.write_at(b"later", 100).unwrap(); // after the fsync: lost
    let mut loose = File::create(d.mnt.join("loose")).unwrap();
    loose.write_all(b"never synced").unwrap();
    // Readers through the mount see everything.
    assert_eq!(fs::read(d.mnt.join("loose")).unwrap(), b"never synced");
    assert_eq!(
        &fs::read(d.mnt.join("dir/synced")).unwrap()[100..105],
        b"later"
    );
    fs::rename(d.mnt.join("loose"), d.mnt.join("renamed")).unwrap();
    assert!(fs_.unsynced_bytes() > 0);
    drop((synced, loose));
    let lost = fs_.power_cut();
    assert!(lost >= 2 * 4096, "{lost}");
    // The backing directory holds what an fsync made durable, and every name.
    assert_eq!(
        fs::read(d.backing.join("dir/synced")).unwrap(),
        vec![1u8; 10_000]
    );
    assert_eq!(fs::read(d.backing.join("renamed")).unwrap(), b"");
    assert!(!d.backing.join("loose").exists());
    // A new mount over it sees the same.
    let again = CrashFs::mount(&d.backing, &d.mnt).unwrap();
    assert_eq!(
        fs::read(d.mnt.join("dir/synced")).unwrap(),
        vec![1u8; 10_000]
    );
    drop(again);
    fs::remove_dir_all(&d.root).unwrap();
}

#[test]
fn an_orderly_unmount_writes_everything_back_and_truncation_is_seen_at_once() {
    let d = dirs("orderly");
    let fs_ = CrashFs::mount(&d.backing, &d.mnt).unwrap();
    let path = d.mnt.join("f");
    fs::write(&path, vec![5u8; 9000]).unwrap();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(4097).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), 4097);
    f.set_len(6000).unwrap();
    let seen = fs::read(&path).unwrap();
    assert_eq!(seen.len(), 6000);
    assert!(seen[..4097].iter().all(|b| *b == 5) && seen[4097..].iter().all(|b| *b == 0));
    fs::hard_link(&path, d.mnt.join("g")).unwrap();
    assert_eq!(fs::read(d.mnt.join("g")).unwrap(), seen);
    drop(f);
    drop(fs_);
    assert_eq!(fs::read(d.backing.join("f")).unwrap(), seen);
    assert_eq!(fs::read(d.backing.join("g")).unwrap(), seen);
    fs::remove_dir_all(&d.root).unwrap();
}
