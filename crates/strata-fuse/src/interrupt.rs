//! FUSE interrupts: the kernel sends `FUSE_INTERRUPT` for a request whose caller got a
//! signal (`kill -9` included). Requests that may wait without bound (a blocking lock)
//! register a cancellation token under their request id; an interrupt cancels it and the
//! request ends with `EINTR`. An interrupt can be read (on another `/dev/fuse` clone) before
//! its request registered, so unmatched interrupts are remembered briefly.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_vfs::CancellationToken;

/// Unmatched interrupts remembered (most recent first to go is the oldest).
const EARLY_KEPT: usize = 256;

/// Interruptible requests in flight.
#[derive(Debug, Default)]
pub(crate) struct Interrupts {
    waiting: Mutex<HashMap<u64, CancellationToken>>,
    /// Interrupts that matched no waiting request (it had not registered yet, or it had
    /// already finished).
    early: Mutex<VecDeque<u64>>,
}

/// A registered request; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    interrupts: Arc<Interrupts>,
    unique: u64,
    pub token: CancellationToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.interrupts.waiting.lock().remove(&self.unique);
    }
}

impl Interrupts {
    /// Register request `unique` as interruptible.
    pub fn register(self: &Arc<Self>, unique: u64) -> Registration {
        let token = CancellationToken::new();
        self.waiting.lock().insert(unique, token.clone());
        let mut early = self.early.lock();
        if let Some(at) = early.iter().position(|u| *u == unique) {
            early.remove(at);
            token.cancel();
        }
        Registration {
            interrupts: self.clone(),
            unique,
            token,
        }
    }

    /// End every waiting request with `EINTR` (a hand-over); returns how many.
    pub fn interrupt_all(&self) -> usize {
        let waiting = self.waiting.lock();
        for token in waiting.values() {
            token.cancel();
        }
        waiting.len()
    }

    /// The kernel interrupts request `unique`.
    pub fn interrupt(&self, unique: u64) {
        if let Some(token) = self.waiting.lock().get(&unique) {
            token.cancel();
            return;
        }
        let mut early = self.early.lock();
        if early.len() >= EARLY_KEPT {
            early.pop_front();
        }
        early.push_back(unique);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_reach_requests_registered_before_or_after() {
        let interrupts = Arc::new(Interrupts::default());
        let waiting = interrupts.register(7);
        assert!(!waiting.token.is_cancelled());
        interrupts.interrupt(7);
        assert!(waiting.token.is_cancelled(), "registered first");
        interrupts.interrupt(9);
        let late = interrupts.register(9);
        assert!(late.token.is_cancelled(), "interrupt read first");
        drop((waiting, late));
        assert!(interrupts.waiting.lock().is_empty(), "unregistered on drop");
        let other = interrupts.register(10);
        assert!(
            !other.token.is_cancelled(),
            "unrelated requests are not touched"
        );
    }
}
