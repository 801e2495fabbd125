//! The data layer over the memory store and the fault-injection wrapper: random writes
//! read back byte-exact, failed uploads leave nothing behind, damaged objects and cache
//! files are detected, the buffer budget and cache limits hold, and concurrent readers of
//! one cold block cause one GET.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
use common::bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use strata_chunk::ChunkOptions;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::cache::memory::MemoryCache;
use strata_chunk::cache::{BlockCache, CacheStats, NoCache};
use strata_chunk::{ChunkError, ChunkStore, block_key};
use strata_object::backend::Backend;
use strata_object::fault::{FaultControl, FaultPlan, Faulty};
use strata_object::metered::ObjectStats;
use strata_object::retry::RetryPolicy;
use strata_object::stack::{StackOptions, build};
use strata_object::{ObjectError, ObjectStore};
use strata_types::Slice;

const BS: u32 = 1000;

struct Rig {
    chunks: ChunkStore,
    raw: Arc<Backend>,
    faults: Arc<FaultControl>,
    stats: Arc<ObjectStats>,
}

fn rig(cache: Arc<dyn BlockCache>, buffer: u64) -> Rig {
    let raw = Arc::new(Backend::memory());
    let (faulty, faults) = Faulty::new(raw.clone());
    let retry = RetryPolicy {
        retries: 0,
        base_delay: Duration::from_millis(1),
        ..RetryPolicy::default()
    };
    let (store, stats) = build(
        Arc::new(faulty),
        &StackOptions {
            retry,
            ..StackOptions::default()
        },
    );
    let opts = ChunkOptions {
        block_size: BS,
        buffer_size: buffer,
        max_prefetch: 4,
        read_buffer: 0,
        ..ChunkOptions::default()
    };
    Rig {
        chunks: ChunkStore::new(store, cache, opts),
        raw,
        faults,
        stats,
    }
}

/// Apply writes the way a file system client would: continue the open slice when the
/// write fits it, otherwise finish it (committing its record) and start a new one.
async fn write_all(chunks: &ChunkStore, writes: &[(u32, Vec<u8>)]) -> Vec<Slice> {
    let mut committed = Vec::new();
    let mut open: Option<(strata_chunk::SliceWriter, u32)> = None;
    let mut next_id = 1u64;
    for (off, data) in writes {
        if let Some((w, pos)) = &mut open
            && *off >= *pos
            && w.accepts(*off - *pos)
        {
            w.write_at(*off - *pos, data, None).await.unwrap();
            continue;
        }
        if let Some((mut w, pos)) = open.take() {
            let id = w.id();
            let size = w.finish().await.unwrap();
            committed.push(Slice {
                pos,
                id,
                size,
                off: 0,
                len: size,
            });
        }
        let mut w = chunks.writer(next_id, *off);
        next_id += 1;
        w.write_at(0, data, None).await.unwrap();
        open = Some((w, *off));
    }
    if let Some((mut w, pos)) = open {
        let id = w.id();
        let size = w.finish().await.unwrap();
        committed.push(Slice {
            pos,
            id,
            size,
            off: 0,
            len: size,
        });
    }
    committed
}

fn run_random_writes(writes: Vec<(u32, usize, u64)>, reads: Vec<(u32, u32)>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let r = rig(Arc::new(MemoryCache::new(1 << 20)), 64 << 10);
        let mut reference = vec![0u8; 40_000];
        let writes: Vec<(u32, Vec<u8>)> = writes
            .into_iter()
            .map(|(off, len, seed)| {
                let data = bytes(len, seed);
                reference[off as usize..off as usize + len].copy_from_slice(&data);
                (off, data)
            })
            .collect();
        let slices = write_all(&r.chunks, &writes).await;
        for (off, len) in reads {
            let got = r.chunks.read(&slices, off, len).await.unwrap();
            let end = (off + len) as usize;
            assert_eq!(
                &got[..],
                &reference[off as usize..end],
                "read [{off}, {end})"
            );
        }
        let whole = r
            .chunks
            .read(&slices, 0, reference.len() as u32)
            .await
            .unwrap();
        assert_eq!(&whole[..], &reference[..]);
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Overlapping, sparse, unaligned writes across block boundaries read back exactly.
    #[test]
    fn random_writes_read_back_exactly(
        writes in prop::collection::vec((0u32..35_000, 1usize..4_000, any::<u64>()), 1..25),
        reads in prop::collection::vec((0u32..39_000, 1u32..1_000), 1..10),
    ) {
        run_random_writes(writes, reads);
    }
}

#[tokio::test]
async fn blocks_are_named_and_sized_as_documented() {
    let r = rig(Arc::new(NoCache::default()), 1 << 20);
    let mut w = r.chunks.writer(77, 0);
    w.write_at(0, &bytes(2500, 1), None).await.unwrap();
    assert_eq!(w.finish().await.unwrap(), 2500);
    let keys: Vec<String> = r
        .raw
        .list("", None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(
        keys,
        vec![
            block_key(77, 0, 1000),
            block_key(77, 1, 1000),
            block_key(77, 2, 500)
        ]
    );
    r.chunks.delete_slice(77, 2500).await.unwrap();
    assert!(r.raw.list("", None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn writes_that_do_not_continue_a_slice_are_refused() {
    let r = rig(Arc::new(NoCache::default()), 1 << 20);
    let mut w = r.chunks.writer(1, 0);
    w.write_at(0, &bytes(1500, 1), None).await.unwrap();
    assert!(matches!(
        w.write_at(2000, b"gap", None).await,
        Err(ChunkError::NeedNewSlice { .. })
    ));
    assert!(matches!(
        w.write_at(10, b"uploaded block", None).await,
        Err(ChunkError::NeedNewSlice { .. })
    ));
    w.write_at(1200, b"overwrite in the open block", None)
        .await
        .unwrap();
    let mut tail = r.chunks.writer(2, (64 << 20) - 10);
    assert!(matches!(
        tail.write_at(0, &[0; 11], None).await,
        Err(ChunkError::OutOfChunk { .. })
    ));
    assert_eq!(w.finish().await.unwrap(), 1500);
}

#[tokio::test]
async fn a_failed_upload_keeps_the_data_for_a_retry_and_abort_cleans_up() {
    let r = rig(Arc::new(NoCache::default()), 1 << 20);
    r.faults.set(FaultPlan {
        fail_puts_after: Some(2),
        ..FaultPlan::default()
    });
    let mut w = r.chunks.writer(9, 0);
    w.write_at(0, &bytes(5500, 2), None).await.unwrap();
    let err = w.finish().await.expect_err("the third upload fails");
    assert!(
        matches!(err, ChunkError::Object(ObjectError::Injected(_))),
        "{err}"
    );
    assert!(w.unstored_bytes() > 0, "the unstored blocks are still held");
    assert!(
        !w.accepts(5500),
        "a slice being finished takes no more writes"
    );
    r.faults.set(FaultPlan::default());
    assert_eq!(w.finish().await.unwrap(), 5500, "the retry stores the rest");
    assert_eq!(w.unstored_bytes(), 0);
    let slices = [Slice {
        pos: 0,
        id: 9,
        size: 5500,
        off: 0,
        len: 5500,
    }];
    assert_eq!(
        &r.chunks.read(&slices, 0, 5500).await.unwrap()[..],
        &bytes(5500, 2)[..],
        "every byte survived the failed attempt"
    );
    // A slice that cannot be committed is given up: its blocks go.
    let mut gone = r.chunks.writer(10, 0);
    gone.write_at(0, &bytes(2500, 3), None).await.unwrap();
    gone.finish().await.unwrap();
    gone.abort().await;
    let left: Vec<String> = r
        .raw
        .list("", None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert!(
        left.iter().all(|k| !k.contains("/10_")),
        "aborted slice's blocks were deleted: {left:?}"
    );
}

#[tokio::test]
async fn damaged_objects_are_errors_not_data() {
    let r = rig(Arc::new(NoCache::default()), 1 << 20);
    let mut w = r.chunks.writer(5, 0);
    w.write_at(0, &bytes(1000, 3), None).await.unwrap();
    w.finish().await.unwrap();
    let slices = [Slice {
        pos: 0,
        id: 5,
        size: 1000,
        off: 0,
        len: 1000,
    }];
    assert_eq!(
        &r.chunks.read(&slices, 0, 1000).await.unwrap()[..],
        &bytes(1000, 3)[..]
    );
    // Damage the stored object itself.
    let key = block_key(5, 0, 1000);
    let mut raw = r.raw.get(&key, None).await.unwrap().to_vec();
    raw[200] ^= 0xFF;
    r.raw.put(&key, Bytes::from(raw)).await.unwrap();
    let err = r
        .chunks
        .read(&slices, 0, 1000)
        .await
        .expect_err("corruption detected");
    assert!(
        matches!(err, ChunkError::Object(ObjectError::Corrupt { .. })),
        "{err}"
    );
    assert_eq!(r.stats.corrupt(), 1, "and counted");
}

#[tokio::test]
async fn damaged_cache_files_are_dropped_and_reread() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(DiskCache::open(&[dir.path().to_path_buf()], 1 << 20, 0.0).unwrap());
    let r = rig(cache.clone(), 1 << 20);
    let mut w = r.chunks.writer(6, 0);
    w.write_at(0, &bytes(1000, 4), None).await.unwrap();
    w.finish().await.unwrap();
    let slices = [Slice {
        pos: 0,
        id: 6,
        size: 1000,
        off: 0,
        len: 1000,
    }];
    r.chunks.read(&slices, 0, 1000).await.unwrap();
    let path = cache.path_of(&block_key(6, 0, 1000));
    // Fetched blocks are cached in the background; wait for it (the file is renamed into
    // place before the cache's index counts it).
    for _ in 0..200 {
        if path.exists() && cache.used_bytes() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await; // poll interval of a wait for the condition
    }
    let mut file = std::fs::read(&path).unwrap();
    file[0] ^= 1;
    std::fs::write(&path, file).unwrap();
    let gets = r.stats.requests("get", "ok");
    assert_eq!(
        &r.chunks.read(&slices, 0, 1000).await.unwrap()[..],
        &bytes(1000, 4)[..]
    );
    assert_eq!(CacheStats::get(&cache.stats().corrupt), 1);
    assert_eq!(
        r.stats.requests("get", "ok"),
        gets + 1,
        "re-read from the store"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_buffer_budget_holds_under_a_fast_writer() {
    let r = rig(Arc::new(NoCache::default()), 3 * u64::from(BS));
    r.faults.set(FaultPlan {
        delay: Duration::from_millis(20),
        ..FaultPlan::default()
    });
    let budget_peak = Arc::new(AtomicU64::new(0));
    let chunks = r.chunks.clone();
    let peak = budget_peak.clone();
    let sampler = tokio::spawn(async move {
        loop {
            peak.fetch_max(chunks.budget().in_use(), Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(1)).await; // sampling interval of the gauge under test
        }
    });
    let mut w = r.chunks.writer(11, 0);
    let data = bytes(30 * BS as usize, 5);
    for piece in data.chunks(700) {
        let off = w.len();
        w.write_at(off, piece, None).await.unwrap();
        assert!(r.chunks.budget().in_use() <= 3 * u64::from(BS));
    }
    w.finish().await.unwrap();
    sampler.abort();
    assert!(budget_peak.load(Ordering::Relaxed) <= 3 * u64::from(BS));
    assert!(budget_peak.load(Ordering::Relaxed) > 0);
    assert_eq!(
        r.chunks.budget().in_use(),
        0,
        "all returned after the uploads"
    );
    r.faults.set(FaultPlan::default());
    let slices = [Slice {
        pos: 0,
        id: 11,
        size: 30 * BS,
        off: 0,
        len: 30 * BS,
    }];
    assert_eq!(
        &r.chunks.read(&slices, 0, 30 * BS).await.unwrap()[..],
        &data[..]
    );
}

#[tokio::test]
async fn the_memory_cache_limit_holds() {
    let cache = Arc::new(MemoryCache::new(2500));
    let r = rig(cache.clone(), 1 << 20);
    let mut w = r.chunks.writer(12, 0);
    w.write_at(0, &bytes(10 * BS as usize, 6), None)
        .await
        .unwrap();
    w.finish().await.unwrap();
    let slices = [Slice {
        pos: 0,
        id: 12,
        size: 10 * BS,
        off: 0,
        len: 10 * BS,
    }];
    // Read block by block; each fetched block is cached in the background.
    for i in 0..10 {
        r.chunks.read(&slices, i * BS, BS).await.unwrap();
        let key = block_key(12, i, BS);
        for _ in 0..200 {
            assert!(cache.used_bytes() <= 2500, "the limit holds throughout");
            if cache.get(&key).await.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await; // poll interval of a wait for the condition
        }
    }
    assert!(cache.used_bytes() <= 2500);
    assert!(CacheStats::get(&cache.stats().evictions) >= 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_readers_of_a_cold_block_share_one_get() {
    let r = rig(Arc::new(MemoryCache::new(1 << 20)), 1 << 20);
    let mut w = r.chunks.writer(13, 0);
    w.write_at(0, &bytes(BS as usize, 7), None).await.unwrap();
    w.finish().await.unwrap();
    r.faults.set(FaultPlan {
        delay: Duration::from_millis(30),
        ..FaultPlan::default()
    });
    let slices = vec![Slice {
        pos: 0,
        id: 13,
        size: BS,
        off: 0,
        len: BS,
    }];
    let readers: Vec<_> = (0..10)
        .map(|i| {
            let chunks = r.chunks.clone();
            let slices = slices.clone();
            tokio::spawn(async move { chunks.read(&slices, i * 10, 100).await.unwrap() })
        })
        .collect();
    for (i, h) in readers.into_iter().enumerate() {
        let got = h.await.unwrap();
        assert_eq!(&got[..], &bytes(BS as usize, 7)[i * 10..i * 10 + 100]);
    }
    assert_eq!(r.stats.requests("get", "ok"), 1, "one GET for ten readers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetches_are_bounded_and_never_wait() {
    let r = rig(Arc::new(MemoryCache::new(1 << 20)), 1 << 20);
    let mut w = r.chunks.writer(14, 0);
    let data = bytes(20 * BS as usize, 8);
    w.write_at(0, &data, None).await.unwrap();
    w.finish().await.unwrap();
    r.faults.set(FaultPlan {
        delay: Duration::from_millis(50),
        ..FaultPlan::default()
    });
    let slices = [Slice {
        pos: 0,
        id: 14,
        size: 20 * BS,
        off: 0,
        len: 20 * BS,
    }];
    // Four slots: asking for twenty blocks starts four, returns at once and says how far
    // it got, so the caller can ask for the rest later.
    let started = std::time::Instant::now();
    let scheduled = r.chunks.prefetch(&slices, 0, 20 * BS);
    assert!(
        started.elapsed() < Duration::from_millis(40),
        "prefetch never waits"
    );
    assert_eq!(scheduled, 4 * BS, "the first four blocks were scheduled");
    let stats = r.chunks.stats();
    assert_eq!(stats.prefetches.load(Ordering::Relaxed), 4);
    assert_eq!(stats.prefetches_dropped.load(Ordering::Relaxed), 1);
    // A demand read of a prefetched block joins its fetch instead of fetching again.
    let got = r.chunks.read(&slices, 0, 100).await.unwrap();
    assert_eq!(&got[..], &data[..100]);
    assert_eq!(stats.joined_fetches.load(Ordering::Relaxed), 1);
    // The other prefetches end in the background: wait for their four GETs.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while r.stats.requests("get", "ok") < 4 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await; // poll interval
    }
    assert_eq!(
        r.stats.requests("get", "ok"),
        4,
        "each prefetched block fetched once"
    );
}

#[tokio::test]
async fn a_block_read_in_pieces_is_fetched_once() {
    let (store, stats) = build(Arc::new(Backend::memory()), &StackOptions::default());
    let opts = ChunkOptions {
        block_size: BS,
        buffer_size: 1 << 20,
        max_prefetch: 4,
        read_buffer: 1 << 20,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(store, Arc::new(NoCache::default()), opts);
    let mut w = chunks.writer(15, 0);
    let data = bytes(BS as usize, 9);
    w.write_at(0, &data, None).await.unwrap();
    w.finish().await.unwrap();
    let slices = [Slice {
        pos: 0,
        id: 15,
        size: BS,
        off: 0,
        len: BS,
    }];
    for off in (0..BS).step_by(100) {
        let got = chunks.read(&slices, off, 100).await.unwrap();
        assert_eq!(&got[..], &data[off as usize..off as usize + 100]);
    }
    assert_eq!(
        stats.requests("get", "ok"),
        1,
        "ten reads, one GET: the read buffer keeps the block"
    );
}

#[tokio::test]
async fn with_writeback_a_short_block_is_cached_when_uploaded_not_when_written() {
    use strata_object::writeback::{Writeback, WritebackOptions};
    let dir = tempfile::tempdir().unwrap();
    let remote: Arc<dyn ObjectStore> = Arc::new(Backend::memory());
    let wb = Writeback::open(
        WritebackOptions {
            keys: None,
            dir: dir.path().join("staging"),
            max_bytes: 1 << 20,
            upload_delay: Duration::from_secs(3600),
            uploaders: 1,
            stage_new: true,
        },
        remote.clone(),
    )
    .await
    .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    wb.start(stop.clone());
    let cache = Arc::new(MemoryCache::new(1 << 20));
    let opts = ChunkOptions {
        block_size: BS,
        read_buffer: 0,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(wb.clone(), cache.clone(), opts);
    assert!(chunks.set_staging(wb.clone()));
    let mut w = chunks.writer(21, 0);
    w.write_at(0, &bytes(1500, 4), None).await.unwrap();
    assert_eq!(w.finish().await.unwrap(), 1500);
    let (full, short) = (block_key(21, 0, 1000), block_key(21, 1, 500));
    for key in [&full, &short] {
        assert_eq!(cache.cached_bytes(key), 0, "nothing cached on write: {key}");
    }
    let slice = Slice {
        pos: 0,
        id: 21,
        size: 1500,
        off: 0,
        len: 1500,
    };
    let read = chunks.read(&[slice], 0, 1500).await.unwrap();
    assert_eq!(
        &read[..],
        &bytes(1500, 4)[..],
        "read from the staged copies"
    );
    assert!(remote.get(&short, None).await.is_err(), "not uploaded yet");
    wb.flush(Duration::from_secs(10)).await.unwrap();
    assert_eq!(cache.cached_bytes(&short), 500, "cached once uploaded");
    assert_eq!(remote.get(&short, None).await.unwrap().len(), 500);
    stop.cancel();
}
