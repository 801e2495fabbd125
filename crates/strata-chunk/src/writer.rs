//! The slice writer: takes the writes of one slice (a contiguous range inside a chunk, in
//! any order as long as they keep it contiguous), holds them in memory under the buffer
//! budget, uploads each block as soon as the slice has grown past it (pipelined with
//! further writes), and on [`SliceWriter::finish`] uploads the tail and returns the slice's
//! size for the caller to commit. If an upload finally fails, the blocks already uploaded
//! are deleted and the error returned; nothing is left behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::task::JoinSet;

use crate::buffer::Reservation;
use crate::reader::Shared;
use crate::{ChunkError, ChunkStats, Result, block_key};

/// One block being filled, with the budget it holds.
#[derive(Debug)]
struct Pending {
    data: BytesMut,
    reserved: Vec<Reservation>,
}

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
    blocks: BTreeMap<u32, Pending>,
    uploads: JoinSet<Result<()>>,
    /// Keys uploaded or being uploaded (deleted if the slice fails).
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
            blocks: BTreeMap::new(),
            uploads: JoinSet::new(),
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
    /// written bytes nor touch a block already uploaded.
    pub fn accepts(&self, offset: u32) -> bool {
        offset <= self.len && offset >= self.sealed * self.shared.block_size
    }

    /// Write `data` at `offset`. [`ChunkError::NeedNewSlice`] when the write does not
    /// continue this slice, [`ChunkError::OutOfChunk`] past the chunk's end.
    pub async fn write_at(&mut self, offset: u32, data: &[u8]) -> Result<()> {
        if !self.accepts(offset) {
            return Err(ChunkError::NeedNewSlice {
                offset: u64::from(offset),
            });
        }
        let end = u64::from(offset) + data.len() as u64;
        if end > u64::from(self.limit) {
            return Err(ChunkError::OutOfChunk {
                offset: u64::from(offset),
                len: data.len() as u64,
            });
        }
        let bs = self.shared.block_size;
        let mut done = 0usize;
        while done < data.len() {
            let pos = offset + done as u32;
            let (index, within) = (pos / bs, (pos % bs) as usize);
            let take = (bs as usize - within).min(data.len() - done);
            // Capacity for the whole block up front (untouched pages cost nothing); the
            // budget is charged only for bytes actually held.
            let budget = &self.shared.budget;
            let block = self.blocks.entry(index).or_insert_with(|| Pending {
                data: budget.buffer(bs as usize),
                reserved: Vec::new(),
            });
            let grow = (within + take).saturating_sub(block.data.len());
            if grow > 0 {
                let reservation = self.shared.budget.reserve(grow as u32).await;
                block.reserved.push(reservation);
            }
            let piece = &data[done..done + take];
            let have = block.data.len();
            // `within <= have`: the slice is contiguous, so no gap can open inside a block.
            let overlap = have.saturating_sub(within).min(take);
            block.data[within..within + overlap].copy_from_slice(&piece[..overlap]);
            block.data.extend_from_slice(&piece[overlap..]);
            done += take;
        }
        self.len = self.len.max(end as u32);
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
                self.spawn_upload(index, block, false);
            }
        }
    }

    fn spawn_upload(&mut self, index: u32, block: Pending, cache_it: bool) {
        let key = self.key_of(index, &block);
        let shared = self.shared.clone();
        self.uploads
            .spawn(async move { upload(&shared, key, block, cache_it).await });
    }

    fn key_of(&mut self, index: u32, block: &Pending) -> String {
        let key = block_key(self.id, index, block.data.len() as u32);
        self.keys.push(key.clone());
        key
    }

    /// Upload what is left and wait for every upload. Returns the slice size on success;
    /// on failure deletes every block of the slice and returns the error.
    pub async fn finish(mut self) -> Result<u32> {
        let bs = self.shared.block_size;
        if self.uploads.is_empty() && self.blocks.len() == 1 {
            // One block and nothing in flight (a small file): upload it in this task; a
            // spawned upload would only add two thread hand-offs.
            if let Some((index, block)) = self.blocks.pop_first() {
                let short = (block.data.len() as u32) < bs;
                let key = self.key_of(index, &block);
                let shared = self.shared.clone();
                return match upload(&shared, key, block, short).await {
                    Ok(()) => Ok(self.len),
                    Err(e) => {
                        self.delete_uploaded().await;
                        Err(e)
                    }
                };
            }
        }
        let tail: Vec<u32> = self.blocks.keys().copied().collect();
        for index in tail {
            if let Some(block) = self.blocks.remove(&index) {
                // Short blocks (tails, small files) are cached on write: reading them back
                // right away is common and they are cheap to keep.
                let short = (block.data.len() as u32) < bs;
                self.spawn_upload(index, block, short);
            }
        }
        let mut failure = None;
        while let Some(joined) = self.uploads.join_next().await {
            let outcome = joined
                .map_err(|e| ChunkError::Other(format!("upload task: {e}")))
                .and_then(|r| r);
            if let Err(e) = outcome {
                failure.get_or_insert(e);
            }
        }
        match failure {
            None => Ok(self.len),
            Some(e) => {
                self.delete_uploaded().await;
                Err(e)
            }
        }
    }

    /// Give up the slice: cancel uploads and delete what was uploaded.
    pub async fn abort(mut self) {
        self.uploads.abort_all();
        while self.uploads.join_next().await.is_some() {}
        self.delete_uploaded().await;
    }

    async fn delete_uploaded(&mut self) {
        for key in std::mem::take(&mut self.keys) {
            if let Err(e) = self.shared.store.delete(&key).await {
                tracing::warn!("cannot delete block {key} of a failed slice (gc will): {e}");
            }
            self.shared.cache.remove(&key).await;
        }
    }
}

/// Upload one block, then cache it (short blocks) or give its buffer back.
async fn upload(shared: &Shared, key: String, block: Pending, cache_it: bool) -> Result<()> {
    let Pending { data, reserved } = block;
    let data: Bytes = data.freeze();
    shared.store.put(&key, data.clone()).await?;
    ChunkStats::bump(&shared.stats.blocks_uploaded);
    if cache_it {
        shared.cache.put(&key, data).await;
    } else if let Ok(buffer) = data.try_into_mut() {
        shared.budget.recycle(buffer);
    }
    drop(reserved);
    Ok(())
}
