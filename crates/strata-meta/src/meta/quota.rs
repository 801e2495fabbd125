//! Quotas on directories (their whole subtree), users and groups: bytes and inodes.
//!
//! A quota record (`Q kind id`, four i64 slots: limit bytes, limit inodes, used bytes,
//! used inodes; a limit of 0 means none) is kept current by commutative field updates:
//! - directory quotas inside the transaction of every change, through
//!   [`Meta::add_dir_usage`], which charges each quota directory above the changed one;
//! - user and group quotas after commit, batched with the volume counters
//!   ([`Meta::flush_usage`]).
//!
//! Limits are enforced from a cache of all quotas refreshed every few seconds plus this
//! client's own changes since, so concurrent writers on several clients may overshoot a
//! limit by what they write within one refresh. A directory moved between different quota
//! trees gets EXDEV (as XFS project quotas do); `mv` then copies. `quota check` recounts
//! and `--repair` fixes the records.

use std::collections::HashMap;

use strata_types::{Errno, FileType, Ino};

use super::{Meta, space_of};
use crate::codec::{self, InodeCore, InodeFields};
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::{FieldOp, FieldUpdate, Txn};

/// Slots of a quota record.
mod slot {
    pub const MAX_SPACE: usize = 0;
    pub const MAX_INODES: usize = 1;
    pub const USED_SPACE: usize = 2;
    pub const USED_INODES: usize = 3;
    pub const COUNT: usize = 4;
}

/// What a quota limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaTarget {
    Dir(Ino),
    User(u32),
    Group(u32),
}

impl QuotaTarget {
    fn key(self) -> Vec<u8> {
        match self {
            QuotaTarget::Dir(ino) => keys::quota(b'd', ino.0),
            QuotaTarget::User(uid) => keys::quota(b'u', u64::from(uid)),
            QuotaTarget::Group(gid) => keys::quota(b'g', u64::from(gid)),
        }
    }

    fn from_key(key: &[u8]) -> Option<QuotaTarget> {
        let id = keys::be_u64(key, 2)?;
        match key.get(1)? {
            b'd' => Some(QuotaTarget::Dir(Ino(id))),
            b'u' => u32::try_from(id).ok().map(QuotaTarget::User),
            b'g' => u32::try_from(id).ok().map(QuotaTarget::Group),
            _ => None,
        }
    }
}

/// Limits (0 = none) and usage of one quota.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    pub max_space: i64,
    pub max_inodes: i64,
    pub used_space: i64,
    pub used_inodes: i64,
}

impl Quota {
    fn decode(key: &[u8], value: &[u8]) -> Result<Quota> {
        let s = codec::decode_slots(key, value, slot::COUNT)?;
        Ok(Quota {
            max_space: s[slot::MAX_SPACE],
            max_inodes: s[slot::MAX_INODES],
            used_space: s[slot::USED_SPACE],
            used_inodes: s[slot::USED_INODES],
        })
    }

    fn encode(&self) -> Vec<u8> {
        codec::encode_slots(&[
            self.max_space,
            self.max_inodes,
            self.used_space,
            self.used_inodes,
        ])
    }

    /// Would adding `space` bytes and `inodes` inodes pass a limit?
    fn exceeded_by(&self, space: i64, inodes: i64) -> bool {
        let over = |max: i64, used: i64, add: i64| max > 0 && add > 0 && used + add > max;
        over(self.max_space, self.used_space, space)
            || over(self.max_inodes, self.used_inodes, inodes)
    }
}

/// This client's view of the quotas.
#[derive(Debug, Default)]
pub(crate) struct QuotaCache {
    quotas: HashMap<QuotaTarget, Quota>,
    /// Parents of directories seen while looking for quota directories.
    parents: HashMap<Ino, Ino>,
    /// User and group usage changes not yet written.
    unflushed: HashMap<QuotaTarget, (i64, i64)>,
    /// Owners and parent of files open here, for checks at write time.
    open: HashMap<Ino, (Ino, u32, u32)>,
}

impl QuotaCache {
    fn has_dir_quotas(&self) -> bool {
        self.quotas.keys().any(|t| matches!(t, QuotaTarget::Dir(_)))
    }

    /// Count a change locally (so limits hold between refreshes).
    fn charge(&mut self, target: QuotaTarget, space: i64, inodes: i64) {
        if let Some(q) = self.quotas.get_mut(&target) {
            q.used_space += space;
            q.used_inodes += inodes;
        }
    }
}

impl Meta {
    fn with_quotas<T>(&self, f: impl FnOnce(&mut QuotaCache) -> T) -> T {
        f(&mut self.quota_cache.lock())
    }

    /// True when any quota is set (as of the last refresh).
    pub fn has_quotas(&self) -> bool {
        self.with_quotas(|c| !c.quotas.is_empty())
    }

    /// Re-read every quota. Called every few seconds by a mounted client. Cached
    /// directory parents are kept unless the set of quota directories changed: a
    /// directory can only move (rename) where the same quota directories apply (else
    /// EXDEV), so a parent another client changed still leads to the same quotas.
    pub async fn refresh_quotas(&self) -> Result<()> {
        let quotas: HashMap<QuotaTarget, Quota> = self.list_quotas().await?.into_iter().collect();
        self.with_quotas(|c| {
            let dirs = |q: &HashMap<QuotaTarget, Quota>| {
                let mut d: Vec<QuotaTarget> = q
                    .keys()
                    .filter(|t| matches!(t, QuotaTarget::Dir(_)))
                    .copied()
                    .collect();
                d.sort();
                d
            };
            if dirs(&quotas) != dirs(&c.quotas) {
                c.parents.clear();
            }
            c.quotas = quotas;
        });
        Ok(())
    }

    /// Remember that directory `dir` now lives in `parent` (after this client's rename).
    pub(crate) fn note_dir_parent(&self, dir: Ino, parent: Ino) {
        self.with_quotas(|c| {
            if c.parents.contains_key(&dir) {
                c.parents.insert(dir, parent);
            }
        });
    }

    /// Every quota, in key order.
    pub async fn list_quotas(&self) -> Result<Vec<(QuotaTarget, Quota)>> {
        self.txn(|tx| {
            Box::pin(async move {
                let rows = tx.scan(b"Q", b"R", usize::MAX, false).await?;
                rows.iter()
                    .map(|(k, v)| {
                        let target = QuotaTarget::from_key(k)
                            .ok_or_else(|| MetaError::corrupt(k, "malformed quota key"))?;
                        Ok((target, Quota::decode(k, v)?))
                    })
                    .collect()
            })
        })
        .await
    }

    /// One quota, if set.
    pub async fn get_quota(&self, target: QuotaTarget) -> Result<Option<Quota>> {
        self.txn(|tx| {
            Box::pin(async move {
                let key = target.key();
                tx.get(&key)
                    .await?
                    .map(|v| Quota::decode(&key, &v))
                    .transpose()
            })
        })
        .await
    }

    /// Set (or change) a quota's limits; `None` keeps a limit as it is (0 for a new quota).
    /// A new quota starts with its usage counted from the volume.
    pub async fn set_quota(
        &self,
        target: QuotaTarget,
        max_space: Option<i64>,
        max_inodes: Option<i64>,
    ) -> Result<Quota> {
        if let QuotaTarget::Dir(ino) = target {
            let attr = self.getattr(ino).await?;
            if attr.kind != FileType::Directory {
                return posix(Errno::ENOTDIR);
            }
        }
        let counted = match self.get_quota(target).await? {
            Some(_) => None,
            None => Some(self.count_usage(target).await?),
        };
        let quota = self
            .txn(|tx| {
                Box::pin(async move {
                    let key = target.key();
                    let mut q = match tx.get(&key).await? {
                        Some(v) => Quota::decode(&key, &v)?,
                        None => Quota::default(),
                    };
                    if let Some((space, inodes)) = counted {
                        (q.used_space, q.used_inodes) = (space, inodes);
                    }
                    q.max_space = max_space.unwrap_or(q.max_space);
                    q.max_inodes = max_inodes.unwrap_or(q.max_inodes);
                    tx.put(key, q.encode());
                    Ok(q)
                })
            })
            .await?;
        self.with_quotas(|c| c.quotas.insert(target, quota));
        Ok(quota)
    }

    /// Remove a quota; false when there was none.
    pub async fn delete_quota(&self, target: QuotaTarget) -> Result<bool> {
        let existed = self
            .txn(|tx| {
                Box::pin(async move {
                    let key = target.key();
                    let existed = tx.get(&key).await?.is_some();
                    tx.delete(key);
                    Ok(existed)
                })
            })
            .await?;
        self.with_quotas(|c| c.quotas.remove(&target));
        Ok(existed)
    }

    /// Recount every quota's usage: (target, recorded, counted). With `repair`, records
    /// that differ are corrected.
    pub async fn check_quotas(
        &self,
        repair: bool,
    ) -> Result<Vec<(QuotaTarget, Quota, (i64, i64))>> {
        let mut out = Vec::new();
        for (target, recorded) in self.list_quotas().await? {
            let counted = self.count_usage(target).await?;
            if repair && counted != (recorded.used_space, recorded.used_inodes) {
                self.set_used(target, counted).await?;
            }
            out.push((target, recorded, counted));
        }
        Ok(out)
    }

    async fn set_used(&self, target: QuotaTarget, (space, inodes): (i64, i64)) -> Result<()> {
        self.txn(|tx| {
            Box::pin(async move {
                let ops = [
                    FieldOp {
                        slot: slot::USED_SPACE,
                        update: FieldUpdate::Set(space),
                    },
                    FieldOp {
                        slot: slot::USED_INODES,
                        update: FieldUpdate::Set(inodes),
                    },
                ];
                tx.update_fields(target.key(), &ops)?;
                Ok(())
            })
        })
        .await
    }

    /// What a quota's usage is now: a directory's subtree from usage records, a user's or
    /// group's inodes from a scan of all inodes.
    async fn count_usage(&self, target: QuotaTarget) -> Result<(i64, i64)> {
        match target {
            QuotaTarget::Dir(ino) => {
                let u = self.subtree_usage(ino).await?;
                Ok((u.bytes, u.files + u.dirs))
            }
            QuotaTarget::User(_) | QuotaTarget::Group(_) => self.count_owner_usage(target).await,
        }
    }

    async fn count_owner_usage(&self, target: QuotaTarget) -> Result<(i64, i64)> {
        let mut total = (0, 0);
        let mut start = b"A".to_vec();
        // The core record of the inode whose field record comes next (I sorts before T).
        let mut core: Option<(Vec<u8>, InodeCore)> = None;
        loop {
            let rows = self
                .txn(|tx| {
                    let start = start.clone();
                    Box::pin(async move { Ok(tx.scan(&start, b"B", 5000, false).await?) })
                })
                .await?;
            for (key, value) in &rows {
                match key.get(9) {
                    Some(b'I') if key.len() == 10 => {
                        core = Some((key[..9].to_vec(), InodeCore::decode(key, value)?));
                    }
                    Some(b'T') if key.len() == 10 => {
                        let Some((prefix, c)) = core.take() else {
                            continue;
                        };
                        let ino = Ino(keys::be_u64(key, 1).unwrap_or(0));
                        let owned = match target {
                            QuotaTarget::User(uid) => c.uid == uid,
                            QuotaTarget::Group(gid) => c.gid == gid,
                            QuotaTarget::Dir(_) => false,
                        };
                        // The root, the trash and its hour directories are nobody's.
                        let counted =
                            !ino.is_reserved() && ino != Ino::ROOT && c.parent != Ino::TRASH;
                        if owned && counted && key.starts_with(&prefix) {
                            let fields = InodeFields::decode(key, value)?;
                            total.0 += space_of(c.kind, fields.length);
                            total.1 += 1;
                        }
                    }
                    _ => {}
                }
            }
            match rows.last() {
                Some((k, _)) if rows.len() == 5000 => start = [&k[..], &[0u8][..]].concat(),
                _ => return Ok(total),
            }
        }
    }

    /// The quota directories at or above `dir` (none for the trash), reading parents not
    /// yet cached through `tx`.
    pub(crate) async fn quota_dirs(&self, tx: &mut Txn<'_>, dir: Ino) -> Result<Vec<Ino>> {
        if !self.with_quotas(|c| c.has_dir_quotas()) {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        let mut cur = dir;
        for _ in 0..4096 {
            if cur == Ino::TRASH {
                return Ok(Vec::new());
            }
            let (has, parent) = self.with_quotas(|c| {
                (
                    c.quotas.contains_key(&QuotaTarget::Dir(cur)),
                    c.parents.get(&cur).copied(),
                )
            });
            if has {
                found.push(cur);
            }
            if cur == Ino::ROOT {
                break;
            }
            let parent = match parent {
                Some(p) => p,
                None => {
                    let key = keys::inode_core(cur);
                    let Some(v) = tx.get(&key).await? else { break };
                    let p = InodeCore::decode(&key, &v)?.parent;
                    self.with_quotas(|c| c.parents.insert(cur, p));
                    p
                }
            };
            cur = parent;
        }
        Ok(found)
    }

    /// EDQUOT if adding `space`/`inodes` under `dir` (and to the owner) passes a limit.
    pub(crate) async fn check_quota(
        &self,
        tx: &mut Txn<'_>,
        dir: Option<Ino>,
        owner: Option<(u32, u32)>,
        space: i64,
        inodes: i64,
    ) -> Result<()> {
        if space <= 0 && inodes <= 0 {
            return Ok(());
        }
        if self.with_quotas(|c| c.quotas.is_empty()) {
            return Ok(());
        }
        let dirs = match dir {
            Some(d) => self.quota_dirs(tx, d).await?,
            None => Vec::new(),
        };
        let owners = owner
            .map(|(u, g)| vec![QuotaTarget::User(u), QuotaTarget::Group(g)])
            .unwrap_or_default();
        let over = self.with_quotas(|c| {
            let targets = dirs.iter().map(|d| QuotaTarget::Dir(*d)).chain(owners);
            targets.into_iter().any(|t| {
                c.quotas
                    .get(&t)
                    .is_some_and(|q| q.exceeded_by(space, inodes))
            })
        });
        if over { posix(Errno::EDQUOT) } else { Ok(()) }
    }

    /// Rules for moving `src` from `from` to `to` (different directories): a directory
    /// (or an exchanged one) may not change quota trees (EXDEV); a file moving into quota
    /// directories it was not under must fit them (EDQUOT).
    pub(crate) async fn check_rename_quota(
        &self,
        tx: &mut Txn<'_>,
        (from, to): (Ino, Ino),
        src: &super::codec::Inode,
        dst_entry: Option<(FileType, Ino)>,
        flags: super::RenameFlags,
    ) -> Result<()> {
        let before = self.quota_dirs(tx, from).await?;
        let after = self.quota_dirs(tx, to).await?;
        if before == after {
            return Ok(());
        }
        let exchanged_dir = flags.exchange && matches!(dst_entry, Some((FileType::Directory, _)));
        if src.core.kind == FileType::Directory || exchanged_dir {
            return posix(Errno::EXDEV);
        }
        let space = space_of(src.core.kind, src.fields.length);
        let over = self.with_quotas(|c| {
            after.iter().filter(|d| !before.contains(d)).any(|d| {
                c.quotas
                    .get(&QuotaTarget::Dir(*d))
                    .is_some_and(|q| q.exceeded_by(space, 1))
            })
        });
        if over { posix(Errno::EDQUOT) } else { Ok(()) }
    }

    /// Charge a committed change to the quota directories above `dir` in the local cache.
    pub(crate) fn charge_dirs_locally(&self, dirs: &[Ino], space: i64, inodes: i64) {
        if dirs.is_empty() {
            return;
        }
        self.with_quotas(|c| {
            for d in dirs {
                c.charge(QuotaTarget::Dir(*d), space, inodes);
            }
        });
    }

    /// Record a committed change of what `owner` (uid, gid) uses; written by
    /// [`Meta::flush_usage`].
    pub(crate) fn add_owner_usage(&self, owner: (u32, u32), space: i64, inodes: i64) {
        if space == 0 && inodes == 0 {
            return;
        }
        self.with_quotas(|c| {
            for t in [QuotaTarget::User(owner.0), QuotaTarget::Group(owner.1)] {
                if c.quotas.contains_key(&t) {
                    c.charge(t, space, inodes);
                    let e = c.unflushed.entry(t).or_default();
                    e.0 += space;
                    e.1 += inodes;
                }
            }
        });
    }

    /// Owner usage changes not yet written (taken).
    pub(crate) fn take_unflushed_quota(&self) -> Vec<(QuotaTarget, (i64, i64))> {
        self.with_quotas(|c| c.unflushed.drain().collect())
    }

    /// Put back changes whose write failed.
    pub(crate) fn restore_unflushed_quota(&self, changes: &[(QuotaTarget, (i64, i64))]) {
        self.with_quotas(|c| {
            for (t, (s, i)) in changes {
                let e = c.unflushed.entry(*t).or_default();
                e.0 += s;
                e.1 += i;
            }
        });
    }

    /// Remember where an open file is charged, for checks at write time.
    pub(crate) fn note_open_owner(&self, ino: Ino, parent: Ino, uid: u32, gid: u32) {
        self.with_quotas(|c| c.open.insert(ino, (parent, uid, gid)));
    }

    pub(crate) fn forget_open_owner(&self, ino: Ino) {
        self.with_quotas(|c| c.open.remove(&ino));
    }

    /// EDQUOT when growing open file `ino` by `grow` bytes would pass a quota, as far as
    /// this client can tell without a round trip (cached parents only). Writes are checked
    /// again when they commit.
    pub fn check_write_quota(&self, ino: Ino, grow: u64) -> Result<()> {
        let grow = i64::try_from(grow).unwrap_or(i64::MAX);
        let over = self.with_quotas(|c| {
            if c.quotas.is_empty() {
                return false;
            }
            let Some(&(parent, uid, gid)) = c.open.get(&ino) else {
                return false;
            };
            let mut targets = vec![QuotaTarget::User(uid), QuotaTarget::Group(gid)];
            let mut cur = parent;
            for _ in 0..4096 {
                targets.push(QuotaTarget::Dir(cur));
                match c.parents.get(&cur) {
                    Some(p) if cur != Ino::ROOT => cur = *p,
                    _ => break,
                }
            }
            targets
                .iter()
                .any(|t| c.quotas.get(t).is_some_and(|q| q.exceeded_by(grow, 0)))
        });
        if over { posix(Errno::EDQUOT) } else { Ok(()) }
    }
}

/// Add to the used slots of a quota record (commutative; no read).
pub(crate) fn charge_quota_record(
    tx: &mut Txn<'_>,
    target: QuotaTarget,
    space: i64,
    inodes: i64,
) -> Result<()> {
    let ops = [
        FieldOp {
            slot: slot::USED_SPACE,
            update: FieldUpdate::Add(space),
        },
        FieldOp {
            slot: slot::USED_INODES,
            update: FieldUpdate::Add(inodes),
        },
    ];
    tx.update_fields(target.key(), &ops)?;
    Ok(())
}
