//! The trash as a whole: listing what it holds (with deletion time and original place),
//! restoring entries to where they were, purging hours older than the volume's trash
//! days (through [`Meta::remove_tree`]).
//!
//! Entries live in `/.trash/YYYY-MM-DD-HH/{parent}-{ino}-{name}` (see docs/FORMAT.md); the
//! inode's ctime is the moment it was deleted.

use strata_types::{Errno, FileType, Ino, Nanos};

use super::namespace::{get_entry, in_trash};
use super::remove::RemoveOptions;
use super::{Ctx, Meta, get_dir, must_get_inode, now_ns, put_inode, space_of};
use crate::codec;
use crate::error::{MetaError, Result, posix};
use crate::keys;

const HOUR_NS: i64 = 3_600_000_000_000;

/// One entry of the trash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrashEntry {
    /// The hour directory holding it, and its name (`YYYY-MM-DD-HH`).
    pub hour: Ino,
    pub hour_name: String,
    /// Its name in the hour directory.
    pub trash_name: Vec<u8>,
    pub ino: Ino,
    pub kind: FileType,
    /// Where it was: parent directory and name.
    pub parent: Ino,
    pub name: Vec<u8>,
    /// When it was deleted (ns), and its length.
    pub deleted_at: Nanos,
    pub length: u64,
}

/// What happened to one entry asked to be restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreOutcome {
    Restored,
    /// The original name is taken; nothing was changed.
    NameTaken,
    /// The original directory no longer exists (or is itself in the trash).
    ParentGone,
}

/// Start of the hour a trash directory name stands for (ns), if it is one.
pub fn parse_hour_name(name: &str) -> Option<Nanos> {
    let parts: Vec<i64> = name
        .split('-')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [y, m, d, h] = parts[..] else { return None };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || !(0..=23).contains(&h) {
        return None;
    }
    Some((days_from_civil(y, m, d) * 86_400 + h * 3600) * 1_000_000_000)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Split a trash entry name `{parent}-{ino}-{name}`.
fn split_trash_name(name: &[u8]) -> Option<(Ino, Ino, Vec<u8>)> {
    let mut parts = name.splitn(3, |b| *b == b'-');
    let parent = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
    let ino = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
    Some((Ino(parent), Ino(ino), parts.next()?.to_vec()))
}

impl Meta {
    /// The hour directories of the trash: (name, inode), oldest first.
    pub async fn trash_hours(&self) -> Result<Vec<(String, Ino)>> {
        let entries = self.readdir(Ino::TRASH, None, usize::MAX, false).await?;
        Ok(entries
            .into_iter()
            .filter(|e| e.kind == FileType::Directory)
            .map(|e| (String::from_utf8_lossy(&e.name).into_owned(), e.ino))
            .collect())
    }

    /// Entries of the trash deleted in `[start, end)` (ns) whose original name contains
    /// `keyword` (all when empty), handed to `each` page by page.
    pub async fn trash_entries(
        &self,
        start: Nanos,
        end: Nanos,
        keyword: &[u8],
        mut each: impl FnMut(TrashEntry) + Send,
    ) -> Result<()> {
        for (hour_name, hour) in self.trash_hours().await? {
            let Some(hour_start) = parse_hour_name(&hour_name) else {
                continue;
            };
            if hour_start >= end || hour_start + HOUR_NS <= start {
                continue;
            }
            let mut pages = self.entry_pages(hour, true);
            while let Some(page) = pages.next(self).await? {
                for e in &page {
                    let (Some((parent, ino, name)), Some(attr)) =
                        (split_trash_name(&e.name), &e.attr)
                    else {
                        continue;
                    };
                    let matches =
                        keyword.is_empty() || name.windows(keyword.len()).any(|w| w == keyword);
                    if ino != e.ino || !matches || attr.ctime < start || attr.ctime >= end {
                        continue;
                    }
                    each(TrashEntry {
                        hour,
                        hour_name: hour_name.clone(),
                        trash_name: e.name.clone(),
                        ino,
                        kind: e.kind,
                        parent,
                        name,
                        deleted_at: attr.ctime,
                        length: attr.length,
                    });
                }
            }
        }
        Ok(())
    }

    /// Put a trash entry back under its original name, without copying data. An existing
    /// name is never overwritten.
    pub async fn restore_entry(&self, entry: &TrashEntry) -> Result<RestoreOutcome> {
        self.txn(|tx| {
            Box::pin(async move {
                let Some((kind, ino)) = get_entry(tx, entry.hour, &entry.trash_name).await? else {
                    return posix(Errno::ENOENT);
                };
                let parent = match get_dir(tx, entry.parent).await {
                    Ok(dir) => dir,
                    Err(MetaError::Posix(Errno::ENOENT | Errno::ENOTDIR)) => {
                        return Ok(RestoreOutcome::ParentGone);
                    }
                    Err(e) => return Err(e),
                };
                // A directory that is itself in the trash (an hour's child) is no home.
                let holder = get_dir(tx, parent.core.parent).await?;
                if in_trash(&parent) || in_trash(&holder) {
                    return Ok(RestoreOutcome::ParentGone);
                }
                if get_entry(tx, entry.parent, &entry.name).await?.is_some() {
                    return Ok(RestoreOutcome::NameTaken);
                }
                let mut inode = must_get_inode(tx, ino).await?;
                let now = now_ns();
                let space = space_of(kind, inode.fields.length);
                let is_dir = i64::from(kind == FileType::Directory);
                tx.delete(keys::dentry(entry.hour, &entry.trash_name));
                self.touch_dir(tx, entry.hour, now, -is_dir, -space, -1)
                    .await?;
                tx.put(
                    keys::dentry(entry.parent, &entry.name),
                    codec::encode_dentry(kind, ino),
                );
                self.touch_dir(tx, entry.parent, now, is_dir, space, 1)
                    .await?;
                inode.core.parent = entry.parent;
                inode.fields.ctime = now;
                put_inode(tx, &inode);
                Ok(RestoreOutcome::Restored)
            })
        })
        .await
    }

    /// Delete for good every trash hour that ended more than the volume's trash days ago
    /// (their data is freed by the deletion queue). Returns the entries removed. An hour
    /// that cannot be removed (an immutable or locked file in it: EPERM) stays, the
    /// others go, and the first such error is returned after all were tried.
    pub async fn purge_trash(&self, now: Nanos) -> Result<u64> {
        let days = i64::from(self.current_format()?.trash_days);
        let keep = days * 24 * HOUR_NS;
        let mut removed = 0;
        let mut failed = None;
        for (name, _) in self.trash_hours().await? {
            let Some(start) = parse_hour_name(&name) else {
                continue;
            };
            if start + HOUR_NS + keep <= now {
                let mut count = 0;
                let outcome = self
                    .remove_tree(
                        &Ctx::root(),
                        (Ino::TRASH, name.as_bytes()),
                        RemoveOptions::PURGE,
                        &mut |n| {
                            count += n;
                            true
                        },
                    )
                    .await;
                removed += count;
                if let Err(e) = outcome {
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(removed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::hour_name;

    #[test]
    fn hour_names_parse_back() {
        for ns in [
            0,
            1_796_008_599 * 1_000_000_000,
            951_865_200 * 1_000_000_000,
        ] {
            let name = hour_name(ns);
            let start = parse_hour_name(&name).unwrap();
            assert!(start <= ns && ns < start + HOUR_NS, "{name}");
        }
        assert_eq!(parse_hour_name("2026-13-01-00"), None);
        assert_eq!(parse_hour_name("not-an-hour"), None);
    }

    #[test]
    fn trash_names_split_back() {
        assert_eq!(
            split_trash_name(b"1-42-a-b.txt"),
            Some((Ino(1), Ino(42), b"a-b.txt".to_vec()))
        );
        assert_eq!(split_trash_name(b"x-1-a"), None);
    }
}
