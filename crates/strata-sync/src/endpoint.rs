//! What `sync` needs of a place that holds files: a listing in key order, reads of byte
//! ranges, piecewise writes that appear whole, deletes, and (where the place has them)
//! directories, symlinks and attributes.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::Result;

/// What a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    File,
    /// A directory; its key ends in `/`.
    Dir,
    /// A symlink kept as a symlink (`--links`).
    Symlink,
}

/// One listed key.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Relative to the endpoint's root, `/`-separated; a directory's ends in `/`.
    pub key: String,
    pub kind: Kind,
    /// Bytes (0 for directories; the target's length for symlinks).
    pub size: u64,
    /// Last modification, Unix seconds and nanoseconds.
    pub mtime: i64,
    pub mtime_nsec: u32,
    /// Permission bits, owner and group, where the place has them.
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// A symlink's target.
    pub target: Option<String>,
    /// The endpoint's own handle for the key (a volume's inode), 0 when none.
    pub id: u64,
    /// Its POSIX access control lists, read where the place has them and the run keeps
    /// permissions (`--perms`); `None`: not read (the destination's are left alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acls: Option<Acls>,
}

/// A file's or directory's POSIX access control lists, each in the kernel's
/// `system.posix_acl_*` binary form; `None`: it has none (the mode bits alone decide).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Acls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Vec<u8>>,
    /// A directory's default list (what new entries inherit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<u8>>,
}

/// The xattr holding the access list.
pub const ACL_ACCESS_XATTR: &str = "system.posix_acl_access";
/// The xattr holding a directory's default list.
pub const ACL_DEFAULT_XATTR: &str = "system.posix_acl_default";

impl Acls {
    /// Each list's xattr name and value (`None`: to be removed), the default list only
    /// for directories.
    pub fn by_name(&self, is_dir: bool) -> Vec<(&'static str, Option<&[u8]>)> {
        let mut out = vec![(ACL_ACCESS_XATTR, self.access.as_deref())];
        if is_dir {
            out.push((ACL_DEFAULT_XATTR, self.default.as_deref()));
        }
        out
    }
}

impl Entry {
    /// A file with only a size and a time (object stores).
    pub fn file(key: String, size: u64, mtime: i64) -> Entry {
        Entry {
            key,
            kind: Kind::File,
            size,
            mtime,
            mtime_nsec: 0,
            mode: None,
            uid: None,
            gid: None,
            target: None,
            id: 0,
            acls: None,
        }
    }

    pub fn is_dir(&self) -> bool {
        self.kind == Kind::Dir
    }
}

/// Where listings send their entries; an error ends the listing.
pub type ListSender = mpsc::Sender<Result<Entry>>;

/// Whether a listing should leave out everything under a directory key (layered filters).
pub type Prune = dyn Fn(&str) -> bool + Send + Sync;

/// A place files are copied from or to.
#[async_trait]
pub trait Endpoint: Send + Sync + std::fmt::Debug {
    /// Where this is, for messages.
    fn describe(&self) -> String;

    /// Directories, symlinks and attributes exist here on their own (file systems,
    /// volumes), not only as key prefixes (object stores).
    fn has_dirs(&self) -> bool;

    /// Send every entry below the root whose key sorts after `after` (all when `None`),
    /// in ascending byte order of key, a directory (`name/`) before what it holds.
    /// Directories for which `prune` says yes are sent but not entered.
    async fn list(&self, after: Option<String>, prune: Arc<Prune>, tx: ListSender) -> Result<()>;

    /// What is at `key` now, `None` when nothing is (a retaken queue task asks this of
    /// the destination before copying again).
    async fn stat(&self, key: &str) -> Result<Option<Entry>>;

    /// Up to `len` bytes of `entry`'s file from `offset` (fewer only at its end).
    async fn read(&self, entry: &Entry, offset: u64, len: u64) -> Result<Bytes>;

    /// Start writing `key`; it appears, whole, when the writer finishes.
    async fn create<'a>(&'a self, key: &str) -> Result<Box<dyn Writer + 'a>>;

    /// Delete a file, a symlink or an (empty) directory.
    async fn delete(&self, entry: &Entry) -> Result<()>;

    /// Make directory `key` (and its parents); one that exists is fine.
    async fn mkdir(&self, key: &str) -> Result<()>;

    /// Make `key` a symlink to `target`, replacing what is there.
    async fn symlink(&self, key: &str, target: &str) -> Result<()>;

    /// Give `key` the mtime of `like`, and with `perms` its mode, owner, group and (where
    /// the place has them) access control lists.
    async fn set_attrs(&self, key: &str, like: &Entry, perms: bool) -> Result<()>;

    /// Make what was written survive a crash of the machine (once, at the end of a run).
    async fn sync(&self) -> Result<()> {
        Ok(())
    }
}

/// A file being written.
#[async_trait]
pub trait Writer: Send {
    async fn write(&mut self, data: Bytes) -> Result<()>;
    /// Make the file appear under its key, with `like`'s mtime (and with `perms` its mode,
    /// owner and group) where the place keeps them.
    async fn finish(self: Box<Self>, like: &Entry, perms: bool) -> Result<()>;
    /// Give up; nothing appears under the key.
    async fn abort(self: Box<Self>);
}

/// Files being written are named `TEMP_PREFIX{token}.{name}` beside their final name until
/// they are whole; listings leave such names out.
pub const TEMP_PREFIX: &str = ".strata-sync.";

/// The parent key of `key` (`a/b/` for `a/b/c` and `a/b/c/`), empty at the top.
pub fn parent_key(key: &str) -> &str {
    let trimmed = key.trim_end_matches('/');
    match trimmed.rfind('/') {
        Some(i) => &key[..=i],
        None => "",
    }
}

/// The last name of `key`, without a trailing `/`.
pub fn base_name(key: &str) -> &str {
    let trimmed = key.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// Names sorted as their keys sort: a directory's with a `/` after it.
pub fn sort_as_keys<T>(items: &mut [T], name: impl Fn(&T) -> (&str, bool)) {
    items.sort_by(|a, b| {
        let (na, da) = name(a);
        let (nb, db) = name(b);
        let ka = na.bytes().chain(da.then_some(b'/'));
        let kb = nb.bytes().chain(db.then_some(b'/'));
        ka.cmp(kb)
    });
}

/// Whether a walk that resumes after `after` must still send `key` or enter it: the key
/// sorts after `after`, or it is a directory holding `after`.
pub fn wanted(key: &str, after: Option<&str>) -> (bool, bool) {
    match after {
        None => (true, true),
        Some(a) => {
            let send = key > a;
            let enter = send || (key.ends_with('/') && a.starts_with(key));
            (send, enter)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_sort_with_their_slash() {
        let mut names = vec![("a", true), ("a-b", false), ("a0", false), ("B", false)];
        sort_as_keys(&mut names, |n| *n);
        assert_eq!(
            names,
            [("B", false), ("a-b", false), ("a", true), ("a0", false)]
        );
        assert_eq!(parent_key("a/b/c"), "a/b/");
        assert_eq!(parent_key("a/b/"), "a/");
        assert_eq!(parent_key("c"), "");
        assert_eq!(base_name("a/b/"), "b");
    }

    #[test]
    fn a_resumed_walk_enters_the_directories_on_the_way() {
        assert_eq!(wanted("a/", Some("a/b")), (false, true));
        assert_eq!(wanted("a/b", Some("a/b")), (false, false));
        assert_eq!(wanted("a/c", Some("a/b")), (true, true));
        assert_eq!(wanted("0", Some("a/b")), (false, false));
    }
}
