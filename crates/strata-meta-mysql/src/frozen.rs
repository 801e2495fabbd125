//! Frozen views ([`KvEngine::frozen_view`](strata_meta::kv::KvEngine::frozen_view)): one
//! connection of its own — outside the pool, so a dump that takes minutes never holds
//! the slots a mount's operations need — inside `START TRANSACTION WITH CONSISTENT
//! SNAPSHOT, READ ONLY`, so every scan reads the same moment. MySQL cannot share a
//! snapshot between connections, so the view's scans take turns on it. Dropping the view
//! closes the connection, which ends the transaction (InnoDB keeps the row versions it
//! may read until then).

use async_trait::async_trait;
use strata_meta::kv::{FrozenView, Key, KvError, Value};
use tokio::sync::Mutex;

use crate::pairs;
use crate::pool::{Conn, Pool};
use crate::sql;

/// See the module doc.
pub(crate) struct MysqlFrozen {
    table: String,
    /// `None` once a scan failed: the transaction may be gone, so the view is closed.
    conn: Mutex<Option<Conn>>,
}

/// Open a view of this moment.
pub(crate) async fn open(pool: &Pool) -> Result<MysqlFrozen, KvError> {
    let mut conn = pool.connect().await?;
    conn.run("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .await?;
    Ok(MysqlFrozen {
        table: pool.table().to_string(),
        conn: Mutex::new(Some(conn)),
    })
}

#[async_trait]
impl FrozenView for MysqlFrozen {
    async fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Key, Value)>, KvError> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let mut slot = self.conn.lock().await;
        // Taken out while it runs: a scan cancelled half way leaves no connection with
        // an unread answer behind.
        let mut conn = slot.take().ok_or_else(|| {
            KvError::Unavailable("MySQL: the dump's snapshot connection was lost".into())
        })?;
        let statement = sql::scan(&self.table, start, end, limit, false);
        let mut sets = conn.run(&statement).await?;
        *slot = Some(conn);
        pairs(sets.pop().unwrap_or_default())
    }
}
