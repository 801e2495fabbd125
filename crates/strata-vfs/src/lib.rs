//! Strata's file system as a library, independent of FUSE: inode-based operations that
//! mirror the FUSE calls, coordinating the metadata layer (`strata-meta`) and the data
//! layer (`strata-chunk`). Protocol front ends (FUSE, S3, WebDAV) speak only to [`Vfs`].
//!
//! Every operation returns `Result<_, Errno>`: errors are mapped to errno here, in
//! [`errno`], and nowhere else.

mod background;
mod dir;
pub mod errno;
mod file;
mod internal;
mod kernelcache;
pub mod maintenance;
mod opencache;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use strata_chunk::ChunkStore;
use strata_meta::{Meta, RenameFlags, XattrFlags};
use strata_types::{Attr, Errno, FileType, Ino};

pub use background::{BackgroundJobs, MetaBackup};
pub use dir::DirEntryPlus;
pub use internal::{ACCESSLOG_INO, CONFIG_INO, STATS_INO, is_internal, log_time};
/// Types of the metadata layer that front ends use through the VFS.
pub use strata_meta::{Ctx, Entry, LockKind, PosixLock, SetAttr, StatFs, TimeSet};

use crate::errno::{from_chunk, from_meta};
use crate::file::{FileHandle, PendingWrites};

/// Result of a VFS operation.
pub type Result<T> = std::result::Result<T, Errno>;

/// Tunables of a client.
#[derive(Clone, Debug)]
pub struct VfsOptions {
    /// How long the kernel may cache attributes (`--attr-cache`).
    pub attr_ttl: Duration,
    /// How long the kernel may cache file entries (`--entry-cache`).
    pub entry_ttl: Duration,
    /// How long the kernel may cache directory entries (`--dir-entry-cache`).
    pub dir_entry_ttl: Duration,
    /// How long the kernel may cache a failed lookup (`--negative-entry-cache`).
    pub negative_ttl: Duration,
    /// Largest readahead window (`--max-readahead`, bytes).
    pub max_readahead: u64,
    pub read_only: bool,
    /// Do not serve `.stats`, `.config` and `.accesslog` (`--hide-internal`).
    pub hide_internal: bool,
    /// The directory shown as the root of the mount (`--subdir`); the volume root by default.
    pub root: Ino,
}

impl Default for VfsOptions {
    fn default() -> Self {
        VfsOptions {
            attr_ttl: Duration::from_secs(1),
            entry_ttl: Duration::from_secs(1),
            dir_entry_ttl: Duration::from_secs(1),
            negative_ttl: Duration::ZERO,
            max_readahead: 256 << 20,
            read_only: false,
            hide_internal: false,
            root: Ino::ROOT,
        }
    }
}

/// One client's view of a mounted volume.
#[derive(Debug)]
pub struct Vfs {
    meta: Arc<Meta>,
    chunks: ChunkStore,
    opts: VfsOptions,
    handles: Mutex<HashMap<u64, Arc<FileHandle>>>,
    dirs: Mutex<HashMap<u64, dir::DirHandle>>,
    next_fh: AtomicU64,
    /// Unflushed writes per inode, shared by this client's handles of that inode.
    pending: Mutex<HashMap<Ino, Arc<tokio::sync::Mutex<PendingWrites>>>>,
    /// Lengths and slice lists of files open here.
    open_files: opencache::OpenFileCache,
    /// What `.config` shows.
    config_text: Mutex<String>,
    /// Object store counters for `.stats`.
    object_stats: Mutex<Option<Arc<strata_object::metered::ObjectStats>>>,
    /// Contents of open internal files, by handle.
    internal_reads: Mutex<HashMap<u64, bytes::Bytes>>,
    /// Lines for `.accesslog` readers.
    access_log: tokio::sync::broadcast::Sender<Arc<str>>,
    /// Open `.accesslog` handles.
    access_readers: Mutex<HashMap<u64, internal::AccessReader>>,
    /// What the kernel's cached pages of each file belong to.
    kernel_cache: kernelcache::KernelCacheTracker,
}

impl Vfs {
    pub fn new(meta: Arc<Meta>, chunks: ChunkStore, opts: VfsOptions) -> Vfs {
        Vfs {
            meta,
            chunks,
            opts,
            handles: Mutex::default(),
            dirs: Mutex::default(),
            next_fh: AtomicU64::new(1),
            pending: Mutex::default(),
            open_files: opencache::OpenFileCache::default(),
            config_text: Mutex::default(),
            object_stats: Mutex::default(),
            internal_reads: Mutex::default(),
            access_log: tokio::sync::broadcast::channel(internal::ACCESS_LOG_LINES).0,
            access_readers: Mutex::default(),
            kernel_cache: kernelcache::KernelCacheTracker::default(),
        }
    }

    pub fn meta(&self) -> &Arc<Meta> {
        &self.meta
    }

    pub fn chunks(&self) -> &ChunkStore {
        &self.chunks
    }

    pub fn options(&self) -> &VfsOptions {
        &self.opts
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    /// The inode a front end's inode number stands for: its root (1) is [`VfsOptions::root`].
    pub fn from_front(&self, ino: u64) -> Ino {
        if ino == Ino::ROOT.0 {
            self.opts.root
        } else {
            Ino(ino)
        }
    }

    /// The inode number a front end shows for `ino` (the mount's root is 1).
    pub fn to_front(&self, ino: Ino) -> u64 {
        if ino == self.opts.root {
            Ino::ROOT.0
        } else {
            ino.0
        }
    }

    fn writable(&self) -> Result<()> {
        if self.opts.read_only {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }

    /// Attributes as this client sees them: the stored ones, with the length of its own
    /// unflushed writes.
    pub async fn getattr(&self, ino: Ino) -> Result<Attr> {
        if is_internal(ino) {
            return Ok(internal::internal_attr(0));
        }
        let mut attr = self.meta.getattr(ino).await.map_err(from_meta)?;
        self.apply_pending_length(ino, &mut attr).await;
        Ok(attr)
    }

    async fn apply_pending_length(&self, ino: Ino, attr: &mut Attr) {
        if let Some(pending) = self.pending_of(ino) {
            let len = pending.lock().await.length;
            attr.length = attr.length.max(len);
        }
    }

    pub async fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Entry> {
        if parent == self.opts.root
            && !self.opts.hide_internal
            && let Some(ino) = internal::internal_ino(name)
        {
            return Ok(Entry {
                ino,
                attr: internal::internal_attr(0),
            });
        }
        let mut entry = self
            .meta
            .lookup(ctx, parent, name)
            .await
            .map_err(from_meta)?;
        self.apply_pending_length(entry.ino, &mut entry.attr).await;
        Ok(entry)
    }

    pub async fn setattr(&self, ctx: &Ctx, ino: Ino, set: &SetAttr) -> Result<Attr> {
        self.writable()?;
        if set.size.is_some() {
            // A size change orders after every write this client made before it.
            self.flush_inode(ino).await?;
        }
        let mut attr = self.meta.setattr(ctx, ino, set).await.map_err(from_meta)?;
        self.open_files.invalidate(ino);
        // Unflushed writes still count: the kernel takes this reply as the file's size.
        self.apply_pending_length(ino, &mut attr).await;
        Ok(attr)
    }

    pub async fn mknod(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
    ) -> Result<Entry> {
        self.writable()?;
        let kind = FileType::from_mode(mode).ok_or(Errno::EINVAL)?;
        let perm = (mode & 0o7777) as u16;
        self.meta
            .mknod(ctx, parent, name, kind, perm, rdev)
            .await
            .map_err(from_meta)
    }

    pub async fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Entry> {
        self.writable()?;
        self.meta
            .mkdir(ctx, parent, name, (mode & 0o7777) as u16)
            .await
            .map_err(from_meta)
    }

    pub async fn symlink(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        target: &[u8],
    ) -> Result<Entry> {
        self.writable()?;
        self.meta
            .symlink(ctx, parent, name, target)
            .await
            .map_err(from_meta)
    }

    pub async fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.meta.readlink(ino).await.map_err(from_meta)
    }

    pub async fn link(&self, ctx: &Ctx, ino: Ino, parent: Ino, name: &[u8]) -> Result<Entry> {
        self.writable()?;
        let mut attr = self
            .meta
            .link(ctx, ino, parent, name)
            .await
            .map_err(from_meta)?;
        self.apply_pending_length(ino, &mut attr).await;
        Ok(Entry { ino, attr })
    }

    pub async fn unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        self.meta.unlink(ctx, parent, name).await.map_err(from_meta)
    }

    pub async fn rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        self.meta.rmdir(ctx, parent, name).await.map_err(from_meta)
    }

    pub async fn rename(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.writable()?;
        let flags = RenameFlags::from_bits(flags).map_err(from_meta)?;
        self.meta
            .rename(ctx, parent, name, newparent, newname, flags)
            .await
            .map_err(from_meta)
    }

    pub async fn access(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        if mask & 2 != 0 {
            self.writable()?;
        }
        self.meta.access(ctx, ino, mask).await.map_err(from_meta)
    }

    pub async fn statfs(&self) -> Result<StatFs> {
        self.meta.statfs().await.map_err(from_meta)
    }

    pub async fn setxattr(
        &self,
        ctx: &Ctx,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.writable()?;
        let flags = XattrFlags::from_bits(flags).map_err(from_meta)?;
        self.meta
            .setxattr(ctx, ino, name, value, flags)
            .await
            .map_err(from_meta)
    }

    pub async fn getxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8], size: usize) -> Result<Vec<u8>> {
        self.meta
            .getxattr(ctx, ino, name, size)
            .await
            .map_err(from_meta)
    }

    pub async fn listxattr(&self, ctx: &Ctx, ino: Ino, size: usize) -> Result<Vec<u8>> {
        self.meta.listxattr(ctx, ino, size).await.map_err(from_meta)
    }

    pub async fn removexattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        self.meta
            .removexattr(ctx, ino, name)
            .await
            .map_err(from_meta)
    }

    /// Flush everything buffered for every inode and make it durable (unmount, SIGTERM).
    pub async fn flush_all(&self) -> Result<()> {
        let inos: Vec<Ino> = self
            .pending
            .lock()
            .map(|p| p.keys().copied().collect())
            .unwrap_or_default();
        for ino in inos {
            self.flush_inode(ino).await?;
        }
        self.sync().await
    }

    /// Make everything this client committed so far survive a crash of the machine: the
    /// uploaded blocks first, then the metadata naming them (`fsync`, `fsyncdir`, the
    /// periodic sync, unmount). Until then a committed change is seen by every client and
    /// survives a crash of any process, like a write to ext4 before its journal commit.
    pub async fn sync(&self) -> Result<()> {
        self.chunks.sync().await.map_err(from_chunk)?;
        self.meta.sync().await.map_err(from_meta)
    }
}
