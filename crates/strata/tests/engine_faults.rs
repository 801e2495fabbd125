//! Engine faults against a live mount: the Redis server killed and restarted in the middle
//! of a write workload, and one member of a 3-member etcd cluster killed. The contract
//! (docs/SEMANTICS.md): operations retry and succeed, or fail with EIO after a bounded
//! time; the mount stays up and continues once the engine is back; nothing committed is
//! lost. Each test starts its own servers (private ports and directories), so killing
//! them cannot disturb other tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use strata_testkit::servers::{Server, free_port};

fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < limit, "server did not come up");
        std::thread::sleep(Duration::from_millis(100)); // poll interval of a wait for a condition
    }
}

/// Wait until the writer logged `n` acknowledged writes: the fault then lands mid-stream.
fn wait_for_writes(log: &Path, n: usize) {
    wait_until(Duration::from_secs(60), || {
        std::fs::read_to_string(log)
            .is_ok_and(|t| t.lines().filter(|l| l.starts_with("ok ")).count() >= n)
    });
}

fn start_redis(dir: &Path, port: u16) -> Server {
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args([
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (scripts/test.sh installs it)");
    wait_until(Duration::from_secs(20), || {
        Command::new("redis-cli")
            .args(["-p", &port.to_string(), "ping"])
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"PONG"))
    });
    Server(child)
}

/// A writer of numbered files (each fsynced) that logs "ok N SECONDS" or "err N ERRNO" per
/// file outside the mount, for `seconds`.
fn start_writer(mount: &Path, log: &Path, seconds: u32) -> Child {
    let script = format!(
        r#"
import os, sys, time
end = time.time() + {seconds}
i = 0
with open({log:?}, "w") as log:
    while time.time() < end:
        name = "w/f-%d" % i
        t0 = time.time()
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, (b"%d:" % i) * 2000)
            os.fsync(fd)
            os.close(fd)
            log.write("ok %d %.3f\n" % (i, time.time() - t0))
        except OSError as e:
            log.write("err %d %d\n" % (i, e.errno))
        log.flush()
        i += 1
"#,
        log = log.display().to_string()
    );
    std::fs::create_dir_all(mount.join("w")).unwrap();
    Command::new("python3")
        .arg("-c")
        .arg(script)
        .current_dir(mount)
        .spawn()
        .unwrap()
}

/// Every file the writer reported written is there with its bytes; returns the number
/// written, the failures and the slowest write in seconds.
fn check_written(mount: &Path, log: &Path) -> (usize, Vec<String>, f64) {
    let text = std::fs::read_to_string(log).unwrap();
    let (mut ok, mut errors, mut slowest) = (0, Vec::new(), 0f64);
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["ok", n, secs] => {
                slowest = slowest.max(secs.parse().unwrap());
                let want = format!("{n}:").repeat(2000);
                let got = std::fs::read_to_string(mount.join(format!("w/f-{n}"))).unwrap();
                assert!(got == want, "file {n} lost or changed");
                ok += 1;
            }
            ["err", n, errno] => errors.push(format!("{n}:{errno}")),
            _ => panic!("bad writer line {line:?}"),
        }
    }
    (ok, errors, slowest)
}

/// Files the writer logged after `index`, and whether all of them succeeded.
fn tail_ok(log: &Path, last: usize) -> bool {
    let text = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    lines.len() > last
        && lines[lines.len() - last..]
            .iter()
            .all(|l| l.starts_with("ok "))
}

#[test]
fn redis_restarted_mid_workload() {
    let dir = tempfile::tempdir().unwrap();
    let redis_dir = dir.path().join("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let port = free_port();
    let mut server = start_redis(&redis_dir, port);
    let vol = Volume::on_engine(&format!("redis://127.0.0.1:{port}/0"));
    let m = vol.mount("m");
    let log: PathBuf = dir.path().join("writer.log");
    let mut writer = start_writer(&m.path, &log, 9);
    wait_for_writes(&log, 20);
    // Kill the server outright, keep it down for two seconds, start it again on its data.
    drop(server);
    std::thread::sleep(Duration::from_secs(2)); // the thing under test: two seconds down
    server = start_redis(&redis_dir, port);
    let started = Instant::now();
    assert!(writer.wait().unwrap().success());
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "the writer finished in bounded time"
    );
    let (ok, errors, slowest) = check_written(&m.path, &log);
    assert!(ok > 20, "the workload made progress ({ok} files)");
    assert!(
        slowest > 1.0,
        "a write waited out the outage ({slowest} s at most)"
    );
    // Failures are allowed only as EIO (errno 5), and writes work again afterwards.
    assert!(errors.iter().all(|e| e.ends_with(":5")), "{errors:?}");
    assert!(
        tail_ok(&log, 5),
        "writes succeed after the restart: {}",
        m.log()
    );
    // The mount is alive and its files survive a remount.
    m.unmount();
    let again = vol.mount("m2");
    let (ok_again, _, _) = check_written(&again.path, &log);
    assert_eq!(ok_again, ok, "nothing committed was lost");
    drop(again);
    drop(server);
}

fn start_etcd_member(dir: &Path, n: usize, ports: &[(u16, u16)], cluster: &str) -> Server {
    let (client, peer) = ports[n];
    let child = Command::new("etcd")
        .arg("--name")
        .arg(format!("m{n}"))
        .arg("--data-dir")
        .arg(dir.join(format!("etcd{n}")))
        .arg("--listen-client-urls")
        .arg(format!("http://127.0.0.1:{client}"))
        .arg("--advertise-client-urls")
        .arg(format!("http://127.0.0.1:{client}"))
        .arg("--listen-peer-urls")
        .arg(format!("http://127.0.0.1:{peer}"))
        .arg("--initial-advertise-peer-urls")
        .arg(format!("http://127.0.0.1:{peer}"))
        .args([
            "--initial-cluster",
            cluster,
            "--initial-cluster-state",
            "new",
        ])
        .args(["--max-txn-ops", "10000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd (scripts/test.sh installs it)");
    Server(child)
}

#[test]
fn etcd_keeps_working_with_one_member_killed() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let cluster = ports
        .iter()
        .enumerate()
        .map(|(n, (_, peer))| format!("m{n}=http://127.0.0.1:{peer}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut members: Vec<Option<Server>> = (0..3)
        .map(|n| Some(start_etcd_member(dir.path(), n, &ports, &cluster)))
        .collect();
    let endpoints = ports
        .iter()
        .map(|(c, _)| format!("127.0.0.1:{c}"))
        .collect::<Vec<_>>()
        .join(",");
    wait_until(Duration::from_secs(30), || {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoints}"))
            .args(["endpoint", "health"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let vol = Volume::on_engine(&format!("etcd://{endpoints}/faults"));
    let m = vol.mount("m");
    let log = dir.path().join("writer.log");
    let mut writer = start_writer(&m.path, &log, 8);
    wait_for_writes(&log, 20);
    members[0] = None; // killed
    assert!(writer.wait().unwrap().success());
    let (ok, errors, _) = check_written(&m.path, &log);
    assert!(
        errors.is_empty(),
        "no failures with two of three members: {errors:?}"
    );
    assert!(ok > 20, "the workload made progress ({ok} files)");
    assert!(tail_ok(&log, 5), "{}", m.log());
    let out = sh(
        &m.path,
        "mkdir after && echo still-working > after/x && cat after/x",
    );
    assert_eq!(out, "still-working\n");
}

#[test]
fn a_mount_stopped_while_redis_is_down_exits_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let redis_dir = dir.path().join("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let port = free_port();
    let server = start_redis(&redis_dir, port);
    let vol = Volume::on_engine(&format!("redis://127.0.0.1:{port}/0"));
    let m = vol.mount("m");
    assert_eq!(sh(&m.path, "echo kept > f && cat f"), "kept\n");
    let pattern = format!("[m]ount {} {} ", vol.meta_url, m.path.display());
    let pid = sh(dir.path(), &format!("pgrep -f '{pattern}' | head -1"))
        .trim()
        .to_string();
    assert!(!pid.is_empty(), "the mount process");
    // The engine goes away, then the mount is asked to stop (as systemd would). With
    // nothing buffered, closing the session and stopping background work try the engine
    // once each instead of retrying it for 30 s apiece.
    drop(server);
    let started = Instant::now();
    sh(dir.path(), &format!("kill -TERM {pid}"));
    let gone = |pid: &str| !Path::new(&format!("/proc/{pid}")).exists();
    while !gone(&pid) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the mount still runs {:?} after SIGTERM: {}",
            started.elapsed(),
            m.log()
        );
        std::thread::sleep(Duration::from_millis(100)); // poll interval
    }
    assert!(!is_mounted(&m.path), "unmounted on the way out");
    assert!(m.log().contains("closing the session"), "{}", m.log());
    // Nothing committed was lost: with the engine back, another mount reads the file.
    let _server = start_redis(&redis_dir, port);
    let again = vol.mount("m2");
    assert_eq!(sh(&again.path, "cat f"), "kept\n");
}
