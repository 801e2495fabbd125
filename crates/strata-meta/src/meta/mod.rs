//! The metadata client: [`Meta`] holds one engine and implements every file-system
//! operation over it. This module owns the client's state (format, session, id batches,
//! open files, pending counters) and the helpers the operation modules share; the
//! operations themselves live in the sibling modules, grouped by what they touch.

mod access;
mod acl;
mod acl_store;
mod attr;
mod check;
mod clone;
mod data;
mod delete;
mod dump;
mod dump_bin;
mod feed;
mod group;
mod load;
mod load_sink;
mod locks;
mod namespace;
mod placement;
mod populate;
mod protect;
mod quota;
mod remove;
mod rename;
mod scan;
mod session;
mod tmpfile;
mod trash;
mod xattr;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};
use strata_types::{Errno, FileType, Ino, MAX_NAME_LEN, Nanos, align_4k};

pub use access::{MAY_EXEC, MAY_READ, MAY_WRITE};
pub use attr::{SetAttr, StatFs, TimeSet};
pub use check::{NamespaceProblem, NamespaceReport, SubtreeUsage};
pub use data::{CompactCandidate, FallocateMode, WriteOutcome};
pub use delete::{SliceDeletion, hour_name, trash_entry_name};
pub use dump::{DUMP_VERSION, DumpLine, DumpNode, DumpOptions, DumpProtection, DumpStats, Raw};
pub use dump_bin::{
    BinaryDumpOptions, BinaryDumpSummary, DUMP_BIN_VERSION, binary_dump_summary, is_binary,
};
pub use group::GroupMember;
pub use locks::{LockKind, PosixLock};
pub use namespace::{DirEntry, Entry};
pub use placement::{Placement, TierPolicy};
pub use populate::{PopulateLayout, PopulateShape, PopulateSpec, Population};
pub use quota::{Quota, QuotaTarget};
pub use remove::{RemoveOptions, TrashUse};
pub use rename::RenameFlags;
pub use scan::{ChunkRecord, RecordPage, ScanCursor};
pub use session::{OpenState, Opened, SessionDetail, SessionInfo};
pub use trash::{RestoreOutcome, TrashEntry, days_from_civil, parse_hour_name};
pub use xattr::{XattrFlags, absent_xattr_is_enodata};

use crate::codec::{self, Inode, InodeCore, InodeFields, slot, usage_slot};
use crate::error::{MetaError, Result, posix};
use crate::format::Format;
use crate::keys;
use crate::kv::readcache::ReadCache;
use crate::kv::{
    CacheUse, FieldOp, FieldUpdate, KvEngine, RetryPolicy, Txn, TxnFuture, run_txn_cached,
};

/// Who is asking: the caller's credentials, for permission checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ctx {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    pub pid: u32,
    /// Permission bits a new inode does not get unless its directory has a default
    /// access control list (which then decides instead); 0 = none taken away.
    pub umask: u16,
    /// The S3 gateway's own identity, keeping object versions: it may link, move and
    /// replace the names of a version under object lock as long as one name remains
    /// (docs/SEMANTICS.md). No other front end sets it.
    pub version_keeper: bool,
}

impl Ctx {
    /// The superuser.
    pub fn root() -> Ctx {
        Ctx {
            uid: 0,
            gid: 0,
            groups: Vec::new(),
            pid: 0,
            umask: 0,
            version_keeper: false,
        }
    }

    pub fn user(uid: u32, gid: u32) -> Ctx {
        Ctx {
            uid,
            gid,
            groups: Vec::new(),
            pid: 0,
            umask: 0,
            version_keeper: false,
        }
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// Tunables of a metadata client.
#[derive(Clone, Debug)]
pub struct MetaOptions {
    pub retry: RetryPolicy,
    /// Inode numbers taken from the engine at a time.
    pub inode_batch: u64,
    /// Slice ids taken from the engine at a time.
    pub slice_batch: u64,
    /// A session not heard from for this long may be cleaned by any client.
    pub session_timeout: std::time::Duration,
    /// Slice count at which a chunk is reported for compaction.
    pub compact_threshold: usize,
    /// Operations return once committed (seen by every client, surviving a crash of this
    /// process) and [`Meta::sync`] makes them survive a crash of the machine; without it,
    /// every operation is durable when it returns. Mounts defer, admin commands do not.
    pub deferred_sync: bool,
    /// On engines where every read is a round trip ([`KvEngine::remote`]): writing
    /// transactions assume recently seen inode records and entries instead of reading
    /// them again, and the commit re-checks them (`kv::readcache`).
    pub assume_recent_reads: bool,
    /// On engines with a change feed: lookups and attribute reads are answered from a
    /// cache that the feed keeps current (see `Meta::follow_changes`).
    pub cache_metadata: bool,
    /// Read-only opens take a file's attributes from the cache the change feed keeps
    /// current when it holds them read less than this long ago (no round trip); zero:
    /// every open reads the engine (strict close-to-open). `mount --open-cache`.
    pub open_cache: std::time::Duration,
    /// Memory the metadata cache of a network engine may take, in bytes (values, listing
    /// pages and whole directories; see `kv::readcache::budget`). `mount --meta-cache-size`.
    pub cache_size: usize,
}

impl Default for MetaOptions {
    fn default() -> Self {
        MetaOptions {
            retry: RetryPolicy::default(),
            inode_batch: 256,
            slice_batch: 1024,
            session_timeout: std::time::Duration::from_secs(300),
            compact_threshold: 100,
            deferred_sync: false,
            assume_recent_reads: true,
            cache_metadata: true,
            open_cache: std::time::Duration::ZERO,
            cache_size: crate::kv::readcache::DEFAULT_BUDGET,
        }
    }
}

/// The most slice records one chunk may hold (24 B each: ~94 KiB, under the ~100 KB value
/// limit of FoundationDB-class engines and far under etcd's 1.5 MiB).
pub const MAX_SLICES_PER_CHUNK: usize = 4000;
/// Counter names.
pub(crate) const NEXT_INODE: &str = "nextInode";
pub(crate) const NEXT_SLICE: &str = "nextSlice";
pub(crate) const NEXT_SESSION: &str = "nextSession";
pub(crate) const USED_SPACE: &str = "usedSpace";
pub(crate) const TOTAL_INODES: &str = "totalInodes";
/// Bumped whenever a slice gains a reference in a new place (see `scan.rs`).
pub(crate) const SHARE_EPOCH: &str = "shareEpoch";
/// Name of the trash directory at the root.
pub const TRASH_NAME: &[u8] = b".trash";

/// A range of ids handed to this client: `[next, end)`.
#[derive(Debug, Default)]
struct IdBatch {
    next: u64,
    end: u64,
}

/// Space and inode deltas not yet added to the volume counters.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct UsageDelta {
    pub space: i64,
    pub inodes: i64,
}

/// The stores of re-formatted settings: `new` when it keeps every store of `old` (same
/// id, name and place: credentials may change), else `old` (a store is never dropped).
fn kept_stores(old: &[crate::StoreSpec], new: &[crate::StoreSpec]) -> Vec<crate::StoreSpec> {
    let keeps = |o: &crate::StoreSpec| {
        new.iter()
            .any(|n| n.id == o.id && n.name == o.name && n.bucket == o.bucket)
    };
    match old.iter().all(keeps) {
        true => new.to_vec(),
        false => old.to_vec(),
    }
}

/// A metadata client of one volume.
pub struct Meta {
    engine: Arc<dyn KvEngine>,
    opts: MetaOptions,
    format: RwLock<Option<Arc<Format>>>,
    sid: AtomicU64,
    inode_ids: tokio::sync::Mutex<IdBatch>,
    slice_ids: tokio::sync::Mutex<IdBatch>,
    open_files: Mutex<HashMap<Ino, u32>>,
    /// Inodes kept alive by this client while open (see `Meta::note_sustained`).
    sustained_here: Mutex<std::collections::HashSet<Ino>>,
    pending: Mutex<UsageDelta>,
    /// Volume counters as last read (space, inodes), for limits and statfs.
    stored: Mutex<UsageDelta>,
    trash_hour: tokio::sync::Mutex<Option<(String, Ino)>>,
    quota_cache: Mutex<quota::QuotaCache>,
    /// Recent values writing transactions may assume (network engines only), trusted by
    /// read-only operations while the change feed is followed.
    read_cache: Option<Arc<ReadCache>>,
    /// The change feed's beats (see `feed.rs`).
    beats: Arc<feed::Beats>,
    /// Stops the task following the change feed when this client is dropped.
    feed_stop: tokio_util::sync::CancellationToken,
    /// Access control lists read so far.
    acls: acl_store::AclCache,
}

impl Drop for Meta {
    fn drop(&mut self) {
        self.feed_stop.cancel();
    }
}

impl std::fmt::Debug for Meta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meta")
            .field("engine", &self.engine)
            .field("sid", &self.sid.load(Ordering::Relaxed))
            .finish()
    }
}

/// Current time in ns since the epoch.
pub fn now_ns() -> Nanos {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Check a name for a new or looked-up entry.
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return posix(Errno::EINVAL);
    }
    if name.len() > MAX_NAME_LEN {
        return posix(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// Space charged for an inode of this type and length.
pub(crate) fn space_of(kind: FileType, length: u64) -> i64 {
    let bytes = if kind == FileType::Directory {
        4096
    } else {
        align_4k(length)
    };
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl Meta {
    /// A client of the volume in `engine`. Call [`Meta::load`] (or [`Meta::format`]) next.
    pub fn new(engine: Arc<dyn KvEngine>, opts: MetaOptions) -> Meta {
        if opts.deferred_sync {
            engine.set_deferred_sync(true);
        }
        let read_cache = ((opts.assume_recent_reads || opts.cache_metadata) && engine.remote())
            .then(|| Arc::new(ReadCache::new(keys::assumable, opts.cache_size)));
        Meta {
            read_cache,
            beats: Arc::default(),
            feed_stop: tokio_util::sync::CancellationToken::new(),
            acls: acl_store::AclCache::default(),
            engine,
            opts,
            format: RwLock::new(None),
            sid: AtomicU64::new(0),
            inode_ids: tokio::sync::Mutex::default(),
            slice_ids: tokio::sync::Mutex::default(),
            open_files: Mutex::default(),
            sustained_here: Mutex::default(),
            pending: Mutex::default(),
            stored: Mutex::default(),
            trash_hour: tokio::sync::Mutex::default(),
            quota_cache: Mutex::default(),
        }
    }

    /// The engine under this client.
    pub fn engine(&self) -> &Arc<dyn KvEngine> {
        &self.engine
    }

    /// Make every operation that returned so far survive a crash of the machine (see
    /// [`MetaOptions::deferred_sync`]). Not retried: a failed sync may have lost data.
    pub async fn sync(&self) -> Result<()> {
        self.engine.sync().await.map_err(MetaError::from)
    }

    /// The options this client runs with.
    pub fn options(&self) -> &MetaOptions {
        &self.opts
    }

    /// Run `body` as one transaction with the client's retry policy.
    pub(crate) async fn txn<'s, T, F>(&'s self, body: F) -> Result<T>
    where
        F: for<'t> FnMut(&'t mut Txn<'s>) -> TxnFuture<'t, T, MetaError>,
    {
        self.txn_using(CacheUse::Inform, body).await
    }

    /// [`Meta::txn`] for a read-only operation that may be answered from the cache the
    /// change feed keeps current (lookups, attributes, permission checks): no round trip
    /// when every record it needs is there.
    ///
    /// Records from the cache and records read fresh may show two moments (each current
    /// up to the feed's delay): an entry still cached whose inode another client has just
    /// removed looks like a dangling entry. Before such a view is reported as corrupt,
    /// the operation runs again on the engine alone (found by the fault harness: lookups
    /// failed with EIO, "entry points at missing inode", on etcd).
    pub(crate) async fn cached_txn<'s, T, F>(&'s self, mut body: F) -> Result<T>
    where
        F: for<'t> FnMut(&'t mut Txn<'s>) -> TxnFuture<'t, T, MetaError>,
    {
        match self.txn_using(CacheUse::Trust, &mut body).await {
            Err(MetaError::Corrupt { .. }) if self.read_cache.is_some() => {
                self.txn_using(CacheUse::Inform, body).await
            }
            other => other,
        }
    }

    /// [`Meta::txn`] for an operation that writes: on a network engine its first attempt
    /// assumes the inode records and entries this client saw recently instead of reading
    /// them (the commit re-checks them), so after the kernel's lookup it is one round
    /// trip. Not for read-only operations: an attempt that assumed values and wrote
    /// nothing is run again.
    pub(crate) async fn write_txn<'s, T, F>(&'s self, body: F) -> Result<T>
    where
        F: for<'t> FnMut(&'t mut Txn<'s>) -> TxnFuture<'t, T, MetaError>,
    {
        let how = if self.opts.assume_recent_reads {
            CacheUse::Assume
        } else {
            CacheUse::Inform
        };
        self.txn_using(how, body).await
    }

    /// [`Meta::txn`] for bulk writes (load, populate): the read cache is neither used nor
    /// told, so millions of records written once do not crowd out what is worth keeping
    /// (their announcements still drop anything the cache held under their keys).
    pub(crate) async fn uncached_txn<'s, T, F>(&'s self, body: F) -> Result<T>
    where
        F: for<'t> FnMut(&'t mut Txn<'s>) -> TxnFuture<'t, T, MetaError>,
    {
        run_txn_cached(
            self.engine.as_ref(),
            None,
            CacheUse::Inform,
            &self.opts.retry,
            body,
        )
        .await
    }

    async fn txn_using<'s, T, F>(&'s self, how: CacheUse, body: F) -> Result<T>
    where
        F: for<'t> FnMut(&'t mut Txn<'s>) -> TxnFuture<'t, T, MetaError>,
    {
        let cache = self.read_cache.as_deref();
        run_txn_cached(self.engine.as_ref(), cache, how, &self.opts.retry, body).await
    }

    /// Format the volume: write the format record, root and trash directories and counters.
    /// Formatting again with the same immutable settings updates the mutable ones
    /// (trash days, capacity, inodes); different immutable settings are refused unless
    /// `force`.
    pub async fn format(&self, format: &Format, force: bool) -> Result<Format> {
        format.validate()?;
        let stored = self
            .txn(|tx| {
                Box::pin(async move {
                    let key = keys::setting("format");
                    if let Some(old) = tx.get(&key).await? {
                        let old = Format::decode(&key, &old)?;
                        let diffs = old.immutable_differences(format);
                        check_keys_kept(&old, format)?;
                        if !diffs.is_empty() && !force {
                            return Err(MetaError::FormatMismatch(diffs.join("; ")));
                        }
                        let updated = Format {
                            uuid: old.uuid.clone(),
                            created_at: old.created_at,
                            // The records stay in the layout they were written in.
                            meta_version: old.meta_version,
                            // Access control lists, once on, stay on.
                            enable_acl: old.enable_acl,
                            // So do the data keys: new settings replace them (a
                            // rotation) or keep them, never remove them.
                            encryption: None,
                            // And blocks adopted by an import.
                            foreign: None,
                            // And stores: new settings may add some, never drop one.
                            stores: kept_stores(&old.stores, &format.stores),
                            ..format.clone()
                        }
                        .with_acl(format.enable_acl)
                        .with_encryption(format.encryption.clone().or(old.encryption))
                        .with_foreign(format.foreign.clone().or(old.foreign));
                        let updated = match updated.stores.is_empty() {
                            true => updated,
                            false => Format {
                                meta_version: updated
                                    .meta_version
                                    .max(crate::format::PLACEMENT_VERSION),
                                ..updated
                            },
                        };
                        tx.put(key, updated.encode()?);
                        return Ok(updated);
                    }
                    tx.put(key, format.encode()?);
                    init_volume(tx, format.created_at.saturating_mul(1_000_000_000))?;
                    Ok(format.clone())
                })
            })
            .await?;
        self.set_format(stored.clone());
        Ok(stored)
    }

    /// Read the format record; fails with [`MetaError::NotFormatted`] on an empty engine.
    pub async fn load(&self) -> Result<Arc<Format>> {
        let format = self
            .txn(|tx| {
                Box::pin(async move {
                    let key = keys::setting("format");
                    match tx.get(&key).await? {
                        Some(v) => Format::decode(&key, &v),
                        None => Err(MetaError::NotFormatted),
                    }
                })
            })
            .await?;
        if format.meta_version > crate::format::UNDERSTOOD_VERSION {
            return Err(MetaError::Invalid(format!(
                "volume uses metadata version {}, this client understands up to {}",
                format.meta_version,
                crate::format::UNDERSTOOD_VERSION
            )));
        }
        self.refresh_usage().await?;
        self.refresh_quotas().await?;
        Ok(self.set_format(format))
    }

    fn set_format(&self, format: Format) -> Arc<Format> {
        let format = Arc::new(format);
        *self.format.write() = Some(format.clone());
        format
    }

    /// The loaded format record.
    pub fn current_format(&self) -> Result<Arc<Format>> {
        self.format.read().clone().ok_or(MetaError::NotFormatted)
    }

    /// True when every inode's "may have xattrs" flag is kept (metadata version 3 on), so
    /// attributes without it mean the inode has none.
    pub fn keeps_xattr_flags(&self) -> bool {
        self.current_format()
            .is_ok_and(|f| f.meta_version >= crate::format::XATTR_FLAG_VERSION)
    }

    /// Allocate one inode number from this client's batch.
    pub(crate) async fn next_inode(&self) -> Result<Ino> {
        let batch = self.opts.inode_batch;
        self.next_id(&self.inode_ids, NEXT_INODE, batch)
            .await
            .map(Ino)
    }

    /// Allocate a new slice id (never 0).
    pub async fn new_slice_id(&self) -> Result<u64> {
        let batch = self.opts.slice_batch;
        self.next_id(&self.slice_ids, NEXT_SLICE, batch).await
    }

    async fn next_id(
        &self,
        ids: &tokio::sync::Mutex<IdBatch>,
        name: &'static str,
        batch: u64,
    ) -> Result<u64> {
        let mut ids = ids.lock().await;
        if ids.next >= ids.end {
            let start = self.alloc_counter(name, batch).await?;
            *ids = IdBatch {
                next: start,
                end: start + batch,
            };
        }
        let id = ids.next;
        ids.next += 1;
        Ok(id)
    }

    /// Take `count` values from counter `name`; returns the first.
    pub(crate) async fn alloc_counter(&self, name: &'static str, count: u64) -> Result<u64> {
        let count =
            i64::try_from(count).map_err(|_| MetaError::Invalid("batch too large".into()))?;
        self.txn(|tx| {
            Box::pin(async move {
                let key = keys::counter(name);
                let current = codec::decode_counter(&key, tx.get(&key).await?.as_deref())?;
                let start = current.max(1);
                tx.put(key, codec::encode_slots(&[start + count]));
                Ok(u64::try_from(start).unwrap_or(1))
            })
        })
        .await
    }

    /// Record space and inode changes for the volume counters (flushed by
    /// [`Meta::flush_usage`]).
    pub(crate) fn add_usage(&self, space: i64, inodes: i64) {
        let mut p = self.pending.lock();
        p.space += space;
        p.inodes += inodes;
    }

    /// Add pending usage deltas to the volume counters (conflict-free field updates) and
    /// re-read them. Called periodically and at session close.
    pub async fn flush_usage(&self) -> Result<()> {
        let delta = std::mem::take(&mut *self.pending.lock());
        let owners = self.take_unflushed_quota();
        if delta.space != 0 || delta.inodes != 0 || !owners.is_empty() {
            let owners_ref = &owners;
            let outcome = self
                .txn(|tx| {
                    Box::pin(async move {
                        add_counter(tx, USED_SPACE, delta.space)?;
                        add_counter(tx, TOTAL_INODES, delta.inodes)?;
                        for (target, (space, inodes)) in owners_ref {
                            quota::charge_quota_record(tx, *target, *space, *inodes)?;
                        }
                        Ok(())
                    })
                })
                .await;
            if let Err(e) = outcome {
                self.add_usage(delta.space, delta.inodes);
                self.restore_unflushed_quota(&owners);
                return Err(e);
            }
        }
        self.refresh_usage().await
    }

    async fn refresh_usage(&self) -> Result<()> {
        let stored = self
            .txn(|tx| {
                Box::pin(async move {
                    let keys = vec![keys::counter(USED_SPACE), keys::counter(TOTAL_INODES)];
                    let vals = tx.get_many(&keys).await?;
                    Ok(UsageDelta {
                        space: codec::decode_counter(&keys[0], vals[0].as_deref())?,
                        inodes: codec::decode_counter(&keys[1], vals[1].as_deref())?,
                    })
                })
            })
            .await?;
        *self.stored.lock() = stored;
        Ok(())
    }

    /// Volume usage as this client knows it: stored counters plus its own pending deltas.
    pub(crate) fn usage(&self) -> UsageDelta {
        let stored = *self.stored.lock();
        let pending = *self.pending.lock();
        UsageDelta {
            space: stored.space + pending.space,
            inodes: stored.inodes + pending.inodes,
        }
    }

    /// ENOSPC if adding `space` bytes and `inodes` inodes would pass the volume's limits.
    pub(crate) fn check_limits(&self, space: i64, inodes: i64) -> Result<()> {
        let Ok(format) = self.current_format() else {
            return Ok(());
        };
        let usage = self.usage();
        let over = |limit: u64, used: i64, add: i64| {
            limit > 0
                && add > 0
                && used.saturating_add(add) > i64::try_from(limit).unwrap_or(i64::MAX)
        };
        if over(format.capacity, usage.space, space) || over(format.inodes, usage.inodes, inodes) {
            return posix(Errno::ENOSPC);
        }
        Ok(())
    }
}

/// Write the root directory, the trash directory and the initial counters.
fn init_volume(tx: &mut Txn<'_>, now: Nanos) -> Result<()> {
    for (ino, mode, parent) in [
        (Ino::ROOT, 0o777, Ino::ROOT),
        (Ino::TRASH, 0o555, Ino::ROOT),
    ] {
        let inode = Inode {
            ino,
            core: InodeCore {
                kind: FileType::Directory,
                mode,
                uid: 0,
                gid: 0,
                rdev: 0,
                parent,
                linkable: false,
                xattrs: false,
                access_acl: 0,
                default_acl: 0,
                protection: strata_types::Protection::default(),
            },
            fields: InodeFields {
                atime: now,
                mtime: now,
                ctime: now,
                nlink: 2,
                length: 4096,
            },
        };
        put_inode(tx, &inode);
        tx.put(
            keys::dir_usage(ino),
            codec::encode_slots(&[0; usage_slot::COUNT]),
        );
    }
    tx.put(keys::counter(NEXT_INODE), codec::encode_slots(&[2]));
    tx.put(keys::counter(NEXT_SLICE), codec::encode_slots(&[1]));
    tx.put(keys::counter(NEXT_SESSION), codec::encode_slots(&[1]));
    tx.put(keys::counter(USED_SPACE), codec::encode_slots(&[0]));
    tx.put(keys::counter(TOTAL_INODES), codec::encode_slots(&[0]));
    Ok(())
}

fn add_counter(tx: &mut Txn<'_>, name: &str, delta: i64) -> Result<()> {
    if delta != 0 {
        let op = FieldOp {
            slot: 0,
            update: FieldUpdate::Add(delta),
        };
        tx.update_fields(keys::counter(name), &[op])?;
    }
    Ok(())
}

/// Load an inode (core and fields) in one round trip.
pub(crate) async fn get_inode(tx: &mut Txn<'_>, ino: Ino) -> Result<Option<Inode>> {
    let ks = vec![keys::inode_core(ino), keys::inode_fields(ino)];
    let vals = tx.get_many(&ks).await?;
    decode_inode(ino, vals[0].as_deref(), vals[1].as_deref())
}

/// An inode from its core and field records as read (`None` when neither exists).
pub(crate) fn decode_inode(
    ino: Ino,
    core: Option<&[u8]>,
    fields: Option<&[u8]>,
) -> Result<Option<Inode>> {
    match (core, fields) {
        (Some(core), Some(fields)) => Ok(Some(Inode {
            ino,
            core: InodeCore::decode(&keys::inode_core(ino), core)?,
            fields: InodeFields::decode(&keys::inode_fields(ino), fields)?,
        })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(MetaError::corrupt(
            &keys::inode_fields(ino),
            "inode has no field record",
        )),
        (None, Some(_)) => Err(MetaError::corrupt(
            &keys::inode_core(ino),
            "inode has no core record",
        )),
    }
}

/// Load an inode that must exist (ENOENT otherwise).
pub(crate) async fn must_get_inode(tx: &mut Txn<'_>, ino: Ino) -> Result<Inode> {
    get_inode(tx, ino)
        .await?
        .ok_or(MetaError::Posix(Errno::ENOENT))
}

/// A directory an operation works in: only its core record is read, so concurrent
/// changes of its times, link count and usage (field updates) never conflict with us.
#[derive(Clone, Debug)]
pub(crate) struct Dir {
    pub ino: Ino,
    pub core: InodeCore,
}

/// Load a directory (ENOENT if missing, ENOTDIR if not a directory).
pub(crate) async fn get_dir(tx: &mut Txn<'_>, ino: Ino) -> Result<Dir> {
    let core = tx.get(&keys::inode_core(ino)).await?;
    decode_dir(ino, core.as_deref())
}

/// Directory `ino` from the value of its core record, as read (ENOENT if missing,
/// ENOTDIR if not a directory).
pub(crate) fn decode_dir(ino: Ino, core: Option<&[u8]>) -> Result<Dir> {
    let Some(core) = core else {
        return posix(Errno::ENOENT);
    };
    let core = InodeCore::decode(&keys::inode_core(ino), core)?;
    if core.kind != FileType::Directory {
        return posix(Errno::ENOTDIR);
    }
    Ok(Dir { ino, core })
}

pub(crate) fn put_inode(tx: &mut Txn<'_>, inode: &Inode) {
    tx.put(keys::inode_core(inode.ino), inode.core.encode());
    tx.put(keys::inode_fields(inode.ino), inode.fields.encode());
}

impl Meta {
    /// Update a directory after one of its entries changed: mtime and ctime to `now`, link
    /// count by `nlink_delta`, usage by the given deltas. Field updates, so concurrent
    /// changes in one directory never conflict here.
    pub(crate) async fn touch_dir(
        &self,
        tx: &mut Txn<'_>,
        dir: Ino,
        now: Nanos,
        nlink_delta: i64,
        space_delta: i64,
        inode_delta: i64,
    ) -> Result<()> {
        let mut ops = vec![
            FieldOp {
                slot: slot::MTIME,
                update: FieldUpdate::Set(now),
            },
            FieldOp {
                slot: slot::CTIME,
                update: FieldUpdate::Set(now),
            },
        ];
        if nlink_delta != 0 {
            ops.push(FieldOp {
                slot: slot::NLINK,
                update: FieldUpdate::Add(nlink_delta),
            });
        }
        tx.update_fields(keys::inode_fields(dir), &ops)?;
        self.add_dir_usage(tx, dir, space_delta, inode_delta).await
    }

    /// Change a directory's usage record, and the usage of every directory quota above it.
    pub(crate) async fn add_dir_usage(
        &self,
        tx: &mut Txn<'_>,
        dir: Ino,
        space: i64,
        inodes: i64,
    ) -> Result<()> {
        if space == 0 && inodes == 0 {
            return Ok(());
        }
        let ops = [
            FieldOp {
                slot: usage_slot::BYTES,
                update: FieldUpdate::Add(space),
            },
            FieldOp {
                slot: usage_slot::INODES,
                update: FieldUpdate::Add(inodes),
            },
        ];
        tx.update_fields(keys::dir_usage(dir), &ops)?;
        let quota_dirs = self.quota_dirs(tx, dir).await?;
        for d in &quota_dirs {
            quota::charge_quota_record(tx, quota::QuotaTarget::Dir(*d), space, inodes)?;
        }
        // A hint until the next refresh (a retried transaction may count twice).
        self.charge_dirs_locally(&quota_dirs, space, inodes);
        Ok(())
    }
}

/// New settings that carry keys must keep every data key the stored ones have (a
/// rotation adds keys, never drops one): two rotations at once must not lose one's key.
fn check_keys_kept(old: &Format, new: &Format) -> Result<()> {
    let (Some(old), Some(new)) = (&old.encryption, &new.encryption) else {
        if old.encryption.is_none() && new.encryption.is_some() {
            return Err(MetaError::Invalid(
                "encryption is chosen when a volume is created: this one holds plain data".into(),
            ));
        }
        return Ok(());
    };
    let lost: Vec<u32> = old
        .keys
        .iter()
        .map(|k| k.id)
        .filter(|id| !new.keys.iter().any(|k| k.id == *id))
        .collect();
    if lost.is_empty() {
        return Ok(());
    }
    Err(MetaError::Invalid(format!(
        "the new settings lack data keys {lost:?} (changed by another command meanwhile?): \
         read the settings again and retry"
    )))
}
