//! Protections through the VFS (docs/SEMANTICS.md, "Immutable files and object lock"):
//! `FS_IOC_GETFLAGS`/`FS_IOC_SETFLAGS` for the mount and the SDK, retention and legal
//! hold for the S3 gateway. The metadata layer enforces them; this module makes sure a
//! file's buffered writes land before it is frozen, and that cached attributes follow.

use strata_types::{Attr, Errno, FS_APPEND_FL, FS_IMMUTABLE_FL, Ino, Retention};

use crate::errno::from_meta;
use crate::{Ctx, Result, Vfs, is_internal};

impl Vfs {
    /// `FS_IOC_GETFLAGS`: the inode's immutable and append-only bits.
    pub async fn inode_flags(&self, ino: Ino) -> Result<u32> {
        if is_internal(ino) {
            return Ok(0);
        }
        Ok(self.getattr(ino).await?.protection.ioctl_flags())
    }

    /// `FS_IOC_SETFLAGS`: only `FS_IMMUTABLE_FL` and `FS_APPEND_FL` are kept (EOPNOTSUPP
    /// for any other bit, as file systems without them answer `chattr`). This client's
    /// buffered writes to the file are stored first, so freezing it loses none.
    pub async fn set_inode_flags(&self, ctx: &Ctx, ino: Ino, flags: u32) -> Result<Attr> {
        self.writable()?;
        if is_internal(ino) {
            return Err(Errno::EPERM);
        }
        if flags & !(FS_IMMUTABLE_FL | FS_APPEND_FL) != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        let (immutable, append_only) = (flags & FS_IMMUTABLE_FL != 0, flags & FS_APPEND_FL != 0);
        let change = self.meta.set_inode_flags(ctx, ino, immutable, append_only);
        self.protect(ino, change).await
    }

    /// S3 object lock: set, extend or (with `bypass_governance`, for a governance one)
    /// shorten the file's retention. Buffered writes are stored first.
    pub async fn set_retention(
        &self,
        ctx: &Ctx,
        ino: Ino,
        retention: Option<Retention>,
        bypass_governance: bool,
    ) -> Result<Attr> {
        let change = self
            .meta
            .set_retention(ctx, ino, retention, bypass_governance);
        self.protect(ino, change).await
    }

    /// S3 object lock: put a legal hold on the file or lift it.
    pub async fn set_legal_hold(&self, ctx: &Ctx, ino: Ino, on: bool) -> Result<Attr> {
        self.protect(ino, self.meta.set_legal_hold(ctx, ino, on))
            .await
    }

    /// Run `change` (not started yet) on `ino` once this client's buffered writes to it
    /// are stored, and forget the attributes cached of it.
    async fn protect(
        &self,
        ino: Ino,
        change: impl std::future::Future<Output = strata_meta::Result<Attr>>,
    ) -> Result<Attr> {
        self.writable()?;
        self.flush_inode(ino).await?;
        let attr = change.await.map_err(from_meta)?;
        self.open_files.invalidate(ino);
        Ok(attr)
    }
}
