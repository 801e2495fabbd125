//! Permission checks as Linux does them: owner/group/other bits, supplementary groups,
//! root's privileges, and the sticky-bit rule for removing entries.

use strata_types::{Errno, FileType};

use super::Ctx;
use crate::codec::Inode;
use crate::error::{Result, posix};

pub const MAY_READ: u32 = 4;
pub const MAY_WRITE: u32 = 2;
pub const MAY_EXEC: u32 = 1;

/// EACCES unless `ctx` may access `inode` with every bit of `mask`.
pub(crate) fn check_access(ctx: &Ctx, inode: &Inode, mask: u32) -> Result<()> {
    let mask = mask & 7;
    if mask == 0 {
        return Ok(());
    }
    let mode = u32::from(inode.core.mode);
    if ctx.is_root() {
        // Root may read and write anything; execute needs some x bit (or a directory).
        let any_exec = mode & 0o111 != 0 || inode.core.kind == FileType::Directory;
        if mask & MAY_EXEC == 0 || any_exec {
            return Ok(());
        }
        return posix(Errno::EACCES);
    }
    let granted = if ctx.uid == inode.core.uid {
        (mode >> 6) & 7
    } else if ctx.in_group(inode.core.gid) {
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
pub(crate) fn check_sticky(ctx: &Ctx, dir: &Inode, child: &Inode) -> Result<()> {
    let sticky = dir.core.mode & 0o1000 != 0;
    if !sticky || ctx.is_root() || ctx.uid == dir.core.uid || ctx.uid == child.core.uid {
        return Ok(());
    }
    posix(Errno::EPERM)
}

/// EPERM unless `ctx` owns `inode` or is root.
pub(crate) fn check_owner(ctx: &Ctx, inode: &Inode) -> Result<()> {
    if ctx.is_root() || ctx.uid == inode.core.uid {
        Ok(())
    } else {
        posix(Errno::EPERM)
    }
}
