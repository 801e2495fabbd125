//! Frozen views ([`KvEngine::frozen_view`](strata_meta::kv::KvEngine::frozen_view)): a
//! few connections of their own — outside the pool, so a dump that takes minutes never
//! holds the slots a mount's operations need — each inside a read-only `REPEATABLE READ`
//! transaction. The first exports its snapshot (`pg_export_snapshot`), the others import
//! it (`SET TRANSACTION SNAPSHOT`), so every scan on any of them reads the same moment.
//! The exporting transaction stays open as long as the view: an exported snapshot lives
//! only that long. Dropping the view closes the connections, which ends the transactions
//! (through PgBouncer in transaction mode, each transaction holds its server connection
//! until then). While a view is kept, vacuum keeps the row versions it may read.

use async_trait::async_trait;
use parking_lot::Mutex;
use strata_meta::kv::{FrozenView, Key, KvError, Value};
use tokio::sync::Semaphore;

use crate::pool::{Conn, Pool};
use crate::stmt::Sql;
use crate::{pairs, pg_error, timed};

/// Connections a view opens at most, whatever the readers asked for.
const MAX_CONNECTIONS: usize = 8;

/// See the module doc.
pub(crate) struct PostgresFrozen {
    /// Connections not running a scan; `free` counts them.
    idle: Mutex<Vec<Conn>>,
    free: Semaphore,
}

/// Open a view of this moment with up to `readers` connections.
pub(crate) async fn open(pool: &Pool, readers: usize) -> Result<PostgresFrozen, KvError> {
    let first = pool.connect().await?;
    timed(
        first
            .client
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
    )
    .await?;
    let row = timed(first.client.query_one("SELECT pg_export_snapshot()", &[])).await?;
    let id: String = row.try_get(0).map_err(pg_error)?;
    // The server names snapshots in hex digits and dashes; anything else is not put into
    // a statement.
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        return Err(KvError::Engine(format!(
            "PostgreSQL: unexpected snapshot name {id:?}"
        )));
    }
    let mut conns = vec![first];
    for _ in 1..readers.clamp(1, MAX_CONNECTIONS) {
        let conn = pool.connect().await?;
        timed(conn.client.batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{id}'"
        )))
        .await?;
        conns.push(conn);
    }
    Ok(PostgresFrozen {
        free: Semaphore::new(conns.len()),
        idle: Mutex::new(conns),
    })
}

#[async_trait]
impl FrozenView for PostgresFrozen {
    async fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let permit = self.free.acquire().await.map_err(|_| {
            KvError::Unavailable("PostgreSQL: a scan of the dump's snapshot failed".into())
        })?;
        let conn = self.idle.lock().pop().ok_or_else(|| {
            KvError::Unavailable("PostgreSQL: the dump's snapshot connections were lost".into())
        })?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = timed(conn.query(Sql::ScanAsc, &[&start, &end, &limit])).await;
        // A connection that failed may have lost its transaction: never used again, and
        // the view is closed (later scans fail at once instead of waiting for it).
        match rows {
            Ok(rows) => {
                self.idle.lock().push(conn);
                drop(permit);
                pairs(rows)
            }
            Err(e) => {
                self.free.close();
                Err(e)
            }
        }
    }
}
