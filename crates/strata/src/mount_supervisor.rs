//! The supervisor of a background mount: it starts the process that serves the mount,
//! keeps a descriptor of the mount's `/dev/fuse` connection (sent by that process once it
//! serves), and when that process dies (a crash, `kill -9`) starts a new one that serves
//! the same connection under the same metadata session: the mount point keeps working,
//! and only requests in flight at the death fail. A process that exits cleanly (unmounted,
//! or handed over to a new `strata mount`) ends the supervisor too.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use strata_fuse::KernelSettings;

use crate::fd_pass;

/// Set for the supervisor process by `mount -d`.
pub const SUPERVISE_ENV: &str = "STRATA_SUPERVISE";
/// The serving process's socket to its supervisor.
const SUPERVISOR_FD_ENV: &str = "STRATA_SUPERVISOR_FD";
/// A restarted serving process: the connection's descriptor, and what it resumes.
const RESUME_FD_ENV: &str = "STRATA_RESUME_FD";
const RESUME_ENV: &str = "STRATA_RESUME";
/// A pipe to `mount -d`: one line once the mount serves.
pub const READY_FD_ENV: &str = "STRATA_READY_FD";

/// Restarts allowed within [`RESTART_WINDOW`] before the supervisor gives up.
const MAX_RESTARTS: usize = 5;
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// What a serving process tells its supervisor (with the descriptor), and what a restarted
/// one resumes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Resume {
    pub sid: u64,
    pub settings: KernelSettings,
}

/// Take the inherited descriptor named by environment variable `var` (if any), marked
/// close-on-exec so that nothing this process starts inherits it.
#[allow(unsafe_code)]
fn inherited_fd(var: &str) -> Option<OwnedFd> {
    let raw: i32 = std::env::var(var).ok()?.parse().ok()?;
    if raw < 3 {
        return None;
    }
    // SAFETY: the process that started this one passed descriptor `raw` under `var` for
    // this purpose, and nothing else in this process claims it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let cloexec = nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC);
    if nix::fcntl::fcntl(&fd, cloexec).is_err() {
        // Not open after all: closing it again would close nothing (or another file).
        std::mem::forget(fd);
        return None;
    }
    Some(fd)
}

/// What the serving process was started with by its supervisor.
pub struct Supervised {
    /// Socket to the supervisor.
    socket: Option<UnixStream>,
    /// Where `mount -d` waits for the first "serving".
    ready: Option<OwnedFd>,
    /// Set when restarted after the previous serving process died.
    pub resume: Option<(OwnedFd, Resume)>,
}

impl Supervised {
    /// Take what the supervisor passed.
    pub fn from_env() -> Result<Supervised> {
        let socket = inherited_fd(SUPERVISOR_FD_ENV).map(UnixStream::from);
        let ready = inherited_fd(READY_FD_ENV);
        let resume = match (inherited_fd(RESUME_FD_ENV), std::env::var(RESUME_ENV).ok()) {
            (Some(fd), Some(json)) => {
                let resume: Resume =
                    serde_json::from_str(&json).context("the supervisor's resume state")?;
                Some((fd, resume))
            }
            _ => None,
        };
        Ok(Supervised {
            socket,
            ready,
            resume,
        })
    }

    /// This process serves the mount now: give the supervisor the connection and the
    /// session, and release `mount -d`.
    pub fn serving(&mut self, device: BorrowedFd<'_>, resume: &Resume) {
        if let Some(socket) = &mut self.socket {
            let sent = serde_json::to_vec(resume)
                .map_err(std::io::Error::other)
                .and_then(|body| fd_pass::send(socket, &body, Some(device)));
            if let Err(e) = sent {
                tracing::warn!("cannot reach the supervisor: {e} (a crash would not be restarted)");
                self.socket = None;
            }
        }
        if let Some(ready) = self.ready.take() {
            let _ = nix::unistd::write(&ready, b"serving\n");
        }
    }
}

/// Run as the supervisor of the mount at `mountpoint`: start the serving process (this
/// command again), restart it when it dies, end when it exits cleanly.
pub fn run(mountpoint: &Path) -> Result<()> {
    let exe = std::env::current_exe()?;
    let signals = Signals::forward()?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut ready = inherited_fd(READY_FD_ENV);
    let mut resume: Option<(OwnedFd, Resume)> = None;
    let mut restarts: Vec<Instant> = Vec::new();
    loop {
        let (ours, theirs) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::Stream,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )?;
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(&args)
            .env_remove(SUPERVISE_ENV)
            .env_remove(READY_FD_ENV)
            .env_remove(RESUME_FD_ENV)
            .env_remove(RESUME_ENV);
        let mut passed = vec![inheritable(theirs.as_fd())?];
        cmd.env(SUPERVISOR_FD_ENV, passed[0].as_raw_fd().to_string());
        if let Some(r) = ready.take() {
            passed.push(inheritable(r.as_fd())?);
            cmd.env(
                READY_FD_ENV,
                passed[passed.len() - 1].as_raw_fd().to_string(),
            );
        }
        if let Some((fd, state)) = &resume {
            passed.push(inheritable(fd.as_fd())?);
            cmd.env(
                RESUME_FD_ENV,
                passed[passed.len() - 1].as_raw_fd().to_string(),
            );
            cmd.env(RESUME_ENV, serde_json::to_string(state)?);
        }
        let mut child = cmd.spawn().context("cannot start the mount process")?;
        signals.serving(child.id());
        drop((theirs, passed));
        let reported: Arc<Mutex<Option<(OwnedFd, Resume)>>> = Arc::default();
        let reader = {
            let reported = reported.clone();
            let mut socket = UnixStream::from(ours);
            std::thread::spawn(move || {
                while let Ok(Some((body, Some(fd)))) = fd_pass::receive(&mut socket) {
                    if let Ok(state) = serde_json::from_slice::<Resume>(&body)
                        && let Ok(mut slot) = reported.lock()
                    {
                        *slot = Some((fd, state));
                    }
                }
            })
        };
        let status = child.wait()?;
        let _ = reader.join();
        let latest = reported.lock().ok().and_then(|mut s| s.take());
        if status.success() {
            return Ok(());
        }
        let served_before = latest.is_some() || resume.is_some();
        if let Some(latest) = latest {
            resume = Some(latest);
        }
        if !served_before || signals.stopping() {
            // Asked to stop, or it never served: its own last line in the log says why.
            tracing::debug!("the mount process exited ({status})");
            std::process::exit(status.code().unwrap_or(1));
        }
        let now = Instant::now();
        restarts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
        if restarts.len() >= MAX_RESTARTS {
            tracing::error!(
                "the mount process of {} died {} times within {RESTART_WINDOW:?}: giving up and \
                 unmounting",
                mountpoint.display(),
                restarts.len() + 1
            );
            let _ = nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_DETACH);
            bail!("the mount process keeps dying ({status})");
        }
        restarts.push(now);
        tracing::warn!(
            "the mount process of {} died ({status}): starting it again on the same connection",
            mountpoint.display()
        );
    }
}

/// SIGTERM, SIGINT and SIGHUP sent to the supervisor go to the serving process (systemd or
/// `kill` stopping the mount), and the supervisor then ends with it instead of restarting
/// it. The signals are blocked here and taken by a thread; the serving process unblocks
/// them first thing ([`unblock_stop_signals`]).
struct Signals {
    child: Arc<std::sync::atomic::AtomicI32>,
    stopping: Arc<std::sync::atomic::AtomicBool>,
}

/// The signals a supervisor passes on.
fn stop_signals() -> nix::sys::signal::SigSet {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(sig);
    }
    set
}

/// Let this process be stopped by the signals a supervisor blocks (its started processes
/// inherit the blocked mask). Call before any thread starts.
pub fn unblock_stop_signals() {
    if let Err(e) = stop_signals().thread_unblock() {
        tracing::debug!("unblocking SIGTERM, SIGINT and SIGHUP: {e}");
    }
}

impl Signals {
    fn forward() -> Result<Signals> {
        let set = stop_signals();
        set.thread_block()?;
        let child = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (to, flag) = (child.clone(), stopping.clone());
        std::thread::spawn(move || {
            while let Ok(sig) = set.wait() {
                flag.store(true, std::sync::atomic::Ordering::Release);
                let pid = to.load(std::sync::atomic::Ordering::Acquire);
                if pid > 0 {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
                }
            }
        });
        Ok(Signals { child, stopping })
    }

    fn serving(&self, pid: u32) {
        let pid = i32::try_from(pid).unwrap_or(0);
        self.child.store(pid, std::sync::atomic::Ordering::Release);
        // A signal that came while no process ran is passed on now.
        if self.stopping() && pid > 0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// A duplicate of `fd` that a started process inherits.
pub fn inheritable(fd: BorrowedFd<'_>) -> Result<OwnedFd> {
    let dup = fd.try_clone_to_owned()?;
    nix::fcntl::fcntl(
        &dup,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )?;
    Ok(dup)
}
