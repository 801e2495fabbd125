//! Open files: handles, buffered writes, reads and the calls that touch file contents.
//!
//! Writes go to one open slice per chunk per inode (shared by this client's handles of the
//! inode). A slice is committed to metadata — upload first, commit second — when a write
//! cannot continue it, and on flush, fsync, close, and before anything that must see the
//! data (reads, truncate, fallocate, copy_file_range). So a reader on this client always
//! sees its own writes, and close-to-open holds across clients.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use strata_chunk::SliceWriter;
use strata_chunk::readahead::Window;
use strata_meta::{Ctx, Entry, FallocateMode, LockKind, MetaError, PosixLock};
use strata_types::{Attr, CHUNK_SIZE, Errno, FileType, Ino, Slice};

use crate::errno::{from_chunk, from_meta};
use crate::{Result, Vfs};

/// An open file of this client.
#[derive(Debug)]
pub(crate) struct FileHandle {
    pub ino: Ino,
    /// The file had privileges (setuid/setgid/capabilities) at open that an unprivileged
    /// write must drop first.
    privileged: std::sync::atomic::AtomicBool,
    window: std::sync::Mutex<Window>,
    /// The last lock owner seen on this handle (for releasing locks at close).
    lock_owner: AtomicU64,
}

/// A slice being written in one chunk.
#[derive(Debug)]
struct OpenSlice {
    writer: SliceWriter,
    /// Where the slice starts within its chunk.
    pos: u32,
}

/// Writes of one inode not yet committed.
#[derive(Debug, Default)]
pub(crate) struct PendingWrites {
    /// End of the furthest unflushed write (0 when nothing is pending).
    pub length: u64,
    open: BTreeMap<u32, OpenSlice>,
}

const O_ACCMODE: u32 = 3;

/// Split `[off, off+len)` of a file into per-chunk pieces: (chunk index, offset in chunk,
/// offset in the request, length).
fn chunk_pieces(off: u64, len: u64) -> impl Iterator<Item = (u32, u32, usize, u32)> {
    let end = off + len;
    let mut pos = off;
    std::iter::from_fn(move || {
        if pos >= end {
            return None;
        }
        let index = pos / CHUNK_SIZE;
        let within = pos % CHUNK_SIZE;
        let take = (CHUNK_SIZE - within).min(end - pos);
        let piece = (
            index as u32,
            within as u32,
            (pos - off) as usize,
            take as u32,
        );
        pos += take;
        Some(piece)
    })
}

impl Vfs {
    pub(crate) fn pending_of(&self, ino: Ino) -> Option<Arc<tokio::sync::Mutex<PendingWrites>>> {
        self.pending.lock().ok().and_then(|p| p.get(&ino).cloned())
    }

    fn pending_entry(&self, ino: Ino) -> Result<Arc<tokio::sync::Mutex<PendingWrites>>> {
        let mut pending = self.pending.lock().map_err(|_| Errno::EIO)?;
        Ok(pending.entry(ino).or_default().clone())
    }

    fn handle(&self, fh: u64) -> Result<Arc<FileHandle>> {
        self.handles
            .lock()
            .ok()
            .and_then(|h| h.get(&fh).cloned())
            .ok_or(Errno::EBADF)
    }

    fn register(&self, ino: Ino, privileged: bool) -> u64 {
        let fh = self.new_fh();
        let window = Window::new(u64::from(self.chunks.block_size()), self.opts.max_readahead);
        let handle = FileHandle {
            ino,
            privileged: std::sync::atomic::AtomicBool::new(privileged),
            window: std::sync::Mutex::new(window),
            lock_owner: AtomicU64::new(0),
        };
        if let Ok(mut handles) = self.handles.lock() {
            handles.insert(fh, Arc::new(handle));
        }
        fh
    }

    /// open(2) of an existing file; returns the handle and the attributes.
    pub async fn open(&self, ctx: &Ctx, ino: Ino, flags: u32) -> Result<(u64, Attr)> {
        if crate::is_internal(ino) {
            return self.open_internal(ino, flags);
        }
        if flags & O_ACCMODE != 0 {
            self.writable()?;
        }
        let opened = self
            .meta
            .open_file(ctx, ino, flags)
            .await
            .map_err(from_meta)?;
        let mut attr = opened.attr;
        // Close-to-open: whatever other clients closed before this open must show.
        self.open_files.invalidate(ino);
        self.apply_pending_length(ino, &mut attr).await;
        Ok((self.register(ino, opened.privileged), attr))
    }

    /// Whether the kernel may keep its cached pages of `ino` at this open: true when
    /// nothing changed the file since the pages were read or written here.
    pub fn keep_kernel_cache(&self, ino: Ino, attr: &Attr) -> bool {
        !crate::is_internal(ino) && self.kernel_cache.check_at_open(ino, attr)
    }

    fn open_internal(&self, ino: Ino, flags: u32) -> Result<(u64, Attr)> {
        if flags & O_ACCMODE != 0 {
            return Err(Errno::EACCES);
        }
        let fh = self.register(ino, false);
        if ino == crate::ACCESSLOG_INO {
            self.subscribe_access_log(fh);
            return Ok((fh, crate::internal::internal_attr(0)));
        }
        let content = Bytes::from(self.internal_content(ino));
        let attr = crate::internal::internal_attr(content.len() as u64);
        if let Ok(mut reads) = self.internal_reads.lock() {
            reads.insert(fh, content);
        }
        Ok((fh, attr))
    }

    /// Create and open a regular file.
    pub async fn create(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        mode: u32,
    ) -> Result<(Entry, u64)> {
        self.writable()?;
        let perm = (mode & 0o7777) as u16;
        let entry = self
            .meta
            .mknod(ctx, parent, name, FileType::Regular, perm, 0)
            .await
            .map_err(from_meta)?;
        self.meta.mark_open_attr(entry.ino, &entry.attr);
        let fh = self.register(entry.ino, false);
        Ok((entry, fh))
    }

    /// Read up to `size` bytes at `off` (short at the end of the file).
    pub async fn read(&self, fh: u64, off: u64, size: u32) -> Result<Bytes> {
        if let Some(lines) = self.read_access_log(fh, size as usize).await {
            return Ok(Bytes::from(lines));
        }
        if let Some(content) = self
            .internal_reads
            .lock()
            .ok()
            .and_then(|r| r.get(&fh).cloned())
        {
            let start = (off as usize).min(content.len());
            let end = (start + size as usize).min(content.len());
            return Ok(content.slice(start..end));
        }
        let handle = self.handle(fh)?;
        let ino = handle.ino;
        self.flush_inode(ino).await?;
        let length = self.cached_length(ino).await?;
        if off >= length || size == 0 {
            return Ok(Bytes::new());
        }
        let len = u64::from(size).min(length - off);
        let prefetch = handle
            .window
            .lock()
            .ok()
            .and_then(|mut w| w.on_read(off, len));
        let mut out = BytesMut::new();
        let mut single = None;
        for (index, within, at, take) in chunk_pieces(off, len) {
            let slices = self.cached_chunk(ino, index).await?;
            // Prefetches start before this read waits, so they overlap with it.
            if let Some((start, n)) = prefetch
                && let Some(dropped_at) = self.prefetch_in_chunk(
                    &slices,
                    index,
                    start,
                    n.min(length.saturating_sub(start)),
                )
                && let Ok(mut window) = handle.window.lock()
            {
                window.rewind(dropped_at);
            }
            let data = self
                .chunks
                .read(&slices, within, take)
                .await
                .map_err(from_chunk)?;
            if at == 0 && u64::from(take) == len {
                single = Some(data.clone());
            } else {
                out.extend_from_slice(&data);
            }
        }
        Ok(single.unwrap_or_else(|| out.freeze()))
    }

    async fn cached_length(&self, ino: Ino) -> Result<u64> {
        if let Some(length) = self.open_files.length(ino) {
            return Ok(length);
        }
        let generation = self.open_files.generation(ino);
        let length = self.meta.getattr(ino).await.map_err(from_meta)?.length;
        self.open_files.set_length(ino, generation, length);
        Ok(length)
    }

    async fn cached_chunk(&self, ino: Ino, index: u32) -> Result<Arc<Vec<Slice>>> {
        if let Some(slices) = self.open_files.chunk(ino, index) {
            return Ok(slices);
        }
        let generation = self.open_files.generation(ino);
        let slices = Arc::new(self.meta.read_chunk(ino, index).await.map_err(from_meta)?);
        self.open_files
            .set_chunk(ino, generation, index, slices.clone());
        Ok(slices)
    }

    /// Start background fetches of the part of `[start, start+n)` inside chunk `index`.
    /// Returns the file offset from which prefetches were dropped (no free slot), if any.
    fn prefetch_in_chunk(&self, slices: &[Slice], index: u32, start: u64, n: u64) -> Option<u64> {
        for (i, within, _, take) in chunk_pieces(start, n) {
            if i == index {
                let scheduled = self.chunks.prefetch(slices, within, take);
                if scheduled < take {
                    let chunk_start = u64::from(i) * strata_types::CHUNK_SIZE;
                    return Some(chunk_start + u64::from(within) + u64::from(scheduled));
                }
            }
        }
        None
    }

    /// Write `data` at `off`; buffered until flush.
    pub async fn write(&self, fh: u64, off: u64, data: &[u8]) -> Result<u32> {
        self.write_as(fh, off, data, None).await
    }

    /// [`Vfs::write`]; `unprivileged` is the writer when its write must drop the file's
    /// setuid/setgid bits and capabilities (the kernel's FUSE_WRITE_KILL_SUIDGID).
    pub async fn write_as(
        &self,
        fh: u64,
        off: u64,
        data: &[u8],
        unprivileged: Option<&Ctx>,
    ) -> Result<u32> {
        self.writable()?;
        let handle = self.handle(fh)?;
        if let Some(writer) = unprivileged
            && handle.privileged.swap(false, Ordering::Relaxed)
        {
            self.meta
                .drop_privileges(handle.ino, writer)
                .await
                .map_err(from_meta)?;
        }
        let end = off
            .checked_add(data.len() as u64)
            .filter(|e| *e <= strata_types::MAX_FILE_SIZE);
        let end = end.ok_or(Errno::EFBIG)?;
        let pending = self.pending_entry(handle.ino)?;
        let mut pending = pending.lock().await;
        if self.meta.has_quotas() {
            let current = self.cached_length(handle.ino).await?.max(pending.length);
            if end > current {
                self.meta
                    .check_write_quota(handle.ino, end - current)
                    .map_err(from_meta)?;
            }
        }
        for (index, within, at, take) in chunk_pieces(off, data.len() as u64) {
            let piece = &data[at..at + take as usize];
            self.write_piece(handle.ino, &mut pending, index, within, piece)
                .await?;
        }
        pending.length = pending.length.max(end);
        u32::try_from(data.len()).map_err(|_| Errno::EINVAL)
    }

    async fn write_piece(
        &self,
        ino: Ino,
        pending: &mut PendingWrites,
        index: u32,
        within: u32,
        piece: &[u8],
    ) -> Result<()> {
        if let Some(open) = pending.open.get_mut(&index)
            && within >= open.pos
            && open.writer.accepts(within - open.pos)
        {
            return open
                .writer
                .write_at(within - open.pos, piece)
                .await
                .map_err(from_chunk);
        }
        if let Some(old) = pending.open.remove(&index) {
            let committed = self.commit_slice(ino, index, old).await;
            self.open_files.invalidate(ino);
            committed?;
        }
        let id = self.meta.new_slice_id().await.map_err(from_meta)?;
        let mut writer = self.chunks.writer(id, within);
        writer.write_at(0, piece).await.map_err(from_chunk)?;
        pending.open.insert(
            index,
            OpenSlice {
                writer,
                pos: within,
            },
        );
        Ok(())
    }

    /// Upload a slice and commit it; compact the chunk first if it is full of slices.
    async fn commit_slice(&self, ino: Ino, index: u32, open: OpenSlice) -> Result<()> {
        let id = open.writer.id();
        let size = open.writer.finish().await.map_err(from_chunk)?;
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
        let now = strata_meta::now_ns();
        match self.meta.write_chunk(ino, index, slice, now).await {
            Ok(outcome) => {
                // The bytes went through the kernel's page cache on their way here.
                self.kernel_cache.record(ino, &outcome.attr);
                if outcome.slice_count >= self.meta.options().compact_threshold {
                    self.compact_chunk(ino, index).await?;
                }
                Ok(())
            }
            Err(MetaError::TooManySlices { .. }) => {
                self.compact_chunk(ino, index).await?;
                let outcome = self
                    .meta
                    .write_chunk(ino, index, slice, now)
                    .await
                    .map_err(from_meta)?;
                self.kernel_cache.record(ino, &outcome.attr);
                Ok(())
            }
            Err(e) => {
                // The slice is not referenced: free its blocks now.
                let _ = self.chunks.delete_slice(id, size).await;
                Err(from_meta(e))
            }
        }
    }

    /// Rewrite a fragmented chunk as one slice (contents unchanged).
    pub async fn compact_chunk(&self, ino: Ino, index: u32) -> Result<()> {
        let slices = self.meta.read_chunk(ino, index).await.map_err(from_meta)?;
        if slices.len() < 2 {
            return Ok(());
        }
        let start = slices.iter().map(|s| s.pos).min().unwrap_or(0);
        let end = slices.iter().map(|s| s.end()).max().unwrap_or(0) as u32;
        let data = self
            .chunks
            .read(&slices, start, end - start)
            .await
            .map_err(from_chunk)?;
        let id = self.meta.new_slice_id().await.map_err(from_meta)?;
        let mut writer = self.chunks.writer(id, start);
        writer.write_at(0, &data).await.map_err(from_chunk)?;
        let size = writer.finish().await.map_err(from_chunk)?;
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

    /// Commit every buffered write of `ino`.
    pub async fn flush_inode(&self, ino: Ino) -> Result<()> {
        let Some(pending) = self.pending_of(ino) else {
            return Ok(());
        };
        let mut pending = pending.lock().await;
        let open = std::mem::take(&mut pending.open);
        if open.is_empty() {
            return Ok(());
        }
        let mut first_error = None;
        for (index, slice) in open {
            if let Err(e) = self.commit_slice(ino, index, slice).await {
                first_error.get_or_insert(e);
            }
        }
        pending.length = 0;
        self.open_files.invalidate(ino);
        first_error.map_or(Ok(()), Err)
    }

    /// flush(2) of a handle (every close of a descriptor): commit writes, drop the
    /// caller's POSIX locks on the file.
    pub async fn flush(&self, fh: u64, lock_owner: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        let flushed = self.flush_inode(handle.ino).await;
        if handle.lock_owner.load(Ordering::Relaxed) != 0 {
            self.meta
                .unlock_all(handle.ino, lock_owner)
                .await
                .map_err(from_meta)?;
        }
        flushed
    }

    /// fsync(2): commit the file's buffered writes, then make everything committed so far
    /// durable (a superset of the file, as ext4's journal commit is).
    pub async fn fsync(&self, fh: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        self.flush_inode(handle.ino).await?;
        self.sync().await
    }

    /// Release the locks `owner` holds on the handle's file: the kernel asks this at the
    /// last close of a file that had flock() locks (their owner is the open file).
    pub async fn release_locks(&self, fh: u64, owner: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        self.meta
            .unlock_all(handle.ino, owner)
            .await
            .map_err(from_meta)
    }

    /// Last close of a handle.
    pub async fn release(&self, fh: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        if crate::is_internal(handle.ino) {
            self.unsubscribe_access_log(fh);
            if let Ok(mut reads) = self.internal_reads.lock() {
                reads.remove(&fh);
            }
            if let Ok(mut handles) = self.handles.lock() {
                handles.remove(&fh);
            }
            return Ok(());
        }
        let flushed = self.flush_inode(handle.ino).await;
        if let Ok(mut handles) = self.handles.lock() {
            handles.remove(&fh);
        }
        self.meta.close(handle.ino).await.map_err(from_meta)?;
        if !self.meta.is_open(handle.ino)
            && let Ok(mut pending) = self.pending.lock()
        {
            pending.remove(&handle.ino);
            self.open_files.remove(handle.ino);
        }
        flushed
    }

    pub async fn fallocate(&self, fh: u64, mode: u32, off: u64, len: u64) -> Result<()> {
        self.writable()?;
        let handle = self.handle(fh)?;
        self.flush_inode(handle.ino).await?;
        let mode = FallocateMode::from_bits(mode).map_err(from_meta)?;
        let result = self.meta.fallocate(handle.ino, mode, off, len).await;
        self.open_files.invalidate(handle.ino);
        result.map(drop).map_err(from_meta)
    }

    pub async fn copy_file_range(
        &self,
        fh_in: u64,
        off_in: u64,
        fh_out: u64,
        off_out: u64,
        len: u64,
        flags: u32,
    ) -> Result<u64> {
        self.writable()?;
        let (src, dst) = (self.handle(fh_in)?.ino, self.handle(fh_out)?.ino);
        self.flush_inode(src).await?;
        self.flush_inode(dst).await?;
        let (copied, _) = self
            .meta
            .copy_file_range(src, off_in, dst, off_out, len, flags)
            .await
            .map_err(from_meta)?;
        self.open_files.invalidate(dst);
        Ok(copied)
    }

    /// F_GETLK: the conflicting lock, if any.
    pub async fn getlk(&self, fh: u64, owner: u64, lock: PosixLock) -> Result<Option<PosixLock>> {
        let handle = self.handle(fh)?;
        self.meta
            .getlk(handle.ino, owner, lock)
            .await
            .map_err(from_meta)
    }

    /// F_SETLK / F_SETLKW (`wait`): take or release a record lock.
    pub async fn setlk(&self, fh: u64, owner: u64, lock: PosixLock, wait: bool) -> Result<()> {
        let handle = self.handle(fh)?;
        handle.lock_owner.store(owner, Ordering::Relaxed);
        let mut delay = std::time::Duration::from_millis(1);
        loop {
            match self.meta.setlk(handle.ino, owner, lock).await {
                Err(MetaError::Posix(Errno::EAGAIN)) if wait && lock.kind != LockKind::Unlock => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(std::time::Duration::from_millis(100));
                }
                other => return other.map_err(from_meta),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_at_chunk_borders() {
        let pieces: Vec<_> = chunk_pieces(CHUNK_SIZE - 10, 30).collect();
        assert_eq!(
            pieces,
            vec![(0, (CHUNK_SIZE - 10) as u32, 0, 10), (1, 0, 10, 20)]
        );
        assert_eq!(chunk_pieces(5, 0).count(), 0);
    }
}
