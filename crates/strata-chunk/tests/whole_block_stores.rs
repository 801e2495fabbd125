//! A store that sends blocks only whole (compressed here; an imported volume's encoded
//! JuiceFS blocks likewise): a random reader fetches a block whole once, and from then on
//! takes its bytes by range from the block cache — no further request, no decoding — on
//! a plain disk cache and on an encrypted volume's sealed one, reading only those bytes
//! from the cache.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
use common::{bytes, write_slice};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use strata_chunk::cache::{CacheStats, RangeHit};

use strata_chunk::cache::BlockCache;
use strata_chunk::cache::NoCache;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::cache::segment_file::Framing;
use strata_chunk::{ChunkOptions, ChunkStore};
use strata_object::ObjectStore;
use strata_object::backend::Backend;
use strata_object::compress::Codec;
use strata_object::metered::ObjectStats;
use strata_object::seal::{Cipher, DataKey, KeyRing, Keys};
use strata_object::stack::{StackOptions, build};

/// A disk cache that counts whole-block reads (a random read of a cached block should
/// take only its bytes, by range).
#[derive(Debug)]
struct Counting {
    inner: DiskCache,
    whole_reads: AtomicU64,
}

#[async_trait]
impl BlockCache for Counting {
    async fn get(&self, key: &str) -> Option<Bytes> {
        self.whole_reads.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key).await
    }
    async fn put(&self, key: &str, data: Bytes) {
        self.inner.put(key, data).await
    }
    fn holds_segments(&self) -> bool {
        self.inner.holds_segments()
    }
    async fn get_segments(&self, key: &str, len: usize, a: usize, b: usize) -> Vec<Option<Bytes>> {
        self.inner.get_segments(key, len, a, b).await
    }
    fn serves_ranges(&self) -> bool {
        self.inner.serves_ranges()
    }
    async fn get_range(&self, key: &str, len: usize, a: usize, b: usize) -> Option<RangeHit> {
        self.inner.get_range(key, len, a, b).await
    }
    fn open_range(&self, key: &str, len: usize, r: (usize, usize), slot: &[u8]) -> Option<Bytes> {
        self.inner.open_range(key, len, r, slot)
    }
    async fn put_segments(&self, key: &str, len: usize, first: usize, segments: &[Bytes]) {
        self.inner.put_segments(key, len, first, segments).await
    }
    async fn remove(&self, key: &str) {
        self.inner.remove(key).await
    }
    fn cached_bytes(&self, key: &str) -> u64 {
        self.inner.cached_bytes(key)
    }
    fn stats(&self) -> &CacheStats {
        self.inner.stats()
    }
    fn used_bytes(&self) -> u64 {
        self.inner.used_bytes()
    }
}

/// A writer with no cache and a reader with a disk cache, over one lz4-compressed stack
/// on one bucket; the reader's cache and request counters.
fn stores(
    framing: Framing,
    keys: Option<Arc<Keys>>,
    dir: &std::path::Path,
) -> (ChunkStore, ChunkStore, Arc<Counting>, Arc<ObjectStats>) {
    let stack = StackOptions {
        compression: Some(Codec::Lz4),
        keys,
        ..StackOptions::default()
    };
    let backend = Arc::new(Backend::memory());
    let (store, stats) = build(backend.clone(), &stack);
    assert!(
        !store.cheap_ranges_of("chunks/0/0/7_0_4"),
        "compressed blocks are sent whole"
    );
    let opts = ChunkOptions {
        block_size: 4 << 20,
        read_buffer: 0,
        segment_buffer: 0,
        ..ChunkOptions::default()
    };
    let writer = ChunkStore::new(build(backend, &stack).0, Arc::new(NoCache::default()), opts);
    let cache = Arc::new(Counting {
        inner: DiskCache::open_with(&[dir.to_path_buf()], 64 << 20, 0.0, framing).unwrap(),
        whole_reads: AtomicU64::new(0),
    });
    let reader = ChunkStore::new(store, cache.clone(), opts);
    (writer, reader, cache, stats)
}

async fn random_reads_after_the_first_come_from_the_cache(
    framing: Framing,
    keys: Option<Arc<Keys>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let (writer, chunks, cache, stats) = stores(framing, keys, dir.path());
    let data = bytes(3 << 20, 5);
    let s = write_slice(&writer, 7, 0, &data).await;
    let gets = || stats.requests("get", "ok");
    let first = chunks.read_ranged(&[s], 1000, 4096).await.unwrap();
    assert_eq!(&first[..], &data[1000..5096]);
    assert_eq!(gets(), 1, "the first read fetches the block whole");
    // The block reaches the cache in the background: wait for that.
    let key = strata_chunk::block_key(7, 0, 3 << 20);
    let started = std::time::Instant::now();
    while cache.cached_bytes(&key) < 3 << 20 {
        assert!(
            started.elapsed().as_secs() < 20,
            "the block was never cached"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await; // poll interval
    }
    let whole_before = cache.whole_reads.load(Ordering::Relaxed);
    for off in [0usize, 65_000, 1 << 20, (3 << 20) - 4096, 2_000_000] {
        let got = chunks
            .read_ranged(&[s], u32::try_from(off).unwrap(), 4096)
            .await
            .unwrap();
        assert_eq!(&got[..], &data[off..off + 4096], "at {off}");
    }
    assert_eq!(gets(), 1, "cached reads make no requests");
    assert_eq!(
        cache.whole_reads.load(Ordering::Relaxed),
        whole_before,
        "and read only their bytes from the cache, not the whole block"
    );
}

#[tokio::test]
async fn a_plain_cache_serves_whole_block_stores_by_range() {
    random_reads_after_the_first_come_from_the_cache(Framing::Checked, None).await;
}

#[tokio::test]
async fn a_sealed_cache_serves_whole_block_stores_by_range() {
    let key = DataKey::generate(1, Cipher::Aes256Gcm).unwrap();
    let keys = Arc::new(Keys::new(KeyRing::new(1, vec![key]).unwrap(), None));
    random_reads_after_the_first_come_from_the_cache(Framing::Sealed(keys.clone()), Some(keys))
        .await;
}
