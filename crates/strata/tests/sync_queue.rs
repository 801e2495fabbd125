//! `strata sync --queue` end to end: a manager and three workers share one job through a
//! Redis queue (started by scripts/test.sh), one worker is killed with SIGKILL in the
//! middle, and the copy still ends exactly once — counted by the PUTs that reached the
//! destination, an S3 gateway whose volume's metering wrapper counts every block put.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, STRATA, Volume, count, metrics_url, network_meta_url, sh, tree};

const KEY: &str = "queue-key";
const SECRET: &str = "queue-secret-123";
const FILES: u64 = 2000;

/// `strata sync ARGS` in the background, its stderr in `log`.
fn spawn_sync(args: &[&str], log: &Path) -> Child {
    Command::new(STRATA)
        .arg("sync")
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// A sample of the gateway's metrics (0 when absent).
fn metric(gw: &Daemon, line_start: &str) -> u64 {
    let url = metrics_url(&gw.log_text());
    let out = Command::new("curl").args(["-sS", &url]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

fn block_puts(gw: &Daemon) -> u64 {
    metric(gw, "strata_object_requests{op=\"put\",result=\"ok\"}")
}

fn put_objects(gw: &Daemon) -> u64 {
    metric(
        gw,
        "strata_s3_request_duration_seconds_count{op=\"PutObject\"}",
    )
}

#[test]
fn three_workers_on_a_redis_queue_one_killed_copy_everything_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "for d in $(seq 1 20); do mkdir d$d; for f in $(seq 1 100); do \
         head -c 4096 /dev/urandom > d$d/f$f; done; done",
    );
    let vol = Volume::new();
    let gw = Daemon::start_until(
        &vol,
        "gw",
        &[
            "gateway",
            &vol.meta_url,
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ],
        &[("STRATA_ACCESS_KEY", KEY), ("STRATA_SECRET_KEY", SECRET)],
        "metrics at ",
    );
    let host = gw.url.trim_start_matches("http://").trim_end_matches('/');
    let dst = format!("minio://{KEY}:{SECRET}@{host}/e2e-vol/copy");
    let queue = network_meta_url("redis", "syncq");
    let log = |name: &str| tmp.path().join(format!("{name}.log"));

    // Workers may start before there is a job: they wait for one.
    let worker = |n: usize| {
        spawn_sync(
            &["--worker", "--queue", &queue, "-p", "2", "--bwlimit", "2"],
            &log(&format!("worker{n}")),
        )
    };
    let mut workers: Vec<Child> = (0..3).map(worker).collect();
    let mut manager = spawn_sync(
        &[
            "--queue",
            &queue,
            "--lease",
            "2s",
            "-p",
            "2",
            "--bwlimit",
            "2",
            src.to_str().unwrap(),
            &dst,
        ],
        &log("manager"),
    );
    let started = Instant::now();
    while block_puts(&gw) < 300 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the job is stuck: {}",
            std::fs::read_to_string(log("manager")).unwrap_or_default()
        );
        assert!(
            manager.try_wait().unwrap().is_none(),
            "the manager ended early"
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval of a wait for the condition
    }
    workers[0].kill().unwrap();
    workers[0].wait().unwrap();

    let status = manager.wait().unwrap();
    let said = std::fs::read_to_string(log("manager")).unwrap();
    assert!(status.success(), "the manager failed:\n{said}");
    for (n, w) in workers.iter_mut().enumerate().skip(1) {
        let status = w.wait().unwrap();
        assert!(
            status.success(),
            "worker {n} failed:\n{}",
            std::fs::read_to_string(log(&format!("worker{n}"))).unwrap_or_default()
        );
    }
    let logs: String = ["manager", "worker1", "worker2"]
        .iter()
        .map(|n| std::fs::read_to_string(log(n)).unwrap_or_default())
        .collect();
    assert!(
        logs.contains("taken over"),
        "no task of the killed worker was taken over:\n{logs}"
    );
    let summary = said.lines().last().unwrap_or_default().to_string();
    eprintln!("manager: {summary}");
    assert_eq!(
        count(&summary, "copied") + count(&summary, "skipped"),
        FILES,
        "{summary}"
    );
    assert_eq!(count(&summary, "failed"), 0, "{summary}");
    // Exactly once: one PUT per file reached the gateway, one block put each.
    assert_eq!(put_objects(&gw), FILES, "PutObject requests");
    assert_eq!(block_puts(&gw), FILES, "block puts by the metering wrapper");

    // And what arrived is the source, byte for byte.
    let back = tmp.path().join("back");
    let out = Command::new(STRATA)
        .args(["sync", &dst])
        .arg(&back)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tree(&src), tree(&back));

    // A second job on the same queue replaces the finished one and copies nothing.
    let again = Command::new(STRATA)
        .args(["sync", "--queue", &queue, src.to_str().unwrap(), &dst])
        .output()
        .unwrap();
    let again_said = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{again_said}");
    let last = again_said.lines().last().unwrap_or_default();
    assert_eq!(count(last, "copied"), 0, "{last}");
    assert_eq!(put_objects(&gw), FILES, "the second job put nothing");
}

#[test]
fn jobs_on_postgres_etcd_and_sqlite_queues_finish_with_a_worker_each() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "mkdir -p a/b && for f in $(seq 1 250); do echo $f > a/f$f; echo $f > a/b/g$f; done",
    );
    let sqlite = format!("sqlite3://{}", tmp.path().join("q.db").display());
    let queues = [
        network_meta_url("postgres", "syncq"),
        network_meta_url("etcd", "syncq"),
        sqlite,
    ];
    for (n, queue) in queues.iter().enumerate() {
        let dst = tmp.path().join(format!("dst{n}"));
        let log = tmp.path().join(format!("w{n}.log"));
        let worker = spawn_sync(&["-v", "--worker", "--queue", queue], &log);
        // The worker is looking before the job begins: one that first looks once the
        // manager alone has done the job may take it for an old one.
        wait_for_line(&log, "waiting for a sync job");
        let out = Command::new(STRATA)
            .args(["sync", "--queue", queue, "--perms"])
            .arg(&src)
            .arg(&dst)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{queue}: {said}");
        let summary = said.lines().last().unwrap_or_default();
        assert_eq!(count(summary, "copied"), 500, "{queue}: {summary}");
        assert!(said.contains("5 tasks done"), "{queue}: {said}");
        let status = wait_for(worker);
        assert!(status.success(), "{queue}: the worker failed");
        assert_eq!(tree(&src), tree(&dst), "{queue}");
    }
}

/// Wait until the file at `log` says `text` (at most a minute).
fn wait_for_line(log: &Path, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(text)
    {
        assert!(
            Instant::now() < deadline,
            "{} never said {text:?}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(50)); // poll interval of a wait for the condition
    }
}

/// Wait for `child` to end by itself.
fn wait_for(mut child: Child) -> std::process::ExitStatus {
    child.wait().unwrap()
}

#[test]
fn queue_flags_that_cannot_work_say_so_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let q = format!("sqlite3://{}", tmp.path().join("q.db").display());
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let cases: [(&[&str], &str); 4] = [
        (&["--worker", "--queue", &q, a, b], "leave them out"),
        (&["--queue", &q, "--dry", a, b], "without --dry"),
        (&["--worker"], "--queue"),
        (&["--queue", "nosuch://x", a, b], "nosuch"),
    ];
    for (args, expected) in cases {
        let out = Command::new(STRATA)
            .arg("sync")
            .args(args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(said.contains(expected), "{args:?}: {said}");
    }
}

/// A queued job keeps how SRC and DST were read: a worker that never saw the command line
/// copies a key prefix under DST's name.
#[test]
fn a_worker_copies_a_queued_prefix_as_the_manager_read_it() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "mkdir test && for f in $(seq 1 300); do head -c 4096 /dev/urandom > test/f$f; done \
         && echo x > text && echo z > zzz",
    );
    let queue = format!("sqlite3://{}", tmp.path().join("q.db").display());
    let worker_log = tmp.path().join("w.log");
    let worker = spawn_sync(&["-v", "--worker", "--queue", &queue], &worker_log);
    wait_for_line(&worker_log, "waiting for a sync job");
    // The manager's own copies crawl (1 Mbit/s), so the worker does most of them.
    let out = Command::new(STRATA)
        .args(["sync", "--queue", &queue, "--bwlimit", "1"])
        .arg(src.join("te"))
        .arg(tmp.path().join("dst/ab"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(count(said.lines().last().unwrap(), "copied"), 301, "{said}");
    assert!(wait_for(worker).success());
    let worked = std::fs::read_to_string(&worker_log).unwrap();
    let summary = worked.lines().last().unwrap_or_default();
    assert!(count(summary, "copied") > 0, "{worked}");
    let dst = tmp.path().join("dst");
    assert_eq!(tree(&src.join("test")), tree(&dst.join("abst")));
    assert!(dst.join("abxt").exists() && !dst.join("zzz").exists());
    assert!(!dst.join("ab").exists());
}
