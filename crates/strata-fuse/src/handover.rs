//! Serving a mount that another process mounted, and stopping without unmounting: what a
//! hand-over (upgrade in place) and a restart after a crash need from the FUSE layer.
//! Requests being answered are counted ([`InFlight`]) so a process that stops reading can
//! wait until it has answered everything it read: replies must go out on the descriptor
//! a request came from, which dies with this process.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fuser::{BackgroundSession, Config, INodeNo, SessionUnmounter, StoppedSession};
use serde::{Deserialize, Serialize};
use strata_vfs::Vfs;

use crate::{FuseOptions, StrataFs};

/// Requests read from the kernel and not answered yet.
#[derive(Debug, Default)]
pub struct InFlight {
    count: AtomicUsize,
    idle: tokio::sync::Notify,
}

/// One request in flight; answered (or dropped) when this is dropped.
#[derive(Debug)]
pub(crate) struct InFlightGuard(Arc<InFlight>);

impl InFlight {
    pub(crate) fn enter(self: &Arc<Self>) -> InFlightGuard {
        self.count.fetch_add(1, Ordering::AcqRel);
        InFlightGuard(self.clone())
    }

    /// How many requests are being answered.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Wait until no request is being answered.
    pub async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// What the kernel agreed to when the mount was made, which the process serving it must
/// keep to whatever its own options say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSettings {
    pub max_write: u32,
    /// The kernel caches writes (`-o writeback_cache`).
    pub writeback_cache: bool,
    /// The kernel checks access control lists (`FUSE_POSIX_ACL`).
    pub kernel_acl: bool,
}

impl KernelSettings {
    /// What a new mount with `opts` asks the kernel for.
    pub fn of(opts: &FuseOptions) -> KernelSettings {
        KernelSettings {
            max_write: opts.max_write,
            writeback_cache: opts.writeback_cache,
            kernel_acl: opts.posix_acl && opts.default_permissions,
        }
    }
}

/// What the serving side shares with the file system a session runs.
#[derive(Debug)]
pub(crate) struct FsShared {
    pub(crate) inflight: Arc<InFlight>,
    pub(crate) interrupts: Arc<crate::interrupt::Interrupts>,
    pub(crate) handing_over: Arc<std::sync::atomic::AtomicBool>,
}

/// A mount this process serves.
#[derive(Debug)]
pub struct Served {
    session: BackgroundSession,
    shared: FsShared,
    pub settings: KernelSettings,
    mountpoint: PathBuf,
    /// False when another process mounted it: this one unmounts by path.
    mounted_here: bool,
    /// Unmounts a mount this process made and served before (resumed after a hand-over
    /// that failed); dropping it would unmount.
    unmounter: Option<SessionUnmounter>,
}

/// A mount this process stopped reading requests of, still mounted.
#[derive(Debug)]
pub struct Stopped {
    stopped: StoppedSession,
    pub settings: KernelSettings,
    mountpoint: PathBuf,
}

impl Served {
    pub(crate) fn new(
        session: BackgroundSession,
        shared: FsShared,
        settings: KernelSettings,
        mountpoint: &Path,
        mounted_here: bool,
    ) -> Served {
        Served {
            session,
            shared,
            settings,
            mountpoint: mountpoint.to_path_buf(),
            mounted_here,
            unmounter: None,
        }
    }

    /// The session ended: unmounted from outside, or the device failed.
    pub fn is_finished(&self) -> bool {
        self.session.guard.is_finished()
    }

    /// A new descriptor of the session's /dev/fuse connection (for a supervisor to keep).
    pub fn device(&self) -> std::io::Result<OwnedFd> {
        self.session.device()
    }

    /// Stop reading requests, then wait until every request read is answered. Requests
    /// waiting for a lock give up with `EINTR` after `lock_grace` (their callers retry
    /// or report it; a lock wait has no end this process could wait for).
    pub async fn stop_serving(self, lock_grace: std::time::Duration) -> std::io::Result<Stopped> {
        let Served {
            session,
            shared,
            settings,
            mountpoint,
            mounted_here: _,
            unmounter,
        } = self;
        let began = std::time::Instant::now();
        // Requests still being answered may buffer writes: committing before they end
        // would be done again after, inside the pause.
        shared.handing_over.store(true, Ordering::Release);
        let stopped = tokio::task::spawn_blocking(move || session.stop_serving())
            .await
            .map_err(std::io::Error::other)??;
        let threads_stopped = began.elapsed();
        if tokio::time::timeout(lock_grace, shared.inflight.drained())
            .await
            .is_err()
        {
            let waiting = shared.interrupts.interrupt_all();
            tracing::info!("{waiting} lock waits end with EINTR for the hand-over");
            shared.inflight.drained().await;
        }
        tracing::info!(
            "stopped reading requests in {:.1} ms, answered the ones read in {:.1} ms more",
            threads_stopped.as_secs_f64() * 1e3,
            (began.elapsed() - threads_stopped).as_secs_f64() * 1e3
        );
        // A mount resumed here once: its unmounter travels with the descriptor's session.
        if let Some(unmounter) = unmounter {
            std::mem::forget(unmounter);
        }
        Ok(Stopped {
            stopped,
            settings,
            mountpoint,
        })
    }

    /// Unmount and wait for the session to end (SIGTERM).
    pub fn unmount(self) -> std::io::Result<()> {
        if self.mounted_here {
            drop(self.session);
            return Ok(());
        }
        match self.unmounter {
            Some(mut unmounter) => unmounter.unmount()?,
            None => unmount_path(&self.mountpoint)?,
        }
        self.session.join()
    }

    /// The session ended from outside (already unmounted): let go without unmounting
    /// again, since by now a new mount may sit at the same path.
    pub fn forget(self) {
        if let Ok(stopped) = self.session.stop_serving() {
            drop(stopped.leave_mounted());
        }
    }
}

impl Stopped {
    /// The /dev/fuse descriptor, to pass on.
    pub fn device(&self) -> std::io::Result<OwnedFd> {
        self.stopped.fd().try_clone_to_owned()
    }

    /// Another process serves the mount now: exit without unmounting.
    pub fn leave_mounted(self) {
        drop(self.stopped.leave_mounted());
    }

    /// Serve again here (the process that was to take over did not).
    pub fn resume(
        self,
        vfs: Arc<Vfs>,
        rt: tokio::runtime::Handle,
        opts: &FuseOptions,
    ) -> std::io::Result<Served> {
        let (fd, unmounter) = self.stopped.into_parts();
        let mut served = serve(vfs, rt, fd, opts, &self.settings, false, &self.mountpoint)?;
        served.unmounter = unmounter;
        Ok(served)
    }
}

/// Serve the mount at `mountpoint` through `fd`, a /dev/fuse connection another process
/// (or this one, earlier) initialized with `settings`. `restarted`: the process that
/// served it before died, so handles the kernel holds are rebuilt as they are used.
pub fn serve(
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
    fd: OwnedFd,
    opts: &FuseOptions,
    settings: &KernelSettings,
    restarted: bool,
    mountpoint: &Path,
) -> std::io::Result<Served> {
    let mut fs = StrataFs::new(vfs.clone(), rt, opts, settings);
    fs.restarted = restarted;
    let shared = fs.shared();
    let mut config = Config::default();
    config.acl = crate::session_acl(opts);
    config.n_threads = Some(opts.threads.max(1));
    config.clone_fd = true;
    let session = fuser::Session::from_initialized_fd(fs, fd, config.acl, config).spawn()?;
    crate::set_entry_invalidator(&vfs, &session);
    Ok(Served::new(
        session,
        shared,
        settings.clone(),
        mountpoint,
        false,
    ))
}

/// Unmount `mountpoint` (a mount this process did not make): directly as root, else
/// through `fusermount3 -u`.
fn unmount_path(mountpoint: &Path) -> std::io::Result<()> {
    if nix::mount::umount2(mountpoint, nix::mount::MntFlags::empty()).is_ok() {
        return Ok(());
    }
    let status = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("fusermount3 -u: {status}")))
    }
}

impl StrataFs {
    /// Rebuild a file handle the kernel holds from before a restart.
    pub(crate) fn adopt_file(&self, ino: INodeNo, fh: fuser::FileHandle) {
        if self.restarted {
            self.vfs.adopt_handle(fh.0, self.vfs.from_front(ino.0));
        }
    }

    /// [`StrataFs::adopt_file`] for a directory handle.
    pub(crate) fn adopt_dir(&self, ino: INodeNo, fh: fuser::FileHandle) {
        if self.restarted {
            self.vfs.adopt_dir_handle(fh.0, self.vfs.from_front(ino.0));
        }
    }
}
