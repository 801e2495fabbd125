//! A Strata volume opened through the VFS (no mount) as an endpoint: directories read
//! whole and sent in key order, files read through file handles, written under a
//! temporary name and renamed into place, attributes set through setattr.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::BoxFuture;
use strata_types::{Attr, Errno, FileType, Ino};
use strata_vfs::paths::PathWalk;
use strata_vfs::{Ctx, SetAttr, TimeSet, Vfs};

use crate::endpoint::{
    ACL_ACCESS_XATTR, ACL_DEFAULT_XATTR, Acls, Endpoint, Entry, Kind, ListSender, Prune,
    TEMP_PREFIX, Writer, base_name, parent_key, sort_as_keys,
};
use crate::walk::{Listing, walk};
use crate::{Result, SyncError};

/// Largest read asked of the VFS at once.
const READ_MAX: u32 = 1 << 20;

/// The tree below `root` of a volume.
#[derive(Debug)]
pub struct VolumeEndpoint {
    vfs: Arc<Vfs>,
    root: Ino,
    ctx: Ctx,
    name: String,
    links: bool,
    /// Read access control lists with each entry (the run keeps permissions).
    acls: bool,
    token: String,
    /// The directory the last file was created in (files come in key order, so most
    /// share it): its key and inode, saving a lookup per name on its path per file.
    last_parent: parking_lot::Mutex<Option<(String, Ino)>>,
    /// Directories read at once while listing (`--list-threads`).
    list_threads: usize,
}

fn names(key: &str) -> impl Iterator<Item = &str> {
    key.split('/').filter(|n| !n.is_empty())
}

impl VolumeEndpoint {
    /// The tree at `path` (made when `create`) of the volume behind `vfs`, acting as root.
    pub async fn open(
        vfs: Arc<Vfs>,
        name: &str,
        path: &str,
        links: bool,
        create: bool,
    ) -> Result<VolumeEndpoint> {
        let ctx = Ctx::root();
        let top = vfs.options().root;
        let parts: Vec<&str> = names(path).collect();
        let root = if create {
            vfs.make_dirs(&ctx, top, &parts, 0o755).await
        } else {
            walk_names(&vfs, &ctx, top, &parts, true).await
        }
        .map_err(|e| SyncError::volume(format!("{name}/{path}"), e))?;
        Ok(VolumeEndpoint {
            vfs,
            root,
            ctx,
            name: name.to_string(),
            links,
            acls: false,
            token: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            last_parent: parking_lot::Mutex::new(None),
            list_threads: 1,
        })
    }

    /// Read up to `n` directories at once while listing (see `crate::walk`).
    pub fn with_list_threads(mut self, n: usize) -> VolumeEndpoint {
        self.list_threads = n.max(1);
        self
    }

    /// List entries with their access control lists (`--perms`).
    pub fn with_acls(mut self, acls: bool) -> VolumeEndpoint {
        self.acls = acls;
        self
    }

    /// The lists of `ino` (the default list only for a directory). Only an inode whose
    /// attributes say it may have extended attributes is asked: one with lists does.
    async fn read_acls(&self, ino: Ino, attr: &Attr, key: &str) -> Result<Acls> {
        let mut acls = Acls::default();
        if !attr.xattrs {
            return Ok(acls);
        }
        let read = |name: &'static str| async move {
            match self.vfs.getxattr(&self.ctx, ino, name.as_bytes(), 0).await {
                Ok(value) => Ok(Some(value)),
                Err(Errno::ENODATA | Errno::EOPNOTSUPP) => Ok(None),
                Err(e) => Err(SyncError::volume(key, e)),
            }
        };
        acls.access = read(ACL_ACCESS_XATTR).await?;
        if attr.is_dir() {
            acls.default = read(ACL_DEFAULT_XATTR).await?;
        }
        Ok(acls)
    }

    /// Give `ino` (attributes `attr`) the lists `acls`, removing a list the source has
    /// not (only asked of an inode that may have extended attributes).
    async fn write_acls(&self, ino: Ino, attr: &Attr, key: &str, acls: &Acls) -> Result<()> {
        for (name, value) in acls.by_name(attr.is_dir()) {
            let done = match value {
                Some(v) => {
                    self.vfs
                        .setxattr(&self.ctx, ino, name.as_bytes(), v, 0)
                        .await
                }
                None if !attr.xattrs => Ok(()),
                None => match self.vfs.removexattr(&self.ctx, ino, name.as_bytes()).await {
                    Err(Errno::ENODATA | Errno::EOPNOTSUPP) => Ok(()),
                    other => other,
                },
            };
            match done {
                Ok(()) => {}
                Err(Errno::EOPNOTSUPP) => {
                    return Err(SyncError::Check(format!(
                        "{key}: the destination volume keeps no access control lists \
                         (strata config META-URL --enable-acl)"
                    )));
                }
                Err(e) => return Err(SyncError::volume(key, e)),
            }
        }
        Ok(())
    }

    async fn lookup(&self, key: &str) -> std::result::Result<Ino, Errno> {
        let parts: Vec<&str> = names(key).collect();
        walk_names(&self.vfs, &self.ctx, self.root, &parts, false).await
    }

    /// The directory `key` goes in, made if missing.
    async fn parent_dir(&self, key: &str) -> Result<Ino> {
        let dir = parent_key(key);
        if let Some((known, ino)) = &*self.last_parent.lock()
            && known == dir
        {
            return Ok(*ino);
        }
        let parts: Vec<&str> = names(dir).collect();
        let ino = self
            .vfs
            .make_dirs(&self.ctx, self.root, &parts, 0o755)
            .await
            .map_err(|e| SyncError::volume(dir, e))?;
        *self.last_parent.lock() = Some((dir.to_string(), ino));
        Ok(ino)
    }

    /// One directory's entries in key order.
    async fn read_dir(&self, dir: Ino, prefix: &str) -> Result<Vec<Result<Entry>>> {
        let listed = self
            .vfs
            .list_all(dir)
            .await
            .map_err(|e| SyncError::volume(prefix, e))?;
        let mut items = Vec::with_capacity(listed.len());
        for d in listed {
            let Ok(name) = String::from_utf8(d.name) else {
                items.push(Err(SyncError::Check(format!(
                    "{prefix}: a name is not UTF-8"
                ))));
                continue;
            };
            if name.starts_with(TEMP_PREFIX) {
                continue;
            }
            let attr = match d.attr {
                Some(a) => a,
                None => match self.vfs.getattr(d.ino).await {
                    Ok(a) => a,
                    Err(e) => {
                        items.push(Err(SyncError::volume(format!("{prefix}{name}"), e)));
                        continue;
                    }
                },
            };
            items.push(self.entry(format!("{prefix}{name}"), d.ino, &attr).await);
        }
        sort_as_keys(&mut items, |i| match i {
            Ok(e) => (e.key.as_str(), false),
            Err(_) => ("", false),
        });
        Ok(items)
    }

    async fn entry(&self, key: String, ino: Ino, attr: &Attr) -> Result<Entry> {
        let (kind, key, target) = match attr.kind {
            FileType::Directory => (Kind::Dir, key + "/", None),
            FileType::Regular => (Kind::File, key, None),
            FileType::Symlink if self.links => {
                let raw = self
                    .vfs
                    .readlink(ino)
                    .await
                    .map_err(|e| SyncError::volume(&key, e))?;
                let target = String::from_utf8(raw)
                    .map_err(|_| SyncError::Check(format!("{key}: symlink target is not UTF-8")))?;
                (Kind::Symlink, key, Some(target))
            }
            FileType::Symlink => {
                return Err(SyncError::Check(format!(
                    "{key}: a symlink in a volume is copied only as a symlink (--links)"
                )));
            }
            _ => {
                return Err(SyncError::Check(format!(
                    "{key}: not a regular file, directory or symlink"
                )));
            }
        };
        let acls = if self.acls && kind != Kind::Symlink {
            Some(self.read_acls(ino, attr, &key).await?)
        } else {
            None
        };
        Ok(Entry {
            key,
            kind,
            size: if kind == Kind::Dir { 0 } else { attr.length },
            mtime: attr.mtime.div_euclid(1_000_000_000),
            mtime_nsec: u32::try_from(attr.mtime.rem_euclid(1_000_000_000)).unwrap_or(0),
            mode: Some(u32::from(attr.mode)),
            uid: Some(attr.uid),
            gid: Some(attr.gid),
            target,
            id: ino.0,
            acls,
        })
    }

    async fn set_attrs_of(&self, ino: Ino, key: &str, like: &Entry, perms: bool) -> Result<()> {
        let mut set = SetAttr::default();
        if like.kind != Kind::Symlink {
            let nanos = like
                .mtime
                .saturating_mul(1_000_000_000)
                .saturating_add(i64::from(like.mtime_nsec));
            set.mtime = Some(TimeSet::At(nanos));
        }
        if perms {
            if like.kind != Kind::Symlink {
                set.mode = like.mode.and_then(|m| u16::try_from(m & 0o7777).ok());
            }
            set.uid = like.uid;
            set.gid = like.gid;
        }
        let attr = self
            .vfs
            .setattr(&self.ctx, ino, &set)
            .await
            .map_err(|e| SyncError::volume(key, e))?;
        match &like.acls {
            Some(acls) if perms && like.kind != Kind::Symlink => {
                self.write_acls(ino, &attr, key, acls).await
            }
            _ => Ok(()),
        }
    }
}

/// The inode at `parts` below `from`, by the VFS's path walker; a final symlink is the
/// symlink itself unless `follow`.
async fn walk_names(
    vfs: &Vfs,
    ctx: &Ctx,
    from: Ino,
    parts: &[&str],
    follow: bool,
) -> std::result::Result<Ino, Errno> {
    let path = parts.join("/");
    let how = PathWalk::from(from).follow(follow);
    Ok(vfs.resolve(ctx, how, path.as_bytes()).await?.ino)
}

#[async_trait]
impl Endpoint for VolumeEndpoint {
    fn describe(&self) -> String {
        format!("strata://{}", self.name)
    }

    fn has_dirs(&self) -> bool {
        true
    }

    async fn list(&self, after: Option<String>, prune: Arc<Prune>, tx: ListSender) -> Result<()> {
        let read = |key: String, id: u64| -> BoxFuture<'_, Listing> {
            Box::pin(async move { self.read_dir(Ino(id), &key).await })
        };
        let after = after.as_deref();
        walk(&read, self.root.0, self.list_threads, after, &*prune, &tx).await
    }

    async fn stat(&self, key: &str) -> Result<Option<Entry>> {
        let ino = match self.lookup(key).await {
            Ok(ino) => ino,
            Err(Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(SyncError::volume(key, e)),
        };
        let attr = self
            .vfs
            .getattr(ino)
            .await
            .map_err(|e| SyncError::volume(key, e))?;
        let key = key.trim_end_matches('/').to_string();
        self.entry(key, ino, &attr).await.map(Some)
    }

    async fn read(&self, entry: &Entry, offset: u64, len: u64) -> Result<Bytes> {
        let err = |e| SyncError::volume(&entry.key, e);
        let ino = match entry.id {
            0 => self.lookup(&entry.key).await.map_err(err)?,
            id => Ino(id),
        };
        let (fh, _) = self.vfs.open(&self.ctx, ino, 0).await.map_err(err)?;
        let mut out = bytes::BytesMut::new();
        let mut at = offset;
        let end = offset.saturating_add(len);
        let result = loop {
            if at >= end {
                break Ok(());
            }
            let want = u32::try_from(end - at).unwrap_or(READ_MAX).min(READ_MAX);
            match self.vfs.read(fh, at, want).await {
                Ok(data) if data.is_empty() => break Ok(()),
                Ok(data) => {
                    at += u64::try_from(data.len()).unwrap_or(u64::MAX);
                    out.extend_from_slice(&data);
                }
                Err(e) => break Err(err(e)),
            }
        };
        let released = self.vfs.release(fh).await.map_err(err);
        result.and(released)?;
        Ok(out.freeze())
    }

    async fn create<'a>(&'a self, key: &str) -> Result<Box<dyn Writer + 'a>> {
        let temp = format!("{TEMP_PREFIX}{}.{}", self.token, base_name(key));
        let mut parent = self.parent_dir(key).await?;
        let mut made = self
            .vfs
            .create(&self.ctx, parent, temp.as_bytes(), 0o644)
            .await;
        if made == Err(Errno::ENOENT) {
            // The remembered directory was removed meanwhile: look the path up again.
            *self.last_parent.lock() = None;
            parent = self.parent_dir(key).await?;
            made = self
                .vfs
                .create(&self.ctx, parent, temp.as_bytes(), 0o644)
                .await;
        }
        let (entry, fh) = made.map_err(|e| SyncError::volume(key, e))?;
        Ok(Box::new(VolumeWriter {
            vol: self,
            key: key.to_string(),
            parent,
            temp,
            ino: entry.ino,
            fh,
            at: 0,
        }))
    }

    async fn delete(&self, entry: &Entry) -> Result<()> {
        let parts: Vec<&str> = names(parent_key(&entry.key)).collect();
        let name = base_name(&entry.key).as_bytes();
        let parent = match walk_names(&self.vfs, &self.ctx, self.root, &parts, false).await {
            Err(Errno::ENOENT) => return Ok(()),
            other => other.map_err(|e| SyncError::volume(&entry.key, e))?,
        };
        let r = if entry.is_dir() {
            self.vfs.rmdir(&self.ctx, parent, name).await
        } else {
            self.vfs.unlink(&self.ctx, parent, name).await
        };
        match r {
            Err(Errno::ENOENT) | Ok(()) => Ok(()),
            Err(e) => Err(SyncError::volume(&entry.key, e)),
        }
    }

    async fn mkdir(&self, key: &str) -> Result<()> {
        let parts: Vec<&str> = names(key).collect();
        self.vfs
            .make_dirs(&self.ctx, self.root, &parts, 0o755)
            .await
            .map(drop)
            .map_err(|e| SyncError::volume(key, e))
    }

    async fn symlink(&self, key: &str, target: &str) -> Result<()> {
        let parent = self.parent_dir(key).await?;
        let name = base_name(key).as_bytes();
        match self.vfs.unlink(&self.ctx, parent, name).await {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(SyncError::volume(key, e)),
        }
        self.vfs
            .symlink(&self.ctx, parent, name, target.as_bytes())
            .await
            .map(drop)
            .map_err(|e| SyncError::volume(key, e))
    }

    async fn set_attrs(&self, key: &str, like: &Entry, perms: bool) -> Result<()> {
        let ino = self
            .lookup(key)
            .await
            .map_err(|e| SyncError::volume(key, e))?;
        self.set_attrs_of(ino, key, like, perms).await
    }

    async fn sync(&self) -> Result<()> {
        self.vfs
            .sync()
            .await
            .map_err(|e| SyncError::volume(&self.name, e))
    }
}

/// A file written through a handle under a temporary name.
struct VolumeWriter<'a> {
    vol: &'a VolumeEndpoint,
    key: String,
    parent: Ino,
    temp: String,
    ino: Ino,
    fh: u64,
    at: u64,
}

impl VolumeWriter<'_> {
    async fn close(&self) -> Result<()> {
        let err = |e| SyncError::volume(&self.key, e);
        let flushed = self.vol.vfs.flush(self.fh, 0).await.map_err(err);
        let released = self.vol.vfs.release(self.fh).await.map_err(err);
        flushed.and(released)
    }

    async fn remove_temp(&self) {
        let _ = self
            .vol
            .vfs
            .unlink(&self.vol.ctx, self.parent, self.temp.as_bytes())
            .await;
    }
}

#[async_trait]
impl Writer for VolumeWriter<'_> {
    async fn write(&mut self, data: Bytes) -> Result<()> {
        let mut done = 0;
        while done < data.len() {
            let n = self
                .vol
                .vfs
                .write(self.fh, self.at, &data[done..])
                .await
                .map_err(|e| SyncError::volume(&self.key, e))?;
            let n = usize::try_from(n).unwrap_or(usize::MAX).max(1);
            done += n;
            self.at += u64::try_from(n).unwrap_or(u64::MAX);
        }
        Ok(())
    }

    async fn finish(self: Box<Self>, like: &Entry, perms: bool) -> Result<()> {
        let closed = self.close().await;
        let done = match closed {
            Ok(()) => {
                self.vol
                    .set_attrs_of(self.ino, &self.key, like, perms)
                    .await
            }
            Err(e) => Err(e),
        };
        let done = match done {
            Ok(()) => self
                .vol
                .vfs
                .rename(
                    &self.vol.ctx,
                    self.parent,
                    self.temp.as_bytes(),
                    self.parent,
                    base_name(&self.key).as_bytes(),
                    0,
                )
                .await
                .map_err(|e| SyncError::volume(&self.key, e)),
            Err(e) => Err(e),
        };
        if done.is_err() {
            self.remove_temp().await;
        }
        done
    }

    async fn abort(self: Box<Self>) {
        let _ = self.close().await;
        self.remove_temp().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use strata_vfs::testing::{make_path_tree, memory_vfs, path_table};

    use super::*;

    /// The path table through a volume endpoint: sync finds each key (keys hold no `..`;
    /// a key whose last name is a symlink is copied as a link, so those are left out) and
    /// reads what the path holds; a directory is no file to read.
    #[tokio::test]
    async fn keys_of_the_path_table_read_what_the_paths_hold() {
        let vfs = Arc::new(memory_vfs().await);
        make_path_tree(&vfs, &Ctx::root(), vfs.options().root).await;
        let ep = VolumeEndpoint::open(vfs, "v", "", true, false)
            .await
            .unwrap();
        for case in path_table()
            .into_iter()
            .filter(|c| !c.dots && !c.final_link)
        {
            let got = match ep.stat(&case.path).await {
                Ok(Some(entry)) if entry.is_dir() => Err(Errno::EISDIR),
                Ok(Some(entry)) => Ok(ep.read(&entry, 0, entry.size).await.unwrap().to_vec()),
                Ok(None) => Err(Errno::ENOENT),
                Err(SyncError::Volume { errno, .. }) => Err(errno),
                Err(other) => panic!("{}: {other}", case.path),
            };
            assert_eq!(got, case.expect, "{}", case.path);
        }
    }
}
