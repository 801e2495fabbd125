//! Buffered writes of this client: one open slice per chunk per inode (shared by the
//! client's handles of the inode), committed to metadata — upload first, commit second —
//! when a write cannot continue it, and on flush, fsync, close, and before anything that
//! must see the data (reads, truncate, fallocate, copy_file_range).
//!
//! What `stat` may see of buffered writes (their length and the time of the last one) sits
//! apart from the slices, behind a short lock: a `getattr` never waits for an upload or a
//! commit. Times follow ext4: a write sets mtime/ctime when `write()` returns; flushing it
//! later never changes the times a later explicit change stored (see
//! `strata_meta::Meta::write_chunk`).
//!
//! Nothing buffered is dropped on failure: a slice whose upload or commit failed stays
//! pending, every flush reports the failure and tries again, and only an answer that can
//! never change (the file is gone, a quota says no) gives the data up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use strata_chunk::SliceWriter;
use strata_chunk::buffer::Reservation;
use strata_meta::MetaError;
use strata_types::{Attr, CHUNK_SIZE, Errno, Ino, MAX_FILE_SIZE, Nanos, Slice};

use crate::errno::{from_chunk, from_meta};
use crate::{Result, Vfs};

/// A slice being written in one chunk.
#[derive(Debug)]
pub(crate) struct OpenSlice {
    writer: SliceWriter,
    /// Where the slice starts within its chunk.
    pos: u32,
}

/// What `stat` shows of an inode's uncommitted writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Visible {
    /// End of the furthest uncommitted write (0 when none).
    pub length: u64,
    /// When the last write whose time is not stored yet returned.
    pub written_at: Option<Nanos>,
    /// What the last commit that emptied the buffer made the file's length at least, and
    /// the commit epoch it ended ([`Vfs::read_epoch`]): attributes read from the engine
    /// before then may lack it.
    pub committed_length: u64,
    pub committed_epoch: u64,
}

/// Writes of one inode not yet committed.
#[derive(Debug, Default)]
pub(crate) struct PendingWrites {
    visible: Mutex<Visible>,
    /// Open slices by chunk index; held while writing, uploading and committing.
    slices: tokio::sync::Mutex<BTreeMap<u32, OpenSlice>>,
}

impl PendingWrites {
    pub fn visible(&self) -> Visible {
        *self.visible.lock()
    }

    /// The stored time of the writes is now `written_at` (or a later explicit one).
    fn times_stored(&self, written_at: Option<Nanos>) {
        let mut v = self.visible.lock();
        if v.written_at == written_at {
            v.written_at = None;
        }
    }
}

/// One piece of a request inside one chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub index: u32,
    /// Offset inside the chunk.
    pub within: u32,
    /// Offset inside the request.
    pub at: usize,
    pub len: u32,
}

/// Split `[off, off+len)` of a file into per-chunk pieces. EFBIG past the largest file.
pub(crate) fn chunk_pieces(off: u64, len: u64) -> Result<Vec<Piece>> {
    let end = off
        .checked_add(len)
        .filter(|e| *e <= MAX_FILE_SIZE)
        .ok_or(Errno::EFBIG)?;
    let mut pieces = Vec::with_capacity(1);
    let mut pos = off;
    while pos < end {
        let within = pos % CHUNK_SIZE;
        let take = (CHUNK_SIZE - within).min(end - pos);
        pieces.push(Piece {
            index: u32::try_from(pos / CHUNK_SIZE).map_err(|_| Errno::EFBIG)?,
            within: u32::try_from(within).map_err(|_| Errno::EFBIG)?,
            at: usize::try_from(pos - off).map_err(|_| Errno::EFBIG)?,
            len: u32::try_from(take).map_err(|_| Errno::EFBIG)?,
        });
        pos += take;
    }
    Ok(pieces)
}

/// How a failed commit leaves the slice.
enum CommitFailure {
    /// Kept for the next flush (uploads or the engine failed; retrying may succeed).
    Kept(Errno),
    /// Given up: the answer cannot change (the file is gone, over quota, ...).
    Dropped(Errno),
}

/// How long a writer short of buffer waits before relieving the pressure again.
const PRESSURE_RECHECK: Duration = Duration::from_millis(50);

impl Vfs {
    pub(crate) fn pending_of(&self, ino: Ino) -> Option<Arc<PendingWrites>> {
        self.pending.lock().get(&ino).cloned()
    }

    fn pending_entry(&self, ino: Ino) -> Arc<PendingWrites> {
        self.pending.lock().entry(ino).or_default().clone()
    }

    /// Attributes as this client sees them: the length and time of its own uncommitted
    /// writes applied (without waiting for them).
    /// Count this client's unflushed writes in attributes read from the engine after
    /// `read_epoch` ([`Vfs::read_epoch`]) was taken. A commit that finished since may have
    /// emptied the buffer after the engine was read without them: its length counts too,
    /// or the kernel, which takes the reply as the file's size, would put the next append
    /// over the committed writes.
    pub(crate) fn apply_pending(&self, ino: Ino, attr: &mut Attr, read_epoch: u64) {
        let Some(pending) = self.pending_of(ino) else {
            return;
        };
        let v = pending.visible();
        attr.length = attr.length.max(v.length);
        if read_epoch < v.committed_epoch {
            attr.length = attr.length.max(v.committed_length);
        }
        if let Some(at) = v.written_at
            && at >= attr.ctime
        {
            attr.mtime = at;
            attr.ctime = at;
        }
    }
    /// Where this client's commits stand: taken before reading attributes from the
    /// engine, and passed to [`Vfs::apply_pending`] with them.
    pub(crate) fn read_epoch(&self) -> u64 {
        self.commit_epoch.load(std::sync::atomic::Ordering::Acquire)
    }

    /// This client changed the size of `ino` itself (after committing its writes): the
    /// lengths of earlier commits no longer count.
    pub(crate) fn size_changed(&self, ino: Ino) {
        if let Some(p) = self.pending_of(ino) {
            let mut v = p.visible.lock();
            v.committed_length = 0;
            v.committed_epoch = 0;
        }
    }

    /// The time of this client's writes to `ino` not stored yet (for setattr to store).
    pub(crate) fn unstored_write_time(&self, ino: Ino) -> Option<Nanos> {
        self.pending_of(ino).and_then(|p| p.visible().written_at)
    }

    /// A setattr stored (or overrode) the time of this client's writes.
    pub(crate) fn write_time_stored(&self, ino: Ino, written_at: Option<Nanos>) {
        if let Some(p) = self.pending_of(ino) {
            p.times_stored(written_at);
        }
    }

    /// Write `data` at `off` of `ino`; buffered until flush. The buffer budget is reserved
    /// before the inode's writes are locked, so a writer waiting for room holds nothing
    /// others need and can flush them to make room.
    pub(crate) async fn buffered_write(&self, ino: Ino, off: u64, data: &[u8]) -> Result<u32> {
        let written = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        let pieces = chunk_pieces(off, u64::from(written))?;
        let mut credit = self.buffer_credit(written).await;
        let pending = self.pending_entry(ino);
        let mut slices = pending.slices.lock().await;
        if self.meta.has_quotas() {
            let end = off + u64::from(written);
            let current = self.cached_length(ino).await?.max(pending.visible().length);
            if end > current {
                self.meta
                    .check_write_quota(ino, end - current)
                    .map_err(from_meta)?;
            }
        }
        for piece in pieces {
            let bytes = &data[piece.at..piece.at + to_usize(piece.len)];
            self.write_piece(ino, &pending, &mut slices, piece, bytes, &mut credit)
                .await?;
            // Each piece counts once it is buffered, even if a later one fails.
            let piece_end =
                off + u64::try_from(piece.at).unwrap_or(u64::MAX) + u64::from(piece.len);
            let mut v = pending.visible.lock();
            v.length = v.length.max(piece_end);
            v.written_at = Some(strata_meta::now_ns());
        }
        Ok(written)
    }

    async fn write_piece(
        &self,
        ino: Ino,
        pending: &PendingWrites,
        slices: &mut BTreeMap<u32, OpenSlice>,
        piece: Piece,
        bytes: &[u8],
        credit: &mut Reservation,
    ) -> Result<()> {
        if let Some(open) = slices.get_mut(&piece.index)
            && piece.within >= open.pos
            && open.writer.accepts(piece.within - open.pos)
        {
            return open
                .writer
                .write_at(piece.within - open.pos, bytes, Some(credit))
                .await
                .map_err(from_chunk);
        }
        if slices.contains_key(&piece.index) {
            // The open slice cannot take this write: it is committed first (and if that
            // fails, it stays, and so does the failure).
            let written_at = pending.visible().written_at;
            let committed = self.commit_one(ino, piece.index, slices, written_at).await;
            self.open_files.invalidate(ino);
            committed?;
        }
        let id = self.new_slice_for(ino).await?;
        let mut writer = self.chunks.writer(id, piece.within);
        writer
            .write_at(0, bytes, Some(credit))
            .await
            .map_err(from_chunk)?;
        slices.insert(
            piece.index,
            OpenSlice {
                writer,
                pos: piece.within,
            },
        );
        Ok(())
    }

    /// Commit the open slice of chunk `index`; it leaves `slices` unless it is kept for a
    /// retry.
    async fn commit_one(
        &self,
        ino: Ino,
        index: u32,
        slices: &mut BTreeMap<u32, OpenSlice>,
        written_at: Option<Nanos>,
    ) -> Result<()> {
        let Some(open) = slices.get_mut(&index) else {
            return Ok(());
        };
        match self.commit_slice(ino, index, open, written_at).await {
            Ok(()) => {
                slices.remove(&index);
                Ok(())
            }
            Err(CommitFailure::Kept(e)) => {
                tracing::error!(
                    "inode {ino}: cannot commit buffered writes of chunk {index} (kept, \
                     retried at the next flush): errno {e}"
                );
                Err(e)
            }
            Err(CommitFailure::Dropped(e)) => {
                if let Some(open) = slices.remove(&index) {
                    open.writer.abort().await;
                }
                tracing::error!(
                    "inode {ino}: buffered writes of chunk {index} cannot be committed \
                     and are dropped: errno {e}"
                );
                Err(e)
            }
        }
    }

    /// Upload a slice and commit it with the time of its writes.
    async fn commit_slice(
        &self,
        ino: Ino,
        index: u32,
        open: &mut OpenSlice,
        written_at: Option<Nanos>,
    ) -> std::result::Result<(), CommitFailure> {
        let id = open.writer.id();
        let size = open
            .writer
            .finish()
            .await
            .map_err(|e| CommitFailure::Kept(from_chunk(e)))?;
        if size == 0 {
            return Ok(());
        }
        let slice = Slice {
            pos: open.pos,
            id,
            size,
            off: 0,
            len: size,
        };
        let committing = self.durability.read().await;
        let mut outcome = self.meta.write_chunk(ino, index, slice, written_at).await;
        drop(committing);
        if let Err(MetaError::TooManySlices { .. }) = outcome {
            // The hard cap: only here does a writer compact (background compaction keeps
            // chunks far below it).
            // Boxed: compaction may relieve buffer pressure, which commits slices.
            Box::pin(self.compact_chunk(ino, index))
                .await
                .map_err(CommitFailure::Kept)?;
            let _committing = self.durability.read().await;
            outcome = self.meta.write_chunk(ino, index, slice, written_at).await;
        }
        match outcome {
            Ok(outcome) => {
                // The bytes went through the kernel's page cache on their way here.
                self.kernel_cache.record(ino, &outcome.attr);
                Ok(())
            }
            Err(e @ (MetaError::Posix(_) | MetaError::Invalid(_))) => {
                Err(CommitFailure::Dropped(from_meta(e)))
            }
            Err(e) => Err(CommitFailure::Kept(from_meta(e))),
        }
    }

    /// Commit every buffered write of `ino`. On failure the writes that could not be
    /// committed stay buffered (unless they never can be) and the first error is returned.
    pub async fn flush_inode(&self, ino: Ino) -> Result<()> {
        let Some(pending) = self.pending_of(ino) else {
            return Ok(());
        };
        let mut slices = pending.slices.lock().await;
        self.commit_all(ino, &pending, &mut slices).await
    }

    async fn commit_all(
        &self,
        ino: Ino,
        pending: &PendingWrites,
        slices: &mut BTreeMap<u32, OpenSlice>,
    ) -> Result<()> {
        if slices.is_empty() {
            return Ok(());
        }
        let written_at = pending.visible().written_at;
        let indexes: Vec<u32> = slices.keys().copied().collect();
        let mut first_error = None;
        for index in indexes {
            if let Err(e) = self.commit_one(ino, index, slices, written_at).await {
                first_error.get_or_insert(e);
            }
        }
        self.open_files.invalidate(ino);
        if slices.is_empty() {
            let mut v = pending.visible.lock();
            // Readers that took their epoch before this one may have read the engine
            // before the commit: they count its length (`apply_pending`).
            let epoch = self
                .commit_epoch
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
                + 1;
            // The largest: an earlier commit may have made the file longer.
            v.committed_length = v.committed_length.max(v.length);
            v.committed_epoch = epoch;
            v.length = 0;
            if v.written_at == written_at {
                v.written_at = None;
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Flush everything buffered for every inode and make it durable (unmount, SIGTERM).
    /// Every inode is tried; every failure is logged; the first is returned.
    pub async fn flush_all(&self) -> Result<()> {
        let inos: Vec<Ino> = self.pending.lock().keys().copied().collect();
        let mut first_error = None;
        for ino in inos {
            if let Err(e) = self.flush_inode(ino).await {
                tracing::error!("flushing inode {ino}: errno {e}");
                first_error.get_or_insert(e);
            }
        }
        let synced = self.sync().await;
        match first_error {
            Some(e) => Err(e),
            None => synced,
        }
    }

    /// Inodes with buffered writes kept after a failed flush although no handle has them
    /// open any more: flush them again (the periodic sync calls this). Returns how many
    /// are still waiting.
    pub async fn retry_kept_writes(&self) -> usize {
        let inos: Vec<Ino> = self.kept.lock().iter().copied().collect();
        for ino in inos {
            match self.flush_inode(ino).await {
                Ok(()) => {
                    self.kept.lock().remove(&ino);
                    self.forget_pending_if_closed(ino);
                }
                Err(e) => {
                    tracing::warn!("inode {ino}: buffered writes still not committed: errno {e}")
                }
            }
        }
        self.kept.lock().len()
    }

    /// Drop the pending entry of `ino` once no handle has it open and nothing is kept.
    pub(crate) fn forget_pending_if_closed(&self, ino: Ino) {
        if self.meta.is_open(ino) || self.kept.lock().contains(&ino) {
            return;
        }
        self.pending.lock().remove(&ino);
        self.open_files.remove(ino);
    }

    /// Budget for a write of `bytes`, reserved before any inode is locked. While the
    /// budget is used up, flush the writes of every inode nobody is writing right now:
    /// their buffered blocks are what holds it.
    async fn buffer_credit(&self, bytes: u32) -> Reservation {
        let budget = self.chunks.budget();
        loop {
            if let Some(credit) = budget.try_reserve(bytes) {
                return credit;
            }
            self.relieve_buffer_pressure().await;
            if let Ok(credit) = tokio::time::timeout(PRESSURE_RECHECK, budget.reserve(bytes)).await
            {
                return credit;
            }
        }
    }

    async fn relieve_buffer_pressure(&self) {
        let all: Vec<(Ino, Arc<PendingWrites>)> = self
            .pending
            .lock()
            .iter()
            .map(|(ino, p)| (*ino, p.clone()))
            .collect();
        for (ino, pending) in all {
            let Ok(mut slices) = pending.slices.try_lock() else {
                continue;
            };
            if let Err(e) = self.commit_all(ino, &pending, &mut slices).await {
                tracing::warn!("inode {ino}: flushing to free write buffer: errno {e}");
            }
        }
    }

    /// Rewrite a fragmented chunk as one slice (contents unchanged). Runs without the
    /// inode's write lock: the rewrite commits only if the chunk did not change meanwhile.
    pub async fn compact_chunk(&self, ino: Ino, index: u32) -> Result<()> {
        self.rewrite_chunk(ino, index, &|slices| slices.len() > 1)
            .await
    }

    /// Rewrite a chunk as one new slice of native blocks (contents unchanged) if `needs`
    /// says so of its slices as they are when read: [`Vfs::compact_chunk`]'s work, for
    /// any reason to rewrite (fragmentation, blocks adopted from another file system).
    pub async fn rewrite_chunk(
        &self,
        ino: Ino,
        index: u32,
        needs: &(dyn Fn(&[Slice]) -> bool + Sync),
    ) -> Result<()> {
        let slices = self.meta.read_chunk(ino, index).await.map_err(from_meta)?;
        if slices.iter().all(|s| s.id == 0) || !needs(&slices) {
            return Ok(());
        }
        let start = slices.iter().map(|s| s.pos).min().unwrap_or(0);
        let end = slices.iter().map(Slice::end).max().unwrap_or(0);
        let end = u32::try_from(end).map_err(|_| Errno::EIO)?;
        let data = self
            .chunks
            .read(&slices, start, end - start)
            .await
            .map_err(from_chunk)?;
        let id = self.new_slice_for(ino).await?;
        let mut writer = self.chunks.writer(id, start);
        let block = usize::try_from(self.chunks.block_size()).unwrap_or(usize::MAX);
        for (i, part) in data.chunks(block).enumerate() {
            let mut credit = self
                .buffer_credit(u32::try_from(part.len()).unwrap_or(u32::MAX))
                .await;
            let at = u32::try_from(i * block).map_err(|_| Errno::EIO)?;
            writer
                .write_at(at, part, Some(&mut credit))
                .await
                .map_err(from_chunk)?;
        }
        let size = match writer.finish().await {
            Ok(size) => size,
            Err(e) => {
                writer.abort().await;
                return Err(from_chunk(e));
            }
        };
        // The merged slice replaces data that may already be durable: it must be too
        // before the metadata points at it.
        self.chunks.sync().await.map_err(from_chunk)?;
        let merged = Slice {
            pos: start,
            id,
            size,
            off: 0,
            len: size,
        };
        let replaced = self
            .meta
            .replace_slices(ino, index, &slices, merged)
            .await
            .map_err(from_meta)?;
        self.open_files.invalidate(ino);
        if !replaced {
            self.chunks
                .delete_slice(id, size)
                .await
                .map_err(from_chunk)?;
        }
        Ok(())
    }
}

fn to_usize(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_at_chunk_borders() {
        let pieces = chunk_pieces(CHUNK_SIZE - 10, 30).unwrap();
        let within = u32::try_from(CHUNK_SIZE - 10).unwrap();
        assert_eq!(
            pieces,
            vec![
                Piece {
                    index: 0,
                    within,
                    at: 0,
                    len: 10
                },
                Piece {
                    index: 1,
                    within: 0,
                    at: 10,
                    len: 20
                }
            ]
        );
        assert!(chunk_pieces(5, 0).unwrap().is_empty());
    }

    #[test]
    fn offsets_past_the_largest_file_are_efbig_not_chunk_zero() {
        assert_eq!(chunk_pieces(1 << 58, 1), Err(Errno::EFBIG));
        assert_eq!(chunk_pieces(u64::MAX - 1, 10), Err(Errno::EFBIG));
        let last = chunk_pieces(MAX_FILE_SIZE - 1, 1).unwrap();
        assert_eq!(
            last[0].index,
            u32::MAX,
            "the last byte is in the last chunk"
        );
    }
}
