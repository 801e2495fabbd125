//! An open client of a volume — metadata session, object store stack, block cache, VFS
//! and background jobs — built from plain options, so the CLI's front ends and the
//! Python SDK open volumes the same way.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use strata_chunk::ChunkOptions;
use strata_chunk::ChunkStore;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::cache::memory::MemoryCache;
use strata_chunk::cache::segment_file::Framing;
use strata_chunk::cache::{BlockCache, NoCache};
use strata_chunk::group::{Group, Member};
use strata_meta::{Ctx, Format, GroupMember, Meta, MetaOptions, SessionInfo};
use strata_object::ObjectStore;
use strata_object::compress::Codec;
use strata_object::limit::Limits;
use strata_object::prefix::Prefixed;
use strata_object::retry::RetryPolicy;
use strata_object::stack::{StackOptions, build};
use strata_object::writeback::{AwaitLanding, Staged, StagingWriters, Writeback, WritebackOptions};
use strata_types::{Errno, Ino, MetaUrl};
use strata_vfs::paths::PathWalk;
use strata_vfs::{BackgroundJobs, Vfs, VfsOptions};

use tokio_util::sync::{CancellationToken, DropGuard};

use crate::error::{OpenError, Result};
use crate::group::{self, GroupOptions};
use crate::volume::{check_backend, home_path, load_meta_with, open_backend, route_stores};
use strata_object::routed::Routed;

/// A client's settings: caches, buffers, object-store limits, session. The defaults are
/// the mount's defaults.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Cache directories separated by ':' ("memory" keeps blocks in RAM); `None` is
    /// `~/.strata/cache`.
    pub cache_dir: Option<String>,
    /// Cache size in bytes; 0 disables the block cache.
    pub cache_size: u64,
    /// Fraction of the cache disk kept free.
    pub free_space_ratio: f64,
    /// Write buffer in bytes (a quarter more holds hot pieces of randomly read blocks).
    pub buffer_size: u64,
    /// Cache only pieces fetched by random reads, not whole blocks of sequential scans.
    pub cache_partial_only: bool,
    /// Largest readahead window in bytes.
    pub max_readahead: u64,
    /// Concurrent block prefetches.
    pub prefetch: usize,
    /// Concurrent uploads.
    pub max_uploads: usize,
    /// Concurrent downloads.
    pub max_downloads: usize,
    /// Upload bandwidth limit in Mbps (0 = unlimited).
    pub upload_limit: u64,
    /// Download bandwidth limit in Mbps (0 = unlimited).
    pub download_limit: u64,
    /// Retries of a failed object request.
    pub io_retries: u32,
    /// Timeout of one GET.
    pub get_timeout: Duration,
    /// Timeout of one PUT.
    pub put_timeout: Duration,
    /// A directory of the volume used as the root.
    pub subdir: Option<String>,
    /// Skip background jobs (data deletion, compaction, trash purge, metadata backup).
    pub no_bgjob: bool,
    /// Metadata backup interval into the bucket; zero turns it off.
    pub backup_meta: Duration,
    /// Backups read each page as it stands instead of one moment of the engine.
    pub backup_meta_no_snapshot: bool,
    /// Session heartbeat interval.
    pub heartbeat: Duration,
    /// Cache lookups and attributes, kept current by the engine's change feed.
    pub meta_cache: bool,
    /// How long read-only opens may trust cached attributes (zero: strict close-to-open).
    pub open_cache: Duration,
    /// Memory the metadata cache may take, in bytes.
    pub meta_cache_size: u64,
    /// The cache group to join, if any.
    pub cache_group: Option<GroupOptions>,
    /// Stage writes on the local cache disk and upload them in the background.
    pub writeback: bool,
    /// How long a staged block waits before its upload starts.
    pub upload_delay: Duration,
    /// Most bytes staged at once (beyond: straight to the object store).
    pub staging_size: u64,
    /// How to get the data keys of an encrypted volume.
    pub keys: crate::keys::KeyOptions,
    /// Wraps the object store below every layer of the stack (retries, checks, caches):
    /// a bandwidth shaper, or the fault injection of the tests.
    pub wrap_store: Option<StoreWrapper>,
}

/// Turns the bare object store into the one the client stacks its layers on.
pub type WrapStore = dyn Fn(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> + Send + Sync;

/// A [`WrapStore`] function, shareable between options.
#[derive(Clone)]
pub struct StoreWrapper(pub Arc<WrapStore>);

impl std::fmt::Debug for StoreWrapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreWrapper")
    }
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            cache_dir: None,
            cache_size: 100 << 30,
            free_space_ratio: 0.1,
            buffer_size: 300 << 20,
            cache_partial_only: false,
            max_readahead: 256 << 20,
            prefetch: 8,
            max_uploads: 20,
            max_downloads: 200,
            upload_limit: 0,
            download_limit: 0,
            io_retries: 10,
            get_timeout: Duration::from_secs(60),
            put_timeout: Duration::from_secs(60),
            subdir: None,
            no_bgjob: false,
            backup_meta: Duration::from_secs(3600),
            backup_meta_no_snapshot: false,
            heartbeat: Duration::from_secs(12),
            meta_cache: true,
            open_cache: Duration::ZERO,
            meta_cache_size: 32 << 20,
            cache_group: None,
            writeback: false,
            upload_delay: Duration::ZERO,
            staging_size: 10 << 30,
            keys: crate::keys::KeyOptions::default(),
            wrap_store: None,
        }
    }
}

/// An open client: its metadata, its VFS and its background jobs.
#[derive(Debug)]
pub struct Client {
    pub meta: Arc<Meta>,
    pub format: Arc<Format>,
    pub vfs: Arc<Vfs>,
    jobs: BackgroundJobs,
    /// Stops the cache group's server and membership refresh when dropped.
    group_stop: DropGuard,
    /// Stops the writeback uploaders and the watch on other writers when dropped.
    background_stop: DropGuard,
    /// The staging area, with `--writeback`.
    writeback: Option<Arc<Writeback>>,
    /// The volume's stores, when it has several (docs/PLACEMENT.md).
    routed: Option<Arc<Routed>>,
}

impl Client {
    /// Open the volume at `url` as a client registered under `label` (a mount point, a
    /// gateway address, "python"). `vfs_opts` gives the front end's own settings; its
    /// root and readahead come from `o`.
    pub async fn open(
        url: &MetaUrl,
        o: &ClientOptions,
        vfs_opts: VfsOptions,
        label: &str,
    ) -> Result<Client> {
        let meta_opts = MetaOptions {
            session_timeout: session_timeout(o.heartbeat),
            deferred_sync: true,
            cache_metadata: o.meta_cache,
            open_cache: o.open_cache,
            cache_size: usize::try_from(o.meta_cache_size).unwrap_or(usize::MAX),
            ..MetaOptions::default()
        };
        let (meta, format) = load_meta_with(url, meta_opts).await?;
        let mut backend = open_backend(&format)?;
        #[cfg(feature = "object-delay")]
        {
            backend = with_simulated_distance(backend);
        }
        if let Some(wrap) = &o.wrap_store {
            backend = (wrap.0)(backend);
        }
        check_backend(&format, &backend).await?;
        let (backend, placements) = route_stores(&meta, &format, backend)?;
        let raw: Arc<dyn strata_object::ObjectStore> =
            Arc::new(Prefixed::new(backend.clone(), &format.name));
        let keys = crate::volume::volume_keys(&meta, &format, &o.keys)?;
        let (store, object_stats) = build(backend, &stack_options(o, &format, keys.clone())?);
        let writers = Arc::new(SessionWriters {
            meta: meta.clone(),
            group: OnceLock::new(),
        });
        let store: Arc<dyn ObjectStore> =
            Arc::new(AwaitLanding::new(store, writers.clone(), STAGED_WAIT));
        let background_stop = CancellationToken::new();
        // Without --writeback, blocks an earlier run staged here are still uploaded.
        let staging = staging_dir(o, &format);
        let leftovers = match (&staging, o.writeback) {
            (Some(dir), false) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || holds_files(&dir))
                    .await
                    .unwrap_or(true)
            }
            _ => false,
        };
        let writeback = match (o.writeback, leftovers) {
            (true, _) | (false, true) => {
                let opts = writeback_options(o, staging, o.writeback, keys.clone())?;
                open_writeback(opts, store.clone(), &background_stop).await?
            }
            (false, false) => None,
        };
        let store: Arc<dyn ObjectStore> = match &writeback {
            Some(wb) => wb.clone(),
            None => store,
        };
        let chunk_opts = ChunkOptions {
            block_size: format.block_size_kib << 10,
            buffer_size: o.buffer_size,
            max_prefetch: o.prefetch,
            segment_buffer: o.buffer_size / 4,
            cache_partial_only: o.cache_partial_only,
            ..ChunkOptions::default()
        };
        let chunks = ChunkStore::new(store, cache_for(o, &format, keys.clone())?, chunk_opts);
        if let Some(wb) = &writeback {
            chunks.set_staging(wb.clone());
        }
        let joining = match &o.cache_group {
            Some(g) => Some(group::join(&meta, g, o.cache_size, keys.clone()).await?),
            None => None,
        };
        let group_record = joining.as_ref().map(|j| j.record.clone());
        // A client uploading leftovers says it writes back: readers wait for those blocks.
        meta.new_session(session_info(label, group_record, writeback.is_some()))
            .await
            .map_err(|source| OpenError::Meta {
                context: "cannot register session".into(),
                source,
            })?;
        let vfs_opts = VfsOptions {
            max_readahead: o.max_readahead,
            root: resolve_subdir(&meta, o.subdir.as_deref()).await?,
            ..vfs_opts
        };
        let group_stop = CancellationToken::new();
        if let Some(joining) = joining {
            chunks.set_group(joining.group.clone());
            let _ = writers.group.set(joining.group.clone());
            let every = o.heartbeat.max(Duration::from_secs(1));
            joining
                .run(meta.clone(), chunks.clone(), every, group_stop.clone())
                .await;
        }
        let vfs = Arc::new(Vfs::new(meta.clone(), chunks, vfs_opts));
        vfs.set_object_stats(object_stats);
        let routed = placements.map(|(placements, routed)| {
            vfs.set_placements(placements, routed.clone());
            routed
        });
        if let Some(wb) = &writeback {
            vfs.set_writeback(wb.clone());
        }
        let backup_seal = match &keys {
            Some(keys) => Some(strata_vfs::maintenance::backup::BackupSeal {
                keys: keys.clone(),
                header: crate::keys::sealed_file_header(&format)?,
            }),
            None => None,
        };
        let jobs = BackgroundJobs::start(
            vfs.clone(),
            o.heartbeat.max(Duration::from_secs(1)),
            !o.no_bgjob,
            (!o.no_bgjob && !o.backup_meta.is_zero()).then(|| strata_vfs::MetaBackup {
                every: o.backup_meta,
                one_moment: !o.backup_meta_no_snapshot,
                store: raw,
                seal: backup_seal,
            }),
        );
        // Commits made before the change feed is up are never announced to this client,
        // and what they wrote stayed untrusted by its cache: every later lookup of such a
        // file was a round trip (1,000 files created at once after opening: 9k stats/s
        // instead of 180k). The feed's first beat normally comes back within
        // milliseconds; a feed that does not come up is no reason not to serve.
        if !meta.wait_for_feed(FEED_WAIT).await {
            tracing::warn!(
                "the metadata change feed did not come up within {FEED_WAIT:?}: serving \
                 without a trusted metadata cache until it does"
            );
        }
        Ok(Client {
            meta,
            format,
            vfs,
            jobs,
            group_stop: group_stop.drop_guard(),
            background_stop: background_stop.drop_guard(),
            writeback,
            routed,
        })
    }

    /// The volume's stores one by one, when it has several (the mover copies between them).
    pub fn stores(&self) -> Option<&Arc<Routed>> {
        self.routed.as_ref()
    }

    /// Whether writes are staged locally (`--writeback`).
    pub fn writes_back(&self) -> bool {
        self.writeback.is_some()
    }

    /// Another process took this client's session over (a mount hand-over): flush what
    /// is buffered, make everything durable and stop background work, but leave the
    /// session, its locks and the files it keeps alive to the new process.
    pub async fn close_handed_over(self) -> std::result::Result<(), strata_types::Errno> {
        let flushed = self.vfs.flush_all().await;
        self.jobs.stop().await;
        drop(self.group_stop);
        let synced = self.vfs.sync().await;
        drop(self.background_stop);
        flushed.and(synced)
    }

    /// Flush what is buffered, stop background work between two operations, close the
    /// session and make everything durable. Every failure is logged; the first one of
    /// the flush is returned (as an errno) so a caller can report lost writes.
    pub async fn close(self) -> std::result::Result<(), strata_types::Errno> {
        let flushed = self.vfs.flush_all().await;
        if let Err(e) = &flushed {
            tracing::error!("flushing buffered writes: errno {e} (every failure is logged above)");
        }
        // An engine that is down now is not waited for again by every step below.
        self.meta.begin_closing();
        self.jobs.stop().await;
        drop(self.group_stop);
        if let Err(e) = self.meta.close_session().await {
            tracing::warn!("closing the session: {e}");
        }
        if let Err(e) = self.vfs.sync().await {
            tracing::warn!("syncing: errno {e}");
        }
        drop(self.background_stop);
        if let Some(wb) = &self.writeback {
            let (blocks, bytes) = wb.staged();
            if blocks > 0 {
                tracing::info!(
                    "writeback: {blocks} blocks ({bytes} bytes) stay staged; the next start \
                     of a client with this cache directory uploads them \
                     (`strata umount --flush` waits for them instead)"
                );
            }
        }
        flushed
    }
}

fn stack_options(
    o: &ClientOptions,
    format: &Format,
    keys: Option<Arc<strata_object::seal::Keys>>,
) -> Result<StackOptions> {
    Ok(StackOptions {
        prefix: format.name.clone(),
        compression: Codec::parse(&format.compression)
            .map_err(|e| OpenError::Compression(e.to_string()))?,
        limits: Limits {
            max_uploads: o.max_uploads,
            max_downloads: o.max_downloads,
            upload_mbps: o.upload_limit,
            download_mbps: o.download_limit,
        },
        retry: RetryPolicy {
            retries: o.io_retries,
            get_timeout: o.get_timeout,
            put_timeout: o.put_timeout,
            ..RetryPolicy::default()
        },
        keys,
        seal_unit: crate::volume::seal_unit(format)?,
        foreign: crate::volume::foreign_blocks(format, Some(&o.keys))?,
    })
}

fn session_info(label: &str, cache_group: Option<GroupMember>, writeback: bool) -> SessionInfo {
    SessionInfo {
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        pid: std::process::id(),
        mount_point: label.to_owned(),
        version: env!("CARGO_PKG_VERSION").into(),
        started_at: strata_meta::now_ns(),
        cache_group,
        writeback,
        ..SessionInfo::default()
    }
}

/// The environment variable that delays every object request (benchmarks only: built
/// with the `object-delay` feature).
#[cfg(feature = "object-delay")]
pub const OBJECT_DELAY_VAR: &str = "STRATA_OBJECT_DELAY";

/// With `STRATA_OBJECT_DELAY=20ms` (milliseconds), every request to the object store
/// waits that long first: how benchmarks simulate a distant object store (docs/
/// PERFORMANCE.md) on one machine. Logged as a warning; a malformed value is ignored
/// with a warning too.
#[cfg(feature = "object-delay")]
fn with_simulated_distance(
    backend: Arc<dyn strata_object::ObjectStore>,
) -> Arc<dyn strata_object::ObjectStore> {
    use strata_object::fault::{FaultPlan, Faulty};
    let Ok(text) = std::env::var(OBJECT_DELAY_VAR) else {
        return backend;
    };
    let Some(ms) = text
        .trim()
        .strip_suffix("ms")
        .and_then(|n| n.trim().parse::<u64>().ok())
    else {
        tracing::warn!("{OBJECT_DELAY_VAR}={text:?} ignored: expected milliseconds such as 20ms");
        return backend;
    };
    tracing::warn!("{OBJECT_DELAY_VAR}: every object request waits {ms} ms (a benchmark setting)");
    let (faulty, control) = Faulty::new(backend);
    control.set(FaultPlan {
        delay: Duration::from_millis(ms),
        ..FaultPlan::default()
    });
    Arc::new(faulty)
}

/// The inode of `subdir` (a `/`-separated path from the volume's root), which must be a
/// directory; the root itself when `None`.
pub async fn resolve_subdir(meta: &Meta, subdir: Option<&str>) -> Result<Ino> {
    let shown = subdir.unwrap_or("");
    let path = format!("{shown}/");
    let how = PathWalk::from(Ino::ROOT);
    match strata_vfs::paths::resolve(meta, &Ctx::root(), how, path.as_bytes()).await {
        Ok(found) => Ok(found.ino),
        Err(errno) => Err(OpenError::Subdir {
            subdir: shown.to_owned(),
            reason: match errno {
                Errno::ENOTDIR => "a part of it is not a directory".to_string(),
                Errno::ENOENT => "no such directory".to_string(),
                other => other.to_string(),
            },
        }),
    }
}

/// How long a read waits for a block another client staged (`--writeback`) to land.
pub const STAGED_WAIT: Duration = Duration::from_secs(60);

/// The staging directory of this client: in the first `--cache-dir` (`None` for a
/// memory cache).
fn staging_dir(o: &ClientOptions, format: &Format) -> Option<PathBuf> {
    let dirs = o
        .cache_dir
        .clone()
        .unwrap_or_else(|| home_path("cache").to_string_lossy().into_owned());
    let first = dirs.split(':').find(|d| !d.is_empty()).unwrap_or_default();
    if first == "memory" || first.is_empty() {
        return None;
    }
    Some(Path::new(first).join(&format.uuid).join("staging"))
}

/// Whether `dir` holds a file at any depth (staged blocks, of either format).
fn holds_files(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        if path.is_dir() {
            holds_files(&path)
        } else {
            true
        }
    })
}

/// The staging settings: with `stage_new` (`--writeback`) as the flags say; without, only
/// an earlier run's blocks are uploaded, at once.
fn writeback_options(
    o: &ClientOptions,
    staging: Option<PathBuf>,
    stage_new: bool,
    keys: Option<Arc<strata_object::seal::Keys>>,
) -> Result<WritebackOptions> {
    let dir = staging.ok_or_else(|| {
        OpenError::Writeback(
            "--writeback stages blocks on disk: give --cache-dir a directory".into(),
        )
    })?;
    Ok(WritebackOptions {
        dir,
        max_bytes: o.staging_size,
        // Leftovers of an earlier run go at once.
        upload_delay: if stage_new {
            o.upload_delay
        } else {
            Duration::ZERO
        },
        uploaders: o.max_uploads.max(1),
        stage_new,
        keys,
    })
}

/// The staging area, its uploaders started; `None` when it only had an earlier run's
/// blocks to upload and holds none (files there, but no block: an empty segment).
async fn open_writeback(
    opts: WritebackOptions,
    remote: Arc<dyn ObjectStore>,
    stop: &CancellationToken,
) -> Result<Option<Arc<Writeback>>> {
    let stage_new = opts.stage_new;
    let wb = Writeback::open(opts, remote)
        .await
        .map_err(|e| OpenError::Writeback(e.to_string()))?;
    if !stage_new {
        let (blocks, bytes) = wb.staged();
        if blocks == 0 {
            return Ok(None);
        }
        tracing::info!(
            "writeback: uploading {blocks} blocks ({bytes} bytes) an earlier run staged with \
             --writeback; new writes go straight to the object store"
        );
    }
    wb.start(stop.clone());
    Ok(Some(wb))
}

/// Other clients of the volume that write back, from the session records: read when a
/// block is not found (rare), never on reads that succeed. In a cache group, a writer
/// that is a member of this client's group is asked for its staged copy.
#[derive(Debug)]
struct SessionWriters {
    meta: Arc<Meta>,
    /// This client's cache group, once joined.
    group: OnceLock<Arc<Group>>,
}

#[async_trait::async_trait]
impl StagingWriters for SessionWriters {
    async fn ask(&self, key: &str, range: Option<Range<u64>>) -> Staged {
        let sessions = match self.meta.list_sessions().await {
            Ok(sessions) => sessions,
            Err(e) => {
                tracing::debug!("listing sessions for writeback clients: {e}");
                return Staged::NoWriters;
            }
        };
        let me = self.meta.session_id();
        let writers: Vec<_> = sessions
            .into_iter()
            .filter(|s| s.writeback && s.sid != me)
            .collect();
        if writers.is_empty() {
            return Staged::NoWriters;
        }
        if let Some(group) = self.group.get() {
            let peers = writers.iter().filter_map(|s| s.cache_group.as_ref());
            for writer in peers.filter_map(|m| group_peer(group, m)) {
                if let Some(data) = fetch_staged(group, &writer, key, range.clone()).await {
                    return Staged::Fetched(data);
                }
            }
        }
        Staged::Elsewhere
    }
}

/// The member a session record describes, if it is in `group` and serves peers.
fn group_peer(group: &Group, record: &GroupMember) -> Option<Member> {
    if record.group != group.config().name || record.id == group.config().id {
        return None;
    }
    Some(Member {
        id: record.id,
        addr: record.addr.parse().ok()?,
        weight_mib: record.weight_mib,
    })
}

/// `range` of block `key` from `writer`'s staging area.
async fn fetch_staged(
    group: &Group,
    writer: &Member,
    key: &str,
    range: Option<Range<u64>>,
) -> Option<Bytes> {
    let block_len = strata_chunk::block_len_of(key)?;
    let (from, to) = match range {
        Some(r) => (usize::try_from(r.start).ok()?, usize::try_from(r.end).ok()?),
        None => (0, block_len),
    };
    if from > to || to > block_len {
        return None;
    }
    group.get_staged(writer, key, block_len, from, to).await
}

/// The block cache of a client. A disk cache on the same device as a local-directory
/// bucket would only hold a second copy of blocks read from that very disk, so there is
/// none — unless blocks must be read whole and decoded there (compressed, or adopted
/// from JuiceFS compressed or encrypted): then the cache keeps them ready, and a random
/// 4 KiB read does not cost a whole block's read and decoding.
fn cache_for(
    o: &ClientOptions,
    format: &Format,
    keys: Option<Arc<strata_object::seal::Keys>>,
) -> Result<Arc<dyn BlockCache>> {
    let (uuid, storage, bucket) = (&format.uuid, &format.storage, &format.bucket);
    let size = o.cache_size;
    if size == 0 {
        return Ok(Arc::new(NoCache::default()));
    }
    let dirs = o
        .cache_dir
        .clone()
        .unwrap_or_else(|| home_path("cache").to_string_lossy().into_owned());
    if dirs == "memory" {
        return Ok(Arc::new(MemoryCache::new(size)));
    }
    let dirs: Vec<PathBuf> = dirs
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(uuid))
        .collect();
    let ranged_bucket_reads = format.compression == "none"
        && format
            .foreign
            .as_ref()
            .is_none_or(|f| f.compression == "none" && f.encryption.is_none());
    if storage == "file"
        && ranged_bucket_reads
        && dirs.iter().all(|d| same_device(d, Path::new(bucket)))
    {
        tracing::info!("the cache would sit on the bucket's own disk: blocks are not cached twice");
        return Ok(Arc::new(NoCache::default()));
    }
    let framing = keys.map_or(Framing::Checked, Framing::Sealed);
    let cache =
        DiskCache::open_with(&dirs, size, o.free_space_ratio, framing).map_err(OpenError::Cache)?;
    Ok(Arc::new(cache))
}

fn same_device(path: &Path, other: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let device = |p: &Path| {
        p.ancestors()
            .find_map(|a| std::fs::metadata(a).ok())
            .map(|m| m.dev())
    };
    matches!((device(path), device(other)), (Some(a), Some(b)) if a == b)
}

/// How long opening a client waits for the metadata change feed's first beat.
const FEED_WAIT: Duration = Duration::from_secs(3);

/// How long a session may stay silent before other clients clean it: five heartbeats.
pub fn session_timeout(heartbeat: Duration) -> Duration {
    heartbeat
        .max(Duration::from_secs(1))
        .saturating_mul(5)
        .max(Duration::from_secs(5))
}
