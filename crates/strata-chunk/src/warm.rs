//! Warmup of blocks (`strata warmup`): fill, check or empty the cache that holds a block —
//! its owner's in a cache group (one warmup through any member fills the group), else
//! this client's. Warmed blocks are written to the block cache before the call returns.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use strata_types::Slice;
use tokio::sync::Notify;

use crate::Result;
use crate::cache::BlockCache;
use crate::group::wire::{Op, REPLY_OK};
use crate::reader::ChunkStore;

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
    async fn quiet(&self) {
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

impl ChunkStore {
    /// Wait until no read of this client is fetching data (low-priority warmup calls
    /// this before each block, so it only uses the moments reads leave free).
    pub async fn yield_to_reads(&self) {
        self.shared.reads.quiet().await;
    }

    /// The blocks (key, length) holding bytes `[off, end)` of a chunk with `slices`.
    pub fn blocks_of(&self, slices: &[Slice], off: u32, end: u32) -> Vec<(String, usize)> {
        let mut blocks: Vec<(String, usize)> = self
            .plan(slices, off, end)
            .into_iter()
            .map(|p| (p.key, p.block_len))
            .collect();
        blocks.dedup();
        blocks
    }

    /// Put block `key` (`block_len` bytes) into the cache that owns it; a peer that fails
    /// leaves the block to this client's cache.
    pub async fn warm_block(&self, key: &str, block_len: usize) -> Result<()> {
        if let (Some(peer), Some(group)) = (self.owner_peer(key), self.group()) {
            match group
                .call(&peer, Op::Warm, key, block_len, (0, block_len))
                .await
            {
                Ok(r) if r.status == REPLY_OK => return Ok(()),
                _ => tracing::debug!("warming {key} here: its owner {} failed", peer.member.addr),
            }
        }
        if self.shared.cache.cached_bytes(key) >= u64::try_from(block_len).unwrap_or(u64::MAX) {
            return Ok(());
        }
        let data = self
            .fetch_block_via(key.to_string(), block_len, true)
            .await?;
        self.keep(key, data).await;
        Ok(())
    }

    async fn keep(&self, key: &str, data: Bytes) {
        self.shared.cache.put(key, data).await;
    }

    /// Bytes of block `key` cached: at its owner (if a peer answers) or here, whichever
    /// holds more.
    pub async fn cached_block_bytes(&self, key: &str, block_len: usize) -> u64 {
        let here = self.shared.cache.cached_bytes(key);
        let there = match (self.owner_peer(key), self.group()) {
            (Some(peer), Some(group)) => {
                match group.call(&peer, Op::Cached, key, block_len, (0, 0)).await {
                    Ok(r) if r.status == REPLY_OK => <[u8; 8]>::try_from(r.payload.as_ref())
                        .map(u64::from_be_bytes)
                        .unwrap_or(0),
                    _ => 0,
                }
            }
            _ => 0,
        };
        here.max(there)
    }

    /// Drop block `key` from this client's caches and from its owner's.
    pub async fn evict_block(&self, key: &str, block_len: usize) -> Result<()> {
        self.shared.recent.remove(key).await;
        self.shared.cache.remove(key).await;
        if let (Some(peer), Some(group)) = (self.owner_peer(key), self.group()) {
            let evicted = group.call(&peer, Op::Evict, key, block_len, (0, 0)).await;
            if !matches!(evicted, Ok(ref r) if r.status == REPLY_OK) {
                return Err(crate::ChunkError::Other(format!(
                    "cannot evict {key} at its owner {}",
                    peer.member.addr
                )));
            }
        }
        Ok(())
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
