//! Hand-over of a mount to a new `strata mount` on the same mount point (an upgrade
//! without unmounting). The serving process listens on a Unix socket named after its
//! mount point. A new process connects and says hello; the old one checks it can hand
//! over, stops reading requests, answers every request it had read, commits and syncs
//! buffered writes, and sends its state with the `/dev/fuse` descriptor; the new one
//! takes the session over, serves, and says so; only then does the old one exit. If the
//! new process fails or goes away before that, the old one serves on. Messages:
//! docs/FORMAT.md "Mount hand-over".

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use strata_fuse::{FuseOptions, KernelSettings, Served};
use strata_vfs::handover::VfsState;

use crate::fd_pass;

/// Version of the hand-over messages; a process refuses a peer of another one.
pub const HANDOVER_PROTOCOL: u32 = 1;

/// Marks this build; a copy of the binary with these bytes changed is another build of the
/// same version (the hand-over tests alternate two).
pub static BUILD_MARK: &str = "strata-build:0000000000000000";

/// This process's version and build, as hand-over messages and logs name it.
pub fn build_name() -> String {
    let mark = BUILD_MARK
        .strip_prefix("strata-build:")
        .unwrap_or(BUILD_MARK);
    format!("{} build {mark}", env!("CARGO_PKG_VERSION"))
}

/// How long requests waiting for a lock may keep a hand-over waiting before they end
/// with `EINTR`.
const LOCK_GRACE: Duration = Duration::from_millis(500);

/// What the new process asks.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    protocol: u32,
    build: String,
    /// The volume it opened (it must be the one mounted).
    volume: String,
    writeback: bool,
}

/// The old process's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Refused { why: String },
    State(Box<HandedState>),
}

/// What is handed over with the descriptor.
#[derive(Debug, Serialize, Deserialize)]
pub struct HandedState {
    pub build: String,
    pub pid: u32,
    pub sid: u64,
    pub settings: KernelSettings,
    pub vfs: VfsState,
}

/// The new process's last word.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Confirm {
    Serving { build: String },
}

/// The socket of the process serving `mountpoint` (canonical).
pub fn socket_path(mountpoint: &Path) -> PathBuf {
    runtime_socket("mount", mountpoint.as_os_str().as_encoded_bytes())
}

/// `RUN-DIR/KIND-HASH.sock`, HASH the FNV-1a-64 of `key`: short and stable across builds.
pub fn runtime_socket(kind: &str, key: &[u8]) -> PathBuf {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    run_dir().join(format!("{kind}-{hash:016x}.sock"))
}

/// Whether the process on the other end of `stream` may take this one's place: the same
/// user, or root.
pub fn peer_may_take_over(stream: &tokio::net::UnixStream) -> bool {
    let me = nix::unistd::geteuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == me || cred.uid() == 0 => true,
        Ok(cred) => {
            tracing::warn!("refused a hand-over request from uid {}", cred.uid());
            false
        }
        Err(e) => {
            tracing::warn!("hand-over request of unknown origin: {e}");
            false
        }
    }
}

fn run_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        PathBuf::from("/run/strata")
    } else if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        PathBuf::from(dir).join("strata")
    } else {
        crate::wiring::home_path("run")
    }
}

/// The listening socket of a serving mount.
pub struct Listener {
    listener: tokio::net::UnixListener,
    path: PathBuf,
    /// The socket file's inode (the path may be another process's socket later).
    ino: u64,
}

impl Listener {
    /// Listen for takers of the mount at `mountpoint` (replacing the socket of a process
    /// that served it before).
    pub fn bind(mountpoint: &Path) -> Result<Listener> {
        let path = socket_path(mountpoint);
        if let Some(dir) = path.parent() {
            crate::wiring::create_private_dir(dir).with_context(|| format!("{}", dir.display()))?;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
        }
        let listener = tokio::net::UnixListener::bind(&path)
            .with_context(|| format!("hand-over socket {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let ino = socket_ino(&path).unwrap_or(0);
        Ok(Listener {
            listener,
            path,
            ino,
        })
    }

    /// The next process that wants to take over (same user or root only).
    pub async fn accept(&self) -> Result<UnixStream> {
        loop {
            let (stream, _) = self.listener.accept().await?;
            if !peer_may_take_over(&stream) {
                continue;
            }
            let stream = stream.into_std()?;
            stream.set_nonblocking(false)?;
            return Ok(stream);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Only our own socket: a process that took over bound a new one at the same path.
        if socket_ino(&self.path) == Some(self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn socket_ino(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.ino())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(std::io::Error::other)?
}

fn to_json<T: Serialize>(v: &T) -> std::io::Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(std::io::Error::other)
}

fn from_json<T: for<'a> Deserialize<'a>>(body: &[u8]) -> std::io::Result<T> {
    serde_json::from_slice(body).map_err(|e| std::io::Error::other(format!("bad message: {e}")))
}

/// What the serving side of a hand-over needs.
pub struct Giver<'a> {
    pub client: &'a strata_client::Client,
    pub fuse: &'a FuseOptions,
    pub rt: tokio::runtime::Handle,
}

/// How a hand-over ended for the process that served.
pub enum Given {
    /// Another process serves the mount now.
    Away,
    /// It did not happen; this process serves on.
    Kept(Served),
}

impl Giver<'_> {
    /// Serve a request to take over on `stream`.
    pub async fn give(&self, mut stream: UnixStream, served: Served) -> Given {
        let hello = {
            let mut s = match stream.try_clone() {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("hand-over: {e}");
                    return Given::Kept(served);
                }
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            blocking(move || fd_pass::receive(&mut s)).await
        };
        let hello: Hello = match hello.map(|m| m.map(|(body, _)| from_json(&body))) {
            Ok(Some(Ok(h))) => h,
            // A probe (`strata mount` checking the mount point is ours).
            Ok(None) => return Given::Kept(served),
            Ok(Some(Err(e))) | Err(e) => {
                tracing::warn!("hand-over: no hello: {e}");
                return Given::Kept(served);
            }
        };
        if let Some(why) = self.refusal(&hello) {
            tracing::warn!("refused a hand-over to {}: {why}", hello.build);
            let answer = to_json(&Answer::Refused { why });
            if let Ok(body) = answer {
                let _ = blocking(move || fd_pass::send(&mut stream, &body, None)).await;
            }
            return Given::Kept(served);
        }
        tracing::info!("handing the mount over to {}", hello.build);
        // Commit and sync while still serving: what is left for the pause is what was
        // written meanwhile (a sync after 64 MiB went through the disk cache took 200 ms).
        let presync = Instant::now();
        if let Err(e) = self.client.vfs.flush_all().await {
            tracing::warn!("committing before the hand-over: errno {e} (tried again below)");
        }
        tracing::debug!("synced before the hand-over in {:?}", presync.elapsed());
        let started = Instant::now();
        let stopped = match served.stop_serving(LOCK_GRACE).await {
            Ok(s) => s,
            Err(e) => {
                // The threads are gone and the descriptor with them: nothing to resume.
                tracing::error!("stopping for the hand-over: {e}");
                std::process::exit(1);
            }
        };
        let stopped_in = started.elapsed();
        match self.send_state(&mut stream, &stopped).await {
            Ok(()) => {}
            Err(e) => {
                tracing::warn!("hand-over failed, serving on: {e:#}");
                return self.resume(stopped);
            }
        }
        let confirmed = blocking(move || fd_pass::receive(&mut stream)).await;
        match confirmed.map(|m| m.map(|(body, _)| from_json::<Confirm>(&body))) {
            Ok(Some(Ok(Confirm::Serving { build }))) => {
                tracing::info!(
                    "handed over to {build} (stopped and drained in {:.1} ms, all in {:.1} ms)",
                    stopped_in.as_secs_f64() * 1e3,
                    started.elapsed().as_secs_f64() * 1e3
                );
                stopped.leave_mounted();
                Given::Away
            }
            other => {
                tracing::warn!("the taker went away ({other:?}): serving on");
                self.resume(stopped)
            }
        }
    }

    fn refusal(&self, hello: &Hello) -> Option<String> {
        if hello.protocol != HANDOVER_PROTOCOL {
            return Some(format!(
                "hand-over protocol {} (this process speaks {HANDOVER_PROTOCOL})",
                hello.protocol
            ));
        }
        if hello.volume != self.client.format.uuid {
            return Some(format!(
                "another volume is mounted here ({})",
                self.client.format.name
            ));
        }
        if hello.writeback || self.client.writes_back() {
            return Some(
                "--writeback mounts are not handed over (staged blocks stay with one process); \
                 unmount and mount again"
                    .into(),
            );
        }
        None
    }

    /// Commit and sync everything, then send the state and the descriptor.
    async fn send_state(
        &self,
        stream: &mut UnixStream,
        stopped: &strata_fuse::Stopped,
    ) -> Result<()> {
        let vfs = &self.client.vfs;
        // Commits what the requests answered since the first pass wrote, and syncs.
        vfs.flush_all()
            .await
            .map_err(|e| anyhow::anyhow!("committing and syncing buffered writes: errno {e}"))?;
        let state = HandedState {
            build: build_name(),
            pid: std::process::id(),
            sid: self.client.meta.session_id(),
            settings: stopped.settings.clone(),
            vfs: vfs.handover_state(),
        };
        let body = to_json(&Answer::State(Box::new(state)))?;
        let device = stopped.device()?;
        let mut s = stream.try_clone()?;
        blocking(move || fd_pass::send(&mut s, &body, Some(std::os::fd::AsFd::as_fd(&device))))
            .await?;
        Ok(())
    }

    fn resume(&self, stopped: strata_fuse::Stopped) -> Given {
        match stopped.resume(self.client.vfs.clone(), self.rt.clone(), self.fuse) {
            Ok(served) => Given::Kept(served),
            Err(e) => {
                tracing::error!("cannot serve again after a failed hand-over: {e}");
                std::process::exit(1);
            }
        }
    }
}

/// The taking side, once it has the state.
pub struct Taken {
    pub state: HandedState,
    pub device: std::os::fd::OwnedFd,
    stream: UnixStream,
}

/// Ask the process serving `mountpoint` to hand it over to this one (`client` has the
/// volume open). Fails, leaving the old process serving, if it refuses.
pub async fn take_over(mountpoint: &Path, client: &strata_client::Client) -> Result<Taken> {
    let path = socket_path(mountpoint);
    let hello = Hello {
        protocol: HANDOVER_PROTOCOL,
        build: build_name(),
        volume: client.format.uuid.clone(),
        writeback: client.writes_back(),
    };
    let body = to_json(&hello)?;
    let shown = path.clone();
    let (answer, fd, stream) = blocking(move || {
        let mut stream = UnixStream::connect(&path)?;
        fd_pass::send(&mut stream, &body, None)?;
        let (answer, fd) = fd_pass::receive(&mut stream)?
            .ok_or_else(|| std::io::Error::other("the serving process closed the connection"))?;
        Ok((answer, fd, stream))
    })
    .await
    .with_context(|| format!("hand-over through {}", shown.display()))?;
    match from_json::<Answer>(&answer)? {
        Answer::Refused { why } => bail!("the serving process refused the hand-over: {why}"),
        Answer::State(state) => {
            let Some(device) = fd else {
                bail!("the serving process sent no /dev/fuse descriptor");
            };
            Ok(Taken {
                state: *state,
                device,
                stream,
            })
        }
    }
}

impl Taken {
    /// Tell the old process this one serves now (it exits).
    pub async fn confirm(self) -> Result<()> {
        let body = to_json(&Confirm::Serving {
            build: build_name(),
        })?;
        let mut stream = self.stream;
        blocking(move || fd_pass::send(&mut stream, &body, None)).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mount_point_has_its_own_socket() {
        let a = socket_path(Path::new("/mnt/a"));
        assert_ne!(a, socket_path(Path::new("/mnt/b")));
        assert_eq!(a, socket_path(Path::new("/mnt/a")), "stable");
        assert!(a.to_string_lossy().ends_with(".sock"));
    }

    #[test]
    fn the_build_is_named_with_the_version() {
        assert!(build_name().starts_with(env!("CARGO_PKG_VERSION")));
        assert!(build_name().ends_with("0000000000000000"));
    }
}
