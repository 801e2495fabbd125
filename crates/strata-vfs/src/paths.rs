//! Paths to inodes, for every front end that takes paths (the SDK, the S3 gateway, the
//! WebDAV server, sync): the one walker, so a path means the same thing through each.
//!
//! A path is `/`-separated names from a front end's root (its `--subdir`, a bucket, a
//! user's directory). Empty names and `.` are skipped; `..` is physical (the directory
//! the walk came from) and stops at the root. A symlink in the middle of a path is
//! followed, and at its end when the caller asks; an absolute target starts again at the
//! root, so no path leaves the part of the volume the front end serves; after
//! [`MAX_SYMLINKS`] the walk fails with ELOOP. A trailing `/` asks for a directory. Every
//! step is a [`Vfs::lookup`] as the caller's identity, so search permission is checked
//! on each directory passed, as the kernel does. A front end may reserve a name prefix in
//! its root (where it keeps its own hidden directories): such a name is ENOENT however
//! the walk reaches it, through a symlink's target or a `..` included.

use futures::FutureExt;
use futures::future::BoxFuture;
use strata_meta::{Ctx, Entry, Meta};
use strata_types::{Attr, Errno, FileType, Ino};

use crate::errno::from_meta;
use crate::{Result, Vfs};

/// What a walk asks of the namespace: a [`Vfs`], or the metadata layer itself before a
/// VFS exists (a client finding the directory its `--subdir` names, to root its VFS at).
pub trait Namespace: Sync {
    /// `name` in directory `dir`, looked up as `ctx` (search permission checked).
    fn lookup<'a>(&'a self, ctx: &'a Ctx, dir: Ino, name: &'a [u8])
    -> BoxFuture<'a, Result<Entry>>;
    /// The target of symlink `ino`.
    fn readlink(&self, ino: Ino) -> BoxFuture<'_, Result<Vec<u8>>>;
    /// The attributes of `ino`.
    fn getattr(&self, ino: Ino) -> BoxFuture<'_, Result<Attr>>;
}

impl Namespace for Vfs {
    fn lookup<'a>(
        &'a self,
        ctx: &'a Ctx,
        dir: Ino,
        name: &'a [u8],
    ) -> BoxFuture<'a, Result<Entry>> {
        Vfs::lookup(self, ctx, dir, name).boxed()
    }

    fn readlink(&self, ino: Ino) -> BoxFuture<'_, Result<Vec<u8>>> {
        Vfs::readlink(self, ino).boxed()
    }

    fn getattr(&self, ino: Ino) -> BoxFuture<'_, Result<Attr>> {
        Vfs::getattr(self, ino).boxed()
    }
}

impl Namespace for Meta {
    fn lookup<'a>(
        &'a self,
        ctx: &'a Ctx,
        dir: Ino,
        name: &'a [u8],
    ) -> BoxFuture<'a, Result<Entry>> {
        async move { Meta::lookup(self, ctx, dir, name).await.map_err(from_meta) }.boxed()
    }

    fn readlink(&self, ino: Ino) -> BoxFuture<'_, Result<Vec<u8>>> {
        async move { Meta::readlink(self, ino).await.map_err(from_meta) }.boxed()
    }

    fn getattr(&self, ino: Ino) -> BoxFuture<'_, Result<Attr>> {
        async move { Meta::getattr(self, ino).await.map_err(from_meta) }.boxed()
    }
}

/// Symlinks followed in one walk before ELOOP, as Linux's MAXSYMLINKS.
pub const MAX_SYMLINKS: usize = 40;

/// Directories a front end remembers by path, to skip lookups on the next walk. Keys are
/// the names from the root joined by `/` (no `.`, `..` or empty names).
pub trait DirCache: Send + Sync {
    /// The directory at `key`, if remembered.
    fn get(&self, key: &[u8]) -> Option<Ino>;
    /// Remember that `key` is directory `ino`.
    fn put(&self, key: &[u8], ino: Ino);
}

/// How to walk: from where, following a final symlink or not, hiding what, remembering
/// where.
#[derive(Clone, Copy)]
pub struct PathWalk<'a> {
    /// `/` of the path, and the highest `..` reaches.
    pub root: Ino,
    /// Follow a symlink that is the path's last name (as `stat`; `lstat` does not).
    pub follow: bool,
    /// Names with this prefix in the root do not exist for this front end (where it keeps
    /// its own files).
    pub reserved: Option<&'a [u8]>,
    /// Where directories found are remembered, if anywhere.
    pub cache: Option<&'a dyn DirCache>,
    /// Symlinks may be followed at all; when not, one that would be is ELOOP (as
    /// `openat2`'s `RESOLVE_NO_SYMLINKS`): for a front end's own fixed paths.
    pub symlinks: bool,
}

impl std::fmt::Debug for PathWalk<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathWalk")
            .field("root", &self.root)
            .field("follow", &self.follow)
            .field("reserved", &self.reserved)
            .field("cached", &self.cache.is_some())
            .field("symlinks", &self.symlinks)
            .finish()
    }
}

impl<'a> PathWalk<'a> {
    /// A walk from `root` following a final symlink, hiding nothing, remembering nothing.
    pub fn from(root: Ino) -> PathWalk<'a> {
        PathWalk {
            root,
            follow: true,
            reserved: None,
            cache: None,
            symlinks: true,
        }
    }

    /// The same walk, failing with ELOOP where it would follow a symlink.
    pub fn no_symlinks(self) -> PathWalk<'a> {
        PathWalk {
            symlinks: false,
            ..self
        }
    }

    /// The same walk, following a final symlink only when `follow`.
    pub fn follow(self, follow: bool) -> PathWalk<'a> {
        PathWalk { follow, ..self }
    }

    /// The same walk, hiding names in the root that start with `prefix`.
    pub fn reserving(self, prefix: &'a [u8]) -> PathWalk<'a> {
        PathWalk {
            reserved: Some(prefix),
            ..self
        }
    }

    /// The same walk, remembering directories in `cache`.
    pub fn cached(self, cache: &'a dyn DirCache) -> PathWalk<'a> {
        PathWalk {
            cache: Some(cache),
            ..self
        }
    }
}

/// Where a walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub ino: Ino,
    /// The attributes the last lookup returned (none for the root, a path ending in `..`,
    /// or a directory taken from the cache).
    pub attr: Option<Attr>,
    /// The directories from the root down to where the walk ended, when it passed no
    /// symlink (`[root, ..., ino]`): what a caller removing empty parents climbs.
    pub chain: Option<Vec<Ino>>,
}

/// The names of `path` with empty names and `.` left out.
fn names(path: &[u8]) -> Vec<&[u8]> {
    path.split(|b| *b == b'/')
        .filter(|n| !n.is_empty() && *n != b".")
        .collect()
}

/// How a walk ended.
#[derive(Debug, PartialEq, Eq)]
enum Walked {
    Done,
    /// It met `..` below a directory taken from the cache, whose parents it does not
    /// know: walk again without the cache.
    AgainUncached,
}

/// A walk in progress.
struct Walker<'v, 'w> {
    ns: &'v dyn Namespace,
    ctx: &'v Ctx,
    how: PathWalk<'w>,
    /// The directories from the root to where the walk stands.
    stack: Vec<Ino>,
    hops: usize,
    last: Option<Attr>,
    /// A cached directory was taken: the stack lacks the directories above it.
    skipped: bool,
}

impl Walker<'_, '_> {
    fn here(&self) -> Ino {
        self.stack.last().copied().unwrap_or(self.how.root)
    }

    /// Walk `todo` (names, in order). The last name is followed if it is a symlink only
    /// when `follow_last`.
    async fn walk(&mut self, mut todo: Vec<Vec<u8>>, follow_last: bool) -> Result<Walked> {
        todo.reverse();
        while let Some(name) = todo.pop() {
            if name == b".." {
                if self.skipped {
                    return Ok(Walked::AgainUncached);
                }
                if self.stack.len() > 1 {
                    self.stack.pop();
                }
                self.last = None;
                continue;
            }
            self.check_name(&name)?;
            let entry = self.ns.lookup(self.ctx, self.here(), &name).await?;
            let more = !todo.is_empty();
            if entry.attr.kind == FileType::Symlink && (more || follow_last) {
                self.hops += 1;
                if self.hops > MAX_SYMLINKS || !self.how.symlinks {
                    return Err(Errno::ELOOP);
                }
                let target = self.ns.readlink(entry.ino).await?;
                if target.is_empty() {
                    return Err(Errno::ENOENT);
                }
                if target.first() == Some(&b'/') {
                    self.stack.truncate(1);
                    self.skipped = false;
                }
                todo.extend(names(&target).into_iter().rev().map(<[u8]>::to_vec));
                continue;
            }
            if more && entry.attr.kind != FileType::Directory {
                return Err(Errno::ENOTDIR);
            }
            self.stack.push(entry.ino);
            self.last = Some(entry.attr);
        }
        Ok(Walked::Done)
    }

    fn check_name(&self, name: &[u8]) -> Result<()> {
        if name.contains(&0) {
            return Err(Errno::EINVAL);
        }
        match self.how.reserved {
            Some(prefix) if name.starts_with(prefix) && self.here() == self.how.root => {
                Err(Errno::ENOENT)
            }
            _ => Ok(()),
        }
    }

    /// Walk `names`, taking the longest prefix of directories the cache remembers (all
    /// but the last name when `fresh_last`: the caller wants its attributes fresh) and
    /// remembering every directory reached by plain names.
    async fn walk_cached(
        &mut self,
        names: &[&[u8]],
        follow_last: bool,
        fresh_last: bool,
    ) -> Result<Walked> {
        let cache = match self.how.cache {
            Some(cache) if !names.contains(&&b".."[..]) => cache,
            _ => {
                let todo = names.iter().map(|n| n.to_vec()).collect();
                return self.walk(todo, follow_last).await;
            }
        };
        let mut at = 0;
        let longest = if fresh_last {
            names.len().saturating_sub(1)
        } else {
            names.len()
        };
        for k in (1..=longest).rev() {
            if let Some(ino) = cache.get(&names[..k].join(&b'/')) {
                self.stack.push(ino);
                self.skipped = true;
                at = k;
                break;
            }
        }
        while at < names.len() {
            let name = names[at];
            self.check_name(name)?;
            let entry = self.ns.lookup(self.ctx, self.here(), name).await?;
            let last = at + 1 == names.len();
            match entry.attr.kind {
                FileType::Symlink if follow_last || !last => {
                    let todo = names[at..].iter().map(|n| n.to_vec()).collect();
                    return self.walk(todo, follow_last).await;
                }
                FileType::Directory => cache.put(&names[..=at].join(&b'/'), entry.ino),
                _ if !last => return Err(Errno::ENOTDIR),
                _ => {}
            }
            self.stack.push(entry.ino);
            self.last = Some(entry.attr);
            at += 1;
        }
        Ok(Walked::Done)
    }
}

impl Vfs {
    /// The inode at `path`, walked as `ctx` the way `how` says (see the module doc).
    pub async fn resolve(&self, ctx: &Ctx, how: PathWalk<'_>, path: &[u8]) -> Result<Resolved> {
        resolve(self, ctx, how, path).await
    }

    /// The directory holding `path`'s last name, and that name (see [`resolve_parent`]).
    pub async fn resolve_parent(
        &self,
        ctx: &Ctx,
        how: PathWalk<'_>,
        path: &[u8],
        at_root: Errno,
    ) -> Result<(Resolved, Vec<u8>)> {
        resolve_parent(self, ctx, how, path, at_root).await
    }
}

/// The inode at `path` in `ns`, walked as `ctx` the way `how` says (see the module doc).
pub async fn resolve(
    ns: &dyn Namespace,
    ctx: &Ctx,
    how: PathWalk<'_>,
    path: &[u8],
) -> Result<Resolved> {
    let wants_dir = path.last() == Some(&b'/') && !names(path).is_empty();
    let follow = how.follow || wants_dir;
    let walker = walk_names(ns, ctx, how, &names(path), follow, true).await?;
    let resolved = walker.resolved();
    if wants_dir {
        let kind = match &resolved.attr {
            Some(a) => a.kind,
            None => ns.getattr(resolved.ino).await?.kind,
        };
        if kind != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
    }
    Ok(resolved)
}

/// The directory holding `path`'s last name in `ns`, and that name: where a create,
/// remove or rename of `path` happens. `at_root` is the errno when `path` has no last
/// name to act on (the root itself, or a path ending in `.` or `..`).
pub async fn resolve_parent(
    ns: &dyn Namespace,
    ctx: &Ctx,
    how: PathWalk<'_>,
    path: &[u8],
    at_root: Errno,
) -> Result<(Resolved, Vec<u8>)> {
    let mut all = names(path);
    let Some(name) = all.pop() else {
        return Err(at_root);
    };
    if name == b".." || path.ends_with(b"/.") || path == b"." {
        return Err(at_root);
    }
    let walker = walk_names(ns, ctx, how, &all, true, false).await?;
    walker.check_name(name)?;
    let dir = walker.resolved();
    if let Some(attr) = &dir.attr
        && attr.kind != FileType::Directory
    {
        return Err(Errno::ENOTDIR);
    }
    Ok((dir, name.to_vec()))
}

/// Walk `names` from `how.root`; a walk that met `..` below a cached directory (whose
/// parents it does not know) starts over without the cache.
async fn walk_names<'v, 'w>(
    ns: &'v dyn Namespace,
    ctx: &'v Ctx,
    how: PathWalk<'w>,
    names: &[&[u8]],
    follow_last: bool,
    fresh_last: bool,
) -> Result<Walker<'v, 'w>> {
    let mut walker = Walker {
        ns,
        ctx,
        how,
        stack: vec![how.root],
        hops: 0,
        last: None,
        skipped: false,
    };
    if walker.walk_cached(names, follow_last, fresh_last).await? == Walked::Done {
        return Ok(walker);
    }
    let mut again = Walker {
        how: PathWalk { cache: None, ..how },
        stack: vec![how.root],
        hops: 0,
        last: None,
        skipped: false,
        ..walker
    };
    let todo = names.iter().map(|n| n.to_vec()).collect();
    match again.walk(todo, follow_last).await? {
        Walked::Done => Ok(again),
        // Not cached: every `..` is taken.
        Walked::AgainUncached => Err(Errno::EIO),
    }
}

impl Walker<'_, '_> {
    fn resolved(&self) -> Resolved {
        Resolved {
            ino: self.here(),
            attr: self.last.clone(),
            chain: (self.hops == 0 && !self.skipped).then(|| self.stack.clone()),
        }
    }
}
