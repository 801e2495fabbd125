//! The flags every client of a volume shares (caches, buffers, object-store limits,
//! session), turned into [`ClientOptions`] for `strata-client`.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
pub use strata_client::{Client, ClientOptions, GroupOptions};
use strata_types::MetaUrl;
use strata_vfs::VfsOptions;

use crate::units;

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
    /// Back metadata up into the bucket (meta/dump-*.bin, a binary dump that `strata
    /// load` reads) this often, across all clients: 1h, 30m, 90s, or seconds; 0 turns it
    /// off. Volumes of any size: the dump is streamed, writers are not stopped, and it
    /// is one point in time (on Redis: page by page)
    #[arg(long, default_value = "1h", value_parser = units::parse_duration)]
    pub backup_meta: Duration,
    /// Back metadata up page by page, holding no snapshot of the engine: on PostgreSQL a
    /// held snapshot slows writers that update the same rows during the backup (each
    /// keeps every version); the backup is then consistent page by page only
    #[arg(long)]
    pub backup_meta_no_snapshot: bool,
    /// Session heartbeat interval: 12s, 1m, ... (a plain number is seconds); a client
    /// silent for 5 intervals (at least 5 s) is considered dead and cleaned up by the
    /// others (its locks released, its unlinked-but-open files freed)
    #[arg(long, default_value = "12s", value_parser = units::parse_duration)]
    pub heartbeat: Duration,
    /// On Redis, PostgreSQL and etcd: answer lookups and attribute reads of unchanged
    /// files from a cache that the engine's change feed keeps current (other clients'
    /// changes are seen within the feed's delay, typically under a millisecond; opens
    /// always read the engine unless --open-cache says otherwise). `--meta-cache=false`
    /// reads the engine every time; consider it for fleets of hundreds of clients that
    /// mostly write, since every commit is delivered to every client following the feed
    /// (~20 µs of each one's CPU; docs/DESIGN.md). Off by itself through a transaction
    /// pooler (PostgreSQL `?pooler=transaction`)
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set)]
    pub meta_cache: bool,
    /// Read-only opens take the file's attributes from the metadata cache (kept current
    /// by the change feed) if read less than this long ago, instead of a round trip:
    /// 10s, 1m, ... (a plain number is seconds; 0 = every open reads the engine, strict
    /// close-to-open). Needs --meta-cache on Redis, PostgreSQL or etcd
    #[arg(long, default_value = "0s", value_parser = units::parse_duration)]
    pub open_cache: Duration,
    /// Memory the metadata cache may take on Redis, PostgreSQL and etcd (values,
    /// listing pages, directories this client made, recent changes): 32M, 100M, ... (a plain number is
    /// MiB). Past it, values no longer recent go first; a listing of any size stays
    /// within it, and what a listing took is given back within a minute
    #[arg(long, default_value = "32M", value_parser = units::mib)]
    pub meta_cache_size: u64,
    /// Share block caches with the other clients of this volume that name the same
    /// group: each block is cached by one member (chosen by hashing, weighted by cache
    /// size) and read from it by the others, so the group fetches it from the object
    /// store once. Members find each other through the volume's sessions; requests are
    /// signed with a secret kept in the volume
    #[arg(long, value_name = "NAME")]
    pub cache_group: Option<String>,
    /// Where this member serves its peers (with --cache-group): ADDR:PORT; port 0 picks
    /// a free one; 0.0.0.0 listens everywhere and advertises this host's outward address
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:0")]
    pub group_listen: std::net::SocketAddr,
    /// Read from the cache group but serve nothing to it (short-lived clients whose
    /// cache would be gone soon)
    #[arg(long)]
    pub no_sharing: bool,
    /// How long a peer may take to accept a request before the object store is asked
    /// instead (and the peer is passed over for a while): 500ms, 2s, ...
    #[arg(long, default_value = "500ms", value_parser = units::parse_duration)]
    pub group_timeout: Duration,
    /// Return from close and fsync once blocks are staged on the local cache disk
    /// (fsynced there on fsync) and upload them in the background, oldest first; a restart
    /// uploads what was left. Other clients reading a block not uploaded yet wait for it
    #[arg(long)]
    pub writeback: bool,
    /// With --writeback: how long a staged block waits before its upload starts
    /// (blocks deleted meanwhile are never uploaded): 0s, 10s, 5m, ...
    #[arg(long, default_value = "0s", value_parser = units::parse_duration)]
    pub upload_delay: Duration,
    /// With --writeback: most bytes staged at once; beyond it writes go straight to the
    /// object store (a plain number is MiB)
    #[arg(long, default_value = "10G", value_parser = units::mib)]
    pub staging_size: u64,
    #[command(flatten)]
    pub keys: crate::key_args::KeyArgs,
}

impl ClientArgs {
    /// The client options these flags give.
    pub fn options(&self) -> ClientOptions {
        ClientOptions {
            cache_dir: self.cache_dir.clone(),
            cache_size: self.cache_size,
            free_space_ratio: self.free_space_ratio,
            buffer_size: self.buffer_size,
            cache_partial_only: self.cache_partial_only,
            max_readahead: self.max_readahead,
            prefetch: self.prefetch,
            max_uploads: self.max_uploads,
            max_downloads: self.max_downloads,
            upload_limit: self.upload_limit,
            download_limit: self.download_limit,
            io_retries: self.io_retries,
            get_timeout: self.get_timeout,
            put_timeout: self.put_timeout,
            subdir: self.subdir.clone(),
            no_bgjob: self.no_bgjob,
            backup_meta: self.backup_meta,
            backup_meta_no_snapshot: self.backup_meta_no_snapshot,
            heartbeat: self.heartbeat,
            meta_cache: self.meta_cache,
            open_cache: self.open_cache,
            meta_cache_size: self.meta_cache_size,
            cache_group: self.cache_group.as_ref().map(|name| GroupOptions {
                name: name.clone(),
                listen: self.group_listen,
                no_sharing: self.no_sharing,
                ack_timeout: self.group_timeout,
            }),
            writeback: self.writeback,
            upload_delay: self.upload_delay,
            staging_size: self.staging_size,
            keys: self.keys.options(),
            wrap_store: None,
        }
    }
}

/// Open the volume at `url` with the client flags `a` (see [`Client::open`]).
pub async fn open_client(
    url: &MetaUrl,
    a: &ClientArgs,
    vfs_opts: VfsOptions,
    label: &str,
) -> Result<Client> {
    Ok(Client::open(url, &a.options(), vfs_opts, label).await?)
}
