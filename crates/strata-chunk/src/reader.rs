//! Reading: a chunk's slice list resolves into a plan (later slices win, holes are zeros)
//! and what the plan needs is fetched in parallel through the caches, never fetching the
//! same thing twice at once: a second reader waits for the fetch in flight. A sequential
//! reader ([`ChunkStore::read`]) takes whole blocks (and prefetches ahead); a random
//! reader ([`ChunkStore::read_ranged`]) takes only the segments of a block its bytes lie
//! in ([`crate::segments`]).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use strata_types::{CHUNK_SIZE, Slice, build_read_plan};

use crate::cache::BlockCache;
use crate::group::Peer;
use crate::inflight::Fetch;
use crate::store::{ChunkStore, Shared};
use crate::{ChunkError, ChunkStats, Result, block_key, block_sizes};

/// A piece of a read: bytes `[from, to)` of block `key` go to `out` in the result.
pub(crate) struct Piece {
    pub key: String,
    pub block_len: usize,
    from: usize,
    to: usize,
    out: usize,
}

impl ChunkStore {
    /// Bytes `[off, off+len)` of a chunk whose slice list is `slices`, fetching whole
    /// blocks (a sequential reader's); ranges no slice covers read as zeros.
    pub async fn read(&self, slices: &[Slice], off: u32, len: u32) -> Result<Bytes> {
        self.read_with(slices, off, len, false).await
    }

    /// [`ChunkStore::read`] for a random reader: only the segments the bytes lie in
    /// (from a store whose ranged GETs fetch whole objects: from the cache by range when
    /// it holds them, else whole blocks).
    pub async fn read_ranged(&self, slices: &[Slice], off: u32, len: u32) -> Result<Bytes> {
        self.read_with(slices, off, len, true).await
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
            let cheap = self.shared.store.cheap_ranges_of(&p.key);
            let random = ranged;
            let ranged = ranged
                && cheap
                && (!in_group || self.owner_peer(&p.key).is_some())
                && !self.whole_block_in_flight(&p.key);
            if ranged {
                self.fetch_range(&p.key, p.block_len, p.from, p.to).await
            } else if random
                && !cheap
                && let Some(bytes) = self.cached_range(&p.key, p.block_len, p.from, p.to).await
            {
                Ok(bytes)
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
