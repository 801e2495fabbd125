//! What happens when an inode loses a name: trash, sustained (open but unlinked) or
//! deleted; and the deletion queues that later free file chunks and slice data.

use strata_types::{Errno, FileType, Ino, Nanos, Slice};

use super::access::{MAY_EXEC, MAY_WRITE, check_access, check_sticky};
use super::namespace::{add_link_parent, get_entry, in_trash};
use super::protect::check_name_may_go;
use super::remove::TrashUse;
use super::{Ctx, Dir, Meta, get_dir, get_inode, must_get_inode, now_ns, put_inode, space_of};
use crate::codec::{self, Inode, usage_slot};
use crate::error::{MetaError, Result, posix};
use crate::keys;
use crate::kv::{Key, Txn, prefix_end};

/// The fate of an inode that lost a name, reported out of the transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unlinked {
    /// Still linked, or moved to the trash: no usage change.
    Nothing,
    /// Kept while open here (link count 0): deleted at this client's last close.
    Sustained(Ino),
    /// Deleted: the volume's (and the owner's) usage drops by this much.
    Deleted { space: i64, owner: (u32, u32) },
}

/// A slice whose blocks await deletion from the object store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceDeletion {
    pub id: u64,
    pub size: u32,
    /// When its last reference went away (ns).
    pub queued_at: Nanos,
}

/// Chunks deleted per transaction when freeing a file's data.
const CHUNKS_PER_TXN: usize = 64;

impl Meta {
    /// The trash hour a removal goes to, if any.
    pub(crate) async fn trash_for(&self, trash: TrashUse) -> Result<Option<Ino>> {
        match trash {
            TrashUse::Volume => self.trash_dir().await,
            TrashUse::Never => Ok(None),
        }
    }

    /// The trash directory for entries removed now (one per hour, `YYYY-MM-DD-HH`, UTC),
    /// created on first use; `None` when the volume keeps no trash.
    pub(crate) async fn trash_dir(&self) -> Result<Option<Ino>> {
        if self.current_format()?.trash_days == 0 {
            return Ok(None);
        }
        let name = hour_name(now_ns());
        let mut cached = self.trash_hour.lock().await;
        if let Some((hour, ino)) = cached.as_ref()
            && *hour == name
        {
            return Ok(Some(*ino));
        }
        let new_ino = self.next_inode().await?;
        let name_ref = name.as_bytes();
        let ino = self
            .txn(|tx| {
                Box::pin(async move {
                    if let Some((_, ino)) = get_entry(tx, Ino::TRASH, name_ref).await? {
                        return Ok(ino);
                    }
                    let now = now_ns();
                    let dir = Inode {
                        ino: new_ino,
                        core: codec::InodeCore {
                            kind: FileType::Directory,
                            mode: 0o555,
                            uid: 0,
                            gid: 0,
                            rdev: 0,
                            parent: Ino::TRASH,
                            linkable: false,
                            xattrs: false,
                            access_acl: 0,
                            default_acl: 0,
                            protection: strata_types::Protection::default(),
                        },
                        fields: codec::InodeFields {
                            atime: now,
                            mtime: now,
                            ctime: now,
                            nlink: 2,
                            length: 4096,
                        },
                    };
                    put_inode(tx, &dir);
                    tx.put(
                        keys::dir_usage(new_ino),
                        codec::encode_slots(&[0; usage_slot::COUNT]),
                    );
                    tx.put(
                        keys::dentry(Ino::TRASH, name_ref),
                        codec::encode_dentry(FileType::Directory, new_ino),
                    );
                    self.touch_dir(tx, Ino::TRASH, now, 1, 4096, 1).await?;
                    Ok(new_ino)
                })
            })
            .await?;
        *cached = Some((name, ino));
        Ok(Some(ino))
    }

    /// `unlink` of the non-directory entries `names` of `parent` in one transaction (one
    /// name for `unlink`, a batch for `rmr`): the directory's checks once, then each
    /// entry's. With the inode each name was listed with, the records are read in one
    /// engine call first. Entries already gone are skipped; ENOENT when none was there.
    pub(crate) async fn unlink_names(
        &self,
        ctx: &Ctx,
        parent: Ino,
        names: &[(&[u8], Option<Ino>)],
        trash: TrashUse,
    ) -> Result<()> {
        let trash = self.trash_for(trash).await?;
        let unlinked = self
            .write_txn(|tx| {
                Box::pin(async move {
                    let dir = get_dir(tx, parent).await?;
                    check_access(&self.acls, tx, ctx, &dir.core, MAY_WRITE | MAY_EXEC).await?;
                    let listed: Vec<Key> = names
                        .iter()
                        .filter_map(|(name, ino)| Some((name, (*ino)?)))
                        .flat_map(|(name, ino)| {
                            [
                                keys::dentry(parent, name),
                                keys::inode_core(ino),
                                keys::inode_fields(ino),
                            ]
                        })
                        .collect();
                    if !listed.is_empty() {
                        tx.get_many(&listed).await?;
                    }
                    let now = now_ns();
                    let mut unlinked = Vec::with_capacity(names.len());
                    let mut space = 0;
                    for (name, _) in names {
                        // Each entry read again, not taken from the first read: an earlier
                        // one may have been another name of its inode.
                        if let Some((taken, fate)) =
                            self.unlink_entry(tx, ctx, &dir, name, trash, now).await?
                        {
                            space += taken;
                            unlinked.push(fate);
                        }
                    }
                    if unlinked.is_empty() {
                        return posix(Errno::ENOENT);
                    }
                    let entries = i64::try_from(unlinked.len()).unwrap_or(i64::MAX);
                    self.touch_dir(tx, parent, now, 0, -space, -entries).await?;
                    Ok(unlinked)
                })
            })
            .await?;
        for fate in unlinked {
            self.after_unlink(fate);
        }
        Ok(())
    }

    /// `unlink`'s work on the non-directory entry `name` of `dir` once the directory's
    /// own checks passed: the sticky check, the entry deleted, and its inode's fate (the
    /// caller updates `dir`'s counters). The space the entry took and that fate, or
    /// `None` when there is no such entry.
    async fn unlink_entry(
        &self,
        tx: &mut Txn<'_>,
        ctx: &Ctx,
        dir: &Dir,
        name: &[u8],
        trash: Option<Ino>,
        now: Nanos,
    ) -> Result<Option<(i64, Unlinked)>> {
        let Some((kind, ino)) = get_entry(tx, dir.ino, name).await? else {
            return Ok(None);
        };
        if kind == FileType::Directory {
            return posix(Errno::EISDIR);
        }
        let mut child = must_get_inode(tx, ino).await?;
        check_sticky(ctx, &dir.core, &child.core)?;
        check_name_may_go(ctx, &dir.core, &child.core, child.fields.nlink, false)?;
        tx.delete(keys::dentry(dir.ino, name));
        let space = space_of(child.core.kind, child.fields.length);
        let unlinked = self
            .drop_name(tx, dir, name, &mut child, trash, now)
            .await?;
        Ok(Some((space, unlinked)))
    }

    /// Decide the fate of `child`, whose entry `name` in `dir` was just removed (the caller
    /// already deleted the entry and updated `dir`).
    pub(crate) async fn drop_name(
        &self,
        tx: &mut Txn<'_>,
        dir: &Dir,
        name: &[u8],
        child: &mut Inode,
        trash: Option<Ino>,
        now: Nanos,
    ) -> Result<Unlinked> {
        let trash = trash.filter(|_| !in_trash(dir));
        child.fields.ctime = now;
        if child.core.kind == FileType::Directory {
            if let Some(hour) = trash {
                return self.move_to_trash(tx, dir, name, child, hour, now).await;
            }
            if self.is_open(child.ino) {
                // Open here (a process holds it): it stays, with no links, until its last
                // close, so fstat on it still works as on ext4.
                child.fields.nlink = 0;
                return Ok(self.sustain(tx, child));
            }
            delete_inode_records(tx, child, self.keeps_xattr_flags()).await?;
            tx.delete(keys::dir_usage(child.ino));
            return Ok(Unlinked::Deleted {
                space: 4096,
                owner: (child.core.uid, child.core.gid),
            });
        }
        if child.core.parent == Ino(0) {
            add_link_parent(tx, child.ino, dir.ino, -1).await?;
        }
        child.fields.nlink = child.fields.nlink.saturating_sub(1);
        if child.fields.nlink > 0 {
            put_inode(tx, child);
            return Ok(Unlinked::Nothing);
        }
        if let (Some(hour), FileType::Regular) = (trash, child.core.kind) {
            child.fields.nlink = 1;
            return self.move_to_trash(tx, dir, name, child, hour, now).await;
        }
        if self.is_open(child.ino) {
            return Ok(self.sustain(tx, child));
        }
        delete_inode_records(tx, child, self.keeps_xattr_flags()).await?;
        if child.core.kind == FileType::Regular && child.fields.length > 0 {
            queue_file_deletion(tx, child.ino, child.fields.length, now);
        }
        Ok(Unlinked::Deleted {
            space: space_of(child.core.kind, child.fields.length),
            owner: (child.core.uid, child.core.gid),
        })
    }

    /// Keep an inode that lost its last name while this client has it open: deleted at
    /// its last close, or by whoever cleans this session if the client dies.
    fn sustain(&self, tx: &mut Txn<'_>, child: &Inode) -> Unlinked {
        put_inode(tx, child);
        let sid = self.session_id();
        if sid != 0 {
            tx.put(keys::sustained(sid, child.ino), Vec::new());
        }
        Unlinked::Sustained(child.ino)
    }

    async fn move_to_trash(
        &self,
        tx: &mut Txn<'_>,
        dir: &Dir,
        name: &[u8],
        child: &mut Inode,
        hour: Ino,
        now: Nanos,
    ) -> Result<Unlinked> {
        // The hour directory must still exist (it may have been purged meanwhile).
        get_dir(tx, hour).await?;
        let trash_name = trash_entry_name(dir.ino, child.ino, name);
        child.core.parent = hour;
        put_inode(tx, child);
        tx.put(
            keys::dentry(hour, &trash_name),
            codec::encode_dentry(child.core.kind, child.ino),
        );
        let is_dir = i64::from(child.core.kind == FileType::Directory);
        self.touch_dir(
            tx,
            hour,
            now,
            is_dir,
            space_of(child.core.kind, child.fields.length),
            1,
        )
        .await?;
        Ok(Unlinked::Nothing)
    }

    /// Apply the usage change of an unlink once its transaction committed.
    pub(crate) fn after_unlink(&self, unlinked: Unlinked) {
        match unlinked {
            Unlinked::Deleted { space, owner } => {
                self.add_usage(-space, -1);
                self.add_owner_usage(owner, -space, -1);
            }
            Unlinked::Sustained(ino) => self.note_sustained(ino),
            Unlinked::Nothing => {}
        }
    }

    /// Delete an unlinked inode that was kept because it was open, once it is closed.
    pub(crate) async fn delete_if_unlinked(&self, ino: Ino) -> Result<()> {
        let sid = self.session_id();
        let unlinked = self
            .txn(|tx| {
                Box::pin(async move {
                    let Some(inode) = get_inode(tx, ino).await? else {
                        return Ok(Unlinked::Nothing);
                    };
                    if inode.fields.nlink > 0 {
                        return Ok(Unlinked::Nothing);
                    }
                    delete_sustained(tx, sid, &inode, self.keeps_xattr_flags()).await
                })
            })
            .await?;
        self.after_unlink(unlinked);
        Ok(())
    }

    /// Files whose chunks still await freeing (up to `limit`).
    pub async fn pending_file_deletions(&self, limit: usize) -> Result<Vec<Ino>> {
        self.txn(|tx| {
            Box::pin(async move {
                let rows = tx.scan(b"D", b"E", limit, false).await?;
                rows.iter()
                    .map(|(k, _)| {
                        keys::be_u64(k, 1)
                            .map(Ino)
                            .ok_or_else(|| MetaError::corrupt(k, "short key"))
                    })
                    .collect()
            })
        })
        .await
    }

    /// Free the chunks of a deleted file, a bounded number per transaction, dropping one
    /// reference of every slice they hold. Returns true when the file is fully freed.
    pub async fn free_file_chunks(&self, ino: Ino) -> Result<bool> {
        self.txn(|tx| {
            Box::pin(async move {
                let prefix = keys::chunk_prefix(ino);
                let rows = tx
                    .scan(&prefix, &prefix_end(&prefix), CHUNKS_PER_TXN, false)
                    .await?;
                let now = now_ns();
                for (key, value) in &rows {
                    for s in codec::decode_slices(key, value)? {
                        drop_slice_ref(tx, &s, now).await?;
                    }
                    tx.delete(key.clone());
                }
                let done = rows.len() < CHUNKS_PER_TXN;
                if done {
                    tx.delete(keys::delete_file(ino));
                }
                Ok(done)
            })
        })
        .await
    }

    /// Slices queued for block deletion before `queued_before` (ns), up to `limit`.
    pub async fn pending_slice_deletions(
        &self,
        queued_before: Nanos,
        limit: usize,
    ) -> Result<Vec<SliceDeletion>> {
        self.txn(|tx| {
            Box::pin(async move {
                let end = keys::delete_slice(queued_before, 0, 0);
                let rows = tx.scan(b"L", &end, limit, false).await?;
                rows.iter().map(|(k, _)| decode_slice_deletion(k)).collect()
            })
        })
        .await
    }

    /// Forget queued slice deletions whose blocks the caller has deleted.
    pub async fn finish_slice_deletions(&self, done: &[SliceDeletion]) -> Result<()> {
        self.txn(|tx| {
            Box::pin(async move {
                for d in done {
                    tx.delete(keys::delete_slice(d.queued_at, d.id, d.size));
                    // The slice is gone from every store: so is where it was.
                    tx.delete(keys::placement(d.id));
                }
                Ok(())
            })
        })
        .await
    }
}

fn decode_slice_deletion(key: &[u8]) -> Result<SliceDeletion> {
    let parsed = (
        keys::be_u64(key, 1),
        keys::be_u64(key, 9),
        keys::be_u32(key, 17),
    );
    match parsed {
        (Some(t), Some(id), Some(size)) if key.len() == 21 => Ok(SliceDeletion {
            id,
            size,
            queued_at: i64::try_from(t).unwrap_or(i64::MAX),
        }),
        _ => Err(MetaError::corrupt(key, "malformed slice deletion key")),
    }
}

/// Delete an inode whose last name is gone and which is no longer open by `sid`.
pub(crate) async fn delete_sustained(
    tx: &mut Txn<'_>,
    sid: u64,
    inode: &Inode,
    flags_kept: bool,
) -> Result<Unlinked> {
    delete_inode_records(tx, inode, flags_kept).await?;
    if sid != 0 {
        tx.delete(keys::sustained(sid, inode.ino));
    }
    if inode.core.kind == FileType::Regular && inode.fields.length > 0 {
        queue_file_deletion(tx, inode.ino, inode.fields.length, now_ns());
    }
    if inode.core.kind == FileType::Directory {
        tx.delete(keys::dir_usage(inode.ino));
    }
    Ok(Unlinked::Deleted {
        space: space_of(inode.core.kind, inode.fields.length),
        owner: (inode.core.uid, inode.core.gid),
    })
}

/// Delete an inode's own records (core, fields, symlink target, xattrs, parent links),
/// leaving its chunks for the deletion queue.
///
/// With `flags_kept` (metadata version 3 on), an inode with one parent and no xattrs has
/// exactly its two attribute records and perhaps a symlink target: they are deleted
/// without a scan (one round trip less for unlink and rmdir).
pub(crate) async fn delete_inode_records(
    tx: &mut Txn<'_>,
    inode: &Inode,
    flags_kept: bool,
) -> Result<()> {
    let ino = inode.ino;
    if flags_kept && !inode.core.xattrs && inode.core.parent != Ino(0) {
        tx.delete(keys::inode_core(ino));
        tx.delete(keys::inode_fields(ino));
        if inode.core.kind == FileType::Symlink {
            tx.delete(keys::symlink(ino));
        }
        return Ok(());
    }
    // Keys of one inode sort as C (chunks) < D (entries) < I < P < S < T < X.
    let start = keys::inode_core(ino);
    let end = prefix_end(&keys::inode_prefix(ino));
    for (key, _) in tx.scan(&start, &end, usize::MAX, false).await? {
        tx.delete(key);
    }
    Ok(())
}

fn queue_file_deletion(tx: &mut Txn<'_>, ino: Ino, length: u64, now: Nanos) {
    let length = i64::try_from(length).unwrap_or(i64::MAX);
    tx.put(keys::delete_file(ino), codec::encode_slots(&[length, now]));
}

/// Drop one reference to a slice; when the last goes, queue its blocks for deletion.
pub(crate) async fn drop_slice_ref(tx: &mut Txn<'_>, s: &Slice, now: Nanos) -> Result<()> {
    if s.id == 0 {
        return Ok(());
    }
    let key = keys::slice_ref(s.id, s.size);
    match tx.get(&key).await? {
        None => tx.put(keys::delete_slice(now, s.id, s.size), Vec::new()),
        Some(v) => {
            let refs = codec::decode_counter(&key, Some(&v))? - 1;
            if refs <= 1 {
                tx.delete(key);
            } else {
                tx.put(key, codec::encode_slots(&[refs]));
            }
        }
    }
    Ok(())
}

/// Add one reference to a slice (absent record = one reference).
pub(crate) async fn add_slice_ref(tx: &mut Txn<'_>, s: &Slice) -> Result<()> {
    if s.id == 0 {
        return Ok(());
    }
    let key = keys::slice_ref(s.id, s.size);
    let refs = match tx.get(&key).await? {
        None => 1,
        Some(v) => codec::decode_counter(&key, Some(&v))?,
    };
    tx.put(key, codec::encode_slots(&[refs + 1]));
    // A scan (gc) that passed the new place before this commit must learn about it.
    let epoch = keys::counter(super::SHARE_EPOCH);
    let current = codec::decode_counter(&epoch, tx.get(&epoch).await?.as_deref())?;
    tx.put(epoch, codec::encode_slots(&[current + 1]));
    Ok(())
}

/// Name of a trash entry: `{parent}-{ino}-{name}`, cut to 255 bytes.
pub fn trash_entry_name(parent: Ino, ino: Ino, name: &[u8]) -> Vec<u8> {
    let mut out = format!("{}-{}-", parent.0, ino.0).into_bytes();
    out.extend_from_slice(name);
    out.truncate(strata_types::MAX_NAME_LEN);
    out
}

/// `YYYY-MM-DD-HH` (UTC) of a time in ns.
pub fn hour_name(ns: Nanos) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let hour = secs.rem_euclid(86_400) / 3600;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}-{hour:02}")
}

/// Calendar date of a day count since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hour_names_are_utc_calendar_hours() {
        assert_eq!(hour_name(0), "1970-01-01-00");
        // 2026-11-30 03:16:39 UTC
        assert_eq!(hour_name(1_796_008_599 * 1_000_000_000), "2026-11-30-03");
        // 2000-02-29 23:00:00 UTC (leap day)
        assert_eq!(hour_name(951_865_200 * 1_000_000_000), "2000-02-29-23");
    }

    #[test]
    fn trash_names_carry_parent_inode_and_name() {
        assert_eq!(
            trash_entry_name(Ino(1), Ino(42), b"a.txt"),
            b"1-42-a.txt".to_vec()
        );
        assert_eq!(trash_entry_name(Ino(1), Ino(2), &[b'x'; 300]).len(), 255);
    }
}
