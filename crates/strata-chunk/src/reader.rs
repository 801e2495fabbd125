//! [`ChunkStore`]: the data layer's entry point. Reads resolve a chunk's slice list into a
//! plan (later slices win, holes are zeros) and fetch what the plan needs in parallel
//! through the caches, never fetching the same thing twice at once: a second reader waits
//! for the fetch in flight. A sequential reader ([`ChunkStore::read`]) takes whole
//! blocks (and prefetches ahead); a random reader ([`ChunkStore::read_ranged`]) takes only
//! the segments of a block its bytes lie in ([`crate::segments`]).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared as SharedFuture};
use parking_lot::Mutex;
use strata_object::ObjectStore;
use strata_object::writeback::Writeback;
use strata_types::{CHUNK_SIZE, Slice, build_read_plan};
use tokio::sync::Semaphore;

use crate::buffer::BufferBudget;
use crate::cache::BlockCache;
use crate::cache::memory::MemoryCache;
use crate::group::{Group, Peer};
use crate::segments::RunFetch;
use crate::writer::SliceWriter;
use crate::{ChunkError, ChunkStats, Result, block_key, block_sizes};

type Fetch = SharedFuture<BoxFuture<'static, Result<Bytes>>>;

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
    /// The store answers ranged GETs without fetching whole objects (see
    /// [`ObjectStore::cheap_ranges`]); when it does not, random readers take whole blocks.
    cheap_ranges: bool,
    pub stats: ChunkStats,
    /// Demand reads in flight (low-priority warmup yields to them).
    pub reads: crate::warm::DemandReads,
    /// The cache group this client is in, if any (set once, after start).
    pub group: OnceLock<Arc<Group>>,
    /// This client's staging area with `--writeback` (set once, after start): group peers
    /// may ask it for blocks staged here and not uploaded yet.
    pub staging: OnceLock<Arc<Writeback>>,
    /// Block fetches in flight, by (block key, through a peer).
    inflight: Mutex<HashMap<(String, bool), Fetch>>,
    /// Segment fetches in flight, by (block key, segment index, through a peer).
    pub inflight_segments: Mutex<HashMap<(String, usize, bool), RunFetch>>,
    /// Room for background prefetches; a prefetch that finds none is dropped.
    prefetch_slots: Arc<Semaphore>,
    /// Room for background cache writes of fetched blocks.
    cache_writes: Arc<Semaphore>,
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

/// A piece of a read: bytes `[from, to)` of block `key` go to `out` in the result.
pub(crate) struct Piece {
    pub key: String,
    pub block_len: usize,
    from: usize,
    to: usize,
    out: usize,
}

impl ChunkStore {
    pub fn new(
        store: Arc<dyn ObjectStore>,
        cache: Arc<dyn BlockCache>,
        opts: ChunkOptions,
    ) -> ChunkStore {
        ChunkStore {
            shared: Arc::new(Shared {
                cheap_ranges: store.cheap_ranges(),
                store,
                block_size: opts.block_size.max(1),
                budget: Arc::new(BufferBudget::new(opts.buffer_size)),
                cache,
                recent: MemoryCache::new(opts.read_buffer),
                segments: MemoryCache::new(opts.segment_buffer),
                cache_partial_only: opts.cache_partial_only,
                stats: ChunkStats::default(),
                reads: crate::warm::DemandReads::default(),
                group: OnceLock::new(),
                staging: OnceLock::new(),
                inflight: Mutex::new(HashMap::new()),
                inflight_segments: Mutex::new(HashMap::new()),
                prefetch_slots: Arc::new(Semaphore::new(opts.max_prefetch)),
                cache_writes: Arc::new(Semaphore::new(PENDING_CACHE_WRITES)),
            }),
        }
    }

    /// A writer for slice `id` starting at `pos` within its chunk.
    pub fn writer(&self, id: u64, pos: u32) -> SliceWriter {
        let limit = u32::try_from(CHUNK_SIZE - u64::from(pos).min(CHUNK_SIZE)).unwrap_or(u32::MAX);
        SliceWriter::new(self.shared.clone(), id, limit)
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

    /// Bytes `[off, off+len)` of a chunk whose slice list is `slices`, fetching whole
    /// blocks (a sequential reader's); ranges no slice covers read as zeros.
    pub async fn read(&self, slices: &[Slice], off: u32, len: u32) -> Result<Bytes> {
        self.read_with(slices, off, len, false).await
    }

    /// [`ChunkStore::read`] for a random reader: only the segments the bytes lie in
    /// (whole blocks still, from a store whose ranged GETs fetch whole objects).
    pub async fn read_ranged(&self, slices: &[Slice], off: u32, len: u32) -> Result<Bytes> {
        let ranged = self.shared.cheap_ranges;
        self.read_with(slices, off, len, ranged).await
    }

    async fn read_with(&self, slices: &[Slice], off: u32, len: u32, ranged: bool) -> Result<Bytes> {
        let end =
            u32::try_from((u64::from(off) + u64::from(len)).min(CHUNK_SIZE)).unwrap_or(u32::MAX);
        let pieces = self.plan(slices, off, end);
        let _demand = self.shared.reads.start();
        let in_group = self.shared.group.get().is_some();
        let fetches = pieces.iter().map(move |p| async move {
            // In a cache group, owners keep whole blocks (one GET each, whatever part
            // was asked first); a random reader asks a peer only for its bytes.
            let ranged = ranged
                && (!in_group || self.owner_peer(&p.key).is_some())
                && !self.whole_block_in_flight(&p.key);
            if ranged {
                self.fetch_range(&p.key, p.block_len, p.from, p.to).await
            } else {
                let block = self.fetch_block(p.key.clone(), p.block_len).await?;
                Ok(block.slice(p.from..p.to))
            }
        });
        let mut blocks = futures::future::join_all(fetches).await;
        let total = usize::try_from(end.saturating_sub(off)).unwrap_or(0);
        // The common case, a read inside one block: hand out a view of it, no copy.
        if let ([piece], [Ok(bytes)]) = (pieces.as_slice(), blocks.as_slice())
            && piece.out == 0
            && piece.to - piece.from == total
        {
            return Ok(bytes.clone());
        }
        let mut out = BytesMut::zeroed(total);
        let blocks = std::mem::take(&mut blocks);
        for (piece, bytes) in pieces.iter().zip(blocks) {
            let bytes = bytes?;
            out[piece.out..piece.out + bytes.len()].copy_from_slice(&bytes);
        }
        Ok(out.freeze())
    }

    /// Which block bytes make up `[off, end)` of the chunk.
    pub(crate) fn plan(&self, slices: &[Slice], off: u32, end: u32) -> Vec<Piece> {
        let bs = self.shared.block_size;
        let mut pieces = Vec::new();
        for p in build_read_plan(slices, off, end)
            .into_iter()
            .filter(|p| p.id != 0)
        {
            // Bytes [p.off, p.off + p.len) of slice p.id, placed at p.pos in the chunk.
            let mut done = 0u32;
            while done < p.len {
                let at = p.off + done;
                let (index, within) = (at / bs, at % bs);
                let block_len = (p.size - index * bs).min(bs);
                let take = (block_len - within).min(p.len - done);
                pieces.push(Piece {
                    key: block_key(p.id, index, block_len),
                    block_len: to_usize(block_len),
                    from: to_usize(within),
                    to: to_usize(within + take),
                    out: to_usize(p.pos + done - off),
                });
                done += take;
            }
        }
        pieces
    }

    /// Whether a fetch of the whole block `key` from the store is under way (a prefetch,
    /// say): a random read inside it waits for it rather than fetching its segments too.
    fn whole_block_in_flight(&self, key: &str) -> bool {
        self.shared
            .inflight
            .lock()
            .contains_key(&(key.to_string(), false))
    }

    /// A whole block, from the caches, the block's owner in the cache group, or the
    /// store; concurrent callers share one fetch.
    pub async fn fetch_block(&self, key: String, expected: usize) -> Result<Bytes> {
        self.fetch_block_via(key, expected, false).await
    }

    /// [`ChunkStore::fetch_block`] never asking a peer (`local`): how an owner serves its
    /// peers and warms its own cache. Blocks it fetches are written to the block cache
    /// before it returns.
    pub(crate) async fn fetch_block_via(
        &self,
        key: String,
        expected: usize,
        local: bool,
    ) -> Result<Bytes> {
        if let Some(data) = self.shared.recent.get(&key).await
            && data.len() == expected
        {
            return Ok(data);
        }
        if let Some(data) = self.shared.cache.get(&key).await {
            if data.len() == expected {
                self.shared.recent.put(&key, data.clone()).await;
                return Ok(data);
            }
            self.shared.cache.remove(&key).await;
        }
        let peer = if local { None } else { self.owner_peer(&key) };
        self.shared_fetch(key, expected, peer).await
    }

    fn shared_fetch(&self, key: String, expected: usize, peer: Option<Arc<Peer>>) -> Fetch {
        let mut inflight = self.shared.inflight.lock();
        let slot = (key, peer.is_some());
        if let Some(existing) = inflight.get(&slot) {
            ChunkStats::bump(&self.shared.stats.joined_fetches);
            return existing.clone();
        }
        // A fetch that ended between the caller's cache lookups and this lock left the
        // block in the memory buffer (before leaving the table): do not fetch it again.
        if let Some(data) = self.shared.recent.peek(&slot.0)
            && data.len() == expected
        {
            return futures::future::ready(Ok(data)).boxed().shared();
        }
        let fetch = fetch_now(self.shared.clone(), slot.0.clone(), expected, peer)
            .boxed()
            .shared();
        inflight.insert(slot, fetch.clone());
        fetch
    }

    /// Fetch the blocks of `[off, off+len)` in the background while prefetch slots are
    /// free (a prefetch must never delay demand reads). Returns how many bytes from `off`
    /// on were scheduled; the caller asks for the rest again later.
    pub fn prefetch(&self, slices: &[Slice], off: u32, len: u32) -> u32 {
        let end =
            u32::try_from((u64::from(off) + u64::from(len)).min(CHUNK_SIZE)).unwrap_or(u32::MAX);
        for piece in self.plan(slices, off, end) {
            let Ok(slot) = self.shared.prefetch_slots.clone().try_acquire_owned() else {
                ChunkStats::bump(&self.shared.stats.prefetches_dropped);
                return u32::try_from(piece.out).unwrap_or(u32::MAX);
            };
            ChunkStats::bump(&self.shared.stats.prefetches);
            let held = self.shared.cache.cached_bytes(&piece.key);
            if held >= u64::try_from(piece.block_len).unwrap_or(u64::MAX) {
                let this = self.clone();
                tokio::spawn(async move {
                    let _ = this.fetch_block(piece.key, piece.block_len).await;
                    drop(slot);
                });
                continue;
            }
            // Registered in the in-flight table now, not when the task first runs: a read
            // of this block arriving meanwhile joins this fetch instead of making its own.
            let peer = self.owner_peer(&piece.key);
            let fetch = self.shared_fetch(piece.key, piece.block_len, peer);
            tokio::spawn(async move {
                let _ = fetch.await;
                drop(slot);
            });
        }
        end.saturating_sub(off)
    }

    /// Make every block uploaded so far survive a crash of the machine (uploads are
    /// readable by every client at once, durable after this); returns how many objects
    /// that took.
    pub async fn sync(&self) -> Result<u64> {
        Ok(self.shared.store.sync().await?)
    }

    /// Delete every block of slice `id` of `size` bytes, from the store and the cache.
    pub async fn delete_slice(&self, id: u64, size: u32) -> Result<()> {
        for (index, len) in block_sizes(size, self.shared.block_size) {
            let key = block_key(id, index, len);
            self.shared.recent.remove(&key).await;
            self.shared.cache.remove(&key).await;
        }
        crate::delete_slice_blocks(&self.shared.store, self.shared.block_size, id, size).await
    }
}

/// A chunk offset or length as an index (`u32` always fits in `usize` on the 32- and
/// 64-bit targets Strata builds for).
fn to_usize(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
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

/// Write a fetched block to the cache without making the reader wait for it; when too
/// many cache writes are pending, skip this one (the block is simply not cached), and
/// with `--cache-partial-only` whole blocks are never cached.
fn cache_in_background(shared: &Arc<Shared>, key: &str, data: Bytes) {
    if shared.cache_partial_only {
        return;
    }
    let Ok(slot) = shared.cache_writes.clone().try_acquire_owned() else {
        return;
    };
    let (shared, key) = (shared.clone(), key.to_string());
    tokio::spawn(async move {
        shared.cache.put(&key, data).await;
        drop(slot);
    });
}

/// Fetch a block from its owner in the group (`peer`) or else the store, check its size,
/// cache it, and leave the in-flight table. A block this client owns in a group is
/// written to the block cache before the fetch ends (peers rely on finding it there);
/// one a peer served is kept in memory only (the owner's cache holds it).
async fn fetch_now(
    shared: Arc<Shared>,
    key: String,
    expected: usize,
    peer: Option<Arc<Peer>>,
) -> Result<Bytes> {
    let via_peer = peer.is_some();
    if let (Some(peer), Some(group)) = (peer, shared.group.get())
        && let Some(data) = group.get(&peer, &key, expected, 0, expected).await
    {
        shared.recent.put(&key, data.clone()).await;
        shared.inflight.lock().remove(&(key, true));
        return Ok(data);
    }
    let owned_in_group = !via_peer && shared.group.get().is_some();
    let result = match shared.store.get(&key, None).await {
        Ok(data) if data.len() == expected => {
            shared.recent.put(&key, data.clone()).await;
            if owned_in_group {
                if !shared.cache_partial_only {
                    shared.cache.put(&key, data.clone()).await;
                }
            } else {
                cache_in_background(&shared, &key, data.clone());
            }
            Ok(data)
        }
        Ok(data) => Err(ChunkError::BadBlock {
            key: key.clone(),
            actual: data.len(),
            expected,
        }),
        Err(e) => Err(e.into()),
    };
    shared.inflight.lock().remove(&(key, via_peer));
    result
}
