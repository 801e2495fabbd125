//! The inodes the kernel knows: each holds an `O_PATH` descriptor of its backing file
//! (so renames above it never lose it), the kernel's lookup count, and the file's unsynced
//! pages. Numbers are ours (1 is the root); a backing file seen again through another name
//! (a hard link) gets its existing number.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, fstatat};

use parking_lot::Mutex;

use super::pages::Pages;

/// A nix error as the `io::Error` it is.
pub fn io(e: nix::Error) -> io::Error {
    io::Error::from(e)
}

/// `fstatat` of `name` in `dir` (the descriptor itself when `name` is empty).
pub fn stat_at(dir: impl AsFd, name: &OsStr) -> io::Result<FileStat> {
    let mut flags = AtFlags::AT_SYMLINK_NOFOLLOW;
    if name.is_empty() {
        flags |= AtFlags::AT_EMPTY_PATH;
    }
    fstatat(dir, name, flags).map_err(io)
}

/// An `O_PATH` descriptor of `name` in `dir`, not following a final symlink.
pub fn open_path(dir: impl AsFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(dir, name, flags, Mode::empty()).map_err(io)
}

/// The `/proc` path that reopens descriptor `fd`.
pub fn proc_path(fd: RawFd) -> String {
    format!("/proc/self/fd/{fd}")
}

/// One inode the kernel knows.
#[derive(Debug)]
pub struct Node {
    pub path_fd: OwnedFd,
    pub data: Mutex<NodeData>,
}

/// What an inode's I/O needs under one lock.
#[derive(Debug, Default)]
pub struct NodeData {
    /// A read-write descriptor of the backing file, opened at the first data access.
    pub file: Option<File>,
    /// Unsynced writes (none: the backing file is what readers see).
    pub pages: Option<Pages>,
}

impl Node {
    /// The backing file for reading and writing.
    pub fn file<'a>(&self, data: &'a mut NodeData) -> io::Result<&'a File> {
        if data.file.is_none() {
            let file = File::options()
                .read(true)
                .write(true)
                .open(proc_path(self.path_fd.as_raw_fd()))?;
            data.file = Some(file);
        }
        data.file
            .as_ref()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EIO))
    }
}

struct Entry {
    node: Arc<Node>,
    lookups: u64,
    key: (u64, u64),
}

/// Every known inode, by our number and by its backing (device, inode).
pub struct Nodes {
    by_ino: HashMap<u64, Entry>,
    by_backing: HashMap<(u64, u64), u64>,
    next: u64,
}

impl Nodes {
    /// The table with the root (number 1) at `root`.
    pub fn new(root: OwnedFd) -> io::Result<Nodes> {
        let st = stat_at(&root, OsStr::new(""))?;
        let key = (st.st_dev, st.st_ino);
        let node = Arc::new(Node {
            path_fd: root,
            data: Mutex::default(),
        });
        let mut nodes = Nodes {
            by_ino: HashMap::new(),
            by_backing: HashMap::new(),
            next: 2,
        };
        nodes.by_ino.insert(
            1,
            Entry {
                node,
                lookups: 1,
                key,
            },
        );
        nodes.by_backing.insert(key, 1);
        Ok(nodes)
    }

    pub fn get(&self, ino: u64) -> io::Result<Arc<Node>> {
        self.by_ino
            .get(&ino)
            .map(|e| e.node.clone())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))
    }

    /// Count one kernel lookup of the file `st` (opened as `fd`); its number.
    pub fn remember(&mut self, st: &FileStat, fd: OwnedFd) -> u64 {
        let key = (st.st_dev, st.st_ino);
        if let Some(ino) = self.by_backing.get(&key)
            && let Some(entry) = self.by_ino.get_mut(ino)
        {
            entry.lookups += 1;
            return *ino;
        }
        let ino = self.next;
        self.next += 1;
        let node = Arc::new(Node {
            path_fd: fd,
            data: Mutex::default(),
        });
        self.by_ino.insert(
            ino,
            Entry {
                node,
                lookups: 1,
                key,
            },
        );
        self.by_backing.insert(key, ino);
        ino
    }

    /// The kernel dropped `n` lookups; an inode it forgot entirely is closed unless it
    /// still holds unsynced pages (an `fsync` may yet come through another name).
    pub fn forget(&mut self, ino: u64, n: u64) {
        let Some(entry) = self.by_ino.get_mut(&ino) else {
            return;
        };
        entry.lookups = entry.lookups.saturating_sub(n);
        if entry.lookups > 0 || ino == 1 || entry.node.data.lock().pages.is_some() {
            return;
        }
        let key = entry.key;
        self.by_ino.remove(&ino);
        self.by_backing.remove(&key);
    }

    /// Every inode (for a write-back of everything or a power cut).
    pub fn all(&self) -> Vec<Arc<Node>> {
        self.by_ino.values().map(|e| e.node.clone()).collect()
    }
}
