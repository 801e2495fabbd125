//! Several processes on one SQLite database: two `strata-mdtest` processes create files in
//! one shared directory at the same time; afterwards every file is there exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed step fails the test

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;

use strata_meta::kv::sqlite::SqliteEngine;
use strata_meta::{Ctx, Meta, MetaOptions};
use strata_types::Ino;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_create_in_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("meta.db");
    let spawn = |prefix: &str| {
        Command::new(env!("CARGO_BIN_EXE_strata-mdtest"))
            .args([
                "--db",
                db.to_str().unwrap(),
                "--files",
                "400",
                "--clients",
                "2",
            ])
            .args(["--dir", "shared", "--prefix", prefix, "--phases", "create"])
            .spawn()
            .unwrap()
    };
    // The first process formats the volume; start the second once that is done so both
    // don't race to format (formatting twice with different uuids is refused by design).
    let mut first = spawn("pa");
    let meta = Meta::new(
        Arc::new(SqliteEngine::open(&db).unwrap()),
        MetaOptions::default(),
    );
    let mut tries = 0;
    while meta.load().await.is_err() {
        tries += 1;
        assert!(tries < 500, "first process never formatted the volume");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await; // poll interval: until the other process formatted
    }
    let mut second = spawn("pb");
    assert!(first.wait().unwrap().success());
    assert!(second.wait().unwrap().success());

    let shared = meta
        .lookup(&Ctx::root(), Ino::ROOT, b"shared")
        .await
        .unwrap()
        .ino;
    let entries = meta.readdir(shared, None, usize::MAX, true).await.unwrap();
    let names: BTreeSet<Vec<u8>> = entries.iter().map(|e| e.name.clone()).collect();
    assert_eq!(entries.len(), 800, "no entry lost or duplicated");
    assert_eq!(names.len(), 800);
    for prefix in ["pa", "pb"] {
        for i in 0..400 {
            assert!(
                names.contains(format!("{prefix}-{i:08}").as_bytes()),
                "{prefix} {i} missing"
            );
        }
    }
    let inos: BTreeSet<Ino> = entries.iter().map(|e| e.ino).collect();
    assert_eq!(inos.len(), 800, "inode numbers are unique across processes");
    assert_eq!(meta.dir_usage(shared).await.unwrap().1, 800);
}
