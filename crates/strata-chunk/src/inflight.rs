//! What is in flight in a store, shared by its readers: fetches of whole blocks and of
//! segment runs (a second reader joins the first's), and demand reads (low-priority warmup
//! waits until none is going).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use futures::future::{BoxFuture, Shared as SharedFuture};
use tokio::sync::Notify;

use crate::Result;

/// A fetch of a whole block, shared by every reader waiting for it.
pub(crate) type Fetch = SharedFuture<BoxFuture<'static, Result<Bytes>>>;

/// Consecutive segments of one block, fetched together.
#[derive(Debug)]
pub(crate) struct SegmentRun {
    pub first: usize,
    pub segments: Vec<Bytes>,
}

impl SegmentRun {
    pub(crate) fn get(&self, index: usize) -> Option<Bytes> {
        self.segments.get(index.checked_sub(self.first)?).cloned()
    }
}

/// A fetch of a run, shared by every reader waiting for one of its segments.
pub(crate) type RunFetch = SharedFuture<BoxFuture<'static, Result<Arc<SegmentRun>>>>;

/// Demand reads in flight, so that low-priority warmup can wait for a quiet moment.
#[derive(Debug, Default)]
pub(crate) struct DemandReads {
    count: AtomicUsize,
    quiet: Notify,
}

/// One demand read in flight (dropped when it ends).
pub(crate) struct DemandRead<'a>(&'a DemandReads);

impl DemandReads {
    pub(crate) fn start(&self) -> DemandRead<'_> {
        self.count.fetch_add(1, Ordering::AcqRel);
        DemandRead(self)
    }

    /// Return once no demand read is in flight.
    pub(crate) async fn quiet(&self) {
        loop {
            let notified = self.quiet.notified();
            tokio::pin!(notified);
            // Registered before the check: a read ending in between still wakes us.
            notified.as_mut().enable();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for DemandRead<'_> {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.quiet.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn low_priority_waits_for_reads_to_end() {
        let reads = DemandReads::default();
        reads.quiet().await; // idle: returns at once
        let first = reads.start();
        let second = reads.start();
        let waiter = reads.quiet();
        tokio::pin!(waiter);
        assert!(futures::poll!(waiter.as_mut()).is_pending());
        drop(first);
        assert!(
            futures::poll!(waiter.as_mut()).is_pending(),
            "one read is still going"
        );
        drop(second);
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken when the last read ended");
    }
}
