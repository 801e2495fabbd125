//! ioctl(2) on the mount: `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS` (what `lsattr` and `chattr`
//! use; the kernel sends them with a 4-byte `int`) and `FS_IOC_FSGETXATTR`/
//! `FS_IOC_FSSETXATTR` (`struct fsxattr`, which the kernel reads before every
//! `chattr`, and `xfs_io -c chattr` uses). Only the immutable and append-only flags exist;
//! every other request is ENOTTY, as Linux answers an ioctl a file system does not know.

use fuser::{FileHandle, INodeNo, ReplyIoctl, Request};
use strata_types::{Errno, FS_APPEND_FL, FS_IMMUTABLE_FL};

use crate::{StrataFs, errno};

const FS_IOC_GETFLAGS: u32 = 0x8008_6601;
const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
const FS_IOC32_GETFLAGS: u32 = 0x8004_6601;
const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
const FS_IOC_FSGETXATTR: u32 = 0x801c_581f;
const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// `struct fsxattr`: xflags, extsize, nextents, projid, cowextsize, 8 bytes of padding.
const FSXATTR_LEN: usize = 28;
const FS_XFLAG_IMMUTABLE: u32 = 0x8;
const FS_XFLAG_APPEND: u32 = 0x10;

/// `FS_IOC_GETFLAGS` bits as `fsxattr` xflags, and back (`None`: a flag Strata lacks).
fn xflags_of(flags: u32) -> u32 {
    let mut x = 0;
    if flags & FS_IMMUTABLE_FL != 0 {
        x |= FS_XFLAG_IMMUTABLE;
    }
    if flags & FS_APPEND_FL != 0 {
        x |= FS_XFLAG_APPEND;
    }
    x
}

/// The `FS_IOC_SETFLAGS` bits an `fsxattr` asks for; `Some(None)` names a flag Strata
/// does not have (the other fields have no meaning here and are ignored).
fn flags_of_xattr(data: &[u8]) -> Option<Option<u32>> {
    let x = flags_of(data)?;
    if x & !(FS_XFLAG_IMMUTABLE | FS_XFLAG_APPEND) != 0 {
        return Some(None);
    }
    let mut flags = 0;
    if x & FS_XFLAG_IMMUTABLE != 0 {
        flags |= FS_IMMUTABLE_FL;
    }
    if x & FS_XFLAG_APPEND != 0 {
        flags |= FS_APPEND_FL;
    }
    Some(Some(flags))
}

/// The flags word of a SETFLAGS request (4 bytes; 8 from a caller passing a `long`).
fn flags_of(data: &[u8]) -> Option<u32> {
    let word: [u8; 4] = data.get(..4)?.try_into().ok()?;
    Some(u32::from_ne_bytes(word))
}

pub(crate) fn ioctl(
    fs: &StrataFs,
    req: &Request,
    (ino, _fh): (INodeNo, FileHandle),
    cmd: u32,
    in_data: &[u8],
    reply: ReplyIoctl,
) {
    let xattr = matches!(cmd, FS_IOC_FSGETXATTR | FS_IOC_FSSETXATTR);
    match cmd {
        FS_IOC_GETFLAGS | FS_IOC32_GETFLAGS | FS_IOC_FSGETXATTR => {
            fs.spawn(req, "ioctl", |vfs| async move {
                match vfs.inode_flags(vfs.from_front(ino.0)).await {
                    Ok(flags) if xattr => {
                        let mut out = [0u8; FSXATTR_LEN];
                        out[..4].copy_from_slice(&xflags_of(flags).to_ne_bytes());
                        reply.ioctl(0, &out);
                    }
                    Ok(flags) => reply.ioctl(0, &flags.to_ne_bytes()),
                    Err(e) => reply.error(errno(e)),
                }
            });
        }
        FS_IOC_SETFLAGS | FS_IOC32_SETFLAGS | FS_IOC_FSSETXATTR => {
            let asked = match xattr {
                true => flags_of_xattr(in_data),
                false => flags_of(in_data).map(Some),
            };
            let flags = match asked {
                Some(Some(flags)) => flags,
                Some(None) => return reply.error(errno(Errno::EOPNOTSUPP)),
                None => return reply.error(errno(Errno::EINVAL)),
            };
            let ctx = fs.ctx(req);
            fs.spawn(req, "ioctl", |vfs| async move {
                match vfs
                    .set_inode_flags(&ctx, vfs.from_front(ino.0), flags)
                    .await
                {
                    Ok(_) => reply.ioctl(0, &[]),
                    Err(e) => reply.error(errno(e)),
                }
            });
        }
        _ => reply.error(errno(Errno::ENOTTY)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_numbers_are_linuxs() {
        // _IOR('f', 1, long) and _IOW('f', 2, long) on 64-bit Linux, and the int ones.
        let ior = |size: u32, nr: u32| (2 << 30) | (size << 16) | (u32::from(b'f') << 8) | nr;
        let iow = |size: u32, nr: u32| (1 << 30) | (size << 16) | (u32::from(b'f') << 8) | nr;
        assert_eq!(FS_IOC_GETFLAGS, ior(8, 1));
        assert_eq!(FS_IOC_SETFLAGS, iow(8, 2));
        assert_eq!(FS_IOC32_GETFLAGS, ior(4, 1));
        assert_eq!(FS_IOC32_SETFLAGS, iow(4, 2));
        assert_eq!(flags_of(&0x10u32.to_ne_bytes()), Some(0x10));
        assert_eq!(flags_of(&0x20u64.to_ne_bytes()), Some(0x20));
        assert_eq!(flags_of(&[1, 2]), None);
        assert_eq!(
            FS_IOC_FSGETXATTR,
            (2 << 30) | (28 << 16) | (u32::from(b'X') << 8) | 31
        );
        assert_eq!(
            FS_IOC_FSSETXATTR,
            (1 << 30) | (28 << 16) | (u32::from(b'X') << 8) | 32
        );
        let mut fsx = [0u8; FSXATTR_LEN];
        fsx[..4].copy_from_slice(&xflags_of(FS_IMMUTABLE_FL | FS_APPEND_FL).to_ne_bytes());
        assert_eq!(
            flags_of_xattr(&fsx),
            Some(Some(FS_IMMUTABLE_FL | FS_APPEND_FL))
        );
        // FS_XFLAG_NOATIME: a flag Strata does not keep.
        fsx[..4].copy_from_slice(&0x40u32.to_ne_bytes());
        assert_eq!(flags_of_xattr(&fsx), Some(None));
    }
}
