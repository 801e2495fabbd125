//! Open files: handles, reads and the calls that touch file contents (buffered writes
//! themselves live in [`crate::write`]). A read, truncate, fallocate or copy_file_range
//! first commits this client's buffered writes of the file, so a reader on this client
//! always sees its own writes, and close-to-open holds across clients.
//!
//! A failed sync is reported once to every handle open for writing when it failed (at its
//! next `fsync` or close), as Linux reports writeback errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use strata_chunk::readahead::Window;
use strata_meta::{Ctx, Entry, FallocateMode};
use strata_types::{Attr, Errno, FileType, Ino, Slice};

use crate::errno::{from_chunk, from_meta};
use crate::write::chunk_pieces;
use crate::{Result, Vfs};

/// An open file of this client.
#[derive(Debug)]
pub(crate) struct FileHandle {
    pub ino: Ino,
    /// Opened for writing: failed syncs are reported to it.
    writable: bool,
    /// The file had privileges (setuid/setgid/capabilities) at open that an unprivileged
    /// write must drop first.
    privileged: AtomicBool,
    window: Mutex<Window>,
    /// The last lock owner seen on this handle (for releasing locks at close).
    pub lock_owner: AtomicU64,
    /// How many failed syncs this handle has been told about.
    sync_failures_seen: AtomicU64,
}

const O_ACCMODE: u32 = 3;

impl FileHandle {
    /// What a handed-over mount needs to keep serving this handle.
    pub(crate) fn state(&self, fh: u64) -> crate::handover::FileHandleState {
        crate::handover::FileHandleState {
            fh,
            ino: self.ino.0,
            writable: self.writable,
            privileged: self.privileged.load(Ordering::Relaxed),
            lock_owner: self.lock_owner.load(Ordering::Relaxed),
        }
    }
}

impl Vfs {
    pub(crate) fn handle(&self, fh: u64) -> Result<Arc<FileHandle>> {
        self.handles.lock().get(&fh).cloned().ok_or(Errno::EBADF)
    }

    pub(crate) fn register(&self, ino: Ino, writable: bool, privileged: bool) -> u64 {
        let fh = self.new_fh();
        self.register_as(fh, ino, writable, privileged);
        fh
    }

    /// Register handle `fh` (one a front end already knows: a handed-over mount's);
    /// false, changing nothing, if it is registered already.
    pub(crate) fn register_as(&self, fh: u64, ino: Ino, writable: bool, privileged: bool) -> bool {
        let window = Window::new(u64::from(self.chunks.block_size()), self.opts.max_readahead);
        let handle = FileHandle {
            ino,
            writable,
            privileged: AtomicBool::new(privileged),
            window: Mutex::new(window),
            lock_owner: AtomicU64::new(0),
            sync_failures_seen: AtomicU64::new(self.sync_failures.load(Ordering::Acquire)),
        };
        match self.handles.lock().entry(fh) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Arc::new(handle));
                true
            }
            std::collections::hash_map::Entry::Occupied(_) => false,
        }
    }

    /// open(2) of an existing file; returns the handle and the attributes.
    pub async fn open(&self, ctx: &Ctx, ino: Ino, flags: u32) -> Result<(u64, Attr)> {
        self.open_after(ctx, ino, flags, None).await
    }

    /// [`Vfs::open`] by a front end that looked `ino` up itself after `began`, the
    /// start of this open (the SDK's `open(path)`): see
    /// [`strata_meta::Meta::open_file_after`].
    pub async fn open_after(
        &self,
        ctx: &Ctx,
        ino: Ino,
        flags: u32,
        began: Option<std::time::Instant>,
    ) -> Result<(u64, Attr)> {
        if crate::is_internal(ino) {
            return self.open_internal(ino, flags);
        }
        let writing = flags & O_ACCMODE != 0;
        if writing {
            self.writable()?;
        }
        let read_epoch = self.read_epoch();
        let opened = self
            .meta
            .open_file_after(ctx, ino, flags, began)
            .await
            .map_err(from_meta)?;
        let mut attr = opened.attr;
        self.note_times(ino, &attr);
        // Close-to-open: whatever other clients closed before this open must show.
        self.open_files.invalidate(ino);
        self.apply_pending(ino, &mut attr, read_epoch);
        Ok((self.register(ino, writing, opened.privileged), attr))
    }

    /// Whether the kernel may keep its cached pages of `ino` at this open: true when
    /// nothing changed the file since the pages were read or written here.
    pub fn keep_kernel_cache(&self, ino: Ino, attr: &Attr) -> bool {
        !crate::is_internal(ino) && self.kernel_cache.check_at_open(ino, attr)
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
        let entry = self
            .meta
            .mknod(
                ctx,
                parent,
                name,
                FileType::Regular,
                crate::perm_bits(mode),
                0,
            )
            .await
            .map_err(from_meta)?;
        self.meta.mark_open_attr(entry.ino, &entry.attr);
        let fh = self.register(entry.ino, true, false);
        Ok((entry, fh))
    }

    /// open(O_TMPFILE): an unnamed regular file in `parent`, open for writing; `linkat`
    /// may name it, else it is deleted at its last close.
    pub async fn tmpfile(&self, ctx: &Ctx, parent: Ino, mode: u32) -> Result<(Entry, u64)> {
        self.writable()?;
        let entry = self
            .meta
            .tmpfile(ctx, parent, crate::perm_bits(mode))
            .await
            .map_err(from_meta)?;
        self.meta.mark_open_attr(entry.ino, &entry.attr);
        let fh = self.register(entry.ino, true, false);
        Ok((entry, fh))
    }

    /// Read up to `size` bytes at `off` (short at the end of the file).
    pub async fn read(&self, fh: u64, off: u64, size: u32) -> Result<Bytes> {
        if let Some(content) = self.read_internal(fh, off, size).await {
            return Ok(content);
        }
        let handle = self.handle(fh)?;
        let ino = handle.ino;
        self.flush_inode(ino).await?;
        let length = self.cached_length(ino).await?;
        if off >= length || size == 0 {
            return Ok(Bytes::new());
        }
        let len = u64::from(size).min(length - off);
        let (prefetch, sequential) = {
            let mut window = handle.window.lock();
            let prefetch = window.on_read(off, len);
            (prefetch, window.size() > 0)
        };
        let mut out = BytesMut::new();
        let mut single = None;
        for piece in chunk_pieces(off, len)? {
            let slices = self.cached_chunk(ino, piece.index).await?;
            // Prefetches start before this read waits, so they overlap with it.
            if let Some((start, n)) = prefetch
                && let Some(dropped_at) = self.prefetch_in_chunk(
                    &slices,
                    piece.index,
                    start,
                    n.min(length.saturating_sub(start)),
                )
            {
                handle.window.lock().rewind(dropped_at);
            }
            // A sequential reader takes whole blocks (the next reads want the rest), a
            // random one only the segments its bytes lie in.
            let data = if sequential {
                self.chunks.read(&slices, piece.within, piece.len).await
            } else {
                self.chunks
                    .read_ranged(&slices, piece.within, piece.len)
                    .await
            }
            .map_err(from_chunk)?;
            if piece.at == 0 && u64::from(piece.len) == len {
                single = Some(data.clone());
            } else {
                out.extend_from_slice(&data);
            }
        }
        self.accessed(ino).await;
        Ok(single.unwrap_or_else(|| out.freeze()))
    }

    pub(crate) async fn cached_length(&self, ino: Ino) -> Result<u64> {
        if let Some(length) = self.open_files.length(ino) {
            return Ok(length);
        }
        let generation = self.open_files.generation(ino);
        let attr = self.meta.getattr(ino).await.map_err(from_meta)?;
        self.note_times(ino, &attr);
        self.open_files.set_length(ino, generation, attr.length);
        Ok(attr.length)
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
        for piece in chunk_pieces(start, n).ok()? {
            if piece.index == index {
                let scheduled = self.chunks.prefetch(slices, piece.within, piece.len);
                if scheduled < piece.len {
                    let chunk_start = u64::from(piece.index) * strata_types::CHUNK_SIZE;
                    return Some(chunk_start + u64::from(piece.within) + u64::from(scheduled));
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
        self.buffered_write(handle.ino, off, data).await
    }

    /// A sync failed with `errno`: every handle open for writing hears about it once.
    pub(crate) fn sync_failed(&self, errno: Errno) {
        self.last_sync_errno.store(errno.0, Ordering::Release);
        self.sync_failures.fetch_add(1, Ordering::AcqRel);
    }

    /// The last failed sync's errno (EIO, ENOSPC, ...) if a sync failed since this handle
    /// last heard about one (it now has).
    fn unreported_sync_failure(&self, handle: &FileHandle) -> Result<()> {
        if !handle.writable {
            return Ok(());
        }
        let now = self.sync_failures.load(Ordering::Acquire);
        if handle.sync_failures_seen.swap(now, Ordering::AcqRel) < now {
            Err(Errno(self.last_sync_errno.load(Ordering::Acquire)))
        } else {
            Ok(())
        }
    }

    /// flush(2) of a handle (every close of a descriptor): commit writes, drop the
    /// caller's POSIX locks on the file, report a sync failure it has not heard of.
    pub async fn flush(&self, fh: u64, lock_owner: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        let flushed = self.flush_inode(handle.ino).await;
        if handle.lock_owner.load(Ordering::Relaxed) != 0 {
            self.meta
                .unlock_all(handle.ino, lock_owner)
                .await
                .map_err(from_meta)?;
        }
        flushed?;
        self.unreported_sync_failure(&handle)
    }

    /// fsync(2): commit the file's buffered writes, then make everything committed so far
    /// durable (a superset of the file, as ext4's journal commit is). A sync that failed
    /// earlier (the periodic one, another file's) is reported here once.
    pub async fn fsync(&self, fh: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        self.flush_inode(handle.ino).await?;
        let synced = self.sync().await;
        let earlier = self.unreported_sync_failure(&handle);
        synced.and(earlier)
    }

    /// Last close of a handle. Buffered writes that still cannot be committed are kept
    /// and retried by the periodic sync; the failure is returned.
    pub async fn release(&self, fh: u64) -> Result<()> {
        let handle = self.handle(fh)?;
        if crate::is_internal(handle.ino) {
            self.release_internal(fh);
            self.handles.lock().remove(&fh);
            return Ok(());
        }
        let ino = handle.ino;
        let flushed = self.flush_inode(ino).await;
        self.handles.lock().remove(&fh);
        self.meta.close(ino).await.map_err(from_meta)?;
        if flushed.is_err() && !self.meta.is_open(ino) {
            self.kept.lock().insert(ino);
        }
        self.forget_pending_if_closed(ino);
        flushed
    }

    pub async fn fallocate(&self, fh: u64, mode: u32, off: u64, len: u64) -> Result<()> {
        self.writable()?;
        let handle = self.handle(fh)?;
        self.flush_inode(handle.ino).await?;
        let mode = FallocateMode::from_bits(mode).map_err(from_meta)?;
        let result = self.meta.fallocate(handle.ino, mode, off, len).await;
        self.size_changed(handle.ino);
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
}
