//! Strata's file system as a library, independent of FUSE: inode-based operations that
//! mirror the FUSE calls, coordinating the metadata layer (`strata-meta`) and the data
//! layer (`strata-chunk`). Protocol front ends (FUSE, S3, WebDAV) speak only to [`Vfs`].
//!
//! Every operation returns `Result<_, Errno>`: errors are mapped to errno here, in
//! [`errno`], and nowhere else.

// The data path converts sizes and offsets with checked conversions, never `as`.
#![warn(clippy::cast_possible_truncation)]

mod atime;
mod background;
pub mod control;
mod control_ops;
mod control_warmup;
pub mod control_wire;
mod dir;
pub mod errno;
mod file;
pub mod handover;
mod identity;
mod internal;
mod kernelcache;
mod locks;
pub mod maintenance;
pub mod metrics;
mod opencache;
pub mod paths;
pub mod placement;
mod protect;
#[cfg(feature = "testing")]
pub mod testing;
mod write;
mod xattrhint;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use std::time::Duration;

use strata_chunk::ChunkStore;
use strata_meta::{Meta, RenameFlags, XattrFlags};
use strata_types::{Attr, Errno, FileType, Ino};

pub use atime::AtimeMode;
pub use background::{BackgroundJobs, MetaBackup};
pub use control_wire::{ChunkInfo, FileInfo, SliceInfo, SummaryRow};
pub use dir::DirEntryPlus;
pub use identity::{Identity, IdentityError, IdentityOptions};
pub use internal::{ACCESSLOG_INO, CONFIG_INO, CONTROL_INO, STATS_INO, is_internal, log_time};
/// Types of the metadata layer that front ends use through the VFS.
pub use strata_meta::{
    Ctx, DirEntry, Entry, LockKind, MAY_EXEC, MAY_READ, MAY_WRITE, PosixLock, SetAttr, StatFs,
    TimeSet,
};
/// How a front end interrupts a waiting request (a blocking lock).
pub use tokio_util::sync::CancellationToken;

use crate::errno::{from_chunk, from_meta};
use crate::file::FileHandle;
use crate::write::PendingWrites;

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
    /// When reads update access times (`--atime-mode`).
    pub atime_mode: AtimeMode,
    /// How front ends map their callers to the volume's users (`--root-squash`, ...).
    pub identity: Identity,
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
            atime_mode: AtimeMode::NoAtime,
            identity: Identity::default(),
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
    pending: Mutex<HashMap<Ino, Arc<PendingWrites>>>,
    /// Inodes whose buffered writes could not be committed at their last close: kept and
    /// retried by the periodic sync.
    kept: Mutex<HashSet<Ino>>,
    /// Commits that emptied a file's write buffer so far ([`Vfs::read_epoch`]).
    commit_epoch: AtomicU64,
    /// Syncs that failed so far (each open handle is told once).
    sync_failures: AtomicU64,
    /// The errno of the last sync that failed (ENOSPC stays ENOSPC for the handles told).
    last_sync_errno: std::sync::atomic::AtomicI32,
    /// Access times seen and updates in flight (`--atime-mode`).
    atimes: atime::AtimeTracker,
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
    /// Open `.control` files.
    controls: control::ControlHandles,
    /// Drops an entry from the kernel's cache (set by the FUSE front end).
    entry_invalidator: Mutex<Option<EntryInvalidator>>,
    /// Inodes known to have no extended attributes (getxattr answered here).
    xattr_free: xattrhint::XattrFreeInodes,
    /// Latency of the front ends' operations.
    front_metrics: metrics::FrontMetrics,
    /// Held (shared) by each commit of a new slice, and (alone) by a sync from its store
    /// sync to its metadata sync: a commit whose blocks the store sync did not cover can
    /// never be made durable by the metadata sync that follows it.
    durability: tokio::sync::RwLock<()>,
    /// Where new slices go on a volume with several stores, and the stores (set once, at
    /// start).
    placements: std::sync::OnceLock<(
        Arc<placement::Placements>,
        Arc<strata_object::routed::Routed>,
    )>,
    /// The staging area of `--writeback`, if on.
    writeback: Mutex<Option<Arc<strata_object::writeback::Writeback>>>,
}

/// How the front end makes the kernel forget a cached entry: called with the parent as
/// the front end numbers it, and the name.
/// It may block (the kernel takes the directory's lock): it runs on a blocking thread.
#[derive(Clone)]
pub struct EntryInvalidator(pub Arc<InvalidateFn>);

/// The function behind an [`EntryInvalidator`].
pub type InvalidateFn = dyn Fn(u64, &[u8]) + Send + Sync;

impl std::fmt::Debug for EntryInvalidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntryInvalidator")
    }
}

impl Vfs {
    pub fn new(meta: Arc<Meta>, chunks: ChunkStore, opts: VfsOptions) -> Vfs {
        let xattr_free = xattrhint::XattrFreeInodes::new(meta.keeps_xattr_flags(), opts.attr_ttl);
        Vfs {
            xattr_free,
            meta,
            chunks,
            opts,
            handles: Mutex::default(),
            dirs: Mutex::default(),
            next_fh: AtomicU64::new(handover::first_fh()),
            pending: Mutex::default(),
            kept: Mutex::default(),
            commit_epoch: AtomicU64::new(0),
            sync_failures: AtomicU64::new(0),
            last_sync_errno: std::sync::atomic::AtomicI32::new(Errno::EIO.0),
            atimes: atime::AtimeTracker::default(),
            open_files: opencache::OpenFileCache::default(),
            config_text: Mutex::default(),
            object_stats: Mutex::default(),
            internal_reads: Mutex::default(),
            access_log: tokio::sync::broadcast::channel(internal::ACCESS_LOG_LINES).0,
            access_readers: Mutex::default(),
            kernel_cache: kernelcache::KernelCacheTracker::default(),
            controls: Mutex::default(),
            entry_invalidator: Mutex::default(),
            front_metrics: metrics::FrontMetrics::default(),
            writeback: Mutex::default(),
            durability: tokio::sync::RwLock::new(()),
            placements: std::sync::OnceLock::new(),
        }
    }

    /// On a volume with several stores: where new slices go (docs/PLACEMENT.md). False if
    /// set already.
    pub fn set_placements(
        &self,
        placements: Arc<placement::Placements>,
        stores: Arc<strata_object::routed::Routed>,
    ) -> bool {
        self.placements.set((placements, stores)).is_ok()
    }

    /// A new slice id for data of file `ino`, its placement recorded first when a tier
    /// policy sends the file's new data to other stores than the volume's own.
    pub(crate) async fn new_slice_for(&self, ino: Ino) -> Result<u64> {
        let id = self.meta.new_slice_id().await.map_err(errno::from_meta)?;
        if let Some((p, _)) = self.placements.get() {
            p.place_new_slice(ino, id).await.map_err(errno::from_meta)?;
        }
        Ok(id)
    }

    /// Let the VFS drop entries it removed behind the kernel's back (a path tool's `rmr`)
    /// from the kernel's cache.
    pub fn set_entry_invalidator(&self, invalidate: EntryInvalidator) {
        *self.entry_invalidator.lock() = Some(invalidate);
    }

    pub(crate) async fn invalidate_entry(&self, parent: Ino, name: &[u8]) {
        let Some(invalidate) = self.entry_invalidator.lock().clone() else {
            return;
        };
        let (parent, name) = (self.to_front(parent), name.to_vec());
        let done = tokio::task::spawn_blocking(move || (invalidate.0)(parent, &name)).await;
        if let Err(e) = done {
            tracing::warn!("dropping a kernel cache entry: {e}");
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
            return Ok(internal::internal_attr(ino, 0));
        }
        let read_epoch = self.read_epoch();
        let mut attr = self.meta.getattr(ino).await.map_err(from_meta)?;
        self.xattr_free.seen(ino, &attr);
        self.apply_pending(ino, &mut attr, read_epoch);
        Ok(attr)
    }

    pub async fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Entry> {
        if parent == self.opts.root
            && let Some(ino) = internal::internal_ino(name)
            && (!self.opts.hide_internal || ino == CONTROL_INO)
        {
            return Ok(Entry {
                ino,
                attr: internal::internal_attr(ino, 0),
            });
        }
        let read_epoch = self.read_epoch();
        let mut entry = self
            .meta
            .lookup(ctx, parent, name)
            .await
            .map_err(from_meta)?;
        self.xattr_free.seen(entry.ino, &entry.attr);
        self.apply_pending(entry.ino, &mut entry.attr, read_epoch);
        Ok(entry)
    }

    /// Change attributes. Buffered writes order before the change, as on ext4: a size
    /// change commits them first; any other change stores their time with it (unless it
    /// sets mtime itself), so flushing them later leaves the times this change set.
    pub async fn setattr(&self, ctx: &Ctx, ino: Ino, set: &SetAttr) -> Result<Attr> {
        self.writable()?;
        if set.size.is_some() {
            // A size change orders after every write this client made before it.
            self.flush_inode(ino).await?;
        }
        let written_at = self.unstored_write_time(ino);
        let set = SetAttr {
            written_at,
            ..set.clone()
        };
        let read_epoch = self.read_epoch();
        let mut attr = self.meta.setattr(ctx, ino, &set).await.map_err(from_meta)?;
        if set.size.is_some() {
            self.size_changed(ino);
        }
        self.write_time_stored(ino, written_at);
        self.open_files.invalidate(ino);
        // Unflushed writes still count: the kernel takes this reply as the file's size.
        self.apply_pending(ino, &mut attr, read_epoch);
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
        self.meta
            .mknod(ctx, parent, name, kind, perm_bits(mode), rdev)
            .await
            .map_err(from_meta)
    }

    pub async fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Entry> {
        self.writable()?;
        self.meta
            .mkdir(ctx, parent, name, perm_bits(mode))
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
        let read_epoch = self.read_epoch();
        let mut attr = self
            .meta
            .link(ctx, ino, parent, name)
            .await
            .map_err(from_meta)?;
        self.apply_pending(ino, &mut attr, read_epoch);
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

    /// Rename `name` over `newname` only if `newname` is still the inode `expected`
    /// (decided in the rename's transaction); `ESTALE` otherwise.
    pub async fn rename_replacing(
        &self,
        ctx: &Ctx,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        expected: Ino,
    ) -> Result<()> {
        let flags = RenameFlags {
            replacing: Some(expected),
            ..RenameFlags::default()
        };
        self.rename_with(ctx, from, to, flags).await
    }

    /// Rename `name` to `newname` (replacing what is there) only if `name` is still the
    /// inode `expected` (decided in the rename's transaction); `ESTALE` otherwise.
    pub async fn rename_moving(
        &self,
        ctx: &Ctx,
        from: (Ino, &[u8]),
        to: (Ino, &[u8]),
        expected: Ino,
    ) -> Result<()> {
        let flags = RenameFlags {
            moving: Some(expected),
            ..RenameFlags::default()
        };
        self.rename_with(ctx, from, to, flags).await
    }

    async fn rename_with(
        &self,
        ctx: &Ctx,
        (parent, name): (Ino, &[u8]),
        (newparent, newname): (Ino, &[u8]),
        flags: RenameFlags,
    ) -> Result<()> {
        self.writable()?;
        self.meta
            .rename(ctx, parent, name, newparent, newname, flags)
            .await
            .map_err(from_meta)
    }

    /// A metadata-only copy of the file or symlink `src` as `parent/name` (WebDAV COPY):
    /// the copy names the same slices, belongs to the caller and gets the current time.
    /// What this client still buffers for `src` is committed first.
    pub async fn clone_file(&self, ctx: &Ctx, src: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        if self.getattr(src).await?.is_dir() {
            return Err(Errno::EISDIR);
        }
        self.flush_inode(src).await?;
        let cloned = self
            .meta
            .clone_tree(ctx, src, parent, name, false, &mut |_| true)
            .await;
        self.invalidate_entry(parent, name).await;
        cloned.map_err(from_meta)?;
        self.meta.flush_usage().await.map_err(from_meta)
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
        self.xattr_free.forget(ino);
        let identity = &self.options().identity;
        let mapped;
        let value = if strata_meta::acl::is_acl_xattr(name) && identity.maps_ids() {
            mapped = identity.acl_to_volume(value);
            &mapped[..]
        } else {
            value
        };
        self.meta
            .setxattr(ctx, ino, name, value, flags)
            .await
            .map_err(from_meta)
    }

    pub async fn getxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8], size: usize) -> Result<Vec<u8>> {
        let absent_is_enodata = strata_meta::absent_xattr_is_enodata(ctx, name)
            || (strata_meta::acl::is_acl_xattr(name) && self.meta.keeps_acls());
        if absent_is_enodata && self.xattr_free.has_none(ino) {
            return Err(Errno::ENODATA);
        }
        let value = self
            .meta
            .getxattr(ctx, ino, name, size)
            .await
            .map_err(from_meta)?;
        let identity = &self.options().identity;
        if strata_meta::acl::is_acl_xattr(name) && identity.maps_ids() {
            return Ok(identity.acl_to_host(&value));
        }
        Ok(value)
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

    /// Make everything this client committed so far survive a crash of the machine: the
    /// uploaded blocks first, then the metadata naming them (`fsync`, `fsyncdir`, the
    /// periodic sync, unmount). Until then a committed change is seen by every client and
    /// survives a crash of any process, like a write to ext4 before its journal commit.
    /// A failure is also reported, once, to every handle open for writing at its next
    /// `fsync` or close.
    pub async fn sync(&self) -> Result<()> {
        let _alone = self.durability.write().await;
        let synced = match self.chunks.sync().await.map_err(from_chunk) {
            Ok(_) => self.meta.sync().await.map_err(from_meta),
            Err(e) => Err(e),
        };
        if let Err(errno) = synced {
            self.sync_failed(errno);
        }
        synced
    }
}

/// The permission bits (and setuid/setgid/sticky) of a mode.
pub(crate) fn perm_bits(mode: u32) -> u16 {
    u16::try_from(mode & 0o7777).unwrap_or(0)
}
