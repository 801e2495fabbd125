//! Permission checks as Linux does them: owner/group/other bits or the inode's access
//! control list, supplementary groups, root's privileges, and the sticky-bit rule for
//! removing entries.

use strata_types::{Errno, FileType};

use super::Ctx;
use super::acl_store::AclCache;
use crate::codec::InodeCore;
use crate::error::{Result, posix};
use crate::kv::Txn;

pub const MAY_READ: u32 = 4;
pub const MAY_WRITE: u32 = 2;
pub const MAY_EXEC: u32 = 1;

/// EACCES unless `ctx` may access `inode` with every bit of `mask`: by its access list
/// when it has one (read from `acls`, or in `tx` the first time), else by the mode.
/// EPERM, even for root, for a write to an immutable or locked inode (Linux's
/// `inode_permission`; see `protect.rs`).
///
/// As Linux's `acl_permission_check`, the list is consulted only for a caller who is
/// neither root nor the owner, and only when the mask (the mode's group bits) is not
/// empty: with an empty mask the mode decides, so named entries get what "other" gets.
pub(crate) async fn check_access(
    acls: &AclCache,
    tx: &mut Txn<'_>,
    ctx: &Ctx,
    inode: &InodeCore,
    mask: u32,
) -> Result<()> {
    let want = mask & 7;
    let protected = !inode.protection.is_none();
    if want & MAY_WRITE != 0 && protected && inode.protection.frozen_at(super::now_ns()) {
        return posix(Errno::EPERM);
    }
    let no_mask = inode.mode & 0o070 == 0;
    let by_mode = want == 0 || inode.access_acl == 0 || ctx.is_root() || ctx.uid == inode.uid;
    if by_mode || no_mask {
        return check_mode(ctx, inode, want);
    }
    let acl = acls
        .record(tx, inode.access_acl)
        .await?
        .with_mode(inode.mode);
    let want = u8::try_from(want).unwrap_or(7);
    if acl.permits(ctx, inode.uid, inode.gid, want) {
        Ok(())
    } else {
        posix(Errno::EACCES)
    }
}

/// EACCES unless the mode of `inode` lets `ctx` access it with every bit of `mask`.
fn check_mode(ctx: &Ctx, inode: &InodeCore, mask: u32) -> Result<()> {
    let mask = mask & 7;
    if mask == 0 {
        return Ok(());
    }
    let mode = u32::from(inode.mode);
    if ctx.is_root() {
        // Root may read and write anything; execute needs some x bit (or a directory).
        let any_exec = mode & 0o111 != 0 || inode.kind == FileType::Directory;
        if mask & MAY_EXEC == 0 || any_exec {
            return Ok(());
        }
        return posix(Errno::EACCES);
    }
    let granted = if ctx.uid == inode.uid {
        (mode >> 6) & 7
    } else if ctx.in_group(inode.gid) {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    if granted & mask == mask {
        Ok(())
    } else {
        posix(Errno::EACCES)
    }
}

/// EPERM unless `ctx` may remove or rename `child` out of the sticky directory `dir`.
pub(crate) fn check_sticky(ctx: &Ctx, dir: &InodeCore, child: &InodeCore) -> Result<()> {
    let sticky = dir.mode & 0o1000 != 0;
    if !sticky || ctx.is_root() || ctx.uid == dir.uid || ctx.uid == child.uid {
        return Ok(());
    }
    posix(Errno::EPERM)
}

/// EPERM unless `ctx` owns `inode` or is root.
pub(crate) fn check_owner(ctx: &Ctx, inode: &InodeCore) -> Result<()> {
    if ctx.is_root() || ctx.uid == inode.uid {
        Ok(())
    } else {
        posix(Errno::EPERM)
    }
}
