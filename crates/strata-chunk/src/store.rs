//! [`ChunkStore`] and the state its parts share ([`Shared`]): what a store is made of and
//! how it is set up. Reading is in [`crate::reader`], ranged reads in
//! [`crate::segments`], writing in [`crate::writer`], warmup in [`crate::warm`]; each adds
//! its methods to [`ChunkStore`] and none of them imports another.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_object::ObjectStore;
use strata_object::writeback::Writeback;
use tokio::sync::Semaphore;

use crate::ChunkStats;
use crate::buffer::BufferBudget;
use crate::cache::BlockCache;
use crate::cache::memory::MemoryCache;
use crate::group::{Group, Peer};
use crate::inflight::{DemandReads, Fetch, RunFetch};

/// Fetched blocks waiting to be written to the cache, at most.
const PENDING_CACHE_WRITES: usize = 8;

/// State shared by a store, its writers and its background fetches.
#[derive(Debug)]
pub(crate) struct Shared {
    pub store: Arc<dyn ObjectStore>,
    pub block_size: u32,
    pub budget: Arc<BufferBudget>,
    pub cache: Arc<dyn BlockCache>,
    /// Blocks read or prefetched lately, in memory: sequential readers take a block in
    /// several reads, and it must not be fetched (and verified) again for each.
    pub recent: MemoryCache,
    /// Segments read lately by random readers.
    pub segments: MemoryCache,
    /// `--cache-partial-only`: whole blocks are not written to the block cache.
    pub cache_partial_only: bool,
    /// The bytes a ranged GET verifies as one piece (see [`ObjectStore::range_unit`]).
    pub range_unit: usize,
    pub stats: ChunkStats,
    /// Demand reads in flight (low-priority warmup yields to them).
    pub reads: DemandReads,
    /// The cache group this client is in, if any (set once, after start).
    pub group: OnceLock<Arc<Group>>,
    /// This client's staging area with `--writeback` (set once, after start): group peers
    /// may ask it for blocks staged here and not uploaded yet.
    pub staging: OnceLock<Arc<Writeback>>,
    /// Block fetches in flight, by (block key, through a peer).
    pub inflight: Mutex<HashMap<(String, bool), Fetch>>,
    /// Segment fetches in flight, by (block key, segment index, through a peer).
    pub inflight_segments: Mutex<HashMap<(String, usize, bool), RunFetch>>,
    /// Room for background prefetches; a prefetch that finds none is dropped.
    pub prefetch_slots: Arc<Semaphore>,
    /// Room for background cache writes of fetched blocks.
    pub cache_writes: Arc<Semaphore>,
}

/// Settings of a [`ChunkStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkOptions {
    /// Block size of the volume (bytes).
    pub block_size: u32,
    /// Write buffer budget (`--buffer-size`, bytes).
    pub buffer_size: u64,
    /// Background prefetches allowed at once (`--prefetch`).
    pub max_prefetch: usize,
    /// Memory for recently read blocks (bytes).
    pub read_buffer: u64,
    /// Memory for hot segments of random readers (bytes).
    pub segment_buffer: u64,
    /// Keep only what random readers fetched in the block cache, not whole blocks of
    /// sequential scans (`--cache-partial-only`).
    pub cache_partial_only: bool,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            block_size: strata_types::DEFAULT_BLOCK_SIZE,
            buffer_size: 300 << 20,
            max_prefetch: 8,
            read_buffer: 64 << 20,
            segment_buffer: 64 << 20,
            cache_partial_only: false,
        }
    }
}

/// Slices to blocks to objects, with caching.
#[derive(Debug, Clone)]
pub struct ChunkStore {
    pub(crate) shared: Arc<Shared>,
}

impl ChunkStore {
    pub fn new(
        store: Arc<dyn ObjectStore>,
        cache: Arc<dyn BlockCache>,
        opts: ChunkOptions,
    ) -> ChunkStore {
        ChunkStore {
            shared: Arc::new(Shared {
                range_unit: store.range_unit(),
                store,
                block_size: opts.block_size.max(1),
                budget: Arc::new(BufferBudget::new(opts.buffer_size)),
                cache,
                recent: MemoryCache::new(opts.read_buffer),
                segments: MemoryCache::new(opts.segment_buffer),
                cache_partial_only: opts.cache_partial_only,
                stats: ChunkStats::default(),
                reads: DemandReads::default(),
                group: OnceLock::new(),
                staging: OnceLock::new(),
                inflight: Mutex::new(HashMap::new()),
                inflight_segments: Mutex::new(HashMap::new()),
                prefetch_slots: Arc::new(Semaphore::new(opts.max_prefetch)),
                cache_writes: Arc::new(Semaphore::new(PENDING_CACHE_WRITES)),
            }),
        }
    }

    pub fn block_size(&self) -> u32 {
        self.shared.block_size
    }

    pub fn budget(&self) -> &BufferBudget {
        &self.shared.budget
    }

    pub fn cache(&self) -> &Arc<dyn BlockCache> {
        &self.shared.cache
    }

    pub fn stats(&self) -> &ChunkStats {
        &self.shared.stats
    }

    /// Join a cache group: from now on blocks owned by a peer are asked of it first.
    /// False if a group was set already.
    pub fn set_group(&self, group: Arc<Group>) -> bool {
        self.shared.group.set(group).is_ok()
    }

    /// Let group peers read blocks staged in `wb` (`--writeback`) before they are uploaded.
    /// False if a staging area was set already.
    /// Small blocks are then cached when their upload ends, not when they are written
    /// (until then the staged copy serves reads).
    pub fn set_staging(&self, wb: Arc<Writeback>) -> bool {
        let shared = Arc::downgrade(&self.shared);
        let block_size = usize::try_from(self.shared.block_size).unwrap_or(usize::MAX);
        wb.on_uploaded(Box::new(move |key, data| {
            let shared = shared.upgrade();
            Box::pin(async move {
                if let Some(shared) = shared
                    && data.len() < block_size
                {
                    shared.cache.put(&key, data).await;
                }
            })
        }));
        self.shared.staging.set(wb).is_ok()
    }

    pub fn group(&self) -> Option<&Arc<Group>> {
        self.shared.group.get()
    }

    /// The peer owning block `key`, if this client is in a group and another member owns it.
    pub(crate) fn owner_peer(&self, key: &str) -> Option<Arc<Peer>> {
        self.shared.group.get()?.owner(key)
    }
}

/// Write segments a random reader fetched to the block cache, in the background (skipped
/// when too many cache writes are pending).
pub(crate) fn cache_segments_in_background(
    shared: &Arc<Shared>,
    key: &str,
    block_len: usize,
    first: usize,
    segments: &[Bytes],
) {
    if !shared.cache.holds_segments() {
        return;
    }
    let Ok(slot) = shared.cache_writes.clone().try_acquire_owned() else {
        return;
    };
    let (shared, key, segments) = (shared.clone(), key.to_string(), segments.to_vec());
    tokio::spawn(async move {
        shared
            .cache
            .put_segments(&key, block_len, first, &segments)
            .await;
        drop(slot);
    });
}
