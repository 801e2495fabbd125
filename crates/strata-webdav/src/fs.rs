//! The volume as a dav-server file system: paths to inodes (walked with a cache that
//! lives for one request), attributes as DAV metadata, directory listings streamed a page
//! at a time, directories, deletes, renames and metadata-only copies. Opening files is in
//! [`crate::file`], dead properties in [`crate::props`]; dav-server calls them through
//! [`crate::dav`].
//!
//! Names beginning with `.strata-` are the servers' own (the WebDAV server's hidden
//! directory, the S3 gateway's): never listed, never reachable by a path.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dav_server::davpath::DavPath;
use dav_server::fs::{DavDirEntry, DavMetaData, FsFuture, FsResult};
use futures::FutureExt;
use parking_lot::Mutex;
use strata_types::{Attr, Errno, FileType, Ino, Nanos};
use strata_vfs::paths::{DirCache, PathWalk};
use strata_vfs::{Ctx, Entry, Vfs};

use crate::error::fs_error;

/// Names with this prefix are the servers' own and hidden.
pub(crate) const RESERVED_PREFIX: &[u8] = b".strata-";
/// The WebDAV server's directory under the served root (temporary files of PUTs).
pub(crate) const HIDDEN_DIR: &[u8] = b".strata-webdav";
/// Mode of directories the server creates, less its umask (`--umask`, 022 by default).
pub(crate) const DIR_MODE: u32 = 0o777;
/// Mode of files the server creates, less its umask.
pub(crate) const FILE_MODE: u32 = 0o666;
/// Entries read per page of a listing.
const PAGE: usize = 1000;
/// Paths one request remembers per generation: what it found lately (the last one to
/// two generations) is kept, older paths are forgotten and walked again if asked for.
/// A listing remembers its entries, and dav-server asks for each entry's properties
/// within a page of reading it, so a generation a few pages long is enough; a PROPFIND
/// of a million entries or a whole tree then holds a few thousand paths, not all.
const REMEMBERED_PER_GENERATION: usize = 4_096;

/// What one request found by path, bounded: two generations of at most
/// [`REMEMBERED_PER_GENERATION`] paths; when the newer is full, the older is dropped
/// (its memory with it) and the newer becomes the older.
#[derive(Debug)]
pub(crate) struct Remembered<V> {
    newer: HashMap<Vec<u8>, V>,
    older: HashMap<Vec<u8>, V>,
}

impl<V> Default for Remembered<V> {
    fn default() -> Self {
        Remembered {
            newer: HashMap::new(),
            older: HashMap::new(),
        }
    }
}

impl<V: Clone> Remembered<V> {
    /// What was found at `key`, if it is still remembered.
    fn get(&self, key: &[u8]) -> Option<V> {
        self.newer.get(key).or_else(|| self.older.get(key)).cloned()
    }

    /// Remember `value` at `key`.
    fn put(&mut self, key: Vec<u8>, value: V) {
        if self.newer.len() >= REMEMBERED_PER_GENERATION && !self.newer.contains_key(&key) {
            self.older = std::mem::take(&mut self.newer);
        }
        self.older.remove(&key);
        self.newer.insert(key, value);
    }

    /// Forget everything.
    fn clear(&mut self) {
        *self = Remembered::default();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.newer.len() + self.older.len()
    }
}

/// What every request of one server shares: the VFS, who the server acts as, its root.
#[derive(Debug)]
pub(crate) struct Volume {
    pub vfs: Arc<Vfs>,
    pub ctx: Ctx,
    pub root: Ino,
    /// The directory of temporary files, once made.
    tmp_dir: tokio::sync::OnceCell<Ino>,
}

/// The file system one request sees.
#[derive(Clone, Debug)]
pub struct VolumeFs {
    pub(crate) vol: Arc<Volume>,
    /// The directory this request sees as `/`: the server's root, or a user's directory.
    root: Ino,
    /// Who this request acts as, when not as the server (a user with POSIX ids).
    caller: Option<Arc<Ctx>>,
    /// Directories found by this request, by path (`a/b`): a directory is looked up once
    /// per request.
    walked: Arc<Walked>,
    /// What this request's stats found at each path (`None`: nothing there): a PUT
    /// opens the name dav-server has just looked up without looking it up again.
    stated: Arc<Mutex<Remembered<Option<Entry>>>>,
}

/// The path's segments, or ENOENT for a reserved name.
pub(crate) fn segments(path: &DavPath) -> Result<Vec<&[u8]>, Errno> {
    let segs: Vec<&[u8]> = path
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|s| !s.is_empty())
        .collect();
    for s in &segs {
        // dav-server resolves `.` and `..` (never above the root); refuse them anyway.
        if *s == b"." || *s == b".." || s.contains(&0) {
            return Err(Errno::EINVAL);
        }
        if s.starts_with(RESERVED_PREFIX) {
            return Err(Errno::ENOENT);
        }
    }
    Ok(segs)
}

/// The key of a path in this request's caches (`a/b`, as [`DirCache`] keys are).
pub(crate) fn key_of(segs: &[&[u8]]) -> Vec<u8> {
    segs.join(&b'/')
}

/// The directories one request found, by path.
#[derive(Debug, Default)]
pub(crate) struct Walked(Mutex<Remembered<Ino>>);

impl DirCache for Walked {
    fn get(&self, key: &[u8]) -> Option<Ino> {
        self.0.lock().get(key)
    }

    fn put(&self, key: &[u8], ino: Ino) {
        self.0.lock().put(key.to_vec(), ino);
    }
}

impl VolumeFs {
    /// The volume `vfs` serves (its root or `--subdir`), acting as `ctx`.
    pub fn new(vfs: Arc<Vfs>, ctx: Ctx) -> VolumeFs {
        let root = vfs.options().root;
        VolumeFs {
            vol: Arc::new(Volume {
                vfs,
                ctx,
                root,
                tmp_dir: tokio::sync::OnceCell::new(),
            }),
            root,
            caller: None,
            walked: Arc::default(),
            stated: Arc::default(),
        }
    }

    /// The same file system with an empty walk cache, for a new request that sees `root`
    /// as `/` and acts as `caller` (`None`: as the server).
    pub fn for_request(&self, root: Ino, caller: Option<Ctx>) -> VolumeFs {
        VolumeFs {
            vol: self.vol.clone(),
            root,
            caller: caller.map(Arc::new),
            walked: Arc::default(),
            stated: Arc::default(),
        }
    }

    /// The server's root.
    pub fn server_root(&self) -> Ino {
        self.vol.root
    }

    pub(crate) fn vfs(&self) -> &Vfs {
        &self.vol.vfs
    }

    /// Who this request acts as in the file system.
    pub(crate) fn ctx(&self) -> &Ctx {
        self.caller.as_deref().unwrap_or(&self.vol.ctx)
    }

    /// Forget what this request walked (after a change to the namespace).
    pub(crate) fn changed(&self) {
        self.walked.0.lock().clear();
        self.stated.lock().clear();
    }

    /// How this request walks paths: from its root, hiding the servers' own names,
    /// remembering directories; a final symlink is not followed (it is shown as one).
    fn how(&self) -> PathWalk<'_> {
        PathWalk::from(self.root)
            .follow(false)
            .reserving(RESERVED_PREFIX)
            .cached(self.walked.as_ref())
    }

    /// The inode at `segs` below the root.
    pub(crate) async fn walk(&self, segs: &[&[u8]]) -> Result<Ino, Errno> {
        let path = key_of(segs);
        Ok(self.vfs().resolve(self.ctx(), self.how(), &path).await?.ino)
    }

    /// The directory at `segs` below the root (a symlink to one is followed).
    pub(crate) async fn walk_dir(&self, segs: &[&[u8]]) -> Result<Ino, Errno> {
        let mut path = key_of(segs);
        path.push(b'/');
        Ok(self.vfs().resolve(self.ctx(), self.how(), &path).await?.ino)
    }

    /// The inode of `path`.
    pub(crate) async fn resolve(&self, path: &DavPath) -> Result<Ino, Errno> {
        self.walk(&segments(path)?).await
    }

    /// The inode and fresh attributes of `path`.
    pub(crate) async fn stat(&self, path: &DavPath) -> Result<(Ino, Attr), Errno> {
        let segs = segments(path)?;
        let Some((name, dirs)) = segs.split_last() else {
            let root = self.root;
            return Ok((root, self.vfs().getattr(root).await?));
        };
        let parent = self.walk_dir(dirs).await?;
        let key = key_of(&segs);
        let found = match self.vfs().lookup(self.ctx(), parent, name).await {
            Ok(entry) => entry,
            Err(Errno::ENOENT) => {
                self.stated.lock().put(key, None);
                return Err(Errno::ENOENT);
            }
            Err(e) => return Err(e),
        };
        if found.attr.is_dir() {
            self.walked.put(&key, found.ino);
        }
        self.stated.lock().put(key, Some(found.clone()));
        Ok((found.ino, found.attr))
    }

    /// The inode and fresh attributes of what `path` leads to, a symlink at its end
    /// followed: what reading the file at `path` reads.
    pub(crate) async fn stat_target(&self, path: &DavPath) -> Result<(Ino, Attr), Errno> {
        let segs = segments(path)?;
        let how = self.how().follow(true);
        let found = self.vfs().resolve(self.ctx(), how, &key_of(&segs)).await?;
        let attr = match found.attr {
            Some(attr) => attr,
            None => self.vfs().getattr(found.ino).await?,
        };
        Ok((found.ino, attr))
    }

    /// What this request's stat or listing found at `path`, if it looked.
    pub(crate) fn known(&self, path: &DavPath) -> Option<Option<Entry>> {
        let key = key_of(&segments(path).ok()?);
        self.stated.lock().get(&key)
    }

    /// What is at `name` in `parent` (the parent of `path`): what this request's stat
    /// of `path` found, or a fresh lookup.
    pub(crate) async fn entry_at(
        &self,
        path: &DavPath,
        parent: Ino,
        name: &[u8],
    ) -> Result<Option<Entry>, Errno> {
        let key = key_of(&segments(path)?);
        if let Some(known) = self.stated.lock().get(&key) {
            return Ok(known);
        }
        match self.vfs().lookup(self.ctx(), parent, name).await {
            Ok(entry) => Ok(Some(entry)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The parent directory of `path` and the last name; EPERM for the root.
    pub(crate) async fn parent_of(&self, path: &DavPath) -> Result<(Ino, Vec<u8>), Errno> {
        let segs = segments(path)?;
        let Some((name, dirs)) = segs.split_last() else {
            return Err(Errno::EPERM);
        };
        Ok((self.walk_dir(dirs).await?, name.to_vec()))
    }

    /// The directory holding temporary files of PUTs, made on first use by the server.
    /// Requests of users with their own POSIX ids write there too, so it is made
    /// world-writable and sticky (as `/tmp`): each can remove or rename only its own files.
    pub(crate) async fn tmp_dir(&self) -> Result<Ino, Errno> {
        let vol = &self.vol;
        vol.tmp_dir
            .get_or_try_init(|| async move {
                let parts: [&[u8]; 2] = [HIDDEN_DIR, b"tmp"];
                vol.vfs
                    .make_shared_dir(&vol.ctx, vol.root, &parts, 0o700)
                    .await
            })
            .await
            .copied()
    }
}

/// Time of a nanosecond timestamp.
fn time_of(ns: Nanos) -> SystemTime {
    let Ok(ns) = u64::try_from(ns) else {
        return UNIX_EPOCH;
    };
    UNIX_EPOCH + Duration::from_nanos(ns)
}

/// A file's or directory's attributes as DAV metadata.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    pub ino: Ino,
    pub attr: Attr,
}

impl DavMetaData for Meta {
    fn len(&self) -> u64 {
        if self.attr.is_dir() {
            0
        } else {
            self.attr.length
        }
    }

    fn modified(&self) -> FsResult<SystemTime> {
        Ok(time_of(self.attr.mtime))
    }

    fn is_dir(&self) -> bool {
        self.attr.is_dir()
    }

    fn is_symlink(&self) -> bool {
        self.attr.kind == FileType::Symlink
    }

    /// Inode, length and modification time: a new version of a file (a PUT makes a new
    /// inode) never repeats an earlier tag.
    fn etag(&self) -> Option<String> {
        Some(format!(
            "{:x}-{:x}-{:x}",
            self.ino.0,
            self.len(),
            self.attr.mtime
        ))
    }

    fn accessed(&self) -> FsResult<SystemTime> {
        Ok(time_of(self.attr.atime))
    }

    fn status_changed(&self) -> FsResult<SystemTime> {
        Ok(time_of(self.attr.ctime))
    }

    fn executable(&self) -> FsResult<bool> {
        Ok(self.attr.mode & 0o100 != 0)
    }
}

/// One entry of a listing, with the attributes the listing read.
struct ListedEntry {
    name: Vec<u8>,
    meta: Meta,
}

impl DavDirEntry for ListedEntry {
    fn name(&self) -> Vec<u8> {
        self.name.clone()
    }

    fn metadata(&self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let meta: Box<dyn DavMetaData> = Box::new(self.meta.clone());
        futures::future::ready(Ok(meta)).boxed()
    }
}

/// Where a streamed listing is.
pub(crate) struct Listing {
    fs: VolumeFs,
    dir: Ino,
    /// The path of the directory, as a walk-cache key.
    key: Vec<u8>,
    next_from: Option<Vec<u8>>,
    buffered: VecDeque<Box<dyn DavDirEntry>>,
    done: bool,
}

impl Listing {
    /// The entries of `dir`, found at path `key` (`/a/b`), as `fs` sees them.
    pub(crate) fn new(fs: VolumeFs, dir: Ino, key: Vec<u8>) -> Listing {
        Listing {
            fs,
            dir,
            key,
            next_from: None,
            buffered: VecDeque::new(),
            done: false,
        }
    }

    /// The next entry, reading a page when the buffer is empty.
    pub(crate) async fn next(mut self) -> Option<(FsResult<Box<dyn DavDirEntry>>, Listing)> {
        loop {
            if let Some(entry) = self.buffered.pop_front() {
                return Some((Ok(entry), self));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.read_page().await {
                self.done = true;
                return Some((Err(fs_error(e)), self));
            }
        }
    }

    async fn read_page(&mut self) -> Result<(), Errno> {
        let vfs = self.fs.vfs();
        let page = vfs
            .list_page(self.dir, self.next_from.as_deref(), PAGE)
            .await?;
        self.done = page.len() < PAGE;
        self.next_from = page.last().map(|e| [&e.name[..], &[0]].concat());
        for e in page {
            if e.name.starts_with(RESERVED_PREFIX) {
                continue;
            }
            let attr = match e.attr {
                Some(attr) => attr,
                None => match vfs.getattr(e.ino).await {
                    Ok(attr) => attr,
                    Err(Errno::ENOENT) => continue,
                    Err(err) => return Err(err),
                },
            };
            let key = if self.key.is_empty() {
                e.name.clone()
            } else {
                [&self.key[..], b"/", &e.name[..]].concat()
            };
            if attr.is_dir() {
                self.fs.walked.put(&key, e.ino);
            }
            let entry = Entry {
                ino: e.ino,
                attr: attr.clone(),
            };
            self.fs.stated.lock().put(key, Some(entry));
            self.buffered.push_back(Box::new(ListedEntry {
                name: e.name,
                meta: Meta { ino: e.ino, attr },
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;

    #[test]
    fn a_request_remembers_its_latest_paths_and_no_more() {
        let mut map: Remembered<u64> = Remembered::default();
        let key = |i: usize| i.to_string().into_bytes();
        let total = REMEMBERED_PER_GENERATION * 5 + 10;
        for i in 0..total {
            map.put(key(i), u64::try_from(i).unwrap());
            assert!(map.len() <= 2 * REMEMBERED_PER_GENERATION);
            // The latest generation's worth is always still there.
            let back = i.saturating_sub(REMEMBERED_PER_GENERATION - 1);
            assert_eq!(map.get(&key(back)), Some(u64::try_from(back).unwrap()));
        }
        assert_eq!(map.get(&key(0)), None, "the oldest were forgotten");
        // A path put again holds its newest value, once.
        map.put(key(total - 1), 7);
        assert_eq!(map.get(&key(total - 1)), Some(7));
        map.clear();
        assert_eq!((map.len(), map.get(&key(total - 1))), (0, None));
    }

    #[test]
    fn reserved_names_and_dots_are_refused() {
        let path = |p: &str| DavPath::new(p).unwrap();
        assert_eq!(segments(&path("/a/b/")).unwrap(), [&b"a"[..], b"b"]);
        assert_eq!(segments(&path("/.strata-webdav/x")), Err(Errno::ENOENT));
        assert_eq!(segments(&path("/a/.strata-s3")), Err(Errno::ENOENT));
        assert!(segments(&path("/")).unwrap().is_empty());
    }
}
