//! Inode protections, enforced here for every front end (docs/SEMANTICS.md, "Immutable
//! files and object lock"): Linux's immutable and append-only flags (`chattr +i`/`+a`)
//! and S3 object lock (retention, legal hold). The checks other operations call, and the
//! calls that set protections.
//!
//! As in Linux, a frozen inode (immutable, or locked by object lock) refuses every change
//! with EPERM, even to root: its data, its attributes, its extended attributes, a new
//! or removed name, and entries in it when it is a directory. An append-only inode takes
//! appended data and new entries only. Root may clear the chattr flags; nobody may lift a
//! compliance retention before it ends. The S3 gateway's own identity
//! ([`Ctx::version_keeper`]) may move the names of a locked version (into its version
//! store and back) as long as one always remains.

use strata_types::{Attr, Errno, FileType, Ino, Nanos, Protection, Retention, RetentionMode};

use super::access::check_owner;
use super::feed::FEED_VERSION;
use super::{Ctx, Meta, must_get_inode, now_ns, put_inode};
use crate::codec::{Inode, InodeCore};
use crate::error::{Result, posix};
use crate::format::{Format, PROTECTION_VERSION};
use crate::keys;
use crate::kv::Txn;

/// EPERM when nothing about `core` may change now (immutable or locked).
pub(crate) fn check_unfrozen(core: &InodeCore) -> Result<()> {
    if !core.protection.is_none() && core.protection.frozen_at(now_ns()) {
        return posix(Errno::EPERM);
    }
    Ok(())
}

/// EPERM when `core` may take no change but appended data (frozen or append-only).
pub(crate) fn check_changeable(core: &InodeCore) -> Result<()> {
    if !core.protection.is_none() && core.protection.pinned_at(now_ns()) {
        return posix(Errno::EPERM);
    }
    Ok(())
}

/// EPERM unless the name of `child` (with `nlink` names) in `dir` may go: by unlink,
/// rmdir, a rename moving it (`moving`) or a rename replacing it. Linux's `may_delete`:
/// not from an append-only directory, not a protected inode's name. A locked version's
/// name may go for the gateway's own identity while the inode keeps one.
pub(crate) fn check_name_may_go(
    ctx: &Ctx,
    dir: &InodeCore,
    child: &InodeCore,
    nlink: u32,
    moving: bool,
) -> Result<()> {
    if dir.protection.append_only {
        return posix(Errno::EPERM);
    }
    let p = &child.protection;
    if p.is_none() || !p.pinned_at(now_ns()) {
        return Ok(());
    }
    let only_locked = !p.immutable && !p.append_only;
    if only_locked && ctx.version_keeper && (moving || nlink > 1) {
        return Ok(());
    }
    posix(Errno::EPERM)
}

/// EPERM unless `child` may get another name (Linux's `vfs_link`); the gateway's own
/// identity may link a locked version into its version store.
pub(crate) fn check_may_link(ctx: &Ctx, child: &InodeCore) -> Result<()> {
    let p = &child.protection;
    if p.is_none() || !p.pinned_at(now_ns()) {
        return Ok(());
    }
    if !p.immutable && !p.append_only && ctx.version_keeper {
        return Ok(());
    }
    posix(Errno::EPERM)
}

/// EPERM when an open would write `core` other than by appending: `writes` for a write
/// open, with `O_APPEND` and `O_TRUNC` as given.
pub(crate) fn check_open(
    core: &InodeCore,
    writes: bool,
    (append, trunc): (bool, bool),
) -> Result<()> {
    if !writes && !trunc {
        return Ok(());
    }
    check_unfrozen(core)?;
    if core.protection.append_only && (!append || trunc) {
        return posix(Errno::EPERM);
    }
    Ok(())
}

/// Whether `new` weakens the retention `old` still in force at `now`: it ends sooner or
/// is gone (a mode change to compliance only strengthens it).
fn weakens(old: &Retention, new: Option<&Retention>, now: Nanos) -> bool {
    if old.until <= now {
        return false;
    }
    match new {
        None => true,
        Some(new) => {
            new.until < old.until || new.mode != old.mode && old.mode == RetentionMode::Compliance
        }
    }
}

/// EPERM unless the retention may change from `old` to `new` now: a compliance one in
/// force is never shortened, removed or turned to governance; a governance one is
/// weakened only with `bypass_governance`.
pub(crate) fn check_retention_change(
    old: Option<&Retention>,
    new: Option<&Retention>,
    bypass_governance: bool,
) -> Result<()> {
    let Some(old) = old else {
        return Ok(());
    };
    if !weakens(old, new, now_ns()) {
        return Ok(());
    }
    match old.mode {
        RetentionMode::Governance if bypass_governance => Ok(()),
        _ => posix(Errno::EPERM),
    }
}

/// What a protection change does.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// `FS_IOC_SETFLAGS`: immutable, append-only.
    Flags { immutable: bool, append_only: bool },
    /// S3 retention, and whether a governance one may be weakened.
    Retention {
        retention: Option<Retention>,
        bypass_governance: bool,
    },
    /// S3 legal hold on or off.
    LegalHold(bool),
}

impl Meta {
    /// `FS_IOC_SETFLAGS`: make `ino` immutable and/or append-only, or neither. The owner
    /// or root may call it; changing either flag takes root (Linux's
    /// `CAP_LINUX_IMMUTABLE`).
    pub async fn set_inode_flags(
        &self,
        ctx: &Ctx,
        ino: Ino,
        immutable: bool,
        append_only: bool,
    ) -> Result<Attr> {
        let change = Change::Flags {
            immutable,
            append_only,
        };
        self.change_protection(ctx, ino, change).await
    }

    /// S3 `PutObjectRetention` on the file `ino`: set, extend, shorten or remove its
    /// retention. EPERM for a change a retention in force forbids (see
    /// [`check_retention_change`]).
    pub async fn set_retention(
        &self,
        ctx: &Ctx,
        ino: Ino,
        retention: Option<Retention>,
        bypass_governance: bool,
    ) -> Result<Attr> {
        let change = Change::Retention {
            retention,
            bypass_governance,
        };
        self.change_protection(ctx, ino, change).await
    }

    /// S3 `PutObjectLegalHold` on the file `ino`.
    pub async fn set_legal_hold(&self, ctx: &Ctx, ino: Ino, on: bool) -> Result<Attr> {
        self.change_protection(ctx, ino, Change::LegalHold(on))
            .await
    }

    async fn change_protection(&self, ctx: &Ctx, ino: Ino, change: Change) -> Result<Attr> {
        let bump = self
            .current_format()
            .is_ok_and(|f| f.meta_version < PROTECTION_VERSION);
        let (attr, format) = self
            .write_txn(|tx| {
                Box::pin(async move {
                    let mut inode = must_get_inode(tx, ino).await?;
                    check_owner(ctx, &inode.core)?;
                    inode.core.protection = protected(ctx, &inode, change)?;
                    inode.fields.ctime = now_ns().max(inode.fields.ctime);
                    put_inode(tx, &inode);
                    let format = match bump {
                        true => raise_format(tx).await?,
                        false => None,
                    };
                    Ok((inode.attr(), format))
                })
            })
            .await?;
        if let Some(format) = format {
            self.set_format(format);
        }
        Ok(attr)
    }
}

/// `inode`'s protection after `change` by `ctx`, or EPERM/EINVAL when refused.
fn protected(ctx: &Ctx, inode: &Inode, change: Change) -> Result<Protection> {
    let mut p = inode.core.protection;
    match change {
        Change::Flags {
            immutable,
            append_only,
        } => {
            let differs = immutable != p.immutable || append_only != p.append_only;
            if differs && !ctx.is_root() {
                return posix(Errno::EPERM);
            }
            p.immutable = immutable;
            p.append_only = append_only;
        }
        Change::Retention {
            retention,
            bypass_governance,
        } => {
            if inode.core.kind != FileType::Regular {
                return posix(Errno::EINVAL);
            }
            check_retention_change(p.retention.as_ref(), retention.as_ref(), bypass_governance)?;
            p.retention = retention;
        }
        Change::LegalHold(on) => {
            if inode.core.kind != FileType::Regular {
                return posix(Errno::EINVAL);
            }
            p.legal_hold = on;
        }
    }
    Ok(p)
}

/// Raise the stored format record to [`PROTECTION_VERSION`] (older clients, which would
/// not enforce protections, then refuse the volume); the new record, if it changed.
async fn raise_format(tx: &mut Txn<'_>) -> Result<Option<Format>> {
    let key = keys::setting("format");
    let Some(raw) = tx.get(&key).await? else {
        return Ok(None);
    };
    let format = Format::decode(&key, &raw)?;
    if format.meta_version >= PROTECTION_VERSION {
        return Ok(Some(format));
    }
    // Raising a volume older than the change feed (meta v4) would make newer clients
    // trust promises its inodes never kept (the xattr flag, announcements).
    if format.meta_version < FEED_VERSION {
        return posix(Errno::EOPNOTSUPP);
    }
    let format = format.with_protection(true);
    tx.put(key, format.encode()?);
    Ok(Some(format))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retention(mode: RetentionMode, until: Nanos) -> Retention {
        Retention { mode, until }
    }

    #[test]
    fn retentions_in_force_are_never_weakened_without_leave() {
        let far = now_ns() + 3_600_000_000_000;
        let gov = retention(RetentionMode::Governance, far);
        let comp = retention(RetentionMode::Compliance, far);
        let longer = |r: Retention| Retention {
            until: r.until + 1,
            ..r
        };
        let shorter = |r: Retention| Retention {
            until: r.until - 1,
            ..r
        };
        // Extending is always allowed; so is turning governance into compliance.
        for r in [gov, comp] {
            check_retention_change(Some(&r), Some(&longer(r)), false).unwrap();
        }
        check_retention_change(Some(&gov), Some(&comp), false).unwrap();
        // Governance: shortened or removed only with the bypass.
        for new in [None, Some(shorter(gov))] {
            assert!(check_retention_change(Some(&gov), new.as_ref(), false).is_err());
            check_retention_change(Some(&gov), new.as_ref(), true).unwrap();
        }
        // Compliance: never, not even with the bypass, nor turned to governance.
        let to_gov = retention(RetentionMode::Governance, far + 1);
        for new in [None, Some(shorter(comp)), Some(to_gov)] {
            assert!(check_retention_change(Some(&comp), new.as_ref(), true).is_err());
        }
        // An ended retention may go.
        let ended = retention(RetentionMode::Compliance, 1);
        check_retention_change(Some(&ended), None, false).unwrap();
    }
}
