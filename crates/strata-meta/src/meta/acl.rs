//! What inodes do with access control lists: the `system.posix_acl_*` attributes (get,
//! set, remove, with the mode kept in step) and what a new inode inherits from its
//! directory's default list. Records are `acl_store.rs`'s; the list logic itself is
//! `crate::acl`'s.

use strata_types::{Errno, FileType, Ino};

use super::access::check_owner;
use super::acl_store::{AclCache, AclKind};
use super::namespace::NewNode;
use super::{Ctx, Meta, must_get_inode};
use crate::acl::{Acl, Caller};
use crate::codec::{Inode, InodeCore};
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::Txn;

impl Caller for Ctx {
    fn uid(&self) -> u32 {
        self.uid
    }
    fn in_group(&self, gid: u32) -> bool {
        Ctx::in_group(self, gid)
    }
}

impl Meta {
    /// True when the volume keeps access control lists (`--enable-acl`).
    pub fn keeps_acls(&self) -> bool {
        self.current_format().is_ok_and(|f| f.enable_acl)
    }

    /// EOPNOTSUPP unless the volume was formatted or configured with ACLs.
    fn acls_enabled(&self) -> Result<()> {
        if self.keeps_acls() {
            Ok(())
        } else {
            posix(Errno::EOPNOTSUPP)
        }
    }

    /// getxattr of `system.posix_acl_access` / `_default`: the list in the kernel's
    /// form (the access list with the current mode), ENODATA when there is none.
    pub(crate) async fn get_acl_xattr(&self, ino: Ino, kind: AclKind) -> Result<Vec<u8>> {
        self.acls_enabled()?;
        let acls = &self.acls;
        self.cached_txn(|tx| {
            Box::pin(async move {
                let inode = must_get_inode(tx, ino).await?;
                let value = match kind {
                    AclKind::Access => acls
                        .access_list(tx, &inode.core)
                        .await?
                        .map(|l| l.to_xattr()),
                    AclKind::Default if inode.core.default_acl != 0 => {
                        Some(acls.record(tx, inode.core.default_acl).await?.to_xattr())
                    }
                    AclKind::Default => None,
                };
                value.ok_or(Errno::ENODATA.into())
            })
        })
        .await
    }

    /// setxattr (`value` = `Some`) or removexattr of an ACL attribute, as Linux's
    /// `set_posix_acl`: owner or root only (EPERM); none on symlinks (EOPNOTSUPP); a
    /// default list only on directories (EACCES). An access list sets the mode's
    /// owner, group (the mask) and other bits; one that says no more than a mode is
    /// kept as the mode alone; the set-group-ID bit goes when the caller is neither
    /// in the file's group nor root. Removing a list that is not there succeeds.
    pub(crate) async fn set_acl_xattr(
        &self,
        ctx: &Ctx,
        ino: Ino,
        kind: AclKind,
        value: Option<&[u8]>,
    ) -> Result<()> {
        self.acls_enabled()?;
        let acl = match value {
            Some(v) => Acl::from_xattr(v).map_err(MetaError::Posix)?,
            None => None,
        };
        let acl = &acl;
        let acls = &self.acls;
        self.txn(|tx| {
            Box::pin(async move {
                let mut inode = must_get_inode(tx, ino).await?;
                if inode.core.kind == FileType::Symlink {
                    return posix(Errno::EOPNOTSUPP);
                }
                check_owner(ctx, &inode.core)?;
                super::protect::check_changeable(&inode.core)?;
                match kind {
                    AclKind::Access => set_access(acls, tx, ctx, &mut inode, acl.as_ref()).await?,
                    AclKind::Default => set_default(acls, tx, &mut inode, acl.as_ref()).await?,
                }
                tx.put(keys::inode_core(ino), inode.core.encode());
                super::xattr::touch_ctime(tx, ino)
            })
        })
        .await
    }

    /// Give a new inode in `dir` what Linux's `posix_acl_create` gives it: with a
    /// default list in `dir`, its mode cut down by that list (the umask does not
    /// apply), an access list when that says more than the mode, and for a directory
    /// the default list too; without one, the mode cut down by the caller's umask.
    pub(super) async fn inherit_acl(
        &self,
        tx: &mut Txn<'_>,
        ctx: &Ctx,
        dir: &InodeCore,
        node: &NewNode<'_>,
        inode: &mut Inode,
    ) -> Result<()> {
        if node.kind == FileType::Symlink {
            return Ok(());
        }
        if dir.default_acl == 0 {
            inode.core.mode &= !(ctx.umask & 0o777);
            return Ok(());
        }
        let default = self.acls.record(tx, dir.default_acl).await?;
        let (mode, access) = default.inherit(inode.core.mode);
        inode.core.mode = mode;
        if let Some(access) = access {
            inode.core.access_acl = self.acls.store(tx, &access.without_mode()).await?;
        }
        if node.kind == FileType::Directory {
            inode.core.default_acl = dir.default_acl;
        }
        Ok(())
    }
}

async fn set_access(
    acls: &AclCache,
    tx: &mut Txn<'_>,
    ctx: &Ctx,
    inode: &mut Inode,
    acl: Option<&Acl>,
) -> Result<()> {
    let Some(acl) = acl else {
        inode.core.access_acl = 0;
        return Ok(());
    };
    inode.core.mode = (inode.core.mode & !0o777) | acl.mode_bits();
    if !ctx.is_root() && !ctx.in_group(inode.core.gid) {
        inode.core.mode &= !0o2000;
    }
    inode.core.access_acl = if acl.is_minimal() {
        0
    } else {
        acls.store(tx, &acl.without_mode()).await?
    };
    Ok(())
}

async fn set_default(
    acls: &AclCache,
    tx: &mut Txn<'_>,
    inode: &mut Inode,
    acl: Option<&Acl>,
) -> Result<()> {
    match acl {
        None => inode.core.default_acl = 0,
        Some(_) if inode.core.kind != FileType::Directory => return posix(Errno::EACCES),
        Some(acl) => inode.core.default_acl = acls.store(tx, acl).await?,
    }
    Ok(())
}
