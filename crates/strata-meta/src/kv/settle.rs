//! The loop SQL engines run to settle a commit whose answer was lost (docs/DESIGN.md,
//! "Lost commit answers"): ask the engine's fence, which both answers and makes sure the
//! commit can no longer apply, until it answers or [`SETTLE_TIMEOUT`] has passed. The
//! fence itself is the engine's (PostgreSQL, MySQL).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{KvError, LostCommit, record_lost_commit, within};

/// How long a lost commit is settled for before it is reported as unknown.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one attempt of a fence may take (a lock wait included).
pub const FENCE_ATTEMPT: Duration = Duration::from_secs(5);

/// The states of a commit marker (a row per connection on the SQL engines) for the
/// connection's `n`-th writing commit: (applied `2n + 1`, fenced `2n`).
pub fn marker_states(n: u64) -> Result<(i64, i64), KvError> {
    let fenced = n
        .checked_mul(2)
        .and_then(|f| i64::try_from(f).ok())
        .ok_or_else(|| KvError::Engine(format!("commit number {n} out of range")))?;
    Ok((fenced + 1, fenced))
}

/// Settle a lost commit of `engine` through `fence` (`Ok(true)`: the fence took, the
/// commit was not applied; `Ok(false)`: it had been applied). Returns `Ok` when it was
/// applied, `Unavailable(why)` when not (the transaction layer retries it), and an
/// engine error (`EIO`) when the engine could not be asked in time or said something
/// else: a blind retry could report a create that happened as `EEXIST`.
pub async fn settle_lost_commit<F, Fut>(
    engine: &str,
    why: String,
    closing: &CancellationToken,
    mut fence: F,
) -> Result<(), KvError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, KvError>>,
{
    let started = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        match within(FENCE_ATTEMPT, engine, fence()).await {
            Ok(fenced) => {
                tracing::info!(
                    applied = !fenced,
                    "{engine}: settled a commit whose answer was lost ({why})"
                );
                record_lost_commit(if fenced {
                    LostCommit::NotApplied
                } else {
                    LostCommit::Applied
                });
                return if fenced {
                    Err(KvError::Unavailable(why))
                } else {
                    Ok(())
                };
            }
            Err(KvError::Unavailable(e))
                if started.elapsed() < SETTLE_TIMEOUT && !closing.is_cancelled() =>
            {
                tracing::debug!("{engine}: settling a lost commit: {e}; trying again");
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = closing.cancelled() => {}
                }
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => {
                record_lost_commit(LostCommit::Unknown);
                return Err(KvError::Engine(format!(
                    "{engine}: {why}; whether the commit was applied is unknown: {e}"
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_leave_room_for_the_fence() {
        assert_eq!(marker_states(1).unwrap(), (3, 2));
        assert_eq!(marker_states(7).unwrap(), (15, 14));
        assert!(marker_states(u64::MAX).is_err());
    }
}
