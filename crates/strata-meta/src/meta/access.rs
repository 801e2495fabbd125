//! Permission checks as Linux does them: owner/group/other bits, supplementary groups,
//! root's privileges, and the sticky-bit rule for removing entries.

use strata_types::{Errno, FileType};

use super::Ctx;
use crate::codec::InodeCore;
use crate::error::{Result, posix};

pub const MAY_READ: u32 = 4;
pub const MAY_WRITE: u32 = 2;
pub const MAY_EXEC: u32 = 1;

/// EACCES unless `ctx` may access `inode` with every bit of `mask`.
pub(crate) fn check_access(ctx: &Ctx, inode: &InodeCore, mask: u32) -> Result<()> {
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
