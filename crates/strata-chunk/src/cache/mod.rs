//! Block caches: a [`BlockCache`] keeps immutable blocks by object key. [`memory`] keeps
//! them in RAM (for diskless clients), [`disk`] in one or more local directories. Both
//! evict least-recently-used blocks to stay within their size; blocks never change once
//! written, so a cached block is never stale.

pub mod disk;
pub mod memory;
pub mod segment_file;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

/// Hit, miss and eviction counters of a cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
    /// Cached blocks found damaged (dropped and re-read from the store).
    pub corrupt: AtomicU64,
}

impl CacheStats {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a lookup as a hit or a miss.
    pub(crate) fn record_lookup(&self, hit: bool) {
        Self::bump(if hit { &self.hits } else { &self.misses });
    }
}

/// What [`BlockCache::get_range`] found: the bytes asked for, and the sealed slot of the
/// segment they lie in (a reader may keep it and open other bytes of it later).
#[derive(Debug, Clone)]
pub struct RangeHit {
    pub bytes: Bytes,
    pub slot: Bytes,
}

/// A cache of blocks by object key.
#[async_trait]
pub trait BlockCache: Send + Sync + fmt::Debug {
    /// The block, if cached and intact.
    async fn get(&self, key: &str) -> Option<Bytes>;
    /// Keep a block (may evict others; may decline blocks larger than the cache).
    async fn put(&self, key: &str, data: Bytes);
    /// Whether this cache keeps single segments (else the segment calls below do nothing
    /// and readers skip them).
    fn holds_segments(&self) -> bool {
        false
    }
    /// Segments `first..=last` of a block of `block_len` bytes (`SEGMENT` bytes each,
    /// the last maybe shorter), as far as they are cached and intact: one entry per
    /// segment. A cache that keeps whole blocks only has none.
    async fn get_segments(
        &self,
        key: &str,
        block_len: usize,
        first: usize,
        last: usize,
    ) -> Vec<Option<Bytes>> {
        let _ = (key, block_len);
        vec![None; last + 1 - first]
    }
    /// Whether this cache serves bytes from slots it keeps sealed ([`Self::get_range`],
    /// [`Self::open_range`]): an encrypted volume's disk cache, which opens only the
    /// 16 KiB units a read needs.
    fn serves_ranges(&self) -> bool {
        false
    }
    /// Bytes `[from, to)` (inside one segment) of a block of `block_len` bytes, with the
    /// segment's slot still sealed for [`Self::open_range`], when the segment is cached
    /// and the bytes open (a hit is counted; a miss is left for `get_segments` to count).
    async fn get_range(
        &self,
        key: &str,
        block_len: usize,
        from: usize,
        to: usize,
    ) -> Option<RangeHit> {
        let _ = (key, block_len, from, to);
        None
    }
    /// Bytes `[from, to)` of block `key` opened from a slot [`Self::get_range`] returned
    /// for the same segment; `None` if they do not open.
    fn open_range(
        &self,
        key: &str,
        block_len: usize,
        (from, to): (usize, usize),
        slot: &[u8],
    ) -> Option<Bytes> {
        let _ = (key, block_len, from, to, slot);
        None
    }
    /// Keep segments `first..` of a block of `block_len` bytes (a random reader's).
    async fn put_segments(&self, key: &str, block_len: usize, first: usize, segments: &[Bytes]) {
        let _ = (key, block_len, first, segments);
    }
    /// Forget a block (its slice was deleted).
    async fn remove(&self, key: &str);
    /// Bytes of block `key` held (whole block or some of its segments), without reading
    /// them or counting a lookup.
    fn cached_bytes(&self, key: &str) -> u64 {
        let _ = key;
        0
    }
    fn stats(&self) -> &CacheStats;
    /// Bytes of blocks held.
    fn used_bytes(&self) -> u64;
}

/// No cache at all (`--cache-size 0`).
#[derive(Debug, Default)]
pub struct NoCache {
    stats: CacheStats,
}

#[async_trait]
impl BlockCache for NoCache {
    async fn get(&self, _key: &str) -> Option<Bytes> {
        CacheStats::bump(&self.stats.misses);
        None
    }
    async fn put(&self, _key: &str, _data: Bytes) {}
    async fn remove(&self, _key: &str) {}
    fn stats(&self) -> &CacheStats {
        &self.stats
    }
    fn used_bytes(&self) -> u64 {
        0
    }
}

/// Least-recently-used order of keys with their sizes.
#[derive(Debug, Default)]
pub struct Lru {
    entries: HashMap<String, (u64, u64)>,
    order: BTreeMap<u64, String>,
    tick: u64,
    total: u64,
}

impl Lru {
    /// Add or refresh `key` as the most recently used, with `size` bytes.
    pub fn insert(&mut self, key: &str, size: u64) {
        self.remove(key);
        self.tick += 1;
        self.entries.insert(key.to_string(), (size, self.tick));
        self.order.insert(self.tick, key.to_string());
        self.total += size;
    }

    /// Mark `key` as just used; false if unknown.
    pub fn touch(&mut self, key: &str) -> bool {
        let Some(&(size, _)) = self.entries.get(key) else {
            return false;
        };
        self.insert(key, size);
        true
    }

    pub fn remove(&mut self, key: &str) -> Option<u64> {
        let (size, tick) = self.entries.remove(key)?;
        self.order.remove(&tick);
        self.total -= size;
        Some(size)
    }

    /// Remove and return the least recently used key.
    pub fn pop_oldest(&mut self) -> Option<(String, u64)> {
        let (_, key) = self.order.pop_first()?;
        let (size, _) = self.entries.remove(&key)?;
        self.total -= size;
        Some((key, size))
    }

    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_least_recently_used() {
        let mut lru = Lru::default();
        lru.insert("a", 10);
        lru.insert("b", 20);
        lru.insert("c", 30);
        assert!(lru.touch("a"));
        assert_eq!(lru.total(), 60);
        assert_eq!(lru.pop_oldest(), Some(("b".into(), 20)));
        assert_eq!(lru.pop_oldest(), Some(("c".into(), 30)));
        lru.insert("a", 5);
        assert_eq!(lru.total(), 5, "re-inserting replaces the size");
        assert_eq!(lru.remove("a"), Some(5));
        assert!(lru.is_empty());
        assert!(!lru.touch("zz"));
    }
}
