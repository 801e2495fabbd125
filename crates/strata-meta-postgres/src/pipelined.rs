//! A commit in one round trip: `BEGIN`, the check of the transaction's point reads, the
//! writes, the announcement and `COMMIT` are sent together (tokio-postgres pipelines
//! requests polled together, in order). The check cannot return a verdict to decide on —
//! nothing waits for it — so it aborts the transaction itself: when a read no longer holds
//! it divides by zero (SQLSTATE 22012, computed from the data so the planner cannot fold
//! it), every later statement fails as "transaction aborted", and the `COMMIT` ends it as
//! a rollback. Transactions with range reads take the stepwise path in `lib.rs`.
//! The pipeline runs on one connection: a `BEGIN` that fails means the connection failed,
//! and the statements after it fail with it.

use strata_meta::kv::{Key, KvError, ReadCheck, within};
use tokio_postgres::error::SqlState;

use crate::pool::Pooled;
use crate::stmt::Sql;
use crate::{QUERY_TIMEOUT, Writes, pg_error, timed};

/// Whether a commit can be pipelined: its reads are all point reads.
pub(crate) fn can_pipeline(reads: &[ReadCheck]) -> bool {
    reads.iter().all(|r| matches!(r, ReadCheck::Point { .. }))
}

/// Commit `writes` if every point read in `reads` still holds, in one round trip.
pub(crate) async fn commit_pipelined(
    conn: &mut Pooled,
    reads: &[ReadCheck],
    writes: &Writes<'_>,
) -> Result<(), KvError> {
    let mut keys: Vec<&Key> = Vec::with_capacity(reads.len());
    let mut values: Vec<&[u8]> = Vec::with_capacity(reads.len());
    let mut present: Vec<bool> = Vec::with_capacity(reads.len());
    for read in reads {
        if let ReadCheck::Point { key, value } = read {
            keys.push(key);
            values.push(value.as_deref().unwrap_or_default());
            present.push(value.is_some());
        }
    }
    // Until the COMMIT has answered, the connection is inside a transaction: if this
    // future is dropped on the way, the pool closes it instead of reusing it.
    conn.in_transaction = true;
    let shared = &*conn;
    let client = &shared.client;
    let begin = timed(client.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE"));
    let check = within(QUERY_TIMEOUT, "PostgreSQL", async {
        if keys.is_empty() {
            return Ok(());
        }
        match shared
            .query_one(Sql::CheckPoints, &[&keys, &values, &present])
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(&SqlState::DIVISION_BY_ZERO) => Err(KvError::Conflict),
            Err(e) => Err(pg_error(e)),
        }
    });
    let applied = writes.apply(shared);
    let commit = timed(client.batch_execute("COMMIT"));
    let (begun, checked, applied, committed) = futures::join!(begin, check, applied, commit);
    // Whatever happened, a COMMIT the server answered ended the transaction.
    if !matches!(committed, Err(KvError::Unavailable(_))) {
        conn.in_transaction = false;
    }
    // The first failure says why; the ones after it are "transaction aborted". A failed
    // statement turned the COMMIT into a rollback, so nothing was applied.
    begun?;
    checked?;
    applied?;
    committed
}
