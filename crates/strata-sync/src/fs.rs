//! A local directory as an endpoint: walked in key order (`crate::walk`), each directory
//! read on a blocking thread; files written under a temporary name and renamed into
//! place, so an interrupted run leaves no half file under a real name; one `syncfs` at
//! the end.

use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;

use crate::endpoint::{
    ACL_ACCESS_XATTR, ACL_DEFAULT_XATTR, Acls, Endpoint, Entry, Kind, ListSender, Prune,
    TEMP_PREFIX, Writer, base_name, parent_key, sort_as_keys,
};
use crate::walk::{Listing, walk};
use crate::{Result, SyncError};

/// A directory tree on a local (or locally mounted) file system.
#[derive(Debug)]
pub struct FsEndpoint {
    root: PathBuf,
    /// Keep symlinks as symlinks (`--links`); otherwise they are followed.
    links: bool,
    /// Read access control lists with each entry (the run keeps permissions).
    acls: bool,
    /// Names this run's temporary files.
    token: String,
    /// Directories read at once while listing (`--list-threads`).
    list_threads: usize,
    /// The root's inode, to refuse walking into a directory inside itself.
    root_ino: u64,
}

impl FsEndpoint {
    /// The tree at `root`; with `create` (a destination) the directory is made if missing.
    pub fn open(root: &Path, links: bool, create: bool) -> Result<FsEndpoint> {
        if create {
            std::fs::create_dir_all(root).map_err(|e| SyncError::io(root.display(), e))?;
        }
        let meta = std::fs::metadata(root).map_err(|e| SyncError::io(root.display(), e))?;
        if !meta.is_dir() {
            return Err(SyncError::Usage(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        Ok(FsEndpoint {
            root: root.to_path_buf(),
            links,
            acls: false,
            token: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            list_threads: 1,
            root_ino: meta.ino(),
        })
    }

    /// Read up to `n` directories at once while listing (see `crate::walk`).
    pub fn with_list_threads(mut self, n: usize) -> FsEndpoint {
        self.list_threads = n.max(1);
        self
    }

    /// List entries with their access control lists (`--perms`).
    pub fn with_acls(mut self, acls: bool) -> FsEndpoint {
        self.acls = acls;
        self
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key.trim_end_matches('/'))
    }
}

/// The entry for `name` in directory key `prefix`, from its `lstat` (and, when symlinks
/// are followed, its target's `stat`), with its access control lists when `acls`.
fn entry_of(path: &Path, key: String, links: bool, acls: bool) -> Result<Entry> {
    let lmeta = std::fs::symlink_metadata(path).map_err(|e| SyncError::io(&key, e))?;
    let (meta, target) = if lmeta.file_type().is_symlink() {
        if links {
            let target = std::fs::read_link(path).map_err(|e| SyncError::io(&key, e))?;
            let target = target
                .into_os_string()
                .into_string()
                .map_err(|_| SyncError::Check(format!("{key}: symlink target is not UTF-8")))?;
            (lmeta, Some(target))
        } else {
            let meta = std::fs::metadata(path).map_err(|e| SyncError::io(&key, e))?;
            (meta, None)
        }
    } else {
        (lmeta, None)
    };
    let kind = if target.is_some() {
        Kind::Symlink
    } else if meta.is_dir() {
        Kind::Dir
    } else if meta.is_file() {
        Kind::File
    } else {
        return Err(SyncError::Check(format!(
            "{key}: not a regular file, directory or symlink"
        )));
    };
    let acls = if acls && kind != Kind::Symlink {
        Some(read_acls(path, kind == Kind::Dir).map_err(|e| SyncError::io(&key, e))?)
    } else {
        None
    };
    let key = if kind == Kind::Dir { key + "/" } else { key };
    Ok(Entry {
        key,
        kind,
        size: if kind == Kind::Dir { 0 } else { meta.len() },
        mtime: meta.mtime(),
        mtime_nsec: u32::try_from(meta.mtime_nsec()).unwrap_or(0),
        mode: Some(meta.mode() & 0o7777),
        uid: Some(meta.uid()),
        gid: Some(meta.gid()),
        target,
        id: meta.ino(),
        acls,
    })
}

/// The access control lists of `path` (following a symlink; the default list only for a
/// directory). A file system without them has none.
fn read_acls(path: &Path, is_dir: bool) -> std::io::Result<Acls> {
    Ok(Acls {
        access: read_xattr(path, ACL_ACCESS_XATTR)?,
        default: if is_dir {
            read_xattr(path, ACL_DEFAULT_XATTR)?
        } else {
            None
        },
    })
}

/// The xattr `name` of `path`, `None` when it has none (or the file system keeps none).
fn read_xattr(path: &Path, name: &str) -> std::io::Result<Option<Vec<u8>>> {
    use rustix::io::Errno;
    let absent = |e: Errno| e == Errno::NODATA || e == Errno::NOTSUP;
    loop {
        let size = match rustix::fs::getxattr_query(path, name) {
            Ok(size) => size,
            Err(e) if absent(e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut value = vec![0u8; size];
        match rustix::fs::getxattr(path, name, &mut value[..]) {
            Ok(len) => {
                value.truncate(len);
                return Ok(Some(value));
            }
            // It grew since its size was asked: ask again.
            Err(Errno::RANGE) => {}
            Err(e) if absent(e) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Give `path` the lists `acls` (removing a list the source has not).
fn write_acls(path: &Path, key: &str, acls: &Acls, is_dir: bool) -> Result<()> {
    use rustix::io::Errno;
    for (name, value) in acls.by_name(is_dir) {
        let done = match value {
            Some(v) => rustix::fs::setxattr(path, name, v, rustix::fs::XattrFlags::empty()),
            None => match rustix::fs::removexattr(path, name) {
                Err(Errno::NODATA | Errno::NOTSUP) => Ok(()),
                other => other,
            },
        };
        match done {
            Ok(()) => {}
            Err(Errno::NOTSUP) => {
                return Err(SyncError::Check(format!(
                    "{key}: the destination keeps no access control lists"
                )));
            }
            Err(e) => return Err(SyncError::io(key, e.into())),
        }
    }
    Ok(())
}

/// One directory's entries in key order (an unreadable one is an error entry).
fn read_sorted(dir: &Path, prefix: &str, links: bool, acls: bool) -> Result<Vec<Result<Entry>>> {
    let mut names = Vec::new();
    let mut unnamed = Vec::new();
    let read = std::fs::read_dir(dir).map_err(|e| SyncError::io(prefix_or_root(prefix), e))?;
    for de in read {
        let de = de.map_err(|e| SyncError::io(prefix_or_root(prefix), e))?;
        match de.file_name().into_string() {
            Ok(name) if name.starts_with(TEMP_PREFIX) => {}
            Ok(name) => {
                let is_dir = de.file_type().is_ok_and(|t| t.is_dir());
                names.push((name, is_dir));
            }
            Err(raw) => unnamed.push(Err(SyncError::Check(format!(
                "{prefix}{}: the name is not UTF-8 (left out)",
                raw.to_string_lossy()
            )))),
        }
    }
    sort_as_keys(&mut names, |(n, d)| (n.as_str(), *d));
    let entries = names
        .into_iter()
        .map(|(name, _)| entry_of(&dir.join(&name), format!("{prefix}{name}"), links, acls));
    Ok(unnamed.into_iter().chain(entries).collect())
}

fn prefix_or_root(prefix: &str) -> &str {
    if prefix.is_empty() { "." } else { prefix }
}

async fn blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SyncError::Check(format!("{what}: task failed: {e}")))?
}

#[async_trait]
impl Endpoint for FsEndpoint {
    fn describe(&self) -> String {
        format!("file://{}", self.root.display())
    }

    fn has_dirs(&self) -> bool {
        true
    }

    async fn list(&self, after: Option<String>, prune: Arc<Prune>, tx: ListSender) -> Result<()> {
        let (links, acls) = (self.links, self.acls);
        let read = |key: String, _: u64| -> BoxFuture<'static, Listing> {
            let dir = self.root.join(key.trim_end_matches('/'));
            Box::pin(blocking("listing", move || {
                read_sorted(&dir, &key, links, acls)
            }))
        };
        let after = after.as_deref();
        walk(&read, self.root_ino, self.list_threads, after, &*prune, &tx).await
    }

    async fn stat(&self, key: &str) -> Result<Option<Entry>> {
        let path = self.path(key);
        let (key, links, acls) = (key.trim_end_matches('/').to_string(), self.links, self.acls);
        blocking("stat", move || match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SyncError::io(&key, e)),
            Ok(_) => entry_of(&path, key, links, acls).map(Some),
        })
        .await
    }

    async fn read(&self, entry: &Entry, offset: u64, len: u64) -> Result<Bytes> {
        let path = self.path(&entry.key);
        let key = entry.key.clone();
        blocking(&entry.key, move || {
            let file = std::fs::File::open(&path).map_err(|e| SyncError::io(&key, e))?;
            let want = usize::try_from(len)
                .map_err(|_| SyncError::Check(format!("{key}: read too big")))?;
            let mut buf = vec![0u8; want];
            let mut got = 0;
            while got < want {
                let at = offset + u64::try_from(got).unwrap_or(u64::MAX);
                match file.read_at(&mut buf[got..], at) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(SyncError::io(&key, e)),
                }
            }
            buf.truncate(got);
            Ok(Bytes::from(buf))
        })
        .await
    }

    async fn create<'a>(&'a self, key: &str) -> Result<Box<dyn Writer + 'a>> {
        let path = self.path(key);
        let dir = self.path(parent_key(key));
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| SyncError::io(parent_key(key), e))?;
        let temp = dir.join(format!("{TEMP_PREFIX}{}.{}", self.token, base_name(key)));
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .await
            .map_err(|e| SyncError::io(key, e))?;
        Ok(Box::new(FsWriter {
            key: key.to_string(),
            file,
            temp,
            path,
        }))
    }

    async fn delete(&self, entry: &Entry) -> Result<()> {
        let path = self.path(&entry.key);
        let r = if entry.is_dir() {
            tokio::fs::remove_dir(&path).await
        } else {
            tokio::fs::remove_file(&path).await
        };
        match r {
            Err(e) if e.kind() != ErrorKind::NotFound => Err(SyncError::io(&entry.key, e)),
            _ => Ok(()),
        }
    }

    async fn mkdir(&self, key: &str) -> Result<()> {
        tokio::fs::create_dir_all(self.path(key))
            .await
            .map_err(|e| SyncError::io(key, e))
    }

    async fn symlink(&self, key: &str, target: &str) -> Result<()> {
        let path = self.path(key);
        let dir = self.path(parent_key(key));
        let target = target.to_string();
        let key = key.to_string();
        blocking(&key.clone(), move || {
            std::fs::create_dir_all(&dir).map_err(|e| SyncError::io(&key, e))?;
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(SyncError::io(&key, e)),
                _ => {}
            }
            std::os::unix::fs::symlink(&target, &path).map_err(|e| SyncError::io(&key, e))
        })
        .await
    }

    async fn set_attrs(&self, key: &str, like: &Entry, perms: bool) -> Result<()> {
        let path = self.path(key);
        let like = like.clone();
        let key = key.to_string();
        blocking(&key.clone(), move || apply_attrs(&path, &key, &like, perms)).await
    }

    async fn sync(&self) -> Result<()> {
        let root = self.root.clone();
        blocking("syncfs", move || {
            let dir = std::fs::File::open(&root).map_err(|e| SyncError::io(root.display(), e))?;
            nix::unistd::syncfs(&dir)
                .map_err(|e| SyncError::io(root.display(), std::io::Error::from(e)))
        })
        .await
    }
}

/// Give `path` the mtime of `like` and, with `perms`, its mode, owner, group and the
/// access control lists it was listed with (symlinks: owner and group only).
fn apply_attrs(path: &Path, key: &str, like: &Entry, perms: bool) -> Result<()> {
    let err = |e| SyncError::io(key, e);
    if like.kind != Kind::Symlink {
        let mtime = std::time::UNIX_EPOCH
            + std::time::Duration::new(u64::try_from(like.mtime).unwrap_or(0), like.mtime_nsec);
        let file = std::fs::File::open(path).map_err(err)?;
        file.set_times(std::fs::FileTimes::new().set_modified(mtime))
            .map_err(err)?;
        if perms && let Some(mode) = like.mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)?;
        }
        if perms && let Some(acls) = &like.acls {
            write_acls(path, key, acls, like.is_dir())?;
        }
    }
    if perms && (like.uid.is_some() || like.gid.is_some()) {
        std::os::unix::fs::lchown(path, like.uid, like.gid).map_err(err)?;
    }
    Ok(())
}

/// A file written under a temporary name in its directory.
struct FsWriter {
    key: String,
    file: tokio::fs::File,
    temp: PathBuf,
    path: PathBuf,
}

#[async_trait]
impl Writer for FsWriter {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        self.file
            .write_all(&data)
            .await
            .map_err(|e| SyncError::io(&self.key, e))
    }

    async fn finish(self: Box<Self>, like: &Entry, perms: bool) -> Result<()> {
        let FsWriter {
            key,
            mut file,
            temp,
            path,
        } = *self;
        if let Err(e) = file.flush().await {
            let _ = tokio::fs::remove_file(&temp).await;
            return Err(SyncError::io(&key, e));
        }
        drop(file);
        let like = like.clone();
        blocking(&key.clone(), move || {
            let done = apply_attrs(&temp, &key, &like, perms)
                .and_then(|()| std::fs::rename(&temp, &path).map_err(|e| SyncError::io(&key, e)));
            if done.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            done
        })
        .await
    }

    async fn abort(self: Box<Self>) {
        let _ = tokio::fs::remove_file(&self.temp).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key (errors as `!message`) a listing of `ep` sends.
    async fn listed(ep: &FsEndpoint) -> Vec<String> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let none: Arc<Prune> = Arc::new(|_: &str| false);
        let (listing, got) = tokio::join!(async move { ep.list(None, none, tx).await }, async {
            let mut got = Vec::new();
            while let Some(item) = rx.recv().await {
                got.push(item.map_or_else(|e| format!("!{e}"), |e| e.key));
            }
            got
        });
        listing.unwrap();
        got
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_symlink_loop_is_one_error_with_any_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["a/b", "a/c", "d"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
            std::fs::write(dir.path().join(d).join("f"), d).unwrap();
        }
        std::os::unix::fs::symlink("..", dir.path().join("a/b/up")).unwrap();
        let want = [
            "a/",
            "a/b/",
            "a/b/f",
            "a/b/up/",
            "!a/b/up/: directory loop through a symlink",
            "a/c/",
            "a/c/f",
            "d/",
            "d/f",
        ];
        for threads in [1, 2, 8] {
            let ep = FsEndpoint::open(dir.path(), false, false).unwrap();
            let ep = ep.with_list_threads(threads);
            assert_eq!(listed(&ep).await, want, "--list-threads {threads}");
        }
    }
}
