//! The MySQL / MariaDB metadata engine: Strata's `Kv` trait on one InnoDB table.
//!
//! Layout (docs/FORMAT.md, "MySQL engine"): one table per volume,
//! `strata_{prefix}(k VARBINARY(3072) PRIMARY KEY, v LONGBLOB)`; binary strings compare
//! bytewise, so the primary key gives ordered range scans. Several volumes share a
//! database by using different prefixes (`?prefix=NAME`, default `strata`).
//!
//! Reads run outside transactions, one statement each (one snapshot per statement; every
//! read is validated at commit). A commit re-reads the transaction's reads with locking
//! reads under REPEATABLE READ and, if they all still hold, applies the writes with its
//! commit marker, in at most two round trips (`commit.rs`). A commit whose answer is lost
//! is settled (applied or not) through that marker, never blindly retried (`settle.rs`).
//! Statements travel as text with hex literals (`sql.rs`); connections come from a small
//! pool (`pool.rs`). The engine has no change feed: MySQL has no notifications, so a
//! client reads what it has not written itself from the server.

mod commit;
mod frozen;
mod pool;
mod settle;
mod sql;
mod url;

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::Row;
use strata_meta::kv::{
    CommitRequest, FrozenView, Key, KvEngine, KvError, KvSnapshot, Link, LinkedScan, Value,
};
use tokio_util::sync::CancellationToken;

use crate::pool::Pool;
pub use crate::url::{Address, MysqlUrl};

/// How long connecting may take before the engine is unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one statement batch may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections per engine.
const POOL_SIZE: usize = 8;

/// A client of one volume's table in one MySQL database.
#[derive(Debug)]
pub struct MysqlEngine {
    pool: Pool,
    /// Cancelled when the client shuts down ([`KvEngine::begin_closing`]): settling a
    /// lost commit stops waiting for an unreachable server.
    closing: CancellationToken,
}

impl MysqlEngine {
    /// An engine that connects on first use (tests; the binary uses [`connect`]).
    ///
    /// [`connect`]: MysqlEngine::connect
    pub fn lazy(url: &MysqlUrl) -> MysqlEngine {
        MysqlEngine {
            pool: Pool::new(url, POOL_SIZE),
            closing: CancellationToken::new(),
        }
    }

    /// Connect now (creating the volume's tables if needed), in bounded time.
    pub async fn connect(url: &MysqlUrl) -> Result<MysqlEngine, KvError> {
        let engine = MysqlEngine::lazy(url);
        drop(engine.pool.get().await?);
        Ok(engine)
    }
}

/// The `(k, v)` rows of a result set.
pub(crate) fn pairs(rows: Vec<Row>) -> Result<Vec<(Key, Value)>, KvError> {
    rows.into_iter()
        .map(|mut r| Ok((bytes(&mut r, 0)?, bytes(&mut r, 1)?)))
        .collect()
}

/// Column `i` of `row` as bytes.
fn bytes(row: &mut Row, i: usize) -> Result<Vec<u8>, KvError> {
    match row.take_opt::<Vec<u8>, usize>(i) {
        Some(Ok(b)) => Ok(b),
        _ => Err(KvError::Engine(format!(
            "MySQL: column {i} of a row is missing or not bytes"
        ))),
    }
}

/// The one result set of a single statement.
fn only_set(mut sets: Vec<Vec<Row>>) -> Vec<Row> {
    sets.pop().unwrap_or_default()
}

/// A read view: each read borrows a pooled connection (not isolated).
struct MysqlSnapshot {
    pool: Pool,
}

impl MysqlSnapshot {
    async fn rows(&self, statement: &str) -> Result<Vec<Row>, KvError> {
        let mut conn = self.pool.get().await?;
        Ok(only_set(conn.run(statement).await?))
    }
}

#[async_trait]
impl KvSnapshot for MysqlSnapshot {
    async fn get(&mut self, key: &[u8]) -> Result<Option<Value>, KvError> {
        let rows = self.rows(&sql::get(self.pool.table(), key)).await?;
        rows.into_iter()
            .next()
            .map(|mut r| bytes(&mut r, 0))
            .transpose()
    }

    async fn get_many(&mut self, keys: &[Key]) -> Result<Vec<Option<Value>>, KvError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.rows(&sql::get_many(self.pool.table(), keys)).await?;
        let found: HashMap<Key, Value> = pairs(rows)?.into_iter().collect();
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    async fn get_linked(
        &mut self,
        keys: &[Key],
        link: &Link,
    ) -> Result<Option<Vec<Option<Value>>>, KvError> {
        let Some(holder) = keys.get(link.from) else {
            return Ok(None);
        };
        let rows = self
            .rows(&sql::linked(self.pool.table(), keys, holder, link))
            .await?;
        Ok(Some(link.values_from(keys, pairs(rows)?)))
    }

    async fn scan_linked(
        &mut self,
        keys: &[Key],
        start: &[u8],
        end: &[u8],
        limit: usize,
        link: &Link,
    ) -> Result<Option<LinkedScan>, KvError> {
        if start >= end || limit == 0 {
            return Ok(None);
        }
        let statement = sql::scan_linked(self.pool.table(), keys, start, end, limit, link);
        let mut parts: [Vec<(Key, Value)>; 3] = Default::default();
        for mut row in self.rows(&statement).await? {
            let part = match row.take_opt::<i64, usize>(0) {
                Some(Ok(p)) => p,
                _ => return Err(KvError::Engine("MySQL: linked scan without a part".into())),
            };
            let slot = usize::try_from(part)
                .ok()
                .and_then(|i| parts.get_mut(i))
                .ok_or_else(|| KvError::Engine(format!("linked scan part {part}")))?;
            slot.push((bytes(&mut row, 1)?, bytes(&mut row, 2)?));
        }
        let [found, page, linked] = parts;
        Ok(Some(LinkedScan::from_parts(
            keys, found, page, linked, link,
        )))
    }

    async fn scan(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let statement = sql::scan(self.pool.table(), start, end, limit, reverse);
        pairs(self.rows(&statement).await?)
    }
}

#[async_trait]
impl KvEngine for MysqlEngine {
    fn name(&self) -> &'static str {
        "mysql"
    }

    async fn snapshot(&self) -> Result<Box<dyn KvSnapshot>, KvError> {
        Ok(Box::new(MysqlSnapshot {
            pool: self.pool.clone(),
        }))
    }

    async fn commit(&self, req: CommitRequest) -> Result<(), KvError> {
        self.commit_request(req).await
    }

    fn begin_closing(&self) {
        self.closing.cancel();
    }

    async fn frozen_view(
        &self,
        _readers: usize,
    ) -> Result<Option<std::sync::Arc<dyn FrozenView>>, KvError> {
        Ok(Some(std::sync::Arc::new(frozen::open(&self.pool).await?)))
    }

    fn snapshot_isolation(&self) -> bool {
        false
    }

    fn native_field_ops(&self) -> bool {
        // A locking read of a record serializes its updates however they are written.
        false
    }

    fn remote(&self) -> bool {
        true
    }
}
