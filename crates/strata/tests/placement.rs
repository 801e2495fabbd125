//! Data placement end to end (docs/PLACEMENT.md): a volume with three stores — its own
//! directory, a second directory (`cold`) and an S3 server (s3s-fs) behind the fault
//! proxy (`backup`). A tree written hot is moved cold by `tier move` while readers read
//! it continuously (no error, every byte verified), after which the hot store holds none
//! of it; a tree placed in the S3 store with a copy at home reads entirely and takes new
//! writes while the S3 store is slowed and then stopped (counted down on the metrics
//! endpoint); fsck and gc are clean across the stores.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use strata_object::conformance::{
    S3TestBackend, S3sFs, TEST_ACCESS_KEY, TEST_SECRET_KEY, TestBackend,
};
use strata_testkit::proxy::{Fault, FaultProxy};

/// Files per tree and their size: more than a mount's read buffer, so readers reach the
/// stores rather than memory.
const FILES: usize = 24;
const FILE_SIZE: usize = 4 << 20;

fn contents(tree: &str, i: usize) -> Vec<u8> {
    let mut seed = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ tree.len() as u64;
    (0..FILE_SIZE)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn write_tree(mnt: &Path, tree: &str) {
    std::fs::create_dir_all(mnt.join(tree)).unwrap();
    for i in 0..FILES {
        std::fs::write(mnt.join(tree).join(format!("f{i}")), contents(tree, i)).unwrap();
    }
}

/// Read a file past the kernel's page cache (dropped after each read), and compare.
fn read_uncached(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let mut data = Vec::new();
    f.read_to_end(&mut data)?;
    nix::fcntl::posix_fadvise(
        &f,
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )?;
    Ok(data)
}

fn verify_tree(mnt: &Path, tree: &str) -> Result<(), String> {
    for i in 0..FILES {
        let path = mnt.join(tree).join(format!("f{i}"));
        let data = read_uncached(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if data != contents(tree, i) {
            return Err(format!("{}: wrong bytes", path.display()));
        }
    }
    Ok(())
}

/// Block files of the volume in a local store's directory.
fn blocks_in(store_dir: &Path) -> usize {
    let out = std::process::Command::new("find")
        .arg(store_dir)
        .args(["-type", "f", "-path", "*/chunks/*"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

struct Setup {
    vol: Volume,
    cold: PathBuf,
    proxy: FaultProxy,
    _s3: S3sFs,
    rt: tokio::runtime::Runtime,
}

fn three_stores() -> Setup {
    let vol = Volume::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let s3 = S3sFs::start();
    let endpoint = s3.config().endpoint;
    let target = endpoint.trim_start_matches("http://").to_string();
    let proxy = rt.block_on(FaultProxy::start("s3", &target)).unwrap();
    let cold = vol.dir.path().join("cold");
    strata_ok(&[
        "config",
        &vol.meta_url,
        "--add-store",
        "cold",
        "--store-bucket",
        cold.to_str().unwrap(),
    ]);
    let bucket = format!("http://{}/{}", proxy.addr(), s3.config().bucket);
    strata_ok(&[
        "config",
        &vol.meta_url,
        "--add-store",
        "backup",
        "--store-storage",
        "s3",
        "--store-bucket",
        &bucket,
        "--store-access-key",
        TEST_ACCESS_KEY,
        "--store-secret-key",
        TEST_SECRET_KEY,
        "--store-class",
        "REDUCED_REDUNDANCY",
    ]);
    let listed = strata_ok(&["tier", "list", &vol.meta_url]);
    assert!(
        listed.contains("1 cold") && listed.contains("2 backup"),
        "{listed}"
    );
    Setup {
        vol,
        cold,
        proxy,
        _s3: s3,
        rt,
    }
}

#[test]
fn a_tree_moves_cold_under_readers_and_copies_survive_a_stopped_store() {
    let s = three_stores();
    let hot = s.vol.dir.path().join("bucket");
    let writer = s.vol.mount_with("w", &["--cache-size", "0"]);
    write_tree(&writer.path, "data");
    let hot_before = blocks_in(&hot);
    assert!(hot_before >= FILES, "{hot_before} blocks written hot");
    assert_eq!(blocks_in(&s.cold), 0);

    // Readers on a second mount read the tree over and over while the mover moves it.
    let reader = s.vol.mount_with("r", &["--cache-size", "0"]);
    let stop = Arc::new(AtomicBool::new(false));
    let passes = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, passes, mnt) = (stop.clone(), passes.clone(), reader.path.clone());
            std::thread::spawn(move || -> Result<(), String> {
                while !stop.load(Ordering::Relaxed) {
                    verify_tree(&mnt, "data")?;
                    passes.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    strata_ok(&["tier", "set", &s.vol.meta_url, "/data", "--store", "cold"]);
    let before_move = passes.load(Ordering::Relaxed);
    let moved = strata_ok(&["tier", "move", &s.vol.meta_url, "--window", "0s"]);
    assert!(moved.contains(&format!("moved {FILES}")), "{moved}");
    // Readers keep reading after the hot copies are gone, then stop.
    let after_move = passes.load(Ordering::Relaxed);
    assert!(eventually(Duration::from_secs(120), || {
        passes.load(Ordering::Relaxed) >= after_move + 4
    }));
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap().unwrap();
    }
    assert!(passes.load(Ordering::Relaxed) > before_move);
    assert_eq!(
        blocks_in(&hot),
        0,
        "the hot store holds nothing of the moved tree"
    );
    assert_eq!(blocks_in(&s.cold), hot_before);
    let status = strata_ok(&["tier", "status", &s.vol.meta_url, "/data"]);
    assert!(status.contains("default      0 slices"), "{status}");
    assert!(
        status.contains(&format!("cold         {FILES} slices")),
        "{status}"
    );

    // A tree placed in the S3 store with a copy at home: written, moved, then read and
    // written to while the S3 store is stopped.
    write_tree(&writer.path, "crit");
    strata_ok(&[
        "tier",
        "set",
        &s.vol.meta_url,
        "/crit",
        "--store",
        "backup",
        "--copies",
        "default",
    ]);
    strata_ok(&["tier", "move", &s.vol.meta_url, "--window", "0s"]);
    let status = strata_ok(&["tier", "status", &s.vol.meta_url, "/crit"]);
    assert!(
        status.contains(&format!("backup       {FILES} slices")),
        "{status}"
    );
    assert!(
        status.contains(&format!("default      {FILES} slices")),
        "{status}"
    );
    // Slowed: reads go to the S3 store first and still verify.
    s.proxy.set(Fault::Delay(Duration::from_millis(2)));
    let slowed = s.vol.mount_with("slowed", &["--cache-size", "0"]);
    verify_tree(&slowed.path, "crit").unwrap();
    drop(slowed);
    // Stopped: every file reads from the copy, the store is counted down.
    s.proxy.set(Fault::Refuse);
    let fresh = s.vol.mount_with("stopped", &["--cache-size", "0"]);
    verify_tree(&fresh.path, "crit").unwrap();
    let (code, metrics) = curl(&[&metrics_url(&fresh.log())]);
    assert_eq!(code, 200);
    assert!(
        metrics.contains("strata_store_down{store=\"backup\"} 1"),
        "{metrics}"
    );
    let fallbacks = metrics
        .lines()
        .find_map(|l| l.strip_prefix("strata_store_fallback_reads "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(fallbacks.is_some_and(|n| n > 0), "{metrics}");
    std::fs::write(fresh.path.join("crit/new"), b"written while backup is down").unwrap();
    drop(fresh);
    let again = s.vol.mount_with("again", &["--cache-size", "0"]);
    assert_eq!(
        std::fs::read(again.path.join("crit/new")).unwrap(),
        b"written while backup is down"
    );
    verify_tree(&again.path, "data").unwrap();
    s.proxy.set(Fault::Pass);
    s.rt.block_on(async { tokio::task::yield_now().await });

    // The mover puts the new file's copy where its policy says; then fsck and gc agree.
    strata_ok(&["tier", "move", &s.vol.meta_url, "--window", "0s"]);
    let fsck = strata_ok(&["fsck", &s.vol.meta_url]);
    assert!(fsck.contains("0 missing, 0 stray copies"), "{fsck}");
    assert!(fsck.contains("volume is clean"), "{fsck}");
    let gc = strata_ok(&["gc", &s.vol.meta_url]);
    assert!(gc.contains("leaked: 0 objects"), "{gc}");
}
