//! Namespace operations: lookup, mknod/mkdir/symlink, link, unlink, rmdir, rename,
//! readdir and readlink, with Linux's rules and errno choices.

use strata_types::{Attr, Errno, FileType, Ino, MAX_SYMLINK_LEN};

use super::access::{MAY_EXEC, MAY_WRITE, check_access, check_sticky};
use super::protect::{check_may_link, check_name_may_go};
use super::remove::TrashUse;
use super::{
    Ctx, Dir, Meta, TRASH_NAME, check_name, decode_dir, decode_inode, get_dir, get_inode,
    must_get_inode, now_ns, put_inode, space_of,
};
use crate::codec::{self, Inode, InodeCore, InodeFields, usage_slot};
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::{Key, Link, Txn, prefix_end};

/// An inode and its attributes, as lookup and create return them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub ino: Ino,
    pub attr: Attr,
}

/// One directory entry from [`Meta::readdir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub kind: FileType,
    /// Attributes, when asked for (readdirplus).
    pub attr: Option<Attr>,
}

/// True for the trash root and its hourly directories.
pub(crate) fn in_trash(dir: &Dir) -> bool {
    dir.ino == Ino::TRASH || dir.core.parent == Ino::TRASH
}

/// Look up `name` in `dir`: its inode number and type.
pub(crate) async fn get_entry(
    tx: &mut Txn<'_>,
    dir: Ino,
    name: &[u8],
) -> Result<Option<(FileType, Ino)>> {
    let key = keys::dentry(dir, name);
    match tx.get(&key).await? {
        Some(v) => codec::decode_dentry(&key, &v).map(Some),
        None => Ok(None),
    }
}

/// A directory and its entry `name`, read together (one engine call).
pub(crate) async fn get_dir_and_entry(
    tx: &mut Txn<'_>,
    dir: Ino,
    name: &[u8],
) -> Result<(Dir, Option<(FileType, Ino)>)> {
    let ks = vec![keys::inode_core(dir), keys::dentry(dir, name)];
    let vals = tx.get_many(&ks).await?;
    decode_dir_and_entry(dir, &ks, &vals)
}

/// A directory, and the inode its entry `name` names (`None` when there is no such
/// entry), read with one linked read: one engine call where the engine can.
async fn lookup_entry(
    tx: &mut Txn<'_>,
    dir: Ino,
    name: &[u8],
) -> Result<(Dir, Option<(Ino, Inode)>)> {
    let ks = vec![keys::inode_core(dir), keys::dentry(dir, name)];
    let vals = tx.get_linked(&ks, &keys::entry_to_inode(1)).await?;
    let (dir, entry) = decode_dir_and_entry(dir, &ks, &vals[..2])?;
    let Some((_, ino)) = entry else {
        return Ok((dir, None));
    };
    match decode_inode(ino, vals[2].as_deref(), vals[3].as_deref())? {
        Some(inode) => Ok((dir, Some((ino, inode)))),
        None => Err(MetaError::corrupt(
            &ks[1],
            format!("entry points at missing inode {ino}"),
        )),
    }
}

/// The directory's core record and its entry, as read for keys `ks` (see
/// [`get_dir_and_entry`]).
fn decode_dir_and_entry(
    dir: Ino,
    ks: &[Key],
    vals: &[Option<Vec<u8>>],
) -> Result<(Dir, Option<(FileType, Ino)>)> {
    let dir = decode_dir(dir, vals[0].as_deref())?;
    let entry = match &vals[1] {
        Some(v) => Some(codec::decode_dentry(&ks[1], v)?),
        None => None,
    };
    Ok((dir, entry))
}

/// True when a directory has no entries.
pub(crate) async fn dir_is_empty(tx: &mut Txn<'_>, dir: Ino) -> Result<bool> {
    let prefix = keys::dentry_prefix(dir);
    Ok(tx
        .scan(&prefix, &prefix_end(&prefix), 1, false)
        .await?
        .is_empty())
}

/// What a new inode starts as.
pub(super) struct NewNode<'a> {
    pub kind: FileType,
    pub mode: u16,
    pub rdev: u32,
    pub target: Option<&'a [u8]>,
}

impl Meta {
    /// Look up `name` in directory `parent` (needs search permission on `parent`).
    pub async fn lookup(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<Entry> {
        if name.len() > strata_types::MAX_NAME_LEN {
            return posix(Errno::ENAMETOOLONG);
        }
        let special = matches!(name, b"." | b"..") || (parent == Ino::ROOT && name == TRASH_NAME);
        self.cached_txn(|tx| {
            Box::pin(async move {
                let (dir, inode) = if special {
                    let dir = get_dir(tx, parent).await?;
                    let ino = match name {
                        b"." => parent,
                        b".." => dir.core.parent,
                        _ => Ino::TRASH,
                    };
                    let inode = get_inode(tx, ino).await?.ok_or_else(|| {
                        MetaError::corrupt(&keys::inode_core(ino), "named but missing")
                    })?;
                    (dir, Some((ino, inode)))
                } else {
                    lookup_entry(tx, parent, name).await?
                };
                check_access(&self.acls, tx, ctx, &dir.core, MAY_EXEC).await?;
                let (ino, inode) = inode.ok_or(MetaError::Posix(Errno::ENOENT))?;
                Ok(Entry {
                    ino,
                    attr: inode.attr(),
                })
            })
        })
        .await
    }

    /// Create a regular file, fifo, socket or device node.
    pub async fn mknod(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        kind: FileType,
        mode: u16,
        rdev: u32,
    ) -> Result<Entry> {
        if matches!(kind, FileType::Directory | FileType::Symlink) {
            return posix(Errno::EINVAL);
        }
        self.create_node(
            ctx,
            parent,
            name,
            NewNode {
                kind,
                mode,
                rdev,
                target: None,
            },
        )
        .await
    }

    /// Create a directory.
    pub async fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u16) -> Result<Entry> {
        let node = NewNode {
            kind: FileType::Directory,
            mode,
            rdev: 0,
            target: None,
        };
        self.create_node(ctx, parent, name, node).await
    }

    /// Create a symbolic link to `target`.
    pub async fn symlink(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        target: &[u8],
    ) -> Result<Entry> {
        if target.is_empty() {
            return posix(Errno::ENOENT);
        }
        if target.len() > MAX_SYMLINK_LEN {
            return posix(Errno::ENAMETOOLONG);
        }
        let node = NewNode {
            kind: FileType::Symlink,
            mode: 0o777,
            rdev: 0,
            target: Some(target),
        };
        self.create_node(ctx, parent, name, node).await
    }

    async fn create_node(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        node: NewNode<'_>,
    ) -> Result<Entry> {
        check_name(name)?;
        if name == b"." || name == b".." {
            return posix(Errno::EEXIST);
        }
        let ino = self.next_inode().await?;
        let length = node.target.map_or(0, |t| t.len() as u64);
        let length = if node.kind == FileType::Directory {
            4096
        } else {
            length
        };
        let space = space_of(node.kind, length);
        self.check_limits(space, 1)?;
        let node = &node;
        // Taken before the transaction: a new directory is known empty unless something
        // in it changed since.
        let stamp = self.read_cache.as_ref().map(|c| c.stamp());
        let entry = self
            .write_txn(|tx| {
                Box::pin(async move {
                    let (dir, existing) = get_dir_and_entry(tx, parent, name).await?;
                    if in_trash(&dir) || (parent == Ino::ROOT && name == TRASH_NAME) {
                        return posix(Errno::EPERM);
                    }
                    check_access(&self.acls, tx, ctx, &dir.core, MAY_WRITE | MAY_EXEC).await?;
                    if existing.is_some() {
                        return posix(Errno::EEXIST);
                    }
                    let now = now_ns();
                    let mut inode = new_inode(ctx, &dir, ino, node, length, now);
                    self.inherit_acl(tx, ctx, &dir.core, node, &mut inode)
                        .await?;
                    let owner = (inode.core.uid, inode.core.gid);
                    self.check_quota(tx, Some(parent), Some(owner), space, 1)
                        .await?;
                    put_inode(tx, &inode);
                    tx.put(
                        keys::dentry(parent, name),
                        codec::encode_dentry(node.kind, ino),
                    );
                    if let Some(target) = node.target {
                        tx.put(keys::symlink(ino), target.to_vec());
                    }
                    let is_dir = node.kind == FileType::Directory;
                    if is_dir {
                        tx.put(
                            keys::dir_usage(ino),
                            codec::encode_slots(&[0; usage_slot::COUNT]),
                        );
                    }
                    self.touch_dir(tx, parent, now, i64::from(is_dir), space, 1)
                        .await?;
                    Ok(Entry {
                        ino,
                        attr: inode.attr(),
                    })
                })
            })
            .await?;
        if node.kind == FileType::Directory
            && let (Some(cache), Some(stamp)) = (self.read_cache.as_ref(), stamp)
        {
            let prefix = keys::dentry_prefix(ino);
            cache.remember_new_range(&prefix, &prefix_end(&prefix), stamp);
        }
        self.add_usage(space, 1);
        self.add_owner_usage((entry.attr.uid, entry.attr.gid), space, 1);
        Ok(entry)
    }

    /// Read a symlink's target.
    pub async fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.txn(|tx| {
            Box::pin(async move {
                let inode = must_get_inode(tx, ino).await?;
                if inode.core.kind != FileType::Symlink {
                    return posix(Errno::EINVAL);
                }
                let key = keys::symlink(ino);
                tx.get(&key)
                    .await?
                    .ok_or_else(|| MetaError::corrupt(&key, "symlink has no target"))
            })
        })
        .await
    }

    /// Add a hard link `newparent/newname` to `ino`.
    pub async fn link(&self, ctx: &Ctx, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        check_name(newname)?;
        if newname == b"." || newname == b".." {
            return posix(Errno::EEXIST);
        }
        self.write_txn(|tx| {
            Box::pin(async move {
                let dir = get_dir(tx, newparent).await?;
                if in_trash(&dir) {
                    return posix(Errno::EPERM);
                }
                check_access(&self.acls, tx, ctx, &dir.core, MAY_WRITE | MAY_EXEC).await?;
                let mut inode = must_get_inode(tx, ino).await?;
                if inode.core.kind == FileType::Directory {
                    return posix(Errno::EPERM);
                }
                check_may_link(ctx, &inode.core)?;
                if inode.fields.nlink == 0 && !inode.core.linkable {
                    return posix(Errno::ENOENT);
                }
                if inode.fields.nlink >= 65_000 {
                    return posix(Errno::EMLINK);
                }
                if get_entry(tx, newparent, newname).await?.is_some() {
                    return posix(Errno::EEXIST);
                }
                let space = space_of(inode.core.kind, inode.fields.length);
                self.check_quota(tx, Some(newparent), None, space, 1)
                    .await?;
                if inode.fields.nlink == 0 {
                    self.link_tmpfile(tx, &mut inode, newparent, newname, space)
                        .await?;
                    return Ok(inode.attr());
                }
                let now = now_ns();
                if inode.core.parent != Ino(0) {
                    add_link_parent(tx, ino, inode.core.parent, 1).await?;
                    inode.core.parent = Ino(0);
                }
                add_link_parent(tx, ino, newparent, 1).await?;
                inode.fields.nlink += 1;
                inode.fields.ctime = now;
                put_inode(tx, &inode);
                tx.put(
                    keys::dentry(newparent, newname),
                    codec::encode_dentry(inode.core.kind, ino),
                );
                // The new name is charged to its directory; the volume's usage is
                // unchanged (the data is shared).
                self.touch_dir(tx, newparent, now, 0, space, 1).await?;
                Ok(inode.attr())
            })
        })
        .await
    }

    /// Remove the non-directory entry `parent/name`.
    pub async fn unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.unlink_with(ctx, parent, name, TrashUse::Volume).await
    }

    /// `unlink`, through the trash or not as `trash` says.
    pub(crate) async fn unlink_with(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        trash: TrashUse,
    ) -> Result<()> {
        check_name(name)?;
        self.unlink_names(ctx, parent, &[(name, None)], trash).await
    }

    /// Remove the empty directory `parent/name`.
    pub async fn rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.rmdir_with(ctx, parent, name, TrashUse::Volume).await
    }

    /// `rmdir`, through the trash or not as `trash` says.
    pub(crate) async fn rmdir_with(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        trash: TrashUse,
    ) -> Result<()> {
        match name {
            b"." => return posix(Errno::EINVAL),
            b".." => return posix(Errno::ENOTEMPTY),
            _ => check_name(name)?,
        }
        let trash = self.trash_for(trash).await?;
        let unlinked = self
            .write_txn(|tx| {
                Box::pin(async move {
                    let dir = get_dir(tx, parent).await?;
                    check_access(&self.acls, tx, ctx, &dir.core, MAY_WRITE | MAY_EXEC).await?;
                    let Some((kind, ino)) = get_entry(tx, parent, name).await? else {
                        return posix(Errno::ENOENT);
                    };
                    if kind != FileType::Directory {
                        return posix(Errno::ENOTDIR);
                    }
                    if ino == Ino::TRASH {
                        return posix(Errno::EPERM);
                    }
                    let mut child = must_get_inode(tx, ino).await?;
                    check_sticky(ctx, &dir.core, &child.core)?;
                    check_name_may_go(ctx, &dir.core, &child.core, child.fields.nlink, false)?;
                    if !dir_is_empty(tx, ino).await? {
                        return posix(Errno::ENOTEMPTY);
                    }
                    let now = now_ns();
                    tx.delete(keys::dentry(parent, name));
                    self.touch_dir(tx, parent, now, -1, -4096, -1).await?;
                    self.drop_name(tx, &dir, name, &mut child, trash, now).await
                })
            })
            .await?;
        self.after_unlink(unlinked);
        Ok(())
    }

    /// Up to `limit` entries of directory `ino` whose names sort after `after`, in name
    /// order, with attributes when `plus`. Call again with the last name for the next page.
    ///
    /// A page the change feed kept current since it was last read is answered from the
    /// client's cache after one barrier (`sync_changes`): every change committed before
    /// this call is then in the cache, so a listing misses nothing another client
    /// created before it began.
    pub async fn readdir(
        &self,
        ino: Ino,
        after: Option<&[u8]>,
        limit: usize,
        plus: bool,
    ) -> Result<Vec<DirEntry>> {
        // Names hold no NUL: the first name after `name` is at least `name` + NUL.
        let from = after.map(|name| [name, &[0u8][..]].concat());
        self.readdir_from(ino, from.as_deref(), limit, plus).await
    }

    /// Like [`Meta::readdir`], but starting at the first name `>= from` (inclusive), for
    /// callers that seek by a name that may itself be listed (the S3 gateway's keys).
    pub async fn readdir_from(
        &self,
        ino: Ino,
        from: Option<&[u8]>,
        limit: usize,
        plus: bool,
    ) -> Result<Vec<DirEntry>> {
        let prefix = keys::dentry_prefix(ino);
        let start = match from {
            Some(name) => [&prefix[..], name].concat(),
            None => prefix.clone(),
        };
        let end = prefix_end(&prefix);
        let kept = self
            .read_cache
            .as_ref()
            .is_some_and(|c| c.holds_trusted_range(&start, &end, limit));
        // A feed too slow to answer the barrier: read the engine instead.
        if kept && self.sync_changes().await.is_ok() {
            let (prefix, start, end) = (&prefix, &start, &end);
            return self
                .cached_txn(|tx| Box::pin(read_page(tx, ino, prefix, start, end, limit, plus)))
                .await;
        }
        let (prefix, start, end) = (&prefix, &start, &end);
        self.txn(|tx| Box::pin(read_page(tx, ino, prefix, start, end, limit, plus)))
            .await
    }
}

/// One page of [`Meta::readdir`]: the directory's record, the entries of `start..end`
/// (at most `limit`) and, with `plus`, their inodes, in one engine call.
async fn read_page(
    tx: &mut Txn<'_>,
    ino: Ino,
    prefix: &[u8],
    start: &[u8],
    end: &[u8],
    limit: usize,
    plus: bool,
) -> Result<Vec<DirEntry>> {
    // The directory, a page of entries and (for readdirplus) their inodes: one
    // engine call either way (no link targets for a plain readdir).
    let dir_key = keys::inode_core(ino);
    let link = if plus {
        keys::entry_to_inode(0)
    } else {
        Link {
            from: 0,
            offset: 1,
            targets: Vec::new(),
        }
    };
    let page = tx
        .scan_linked(std::slice::from_ref(&dir_key), start, end, limit, &link)
        .await?;
    decode_dir(ino, page.values.first().and_then(Option::as_deref))?;
    if plus {
        return page
            .rows
            .iter()
            .zip(&page.linked)
            .map(|((key, value), inode)| plus_entry(prefix, key, value, inode))
            .collect();
    }
    page.rows
        .iter()
        .map(|(key, value)| {
            let (kind, child) = codec::decode_dentry(key, value)?;
            Ok(DirEntry {
                name: key[prefix.len()..].to_vec(),
                ino: child,
                kind,
                attr: None,
            })
        })
        .collect()
}

/// Entries read per page by [`EntryPages`].
const ENTRY_PAGE: usize = 1000;

/// A directory's entries a page at a time, in name order (from [`Meta::entry_pages`]):
/// whole-tree walks (dump, clone, rmr, trash, summary) never hold a large directory.
#[derive(Debug)]
pub struct EntryPages {
    dir: Ino,
    plus: bool,
    after: Option<Vec<u8>>,
    done: bool,
}

impl EntryPages {
    /// The next page, `None` after the last.
    pub async fn next(&mut self, meta: &Meta) -> Result<Option<Vec<DirEntry>>> {
        if self.done {
            return Ok(None);
        }
        let page = meta
            .readdir(self.dir, self.after.as_deref(), ENTRY_PAGE, self.plus)
            .await?;
        self.done = page.len() < ENTRY_PAGE;
        self.after = page.last().map(|e| e.name.clone());
        Ok((!page.is_empty()).then_some(page))
    }
}

impl Meta {
    /// Page through the entries of `dir` (with attributes when `plus`).
    pub fn entry_pages(&self, dir: Ino, plus: bool) -> EntryPages {
        EntryPages {
            dir,
            plus,
            after: None,
            done: false,
        }
    }
}

/// A readdirplus entry from its directory entry `key` → `value` and the values of its
/// inode's core and field records (an entry whose inode is gone has no attributes).
fn plus_entry(
    prefix: &[u8],
    key: &[u8],
    value: &[u8],
    inode: &[Option<Vec<u8>>],
) -> Result<DirEntry> {
    let (kind, ino) = codec::decode_dentry(key, value)?;
    let attr = match inode {
        [Some(core), Some(fields)] => {
            decode_inode(ino, Some(core), Some(fields))?.map(|i| i.attr())
        }
        _ => None,
    };
    Ok(DirEntry {
        name: key[prefix.len()..].to_vec(),
        ino,
        kind,
        attr,
    })
}

pub(super) fn new_inode(
    ctx: &Ctx,
    dir: &Dir,
    ino: Ino,
    node: &NewNode<'_>,
    length: u64,
    now: i64,
) -> Inode {
    let mut mode = node.mode & 0o7777;
    let dir_setgid = dir.core.mode & 0o2000 != 0;
    let gid = if dir_setgid { dir.core.gid } else { ctx.gid };
    // Linux's mode_strip_sgid: a new file in a setgid directory keeps a group-executable
    // setgid only for a creator in that group; without group execute the bit means
    // mandatory locking and stays.
    if node.kind == FileType::Directory && dir_setgid {
        mode |= 0o2000;
    } else if mode & 0o2010 == 0o2010 && dir_setgid && !ctx.is_root() && !ctx.in_group(gid) {
        mode &= !0o2000;
    }
    let nlink = if node.kind == FileType::Directory {
        2
    } else {
        1
    };
    Inode {
        ino,
        core: InodeCore {
            kind: node.kind,
            mode,
            uid: ctx.uid,
            gid,
            rdev: node.rdev,
            parent: dir.ino,
            linkable: false,
            xattrs: false,
            access_acl: 0,
            default_acl: 0,
            protection: strata_types::Protection::default(),
        },
        fields: InodeFields {
            atime: now,
            mtime: now,
            ctime: now,
            nlink,
            length,
        },
    }
}

/// Change how many links `parent` holds to the multiply-linked `ino`.
pub(crate) async fn add_link_parent(
    tx: &mut Txn<'_>,
    ino: Ino,
    parent: Ino,
    delta: i64,
) -> Result<()> {
    let key = keys::link_parent(ino, parent);
    let count = codec::decode_counter(&key, tx.get(&key).await?.as_deref())? + delta;
    if count > 0 {
        tx.put(key, codec::encode_slots(&[count]));
    } else {
        tx.delete(key);
    }
    Ok(())
}
