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
}

#[async_trait]
impl BlockCache for MemoryCache {
    async fn get(&self, key: &str) -> Option<Bytes> {
        let found = {
            let mut inner = self.inner.lock();
            inner.lru.touch(key);
            inner.blocks.get(key).cloned()
        };
        self.stats.record_lookup(found.is_some());
        found
    }

    async fn put(&self, key: &str, data: Bytes) {
        let size = data.len() as u64;
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

    async fn remove(&self, key: &str) {
        let mut inner = self.inner.lock();
        inner.lru.remove(key);
        inner.blocks.remove(key);
    }

    fn stats(&self) -> &CacheStats {
        &self.stats
    }

    fn used_bytes(&self) -> u64 {
        self.inner.lock().lru.total()
    }
}
