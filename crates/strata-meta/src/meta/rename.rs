//! rename(2) and renameat2(2): moving and replacing entries, exchanging two entries, and
//! leaving a whiteout behind (RENAME_WHITEOUT, for overlayfs), with Linux's rules and
//! errno choices.

use strata_types::{Errno, FileType, Ino};

use super::access::{MAY_EXEC, MAY_WRITE, check_access, check_sticky};
use super::delete::Unlinked;
use super::namespace::{NewNode, add_link_parent, dir_is_empty, get_entry, in_trash, new_inode};
use super::protect::check_name_may_go;
use super::{Ctx, Meta, check_name, get_dir, must_get_inode, now_ns, put_inode, space_of};
use crate::codec::{self, Inode};
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::Txn;

/// Flags of `renameat2(2)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    pub noreplace: bool,
    pub exchange: bool,
    /// Leave a whiteout (a character device 0:0) where the source was: overlayfs asks
    /// for it when its upper directory is on this file system.
    pub whiteout: bool,
    /// Replace only this inode: if the destination is missing or another inode, fail with
    /// `ESTALE` (a compare-and-swap for the S3 gateway's `If-Match`; no kernel flag).
    pub replacing: Option<Ino>,
    /// Move only this inode: if the source entry is missing or another inode, fail with
    /// `ESTALE` (the S3 gateway moving a key's current version into its version store).
    pub moving: Option<Ino>,
}

impl RenameFlags {
    pub const NOREPLACE: u32 = 1;
    pub const EXCHANGE: u32 = 2;
    pub const WHITEOUT: u32 = 4;

    /// Parse the raw flag bits; EINVAL for unknown bits, NOREPLACE|EXCHANGE or
    /// WHITEOUT|EXCHANGE together (as Linux).
    pub fn from_bits(bits: u32) -> Result<RenameFlags> {
        if bits & !(Self::NOREPLACE | Self::EXCHANGE | Self::WHITEOUT) != 0 {
            return posix(Errno::EINVAL);
        }
        let flags = RenameFlags {
            noreplace: bits & Self::NOREPLACE != 0,
            exchange: bits & Self::EXCHANGE != 0,
            whiteout: bits & Self::WHITEOUT != 0,
            replacing: None,
            moving: None,
        };
        if flags.exchange && (flags.noreplace || flags.whiteout) {
            return posix(Errno::EINVAL);
        }
        Ok(flags)
    }
}

/// What a rename did.
enum Renamed {
    /// Nothing: the source and target were the same entry (or link).
    Nothing,
    /// The source moved; what happened to a replaced target.
    Moved(Unlinked),
}

impl Meta {
    /// Rename `parent/name` to `newparent/newname` (`renameat2` semantics).
    pub async fn rename(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        for n in [name, newname] {
            check_name(n)?;
            if n == b"." || n == b".." {
                return posix(Errno::EBUSY);
            }
        }
        let trash = self.trash_dir().await?;
        let whiteout = if flags.whiteout {
            self.check_limits(0, 1)?;
            Some(self.next_inode().await?)
        } else {
            None
        };
        let (unlinked, whiteout_owner) = self
            .write_txn(|tx| {
                Box::pin(async move {
                    let unlinked = self
                        .rename_in(tx, ctx, (parent, name), (newparent, newname), flags, trash)
                        .await?;
                    let owner = match whiteout {
                        Some(ino) if !matches!(unlinked, Renamed::Nothing) => {
                            Some(self.put_whiteout(tx, ctx, parent, name, ino).await?)
                        }
                        _ => None,
                    };
                    Ok((unlinked, owner))
                })
            })
            .await?;
        if let Renamed::Moved(unlinked) = unlinked {
            self.after_unlink(unlinked);
        }
        if let Some(owner) = whiteout_owner {
            self.add_usage(0, 1);
            self.add_owner_usage(owner, 0, 1);
        }
        Ok(())
    }

    /// Create the whiteout `parent/name` (after its entry moved away): a character device
    /// 0:0 of mode 0, owned as a new file of the caller would be. Returns its owner.
    async fn put_whiteout(
        &self,
        tx: &mut Txn<'_>,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        ino: Ino,
    ) -> Result<(u32, u32)> {
        let dir = get_dir(tx, parent).await?;
        let node = NewNode {
            kind: FileType::CharDevice,
            mode: 0,
            rdev: 0,
            target: None,
        };
        let now = now_ns();
        let inode = new_inode(ctx, &dir, ino, &node, 0, now);
        let owner = (inode.core.uid, inode.core.gid);
        self.check_quota(tx, Some(parent), Some(owner), 0, 1)
            .await?;
        put_inode(tx, &inode);
        tx.put(
            keys::dentry(parent, name),
            codec::encode_dentry(FileType::CharDevice, ino),
        );
        self.touch_dir(tx, parent, now, 0, 0, 1).await?;
        Ok(owner)
    }

    async fn rename_in(
        &self,
        tx: &mut Txn<'_>,
        ctx: &Ctx,
        (parent, name): (Ino, &[u8]),
        (newparent, newname): (Ino, &[u8]),
        flags: RenameFlags,
        trash: Option<Ino>,
    ) -> Result<Renamed> {
        let src_dir = get_dir(tx, parent).await?;
        let dst_dir = if newparent == parent {
            src_dir.clone()
        } else {
            get_dir(tx, newparent).await?
        };
        check_access(&self.acls, tx, ctx, &src_dir.core, MAY_WRITE | MAY_EXEC).await?;
        check_access(&self.acls, tx, ctx, &dst_dir.core, MAY_WRITE | MAY_EXEC).await?;
        if in_trash(&dst_dir) && !in_trash(&src_dir) {
            return posix(Errno::EPERM);
        }
        let src_entry = get_entry(tx, parent, name).await?;
        if let Some(expected) = flags.moving
            && src_entry.map(|(_, ino)| ino) != Some(expected)
        {
            return posix(Errno::ESTALE);
        }
        let Some((src_kind, src_ino)) = src_entry else {
            return posix(Errno::ENOENT);
        };
        if src_ino == Ino::TRASH {
            return posix(Errno::EPERM);
        }
        let mut src = must_get_inode(tx, src_ino).await?;
        check_sticky(ctx, &src_dir.core, &src.core)?;
        check_name_may_go(ctx, &src_dir.core, &src.core, src.fields.nlink, true)?;
        let dst_entry = get_entry(tx, newparent, newname).await?;
        if let Some(expected) = flags.replacing
            && dst_entry.map(|(_, ino)| ino) != Some(expected)
        {
            return posix(Errno::ESTALE);
        }
        if parent == newparent && name == newname {
            return if flags.noreplace {
                posix(Errno::EEXIST)
            } else {
                Ok(Renamed::Nothing)
            };
        }
        if src_kind == FileType::Directory && newparent != parent {
            ensure_not_ancestor(tx, src_ino, newparent).await?;
        }
        if newparent != parent {
            self.check_rename_quota(tx, (parent, newparent), &src, dst_entry, flags)
                .await?;
        }
        if let Some((FileType::Directory, dst_ino)) = dst_entry
            && parent != newparent
            && flags.exchange
        {
            ensure_not_ancestor(tx, dst_ino, parent).await?;
        }
        let now = now_ns();
        let src_space = space_of(src.core.kind, src.fields.length);
        let src_is_dir = i64::from(src_kind == FileType::Directory);
        let mut unlinked = Unlinked::Nothing;
        match dst_entry {
            None if flags.exchange => return posix(Errno::ENOENT),
            None => {}
            Some(_) if flags.noreplace => return posix(Errno::EEXIST),
            Some((_, dst_ino)) if dst_ino == src_ino => return Ok(Renamed::Nothing),
            Some((dst_kind, dst_ino)) => {
                let mut dst = must_get_inode(tx, dst_ino).await?;
                check_sticky(ctx, &dst_dir.core, &dst.core)?;
                let (links, moving) = (dst.fields.nlink, flags.exchange);
                check_name_may_go(ctx, &dst_dir.core, &dst.core, links, moving)?;
                let dst_space = space_of(dst.core.kind, dst.fields.length);
                let dst_is_dir = i64::from(dst_kind == FileType::Directory);
                if flags.exchange {
                    tx.put(
                        keys::dentry(parent, name),
                        codec::encode_dentry(dst_kind, dst_ino),
                    );
                    move_inode(tx, &mut dst, newparent, parent, now).await?;
                    self.touch_dir(tx, parent, now, dst_is_dir, dst_space, 1)
                        .await?;
                    self.touch_dir(tx, newparent, now, -dst_is_dir, -dst_space, -1)
                        .await?;
                } else {
                    match (
                        src_kind == FileType::Directory,
                        dst_kind == FileType::Directory,
                    ) {
                        (true, false) => return posix(Errno::ENOTDIR),
                        (false, true) => return posix(Errno::EISDIR),
                        (true, true) if !dir_is_empty(tx, dst_ino).await? => {
                            return posix(Errno::ENOTEMPTY);
                        }
                        _ => {}
                    }
                    self.touch_dir(tx, newparent, now, -dst_is_dir, -dst_space, -1)
                        .await?;
                    unlinked = self
                        .drop_name(tx, &dst_dir, newname, &mut dst, trash, now)
                        .await?;
                }
            }
        }
        if !flags.exchange {
            tx.delete(keys::dentry(parent, name));
        }
        tx.put(
            keys::dentry(newparent, newname),
            codec::encode_dentry(src_kind, src_ino),
        );
        move_inode(tx, &mut src, parent, newparent, now).await?;
        if src_kind == FileType::Directory {
            self.note_dir_parent(src_ino, newparent);
        }
        self.touch_dir(tx, parent, now, -src_is_dir, -src_space, -1)
            .await?;
        self.touch_dir(tx, newparent, now, src_is_dir, src_space, 1)
            .await?;
        Ok(Renamed::Moved(unlinked))
    }
}

/// EINVAL if `dir` is `target` or one of its ancestors (a directory moved into itself).
async fn ensure_not_ancestor(tx: &mut Txn<'_>, dir: Ino, target: Ino) -> Result<()> {
    let mut cursor = target;
    for _ in 0..4096 {
        if cursor == dir {
            return posix(Errno::EINVAL);
        }
        if cursor == Ino::ROOT || cursor == Ino::TRASH || cursor == Ino(0) {
            return Ok(());
        }
        cursor = must_get_inode(tx, cursor).await?.core.parent;
    }
    Err(MetaError::corrupt(
        &keys::inode_core(target),
        "directory ancestry does not reach the root",
    ))
}

/// Point a moved inode at its new parent; ctime changes.
async fn move_inode(
    tx: &mut Txn<'_>,
    inode: &mut Inode,
    from: Ino,
    to: Ino,
    now: i64,
) -> Result<()> {
    if inode.core.parent == Ino(0) {
        add_link_parent(tx, inode.ino, from, -1).await?;
        add_link_parent(tx, inode.ino, to, 1).await?;
    } else {
        inode.core.parent = to;
    }
    inode.fields.ctime = now;
    put_inode(tx, inode);
    Ok(())
}
