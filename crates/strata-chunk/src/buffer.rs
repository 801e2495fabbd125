//! The global write-buffer budget (`--buffer-size`): every block a slice writer holds in
//! memory reserves its bytes here first, and a writer waits while the budget is used up —
//! so a writer that outruns its uploads is slowed down instead of growing memory.
//!
//! A caller may reserve up front ([`BufferBudget::try_reserve`], [`BufferBudget::reserve`])
//! and hand the [`Reservation`] to a writer, which takes what it needs from it: that lets a
//! caller wait for room while it holds no lock, and relieve the pressure (flush other
//! writers) while it waits.

use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Most idle block buffers kept for reuse.
const MAX_IDLE_BUFFERS: usize = 8;

/// A byte budget shared by all writers of a client.
#[derive(Debug)]
pub struct BufferBudget {
    permits: Arc<Semaphore>,
    capacity: u32,
    /// Block buffers given back after upload, reused so large buffers are not mapped and
    /// faulted in afresh for every block.
    idle: Mutex<Vec<BytesMut>>,
}

/// Bytes reserved from a [`BufferBudget`]; given back when dropped.
#[derive(Debug, Default)]
pub struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    pub fn bytes(&self) -> u32 {
        self.permit
            .as_ref()
            .map_or(0, |p| u32::try_from(p.num_permits()).unwrap_or(u32::MAX))
    }

    /// Take `bytes` out of this reservation; `None` when it holds fewer.
    pub fn take(&mut self, bytes: u32) -> Option<Reservation> {
        if bytes == 0 {
            return Some(Reservation::default());
        }
        let n = usize::try_from(bytes).ok()?;
        let part = self.permit.as_mut()?.split(n)?;
        Some(Reservation { permit: Some(part) })
    }

    /// Add `other`'s bytes to this reservation.
    pub fn merge(&mut self, other: Reservation) {
        match (&mut self.permit, other.permit) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }
}

impl BufferBudget {
    /// A budget of `bytes` (at most 4 GiB - 1).
    pub fn new(bytes: u64) -> BufferBudget {
        let capacity = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        BufferBudget {
            permits: Arc::new(Semaphore::new(
                usize::try_from(capacity).unwrap_or(usize::MAX),
            )),
            capacity,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An empty buffer with room for `capacity` bytes, reused when one is idle.
    pub fn buffer(&self, capacity: usize) -> BytesMut {
        let reused = {
            let mut idle = self.idle.lock();
            let at = idle.iter().position(|b| b.capacity() >= capacity);
            at.map(|at| idle.swap_remove(at))
        };
        reused.unwrap_or_else(|| BytesMut::with_capacity(capacity))
    }

    /// Give a buffer back for reuse.
    pub fn recycle(&self, mut buffer: BytesMut) {
        buffer.clear();
        let mut idle = self.idle.lock();
        if idle.len() < MAX_IDLE_BUFFERS {
            idle.push(buffer);
        }
    }

    /// Reserve `bytes`, waiting while the budget is exhausted. A request larger than the
    /// whole budget reserves the whole budget.
    pub async fn reserve(&self, bytes: u32) -> Reservation {
        let bytes = bytes.min(self.capacity);
        if bytes == 0 {
            return Reservation::default();
        }
        match self.permits.clone().acquire_many_owned(bytes).await {
            Ok(permit) => Reservation {
                permit: Some(permit),
            },
            // The semaphore is never closed; if it were, waiting would be pointless.
            Err(_) => unreachable_closed(),
        }
    }

    /// [`BufferBudget::reserve`] without waiting: `None` when the budget has no room now.
    pub fn try_reserve(&self, bytes: u32) -> Option<Reservation> {
        let bytes = bytes.min(self.capacity);
        if bytes == 0 {
            return Some(Reservation::default());
        }
        let permit = self.permits.clone().try_acquire_many_owned(bytes).ok()?;
        Some(Reservation {
            permit: Some(permit),
        })
    }

    /// Bytes reserved right now.
    pub fn in_use(&self) -> u64 {
        let available = u64::try_from(self.permits.available_permits()).unwrap_or(u64::MAX);
        u64::from(self.capacity).saturating_sub(available)
    }

    pub fn capacity(&self) -> u64 {
        u64::from(self.capacity)
    }
}

#[allow(clippy::panic)]
fn unreachable_closed() -> Reservation {
    panic!("buffer budget semaphore closed: it is never closed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn reservations_wait_for_room() {
        let budget = Arc::new(BufferBudget::new(100));
        let a = budget.reserve(60).await;
        assert_eq!(budget.in_use(), 60);
        let b2 = budget.clone();
        let waiter = tokio::spawn(async move { b2.reserve(50).await.bytes() });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "waits while the budget is used up");
        assert!(budget.try_reserve(50).is_none(), "no room now");
        drop(a);
        assert_eq!(waiter.await.unwrap(), 50);
        assert_eq!(budget.in_use(), 0, "given back on drop");
        assert_eq!(
            budget.reserve(1000).await.bytes(),
            100,
            "clamped to the budget"
        );
    }

    #[test]
    fn reservations_split_and_merge() {
        let budget = BufferBudget::new(100);
        let mut credit = budget.try_reserve(40).unwrap();
        let part = credit.take(15).unwrap();
        assert_eq!((part.bytes(), credit.bytes()), (15, 25));
        assert!(credit.take(26).is_none(), "cannot take more than is held");
        let mut held = Reservation::default();
        held.merge(part);
        held.merge(credit.take(5).unwrap());
        assert_eq!(held.bytes(), 20);
        assert_eq!(budget.in_use(), 40);
        drop(credit);
        assert_eq!(budget.in_use(), 20, "the rest goes back when dropped");
        drop(held);
        assert_eq!(budget.in_use(), 0);
    }
}
