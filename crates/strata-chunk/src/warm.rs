//! Warmup of blocks (`strata warmup`): fill, check or empty the cache that holds a block —
//! its owner's in a cache group (one warmup through any member fills the group), else
//! this client's. Warmed blocks are written to the block cache before the call returns.

use bytes::Bytes;
use strata_types::Slice;

use crate::Result;
use crate::cache::BlockCache;
use crate::group::wire::{Op, REPLY_OK};
use crate::store::ChunkStore;

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
