//! What a mount passes to the process that takes it over (a hand-over: an upgrade or a
//! restart without unmounting): the handles the kernel knows, by the numbers it knows them
//! by, and what the metadata layer counts as open here. The same handles can also be
//! rebuilt one by one when the process that knew them died ([`Vfs::adopt_handle`]).
//! Written as JSON in the hand-over message (docs/FORMAT.md "Mount hand-over").

use serde::{Deserialize, Serialize};
use strata_types::Ino;

use crate::Vfs;

/// Version of [`VfsState`]: a process refuses a state of a version it does not know.
pub const HANDOVER_STATE_VERSION: u32 = 1;

/// One open file handle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHandleState {
    pub fh: u64,
    pub ino: u64,
    pub writable: bool,
    pub privileged: bool,
    /// The last lock owner seen on it (its locks are released at close).
    pub lock_owner: u64,
}

/// One open directory handle, with where its listing stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirHandleState {
    pub fh: u64,
    pub ino: u64,
    /// Offset of the next entry and its name.
    pub cursor: Option<(u64, Vec<u8>)>,
    /// Offset past the last entry, once the listing reached it.
    pub end: Option<u64>,
}

/// Everything a mount's VFS hands over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VfsState {
    pub version: u32,
    /// The next handle number (the new process continues after it).
    pub next_fh: u64,
    pub files: Vec<FileHandleState>,
    pub dirs: Vec<DirHandleState>,
    /// Generated contents of open internal files (`.stats`, `.config`), by handle.
    pub internal_contents: Vec<(u64, Vec<u8>)>,
    pub open: strata_meta::OpenState,
}

/// The first handle number of a process: its start time in nanoseconds. Handles of a
/// process that died before this one started are all below it (no process opens more than
/// one file per nanosecond), so a restarted mount never reuses a number the kernel still
/// holds for a file opened before the crash.
pub(crate) fn first_fh() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2))
        .max(1)
}

impl Vfs {
    /// The state to hand over. Call with nothing in flight and everything flushed.
    pub fn handover_state(&self) -> VfsState {
        let mut files: Vec<FileHandleState> = self
            .handles
            .lock()
            .iter()
            .map(|(&fh, h)| h.state(fh))
            .collect();
        files.sort_unstable_by_key(|f| f.fh);
        let mut internal_contents: Vec<(u64, Vec<u8>)> = self
            .internal_reads
            .lock()
            .iter()
            .map(|(&fh, content)| (fh, content.to_vec()))
            .collect();
        internal_contents.sort_unstable();
        VfsState {
            version: HANDOVER_STATE_VERSION,
            next_fh: self.next_fh.load(std::sync::atomic::Ordering::Acquire),
            files,
            dirs: self.dir_states(),
            internal_contents,
            open: self.meta.open_state(),
        }
    }

    /// Continue from a state another process handed over (this VFS has nothing open).
    pub fn restore_handover_state(&self, state: &VfsState) -> Result<(), String> {
        if state.version != HANDOVER_STATE_VERSION {
            return Err(format!(
                "hand-over state version {} (this build knows {HANDOVER_STATE_VERSION})",
                state.version
            ));
        }
        self.next_fh
            .fetch_max(state.next_fh, std::sync::atomic::Ordering::AcqRel);
        for f in &state.files {
            let ino = Ino(f.ino);
            if ino == crate::CONTROL_INO {
                self.restore_control(f.fh);
                continue;
            }
            self.register_as(f.fh, ino, f.writable, f.privileged);
            if let Ok(handle) = self.handle(f.fh) {
                handle
                    .lock_owner
                    .store(f.lock_owner, std::sync::atomic::Ordering::Relaxed);
            }
            if ino == crate::ACCESSLOG_INO {
                self.subscribe_access_log(f.fh);
            }
        }
        for d in &state.dirs {
            self.insert_dir_handle(d.fh, Ino(d.ino), d.cursor.clone(), d.end);
        }
        let mut contents = self.internal_reads.lock();
        for (fh, content) in &state.internal_contents {
            contents.insert(*fh, bytes::Bytes::from(content.clone()));
        }
        drop(contents);
        self.meta.restore_open_state(&state.open);
        Ok(())
    }

    /// A file handle the kernel holds but this process never opened: the mount was
    /// restarted after its process died. The handle is rebuilt from its inode and counted
    /// open, writable (the kernel checked the open's mode before). A file the dead process
    /// kept alive after an unlink stays until the mount ends, not its last close here:
    /// how many handles were open is not known.
    pub fn adopt_handle(&self, fh: u64, ino: Ino) {
        if self.handles.lock().contains_key(&fh) || self.dirs.lock().contains_key(&fh) {
            return;
        }
        if crate::is_internal(ino) {
            if ino == crate::CONTROL_INO {
                self.restore_control(fh);
            } else {
                self.register_as(fh, ino, false, false);
                let content = bytes::Bytes::from(self.internal_content(ino));
                self.internal_reads.lock().insert(fh, content);
            }
            return;
        }
        // Two requests naming the same handle at once register (and count) it once.
        if self.register_as(fh, ino, true, false) {
            tracing::debug!("adopted handle {fh} of inode {} after a restart", ino.0);
            self.meta.mark_open(ino);
        }
    }

    /// [`Vfs::adopt_handle`] for a directory handle: its listing starts over by name.
    pub fn adopt_dir_handle(&self, fh: u64, ino: Ino) {
        if self.insert_dir_handle(fh, ino, None, None) {
            self.meta.mark_open(ino);
        }
    }
}
