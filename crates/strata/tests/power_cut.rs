//! A crash of the machine, not just of the process: the volume's SQLite database, local
//! bucket and cache (with writeback, its staging) sit on the test kit's crash file system,
//! which loses every byte not `fsync`ed when the power is cut. Writers on a mount record
//! what was acknowledged durable (a file after its `fsync`, a rename or unlink after an
//! `fsync` of its directory); the power is cut in the middle of their work; then the
//! volume must pass `fsck` without repair, mount, and show every acknowledged file with
//! its bytes, no acknowledged removal undone, and every file it lists readable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use rand::{Rng, SeedableRng};
use strata_testkit::crashfs::CrashFs;

const WRITERS: usize = 2;
/// Cuts per volume: each recovery is followed by more work and another cut (3, or
/// `STRATA_POWER_CUTS` for a long run: `benches/chaos.sh`).
fn cycles() -> usize {
    std::env::var("STRATA_POWER_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// The bytes of file `n` of writer `w` (sizes from empty to a few blocks).
fn contents(w: usize, n: usize) -> Vec<u8> {
    let seed = u64::try_from(w * 1_000_000 + n).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let len = match n % 4 {
        0 => rng.random_range(0..100),
        1 => rng.random_range(1000..70_000),
        2 => rng.random_range(300_000..1_200_000),
        _ => rng.random_range(4_100_000..5_000_000),
    };
    (0..len).map(|_| rng.random()).collect()
}

/// What one writer was told is durable: each name -> Some(file number) or None (removed).
/// `pending` names what the operation under way when the power went could have touched.
#[derive(Default)]
struct Acks {
    names: BTreeMap<String, Option<usize>>,
    pending: Vec<String>,
}

fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// One writer's loop in `dir` until `stop` or an error (the mount died).
fn writer(
    w: usize,
    dir: &Path,
    acks: &parking_lot::Mutex<Acks>,
    done: &AtomicUsize,
    stop: &AtomicBool,
) {
    let step = |n: usize| -> std::io::Result<()> {
        let (f, g) = (format!("f{n}"), format!("g{n}"));
        acks.lock().pending = vec![f.clone(), g.clone(), format!("u{n}")];
        let mut file = File::create(dir.join(&f))?;
        file.write_all(&contents(w, n))?;
        file.sync_all()?;
        drop(file);
        acks.lock().names.insert(f.clone(), Some(n));
        if n % 3 == 1 {
            fs::rename(dir.join(&f), dir.join(&g))?;
            fsync_dir(dir)?;
            let mut a = acks.lock();
            a.names.insert(f.clone(), None);
            a.names.insert(g.clone(), Some(n));
        }
        if n % 5 == 2 && n >= 5 {
            let old = if (n - 5) % 3 == 1 { "g" } else { "f" };
            let old = format!("{old}{}", n - 5);
            acks.lock().pending.push(old.clone());
            fs::remove_file(dir.join(&old))?;
            fsync_dir(dir)?;
            acks.lock().names.insert(old, None);
        }
        // Never synced: may be there or not, but must read without error if listed.
        fs::write(dir.join(format!("u{n}")), contents(w, n + 7))?;
        done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = step(n) {
            eprintln!("writer {w} stops at file {n}: {e}");
            break;
        }
        n += 1;
    }
}

struct Setup {
    root: tempfile::TempDir,
    backing: PathBuf,
    lazy: PathBuf,
    mnt: PathBuf,
    meta_url: String,
}

fn setup() -> Setup {
    let root = tempfile::tempdir().unwrap();
    let (backing, lazy, mnt) = (
        root.path().join("disk"),
        root.path().join("lazy"),
        root.path().join("mnt"),
    );
    for d in [&backing, &lazy, &mnt] {
        fs::create_dir_all(d).unwrap();
    }
    let meta_url = format!("sqlite3://{}", lazy.join("meta.db").display());
    Setup {
        root,
        backing,
        lazy,
        mnt,
        meta_url,
    }
}

fn mount(s: &Setup, extra: &[&str]) {
    let cache = s.lazy.join("cache");
    let log = s.root.path().join("mount.log");
    let mut args = vec!["mount", &s.meta_url, s.mnt.to_str().unwrap(), "-d"];
    args.extend([
        "--log",
        log.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
    ]);
    args.extend(extra);
    strata_ok(&args);
}

/// Writers work on the volume until each has `rounds` files acknowledged, then the power
/// goes out. Returns what was acknowledged.
fn work_then_cut(
    s: &Setup,
    crash: CrashFs,
    extra: &[&str],
    cycle: usize,
    rounds: usize,
) -> Vec<(PathBuf, Acks)> {
    mount(s, extra);
    let stop = Arc::new(AtomicBool::new(false));
    let acks: Vec<Arc<parking_lot::Mutex<Acks>>> = (0..WRITERS).map(|_| Arc::default()).collect();
    let done: Vec<Arc<AtomicUsize>> = (0..WRITERS).map(|_| Arc::default()).collect();
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let dir = s.mnt.join(format!("c{cycle}w{w}"));
            fs::create_dir_all(&dir).unwrap();
            let (acks, done, stop) = (acks[w].clone(), done[w].clone(), stop.clone());
            std::thread::spawn(move || writer(w, &dir, &acks, &done, &stop))
        })
        .collect();
    let started = Instant::now();
    while done.iter().any(|d| d.load(Ordering::Relaxed) < rounds) {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the writers stalled"
        );
        assert!(
            threads.iter().all(|t| !t.is_finished()),
            "a writer failed before the cut"
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval of a wait for the condition
    }
    // The power goes: the mount process dies with the machine, then the disk forgets.
    let pattern = format!("{} ", s.mnt.display());
    let _ = Command::new("pkill").args(["-9", "-f", &pattern]).status();
    let lost = crash.power_cut();
    eprintln!("power cut: {lost} unsynced bytes lost");
    let _ = Command::new("umount").arg("-l").arg(&s.mnt).status();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    acks.iter()
        .enumerate()
        .map(|(w, a)| {
            (
                PathBuf::from(format!("c{cycle}w{w}")),
                std::mem::take(&mut *a.lock()),
            )
        })
        .collect()
}

/// Everything acknowledged is there with its bytes; every listed file reads.
fn check_acknowledged(mnt: &Path, acks: &[(PathBuf, Acks)]) {
    for (w, (dir, a)) in acks.iter().enumerate() {
        let w = w % WRITERS;
        let dir = mnt.join(dir);
        for (name, expected) in &a.names {
            if a.pending.contains(name) {
                continue;
            }
            let path = dir.join(name);
            match expected {
                Some(n) => {
                    let got = fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
                    assert!(
                        got == contents(w, *n),
                        "{path:?}: wrong bytes ({} long)",
                        got.len()
                    );
                }
                None => assert!(!path.exists(), "{path:?} was removed, and is back"),
            }
        }
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            fs::read(&path).unwrap_or_else(|e| panic!("{path:?} is listed and unreadable: {e}"));
        }
    }
}

fn power_cut_round(extra: &[&str], rounds: usize) {
    let writeback = extra.contains(&"--writeback");
    let s = setup();
    let crash = CrashFs::mount(&s.backing, &s.lazy).unwrap();
    let bucket = s.lazy.join("bucket");
    strata_ok(&[
        "format",
        &s.meta_url,
        "cut-vol",
        "--trash-days",
        "0",
        "--bucket",
        bucket.to_str().unwrap(),
    ]);
    let mut acks = Vec::new();
    let mut crash = crash;
    for cycle in 0..cycles() {
        acks.extend(work_then_cut(&s, crash, extra, cycle, rounds));
        let total: usize = acks.iter().map(|(_, a)| a.names.len()).sum();
        eprintln!("cycle {cycle}: {total} names acknowledged durable so far");
        // The machine comes back: a fresh crash fs over what the disk kept.
        crash = CrashFs::mount(&s.backing, &s.lazy).unwrap();
        if !writeback {
            // (With writeback, blocks still staged show as missing until a mount over
            // the same cache uploads them: fsck says so, and runs after that below.)
            let out = strata_ok(&["fsck", &s.meta_url]);
            assert!(out.contains("volume is clean"), "fsck after the cut: {out}");
        }
        mount(&s, extra);
        check_acknowledged(&s.mnt, &acks);
        let _ = strata_ok(&["umount", s.mnt.to_str().unwrap()]);
        let out = strata_ok(&["fsck", &s.meta_url]);
        assert!(
            out.contains("volume is clean"),
            "fsck after the check: {out}"
        );
    }
    drop(crash);
}

#[test]
fn a_power_cut_keeps_every_acknowledged_file_and_name() {
    power_cut_round(&[], 20);
}

#[test]
fn a_power_cut_with_writeback_keeps_every_acknowledged_file_and_name() {
    power_cut_round(&["--writeback", "--upload-delay", "2s"], 20);
}
