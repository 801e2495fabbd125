//! Random readers take only the segments of a block they need: ranged reads agree with a
//! reference over blocks of every size, verify every segment they return, still read
//! objects of the previous format, and cost one ranged GET each against a slow S3 server;
//! an encrypted volume's disk cache serves them from the sealed units they lie in.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
use common::{bytes, write_slice};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use strata_chunk::ChunkOptions;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::cache::segment_file::{Framing, UNIT};
use strata_chunk::cache::{BlockCache, CacheStats, NoCache};
use strata_chunk::{ChunkError, ChunkStore, block_key};
use strata_object::backend::Backend;
use strata_object::checksum::SEGMENT;
use strata_object::compress::Codec;
use strata_object::conformance::{S3sFs, TestBackend};
use strata_object::fault::{FaultControl, FaultPlan, Faulty};
use strata_object::metered::ObjectStats;
use strata_object::retry::RetryPolicy;
use strata_object::seal::{Cipher, DataKey, KeyRing, Keys, SEALED_TRAILER};
use strata_object::stack::{StackOptions, build};
use strata_object::{ObjectError, ObjectStore};
use strata_types::Slice;

/// Header and per-segment trailer of a stored block (docs/FORMAT.md, object v2).
const HEADER: usize = 16;
const TRAILER: usize = 8;
const STRIDE: usize = SEGMENT + TRAILER;

struct Rig {
    chunks: ChunkStore,
    raw: Arc<dyn ObjectStore>,
    faults: Arc<FaultControl>,
    stats: Arc<ObjectStats>,
}

fn rig_on(
    backend: Arc<dyn ObjectStore>,
    cache: Arc<dyn BlockCache>,
    block_size: u32,
    compression: Option<Codec>,
) -> Rig {
    let (faulty, faults) = Faulty::new(backend.clone());
    let stack = StackOptions {
        compression,
        retry: RetryPolicy {
            retries: 0,
            ..RetryPolicy::default()
        },
        ..StackOptions::default()
    };
    let (store, stats) = build(Arc::new(faulty), &stack);
    let opts = ChunkOptions {
        block_size,
        buffer_size: 64 << 20,
        read_buffer: 0,
        segment_buffer: 0,
        ..ChunkOptions::default()
    };
    Rig {
        chunks: ChunkStore::new(store, cache, opts),
        raw: backend,
        faults,
        stats,
    }
}

fn rig(block_size: u32) -> Rig {
    rig_on(
        Arc::new(Backend::memory()),
        Arc::new(NoCache::default()),
        block_size,
        None,
    )
}

/// A block size that is not a multiple of the segment size, so blocks end mid-segment.
const BS: u32 = 200_000;

/// Three slices, later ones over earlier ones: the second starts mid-block of its own
/// slice (it references bytes from `off`), the third is shorter than a segment; the
/// last block of each slice is short.
async fn layered_chunk(chunks: &ChunkStore) -> (Vec<Slice>, Vec<u8>) {
    let mut reference = vec![0u8; 1_200_000];
    let a = bytes(1_000_000, 1);
    let mut slices = vec![write_slice(chunks, 1, 0, &a).await];
    reference[..a.len()].copy_from_slice(&a);
    let b = bytes(700_000, 2);
    let mut s = write_slice(chunks, 2, 150_000, &b).await;
    // Reference only b[123_457..600_000], placed at 273_457.
    s.off = 123_457;
    s.len = 600_000 - 123_457;
    s.pos = 150_000 + 123_457;
    reference[273_457..273_457 + s.len as usize].copy_from_slice(&b[123_457..600_000]);
    slices.push(s);
    let c = bytes(5_000, 3);
    slices.push(write_slice(chunks, 3, 1_100_000, &c).await);
    reference[1_100_000..1_105_000].copy_from_slice(&c);
    (slices, reference)
}

fn check_reads(reads: Vec<(u32, u32)>, cache: Arc<dyn BlockCache>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let r = rig_on(Arc::new(Backend::memory()), cache, BS, None);
        let (slices, reference) = layered_chunk(&r.chunks).await;
        // Twice: the second pass may be served from cached segments.
        for _ in 0..2 {
            for &(off, len) in &reads {
                let got = r.chunks.read_ranged(&slices, off, len).await.unwrap();
                let end = (off as usize + len as usize).min(reference.len());
                assert_eq!(&got[..], &reference[off as usize..end], "[{off}, {end})");
            }
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Ranged reads anywhere (inside segments, across segments, blocks and slices, in
    /// short last blocks and holes) return the reference bytes, cold and cached.
    #[test]
    fn ranged_reads_match_the_reference(
        reads in prop::collection::vec((0u32..1_199_000, 1u32..300_000), 1..12),
    ) {
        let reads = reads.into_iter().map(|(off, len)| (off, len.min(1_200_000 - off))).collect();
        check_reads(reads, Arc::new(NoCache::default()));
    }

    #[test]
    fn ranged_reads_through_a_disk_cache_match_the_reference(
        reads in prop::collection::vec((0u32..1_199_000, 1u32..100_000), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(DiskCache::open(&[dir.path().to_path_buf()], 64 << 20, 0.0).unwrap());
        let reads = reads.into_iter().map(|(off, len)| (off, len.min(1_200_000 - off))).collect();
        check_reads(reads, cache);
    }

    /// The same through an encrypted volume's disk cache, which serves ranges by opening
    /// only the sealed units they lie in.
    #[test]
    fn ranged_reads_through_a_sealed_disk_cache_match_the_reference(
        reads in prop::collection::vec((0u32..1_199_000, 1u32..100_000), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let dirs = [dir.path().to_path_buf()];
        let cache = DiskCache::open_with(&dirs, 64 << 20, 0.0, sealed_framing()).unwrap();
        let reads = reads.into_iter().map(|(off, len)| (off, len.min(1_200_000 - off))).collect();
        check_reads(reads, Arc::new(cache));
    }
}

fn sealed_framing() -> Framing {
    let key = DataKey::generate(1, Cipher::Aes256Gcm).unwrap();
    Framing::Sealed(Arc::new(Keys::new(
        KeyRing::new(1, vec![key]).unwrap(),
        None,
    )))
}

/// A 4 KiB random read served by a sealed disk cache opens only its unit: a damaged unit
/// elsewhere in the same segment costs that read nothing (no GET, nothing dropped), and a
/// read that touches it is re-read from the store.
#[tokio::test]
async fn a_sealed_cache_serves_a_small_read_from_its_unit_alone() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_path_buf()];
    let cache = Arc::new(DiskCache::open_with(&dirs, 64 << 20, 0.0, sealed_framing()).unwrap());
    let r = rig_on(Arc::new(Backend::memory()), cache.clone(), 4 << 20, None);
    let data = bytes(1 << 20, 12);
    let s = write_slice(&r.chunks, 61, 0, &data).await;
    let key = block_key(61, 0, 1 << 20);
    cache.put(&key, Bytes::from(data.clone())).await;
    let path = cache.path_of(&key);
    let mut raw = std::fs::read(&path).unwrap();
    // Unit 1 of segment 0 (bytes UNIT..2 × UNIT) damaged.
    raw[UNIT + SEALED_TRAILER + 10] ^= 1;
    std::fs::write(&path, raw).unwrap();
    let gets = r.stats.requests("get", "ok");
    for off in [0usize, 4096, 2 * UNIT + 100, 500_000] {
        let got = r.chunks.read_ranged(&[s], off as u32, 4096).await.unwrap();
        assert_eq!(&got[..], &data[off..off + 4096]);
    }
    assert_eq!(r.stats.requests("get", "ok"), gets, "served by the cache");
    assert_eq!(CacheStats::get(&cache.stats().corrupt), 0);
    let got = r
        .chunks
        .read_ranged(&[s], UNIT as u32 + 7, 1000)
        .await
        .unwrap();
    assert_eq!(&got[..], &data[UNIT + 7..UNIT + 1007]);
    assert_eq!(
        r.stats.requests("get", "ok"),
        gets + 1,
        "re-read from the store"
    );
    assert_eq!(CacheStats::get(&cache.stats().corrupt), 1);
}

/// Every segment boundary and both ends of every block size from 1 byte to several
/// segments plus a bit.
#[tokio::test]
async fn blocks_of_every_size_read_by_range() {
    for size in [
        1,
        100,
        SEGMENT - 1,
        SEGMENT,
        SEGMENT + 1,
        3 * SEGMENT,
        3 * SEGMENT + 7,
    ] {
        let r = rig(u32::try_from(4 * SEGMENT).unwrap());
        let data = bytes(size, size as u64);
        let s = write_slice(&r.chunks, 9, 0, &data).await;
        let mut edges = vec![0, size - 1, size / 2];
        edges.extend((1..=3).map(|i| i * SEGMENT).filter(|&e| e < size));
        for &a in &edges {
            for &b in &edges {
                if a > b {
                    continue;
                }
                let (off, len) = (u32::try_from(a).unwrap(), u32::try_from(b - a + 1).unwrap());
                let got = r.chunks.read_ranged(&[s], off, len).await.unwrap();
                assert_eq!(&got[..], &data[a..=b], "size {size}, [{a}, {b}]");
            }
        }
    }
}

fn is_corrupt(e: &ChunkError) -> bool {
    matches!(e, ChunkError::Object(ObjectError::Corrupt { .. }))
}

/// A flipped bit anywhere in a segment (its data or its trailer) is caught by a ranged
/// read of that segment, while the other segments still read.
#[tokio::test]
async fn a_flipped_bit_in_any_segment_is_caught_by_a_ranged_read() {
    let len = 3 * SEGMENT + 5_000;
    let r = rig(u32::try_from(4 * SEGMENT).unwrap());
    let data = bytes(len, 11);
    let s = write_slice(&r.chunks, 21, 0, &data).await;
    let key = block_key(21, 0, u32::try_from(len).unwrap());
    let clean = r.raw.get(&key, None).await.unwrap();
    let segments = len.div_ceil(SEGMENT);
    for damaged in 0..segments {
        let seg_len = (len - damaged * SEGMENT).min(SEGMENT);
        for at in [0, seg_len / 2, seg_len - 1, seg_len, seg_len + TRAILER - 1] {
            let mut raw = clean.to_vec();
            raw[HEADER + damaged * STRIDE + at] ^= 0x10;
            r.raw.put(&key, Bytes::from(raw)).await.unwrap();
            for index in 0..segments {
                let off = u32::try_from(index * SEGMENT + 17).unwrap();
                let got = r.chunks.read_ranged(&[s], off, 100).await;
                if index == damaged {
                    let err = got.expect_err("damage must be caught");
                    assert!(is_corrupt(&err), "segment {index}, byte {at}: {err}");
                } else {
                    let got = got.unwrap();
                    assert_eq!(&got[..], &data[index * SEGMENT + 17..index * SEGMENT + 117]);
                }
            }
        }
    }
    // A cut-short object is caught as well, by a read of its lost tail.
    r.raw
        .put(&key, clean.slice(..clean.len() - 10))
        .await
        .unwrap();
    let off = u32::try_from(3 * SEGMENT).unwrap();
    let err = r.chunks.read_ranged(&[s], off, 100).await.unwrap_err();
    assert!(is_corrupt(&err), "{err}");
}

/// Blocks stored by earlier versions (object v1: `STB1`, CRC32C of the payload, length,
/// payload) still read, whole and by range, and their damage is still caught.
#[tokio::test]
async fn blocks_of_the_previous_format_still_read() {
    let r = rig(1 << 20);
    let data = bytes(300_000, 5);
    let key = block_key(31, 0, 300_000);
    let mut v1 = b"STB1".to_vec();
    v1.extend_from_slice(&crc32c::crc32c(&data).to_le_bytes());
    v1.extend_from_slice(&300_000u32.to_le_bytes());
    v1.extend_from_slice(&data);
    r.raw.put(&key, Bytes::from(v1.clone())).await.unwrap();
    let s = Slice {
        pos: 0,
        id: 31,
        size: 300_000,
        off: 0,
        len: 300_000,
    };
    for (off, len) in [(0u32, 10u32), (40_000, 70_000), (299_990, 10)] {
        let (a, b) = (off as usize, off as usize + len as usize);
        let got = r.chunks.read_ranged(&[s], off, len).await.unwrap();
        assert_eq!(&got[..], &data[a..b]);
        let got = r.chunks.read(&[s], off, len).await.unwrap();
        assert_eq!(&got[..], &data[a..b]);
    }
    v1[12 + 150_000] ^= 1;
    r.raw.put(&key, Bytes::from(v1)).await.unwrap();
    let err = r.chunks.read_ranged(&[s], 0, 10).await.unwrap_err();
    assert!(is_corrupt(&err), "{err}");
}

/// Through compression (whose ranged GETs would fetch whole objects anyway) random
/// readers take whole blocks: many reads of one block cost one GET.
#[tokio::test]
async fn compressed_volumes_read_whole_blocks() {
    let stack = StackOptions {
        compression: Some(Codec::Lz4),
        ..StackOptions::default()
    };
    let (store, stats) = build(Arc::new(Backend::memory()), &stack);
    let opts = ChunkOptions {
        block_size: 1 << 20,
        read_buffer: 8 << 20,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(store, Arc::new(NoCache::default()), opts);
    let data = bytes(1 << 20, 8);
    let s = write_slice(&chunks, 41, 0, &data).await;
    for i in 0..8usize {
        let off = i * 100_000;
        let got = chunks.read_ranged(&[s], off as u32, 4096).await.unwrap();
        assert_eq!(&got[..], &data[off..off + 4096]);
    }
    assert_eq!(stats.requests("get", "ok"), 1, "one whole GET");
}

/// Against an S3 server slowed to 20 ms per request: cold 4 KiB random reads cost one
/// ranged GET of one segment each, never the whole 4 MiB block; concurrent readers of one
/// segment share a GET.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_random_reads_cost_one_small_get_each_on_slow_s3() {
    let server = S3sFs::start();
    let r = rig_on(server.store(), Arc::new(NoCache::default()), 4 << 20, None);
    let data = bytes(8 << 20, 9);
    let s = write_slice(&r.chunks, 51, 0, &data).await;
    r.faults.set(FaultPlan {
        delay: Duration::from_millis(20),
        ..FaultPlan::default()
    });
    let (gets, down) = (r.stats.requests("get", "ok"), r.stats.bytes_down());
    // 40 reads, each in a segment of its own, spread over both blocks.
    let offsets: Vec<usize> = (0..40).map(|i| (i * 6 + 1) * SEGMENT + 4096).collect();
    for &off in &offsets {
        let got = r.chunks.read_ranged(&[s], off as u32, 4096).await.unwrap();
        assert_eq!(&got[..], &data[off..off + 4096]);
    }
    let reads = offsets.len() as u64;
    assert_eq!(
        r.stats.requests("get", "ok") - gets,
        reads,
        "one GET per read"
    );
    assert_eq!(
        r.stats.bytes_down() - down,
        reads * STRIDE as u64,
        "each GET fetched one segment and its trailer"
    );
    // Ten concurrent readers of one cold segment: one GET.
    let gets = r.stats.requests("get", "ok");
    let readers: Vec<_> = (0..10u32)
        .map(|i| {
            let chunks = r.chunks.clone();
            tokio::spawn(async move { chunks.read_ranged(&[s], 5_000_000 + i * 100, 100).await })
        })
        .collect();
    for (i, h) in readers.into_iter().enumerate() {
        let got = h.await.unwrap().unwrap();
        let off = 5_000_000 + i * 100;
        assert_eq!(&got[..], &data[off..off + 100]);
    }
    assert_eq!(r.stats.requests("get", "ok") - gets, 1, "shared by all ten");
}

/// `--cache-partial-only`: what random readers fetched is cached, whole blocks that
/// sequential readers fetched are not; a later random read of the cached segment is
/// served by the cache without a GET.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_partial_only_keeps_segments_not_whole_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(DiskCache::open(&[dir.path().to_path_buf()], 64 << 20, 0.0).unwrap());
    let (store, stats) = build(Arc::new(Backend::memory()), &StackOptions::default());
    let opts = ChunkOptions {
        block_size: 1 << 20,
        read_buffer: 0,
        segment_buffer: 0,
        cache_partial_only: true,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(store, cache.clone(), opts);
    let data = bytes(2 << 20, 12);
    let s = write_slice(&chunks, 61, 0, &data).await;
    // A sequential reader takes block 0 whole; a random one a segment of block 1.
    let got = chunks.read(&[s], 0, 1 << 20).await.unwrap();
    assert_eq!(&got[..], &data[..1 << 20]);
    let off = (1 << 20) + 3 * SEGMENT + 10;
    let got = chunks.read_ranged(&[s], off as u32, 100).await.unwrap();
    assert_eq!(&got[..], &data[off..off + 100]);
    // Segments are cached in the background: wait for them.
    let started = std::time::Instant::now();
    while cache.used_bytes() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "segment never cached"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(
        cache.used_bytes(),
        (SEGMENT + TRAILER) as u64,
        "one segment, no block"
    );
    assert!(cache.get(&block_key(61, 0, 1 << 20)).await.is_none());
    let gets = stats.requests("get", "ok");
    let got = chunks
        .read_ranged(&[s], off as u32 + 50, 100)
        .await
        .unwrap();
    assert_eq!(&got[..], &data[off + 50..off + 150]);
    assert_eq!(stats.requests("get", "ok"), gets, "served by the cache");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_random_read_inside_a_block_being_prefetched_joins_the_fetch() {
    let r = rig(BS);
    let data = bytes(usize::try_from(BS).unwrap(), 9);
    let slice = write_slice(&r.chunks, 21, 0, &data).await;
    let gets_before = r.stats.requests("get", "ok");
    r.faults.set(FaultPlan {
        delay: Duration::from_millis(300),
        ..FaultPlan::default()
    });
    // A sequential reader's prefetch of the block is under way...
    assert_eq!(r.chunks.prefetch(&[slice], 0, BS), BS);
    // ...when a read the reader's window took for a random one lands inside it.
    let got = r.chunks.read_ranged(&[slice], 70_000, 5000).await.unwrap();
    assert_eq!(got.as_ref(), &data[70_000..75_000]);
    assert_eq!(
        r.stats.requests("get", "ok") - gets_before,
        1,
        "one GET: the whole block, not its segments as well"
    );
}
