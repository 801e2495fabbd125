//! One process's connection to a volume: its tokio runtime, its client (session, caches,
//! VFS) and the caller's credentials. A `fork()` copies the parent's memory but not its
//! threads, so a child must never use (nor drop) the parent's runtime, sockets or SQLite
//! connection: each [`Volume`] remembers the process that opened it, and the SDK opens a
//! fresh one — a new session — the first time a child touches the client.

use std::sync::Arc;

use strata_client::{Client, ClientOptions};
use strata_types::MetaUrl;
use strata_vfs::Ctx;
use strata_vfs::{Identity, Vfs, VfsOptions};

use crate::dircache::DirCache;
use crate::error::{Result, SdkError};

/// A volume opened by one process.
#[derive(Debug)]
pub struct Volume {
    /// The process that opened it: only that process may use or close it.
    pub pid: u32,
    /// The caller as the file system sees it (effective ids and groups, and the umask
    /// the metadata layer applies to new files unless a default access control list
    /// decides).
    pub ctx: Ctx,
    pub vfs: Arc<Vfs>,
    /// Directories recently reached by path.
    pub dirs: DirCache,
    client: Option<Client>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Volume {
    /// Open the volume in this process (blocking; call without the GIL).
    pub fn open(
        url: &MetaUrl,
        opts: &ClientOptions,
        identity: &Identity,
        read_only: bool,
    ) -> Result<Volume> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("strata-sdk")
            .build()
            .map_err(SdkError::Runtime)?;
        let vfs_opts = VfsOptions {
            read_only,
            hide_internal: true,
            identity: identity.clone(),
            ..VfsOptions::default()
        };
        let client = runtime.block_on(Client::open(url, opts, vfs_opts, "python"))?;
        Ok(Volume {
            pid: std::process::id(),
            ctx: identity.caller(Ctx {
                umask: u16::try_from(process_umask() & 0o777).unwrap_or(0o022),
                ..caller()
            }),
            vfs: client.vfs.clone(),
            dirs: DirCache::default(),
            client: Some(client),
            runtime: Some(runtime),
        })
    }

    /// True in the process that opened the volume (false in a forked child).
    pub fn is_current(&self) -> bool {
        self.pid == std::process::id()
    }

    /// Run `fut` to completion on this volume's runtime (call without the GIL).
    pub fn run<F: Future>(&self, fut: F) -> Result<F::Output> {
        match &self.runtime {
            Some(rt) => Ok(rt.block_on(fut)),
            None => Err(SdkError::Closed("client")),
        }
    }

    /// Start `fut` on this volume's runtime without waiting for it.
    pub fn spawn<F: Future<Output = ()> + Send + 'static>(&self, fut: F) {
        if let Some(rt) = &self.runtime {
            rt.spawn(fut);
        }
    }

    /// Commit every buffered write of this client.
    pub fn vfs_flush_all(&self) -> Result<()> {
        self.run(self.vfs.flush_all())?
            .map_err(|errno| SdkError::Posix {
                errno,
                path: "(flushing buffered writes)".into(),
            })
    }

    /// Flush buffered writes, close the session and stop the runtime. Returns the first
    /// flush failure (every failure is logged).
    pub fn close(&mut self) -> Result<()> {
        let (Some(client), Some(runtime)) = (self.client.take(), self.runtime.take()) else {
            return Ok(());
        };
        let closed = runtime.block_on(client.close());
        runtime.shutdown_background();
        closed.map_err(|errno| SdkError::Posix {
            errno,
            path: "(flushing buffered writes)".into(),
        })
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        if self.is_current() {
            if self.close().is_err() {
                // Logged by the client's close; a dropped client has no one to tell.
            }
        } else {
            // A forked child's copy: the parent's threads are not here, so neither a
            // runtime shutdown nor a connection close could finish. Leave them be.
            std::mem::forget(self.runtime.take());
            std::mem::forget(self.client.take());
        }
    }
}

/// The calling process's effective credentials and supplementary groups.
fn caller() -> Ctx {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let mut ctx = Ctx::user(uid, gid);
    ctx.pid = std::process::id();
    if let Ok(groups) = nix::unistd::getgroups() {
        ctx.groups = groups.into_iter().map(|g| g.as_raw()).collect();
    }
    ctx
}

/// The umask, read from /proc (reading it with umask(2) would change it for a moment
/// under other threads); 022 when /proc does not say.
fn process_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}
