//! Running a transaction to completion: retries on conflicts (bounded, with jittered
//! backoff) and on an unavailable engine (bounded time), the read cache's speculative
//! first attempt, and the re-check of what a failed or read-only attempt read.

use tokio_util::sync::CancellationToken;

use super::stats::{self, Ending, Restart};
use super::*;

/// How hard [`run_txn`] tries before giving up.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Attempts after which a conflicting transaction fails, once `conflict_timeout` has
    /// passed too.
    pub max_attempts: u32,
    /// How long conflicts are retried at least, however many attempts that takes: a
    /// client slowed down (a loaded machine) can lose many races in a row to a fast one
    /// changing the same records, and that is a reason to wait, not an I/O error.
    pub conflict_timeout: Duration,
    /// First backoff delay; doubles per attempt, with ±50 % jitter.
    pub base_delay: Duration,
    /// Largest backoff delay.
    pub max_delay: Duration,
    /// How long an unreachable engine is retried before the operation fails.
    pub unavailable_timeout: Duration,
    /// Cancelled when the client shuts down (after its buffered writes were committed or
    /// given up on): an unreachable engine is then tried once, not for
    /// `unavailable_timeout`, so closing a session or stopping background jobs during an
    /// outage does not hold the unmount for minutes.
    pub closing: CancellationToken,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 64,
            conflict_timeout: Duration::from_secs(20),
            base_delay: Duration::from_micros(200),
            max_delay: Duration::from_millis(50),
            unavailable_timeout: Duration::from_secs(30),
            closing: CancellationToken::new(),
        }
    }
}

impl RetryPolicy {
    fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base_delay.saturating_mul(1u32 << attempt.min(16));
        let capped = exp.min(self.max_delay);
        let jitter = rand::rng().random_range(0.5..1.5);
        capped.mul_f64(jitter)
    }
}

/// Errors that [`run_txn`] can tell apart: a retryable engine error, or anything else.
pub trait TxnError: From<KvError> {
    /// The engine error inside, if this error is one.
    fn as_kv(&self) -> Option<&KvError>;
}

impl TxnError for KvError {
    fn as_kv(&self) -> Option<&KvError> {
        Some(self)
    }
}

/// A boxed future borrowing the transaction.
pub type TxnFuture<'t, T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 't>>;

/// Run `body` in a transaction and commit it, retrying on conflicts (bounded attempts and
/// time, jittered exponential backoff) and on an unavailable engine (bounded time).
///
/// When `body` fails with a non-retryable error on an engine without snapshot
/// isolation, its reads are re-checked first, so an error caused by a torn view is retried
/// rather than returned.
pub async fn run_txn<'a, T, E, F>(
    engine: &'a dyn KvEngine,
    policy: &RetryPolicy,
    body: F,
) -> Result<T, E>
where
    E: TxnError,
    F: for<'t> FnMut(&'t mut Txn<'a>) -> TxnFuture<'t, T, E>,
{
    run_txn_cached(engine, None, CacheUse::Inform, policy, body).await
}

/// [`run_txn`] with the client's [`ReadCache`], which is told what every attempt read and
/// wrote. With [`CacheUse::Assume`], the first attempt assumes the values it finds there;
/// its result stands only if its commit (which re-checks every assumed value) succeeded.
/// If the commit conflicted, or the attempt failed or wrote nothing, the transaction runs
/// again at once with fresh reads; any other commit error is handled as on every attempt.
/// With [`CacheUse::Trust`], every attempt takes the values the cache trusts.
pub async fn run_txn_cached<'a, T, E, F>(
    engine: &'a dyn KvEngine,
    cache: Option<&'a ReadCache>,
    how: CacheUse,
    policy: &RetryPolicy,
    body: F,
) -> Result<T, E>
where
    E: TxnError,
    F: for<'t> FnMut(&'t mut Txn<'a>) -> TxnFuture<'t, T, E>,
{
    let started = Instant::now();
    let outcome = run_with_retries(engine, cache, how, policy, body).await;
    let ending = match &outcome {
        Ok(_) => Ending::Committed,
        Err(e) if e.as_kv().is_some() => Ending::Failed,
        Err(_) => Ending::Aborted,
    };
    stats::record_end(ending, started.elapsed());
    outcome
}

async fn run_with_retries<'a, T, E, F>(
    engine: &'a dyn KvEngine,
    cache: Option<&'a ReadCache>,
    how: CacheUse,
    policy: &RetryPolicy,
    mut body: F,
) -> Result<T, E>
where
    E: TxnError,
    F: for<'t> FnMut(&'t mut Txn<'a>) -> TxnFuture<'t, T, E>,
{
    let started = Instant::now();
    let mut attempt = 0u32;
    if how == CacheUse::Assume && cache.is_some() {
        match attempt_assuming(engine, cache, &mut body).await {
            Some(Ok(v)) => return Ok(v),
            Some(Err(e)) if !e.as_kv().is_some_and(KvError::is_retryable) => return Err(e),
            _ => stats::record_restart(Restart::StaleCache),
        }
    }
    loop {
        let how = if how == CacheUse::Trust {
            CacheUse::Trust
        } else {
            CacheUse::Inform
        };
        let outcome = attempt_once(engine, cache, how, &mut body).await;
        let err = match outcome {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let retryable = match err.as_kv() {
            Some(KvError::Conflict) => {
                attempt + 1 < policy.max_attempts || started.elapsed() < policy.conflict_timeout
            }
            Some(KvError::Unavailable(_)) => {
                started.elapsed() < policy.unavailable_timeout && !policy.closing.is_cancelled()
            }
            _ => false,
        };
        if !retryable {
            if let Some(kv) = err.as_kv() {
                // Operations fail with EIO for these: say why in the client's log.
                tracing::warn!(
                    "metadata transaction failed after {} attempts: {kv}",
                    attempt + 1
                );
            }
            return match err.as_kv() {
                Some(KvError::Conflict) => Err(E::from(KvError::RetriesExhausted {
                    attempts: attempt + 1,
                    last: "conflicts with concurrent transactions".into(),
                })),
                _ => Err(err),
            };
        }
        if attempt > 0 && attempt.is_multiple_of(16) {
            tracing::debug!(
                attempt,
                "metadata transaction still retrying: {}",
                err_text(&err)
            );
        }
        let unavailable = matches!(err.as_kv(), Some(KvError::Unavailable(_)));
        stats::record_restart(if unavailable {
            Restart::Unavailable
        } else {
            Restart::Conflict
        });
        let backoff = tokio::time::sleep(policy.delay(attempt));
        if unavailable {
            tokio::select! {
                () = backoff => {}
                // One more attempt, at once: it may succeed; if not, it is the last.
                () = policy.closing.cancelled() => {}
            }
        } else {
            backoff.await;
        }
        attempt += 1;
    }
}

fn err_text<E: TxnError>(err: &E) -> String {
    err.as_kv().map(|e| e.to_string()).unwrap_or_default()
}

/// One attempt that assumes cached values: `None` when its outcome cannot stand (it used
/// an assumed value and then failed, wrote nothing, or its commit found an assumed value
/// stale). A commit that failed otherwise is reported, not run again blindly: it may have
/// been applied.
async fn attempt_assuming<'a, T, E, F>(
    engine: &'a dyn KvEngine,
    cache: Option<&'a ReadCache>,
    body: &mut F,
) -> Option<Result<T, E>>
where
    E: TxnError,
    F: for<'t> FnMut(&'t mut Txn<'a>) -> TxnFuture<'t, T, E>,
{
    let mut txn = match Txn::begin_with(engine, cache, CacheUse::Assume).await {
        Ok(txn) => txn,
        Err(e) => return Some(Err(E::from(e))),
    };
    let outcome = body(&mut txn).await;
    if !txn.assumed_anything() {
        return Some(finish_attempt(engine, txn, outcome).await);
    }
    match outcome {
        Ok(v) if !txn.writes.is_empty() => match txn.commit().await {
            Ok(()) => Some(Ok(v)),
            Err(KvError::Conflict) => None,
            Err(e) => Some(Err(E::from(e))),
        },
        _ => None,
    }
}

async fn attempt_once<'a, T, E, F>(
    engine: &'a dyn KvEngine,
    cache: Option<&'a ReadCache>,
    how: CacheUse,
    body: &mut F,
) -> Result<T, E>
where
    E: TxnError,
    F: for<'t> FnMut(&'t mut Txn<'a>) -> TxnFuture<'t, T, E>,
{
    let mut txn = Txn::begin_with(engine, cache, how).await?;
    let outcome = body(&mut txn).await;
    finish_attempt(engine, txn, outcome).await
}

/// Commit an attempt whose body returned `outcome`, or re-check its reads before
/// reporting its error.
async fn finish_attempt<'a, T, E>(
    engine: &'a dyn KvEngine,
    txn: Txn<'a>,
    outcome: Result<T, E>,
) -> Result<T, E>
where
    E: TxnError,
{
    match outcome {
        Ok(v) => {
            txn.commit().await?;
            Ok(v)
        }
        Err(e) if e.as_kv().is_some_and(KvError::is_retryable) => Err(e),
        Err(e) => {
            // What it read is worth remembering (a lookup that found nothing: a create
            // of that name follows).
            txn.remember_reads();
            if !txn.reads_are_one_view() {
                let Txn {
                    snapshot,
                    reads,
                    cache,
                    ..
                } = txn;
                drop(snapshot);
                recheck(engine, cache, reads).await?;
            }
            Err(e)
        }
    }
}

/// Re-check the reads of a transaction that wrote nothing. If one is stale, whatever the
/// cache said about the keys read may be what was stale: they are dropped from it.
pub(super) async fn recheck(
    engine: &dyn KvEngine,
    cache: Option<&ReadCache>,
    reads: Vec<ReadCheck>,
) -> Result<(), KvError> {
    let keys: Vec<Key> = match cache {
        Some(_) => reads
            .iter()
            .filter_map(|r| match r {
                ReadCheck::Point { key, .. } => Some(key.clone()),
                ReadCheck::Range { .. } => None,
            })
            .collect(),
        None => Vec::new(),
    };
    let outcome = engine
        .commit(CommitRequest {
            reads,
            writes: Vec::new(),
            seq: 0,
        })
        .await;
    if let (Err(KvError::Conflict), Some(cache)) = (&outcome, cache) {
        keys.iter().for_each(|k| cache.forget(k));
    }
    outcome
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::kv::memory::MemoryEngine;

    /// A transaction whose every attempt finds the engine unreachable; counts attempts.
    async fn unreachable(policy: RetryPolicy, attempts: Arc<AtomicU32>) -> KvError {
        let engine = MemoryEngine::new();
        run_txn(&engine, &policy, |_| {
            attempts.fetch_add(1, Ordering::Relaxed);
            Box::pin(async { Err::<(), _>(KvError::Unavailable("down".into())) })
        })
        .await
        .unwrap_err()
    }

    #[tokio::test]
    async fn an_unreachable_engine_is_retried_until_the_client_closes_then_tried_once_more() {
        let policy = RetryPolicy {
            unavailable_timeout: Duration::from_secs(60),
            ..RetryPolicy::default()
        };
        let closing = policy.closing.clone();
        let attempts = Arc::new(AtomicU32::new(0));
        let running = tokio::spawn(unreachable(policy, attempts.clone()));
        // Wait for the condition: retried several times, still running.
        while attempts.load(Ordering::Relaxed) < 5 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!running.is_finished(), "an outage is waited out");
        let started = Instant::now();
        closing.cancel();
        let err = running.await.unwrap();
        assert!(matches!(err, KvError::Unavailable(_)), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "ends at once");
        // After closing, one attempt and no backoff.
        let attempts = Arc::new(AtomicU32::new(0));
        let policy = RetryPolicy::default();
        policy.closing.cancel();
        let started = Instant::now();
        unreachable(policy, attempts.clone()).await;
        assert_eq!(attempts.load(Ordering::Relaxed), 1);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
