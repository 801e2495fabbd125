//! The slice writer: takes the writes of one slice (a contiguous range inside a chunk, in
//! any order as long as they keep it contiguous), holds them in memory under the buffer
//! budget, uploads each block as soon as the slice has grown past it (pipelined with
//! further writes), and on [`SliceWriter::finish`] uploads the tail and returns the slice's
//! size for the caller to commit.
//!
//! Nothing is dropped on failure: a block whose upload failed stays in memory, and
//! `finish` may be called again to retry exactly the blocks that are not stored yet. Only
//! [`SliceWriter::abort`] gives the data up (and deletes what was uploaded).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use strata_types::CHUNK_SIZE;
use tokio::task::JoinSet;

use crate::buffer::Reservation;
use crate::store::{ChunkStore, Shared};
use crate::{ChunkError, ChunkStats, Result, block_key};

/// One block being filled, with the budget it holds.
#[derive(Debug)]
struct Pending {
    data: BytesMut,
    reserved: Reservation,
}

/// A block handed to an upload: its final bytes and name.
#[derive(Debug)]
struct Sealed {
    key: String,
    data: Bytes,
    reserved: Reservation,
    /// Put it in the block cache once stored (short blocks: tails, small files).
    cache_it: bool,
}

/// What an upload task gives back: nothing, or the error and the block to retry.
type UploadResult = std::result::Result<(), (ChunkError, Sealed)>;

/// Writes one slice. Offsets are relative to the slice's start.
#[derive(Debug)]
pub struct SliceWriter {
    shared: Arc<Shared>,
    id: u64,
    /// Longest the slice may grow (the rest of the chunk from its start).
    limit: u32,
    len: u32,
    /// Blocks below this index have been handed to uploads and can no longer change.
    sealed: u32,
    /// Set once `finish` was called: the slice takes no more writes.
    closed: bool,
    /// Every block is stored (`finish` succeeded).
    stored: bool,
    blocks: BTreeMap<u32, Pending>,
    uploads: JoinSet<UploadResult>,
    /// Blocks whose upload failed, kept for the next `finish`.
    failed: Vec<Sealed>,
    /// Keys uploaded or being uploaded (deleted by `abort`).
    keys: Vec<String>,
}

impl SliceWriter {
    pub(crate) fn new(shared: Arc<Shared>, id: u64, limit: u32) -> SliceWriter {
        SliceWriter {
            shared,
            id,
            limit,
            len: 0,
            sealed: 0,
            closed: false,
            stored: false,
            blocks: BTreeMap::new(),
            uploads: JoinSet::new(),
            failed: Vec::new(),
            keys: Vec::new(),
        }
    }

    /// The slice id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes written so far (the slice covers `[0, len)`).
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a write at `offset` fits this slice: it must not leave a gap after the
    /// written bytes nor touch a block already uploaded, and the slice must be open.
    pub fn accepts(&self, offset: u32) -> bool {
        !self.closed && offset <= self.len && offset >= self.sealed * self.shared.block_size
    }

    /// Write `data` at `offset`, reserving buffer budget as blocks grow (from `credit`
    /// when given and large enough, else waiting for it). [`ChunkError::NeedNewSlice`]
    /// when the write does not continue this slice, [`ChunkError::OutOfChunk`] past the
    /// chunk's end.
    pub async fn write_at(
        &mut self,
        offset: u32,
        data: &[u8],
        mut credit: Option<&mut Reservation>,
    ) -> Result<()> {
        if !self.accepts(offset) {
            return Err(ChunkError::NeedNewSlice {
                offset: u64::from(offset),
            });
        }
        let out_of_chunk = || ChunkError::OutOfChunk {
            offset: u64::from(offset),
            len: u64::try_from(data.len()).unwrap_or(u64::MAX),
        };
        let end = u32::try_from(data.len())
            .ok()
            .and_then(|n| offset.checked_add(n))
            .filter(|end| *end <= self.limit)
            .ok_or_else(out_of_chunk)?;
        let bs = self.shared.block_size;
        let mut pos = offset;
        while pos < end {
            let (index, within) = (pos / bs, to_usize(pos % bs));
            let take = (bs - pos % bs).min(end - pos);
            let at = to_usize(pos - offset);
            let piece = &data[at..at + to_usize(take)];
            // Capacity for the whole block up front (untouched pages cost nothing); the
            // budget is charged only for bytes actually held.
            let budget = &self.shared.budget;
            let block = self.blocks.entry(index).or_insert_with(|| Pending {
                data: budget.buffer(to_usize(bs)),
                reserved: Reservation::default(),
            });
            let grow = (within + piece.len()).saturating_sub(block.data.len());
            if grow > 0 {
                let grow = u32::try_from(grow).unwrap_or(u32::MAX);
                let part = match credit.as_deref_mut().and_then(|c| c.take(grow)) {
                    Some(part) => part,
                    None => self.shared.budget.reserve(grow).await,
                };
                block.reserved.merge(part);
            }
            let have = block.data.len();
            // `within <= have`: the slice is contiguous, so no gap can open inside a block.
            let overlap = have.saturating_sub(within).min(piece.len());
            block.data[within..within + overlap].copy_from_slice(&piece[..overlap]);
            block.data.extend_from_slice(&piece[overlap..]);
            pos += take;
        }
        self.len = self.len.max(end);
        self.upload_full_blocks();
        Ok(())
    }

    /// Start uploads of every block the slice has fully grown past.
    fn upload_full_blocks(&mut self) {
        let bs = self.shared.block_size;
        while (self.sealed + 1) * bs <= self.len {
            let index = self.sealed;
            self.sealed += 1;
            if let Some(block) = self.blocks.remove(&index) {
                let sealed = self.seal(index, block, false);
                self.spawn_upload(sealed);
            }
        }
    }

    fn seal(&mut self, index: u32, block: Pending, cache_it: bool) -> Sealed {
        let size = u32::try_from(block.data.len()).unwrap_or(u32::MAX);
        let key = block_key(self.id, index, size);
        self.keys.push(key.clone());
        Sealed {
            key,
            data: block.data.freeze(),
            reserved: block.reserved,
            cache_it,
        }
    }

    fn spawn_upload(&mut self, sealed: Sealed) {
        let shared = self.shared.clone();
        self.uploads
            .spawn(async move { upload(&shared, sealed).await });
    }

    /// Upload what is left (and whatever failed before) and wait for every upload. Returns
    /// the slice size once every block is stored; the slice takes no more writes after the
    /// first call. On failure the blocks not stored stay in memory and the call may be
    /// repeated.
    pub async fn finish(&mut self) -> Result<u32> {
        if self.stored {
            return Ok(self.len);
        }
        self.closed = true;
        let bs = self.shared.block_size;
        let mut ready: Vec<Sealed> = std::mem::take(&mut self.failed);
        let tail: Vec<u32> = self.blocks.keys().copied().collect();
        for index in tail {
            if let Some(block) = self.blocks.remove(&index) {
                // Short blocks (tails, small files) are cached on write: reading them back
                // right away is common and they are cheap to keep. With --writeback the
                // staged copy serves them instead, and the uploader caches them.
                let short = block.data.len() < to_usize(bs) && self.shared.staging.get().is_none();
                ready.push(self.seal(index, block, short));
            }
        }
        if self.uploads.is_empty() && ready.len() == 1 {
            // One block and nothing in flight (a small file): upload it in this task; a
            // spawned upload would only add two thread hand-offs.
            if let Some(block) = ready.pop() {
                return match upload(&self.shared, block).await {
                    Ok(()) => self.stored_now(),
                    Err((e, block)) => {
                        self.failed.push(block);
                        Err(e)
                    }
                };
            }
        }
        for block in ready {
            self.spawn_upload(block);
        }
        let mut failure = None;
        while let Some(joined) = self.uploads.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err((e, block))) => {
                    self.failed.push(block);
                    failure.get_or_insert(e);
                }
                // A panicked upload task lost its block: report it; `abort` cleans up.
                Err(e) => {
                    failure.get_or_insert(ChunkError::Other(format!("upload task: {e}")));
                }
            }
        }
        match failure {
            None => self.stored_now(),
            Some(e) => Err(e),
        }
    }

    fn stored_now(&mut self) -> Result<u32> {
        self.stored = true;
        Ok(self.len)
    }

    /// Bytes held in memory that are not stored yet.
    pub fn unstored_bytes(&self) -> usize {
        self.blocks.values().map(|b| b.data.len()).sum::<usize>()
            + self.failed.iter().map(|b| b.data.len()).sum::<usize>()
    }

    /// Give up the slice: cancel uploads and delete what was uploaded.
    pub async fn abort(mut self) {
        self.uploads.abort_all();
        while self.uploads.join_next().await.is_some() {}
        for key in std::mem::take(&mut self.keys) {
            if let Err(e) = self.shared.store.delete(&key).await {
                tracing::warn!("cannot delete block {key} of a failed slice (gc will): {e}");
            }
            self.shared.cache.remove(&key).await;
        }
    }
}

fn to_usize(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Upload one block, then cache it (short blocks) or give its buffer back. On failure the
/// block comes back with the error.
async fn upload(shared: &Shared, block: Sealed) -> UploadResult {
    if let Err(e) = shared.store.put(&block.key, block.data.clone()).await {
        return Err((e.into(), block));
    }
    ChunkStats::bump(&shared.stats.blocks_uploaded);
    let Sealed {
        key,
        data,
        reserved,
        cache_it,
    } = block;
    if cache_it {
        shared.cache.put(&key, data).await;
    } else if let Ok(buffer) = data.try_into_mut() {
        shared.budget.recycle(buffer);
    }
    drop(reserved);
    Ok(())
}

impl ChunkStore {
    /// A writer for slice `id` starting at `pos` within its chunk.
    pub fn writer(&self, id: u64, pos: u32) -> SliceWriter {
        let limit = u32::try_from(CHUNK_SIZE - u64::from(pos).min(CHUNK_SIZE)).unwrap_or(u32::MAX);
        SliceWriter::new(self.shared.clone(), id, limit)
    }
}
