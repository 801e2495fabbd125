//! End-to-end tests of the operability commands on a real mount: `strata stats` shows the
//! traffic going through the mount while it runs; `strata profile` counts the operations
//! of the live access log, and replays a saved one exactly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::io::Write;
use std::process::{Child, Command, Stdio};

use common::*;

/// Append 1 MiB to `f` and fsync it, until `child` has exited; its stdout.
fn write_until_exit(dir: &std::path::Path, mut child: Child) -> String {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("traffic"))
        .unwrap();
    let chunk = vec![7u8; 1 << 20];
    let mut round = 0u32;
    while child.try_wait().unwrap().is_none() {
        file.write_all(&chunk).unwrap();
        file.sync_all().unwrap();
        std::fs::create_dir(dir.join(format!("d{round}"))).unwrap();
        round += 1;
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn strata_piped(args: &[&str]) -> Child {
    Command::new(STRATA)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn stats_shows_the_traffic_of_the_mount_row_by_row() {
    let vol = Volume::new();
    let mnt = vol.mount("m");
    let path = mnt.path.to_str().unwrap();
    let child = strata_piped(&["stats", path, "--interval", "300ms", "--count", "4"]);
    let text = write_until_exit(&mnt.path, child);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "two header lines and four rows:\n{text}");
    assert!(lines[0].contains("usage") && lines[0].contains("fuse") && lines[0].contains("object"));
    let tokens = |l: &str| -> Vec<String> {
        l.split(|c: char| c.is_whitespace() || c == '|')
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    let header = tokens(lines[1]);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (write, put, cpu) = (col("write"), col("put"), col("cpu"));
    let rows: Vec<Vec<String>> = lines[2..].iter().map(|l| tokens(l)).collect();
    for row in &rows {
        assert_eq!(row.len(), header.len(), "{text}");
        assert!(row[cpu].ends_with('%'), "{text}");
    }
    let busy = |c: usize| rows.iter().any(|r| r[c] != "0" && r[c] != "-");
    assert!(busy(write), "no FUSE write throughput shown:\n{text}");
    assert!(busy(put), "no object PUTs shown:\n{text}");

    let out = Command::new(STRATA)
        .args(["stats", vol.dir.path().to_str().unwrap(), "--count", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a Strata mount"), "{err}");
}

#[test]
fn profile_counts_live_operations_and_replays_a_saved_log_exactly() {
    let vol = Volume::new();
    let mnt = vol.mount("m");
    let path = mnt.path.to_str().unwrap();
    let child = strata_piped(&["profile", path, "--interval", "1s", "--count", "1"]);
    let text = write_until_exit(&mnt.path, child);
    let count_of = |text: &str, key: &str| -> u64 {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    };
    assert!(count_of(&text, "mkdir") > 0, "{text}");
    assert!(count_of(&text, "write") > 0, "{text}");
    assert!(count_of(&text, "fsync") > 0, "{text}");
    // The test runs as root: every operation is uid 0's.
    let ops: u64 = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap();
    assert_eq!(count_of(&text, "0"), ops, "{text}");

    let saved = vol.dir.path().join("access.log");
    std::fs::write(
        &saved,
        "2026.12.02 10:00:00.000001 [uid:1000,gid:1000,pid:11] read <0.002000>\n\
         2026.12.02 10:00:00.000002 [uid:1000,gid:1000,pid:11] read <0.004000>\n\
         #\n\
         2026.12.02 10:00:00.000003 [uid:0,gid:0,pid:12] lookup <0.001000>\n",
    )
    .unwrap();
    let out = run(Command::new(STRATA).args(["profile", saved.to_str().unwrap()]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("3 operations"), "{text}");
    let row = |key: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("read"), ["read", "2", "0.006", "3.000"]);
    assert_eq!(row("1000"), ["1000", "2", "0.006", "3.000"]);
    assert_eq!(row("12"), ["12", "1", "0.001", "1.000"]);
    let out = run(Command::new(STRATA).args(["profile", saved.to_str().unwrap(), "--uid", "0"]));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("1 operations"));
}

#[test]
fn bench_runs_the_standard_workload_and_cleans_up() {
    let vol = Volume::new();
    let mnt = vol.mount("m");
    let out = run(Command::new(STRATA)
        .arg("bench")
        .arg(&mnt.path)
        .args(["--big-file-size", "8M", "--block-size", "256K"])
        .args([
            "--small-file-size",
            "64K",
            "--small-file-count",
            "10",
            "-p",
            "2",
        ])
        .arg("--skip-drop-caches"));
    let text = String::from_utf8(out.stdout).unwrap();
    for (item, unit) in [
        ("Write big file", "MiB/s"),
        ("Read big file", "MiB/s"),
        ("Write small file", "files/s"),
        ("Read small file", "files/s"),
        ("Stat file", "files/s"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(item))
            .unwrap_or_else(|| panic!("no {item} row:\n{text}"));
        let value: f64 = line
            .split('|')
            .nth(2)
            .unwrap()
            .trim()
            .trim_end_matches(unit)
            .trim()
            .parse()
            .unwrap();
        assert!(value > 0.0, "{line}");
    }
    let left: Vec<_> = std::fs::read_dir(&mnt.path).unwrap().collect();
    assert!(left.is_empty(), "the benchmark left files behind: {left:?}");

    let out = Command::new(STRATA).arg("bench").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("which directory?"));
}
