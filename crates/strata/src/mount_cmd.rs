//! `strata mount` and `strata umount`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_chunk::ChunkStore;
use strata_chunk::cache::disk::DiskCache;
use strata_chunk::cache::memory::MemoryCache;
use strata_chunk::cache::{BlockCache, NoCache};
use strata_chunk::reader::ChunkOptions;
use strata_fuse::FuseOptions;
use strata_meta::SessionInfo;
use strata_object::compress::Codec;
use strata_object::limit::Limits;
use strata_object::retry::RetryPolicy;
use strata_object::stack::{StackOptions, build};
use strata_vfs::{BackgroundJobs, Vfs, VfsOptions};

use crate::wiring;

#[derive(Debug, Args)]
pub struct MountArgs {
    /// Metadata engine URL, e.g. sqlite3://strata.db
    meta_url: String,
    /// Directory to mount at
    mountpoint: PathBuf,
    /// Run in the background
    #[arg(short = 'd', long)]
    background: bool,
    /// Log file when running in the background (default ~/.strata/strata.log)
    #[arg(long)]
    log: Option<PathBuf>,
    /// Cache directories, separated by ':' ("memory" keeps blocks in RAM)
    #[arg(long)]
    cache_dir: Option<String>,
    /// Cache size in MiB (0 disables the cache)
    #[arg(long, default_value_t = 102_400)]
    cache_size: u64,
    /// Keep this fraction of the cache disk free
    #[arg(long, default_value_t = 0.1)]
    free_space_ratio: f64,
    /// Write buffer size in MiB
    #[arg(long, default_value_t = 300)]
    buffer_size: u64,
    /// Largest readahead window in MiB
    #[arg(long, default_value_t = 256)]
    max_readahead: u64,
    /// Concurrent block prefetches
    #[arg(long, default_value_t = 8)]
    prefetch: usize,
    /// Attribute cache timeout in seconds
    #[arg(long, default_value_t = 1.0)]
    attr_cache: f64,
    /// File entry cache timeout in seconds
    #[arg(long, default_value_t = 1.0)]
    entry_cache: f64,
    /// Directory entry cache timeout in seconds
    #[arg(long, default_value_t = 1.0)]
    dir_entry_cache: f64,
    /// Cache timeout of failed lookups in seconds
    #[arg(long, default_value_t = 0.0)]
    negative_entry_cache: f64,
    /// Concurrent uploads
    #[arg(long, default_value_t = 20)]
    max_uploads: usize,
    /// Concurrent downloads
    #[arg(long, default_value_t = 200)]
    max_downloads: usize,
    /// Upload bandwidth limit in Mbps (0 = unlimited)
    #[arg(long, default_value_t = 0)]
    upload_limit: u64,
    /// Download bandwidth limit in Mbps (0 = unlimited)
    #[arg(long, default_value_t = 0)]
    download_limit: u64,
    /// Retries of a failed object request
    #[arg(long, default_value_t = 10)]
    io_retries: u32,
    /// Timeout of one GET in seconds
    #[arg(long, default_value_t = 60)]
    get_timeout: u64,
    /// Timeout of one PUT in seconds
    #[arg(long, default_value_t = 60)]
    put_timeout: u64,
    /// Largest FUSE request in KiB (up to 1024)
    #[arg(long, default_value_t = 1024)]
    max_fuse_io: u32,
    /// Mount read-only
    #[arg(long)]
    read_only: bool,
    /// Hide the internal files .stats, .config and .accesslog
    #[arg(long)]
    hide_internal: bool,
    /// Mount this directory of the volume (e.g. /projects/a) as the root
    #[arg(long)]
    subdir: Option<String>,
    /// Skip background jobs (data deletion, compaction, trash purge, metadata backup)
    #[arg(long)]
    no_bgjob: bool,
    /// Back metadata up into the bucket (meta/dump-*.json.gz) this often, across all
    /// clients: 1h, 30m, 90s, or seconds; 0 turns it off. Volumes over a million inodes
    /// are skipped (use `strata dump`)
    #[arg(long, default_value = "1h", value_parser = parse_interval)]
    backup_meta: Duration,
    /// Session heartbeat interval in seconds; a client silent for 5 intervals (at least
    /// 5 s) is considered dead and cleaned up by the others (its locks released, its
    /// unlinked-but-open files freed)
    #[arg(long, default_value_t = 12)]
    heartbeat: u64,
    /// Serve extended attributes (default on; `--enable-xattr=false` turns them off, and
    /// xattr calls then fail with EOPNOTSUPP). Unlike JuiceFS, where they are off by default
    /// because the kernel then reads `security.capability` before every write, Strata
    /// avoids that read (FUSE_HANDLE_KILLPRIV_V2) and keeps xattrs on
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set)]
    enable_xattr: bool,
    /// FUSE options, comma-separated: allow_other (automatic for root), writeback_cache
    /// (the kernel buffers writes; faster small writes, close-to-open still holds)
    #[arg(short = 'o')]
    options: Option<String>,
}

#[derive(Debug, Args)]
pub struct UmountArgs {
    /// Mount point
    mountpoint: PathBuf,
    /// Force (lazy) unmount even if busy
    #[arg(long)]
    force: bool,
}

/// `1h`, `30m`, `90s` or plain seconds.
fn parse_interval(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: expected e.g. 1h, 30m, 90s or seconds"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use s, m, h, d)")),
    };
    Ok(Duration::from_secs(secs))
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// Whether `path` is a mount point of a Strata volume right now.
fn is_mounted(path: &Path) -> bool {
    let Ok(target) = std::fs::canonicalize(path) else {
        return false;
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    mounts.lines().any(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        fields.get(4).is_some_and(|m| Path::new(m) == target) && l.contains("fuse")
    })
}

fn check_mountpoint(path: &Path) -> Result<()> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("mount point {}", path.display()))?;
    if !meta.is_dir() {
        bail!("mount point {} is not a directory", path.display());
    }
    if is_mounted(path) {
        bail!(
            "mount point {} is busy: something is already mounted there",
            path.display()
        );
    }
    Ok(())
}

pub fn run_mount(a: MountArgs) -> Result<()> {
    check_mountpoint(&a.mountpoint)?;
    if a.background {
        return daemonize(&a);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let rt = wiring::runtime()?;
    rt.block_on(serve(a, rt.handle().clone()))
}

/// Start this command again without -d in a new session, logging to a file; return once
/// the mount is up (or report why not).
fn daemonize(a: &MountArgs) -> Result<()> {
    let log = a
        .log
        .clone()
        .unwrap_or_else(|| wiring::home_path("strata.log"));
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("log file {}", log.display()))?;
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|x| x != "-d" && x != "--background")
        .collect();
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    use std::os::unix::process::CommandExt;
    // Detach from the terminal's process group (Ctrl-C there must not stop the mount);
    // setsid would need `pre_exec`, which is unsafe.
    cmd.process_group(0);
    let mut child = cmd.spawn().context("cannot start the background mount")?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if is_mounted(&a.mountpoint) {
            println!(
                "mounted {} in the background (log: {})",
                a.mountpoint.display(),
                log.display()
            );
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!("background mount exited ({status}); see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("mount did not come up within 30 s; see {}", log.display())
}

/// The block cache of a mount. A disk cache on the same device as a local-directory bucket
/// would only hold a second copy of blocks read from that very disk, so there is none.
fn cache_for(a: &MountArgs, format: &strata_meta::Format) -> Result<Arc<dyn BlockCache>> {
    let (uuid, storage, bucket) = (&format.uuid, &format.storage, &format.bucket);
    let size = a.cache_size << 20;
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

async fn serve(a: MountArgs, rt: tokio::runtime::Handle) -> Result<()> {
    let meta_opts = strata_meta::MetaOptions {
        session_timeout: session_timeout(a.heartbeat),
        deferred_sync: true,
        ..strata_meta::MetaOptions::default()
    };
    let (meta, format) = wiring::load_meta_with(&a.meta_url, meta_opts).await?;
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
            get_timeout: Duration::from_secs(a.get_timeout),
            put_timeout: Duration::from_secs(a.put_timeout),
            ..RetryPolicy::default()
        },
    };
    backend
        .check()
        .await
        .map_err(|e| anyhow::anyhow!("bucket {}: {e}", format.bucket))?;
    let raw: Arc<dyn strata_object::ObjectStore> = Arc::new(strata_object::prefix::Prefixed::new(
        backend.clone(),
        &format.name,
    ));
    let (store, object_stats) = build(backend, &stack);
    let chunk_opts = ChunkOptions {
        block_size: format.block_size_kib << 10,
        buffer_size: a.buffer_size << 20,
        max_prefetch: a.prefetch,
        ..ChunkOptions::default()
    };
    let chunks = ChunkStore::new(store, cache_for(&a, &format)?, chunk_opts);
    let mountpoint = std::fs::canonicalize(&a.mountpoint)?;
    let info = SessionInfo {
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        pid: std::process::id(),
        mount_point: mountpoint.to_string_lossy().into_owned(),
        version: env!("CARGO_PKG_VERSION").into(),
        started_at: strata_meta::now_ns(),
        ..SessionInfo::default()
    };
    meta.new_session(info)
        .await
        .map_err(|e| anyhow::anyhow!("cannot register session: {e}"))?;
    let vfs_opts = VfsOptions {
        attr_ttl: secs(a.attr_cache),
        entry_ttl: secs(a.entry_cache),
        dir_entry_ttl: secs(a.dir_entry_cache),
        negative_ttl: secs(a.negative_entry_cache),
        max_readahead: a.max_readahead << 20,
        read_only: a.read_only,
        hide_internal: a.hide_internal,
        root: resolve_subdir(&meta, a.subdir.as_deref()).await?,
    };
    let vfs = Arc::new(Vfs::new(meta.clone(), chunks, vfs_opts));
    vfs.set_object_stats(object_stats);
    vfs.set_config_text(config_text(&a, &format, &mountpoint, meta.session_id()));
    let jobs = BackgroundJobs::start(
        vfs.clone(),
        Duration::from_secs(a.heartbeat.max(1)),
        !a.no_bgjob,
        (!a.no_bgjob && !a.backup_meta.is_zero()).then(|| strata_vfs::MetaBackup {
            every: a.backup_meta,
            store: raw,
        }),
    );
    let fuse_flags = parse_fuse_options(a.options.as_deref())?;
    let fuse_opts = FuseOptions {
        fs_name: format!("strata:{}", format.name),
        allow_other: nix::unistd::geteuid().is_root() || fuse_flags.allow_other,
        writeback_cache: fuse_flags.writeback_cache,
        enable_xattr: a.enable_xattr,
        read_only: a.read_only,
        max_write: a.max_fuse_io.clamp(4, 1024) << 10,
        ..FuseOptions::default()
    };
    let session = strata_fuse::mount(vfs.clone(), rt, &mountpoint, &fuse_opts)
        .with_context(|| format!("cannot mount at {}", mountpoint.display()))?;
    tracing::info!("mounted volume {} at {}", format.name, mountpoint.display());
    wait_for_stop(&session).await;
    tracing::info!(
        "unmounting {}: flushing buffered writes",
        mountpoint.display()
    );
    if let Err(e) = vfs.flush_all().await {
        tracing::warn!("flushing at unmount: errno {e}");
    }
    drop(jobs);
    if let Err(e) = meta.close_session().await {
        tracing::warn!("closing the session: {e}");
    }
    if let Err(e) = vfs.sync().await {
        tracing::warn!("syncing at unmount: errno {e}");
    }
    if session.guard.is_finished() {
        // Unmounted from outside: dropping the session would unmount the path again, and
        // by now a new mount may sit there.
        std::mem::forget(session);
    } else {
        drop(session);
    }
    Ok(())
}

/// The inode of `--subdir` (the volume root without it); it must be a directory.
pub async fn resolve_subdir(
    meta: &strata_meta::Meta,
    subdir: Option<&str>,
) -> Result<strata_types::Ino> {
    let mut ino = strata_types::Ino::ROOT;
    for part in subdir.unwrap_or("").split('/').filter(|p| !p.is_empty()) {
        let entry = meta
            .lookup(&strata_meta::Ctx::root(), ino, part.as_bytes())
            .await
            .map_err(|e| anyhow::anyhow!("--subdir {}: {e}", subdir.unwrap_or("")))?;
        if !entry.attr.is_dir() {
            bail!(
                "--subdir {}: {part} is not a directory",
                subdir.unwrap_or("")
            );
        }
        ino = entry.ino;
    }
    Ok(ino)
}

/// What `.config` shows: the volume, the session and this mount's settings.
fn config_text(a: &MountArgs, format: &strata_meta::Format, mountpoint: &Path, sid: u64) -> String {
    let mut shown = format.clone();
    shown.secret_key = shown.secret_key.map(|_| "removed".into());
    let json = serde_json::json!({
        "meta_url": wiring::redact_url(&a.meta_url),
        "mountpoint": mountpoint,
        "sid": sid,
        "format": shown,
        "mount": format!("{a:?}"),
        "version": env!("CARGO_PKG_VERSION"),
    });
    serde_json::to_string_pretty(&json).unwrap_or_default() + "\n"
}

/// Until SIGINT/SIGTERM, or the file system is unmounted from outside.
async fn wait_for_stop(session: &strata_fuse::BackgroundSession) {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return;
    };
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return,
            _ = term.recv() => return,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                if session.guard.is_finished() {
                    return;
                }
            }
        }
    }
}

pub fn run_umount(a: UmountArgs) -> Result<()> {
    if !is_mounted(&a.mountpoint) {
        bail!("{} is not mounted", a.mountpoint.display());
    }
    let flags = if a.force {
        nix::mount::MntFlags::MNT_DETACH
    } else {
        nix::mount::MntFlags::empty()
    };
    match nix::mount::umount2(&a.mountpoint, flags) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EBUSY) => bail!("{} is busy (use --force)", a.mountpoint.display()),
        Err(nix::errno::Errno::EPERM) => {
            let status = std::process::Command::new("fusermount3")
                .arg("-u")
                .arg(&a.mountpoint)
                .status()
                .context("unmount needs root or fusermount3")?;
            if status.success() {
                Ok(())
            } else {
                bail!("fusermount3 -u failed: {status}")
            }
        }
        Err(e) => bail!("cannot unmount {}: {e}", a.mountpoint.display()),
    }
}

/// Whether `path` (or its closest existing ancestor) is on the same device as `other`.
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
fn session_timeout(heartbeat_secs: u64) -> Duration {
    Duration::from_secs(heartbeat_secs.max(1).saturating_mul(5).max(5))
}

/// The `-o` options Strata understands.
#[derive(Debug, Default, PartialEq)]
struct FuseFlags {
    allow_other: bool,
    writeback_cache: bool,
}

fn parse_fuse_options(options: Option<&str>) -> Result<FuseFlags> {
    let mut flags = FuseFlags::default();
    for option in options.unwrap_or("").split(',').filter(|o| !o.is_empty()) {
        match option.trim() {
            "allow_other" => flags.allow_other = true,
            "writeback_cache" => flags.writeback_cache = true,
            other => bail!("unknown -o option {other:?} (known: allow_other, writeback_cache)"),
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_options_parse_and_reject_unknown() {
        let flags = parse_fuse_options(Some("allow_other,writeback_cache")).unwrap();
        assert_eq!(
            flags,
            FuseFlags {
                allow_other: true,
                writeback_cache: true
            }
        );
        assert_eq!(parse_fuse_options(None).unwrap(), FuseFlags::default());
        let err = parse_fuse_options(Some("allow_other,bogus")).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }
}
