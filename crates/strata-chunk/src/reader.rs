//! [`ChunkStore`]: the data layer's entry point. Reads resolve a chunk's slice list into a
//! plan (later slices win, holes are zeros), fetch the needed blocks in parallel through
//! the block cache, and never fetch one block twice at once: a second reader of a block
//! being fetched waits for that fetch instead of starting its own.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared as SharedFuture};
use parking_lot::Mutex;
use strata_object::ObjectStore;
use strata_types::{CHUNK_SIZE, Slice, build_read_plan};
use tokio::sync::Semaphore;

use crate::buffer::BufferBudget;
use crate::cache::BlockCache;
use crate::cache::memory::MemoryCache;
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
    pub stats: ChunkStats,
    inflight: Mutex<HashMap<String, Fetch>>,
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
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            block_size: strata_types::DEFAULT_BLOCK_SIZE,
            buffer_size: 300 << 20,
            max_prefetch: 8,
            read_buffer: 64 << 20,
        }
    }
}

/// Slices to blocks to objects, with caching.
#[derive(Debug, Clone)]
pub struct ChunkStore {
    shared: Arc<Shared>,
}

/// A piece of a read: bytes `[from, to)` of block `key` go to `out` in the result.
struct Piece {
    key: String,
    block_len: usize,
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
                store,
                block_size: opts.block_size.max(1),
                budget: Arc::new(BufferBudget::new(opts.buffer_size)),
                cache,
                recent: MemoryCache::new(opts.read_buffer),
                stats: ChunkStats::default(),
                inflight: Mutex::new(HashMap::new()),
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

    /// Bytes `[off, off+len)` of a chunk whose slice list is `slices`; ranges no slice
    /// covers read as zeros.
    pub async fn read(&self, slices: &[Slice], off: u32, len: u32) -> Result<Bytes> {
        let end =
            u32::try_from((u64::from(off) + u64::from(len)).min(CHUNK_SIZE)).unwrap_or(u32::MAX);
        let pieces = self.plan(slices, off, end);
        let fetches = pieces
            .iter()
            .map(|p| self.fetch_block(p.key.clone(), p.block_len));
        let mut blocks = futures::future::join_all(fetches).await;
        let total = end.saturating_sub(off) as usize;
        // The common case, a read inside one block: hand out a view of it, no copy.
        if let ([piece], [Ok(block)]) = (pieces.as_slice(), blocks.as_slice())
            && piece.out == 0
            && piece.to - piece.from == total
        {
            return Ok(block.slice(piece.from..piece.to));
        }
        let mut out = BytesMut::zeroed(total);
        let blocks = std::mem::take(&mut blocks);
        for (piece, block) in pieces.iter().zip(blocks) {
            let block = block?;
            out[piece.out..piece.out + (piece.to - piece.from)]
                .copy_from_slice(&block[piece.from..piece.to]);
        }
        Ok(out.freeze())
    }

    /// Which block bytes make up `[off, end)` of the chunk.
    fn plan(&self, slices: &[Slice], off: u32, end: u32) -> Vec<Piece> {
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
                    block_len: block_len as usize,
                    from: within as usize,
                    to: (within + take) as usize,
                    out: (p.pos + done - off) as usize,
                });
                done += take;
            }
        }
        pieces
    }

    /// A whole block, from the cache or the store; concurrent callers share one fetch.
    pub async fn fetch_block(&self, key: String, expected: usize) -> Result<Bytes> {
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
        self.shared_fetch(key, expected).await
    }

    fn shared_fetch(&self, key: String, expected: usize) -> Fetch {
        let mut inflight = self.shared.inflight.lock();
        if let Some(existing) = inflight.get(&key) {
            ChunkStats::bump(&self.shared.stats.joined_fetches);
            return existing.clone();
        }
        let fetch = fetch_now(self.shared.clone(), key.clone(), expected)
            .boxed()
            .shared();
        inflight.insert(key, fetch.clone());
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
            let this = self.clone();
            tokio::spawn(async move {
                let _ = this.fetch_block(piece.key, piece.block_len).await;
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

/// Write a fetched block to the cache without making the reader wait for it; when too
/// many cache writes are pending, skip this one (the block is simply not cached).
fn cache_in_background(shared: &Arc<Shared>, key: &str, data: Bytes) {
    let Ok(slot) = shared.cache_writes.clone().try_acquire_owned() else {
        return;
    };
    let (shared, key) = (shared.clone(), key.to_string());
    tokio::spawn(async move {
        shared.cache.put(&key, data).await;
        drop(slot);
    });
}

/// Fetch a block from the store, check its size, cache it, and leave the in-flight table.
async fn fetch_now(shared: Arc<Shared>, key: String, expected: usize) -> Result<Bytes> {
    let result = match shared.store.get(&key, None).await {
        Ok(data) if data.len() == expected => {
            shared.recent.put(&key, data.clone()).await;
            cache_in_background(&shared, &key, data.clone());
            Ok(data)
        }
        Ok(data) => Err(ChunkError::BadBlock {
            key: key.clone(),
            actual: data.len(),
            expected,
        }),
        Err(e) => Err(e.into()),
    };
    shared.inflight.lock().remove(&key);
    result
}
