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

/// `.config` of a mount, as JSON.
fn config_of(mnt: &Mount) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(mnt.path.join(".config")).unwrap()).unwrap()
}

#[test]
fn debug_collects_one_archive_without_secrets() {
    let vol = Volume::new();
    let path = vol.dir.path().join("m");
    std::fs::create_dir_all(&path).unwrap();
    let log = vol.dir.path().join("m.log");
    run(Command::new(STRATA)
        .args(["mount", &vol.meta_url])
        .arg(&path)
        .args(["-d", "--log"])
        .arg(&log)
        .env("META_PASSWORD", "pw-never-in-archive-1")
        .env("AWS_SECRET_ACCESS_KEY", "key-never-in-archive-2")
        .env("STRATA_TEST_PLAIN", "plain-value-3"));
    let mnt = Mount { path, log };
    sh(&mnt.path, "echo hello > f");
    let out_dir = vol.dir.path().join("reports");
    std::fs::create_dir(&out_dir).unwrap();
    let out = run(Command::new(STRATA)
        .arg("debug")
        .arg(&mnt.path)
        .arg("--out-dir")
        .arg(&out_dir)
        .args(["--stats-interval", "100ms"]));
    let archive = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&archive).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", archive.display());
    let unpacked = vol.dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    run(Command::new("tar")
        .arg("xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked));
    let dir = std::fs::read_dir(&unpacked)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&read("config.json")).unwrap()["pid"],
        config_of(&mnt)["pid"]
    );
    assert!(read("stats-2.txt").contains("strata_fuse_op_duration_seconds"));
    assert!(
        read("log.txt").contains("mounted volume"),
        "{}",
        read("log.txt")
    );
    let threads = read("threads.txt");
    assert!(threads.contains("fuser"), "{threads}");
    assert!(
        threads.contains("Thread 1"),
        "no gdb backtraces:\n{threads}"
    );
    assert!(read("environment.txt").contains("STRATA_TEST_PLAIN=plain-value-3"));
    assert!(read("environment.txt").contains("AWS_SECRET_ACCESS_KEY=****"));
    assert!(read("host.txt").contains("MemTotal"));
    assert!(read("mount.txt").contains("fuse"));
    // No secret anywhere, in the archive's files or in the compressed archive itself.
    let leaked = Command::new("grep")
        .args([
            "-r",
            "-l",
            "-e",
            "pw-never-in-archive",
            "-e",
            "key-never-in-archive",
        ])
        .arg(&unpacked)
        .output()
        .unwrap();
    assert!(
        leaked.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&leaked.stdout)
    );
    assert_eq!(
        leaked.status.code(),
        Some(1),
        "grep found something or failed"
    );
}

#[test]
fn status_shows_one_session_with_what_it_holds() {
    let vol = Volume::new();
    let mnt = vol.mount("m");
    let sid = config_of(&mnt)["sid"].as_u64().unwrap();
    use std::os::unix::fs::MetadataExt;
    let kept = std::fs::File::create(mnt.path.join("kept")).unwrap();
    let kept_ino = kept.metadata().unwrap().ino();
    std::fs::remove_file(mnt.path.join("kept")).unwrap();
    let locked = std::fs::File::create(mnt.path.join("locked")).unwrap();
    let locked_ino = locked.metadata().unwrap().ino();
    let _lock = nix::fcntl::Flock::lock(locked, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .unwrap();
    let out =
        run(Command::new(STRATA).args(["status", &vol.meta_url, "--session", &sid.to_string()]));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["sid"], sid);
    assert_eq!(shown["mount_point"], mnt.path.to_str().unwrap());
    assert_eq!(shown["sustained_inodes"], serde_json::json!([kept_ino]));
    assert_eq!(shown["locked_inodes"], serde_json::json!([locked_ino]));
    drop(kept);
    let out = Command::new(STRATA)
        .args(["status", &vol.meta_url, "--session", "99999"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session 99999"));
}

#[test]
fn verbose_and_quiet_change_what_a_mount_logs() {
    let vol = Volume::new();
    let loud = vol.mount_with("loud", &["-v"]);
    let quiet = vol.mount_with("quiet", &["--quiet"]);
    sh(&loud.path, "ls");
    sh(&quiet.path, "ls");
    assert!(loud.log().contains("DEBUG"), "{}", loud.log());
    assert!(loud.log().contains("mount arguments"), "{}", loud.log());
    assert!(!quiet.log().contains("INFO"), "{}", quiet.log());
    assert!(!quiet.log().contains("mounted volume"), "{}", quiet.log());
}
