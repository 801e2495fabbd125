//! A crash of the machine, simulated: a FUSE pass-through file system (after Jepsen's
//! LazyFS) that keeps every file's written bytes in memory until that file is `fsync`ed,
//! and forgets them on [`CrashFs::power_cut`]. Names, links, modes and sizes set by
//! truncation go to the backing directory at once (as LazyFS: a file system whose journal
//! orders metadata), so after a cut the backing directory holds exactly what an `fsync`
//! made durable, plus whatever names were made. Put a volume's SQLite database, local
//! bucket and writeback staging under it, cut the power, mount a fresh `CrashFs` over the
//! same backing directory and look at what survived.
//!
//! Runs in the test's own process (fuser threads), so a cut is a method call, not a kill.

mod nodes;
mod ops;
mod pages;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

pub use pages::PAGE;

/// A mounted crash file system.
pub struct CrashFs {
    session: Option<BackgroundSession>,
    state: Arc<ops::State>,
    mountpoint: PathBuf,
}

impl std::fmt::Debug for CrashFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrashFs")
            .field("mountpoint", &self.mountpoint)
            .field("mounted", &self.session.is_some())
            .finish()
    }
}

impl CrashFs {
    /// Serve `backing` at `mountpoint` (both directories, which must exist).
    pub fn mount(backing: &Path, mountpoint: &Path) -> io::Result<CrashFs> {
        let state = Arc::new(ops::State::new(backing)?);
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("strata-crashfs".into()),
            MountOption::DefaultPermissions,
        ];
        config.acl = SessionACL::All;
        config.n_threads = Some(4);
        let session = fuser::spawn_mount(ops::CrashFsOps(state.clone()), mountpoint, &config)?;
        Ok(CrashFs {
            session: Some(session),
            state,
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    /// Bytes written through this mount and not yet made durable by an `fsync`.
    pub fn unsynced_bytes(&self) -> u64 {
        self.state.unsynced_bytes()
    }

    /// The power goes out: every unsynced byte is lost, every later operation fails with
    /// EIO, and the mount goes away. Stop (kill) the processes using the mount first, as
    /// a power cut stops them. Returns the bytes lost.
    pub fn power_cut(mut self) -> u64 {
        let lost = self.state.power_cut();
        self.unmount();
        lost
    }

    fn unmount(&mut self) {
        if let Some(session) = self.session.take() {
            // A lazy unmount first: a dead process may still hold a reference.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
            // Not joined: a process that still holds a file open keeps the detached
            // mount's connection, and with it the serving threads, alive.
            drop(session);
        }
    }
}

impl Drop for CrashFs {
    /// An orderly shutdown: unsynced bytes are written back, then the mount goes away.
    fn drop(&mut self) {
        if self.session.is_some() {
            if let Err(e) = self.state.write_back_all() {
                eprintln!("crashfs: writing back at unmount failed: {e}");
            }
            self.unmount();
        }
    }
}
