//! Paths → inodes, as the kernel walks them: `/`-separated names from the client's root
//! (the volume root, or its `subdir`), `.` and `..` taken physically, symlinks followed
//! in the middle of a path and at its end when asked (at most 40, then ELOOP). An
//! absolute symlink target starts again at the client's root and `..` stops there, so no
//! path leaves the part of the volume the client was opened on. Directories reached by
//! plain names are remembered for a second ([`crate::dircache`]).

use std::collections::VecDeque;

use strata_types::{Attr, Errno, FileType, Ino};

use crate::dircache::key;
use crate::error::{OnPath, Result, posix};
use crate::volume::Volume;

/// Symlinks followed in one walk before ELOOP, as Linux's MAXSYMLINKS.
const MAX_SYMLINKS: usize = 40;

/// A walk in progress: the directories from the root down to where it stands.
struct Walk<'a> {
    vol: &'a Volume,
    path: &'a [u8],
    stack: Vec<Ino>,
    hops: usize,
    /// The attributes of where the walk stands, when its last step was a lookup.
    last: Option<Attr>,
}

fn components(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|b| *b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(<[u8]>::to_vec)
        .collect()
}

impl<'a> Walk<'a> {
    fn new(vol: &'a Volume, path: &'a [u8]) -> Walk<'a> {
        Walk {
            vol,
            path,
            stack: vec![vol.vfs.options().root],
            hops: 0,
            last: None,
        }
    }

    fn here(&self) -> Ino {
        self.stack
            .last()
            .copied()
            .unwrap_or(self.vol.vfs.options().root)
    }

    /// Walk `todo`; the last name is followed if it is a symlink only when `follow`.
    async fn walk(&mut self, mut todo: VecDeque<Vec<u8>>, follow: bool) -> Result<Ino> {
        while let Some(name) = todo.pop_front() {
            if name == b".." {
                if self.stack.len() > 1 {
                    self.stack.pop();
                }
                self.last = None;
                continue;
            }
            let entry = self
                .vol
                .vfs
                .lookup(&self.vol.ctx, self.here(), &name)
                .await
                .on(self.path)?;
            if entry.attr.kind == FileType::Symlink && (follow || !todo.is_empty()) {
                self.hops += 1;
                if self.hops > MAX_SYMLINKS {
                    return Err(posix(Errno::ELOOP, self.path));
                }
                let target = self.vol.vfs.readlink(entry.ino).await.on(self.path)?;
                if target.first() == Some(&b'/') {
                    self.stack.truncate(1);
                }
                let mut more = components(&target);
                more.extend(todo);
                todo = more;
                continue;
            }
            if !todo.is_empty() && entry.attr.kind != FileType::Directory {
                return Err(posix(Errno::ENOTDIR, self.path));
            }
            self.stack.push(entry.ino);
            self.last = Some(entry.attr);
        }
        Ok(self.here())
    }

    /// Walk the names of a path as given: the longest prefix naming a directory seen in
    /// the last second is skipped (the whole path when `whole`, else all but its last
    /// name, whose attributes the caller wants fresh), and every directory reached by
    /// plain names is remembered. Paths with `..` and the rest of a path after a symlink
    /// take the plain walk.
    async fn walk_names(
        &mut self,
        names: VecDeque<Vec<u8>>,
        follow: bool,
        whole: bool,
    ) -> Result<Ino> {
        let names: Vec<Vec<u8>> = names.into();
        if names.iter().any(|n| n == b"..") {
            return self.walk(names.into(), follow).await;
        }
        let dirs = &self.vol.dirs;
        let longest = if whole {
            names.len()
        } else {
            names.len().saturating_sub(1)
        };
        let mut at = 0;
        for k in (1..=longest).rev() {
            if let Some(ino) = dirs.get(&key(&names[..k])) {
                self.stack.push(ino);
                at = k;
                break;
            }
        }
        while at < names.len() {
            let entry = self
                .vol
                .vfs
                .lookup(&self.vol.ctx, self.here(), &names[at])
                .await
                .on(self.path)?;
            let last = at + 1 == names.len();
            match entry.attr.kind {
                FileType::Symlink if follow || !last => {
                    return self
                        .walk(names[at..].iter().cloned().collect(), follow)
                        .await;
                }
                FileType::Directory => dirs.put(key(&names[..=at]), entry.ino),
                _ if !last => return Err(posix(Errno::ENOTDIR, self.path)),
                _ => {}
            }
            self.stack.push(entry.ino);
            self.last = Some(entry.attr);
            at += 1;
        }
        Ok(self.here())
    }
}

/// The inode at `path`; a symlink at its end is followed when `follow`. A trailing `/`
/// asks for a directory (ENOTDIR otherwise), following a final symlink.
pub async fn resolve(vol: &Volume, path: &[u8], follow: bool) -> Result<Ino> {
    Ok(resolve_attr(vol, path, follow).await?.0)
}

/// [`resolve`], with the attributes the walk's last lookup returned (none for the root
/// or a path ending in `..`).
pub async fn resolve_attr(vol: &Volume, path: &[u8], follow: bool) -> Result<(Ino, Option<Attr>)> {
    let wants_dir = path.len() > 1 && path.last() == Some(&b'/');
    let mut walk = Walk::new(vol, path);
    let ino = walk
        .walk_names(components(path), follow || wants_dir, false)
        .await?;
    let attr = walk.last;
    if wants_dir {
        let kind = match &attr {
            Some(a) => a.kind,
            None => vol.vfs.getattr(ino).await.on(path)?.kind,
        };
        if kind != FileType::Directory {
            return Err(posix(Errno::ENOTDIR, path));
        }
    }
    Ok((ino, attr))
}

/// The directory that holds `path`'s last name, and that name. `at_root` is the errno
/// when `path` names the root itself (or ends in `.`/`..`), which has no such name.
pub async fn parent_of(vol: &Volume, path: &[u8], at_root: Errno) -> Result<(Ino, Vec<u8>)> {
    let mut parts = components(path);
    let Some(name) = parts.pop_back() else {
        return Err(posix(at_root, path));
    };
    if name == b".." || path.ends_with(b"/.") {
        return Err(posix(at_root, path));
    }
    let dir = Walk::new(vol, path).walk_names(parts, true, true).await?;
    Ok((dir, name))
}

/// Every entry of directory `dir` (with attributes), read a page at a time.
pub async fn list_dir(vol: &Volume, dir: Ino, path: &[u8]) -> Result<Vec<strata_vfs::DirEntry>> {
    const PAGE: usize = 1000;
    let mut all = Vec::new();
    let mut from: Option<Vec<u8>> = None;
    loop {
        let page = vol
            .vfs
            .list_page(dir, from.as_deref(), PAGE)
            .await
            .on(path)?;
        let full = page.len() == PAGE;
        // Names hold no NUL: the first name after `last` is at least `last` + NUL.
        from = page.last().map(|e| [&e.name[..], &[0]].concat());
        all.extend(page);
        if !full {
            return Ok(all);
        }
    }
}
