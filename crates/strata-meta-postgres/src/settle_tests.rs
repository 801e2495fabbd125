//! The fence against a "zombie": the transaction of a connection whose answer was lost,
//! still open on the server, or arriving after the client gave up on it. The server is
//! `STRATA_TEST_POSTGRES`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::time::{Duration, Instant};

use super::*;
use crate::PostgresUrl;
use crate::pool::Pooled;
use crate::stmt::Sql;

fn pool() -> Pool {
    let server = std::env::var("STRATA_TEST_POSTGRES").expect(
        "STRATA_TEST_POSTGRES must name a PostgreSQL database (scripts/test.sh starts one)",
    );
    let sep = if server.contains('?') { '&' } else { '?' };
    let prefix = format!("t{}", uuid::Uuid::new_v4().simple());
    let url = PostgresUrl::parse(&format!("{server}{sep}prefix={prefix}")).unwrap();
    let config: tokio_postgres::Config = url.conninfo.expose().parse().unwrap();
    Pool::new(config, url.table(), 4, false)
}

/// Begin a commit on `conn` (its `n`-th) that writes `key`, up to but not including
/// `COMMIT`; returns the marker it set.
async fn begin_zombie(conn: &mut Pooled, key: &[u8]) -> LostCommit {
    conn.commits += 1;
    let n = conn.commits;
    let (state, fence) = states(n).unwrap();
    conn.in_transaction = true;
    conn.client
        .batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        .await
        .unwrap();
    let value: &[u8] = b"zombie";
    conn.execute(Sql::Upsert, &[&vec![key], &vec![value]])
        .await
        .unwrap();
    conn.query_one(Sql::Mark, &[&&conn.marker[..], &state, &fence])
        .await
        .unwrap();
    LostCommit {
        marker: conn.marker,
        n,
        backend: conn.backend,
    }
}

async fn present(pool: &Pool, key: &[u8]) -> bool {
    let conn = pool.get().await.unwrap();
    conn.query_opt(Sql::Get, &[&key]).await.unwrap().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_zombie_is_ended_and_reported_not_applied() {
    let pool = pool();
    let mut zombie = pool.get().await.unwrap();
    let lost = begin_zombie(&mut zombie, b"k1").await;
    assert!(lost.backend.is_some(), "the backend's pid is known");
    let verdict = settle(&pool, lost, "lost".into(), &CancellationToken::new()).await;
    assert!(
        matches!(verdict, Err(KvError::Unavailable(_))),
        "{verdict:?}"
    );
    // The zombie's own COMMIT can no longer land.
    assert!(zombie.client.batch_execute("COMMIT").await.is_err());
    zombie.broken = true;
    assert!(!present(&pool, b"k1").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_that_commits_while_the_fence_waits_is_reported_applied() {
    let pool = pool();
    let mut zombie = pool.get().await.unwrap();
    let mut lost = begin_zombie(&mut zombie, b"k2").await;
    // As through a pooler: the backend cannot be ended, the fence must wait for it.
    lost.backend = None;
    let settling = {
        let pool = pool.clone();
        tokio::spawn(
            async move { settle(&pool, lost, "lost".into(), &CancellationToken::new()).await },
        )
    };
    // Commit once the fence is waiting on the marker's row.
    let watcher = pool.get().await.unwrap();
    let fence_sql = format!("%INSERT INTO {}%", markers_table(pool.table()));
    let started = Instant::now();
    loop {
        let waiting: i64 = watcher
            .client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND query LIKE $1",
                &[&fence_sql],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the fence never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    zombie.client.batch_execute("COMMIT").await.unwrap();
    zombie.in_transaction = false;
    let verdict = settling.await.unwrap();
    assert!(verdict.is_ok(), "{verdict:?}");
    assert!(present(&pool, b"k2").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_arriving_after_the_fence_is_aborted() {
    let pool = pool();
    let mut late = pool.get().await.unwrap();
    // The client gave up on commit 1 of this connection before the server saw any of it.
    let lost = LostCommit {
        marker: late.marker,
        n: 1,
        backend: None,
    };
    let verdict = settle(&pool, lost, "lost".into(), &CancellationToken::new()).await;
    assert!(
        matches!(verdict, Err(KvError::Unavailable(_))),
        "{verdict:?}"
    );
    // Now its messages arrive after all: the marker refuses, the transaction aborts.
    late.commits = 0;
    late.in_transaction = true;
    late.client
        .batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        .await
        .unwrap();
    let (state, fence) = states(1).unwrap();
    let value: &[u8] = b"late";
    late.execute(Sql::Upsert, &[&vec![&b"k3"[..]], &vec![value]])
        .await
        .unwrap();
    let marked = late
        .query_one(Sql::Mark, &[&&late.marker[..], &state, &fence])
        .await;
    let err = marked.unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::DIVISION_BY_ZERO)
    );
    late.client.batch_execute("COMMIT").await.unwrap(); // ends as a rollback
    late.in_transaction = false;
    assert!(!present(&pool, b"k3").await);
}

/// Found by the fault harness: a fence whose answer was lost is tried again, and the
/// second fence finds the marker already fenced. That must still say "not applied" (it
/// said "applied", and a rename that never happened was answered `Ok`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_tried_again_after_it_took_still_says_not_applied() {
    let pool = pool();
    let mut zombie = pool.get().await.unwrap();
    let lost = begin_zombie(&mut zombie, b"k4").await;
    let first = fence(&pool, lost).await.unwrap();
    assert!(first, "the first fence took: not applied");
    let again = fence(&pool, lost).await.unwrap();
    assert!(again, "a fence tried again still says: not applied");
    zombie.broken = true;
    assert!(!present(&pool, b"k4").await);
}
