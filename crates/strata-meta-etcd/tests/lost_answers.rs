//! A commit whose answer is lost is resolved, not blindly retried: through a proxy that
//! forwards a commit to etcd but drops the connection before the answer comes back, the
//! engine reports the commit as applied when it was (a retry would have turned a create
//! into EEXIST) and as failed-but-retryable when it was not.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use strata_meta::kv::{CommitRequest, KvEngine, KvError, ReadCheck, Write};
use strata_meta_etcd::{EtcdEngine, EtcdUrl};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to answers.
struct Gate {
    /// Drop what the server sends instead of passing it on.
    swallow: AtomicBool,
    /// Bytes dropped so far.
    swallowed: AtomicU64,
    /// Bumped to close every connection (a connection busy writing sees it next turn).
    kill: watch::Sender<u64>,
}

/// Forwards loopback connections to `target` through `gate`; returns its address.
async fn proxy(target: String, gate: Arc<Gate>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let (client, _) = listener.accept().await.unwrap();
            let server = TcpStream::connect(&target).await.unwrap();
            tokio::spawn(pipe(client, server, gate.clone()));
        }
    });
    addr
}

async fn pipe(mut client: TcpStream, mut server: TcpStream, gate: Arc<Gate>) {
    let (mut up, mut down) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    let mut kill = gate.kill.subscribe();
    loop {
        tokio::select! {
            read = client.read(&mut up) => match read {
                Ok(n) if n > 0 => {
                    if server.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            read = server.read(&mut down) => match read {
                Ok(n) if n > 0 => {
                    if gate.swallow.load(Ordering::SeqCst) {
                        gate.swallowed.fetch_add(n as u64, Ordering::SeqCst);
                    } else if client.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            _ = kill.changed() => return,
        }
    }
}

/// Wait for `condition`, polling, for at most 20 s.
async fn wait_for(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !condition().await {
        assert!(started.elapsed() < Duration::from_secs(20), "{what}");
        tokio::task::yield_now().await;
    }
}

/// Run `req` on `engine` while the proxy drops answers; once the server has answered
/// (and `visible` holds, checked on a direct connection), cut the connection.
async fn commit_with_lost_answer(
    engine: Arc<EtcdEngine>,
    direct: &EtcdEngine,
    gate: &Gate,
    req: CommitRequest,
    visible: Option<(&[u8], &[u8])>,
) -> Result<(), KvError> {
    gate.swallowed.store(0, Ordering::SeqCst);
    gate.swallow.store(true, Ordering::SeqCst);
    let commit = tokio::spawn(async move { engine.commit(req).await });
    wait_for("the server answers", async || {
        gate.swallowed.load(Ordering::SeqCst) > 0
    })
    .await;
    if let Some((key, value)) = visible {
        wait_for("the commit is applied", async || {
            let mut snap = direct.snapshot().await.unwrap();
            snap.get(key).await.unwrap().as_deref() == Some(value)
        })
        .await;
    }
    gate.kill.send_modify(|n| *n += 1);
    gate.swallow.store(false, Ordering::SeqCst);
    commit.await.unwrap()
}

fn first_member() -> String {
    let members = std::env::var("STRATA_TEST_ETCD")
        .expect("STRATA_TEST_ETCD must name etcd members (scripts/test.sh starts a cluster)");
    members.split(',').next().unwrap().to_string()
}

fn create(key: &[u8], value: &[u8]) -> CommitRequest {
    CommitRequest {
        seq: 0,
        reads: vec![ReadCheck::Point {
            key: key.to_vec(),
            value: None,
        }],
        writes: vec![(key.to_vec(), Write::Put(value.to_vec()))],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_is_lost_is_resolved_not_retried() {
    let gate = Arc::new(Gate {
        swallow: AtomicBool::new(false),
        swallowed: AtomicU64::new(0),
        kill: watch::Sender::new(0),
    });
    let member = first_member();
    let addr = proxy(member.clone(), gate.clone()).await;
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let url = EtcdUrl::parse(&format!("etcd://{addr}/{prefix}")).unwrap();
    let engine = Arc::new(EtcdEngine::connect(&url).await.unwrap());
    let direct =
        EtcdEngine::connect(&EtcdUrl::parse(&format!("etcd://{member}/{prefix}")).unwrap())
            .await
            .unwrap();
    engine.commit(create(b"a", b"1")).await.unwrap();

    // Applied, answer lost: reported as applied (a blind retry would see "b" and conflict).
    let applied = commit_with_lost_answer(
        engine.clone(),
        &direct,
        &gate,
        create(b"b", b"2"),
        Some((b"b", b"2")),
    )
    .await;
    assert!(applied.is_ok(), "{applied:?}");

    // Not applied (its check fails: "a" exists), answer lost: not reported as applied
    // (a retryable error; a conflict when the cut came before the request went out).
    let err = commit_with_lost_answer(engine.clone(), &direct, &gate, create(b"a", b"3"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, KvError::Unavailable(_) | KvError::Conflict),
        "{err}"
    );
    let mut snap = direct.snapshot().await.unwrap();
    assert_eq!(snap.get(b"a").await.unwrap(), Some(b"1".to_vec()));
}
