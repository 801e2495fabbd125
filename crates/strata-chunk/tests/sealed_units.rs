//! An encrypted volume whose objects are sealed in 16 KiB units: a small random read that
//! nothing would keep a whole segment for (no disk cache, no peer) fetches and opens only
//! the unit it lies in, keeps it in memory for the next read of it, and reads agree with
//! a reference everywhere; with a disk cache, reads still fetch whole segments for it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
use common::{bytes, write_slice};
use std::sync::Arc;

use proptest::prelude::*;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::cache::segment_file::Framing;
use strata_chunk::cache::{BlockCache, NoCache};
use strata_chunk::{ChunkOptions, ChunkStore};
use strata_object::backend::Backend;
use strata_object::checksum::SEGMENT;
use strata_object::metered::ObjectStats;
use strata_object::seal::{Cipher, DataKey, KeyRing, Keys};
use strata_object::sealed::Unit;
use strata_object::stack::{StackOptions, build};

fn keys() -> Arc<Keys> {
    let key = DataKey::generate(1, Cipher::Aes256Gcm).unwrap();
    Arc::new(Keys::new(KeyRing::new(1, vec![key]).unwrap(), None))
}

/// A chunk store over a sealed stack of `unit` with `cache`; its request counters.
fn sealed_store(
    unit: Unit,
    cache: Arc<dyn BlockCache>,
    keys: Arc<Keys>,
) -> (ChunkStore, Arc<ObjectStats>) {
    sealed_store_on(Arc::new(Backend::memory()), unit, cache, keys)
}

fn sealed_store_on(
    backend: Arc<Backend>,
    unit: Unit,
    cache: Arc<dyn BlockCache>,
    keys: Arc<Keys>,
) -> (ChunkStore, Arc<ObjectStats>) {
    let stack = StackOptions {
        keys: Some(keys),
        seal_unit: unit,
        ..StackOptions::default()
    };
    let (store, stats) = build(backend, &stack);
    let opts = ChunkOptions {
        block_size: 4 << 20,
        read_buffer: 0,
        segment_buffer: 8 << 20,
        ..ChunkOptions::default()
    };
    (ChunkStore::new(store, cache, opts), stats)
}

/// (GETs, bytes fetched) so far.
fn fetched(stats: &ObjectStats) -> (u64, u64) {
    (stats.requests("get", "ok"), stats.bytes_down())
}

#[tokio::test]
async fn a_small_read_fetches_only_its_unit_when_nothing_keeps_segments() {
    let (chunks, stats) = sealed_store(Unit::SMALL, Arc::new(NoCache::default()), keys());
    let data = bytes(1 << 20, 3);
    let s = write_slice(&chunks, 7, 0, &data).await;
    let unit = Unit::SMALL.bytes();
    let stride = u64::try_from(Unit::SMALL.stride()).unwrap();
    for off in [0usize, 5 * unit + 100, (1 << 20) - 4096] {
        let before = fetched(&stats);
        let got = chunks
            .read_ranged(&[s], u32::try_from(off).unwrap(), 4096)
            .await
            .unwrap();
        assert_eq!(&got[..], &data[off..off + 4096]);
        let after = fetched(&stats);
        assert_eq!(after.0 - before.0, 1, "one GET at {off}");
        assert_eq!(
            after.1 - before.1,
            stride,
            "one unit's stored bytes at {off}"
        );
        // The rest of the unit is kept in memory: no second GET for it.
        let near = off - off % unit + unit - 100;
        let got = chunks
            .read_ranged(&[s], u32::try_from(near).unwrap(), 100)
            .await
            .unwrap();
        assert_eq!(&got[..], &data[near..near + 100]);
        assert_eq!(fetched(&stats), after, "served from memory at {near}");
    }
    // A read across two units takes the whole segment, as before.
    let across = 3 * unit - 10;
    let before = fetched(&stats);
    let got = chunks
        .read_ranged(&[s], u32::try_from(across).unwrap(), 20)
        .await
        .unwrap();
    assert_eq!(&got[..], &data[across..across + 20]);
    assert_eq!(fetched(&stats).1 - before.1, 2 * stride);
}

#[tokio::test]
async fn large_units_and_disk_caches_keep_reading_whole_segments() {
    let data = bytes(1 << 20, 4);
    // Objects sealed in 32 KiB units: a segment is one unit.
    let (chunks, stats) = sealed_store(Unit::LARGE, Arc::new(NoCache::default()), keys());
    let s = write_slice(&chunks, 8, 0, &data).await;
    let before = fetched(&stats);
    chunks.read_ranged(&[s], 100_000, 4096).await.unwrap();
    let large = u64::try_from(Unit::LARGE.stride()).unwrap();
    assert_eq!(fetched(&stats).1 - before.1, large);
    // 16 KiB units behind a disk cache (written by another client, so not cached here):
    // the whole segment is fetched, for the cache.
    let (backend, keys) = (Arc::new(Backend::memory()), keys());
    let no_cache = Arc::new(NoCache::default());
    let (writer, _) = sealed_store_on(backend.clone(), Unit::SMALL, no_cache, keys.clone());
    let s = write_slice(&writer, 9, 0, &data).await;
    let dir = tempfile::tempdir().unwrap();
    let framing = Framing::Sealed(keys.clone());
    let cache = DiskCache::open_with(&[dir.path().to_path_buf()], 64 << 20, 0.0, framing).unwrap();
    let (chunks, stats) = sealed_store_on(backend, Unit::SMALL, Arc::new(cache), keys);
    let before = fetched(&stats);
    let got = chunks.read_ranged(&[s], 100_000, 4096).await.unwrap();
    assert_eq!(&got[..], &data[100_000..104_096]);
    let small = u64::try_from(Unit::SMALL.stride()).unwrap();
    assert_eq!(fetched(&stats).1 - before.1, 2 * small);
    assert_eq!(SEGMENT, 2 * Unit::SMALL.bytes());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Reads of any size anywhere in blocks of odd sizes (units and segments cut short at
    /// a block's end) give the written bytes, cold and from memory.
    #[test]
    fn unit_reads_match_the_reference(
        len in 1usize..300_000,
        reads in prop::collection::vec((0usize..300_000, 1usize..40_000), 1..16),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (chunks, _) = sealed_store(Unit::SMALL, Arc::new(NoCache::default()), keys());
            let data = bytes(len, 5);
            let s = write_slice(&chunks, 10, 0, &data).await;
            for (off, n) in reads {
                let off = off % len;
                let n = n.min(len - off);
                let (o, l) = (u32::try_from(off).unwrap(), u32::try_from(n).unwrap());
                let got = chunks.read_ranged(&[s], o, l).await.unwrap();
                assert_eq!(&got[..], &data[off..off + n], "{off}+{n} of {len}");
            }
        });
    }
}
