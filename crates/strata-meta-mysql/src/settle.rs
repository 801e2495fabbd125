//! Settling a commit whose answer was lost: was it applied or not?
//!
//! The scheme is the PostgreSQL engine's (docs/DESIGN.md, "Lost commit answers"): every
//! writing commit also sets its connection's **commit marker**, a row of
//! `{table}$commits`, to `2·n + 1` for the connection's n-th writing commit, and the
//! statement fails (so the batch stops before its `COMMIT`) when the row has reached
//! `2·n` (`sql::mark`).
//!
//! After a lost answer the client, from a new connection:
//! 1. asks the server to `KILL` the old connection, so a transaction it still holds open
//!    is rolled back and no late message can commit it;
//! 2. **fences** the commit: raises the marker to `2·n` where it is below. If the old
//!    transaction still holds the row, InnoDB makes this wait for it (bounded by the lock
//!    wait timeout; then the next attempt waits again). The state after the fence is the
//!    verdict: `2·n` means not applied and now never will be, `2·n + 1` means applied.
//!
//! The answer is `Ok` (applied), the original `Unavailable` error (not applied: the
//! transaction layer retries it), or, when the server cannot be asked within
//! `strata_meta::kv::settle::SETTLE_TIMEOUT`, an engine error (`EIO`) that says the outcome is unknown.

use strata_meta::kv::KvError;
use strata_meta::kv::settle::settle_lost_commit;
use tokio_util::sync::CancellationToken;

use crate::pool::Pool;
use crate::sql::{hex, markers_table, my_error};

pub(crate) use strata_meta::kv::settle::marker_states as states;

/// What a commit whose answer was lost needs to be settled.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LostCommit {
    /// The connection's marker row.
    pub marker: [u8; 16],
    /// The commit's number on that connection.
    pub n: u64,
    /// The old connection's id on the server.
    pub conn_id: u32,
}

/// Whether `lost` was applied (see the module doc).
pub(crate) async fn settle(
    pool: &Pool,
    lost: LostCommit,
    why: String,
    closing: &CancellationToken,
) -> Result<(), KvError> {
    settle_lost_commit("MySQL", why, closing, || fence(pool, lost)).await
}

/// End the old connection, then fence the commit; true when the fence took (not applied).
/// Runs on a connection of its own, dropped afterwards (its session settings change).
async fn fence(pool: &Pool, lost: LostCommit) -> Result<bool, KvError> {
    let mut conn = pool.connect().await?;
    let kill = format!("KILL CONNECTION {}", lost.conn_id);
    match conn.run_raw(&kill).await {
        Ok(_) => {}
        // Gone already (1094), or not allowed to (1095: another user): the fence still
        // waits for a transaction it holds.
        Err(f) if matches!(&f.error, mysql_async::Error::Server(s) if matches!(s.code, 1094 | 1095)) =>
            {}
        Err(f) => return Err(my_error(f.error)),
    }
    let (_, fenced) = states(lost.n)?;
    let markers = markers_table(pool.table());
    let marker = hex(&lost.marker);
    // The verdict is the state, not whether this fence changed it: an earlier attempt's
    // fence may have committed though its answer was lost.
    let sql = format!(
        "SET SESSION innodb_lock_wait_timeout = 2; START TRANSACTION; \
         INSERT INTO `{markers}` (conn, state) VALUES ({marker}, {fenced}) \
         ON DUPLICATE KEY UPDATE state = IF(state < {fenced}, {fenced}, state); \
         SELECT state FROM `{markers}` WHERE conn = {marker}; COMMIT"
    );
    let sets = conn.run_raw(&sql).await.map_err(|f| match &f.error {
        mysql_async::Error::Server(s) if s.code == 1205 => {
            KvError::Unavailable("the lost commit's transaction is still running".into())
        }
        _ => my_error(f.error),
    })?;
    let state = sets
        .get(3)
        .and_then(|rows| rows.first())
        .and_then(|row| row.get_opt::<i64, usize>(0))
        .and_then(Result::ok)
        .ok_or_else(|| KvError::Engine("MySQL: the commit marker did not read back".into()))?;
    Ok(state == fenced)
}
