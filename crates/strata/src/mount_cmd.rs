//! `strata mount` and `strata umount`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use strata_fuse::FuseOptions;
use strata_types::MetaUrl;
use strata_vfs::{AtimeMode, VfsOptions};

use crate::client::ClientArgs;
use crate::mount_supervisor::{self, Supervised};
use crate::{mount_handover, units, wiring};
use strata_fuse::Served;

#[derive(Debug, Args)]
pub struct MountArgs {
    /// Metadata engine URL, e.g. sqlite3://strata.db (a password may come from
    /// META_PASSWORD instead; one given in the URL is hidden from `ps` at start)
    meta_url: MetaUrl,
    /// Directory to mount at
    mountpoint: PathBuf,
    /// Client options shared with `strata gateway`.
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub metrics: crate::metrics_endpoint::MetricsArgs,
    #[command(flatten)]
    pub identity: crate::identity_args::IdentityArgs,
    /// Run in the background
    #[arg(short = 'd', long)]
    background: bool,
    /// Log file when running in the background (default ~/.strata/strata.log; created 0600)
    #[arg(long)]
    log: Option<PathBuf>,
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
    /// When reads update access times: noatime (never, the default, as JuiceFS),
    /// relatime (when atime is older than mtime/ctime or a day old, as Linux by default) or
    /// strictatime (on every read that reaches the mount)
    #[arg(long, default_value = "noatime", value_parser = parse_atime_mode)]
    atime_mode: AtimeMode,
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
    /// Let Strata alone check permissions (mount without the kernel's
    /// `default_permissions`): access control lists are then enforced on kernels without
    /// FUSE ACL support. The kernel no longer checks search permission on directories
    /// it has cached entries of, so a changed directory permission may take up to
    /// --entry-cache to hold for paths walked through it
    #[arg(long)]
    non_default_permission: bool,
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
    /// First commit buffered writes and upload every staged block (--writeback), then
    /// unmount
    #[arg(long)]
    flush: bool,
    /// With --flush: how long to wait for the uploads before giving up (the mount stays)
    #[arg(long, default_value = "1h", value_parser = units::parse_duration)]
    flush_timeout: Duration,
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

/// Whether a mount goes on an empty mount point or takes over a serving Strata mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    Fresh,
    TakeOver,
}

fn check_mountpoint(path: &Path) -> Result<Start> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("mount point {}", path.display()))?;
    if !meta.is_dir() {
        bail!("mount point {} is not a directory", path.display());
    }
    if !is_mounted(path) {
        return Ok(Start::Fresh);
    }
    let canonical = std::fs::canonicalize(path)?;
    let socket = mount_handover::socket_path(&canonical);
    if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        return Ok(Start::TakeOver);
    }
    bail!(
        "mount point {} is busy: something is already mounted there (not a Strata mount \
         this user can take over)",
        path.display()
    )
}

pub fn run_mount(a: MountArgs) -> Result<()> {
    // A supervisor blocks the signals it forwards, and a started process inherits the mask.
    mount_supervisor::unblock_stop_signals();
    if std::env::var_os(mount_supervisor::SUPERVISE_ENV).is_some() {
        check_mountpoint(&a.mountpoint)?;
        wiring::init_logging("info");
        return mount_supervisor::run(&std::fs::canonicalize(&a.mountpoint)?);
    }
    let mut supervised = Supervised::from_env()?;
    let start = if supervised.resume.is_some() {
        Start::TakeOver
    } else {
        check_mountpoint(&a.mountpoint)?
    };
    // Bad identity options are refused here, not in a background mount's log.
    a.identity.identity(None)?;
    if a.background {
        return daemonize(&a);
    }
    wiring::init_logging("info");
    let rt = wiring::runtime()?;
    let resume = supervised.resume.take();
    rt.block_on(serve(a, rt.handle().clone(), start, resume, supervised))
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
    let log_start = file.metadata().map_or(0, |m| m.len());
    let mut args: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .filter(|x| x != "-d" && x != "--background")
        .collect();
    // The background process names its log in `.config` (for `strata debug`).
    if a.log.is_none() {
        args.push("--log".into());
        args.push(log.clone().into_os_string());
    }
    let exe = std::env::current_exe()?;
    let (ready_read, ready_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let passed = mount_supervisor::inheritable(std::os::fd::AsFd::as_fd(&ready_write))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&args)
        .env(mount_supervisor::SUPERVISE_ENV, "1")
        .env(
            mount_supervisor::READY_FD_ENV,
            std::os::fd::AsRawFd::as_raw_fd(&passed).to_string(),
        )
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    use std::os::unix::process::CommandExt;
    // Detach from the terminal's process group (Ctrl-C there must not stop the mount);
    // setsid would need `pre_exec`, which is unsafe.
    cmd.process_group(0);
    let mut child = cmd.spawn().context("cannot start the background mount")?;
    drop((passed, ready_write));
    let ready = std::fs::File::from(ready_read);
    let serving = std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::Read::take(ready, 64), &mut line);
        line.starts_with("serving")
    });
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if serving.is_finished() {
            if serving.join().unwrap_or(false) {
                println!(
                    "mounted {} in the background (log: {})",
                    a.mountpoint.display(),
                    log.display()
                );
                return Ok(());
            }
            let status = child.wait()?;
            match error_line(&log, log_start) {
                Some(why) => bail!(
                    "{why} (the background mount exited; log: {})",
                    log.display()
                ),
                None => bail!("background mount exited ({status}); see {}", log.display()),
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("mount did not come up within 30 s; see {}", log.display())
}

/// The error the background mount ended with: its last `strata: ...` line in the log
/// written after `from`.
fn error_line(log: &std::path::Path, from: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(log).ok()?;
    file.seek(SeekFrom::Start(from)).ok()?;
    let mut text = String::new();
    file.take(1 << 20).read_to_string(&mut text).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("strata: "))
        .map(str::to_string)
}

async fn serve(
    a: MountArgs,
    rt: tokio::runtime::Handle,
    start: Start,
    resume: Option<(std::os::fd::OwnedFd, mount_supervisor::Resume)>,
    mut supervised: Supervised,
) -> Result<()> {
    tracing::debug!("mount arguments: {a:?}");
    let fuse_flags = parse_fuse_options(&a.options)?;
    let read_only = a.read_only || fuse_flags.read_only;
    let mountpoint = std::fs::canonicalize(&a.mountpoint)?;
    let identity = a.identity.identity(None)?;
    // The kernel would check permissions with the host's ids, not the mapped ones.
    let default_permissions = !a.non_default_permission && !identity.maps_callers();
    if !a.non_default_permission && !default_permissions {
        tracing::info!("callers are mapped (squash or id maps): Strata checks permissions");
    }
    let vfs_opts = VfsOptions {
        attr_ttl: a.attr_cache,
        entry_ttl: a.entry_cache,
        dir_entry_ttl: a.dir_entry_cache,
        negative_ttl: a.negative_entry_cache,
        read_only,
        hide_internal: a.hide_internal,
        atime_mode: a.atime_mode,
        identity,
        ..VfsOptions::default()
    };
    let label = mountpoint.to_string_lossy().into_owned();
    let client = crate::client::open_client(&a.meta_url, &a.client, vfs_opts, &label).await?;
    let (vfs, meta, format) = (
        client.vfs.clone(),
        client.meta.clone(),
        client.format.clone(),
    );
    let metrics = match crate::metrics_endpoint::start(&a.metrics, &vfs).await {
        Ok(endpoint) => endpoint,
        Err(e) => {
            client.close().await.ok();
            return Err(e);
        }
    };
    let metrics_addr = metrics.as_ref().map(|m| m.addr.to_string());
    let fuse_opts = fuse_options(&a, &fuse_flags, &format, default_permissions);
    let began = Instant::now();
    let own_sid = meta.session_id();
    let started = match start_serving(&client, &rt, &mountpoint, &fuse_opts, start, resume).await {
        Ok(served) => served,
        Err(e) if meta.session_id() != own_sid => {
            // The session taken over belongs to the process that serves on (or, after a
            // crash, to the next attempt): leave it, its locks and its open files alone.
            client.close_handed_over().await.ok();
            return Err(e);
        }
        Err(e) => {
            client.close().await.ok();
            return Err(e);
        }
    };
    let sid = meta.session_id();
    vfs.set_config_text(config_text(
        &a,
        &format,
        &mountpoint,
        sid,
        metrics_addr.as_deref(),
    ));
    let (mut served, how) = started;
    tracing::info!(
        "{how} volume {} at {} ({}; serving {:.1} ms after the volume was open)",
        format.name,
        mountpoint.display(),
        mount_handover::build_name(),
        began.elapsed().as_secs_f64() * 1e3
    );
    let listener = match mount_handover::Listener::bind(&mountpoint) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!("{e:#}: this mount cannot be handed over");
            None
        }
    };
    let resume = mount_supervisor::Resume {
        sid,
        settings: served.settings.clone(),
    };
    match served.device() {
        Ok(device) => supervised.serving(std::os::fd::AsFd::as_fd(&device), &resume),
        Err(e) => tracing::warn!("no descriptor for the supervisor: {e}"),
    }
    let giver = mount_handover::Giver {
        client: &client,
        fuse: &fuse_opts,
        rt: rt.clone(),
    };
    loop {
        match next_event(&served, listener.as_ref()).await {
            Event::Stop => break,
            Event::TakeOver(stream) => match giver.give(stream, served).await {
                mount_handover::Given::Away => {
                    if let Err(e) = client.close_handed_over().await {
                        tracing::error!("after the hand-over: errno {e}");
                    }
                    return Ok(());
                }
                mount_handover::Given::Kept(kept) => served = kept,
            },
        }
    }
    tracing::info!(
        "unmounting {}: flushing buffered writes",
        mountpoint.display()
    );
    client.close().await.ok();
    // Unmounting and joining the session's threads block.
    let unmounted = tokio::task::spawn_blocking(move || {
        if served.is_finished() {
            // Unmounted from outside: unmounting again could hit a new mount at that path.
            served.forget();
            Ok(())
        } else {
            served.unmount()
        }
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r);
    if let Err(e) = unmounted {
        tracing::warn!("unmounting {}: {e}", mountpoint.display());
    }
    Ok(())
}

/// The FUSE options of this mount.
fn fuse_options(
    a: &MountArgs,
    fuse_flags: &FuseFlags,
    format: &strata_meta::Format,
    default_permissions: bool,
) -> FuseOptions {
    FuseOptions {
        fs_name: fuse_flags
            .fs_name
            .clone()
            .unwrap_or_else(|| format!("strata:{}", format.name)),
        allow_other: nix::unistd::geteuid().is_root() || fuse_flags.allow_other,
        allow_root: fuse_flags.allow_root,
        writeback_cache: fuse_flags.writeback_cache,
        enable_xattr: a.enable_xattr,
        enable_selinux: a.enable_selinux,
        default_permissions,
        posix_acl: format.enable_acl,
        // `--read-only` is kept by the mount itself (EROFS), so path tools can still reach
        // `.control`; `-o ro` also makes the kernel refuse every write open.
        read_only: fuse_flags.read_only,
        max_write: u32::try_from(a.max_fuse_io.clamp(4 << 10, 1 << 20)).unwrap_or(1 << 20),
        extra: fuse_flags.extra.clone(),
        ..FuseOptions::default()
    }
}

/// Mount afresh, take the mount over from the process serving it, or serve it again after
/// the process that served it died; with how it started, for the log.
async fn start_serving(
    client: &strata_client::Client,
    rt: &tokio::runtime::Handle,
    mountpoint: &Path,
    fuse_opts: &FuseOptions,
    start: Start,
    resume: Option<(std::os::fd::OwnedFd, mount_supervisor::Resume)>,
) -> Result<(Served, &'static str)> {
    let vfs = client.vfs.clone();
    if let Some((device, resume)) = resume {
        client
            .meta
            .adopt_session(resume.sid)
            .await
            .context("taking over the session of the mount process that died")?;
        let served = strata_fuse::handover::serve(
            vfs,
            rt.clone(),
            device,
            fuse_opts,
            &resume.settings,
            true,
            mountpoint,
        )?;
        return Ok((served, "restarted: serving"));
    }
    if start == Start::Fresh {
        let served = strata_fuse::mount(vfs, rt.clone(), mountpoint, fuse_opts)
            .with_context(|| format!("cannot mount at {}", mountpoint.display()))?;
        return Ok((served, "mounted"));
    }
    let taken = mount_handover::take_over(mountpoint, client).await?;
    // Until `confirm`, dropping `taken` makes the old process serve on. The state is
    // checked before the session is taken: nothing can refuse after that.
    vfs.restore_handover_state(&taken.state.vfs)
        .map_err(|why| anyhow::anyhow!("cannot take this state over: {why}"))?;
    client
        .meta
        .adopt_session(taken.state.sid)
        .await
        .context("taking the session over")?;
    let device = taken.device.try_clone()?;
    let served = strata_fuse::handover::serve(
        vfs,
        rt.clone(),
        device,
        fuse_opts,
        &taken.state.settings,
        false,
        mountpoint,
    )?;
    tracing::info!(
        "took the mount over from pid {} ({})",
        taken.state.pid,
        taken.state.build
    );
    if let Err(e) = taken.confirm().await {
        // The old process saw the connection end and serves again: stop before both do.
        if let Ok(stopped) = served.stop_serving(Duration::ZERO).await {
            stopped.leave_mounted();
        }
        return Err(e.context("telling the serving process that this one took over"));
    }
    Ok((served, "took over"))
}

/// What the serving loop waits for.
enum Event {
    /// SIGINT/SIGTERM, or the file system was unmounted from outside.
    Stop,
    /// A new process asks to take the mount over.
    TakeOver(std::os::unix::net::UnixStream),
}

async fn next_event(served: &Served, listener: Option<&mount_handover::Listener>) -> Event {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return Event::Stop;
    };
    loop {
        let accept = async {
            match listener {
                Some(l) => l.accept().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Event::Stop,
            _ = term.recv() => return Event::Stop,
            taker = accept => match taker {
                Ok(stream) => return Event::TakeOver(stream),
                Err(e) => {
                    tracing::warn!("hand-over socket: {e:#}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            },
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
        if served.is_finished() {
            return Event::Stop;
        }
    }
}

impl MountArgs {
    /// Where a background mount logs (`None` in the foreground: to stderr). The
    /// background process is started with `--log` always (`daemonize`).
    fn background_log(&self) -> Option<PathBuf> {
        self.log.clone()
    }
}

/// What `.config` shows: the volume, the session and this mount's settings.
/// Secrets never reach it: the URL's password is hidden and the format's keys removed.
fn config_text(
    a: &MountArgs,
    format: &strata_meta::Format,
    mountpoint: &Path,
    sid: u64,
    metrics: Option<&str>,
) -> String {
    let json = serde_json::json!({
        "meta_url": a.meta_url.redacted(),
        "mountpoint": mountpoint,
        "sid": sid,
        "pid": std::process::id(),
        "log": a.background_log(),
        "metrics": metrics.map(|addr| format!("http://{addr}/metrics")),
        "format": wiring::shown_format(format),
        "mount": {
            "subdir": a.client.subdir,
            "read_only": a.read_only,
            "cache_dir": a.client.cache_dir,
            "cache_size": a.client.cache_size,
            "cache_partial_only": a.client.cache_partial_only,
            "buffer_size": a.client.buffer_size,
            "max_readahead": a.client.max_readahead,
            "prefetch": a.client.prefetch,
            "attr_cache": a.attr_cache.as_secs_f64(),
            "entry_cache": a.entry_cache.as_secs_f64(),
            "dir_entry_cache": a.dir_entry_cache.as_secs_f64(),
            "negative_entry_cache": a.negative_entry_cache.as_secs_f64(),
            "atime_mode": a.atime_mode.name(),
            "heartbeat": a.client.heartbeat.as_secs_f64(),
            "no_bgjob": a.client.no_bgjob,
            "backup_meta": a.client.backup_meta.as_secs_f64(),
            "enable_xattr": a.enable_xattr,
            "enable_selinux": a.enable_selinux,
            "non_default_permission": a.non_default_permission,
            "meta_cache": a.client.meta_cache,
            "open_cache": a.client.open_cache.as_secs_f64(),
            "meta_cache_size": a.client.meta_cache_size,
            "options": a.options,
        },
        "version": env!("CARGO_PKG_VERSION"),
    });
    serde_json::to_string_pretty(&json).unwrap_or_default() + "\n"
}

pub fn run_umount(a: UmountArgs) -> Result<()> {
    if !is_mounted(&a.mountpoint) {
        bail!("{} is not mounted", a.mountpoint.display());
    }
    if a.flush {
        flush_staged(&a)?;
    }
    let flags = if a.force {
        nix::mount::MntFlags::MNT_DETACH
    } else {
        nix::mount::MntFlags::empty()
    };
    let server = serving_pid(&a.mountpoint);
    let unmounted = unmount(&a, flags);
    if unmounted.is_ok()
        && let Some(pid) = server
    {
        wait_for_exit(pid);
    }
    unmounted
}

/// The process serving the mount at `mountpoint`, from its `.config` (`None` if it
/// cannot be read, as for a mount of another version).
fn serving_pid(mountpoint: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(mountpoint.join(".config")).ok()?;
    let config: serde_json::Value = serde_json::from_str(&text).ok()?;
    u32::try_from(config.get("pid")?.as_u64()?).ok()
}

/// Wait (up to 60 s) for the mount process to finish closing its session after the
/// kernel let go of the mount point, so a command run next (`fsck`, a new mount) sees
/// its last usage update and no live session.
fn wait_for_exit(pid: u32) {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let is_strata =
        || std::fs::read_to_string(proc_dir.join("comm")).is_ok_and(|c| c.trim() == "strata");
    let started = Instant::now();
    let mut said = false;
    while is_strata() {
        if started.elapsed() > Duration::from_secs(60) {
            eprintln!("strata: the mount process {pid} is still closing its session; not waiting");
            return;
        }
        if !said && started.elapsed() > Duration::from_secs(2) {
            eprintln!("strata: waiting for the mount process {pid} to close its session");
            said = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn unmount(a: &UmountArgs, flags: nix::mount::MntFlags) -> Result<()> {
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

/// `umount --flush`: ask the mount to commit and upload everything, and wait.
fn flush_staged(a: &UmountArgs) -> Result<()> {
    let mount = crate::control::mount_of(&a.mountpoint)?;
    let op = strata_vfs::control_wire::ControlOp::Flush {
        timeout_secs: a.flush_timeout.as_secs().max(1),
    };
    match crate::control::request(&mount, op)? {
        strata_vfs::control_wire::ControlResult::Flushed { blocks } => {
            if blocks > 0 {
                println!("uploaded {blocks} staged blocks");
            }
            Ok(())
        }
        other => bail!("unexpected answer from the mount: {other:?}"),
    }
}

/// Whether `path` (or its closest existing ancestor) is on the same device as `other`.
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
    use strata_client::session_timeout;

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
