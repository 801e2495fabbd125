//! The memory block cache (`--cache-dir memory`): blocks in RAM, LRU within a byte limit.

use parking_lot::Mutex;
use std::collections::HashMap;

use async_trait::async_trait;
use bytes::Bytes;

use super::{BlockCache, CacheStats, Lru};

#[derive(Debug, Default)]
struct Inner {
    lru: Lru,
    blocks: HashMap<String, Bytes>,
}

/// Blocks kept in memory.
#[derive(Debug)]
pub struct MemoryCache {
    inner: Mutex<Inner>,
    capacity: u64,
    stats: CacheStats,
}

impl MemoryCache {
    pub fn new(capacity: u64) -> MemoryCache {
        MemoryCache {
            inner: Mutex::default(),
            capacity,
            stats: CacheStats::default(),
        }
    }

    /// The entry under `key`, if held (and now the most recently used).
    pub fn peek(&self, key: &str) -> Option<Bytes> {
        let found = {
            let mut inner = self.inner.lock();
            inner.lru.touch(key);
            inner.blocks.get(key).cloned()
        };
        self.stats.record_lookup(found.is_some());
        found
    }

    /// Drop the entry under `key`, if held.
    pub fn forget(&self, key: &str) {
        let mut inner = self.inner.lock();
        inner.lru.remove(key);
        inner.blocks.remove(key);
    }

    /// Keep `data` under `key`, evicting the least recently used beyond the capacity.
    pub fn insert(&self, key: &str, data: Bytes) {
        let size = u64::try_from(data.len()).unwrap_or(u64::MAX);
        if size > self.capacity {
            return;
        }
        let mut inner = self.inner.lock();
        inner.lru.insert(key, size);
        inner.blocks.insert(key.to_string(), data);
        while inner.lru.total() > self.capacity {
            let Some((old, _)) = inner.lru.pop_oldest() else {
                break;
            };
            inner.blocks.remove(&old);
            CacheStats::bump(&self.stats.evictions);
        }
    }
}

#[async_trait]
impl BlockCache for MemoryCache {
    async fn get(&self, key: &str) -> Option<Bytes> {
        self.peek(key)
    }

    async fn put(&self, key: &str, data: Bytes) {
        self.insert(key, data);
    }

    fn holds_segments(&self) -> bool {
        true
    }

    /// Segments of a whole block held, else the segments held apart.
    async fn get_segments(
        &self,
        key: &str,
        block_len: usize,
        first: usize,
        last: usize,
    ) -> Vec<Option<Bytes>> {
        let whole = self.inner.lock().blocks.get(key).cloned();
        if let Some(block) = whole.filter(|b| b.len() == block_len) {
            self.stats.record_lookup(true);
            let seg = strata_object::checksum::SEGMENT;
            return (first..=last)
                .map(|i| {
                    let from = (i * seg).min(block_len);
                    Some(block.slice(from..((i + 1) * seg).min(block_len)))
                })
                .collect();
        }
        (first..=last)
            .map(|i| self.peek(&format!("{key}#{i}")))
            .collect()
    }

    async fn put_segments(&self, key: &str, _block_len: usize, first: usize, segments: &[Bytes]) {
        for (i, segment) in segments.iter().enumerate() {
            self.insert(&format!("{key}#{}", first + i), segment.clone());
        }
    }

    fn cached_bytes(&self, key: &str) -> u64 {
        let inner = self.inner.lock();
        let len = match inner.blocks.get(key) {
            Some(block) => block.len(),
            None => (0..segments_of(key))
                .filter_map(|i| inner.blocks.get(&format!("{key}#{i}")))
                .map(Bytes::len)
                .sum(),
        };
        u64::try_from(len).unwrap_or(u64::MAX)
    }

    async fn remove(&self, key: &str) {
        let mut inner = self.inner.lock();
        inner.lru.remove(key);
        inner.blocks.remove(key);
        // Its segments go with it (a deleted slice's blocks are never read again); the
        // block's size, and so its number of segments, ends its key.
        for i in 0..segments_of(key) {
            let k = format!("{key}#{i}");
            inner.lru.remove(&k);
            inner.blocks.remove(&k);
        }
    }

    fn stats(&self) -> &CacheStats {
        &self.stats
    }

    fn used_bytes(&self) -> u64 {
        self.inner.lock().lru.total()
    }
}

/// How many segments the block `key` has: its size ends its key.
fn segments_of(key: &str) -> usize {
    crate::block_len_of(key).map_or(0, |n| n.div_ceil(strata_object::checksum::SEGMENT))
}
