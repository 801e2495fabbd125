//! The global write-buffer budget (`--buffer-size`): every block a slice writer holds in
//! memory reserves its bytes here first, and a writer waits while the budget is used up —
//! so a writer that outruns its uploads is slowed down instead of growing memory.

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
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
#[derive(Debug)]
pub struct Reservation {
    _permit: OwnedSemaphorePermit,
    bytes: u32,
}

impl Reservation {
    pub fn bytes(&self) -> u32 {
        self.bytes
    }
}

impl BufferBudget {
    /// A budget of `bytes` (at most 4 GiB - 1).
    pub fn new(bytes: u64) -> BufferBudget {
        let capacity = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        BufferBudget {
            permits: Arc::new(Semaphore::new(capacity as usize)),
            capacity,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An empty buffer with room for `capacity` bytes, reused when one is idle.
    pub fn buffer(&self, capacity: usize) -> BytesMut {
        let reused = self.idle.lock().ok().and_then(|mut idle| {
            let at = idle.iter().position(|b| b.capacity() >= capacity)?;
            Some(idle.swap_remove(at))
        });
        reused.unwrap_or_else(|| BytesMut::with_capacity(capacity))
    }

    /// Give a buffer back for reuse.
    pub fn recycle(&self, mut buffer: BytesMut) {
        buffer.clear();
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE_BUFFERS
        {
            idle.push(buffer);
        }
    }

    /// Reserve `bytes`, waiting while the budget is exhausted. A request larger than the
    /// whole budget reserves the whole budget.
    pub async fn reserve(&self, bytes: u32) -> Reservation {
        let bytes = bytes.min(self.capacity);
        match self.permits.clone().acquire_many_owned(bytes).await {
            Ok(permit) => Reservation {
                _permit: permit,
                bytes,
            },
            // The semaphore is never closed; if it were, waiting would be pointless.
            Err(_) => unreachable_closed(),
        }
    }

    /// Bytes reserved right now.
    pub fn in_use(&self) -> u64 {
        u64::from(self.capacity) - self.permits.available_permits() as u64
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
        drop(a);
        assert_eq!(waiter.await.unwrap(), 50);
        assert_eq!(budget.in_use(), 0, "given back on drop");
        assert_eq!(
            budget.reserve(1000).await.bytes(),
            100,
            "clamped to the budget"
        );
    }
}
