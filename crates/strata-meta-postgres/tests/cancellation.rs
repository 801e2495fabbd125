//! A commit cancelled half way (its future dropped between `BEGIN` and `COMMIT`, as a
//! timed-out or aborted operation drops it) must not leave its connection in the pool in
//! the middle of the transaction: the next commit on it would run inside the abandoned
//! transaction and commit its writes too. The server is `STRATA_TEST_POSTGRES`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use strata_meta::kv::{CommitRequest, KvEngine, Write};
use strata_meta_postgres::{PostgresEngine, PostgresUrl};

fn server() -> String {
    std::env::var("STRATA_TEST_POSTGRES")
        .expect("STRATA_TEST_POSTGRES must name a PostgreSQL database (scripts/test.sh starts one)")
}

/// Connections of application `app` that sit inside a transaction.
async fn idle_in_transaction(checker: &tokio_postgres::Client, app: &str) -> i64 {
    checker
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 \
             AND state LIKE 'idle in transaction%'",
            &[&app],
        )
        .await
        .unwrap()
        .get(0)
}

/// A future that gives up (is dropped) at its `polls`-th poll: after `polls - 1` waits
/// for the server, wherever in the commit they fall.
struct CutAfter<F> {
    inner: Pin<Box<F>>,
    polls: usize,
}

impl<F: Future> Future for CutAfter<F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.polls == 0 {
            return Poll::Ready(None);
        }
        self.polls -= 1;
        self.inner.as_mut().poll(cx).map(Some)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_commit_never_leaves_its_transaction_open_in_the_pool() {
    let app = format!("strata_cancel_{}", uuid::Uuid::new_v4().simple());
    let base = server();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}application_name={app}&prefix=c{}", &app[14..26]);
    let engine = PostgresEngine::connect(&PostgresUrl::parse(&url).unwrap())
        .await
        .unwrap();
    let (checker, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let (mut cancelled, mut completed) = (0, 0);
    for i in 0..300u64 {
        let request = CommitRequest {
            seq: 0,
            reads: Vec::new(),
            writes: vec![(format!("k{i}").into_bytes(), Write::Put(vec![1; 64]))],
        };
        // Every other commit runs to the end (and leaves a warm connection in the pool); the
        // others are dropped after 1 to 8 waits for the server: before, inside and after
        // the transaction.
        let polls = if i % 2 == 0 {
            usize::MAX
        } else {
            1 + (i as usize / 2) % 8
        };
        let cut = CutAfter {
            inner: Box::pin(engine.commit(request)),
            polls,
        };
        match cut.await {
            Some(outcome) => {
                outcome.unwrap();
                completed += 1;
            }
            None => cancelled += 1,
        }
        // Whatever was cut off is closed by the pool, not kept: wait until the server saw
        // the connection go (never more than a few ms), else it is still pooled.
        let deadline = Instant::now() + Duration::from_secs(10);
        while idle_in_transaction(&checker, &app).await > 0 {
            assert!(
                Instant::now() < deadline,
                "after commit {i} a connection stayed in the pool inside its transaction"
            );
            tokio::task::yield_now().await;
        }
    }
    assert!(
        cancelled > 10 && completed > 10,
        "{cancelled} cancelled, {completed} completed"
    );
    // The pool still works.
    engine
        .commit(CommitRequest {
            seq: 0,
            reads: Vec::new(),
            writes: vec![(b"after".to_vec(), Write::Put(vec![2]))],
        })
        .await
        .unwrap();
}
