//! The Sentinel form of the Redis URL: the engine finds the master through a Sentinel and
//! follows a failover to the promoted replica. Starts its own master, replica and Sentinel
//! on free loopback ports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_meta::kv::{CommitRequest, KvEngine, KvError, Write};
use strata_meta_redis::{RedisEngine, RedisUrl};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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
    let (master_port, replica_port, sentinel_port) = (free_port(), free_port(), free_port());
    let master = redis(dir.path(), master_port, &[]);
    let replica_dir = dir.path().join("replica");
    std::fs::create_dir_all(&replica_dir).unwrap();
    let _replica = redis(
        &replica_dir,
        replica_port,
        &["--replicaof", "127.0.0.1", &master_port.to_string()],
    );
    let conf = dir.path().join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {sentinel_port}\nbind 127.0.0.1\n\
             sentinel monitor strata-master 127.0.0.1 {master_port} 1\n\
             sentinel down-after-milliseconds strata-master 1000\n\
             sentinel failover-timeout strata-master 4000\n"
        ),
    )
    .unwrap();
    let _sentinel = Server(
        Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("sentinel up", Duration::from_secs(20), || {
        cli(sentinel_port, &["ping"]) == "PONG"
    });

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
