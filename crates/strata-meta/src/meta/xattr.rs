//! Extended attributes: the four xattr calls with XATTR_CREATE/XATTR_REPLACE, ENODATA,
//! ERANGE and E2BIG, and the namespace rules (user.* needs file permissions and a regular
//! file or directory, trusted.* needs root; of system.* only the two ACL attributes,
//! which `acl.rs` serves).

use strata_types::{Errno, FileType, Ino};

use super::access::{MAY_READ, MAY_WRITE, check_access};
use super::acl_store::{AclCache, AclKind};
use super::{Ctx, Meta, must_get_inode, now_ns};
use crate::codec::{Inode, slot};
use crate::error::{Result, posix};
use crate::keys;
use crate::kv::{FieldOp, FieldUpdate, Txn, prefix_end};

/// Largest xattr value, as on Linux.
pub const MAX_XATTR_VALUE: usize = 65536;
/// Longest xattr name, as on Linux.
pub const MAX_XATTR_NAME: usize = 255;

/// Flags of setxattr(2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XattrFlags {
    pub create: bool,
    pub replace: bool,
}

impl XattrFlags {
    pub const CREATE: u32 = 1;
    pub const REPLACE: u32 = 2;

    pub fn from_bits(bits: u32) -> Result<XattrFlags> {
        if bits & !(Self::CREATE | Self::REPLACE) != 0 {
            return posix(Errno::EINVAL);
        }
        Ok(XattrFlags {
            create: bits & Self::CREATE != 0,
            replace: bits & Self::REPLACE != 0,
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Namespace {
    User,
    Trusted,
    Security,
}

fn namespace_of(name: &[u8]) -> Result<Namespace> {
    if name.is_empty() || name.len() > MAX_XATTR_NAME {
        return posix(Errno::ERANGE);
    }
    let ns = if name.starts_with(b"user.") {
        Namespace::User
    } else if name.starts_with(b"trusted.") {
        Namespace::Trusted
    } else if name.starts_with(b"security.") {
        Namespace::Security
    } else {
        return posix(Errno::EOPNOTSUPP);
    };
    Ok(ns)
}

/// True when reading attribute `name` of an inode that has no extended attributes gives
/// ENODATA to `ctx` whatever the inode's permissions (`security.*`, and `trusted.*` for
/// root): a front end that knows the inode has none may answer without the engine.
pub fn absent_xattr_is_enodata(ctx: &Ctx, name: &[u8]) -> bool {
    match namespace_of(name) {
        Ok(Namespace::Security) => true,
        Ok(Namespace::Trusted) => ctx.is_root(),
        _ => false,
    }
}

/// Whether `ctx` may read (`mask` = MAY_READ) or write this namespace of `inode`.
async fn check_xattr_access(
    acls: &AclCache,
    tx: &mut Txn<'_>,
    ctx: &Ctx,
    inode: &Inode,
    ns: Namespace,
    mask: u32,
) -> Result<()> {
    if mask == MAY_WRITE && super::protect::check_changeable(&inode.core).is_err() {
        // The gateway keeps tags on locked versions, as S3 allows; nothing else changes.
        let p = &inode.core.protection;
        let tags_of_lock = ctx.version_keeper && ctx.is_root() && !p.immutable && !p.append_only;
        return if tags_of_lock {
            Ok(())
        } else {
            posix(Errno::EPERM)
        };
    }
    match ns {
        Namespace::Trusted if !ctx.is_root() => posix(Errno::EPERM),
        Namespace::User => {
            if !matches!(inode.core.kind, FileType::Regular | FileType::Directory) {
                return posix(if mask == MAY_WRITE {
                    Errno::EPERM
                } else {
                    Errno::ENODATA
                });
            }
            check_access(acls, tx, ctx, &inode.core, mask).await
        }
        _ => Ok(()),
    }
}

/// ERANGE when a caller's buffer of `size` bytes (0 = just asking the size) is too small.
fn fit(value: Vec<u8>, size: usize) -> Result<Vec<u8>> {
    if size != 0 && value.len() > size {
        posix(Errno::ERANGE)
    } else {
        Ok(value)
    }
}

pub(super) fn touch_ctime(tx: &mut Txn<'_>, ino: Ino) -> Result<()> {
    let op = FieldOp {
        slot: slot::CTIME,
        update: FieldUpdate::Set(now_ns()),
    };
    Ok(tx.update_fields(keys::inode_fields(ino), &[op])?)
}

impl Meta {
    /// setxattr(2).
    pub async fn setxattr(
        &self,
        ctx: &Ctx,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<()> {
        if value.len() > MAX_XATTR_VALUE {
            return posix(Errno::E2BIG);
        }
        if let Some(kind) = AclKind::of_xattr(name) {
            return self.set_acl_xattr(ctx, ino, kind, Some(value)).await;
        }
        let ns = namespace_of(name)?;
        self.txn(|tx| {
            Box::pin(async move {
                let mut inode = must_get_inode(tx, ino).await?;
                check_xattr_access(&self.acls, tx, ctx, &inode, ns, MAY_WRITE).await?;
                let key = keys::xattr(ino, name);
                let exists = tx.get(&key).await?.is_some();
                if !inode.core.xattrs {
                    inode.core.xattrs = true;
                    tx.put(keys::inode_core(ino), inode.core.encode());
                }
                if flags.create && exists {
                    return posix(Errno::EEXIST);
                }
                if flags.replace && !exists {
                    return posix(Errno::ENODATA);
                }
                tx.put(key, value.to_vec());
                touch_ctime(tx, ino)
            })
        })
        .await
    }

    /// getxattr(2): the value, or ERANGE if it does not fit in `size` bytes (0 = any).
    pub async fn getxattr(&self, ctx: &Ctx, ino: Ino, name: &[u8], size: usize) -> Result<Vec<u8>> {
        if let Some(kind) = AclKind::of_xattr(name) {
            return fit(self.get_acl_xattr(ino, kind).await?, size);
        }
        let ns = namespace_of(name)?;
        let value = self
            .txn(|tx| {
                Box::pin(async move {
                    let inode = must_get_inode(tx, ino).await?;
                    check_xattr_access(&self.acls, tx, ctx, &inode, ns, MAY_READ).await?;
                    tx.get(&keys::xattr(ino, name))
                        .await?
                        .ok_or(Errno::ENODATA.into())
                })
            })
            .await?;
        fit(value, size)
    }

    /// listxattr(2): names, each followed by a NUL byte; ERANGE if over `size` (0 = any).
    pub async fn listxattr(&self, ctx: &Ctx, ino: Ino, size: usize) -> Result<Vec<u8>> {
        let list = self
            .txn(|tx| {
                Box::pin(async move {
                    let inode = must_get_inode(tx, ino).await?;
                    let mut out = Vec::new();
                    for (id, name) in [
                        (inode.core.access_acl, crate::acl::XATTR_ACCESS),
                        (inode.core.default_acl, crate::acl::XATTR_DEFAULT),
                    ] {
                        if id != 0 {
                            out.extend_from_slice(name);
                            out.push(0);
                        }
                    }
                    let prefix = keys::xattr_prefix(ino);
                    let rows = tx
                        .scan(&prefix, &prefix_end(&prefix), usize::MAX, false)
                        .await?;
                    for (key, _) in rows {
                        let name = &key[prefix.len()..];
                        if name.starts_with(b"trusted.") && !ctx.is_root() {
                            continue;
                        }
                        out.extend_from_slice(name);
                        out.push(0);
                    }
                    Ok(out)
                })
            })
            .await?;
        fit(list, size)
    }

    /// removexattr(2).
    pub async fn removexattr(&self, ctx: &Ctx, ino: Ino, name: &[u8]) -> Result<()> {
        if let Some(kind) = AclKind::of_xattr(name) {
            return self.set_acl_xattr(ctx, ino, kind, None).await;
        }
        let ns = namespace_of(name)?;
        self.txn(|tx| {
            Box::pin(async move {
                let inode = must_get_inode(tx, ino).await?;
                check_xattr_access(&self.acls, tx, ctx, &inode, ns, MAY_WRITE).await?;
                let key = keys::xattr(ino, name);
                if tx.get(&key).await?.is_none() {
                    return posix(Errno::ENODATA);
                }
                tx.delete(key);
                touch_ctime(tx, ino)
            })
        })
        .await
    }
}
