//! Counters of this process's metadata transactions (docs/METRICS.md): how they ended,
//! why they were run again, and how long they took with their retries. Per process, not
//! per volume: a transaction does not know which client runs it, and a process that opens
//! several volumes (the SDK, tests) reports them together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use strata_types::metrics::{Exposition, Histogram, Kind};

/// How a transaction ended.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ending {
    /// Its body succeeded and it committed.
    Committed,
    /// Its body returned an error of the operation (ENOENT, EEXIST, ...).
    Aborted,
    /// The engine failed it (retries exhausted, unreachable, broken).
    Failed,
}

/// Why a transaction ran again.
#[derive(Clone, Copy, Debug)]
pub(super) enum Restart {
    /// Another transaction changed what it read.
    Conflict,
    /// The engine did not answer.
    Unavailable,
    /// A value assumed from the client's read cache was stale.
    StaleCache,
}

/// What settling a commit whose answer was lost found (the network engines report it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostCommit {
    /// It had been applied: the operation succeeded.
    Applied,
    /// It had not been and now never will be: the transaction runs again.
    NotApplied,
    /// The engine could not be asked in time: the operation failed with EIO.
    Unknown,
}

#[derive(Debug, Default)]
struct TxnStats {
    ended: [AtomicU64; 3],
    restarts: [AtomicU64; 3],
    lost: [AtomicU64; 3],
    duration: Histogram,
}

static STATS: std::sync::LazyLock<TxnStats> = std::sync::LazyLock::new(TxnStats::default);

pub(super) fn record_end(ending: Ending, took: Duration) {
    STATS.ended[ending as usize].fetch_add(1, Ordering::Relaxed);
    STATS.duration.observe(took);
}

pub(super) fn record_restart(why: Restart) {
    STATS.restarts[why as usize].fetch_add(1, Ordering::Relaxed);
}

/// Count a lost commit answer settled (or not) by an engine.
pub fn record_lost_commit(verdict: LostCommit) {
    STATS.lost[verdict as usize].fetch_add(1, Ordering::Relaxed);
}

/// Lost commit answers of this process so far: (applied, not applied, unknown).
pub fn lost_commits() -> (u64, u64, u64) {
    let n = |v: LostCommit| STATS.lost[v as usize].load(Ordering::Relaxed);
    (
        n(LostCommit::Applied),
        n(LostCommit::NotApplied),
        n(LostCommit::Unknown),
    )
}

/// This process's transaction counters in the Prometheus text format.
pub fn render_txn_metrics(e: &mut Exposition) {
    let name = "strata_meta_transactions";
    e.family(
        name,
        Kind::Counter,
        "Metadata transactions by how they ended: committed, aborted (the operation's \
         own error, e.g. ENOENT) or failed (the engine's error after retries).",
    );
    for (i, result) in ["committed", "aborted", "failed"].iter().enumerate() {
        e.sample(
            name,
            &[("result", result)],
            STATS.ended[i].load(Ordering::Relaxed),
        );
    }
    let name = "strata_meta_transaction_restarts";
    e.family(
        name,
        Kind::Counter,
        "Metadata transaction attempts run again, by reason.",
    );
    for (i, reason) in ["conflict", "unavailable", "stale_cache"]
        .iter()
        .enumerate()
    {
        e.sample(
            name,
            &[("reason", reason)],
            STATS.restarts[i].load(Ordering::Relaxed),
        );
    }
    let name = "strata_meta_lost_commits";
    e.family(
        name,
        Kind::Counter,
        "Commits whose answer was lost, by what settling them found: applied, \
         not_applied (retried), unknown (the engine could not be asked; EIO).",
    );
    for (i, verdict) in ["applied", "not_applied", "unknown"].iter().enumerate() {
        e.sample(
            name,
            &[("verdict", verdict)],
            STATS.lost[i].load(Ordering::Relaxed),
        );
    }
    let name = "strata_meta_transaction_duration_seconds";
    e.family(
        name,
        Kind::Histogram,
        "Latency of metadata transactions, retries included.",
    );
    e.histogram(name, &[], &STATS.duration);
}
