//! POSIX record locks and flock through open handles. A blocking request (`F_SETLKW`,
//! `flock` without `LOCK_NB`) retries with backoff until the lock is free or the caller is
//! interrupted: the front end passes a [`CancellationToken`] that it cancels when the
//! kernel interrupts the request (a signal, `kill -9`), and the wait then ends with
//! `EINTR` between two attempts — never inside a transaction — so no lock is ever granted
//! to a waiter that gave up.

use std::sync::atomic::Ordering;
use std::time::Duration;

use strata_meta::{LockKind, MetaError, PosixLock};
use strata_types::Errno;
use tokio_util::sync::CancellationToken;

use crate::errno::from_meta;
use crate::{Result, Vfs};

/// Longest pause between two attempts of a blocking lock request.
const MAX_LOCK_RETRY: Duration = Duration::from_millis(100);

impl Vfs {
    /// F_GETLK: the conflicting lock, if any.
    pub async fn getlk(&self, fh: u64, owner: u64, lock: PosixLock) -> Result<Option<PosixLock>> {
        let handle = self.handle(fh)?;
        self.meta
            .getlk(handle.ino, owner, lock)
            .await
            .map_err(from_meta)
    }

    /// F_SETLK / F_SETLKW (`wait`): take or release a record lock. A waiting request ends
    /// with `EINTR` once `interrupt` is cancelled.
    pub async fn setlk(
        &self,
        fh: u64,
        owner: u64,
        lock: PosixLock,
        wait: bool,
        interrupt: &CancellationToken,
    ) -> Result<()> {
        let handle = self.handle(fh)?;
        handle.lock_owner.store(owner, Ordering::Relaxed);
        let mut delay = Duration::from_millis(1);
        loop {
            if interrupt.is_cancelled() && lock.kind != LockKind::Unlock {
                return Err(Errno::EINTR);
            }
            match self.meta.setlk(handle.ino, owner, lock).await {
                Err(MetaError::Posix(Errno::EAGAIN)) if wait && lock.kind != LockKind::Unlock => {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = interrupt.cancelled() => return Err(Errno::EINTR),
                    }
                    delay = (delay * 2).min(MAX_LOCK_RETRY);
                }
                other => return other.map_err(from_meta),
            }
        }
    }

    /// Release the locks `owner` holds on the handle's file: the kernel asks this at the
    /// last close of a file that had flock() locks (their owner is the open file).
    pub async fn release_locks(&self, fh: u64, owner: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        self.meta
            .unlock_all(handle.ino, owner)
            .await
            .map_err(from_meta)
    }
}
