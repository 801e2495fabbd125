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
use strata_types::MetaUrl;
use strata_vfs::{AtimeMode, BackgroundJobs, Vfs, VfsOptions};

use crate::{units, wiring};

#[derive(Debug, Args)]
pub struct MountArgs {
    /// Metadata engine URL, e.g. sqlite3://strata.db (a password may come from
    /// META_PASSWORD instead; one given in the URL is hidden from `ps` at start)
    meta_url: MetaUrl,
    /// Directory to mount at
    mountpoint: PathBuf,
    /// Run in the background
    #[arg(short = 'd', long)]
    background: bool,
    /// Log file when running in the background (default ~/.strata/strata.log; created 0600)
    #[arg(long)]
    log: Option<PathBuf>,
    /// Cache directories, separated by ':' ("memory" keeps blocks in RAM)
    #[arg(long)]
    cache_dir: Option<String>,
    /// Cache size: 100G, 500M, ... (a plain number is MiB; 0 disables the cache)
    #[arg(long, default_value = "100G", value_parser = units::mib)]
    cache_size: u64,
    /// Keep this fraction of the cache disk free
    #[arg(long, default_value_t = 0.1)]
    free_space_ratio: f64,
    /// Write buffer size: 300M, 1G, ... (a plain number is MiB); a quarter of it more
    /// holds the hot pieces of blocks that random reads fetched
    #[arg(long, default_value = "300M", value_parser = units::mib)]
    buffer_size: u64,
    /// Write to the cache only what random reads fetched (the pieces of blocks they
    /// touch), not the whole blocks of sequential scans, which would push hot data out
    #[arg(long)]
    cache_partial_only: bool,
    /// Largest readahead window: 256M, ... (a plain number is MiB)
    #[arg(long, default_value = "256M", value_parser = units::mib)]
    max_readahead: u64,
    /// Concurrent block prefetches
    #[arg(long, default_value_t = 8)]
    prefetch: usize,
    /// Attribute cache timeout: 1.0s, 500ms, ... (a plain number is seconds)
    #[arg(long, default_value = "1.0s", value_parser = units::parse_duration)]
    attr_cache: Duration,
    /// File entry cache timeout (a plain number is seconds)
    #[arg(long, default_value = "1.0s", value_parser = units::parse_duration)]
    entry_cache: Duration,
    /// Directory entry cache timeout (a plain number is seconds)
    #[arg(long, default_value = "1.0s", value_parser = units::parse_duration)]
    dir_entry_cache: Duration,
    /// Cache timeout of failed lookups (a plain number is seconds)
    #[arg(long, default_value = "0s", value_parser = units::parse_duration)]
    negative_entry_cache: Duration,
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
    /// Timeout of one GET: 60s, 2m, ... (a plain number is seconds)
    #[arg(long, default_value = "60s", value_parser = units::parse_duration)]
    get_timeout: Duration,
    /// Timeout of one PUT (a plain number is seconds)
    #[arg(long, default_value = "60s", value_parser = units::parse_duration)]
    put_timeout: Duration,
    /// Largest FUSE request: 1M, 128K, ... (a plain number is KiB; up to 1M)
    #[arg(long, default_value = "1M", value_parser = units::kib)]
    max_fuse_io: u64,
    /// Mount read-only: every change fails with EROFS (kept by the mount, so path tools
    /// such as `strata info` still work; `-o ro` also sets the kernel's read-only flag)
    #[arg(long)]
    read_only: bool,
    /// Hide the internal files .stats, .config and .accesslog (.control stays: path
    /// tools such as `strata rmr` talk to the mount through it)
    #[arg(long)]
    hide_internal: bool,
    /// Mount this directory of the volume (e.g. /projects/a) as the root
    #[arg(long)]
    subdir: Option<String>,
    /// When reads update access times: noatime (never, the default, as JuiceFS),
    /// relatime (when atime is older than mtime/ctime or a day old, as Linux by default) or
    /// strictatime (on every read that reaches the mount)
    #[arg(long, default_value = "noatime", value_parser = parse_atime_mode)]
    atime_mode: AtimeMode,
    /// Skip background jobs (data deletion, compaction, trash purge, metadata backup)
    #[arg(long)]
    no_bgjob: bool,
    /// Back metadata up into the bucket (meta/dump-*.json.gz) this often, across all
    /// clients: 1h, 30m, 90s, or seconds; 0 turns it off. Volumes over a million inodes
    /// are skipped (use `strata dump`)
    #[arg(long, default_value = "1h", value_parser = units::parse_duration)]
    backup_meta: Duration,
    /// Session heartbeat interval: 12s, 1m, ... (a plain number is seconds); a client
    /// silent for 5 intervals (at least 5 s) is considered dead and cleaned up by the
    /// others (its locks released, its unlinked-but-open files freed)
    #[arg(long, default_value = "12s", value_parser = units::parse_duration)]
    heartbeat: Duration,
    /// Serve extended attributes (default on; `--enable-xattr=false` turns them off, and
    /// xattr calls then fail with EOPNOTSUPP). Unlike JuiceFS, where they are off by default
    /// because the kernel then reads `security.capability` before every write, Strata
    /// avoids that read (FUSE_HANDLE_KILLPRIV_V2) and keeps xattrs on
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set)]
    enable_xattr: bool,
    /// Keep SELinux labels in the `security.selinux` xattr (off by default, as in
    /// JuiceFS: that one name then fails with EOPNOTSUPP and SELinux labels the mount
    /// as a whole; `ls -l` stops asking every entry for its label, which made it one
    /// request per entry)
    #[arg(long)]
    enable_selinux: bool,
    /// On Redis, PostgreSQL and etcd: answer lookups and attribute reads of unchanged
    /// files from a cache that the engine's change feed keeps current (other clients'
    /// changes are seen within the feed's delay, typically under a millisecond; opens
    /// always read the engine unless --open-cache says otherwise). `--meta-cache=false`
    /// reads the engine every time
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set)]
    meta_cache: bool,
    /// Read-only opens take the file's attributes from the metadata cache (kept current
    /// by the change feed) if read less than this long ago, instead of a round trip:
    /// 10s, 1m, ... (a plain number is seconds; 0 = every open reads the engine, strict
    /// close-to-open). Needs --meta-cache on Redis, PostgreSQL or etcd
    #[arg(long, default_value = "0s", value_parser = units::parse_duration)]
    open_cache: Duration,
    /// FUSE and mount options, comma-separated, as for mount(8): allow_other (automatic
    /// for root), allow_root, writeback_cache (the kernel buffers writes; close-to-open
    /// still holds), ro, fsname=NAME, nonempty (accepted; mounting over a non-empty
    /// directory is always allowed), and any other option (nodev, nosuid, noexec, sync,
    /// dirsync, max_read=N, ...) passed to the kernel as given
    #[arg(short = 'o')]
    options: Vec<String>,
}

#[derive(Debug, Args)]
pub struct UmountArgs {
    /// Mount point
    mountpoint: PathBuf,
    /// Force (lazy) unmount even if busy
    #[arg(long)]
    force: bool,
}

fn parse_atime_mode(text: &str) -> Result<AtimeMode, String> {
    AtimeMode::parse(text)
        .ok_or_else(|| format!("{text:?}: expected noatime, relatime or strictatime"))
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
        wiring::create_private_dir(dir).with_context(|| format!("{}", dir.display()))?;
    }
    let file = wiring::open_private_file(&log, true)
        .with_context(|| format!("log file {}", log.display()))?;
    let args: Vec<std::ffi::OsString> = std::env::args_os()
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

async fn serve(a: MountArgs, rt: tokio::runtime::Handle) -> Result<()> {
    let fuse_flags = parse_fuse_options(&a.options)?;
    let read_only = a.read_only || fuse_flags.read_only;
    let meta_opts = strata_meta::MetaOptions {
        session_timeout: session_timeout(a.heartbeat),
        deferred_sync: true,
        cache_metadata: a.meta_cache,
        open_cache: a.open_cache,
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
            get_timeout: a.get_timeout,
            put_timeout: a.put_timeout,
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
        buffer_size: a.buffer_size,
        max_prefetch: a.prefetch,
        segment_buffer: a.buffer_size / 4,
        cache_partial_only: a.cache_partial_only,
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
        attr_ttl: a.attr_cache,
        entry_ttl: a.entry_cache,
        dir_entry_ttl: a.dir_entry_cache,
        negative_ttl: a.negative_entry_cache,
        max_readahead: a.max_readahead,
        read_only,
        hide_internal: a.hide_internal,
        root: resolve_subdir(&meta, a.subdir.as_deref()).await?,
        atime_mode: a.atime_mode,
    };
    let vfs = Arc::new(Vfs::new(meta.clone(), chunks, vfs_opts));
    vfs.set_object_stats(object_stats);
    vfs.set_config_text(config_text(&a, &format, &mountpoint, meta.session_id()));
    let jobs = BackgroundJobs::start(
        vfs.clone(),
        a.heartbeat.max(Duration::from_secs(1)),
        !a.no_bgjob,
        (!a.no_bgjob && !a.backup_meta.is_zero()).then(|| strata_vfs::MetaBackup {
            every: a.backup_meta,
            store: raw,
        }),
    );
    let fuse_opts = FuseOptions {
        fs_name: fuse_flags
            .fs_name
            .clone()
            .unwrap_or_else(|| format!("strata:{}", format.name)),
        allow_other: nix::unistd::geteuid().is_root() || fuse_flags.allow_other,
        allow_root: fuse_flags.allow_root,
        writeback_cache: fuse_flags.writeback_cache,
        enable_xattr: a.enable_xattr,
        enable_selinux: a.enable_selinux,
        // `--read-only` is kept by the mount itself (EROFS), so path tools can still reach
        // `.control`; `-o ro` also makes the kernel refuse every write open.
        read_only: fuse_flags.read_only,
        max_write: u32::try_from(a.max_fuse_io.clamp(4 << 10, 1 << 20)).unwrap_or(1 << 20),
        extra: fuse_flags.extra.clone(),
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
        tracing::error!("flushing at unmount: errno {e} (every failure is logged above)");
    }
    // Background work stops between two operations, never inside one.
    jobs.stop().await;
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
/// Secrets never reach it: the URL's password is hidden and the format's keys removed.
fn config_text(a: &MountArgs, format: &strata_meta::Format, mountpoint: &Path, sid: u64) -> String {
    let json = serde_json::json!({
        "meta_url": a.meta_url.redacted(),
        "mountpoint": mountpoint,
        "sid": sid,
        "format": wiring::shown_format(format),
        "mount": {
            "subdir": a.subdir,
            "read_only": a.read_only,
            "cache_dir": a.cache_dir,
            "cache_size": a.cache_size,
            "cache_partial_only": a.cache_partial_only,
            "buffer_size": a.buffer_size,
            "max_readahead": a.max_readahead,
            "prefetch": a.prefetch,
            "attr_cache": a.attr_cache.as_secs_f64(),
            "entry_cache": a.entry_cache.as_secs_f64(),
            "dir_entry_cache": a.dir_entry_cache.as_secs_f64(),
            "negative_entry_cache": a.negative_entry_cache.as_secs_f64(),
            "atime_mode": a.atime_mode.name(),
            "heartbeat": a.heartbeat.as_secs_f64(),
            "no_bgjob": a.no_bgjob,
            "backup_meta": a.backup_meta.as_secs_f64(),
            "enable_xattr": a.enable_xattr,
            "enable_selinux": a.enable_selinux,
            "meta_cache": a.meta_cache,
            "open_cache": a.open_cache.as_secs_f64(),
            "options": a.options,
        },
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
fn session_timeout(heartbeat: Duration) -> Duration {
    heartbeat
        .max(Duration::from_secs(1))
        .saturating_mul(5)
        .max(Duration::from_secs(5))
}

/// What the `-o` options ask for.
#[derive(Debug, Default, PartialEq)]
struct FuseFlags {
    allow_other: bool,
    allow_root: bool,
    writeback_cache: bool,
    read_only: bool,
    fs_name: Option<String>,
    /// Options for the kernel mount, as given.
    extra: Vec<String>,
}

/// Parse `-o` options (each flag may carry several, comma-separated). Strata's own are
/// taken out; `nonempty` is accepted and dropped (the kernel allows mounting over a
/// non-empty directory); everything else goes to the kernel mount, which names what it
/// does not know.
fn parse_fuse_options(options: &[String]) -> Result<FuseFlags> {
    let mut flags = FuseFlags::default();
    for option in options.iter().flat_map(|o| o.split(',')) {
        match option.trim() {
            "" | "nonempty" | "rw" | "default_permissions" => {}
            "allow_other" => flags.allow_other = true,
            "allow_root" => flags.allow_root = true,
            "writeback_cache" => flags.writeback_cache = true,
            "ro" => flags.read_only = true,
            other => match other.split_once('=') {
                Some(("fsname", name)) if !name.is_empty() => {
                    flags.fs_name = Some(name.to_string());
                }
                Some(("subtype", _)) => bail!("-o subtype: the subtype is always strata"),
                _ => flags.extra.push(other.to_string()),
            },
        }
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_options_are_taken_or_passed_through() {
        let given = [
            "allow_other,writeback_cache".to_string(),
            "ro,nonempty,fsname=data,nodev,max_read=131072".to_string(),
        ];
        let flags = parse_fuse_options(&given).unwrap();
        assert_eq!(
            flags,
            FuseFlags {
                allow_other: true,
                allow_root: false,
                writeback_cache: true,
                read_only: true,
                fs_name: Some("data".into()),
                extra: vec!["nodev".into(), "max_read=131072".into()],
            }
        );
        assert_eq!(parse_fuse_options(&[]).unwrap(), FuseFlags::default());
        assert!(parse_fuse_options(&["subtype=x".to_string()]).is_err());
    }

    #[test]
    fn sessions_expire_after_five_heartbeats() {
        assert_eq!(
            session_timeout(Duration::from_secs(12)),
            Duration::from_secs(60)
        );
        assert_eq!(
            session_timeout(Duration::from_millis(10)),
            Duration::from_secs(5)
        );
    }
}
