//! A full client of a volume without its front end: the options every long-running
//! client shares (`strata mount`, `strata gateway`: caches, buffers, object store
//! limits, sessions, background jobs), and opening and closing one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use strata_chunk::ChunkStore;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::cache::memory::MemoryCache;
use strata_chunk::cache::{BlockCache, NoCache};
use strata_chunk::reader::ChunkOptions;
use strata_meta::{Format, Meta, SessionInfo};
use strata_object::compress::Codec;
use strata_object::limit::Limits;
use strata_object::retry::RetryPolicy;
use strata_object::stack::{StackOptions, build};
use strata_types::MetaUrl;
use strata_vfs::{BackgroundJobs, Vfs, VfsOptions};

use crate::{units, wiring};

#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Cache directories, separated by ':' ("memory" keeps blocks in RAM)
    #[arg(long)]
    pub cache_dir: Option<String>,
    /// Cache size: 100G, 500M, ... (a plain number is MiB; 0 disables the cache)
    #[arg(long, default_value = "100G", value_parser = units::mib)]
    pub cache_size: u64,
    /// Keep this fraction of the cache disk free
    #[arg(long, default_value_t = 0.1)]
    pub free_space_ratio: f64,
    /// Write buffer size: 300M, 1G, ... (a plain number is MiB); a quarter of it more
    /// holds the hot pieces of blocks that random reads fetched
    #[arg(long, default_value = "300M", value_parser = units::mib)]
    pub buffer_size: u64,
    /// Write to the cache only what random reads fetched (the pieces of blocks they
    /// touch), not the whole blocks of sequential scans, which would push hot data out
    #[arg(long)]
    pub cache_partial_only: bool,
    /// Largest readahead window: 256M, ... (a plain number is MiB)
    #[arg(long, default_value = "256M", value_parser = units::mib)]
    pub max_readahead: u64,
    /// Concurrent block prefetches
    #[arg(long, default_value_t = 8)]
    pub prefetch: usize,
    /// Concurrent uploads
    #[arg(long, default_value_t = 20)]
    pub max_uploads: usize,
    /// Concurrent downloads
    #[arg(long, default_value_t = 200)]
    pub max_downloads: usize,
    /// Upload bandwidth limit in Mbps (0 = unlimited)
    #[arg(long, default_value_t = 0)]
    pub upload_limit: u64,
    /// Download bandwidth limit in Mbps (0 = unlimited)
    #[arg(long, default_value_t = 0)]
    pub download_limit: u64,
    /// Retries of a failed object request
    #[arg(long, default_value_t = 10)]
    pub io_retries: u32,
    /// Timeout of one GET: 60s, 2m, ... (a plain number is seconds)
    #[arg(long, default_value = "60s", value_parser = units::parse_duration)]
    pub get_timeout: Duration,
    /// Timeout of one PUT (a plain number is seconds)
    #[arg(long, default_value = "60s", value_parser = units::parse_duration)]
    pub put_timeout: Duration,
    /// Mount this directory of the volume (e.g. /projects/a) as the root
    #[arg(long)]
    pub subdir: Option<String>,
    /// Skip background jobs (data deletion, compaction, trash purge, metadata backup)
    #[arg(long)]
    pub no_bgjob: bool,
    /// Back metadata up into the bucket (meta/dump-*.json.gz) this often, across all
    /// clients: 1h, 30m, 90s, or seconds; 0 turns it off. Volumes over a million inodes
    /// are skipped (use `strata dump`)
    #[arg(long, default_value = "1h", value_parser = units::parse_duration)]
    pub backup_meta: Duration,
    /// Session heartbeat interval: 12s, 1m, ... (a plain number is seconds); a client
    /// silent for 5 intervals (at least 5 s) is considered dead and cleaned up by the
    /// others (its locks released, its unlinked-but-open files freed)
    #[arg(long, default_value = "12s", value_parser = units::parse_duration)]
    pub heartbeat: Duration,
    /// On Redis, PostgreSQL and etcd: answer lookups and attribute reads of unchanged
    /// files from a cache that the engine's change feed keeps current (other clients'
    /// changes are seen within the feed's delay, typically under a millisecond; opens
    /// always read the engine unless --open-cache says otherwise). `--meta-cache=false`
    /// reads the engine every time
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set)]
    pub meta_cache: bool,
    /// Read-only opens take the file's attributes from the metadata cache (kept current
    /// by the change feed) if read less than this long ago, instead of a round trip:
    /// 10s, 1m, ... (a plain number is seconds; 0 = every open reads the engine, strict
    /// close-to-open). Needs --meta-cache on Redis, PostgreSQL or etcd
    #[arg(long, default_value = "0s", value_parser = units::parse_duration)]
    pub open_cache: Duration,
}

/// An open client: its metadata, its VFS and its background jobs.
#[derive(Debug)]
pub struct Client {
    pub meta: Arc<Meta>,
    pub format: Arc<Format>,
    pub vfs: Arc<Vfs>,
    jobs: BackgroundJobs,
}

impl Client {
    /// Open the volume at `url` as a client registered under `label` (a mount point, a
    /// gateway address). `vfs_opts` gives the front end's own settings; its root,
    /// readahead come from `a`.
    pub async fn open(
        url: &MetaUrl,
        a: &ClientArgs,
        vfs_opts: VfsOptions,
        label: &str,
    ) -> Result<Client> {
        let meta_opts = strata_meta::MetaOptions {
            session_timeout: session_timeout(a.heartbeat),
            deferred_sync: true,
            cache_metadata: a.meta_cache,
            open_cache: a.open_cache,
            ..strata_meta::MetaOptions::default()
        };
        let (meta, format) = wiring::load_meta_with(url, meta_opts).await?;
        let backend = wiring::open_backend(&format)?;
        let stack = StackOptions {
            prefix: format.name.clone(),
            compression: Codec::parse(&format.compression).map_err(|e| anyhow::anyhow!("{e}"))?,
            limits: Limits {
                max_uploads: a.max_uploads,
                max_downloads: a.max_downloads,
                upload_mbps: a.upload_limit,
                download_mbps: a.download_limit,
            },
            retry: RetryPolicy {
                retries: a.io_retries,
                get_timeout: a.get_timeout,
                put_timeout: a.put_timeout,
                ..RetryPolicy::default()
            },
        };
        backend
            .check()
            .await
            .map_err(|e| anyhow::anyhow!("bucket {}: {e}", format.bucket))?;
        let raw: Arc<dyn strata_object::ObjectStore> = Arc::new(
            strata_object::prefix::Prefixed::new(backend.clone(), &format.name),
        );
        let (store, object_stats) = build(backend, &stack);
        let chunk_opts = ChunkOptions {
            block_size: format.block_size_kib << 10,
            buffer_size: a.buffer_size,
            max_prefetch: a.prefetch,
            segment_buffer: a.buffer_size / 4,
            cache_partial_only: a.cache_partial_only,
            ..ChunkOptions::default()
        };
        let chunks = ChunkStore::new(store, cache_for(a, &format)?, chunk_opts);
        let info = SessionInfo {
            host: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            pid: std::process::id(),
            mount_point: label.to_owned(),
            version: env!("CARGO_PKG_VERSION").into(),
            started_at: strata_meta::now_ns(),
            ..SessionInfo::default()
        };
        meta.new_session(info)
            .await
            .map_err(|e| anyhow::anyhow!("cannot register session: {e}"))?;
        let vfs_opts = VfsOptions {
            max_readahead: a.max_readahead,
            root: crate::mount_cmd::resolve_subdir(&meta, a.subdir.as_deref()).await?,
            ..vfs_opts
        };
        let vfs = Arc::new(Vfs::new(meta.clone(), chunks, vfs_opts));
        vfs.set_object_stats(object_stats);
        let jobs = BackgroundJobs::start(
            vfs.clone(),
            a.heartbeat.max(Duration::from_secs(1)),
            !a.no_bgjob,
            (!a.no_bgjob && !a.backup_meta.is_zero()).then(|| strata_vfs::MetaBackup {
                every: a.backup_meta,
                store: raw,
            }),
        );
        Ok(Client {
            meta,
            format,
            vfs,
            jobs,
        })
    }

    /// Flush what is buffered, stop background work between two operations, close the
    /// session and make everything durable; every failure is logged.
    pub async fn close(self) {
        if let Err(e) = self.vfs.flush_all().await {
            tracing::error!("flushing buffered writes: errno {e} (every failure is logged above)");
        }
        self.jobs.stop().await;
        if let Err(e) = self.meta.close_session().await {
            tracing::warn!("closing the session: {e}");
        }
        if let Err(e) = self.vfs.sync().await {
            tracing::warn!("syncing: errno {e}");
        }
    }
}

/// The block cache of a client. A disk cache on the same device as a local-directory
/// bucket would only hold a second copy of blocks read from that very disk, so there is
/// none.
fn cache_for(a: &ClientArgs, format: &Format) -> Result<Arc<dyn BlockCache>> {
    let (uuid, storage, bucket) = (&format.uuid, &format.storage, &format.bucket);
    let size = a.cache_size;
    if size == 0 {
        return Ok(Arc::new(NoCache::default()));
    }
    let dirs = a
        .cache_dir
        .clone()
        .unwrap_or_else(|| wiring::home_path("cache").to_string_lossy().into_owned());
    if dirs == "memory" {
        return Ok(Arc::new(MemoryCache::new(size)));
    }
    let dirs: Vec<PathBuf> = dirs
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(uuid))
        .collect();
    if storage == "file" && dirs.iter().all(|d| same_device(d, Path::new(bucket))) {
        tracing::info!("the cache would sit on the bucket's own disk: blocks are not cached twice");
        return Ok(Arc::new(NoCache::default()));
    }
    let cache = DiskCache::open(&dirs, size, a.free_space_ratio).context("cache directory")?;
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

/// How long a session may stay silent before other clients clean it: five heartbeats.
pub fn session_timeout(heartbeat: Duration) -> Duration {
    heartbeat
        .max(Duration::from_secs(1))
        .saturating_mul(5)
        .max(Duration::from_secs(5))
}
