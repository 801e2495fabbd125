//! Settling a commit whose answer was lost: was it applied or not?
//!
//! A connection that breaks after a commit was sent leaves the commit's fate unknown: the
//! server may have applied it, may still be running it, or may not have seen it; a
//! message held up in the network may even reach it later. Retrying blindly could apply
//! it twice (a `create` that succeeded would come back as `EEXIST`).
//!
//! So every writing commit also sets its connection's **commit marker**, a row of
//! `{table}$commits` (docs/FORMAT.md, "PostgreSQL engine"): `state = 2·n + 1` for the
//! connection's n-th writing commit, but only while the row's state is below `2·n`; when
//! it is not, the statement divides by zero and the whole transaction aborts.
//!
//! After a lost answer, the client settles the commit from another connection:
//! 1. it asks the server to end the backend that ran the old connection (same pid and
//!    start time), so a transaction it still holds open is rolled back and no late
//!    message can commit it;
//! 2. it **fences** the commit: sets the marker to `2·n` where it is below `2·n`. If the
//!    old transaction is still running, PostgreSQL makes this wait for it on the row.
//!    The state after the fence is the verdict: `2·n` means the commit was not applied
//!    and now never will be (its marker update would find `2·n` and abort it); `2·n + 1`
//!    means it was applied. (Not "did this fence change the row": a fence whose answer
//!    was lost is tried again, and the second one finds `2·n` already there. Taking that
//!    for "applied" answered `Ok` for renames that never happened, found by the fault
//!    harness on long runs.)
//!
//! The answer is `Ok` (applied), the original `Unavailable` error (not applied: the
//! transaction layer retries it), or, when the server cannot be asked within
//! `strata_meta::kv::settle::SETTLE_TIMEOUT`, an engine error (`EIO`) that says the outcome is unknown.

use strata_meta::kv::KvError;
use strata_meta::kv::settle::settle_lost_commit;
use tokio_postgres::types::Type;
use tokio_util::sync::CancellationToken;

use crate::pg_error;
use crate::pool::Pool;
use crate::sql::markers_table;

pub(crate) use strata_meta::kv::settle::marker_states as states;

/// What a commit whose answer was lost needs to be settled.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LostCommit {
    /// The connection's marker row.
    pub marker: [u8; 16],
    /// The commit's number on that connection.
    pub n: u64,
    /// The old connection's server process (pid, start in µs), when known.
    pub backend: Option<(i32, i64)>,
}

/// Whether `lost` was applied (see the module doc).
pub(crate) async fn settle(
    pool: &Pool,
    lost: LostCommit,
    why: String,
    closing: &CancellationToken,
) -> Result<(), KvError> {
    settle_lost_commit("PostgreSQL", why, closing, || fence(pool, lost)).await
}

/// End the old backend, then fence the commit; true when the fence took (not applied).
async fn fence(pool: &Pool, lost: LostCommit) -> Result<bool, KvError> {
    let mut conn = pool.get().await?;
    if let Some((pid, start)) = lost.backend {
        let ended = conn
            .client
            .query_typed(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE pid = $1 AND (extract(epoch FROM backend_start) * 1000000)::int8 = $2",
                &[(&pid, Type::INT4), (&start, Type::INT8)],
            )
            .await;
        match ended {
            Ok(_) => {}
            // Not allowed to (a pooler, another role): the fence still waits for it.
            Err(e) if e.code().is_some() => {
                tracing::debug!("PostgreSQL: cannot end the backend of a lost commit: {e}");
            }
            Err(e) => {
                conn.broken = true;
                return Err(pg_error(e));
            }
        }
    }
    let (_, fenced) = states(lost.n)?;
    let markers = markers_table(pool.table());
    // A lock wait (the old transaction still running) is bounded on the server, so the
    // connection comes back usable; the next attempt waits again.
    conn.in_transaction = true;
    let fenced_rows = async {
        conn.client
            .batch_execute("BEGIN; SET LOCAL lock_timeout = '2s'")
            .await?;
        // Unnamed statements: through a pooler a named one could outlive this
        // transaction on the server connection and collide with another client's.
        conn.client
            .execute_typed(
                &format!(
                    "INSERT INTO {markers} (conn, state, at) VALUES ($1, $2, now()) \
                     ON CONFLICT (conn) DO UPDATE SET state = EXCLUDED.state, at = EXCLUDED.at \
                     WHERE {markers}.state < EXCLUDED.state"
                ),
                &[(&&lost.marker[..], Type::BYTEA), (&fenced, Type::INT8)],
            )
            .await?;
        // The verdict is the state, not whether this fence changed it: an earlier
        // attempt's fence may have committed though its answer was lost, and a fence
        // that finds `2n` must still say "not applied".
        let state: i64 = conn
            .client
            .query_typed_one(
                &format!("SELECT state FROM {markers} WHERE conn = $1"),
                &[(&&lost.marker[..], Type::BYTEA)],
            )
            .await?
            .try_get(0)?;
        conn.client.batch_execute("COMMIT").await?;
        Ok::<i64, tokio_postgres::Error>(state)
    }
    .await;
    match fenced_rows {
        Ok(state) => {
            conn.in_transaction = false;
            Ok(state == fenced)
        }
        Err(e) => {
            let lock_wait = e.code().is_some_and(|c| c.code() == "55P03");
            if conn.client.batch_execute("ROLLBACK").await.is_ok() {
                conn.in_transaction = false;
            }
            if lock_wait {
                return Err(KvError::Unavailable(
                    "the lost commit's transaction is still running".into(),
                ));
            }
            Err(pg_error(e))
        }
    }
}

#[cfg(test)]
#[path = "settle_tests.rs"]
mod tests;
