//! Attributes: getattr, setattr (mode, owner, size, times) with Linux's permission rules
//! and setuid/setgid clearing, access(2) and statfs.

use strata_types::{Attr, Errno, FileType, Ino, Nanos};

use super::access::{MAY_WRITE, check_access, check_owner};
use super::acl_store::AclCache;
use super::{Ctx, Meta, must_get_inode, now_ns, put_inode};
use crate::codec::{self, Inode, slot, usage_slot};
use crate::error::{Result, posix};
use crate::keys;
use crate::kv::{FieldOp, FieldUpdate, Txn};

/// A time to set: the current time (UTIME_NOW) or a given one. `None` in [`SetAttr`]
/// leaves the time alone (UTIME_OMIT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSet {
    Now,
    At(Nanos),
}

/// What setattr changes; `None` fields are left alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u16>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
    /// The size change comes through a descriptor open for writing (ftruncate), which
    /// already carries write permission.
    pub size_from_open_file: bool,
    /// When this client's buffered writes to the file returned, if their time is not
    /// stored yet: stored with this change (as ext4 stored it at `write()`), unless the
    /// change sets mtime itself. Needs no permission: the writes were allowed.
    pub written_at: Option<Nanos>,
}

/// File-system usage, as statfs(2) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub total_space: u64,
    pub avail_space: u64,
    pub used_inodes: u64,
    pub avail_inodes: u64,
}

/// What an unlimited volume reports as its size (1 PiB), as JuiceFS does.
const UNLIMITED_SPACE: u64 = 1 << 50;
/// Free inodes an unlimited volume reports.
const UNLIMITED_FREE_INODES: u64 = 10 << 20;

impl Meta {
    /// Attributes of `ino`.
    pub async fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.cached_txn(|tx| Box::pin(async move { Ok(must_get_inode(tx, ino).await?.attr()) }))
            .await
    }

    /// Set the access time of `ino` to `atime` (a read or a listing, under the mount's
    /// atime mode); nothing else changes, not even ctime. Returns the new attributes.
    pub async fn touch_atime(&self, ino: Ino, atime: Nanos) -> Result<Attr> {
        self.txn(|tx| {
            Box::pin(async move {
                let mut inode = must_get_inode(tx, ino).await?;
                inode.fields.atime = atime;
                tx.update_fields(
                    keys::inode_fields(ino),
                    &[FieldOp {
                        slot: slot::ATIME,
                        update: FieldUpdate::Set(atime),
                    }],
                )?;
                Ok(inode.attr())
            })
        })
        .await
    }

    /// access(2): EACCES unless `ctx` may access `ino` with `mask` (R=4, W=2, X=1).
    pub async fn access(&self, ctx: &Ctx, ino: Ino, mask: u32) -> Result<()> {
        self.cached_txn(|tx| {
            Box::pin(async move {
                let inode = must_get_inode(tx, ino).await?;
                check_access(&self.acls, tx, ctx, &inode.core, mask).await
            })
        })
        .await
    }

    /// Change attributes of `ino`; returns the new attributes.
    pub async fn setattr(&self, ctx: &Ctx, ino: Ino, set: &SetAttr) -> Result<Attr> {
        let (attr, space_delta, old_owner) = self
            .write_txn(|tx| {
                Box::pin(async move {
                    let mut inode = must_get_inode(tx, ino).await?;
                    let old_owner = (inode.core.uid, inode.core.gid);
                    let now = now_ns();
                    check_setattr(&self.acls, tx, ctx, &inode, set).await?;
                    apply_owner_and_mode(ctx, &mut inode, set);
                    let mut space_delta = 0;
                    if let Some(size) = set.size {
                        space_delta = self.resize(tx, &mut inode, size, now).await?;
                        if !ctx.is_root() {
                            clear_privilege_bits(&mut inode);
                        }
                    }
                    let pick = |t: TimeSet| match t {
                        TimeSet::Now => now,
                        TimeSet::At(ns) => ns,
                    };
                    if let Some(t) = set.atime {
                        inode.fields.atime = pick(t);
                    }
                    if let Some(t) = set.mtime {
                        inode.fields.mtime = pick(t);
                    } else if let Some(at) = set.written_at {
                        super::data::apply_write_time(&mut inode, at);
                    }
                    inode.fields.ctime = now.max(inode.fields.ctime);
                    put_inode(tx, &inode);
                    Ok((inode.attr(), space_delta, old_owner))
                })
            })
            .await?;
        self.add_usage(space_delta, 0);
        let owner = (attr.uid, attr.gid);
        if owner == old_owner {
            self.add_owner_usage(owner, space_delta, 0);
        } else {
            // The inode changes hands: its space and the inode itself move.
            let space = super::space_of(attr.kind, attr.length);
            self.add_owner_usage(old_owner, space_delta - space, -1);
            self.add_owner_usage(owner, space, 1);
        }
        Ok(attr)
    }

    /// Usage of a directory's direct children: (bytes, inodes).
    pub async fn dir_usage(&self, ino: Ino) -> Result<(i64, i64)> {
        self.txn(|tx| {
            Box::pin(async move {
                let key = keys::dir_usage(ino);
                match tx.get(&key).await? {
                    Some(v) => {
                        let s = codec::decode_slots(&key, &v, usage_slot::COUNT)?;
                        Ok((s[usage_slot::BYTES], s[usage_slot::INODES]))
                    }
                    None => posix(Errno::ENOENT),
                }
            })
        })
        .await
    }

    /// Space and inode totals of the volume as this client sees them.
    pub async fn statfs(&self) -> Result<StatFs> {
        let format = self.current_format()?;
        let usage = self.usage();
        let used = u64::try_from(usage.space).unwrap_or(0);
        let inodes = u64::try_from(usage.inodes).unwrap_or(0);
        let total_space = if format.capacity > 0 {
            format.capacity
        } else {
            UNLIMITED_SPACE.max(used)
        };
        let avail_inodes = if format.inodes > 0 {
            format.inodes.saturating_sub(inodes)
        } else {
            UNLIMITED_FREE_INODES
        };
        Ok(StatFs {
            total_space,
            avail_space: total_space.saturating_sub(used),
            used_inodes: inodes,
            avail_inodes,
        })
    }
}

/// Permission rules of setattr (Linux `setattr_prepare`).
async fn check_setattr(
    acls: &AclCache,
    tx: &mut Txn<'_>,
    ctx: &Ctx,
    inode: &Inode,
    set: &SetAttr,
) -> Result<()> {
    check_protected_setattr(inode, set)?;
    let owner = ctx.is_root() || ctx.uid == inode.core.uid;
    // Linux's `chown_ok`/`chgrp_ok`: the owner may "change" the owner to itself and the
    // group to its current one or one of theirs; anyone else, even to the same ids, is
    // refused (found by comparing with ext4).
    let is_owner = ctx.uid == inode.core.uid;
    if let Some(uid) = set.uid
        && !(ctx.is_root() || (is_owner && uid == inode.core.uid))
    {
        return posix(Errno::EPERM);
    }
    if let Some(gid) = set.gid
        && !(ctx.is_root() || (is_owner && (gid == inode.core.gid || ctx.in_group(gid))))
    {
        return posix(Errno::EPERM);
    }
    if set.mode.is_some() {
        check_owner(ctx, &inode.core)?;
    }
    let explicit_time =
        matches!(set.atime, Some(TimeSet::At(_))) || matches!(set.mtime, Some(TimeSet::At(_)));
    let now_time =
        matches!(set.atime, Some(TimeSet::Now)) || matches!(set.mtime, Some(TimeSet::Now));
    if explicit_time && !owner {
        return posix(Errno::EPERM);
    }
    if now_time && !owner {
        check_access(acls, tx, ctx, &inode.core, MAY_WRITE).await?;
    }
    if set.size.is_some() {
        match inode.core.kind {
            FileType::Directory => return posix(Errno::EISDIR),
            FileType::Regular => {}
            _ => return posix(Errno::EINVAL),
        }
        if !set.size_from_open_file {
            check_access(acls, tx, ctx, &inode.core, MAY_WRITE).await?;
        }
    }
    Ok(())
}

/// EPERM for any change to an immutable or locked inode, and for all but touching the
/// times to now on an append-only one (Linux's `notify_change`). The time of writes
/// made before the inode was protected is still stored.
fn check_protected_setattr(inode: &Inode, set: &SetAttr) -> Result<()> {
    let only_write_time = SetAttr {
        written_at: None,
        size_from_open_file: false,
        ..set.clone()
    } == SetAttr::default();
    if only_write_time {
        return Ok(());
    }
    super::protect::check_unfrozen(&inode.core)?;
    let touch_only = set.mode.is_none()
        && set.uid.is_none()
        && set.gid.is_none()
        && set.size.is_none()
        && !matches!(set.atime, Some(TimeSet::At(_)))
        && !matches!(set.mtime, Some(TimeSet::At(_)));
    if !touch_only {
        super::protect::check_changeable(&inode.core)?;
    }
    Ok(())
}

fn apply_owner_and_mode(ctx: &Ctx, inode: &mut Inode, set: &SetAttr) {
    // Any chown(2) of a non-directory drops privileges, even one to the same owner and
    // by root (Linux's `chown_common`; found by comparing with ext4).
    let chown = set.uid.is_some() || set.gid.is_some();
    if let Some(uid) = set.uid {
        inode.core.uid = uid;
    }
    if let Some(gid) = set.gid {
        inode.core.gid = gid;
    }
    if chown && inode.core.kind != FileType::Directory {
        clear_privilege_bits(inode);
    }
    if let Some(mode) = set.mode {
        let mut mode = mode & 0o7777;
        if !ctx.is_root() && !ctx.in_group(inode.core.gid) {
            mode &= !0o2000;
        }
        inode.core.mode = mode;
    }
}

/// Drop setuid, and setgid when group-executable (a group-less setgid marks mandatory
/// locking and stays), as Linux does on chown, truncate and write by non-root.
/// The extended attribute holding file capabilities (removed when privileges drop).
pub(crate) const CAPABILITY_XATTR: &[u8] = b"security.capability";

/// Mode bits a write by an unprivileged user may clear: setuid and setgid.
pub(crate) fn has_privilege_bits(mode: u16) -> bool {
    mode & 0o6000 != 0
}

impl Meta {
    /// Drop a file's privileges before a write by `writer`, who lacks CAP_FSETID
    /// (FUSE_HANDLE_KILLPRIV_V2), as Linux does: clear setuid; clear setgid when the group
    /// may execute or the writer is not in the file's group; remove `security.capability`.
    pub async fn drop_privileges(&self, ino: Ino, writer: &Ctx) -> Result<()> {
        self.txn(|tx| {
            Box::pin(async move {
                let mut inode = must_get_inode(tx, ino).await?;
                let caps = keys::xattr(ino, CAPABILITY_XATTR);
                let has_caps = tx.get(&caps).await?.is_some();
                if !has_privilege_bits(inode.core.mode) && !has_caps {
                    return Ok(());
                }
                let mode = inode.core.mode;
                let kill_sgid = mode & 0o0010 != 0 || !writer.in_group(inode.core.gid);
                inode.core.mode = mode & !0o4000 & if kill_sgid { !0o2000 } else { 0o7777 };
                inode.fields.ctime = now_ns();
                put_inode(tx, &inode);
                tx.delete(caps);
                Ok(())
            })
        })
        .await
    }
}

pub(crate) fn clear_privilege_bits(inode: &mut Inode) {
    let mut mode = inode.core.mode & !0o4000;
    if mode & 0o2010 == 0o2010 {
        mode &= !0o2000;
    }
    inode.core.mode = mode;
}
