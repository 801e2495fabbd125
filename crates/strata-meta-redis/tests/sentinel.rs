//! The Sentinel form of the Redis URL: the engine finds the master through a Sentinel and
//! follows a failover to the promoted replica; under a write load, a killed master costs
//! how many acknowledged commits (asynchronous replication), and none with `?replicas=1`.
//! Starts its own masters, replicas and Sentinels on free loopback ports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use strata_meta::kv::{CommitRequest, KvEngine, KvError, ReadCheck, Write};
use strata_meta_redis::{RedisEngine, RedisUrl};
use strata_testkit::servers::{Server, free_ports};

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--raw"])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(200)); // poll interval of a wait for the condition
    }
}

fn redis(dir: &Path, port: u16, extra: &[&str]) -> Server {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (scripts/test.sh installs it)");
    wait_for("redis up", Duration::from_secs(20), || {
        cli(port, &["ping"]) == "PONG"
    });
    Server(child)
}

/// A Sentinel on `port` watching the master on `master_port` as `strata-master`; it
/// declares the master down after 1 s and needs `quorum` Sentinels to agree.
fn sentinel(dir: &Path, port: u16, master_port: u16, quorum: u32) -> Server {
    let conf = dir.join(format!("sentinel{port}.conf"));
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\n\
             sentinel monitor strata-master 127.0.0.1 {master_port} {quorum}\n\
             sentinel down-after-milliseconds strata-master 1000\n\
             sentinel failover-timeout strata-master 4000\n",
            dir.display()
        ),
    )
    .unwrap();
    let server = Server(
        Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("sentinel up", Duration::from_secs(20), || {
        cli(port, &["ping"]) == "PONG"
    });
    server
}

fn put(key: &[u8], value: &[u8]) -> CommitRequest {
    CommitRequest {
        seq: 0,
        reads: Vec::new(),
        writes: vec![(key.to_vec(), Write::Put(value.to_vec()))],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_url_finds_the_master_and_follows_a_failover() {
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports(3);
    let (master_port, replica_port, sentinel_port) = (ports[0], ports[1], ports[2]);
    let master = redis(dir.path(), master_port, &[]);
    let replica_dir = dir.path().join("replica");
    std::fs::create_dir_all(&replica_dir).unwrap();
    let _replica = redis(
        &replica_dir,
        replica_port,
        &["--replicaof", "127.0.0.1", &master_port.to_string()],
    );
    let _sentinel = sentinel(dir.path(), sentinel_port, master_port, 1);

    let url = RedisUrl::parse(&format!(
        "redis://strata-master,127.0.0.1:{sentinel_port}/0?prefix=sen"
    ))
    .unwrap();
    let engine = RedisEngine::connect(&url).await.unwrap();
    engine.commit(put(b"k", b"before")).await.unwrap();
    let mut snap = engine.snapshot().await.unwrap();
    assert_eq!(
        snap.get(b"k").await.unwrap().as_deref(),
        Some(&b"before"[..])
    );
    wait_for("replicated", Duration::from_secs(20), || {
        cli(replica_port, &["get", "sen:kk"]) == "before"
    });

    drop(master); // the master dies; the Sentinel promotes the replica
    let started = Instant::now();
    loop {
        match engine.commit(put(b"k", b"after")).await {
            Ok(()) => break,
            Err(KvError::Unavailable(_)) if started.elapsed() < Duration::from_secs(40) => {
                tokio::time::sleep(Duration::from_millis(300)).await; // retry interval while the failover under test runs
            }
            Err(e) => panic!("commit after failover: {e}"),
        }
    }
    assert_eq!(
        cli(replica_port, &["get", "sen:kk"]),
        "after",
        "written to the new master"
    );
    let mut snap = engine.snapshot().await.unwrap();
    assert_eq!(
        snap.get(b"k").await.unwrap().as_deref(),
        Some(&b"after"[..])
    );
}

/// A master with two replicas and three Sentinels (quorum 2) watching it as `strata-master`.
struct Group {
    master: Option<Server>,
    _replicas: Vec<Server>,
    _sentinels: Vec<Server>,
    sentinel_ports: Vec<u16>,
    replica_ports: Vec<u16>,
    _dir: tempfile::TempDir,
}

fn group() -> Group {
    let dir = tempfile::tempdir().unwrap();
    // Master, two replicas, three Sentinels: distinct ports, taken together.
    let ports = free_ports(6);
    let master_port = ports[0];
    let master = redis(dir.path(), master_port, &[]);
    let mut replicas = Vec::new();
    let mut replica_ports = Vec::new();
    for i in 0..2 {
        let port = ports[1 + i];
        let sub = dir.path().join(format!("replica{i}"));
        std::fs::create_dir_all(&sub).unwrap();
        replicas.push(redis(
            &sub,
            port,
            &["--replicaof", "127.0.0.1", &master_port.to_string()],
        ));
        replica_ports.push(port);
    }
    let mut sentinels = Vec::new();
    let mut sentinel_ports = Vec::new();
    for i in 0..3 {
        let port = ports[3 + i];
        sentinels.push(sentinel(dir.path(), port, master_port, 2));
        sentinel_ports.push(port);
    }
    for &port in &replica_ports {
        wait_for("replica in sync", Duration::from_secs(20), || {
            cli(port, &["info", "replication"]).contains("master_link_status:up")
        });
    }
    Group {
        master: Some(master),
        _replicas: replicas,
        _sentinels: sentinels,
        sentinel_ports,
        replica_ports,
        _dir: dir,
    }
}

fn create(key: &[u8]) -> CommitRequest {
    CommitRequest {
        seq: 0,
        reads: vec![ReadCheck::Point {
            key: key.to_vec(),
            value: None,
        }],
        writes: vec![(key.to_vec(), Write::Put(b"x".to_vec()))],
    }
}

/// What a killed master cost one workload.
#[derive(Debug)]
struct Failover {
    acknowledged: usize,
    lost: usize,
    /// The longest pause between acknowledged commits after the kill.
    recovery: Duration,
    /// Commits that failed with an engine error (not acknowledged, outcome unknown).
    failed: usize,
}

/// Four writers create keys; the master is killed after 300 acknowledged creates, and
/// the writers go on until 300 more are acknowledged. Then every acknowledged key is
/// looked up on the new master.
async fn kill_the_master_under_load(replicas: u32) -> Failover {
    let mut group = group();
    let url = RedisUrl::parse(&format!(
        "redis://strata-master,127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/0?prefix=fo&replicas={replicas}",
        group.sentinel_ports[0], group.sentinel_ports[1], group.sentinel_ports[2]
    ))
    .unwrap();
    let engine: Arc<dyn KvEngine> = Arc::new(RedisEngine::connect(&url).await.unwrap());
    let acked = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (engine, acked, failed, stop) =
            (engine.clone(), acked.clone(), failed.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut done = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let key = format!("w{w}-{i}").into_bytes();
                match engine.commit(create(&key)).await {
                    Ok(()) => {
                        done.push((key, std::time::Instant::now()));
                        acked.fetch_add(1, Ordering::SeqCst);
                        i += 1;
                    }
                    // Unreachable while the Sentinels fail over: the same create again.
                    Err(KvError::Unavailable(_)) => {
                        tokio::time::sleep(Duration::from_millis(50)).await; // retry pause while the failover runs
                    }
                    // The key exists (a create applied whose answer was lost) or the
                    // replicas did not confirm it: not acknowledged; the next key.
                    Err(_) => {
                        failed.fetch_add(1, Ordering::SeqCst);
                        i += 1;
                    }
                }
            }
            done
        }));
    }
    let until = |n: usize| {
        let acked = acked.clone();
        async move {
            let started = std::time::Instant::now();
            while acked.load(Ordering::SeqCst) < n {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{n} acknowledged creates"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    until(300).await;
    let killed_at = std::time::Instant::now();
    drop(group.master.take()); // SIGKILL: the Sentinels promote a replica
    let before = acked.load(Ordering::SeqCst);
    until(before + 300).await;
    stop.store(true, Ordering::SeqCst);
    let mut done = Vec::new();
    for w in writers {
        done.extend(w.await.unwrap());
    }
    // The longest pause between acknowledgements once the master was killed (writers
    // in the middle of a commit may still be answered by the old master just after).
    let mut times: Vec<std::time::Instant> = done.iter().map(|(_, at)| *at).collect();
    times.sort();
    let recovery = times
        .windows(2)
        .filter(|w| w[1] > killed_at)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap();
    let promoted = group
        .replica_ports
        .iter()
        .any(|&p| cli(p, &["info", "replication"]).contains("role:master"));
    assert!(promoted, "a replica was promoted");
    let keys: Vec<Vec<u8>> = done.iter().map(|(k, _)| k.clone()).collect();
    let mut snap = engine.snapshot().await.unwrap();
    let values = snap.get_many(&keys).await.unwrap();
    Failover {
        acknowledged: keys.len(),
        lost: values.iter().filter(|v| v.is_none()).count(),
        recovery,
        failed: failed.load(Ordering::SeqCst),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_loses_nothing_acknowledged_with_replicas_1() {
    let asynchronous = kill_the_master_under_load(0).await;
    eprintln!("replicas=0: {asynchronous:?}");
    let waited = kill_the_master_under_load(1).await;
    eprintln!("replicas=1: {waited:?}");
    assert_eq!(
        waited.lost, 0,
        "replicas=1 lost acknowledged commits: {waited:?}"
    );
    for run in [&asynchronous, &waited] {
        assert!(run.acknowledged >= 600, "{run:?}");
        assert!(run.recovery < Duration::from_secs(30), "{run:?}");
        // Only commits in flight around the failover may fail (at most a few per writer).
        assert!(run.failed < 40, "{run:?}");
    }
}
