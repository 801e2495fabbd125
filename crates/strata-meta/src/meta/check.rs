//! Namespace checks for `fsck`: walk every directory from the root and the trash and
//! verify what the operations keep incrementally — each directory's usage record (bytes
//! and inodes of its direct children), link counts of directories (2 + subdirectories)
//! and files (one per name), entry types, and entries whose inode is gone. `repair` fixes
//! the counters; nothing else is changed. Also finds a path for an inode, for reports.

use std::collections::{HashMap, HashSet};

use strata_types::{FileType, Ino};

use super::scan::after;
use super::{Meta, get_inode, space_of};
use crate::codec::{self, Inode, InodeCore, InodeFields, slot, usage_slot};
use crate::error::{MetaError, Result};
use crate::keys;
use crate::kv::{FieldOp, FieldUpdate, Txn, prefix_end};

/// Entries read per page while walking a directory.
const PAGE: usize = 1000;

/// Something wrong in the namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceProblem {
    pub ino: Ino,
    pub what: String,
    /// Fixed by `repair`.
    pub repaired: bool,
    /// The inode has no name, so it has no path to look up for the report.
    pub nameless: bool,
}

/// What a namespace walk saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceReport {
    pub directories: u64,
    pub files: u64,
    pub problems: Vec<NamespaceProblem>,
    /// The volume counters (bytes, inodes) as recorded and as the walk counted them.
    /// They differ after a client crash (its unflushed changes are lost) and while
    /// clients write; `repair` sets them.
    pub volume_recorded: (i64, i64),
    pub volume_counted: (i64, i64),
    pub volume_repaired: bool,
}

/// What a namespace walk carries from one directory to the next.
struct Walk<'a> {
    /// Directories still to walk.
    stack: &'a mut Vec<Ino>,
    /// Multiply-linked files already counted.
    seen_multi: &'a mut HashSet<Ino>,
    on_reached: &'a mut (dyn FnMut(Ino) + Send),
}

/// Usage and link counts of one directory's children, summed while walking it.
#[derive(Default)]
struct DirTally {
    bytes: i64,
    inodes: i64,
    subdirs: i64,
    /// Names in this directory per multiply-linked child.
    multi: HashMap<Ino, i64>,
}

impl Meta {
    /// Walk the namespace (root and trash) and check its counters; with `repair`, fix
    /// usage records and link counts. Meant for a quiet volume: counters changed by
    /// clients during the walk may be reported (and "repaired") wrongly.
    pub async fn check_namespace(
        &self,
        repair: bool,
        on_dir: impl FnMut(u64) + Send,
    ) -> Result<NamespaceReport> {
        self.check_namespace_with(repair, on_dir, |_| {}).await
    }

    /// [`Self::check_namespace`], telling `on_reached` once each inode the walk found a
    /// name for (the root, the trash, each entry's inode; a hard-linked one once) and each
    /// inode kept only by an open file after its last name went (a session's record). On
    /// a sound volume these are exactly the inodes that have a record.
    pub async fn check_namespace_with(
        &self,
        repair: bool,
        mut on_dir: impl FnMut(u64) + Send,
        mut on_reached: impl FnMut(Ino) + Send,
    ) -> Result<NamespaceReport> {
        let mut report = NamespaceReport::default();
        let mut stack = vec![Ino::ROOT, Ino::TRASH];
        on_reached(Ino::ROOT);
        on_reached(Ino::TRASH);
        let mut seen_multi: HashSet<Ino> = HashSet::new();
        while let Some(dir) = stack.pop() {
            report.directories += 1;
            let mut walk = Walk {
                stack: &mut stack,
                seen_multi: &mut seen_multi,
                on_reached: &mut on_reached,
            };
            let tally = self.walk_dir(dir, &mut walk, repair, &mut report).await?;
            on_dir(report.files);
            self.check_dir_counters(dir, &tally, repair, &mut report)
                .await?;
        }
        for ino in self.check_volume_counters(repair, &mut report).await? {
            on_reached(ino);
        }
        Ok(report)
    }

    /// Compare the volume counters with what the walk counted plus the inodes that are
    /// unlinked but still open somewhere (they keep their space until closed). Returns
    /// those inodes.
    async fn check_volume_counters(
        &self,
        repair: bool,
        report: &mut NamespaceReport,
    ) -> Result<Vec<Ino>> {
        let (recorded, open_unlinked, kept) = self
            .txn(|tx| {
                Box::pin(async move {
                    let ks = vec![
                        keys::counter(super::USED_SPACE),
                        keys::counter(super::TOTAL_INODES),
                    ];
                    let vals = tx.get_many(&ks).await?;
                    let recorded = (
                        codec::decode_counter(&ks[0], vals[0].as_deref())?,
                        codec::decode_counter(&ks[1], vals[1].as_deref())?,
                    );
                    let inos = kept_by_sessions(tx).await?;
                    let mut open = (0, 0);
                    let mut kept = Vec::new();
                    for ino in inos {
                        if let Some(i) = get_inode(tx, ino).await?.filter(|i| i.fields.nlink == 0) {
                            open.0 += space_of(i.core.kind, i.fields.length);
                            open.1 += 1;
                            kept.push(ino);
                        }
                    }
                    Ok((recorded, open, kept))
                })
            })
            .await?;
        report.volume_recorded = recorded;
        report.volume_counted.0 += open_unlinked.0;
        report.volume_counted.1 += open_unlinked.1;
        if repair && report.volume_recorded != report.volume_counted {
            let (space, inodes) = report.volume_counted;
            self.txn(|tx| {
                Box::pin(async move {
                    tx.put(
                        keys::counter(super::USED_SPACE),
                        codec::encode_slots(&[space]),
                    );
                    tx.put(
                        keys::counter(super::TOTAL_INODES),
                        codec::encode_slots(&[inodes]),
                    );
                    Ok(())
                })
            })
            .await?;
            report.volume_repaired = true;
        }
        Ok(kept)
    }

    /// Read every entry of `dir`, check each child, and sum what the directory's
    /// counters should say.
    async fn walk_dir(
        &self,
        dir: Ino,
        walk: &mut Walk<'_>,
        repair: bool,
        report: &mut NamespaceReport,
    ) -> Result<DirTally> {
        let mut tally = DirTally::default();
        let prefix = keys::dentry_prefix(dir);
        let mut start = prefix.clone();
        loop {
            let page = self.entry_page(&start, &prefix).await?;
            let Some(last) = page.last() else { break };
            start = [&last.0[..], &[0u8][..]].concat();
            for (key, kind, child, inode) in &page_children(&page, self).await? {
                let Some(inode) = inode else {
                    report.problems.push(problem(
                        dir,
                        format!(
                            "entry {} points to missing inode {child}",
                            show_name(key, &prefix)
                        ),
                    ));
                    continue;
                };
                if inode.core.kind != *kind {
                    report.problems.push(problem(
                        *child,
                        format!("entry type {kind:?} but inode type {:?}", inode.core.kind),
                    ));
                }
                tally.bytes += space_of(inode.core.kind, inode.fields.length);
                tally.inodes += 1;
                if inode.core.kind == FileType::Directory {
                    tally.subdirs += 1;
                    walk.stack.push(*child);
                    (walk.on_reached)(*child);
                    // The trash's hour directories are not charged to the volume.
                    if dir != Ino::TRASH {
                        count_inode(report, inode);
                    }
                    continue;
                }
                report.files += 1;
                if inode.core.parent == Ino(0) {
                    *tally.multi.entry(*child).or_default() += 1;
                    if walk.seen_multi.insert(*child) {
                        (walk.on_reached)(*child);
                        count_inode(report, inode);
                        self.check_link_records(inode, repair, report).await?;
                    }
                    continue;
                }
                (walk.on_reached)(*child);
                count_inode(report, inode);
                if inode.fields.nlink != 1 {
                    let fixed = repair && self.set_nlink(*child, 1).await.is_ok();
                    report.problems.push(NamespaceProblem {
                        ino: *child,
                        what: format!("link count {} but one name", inode.fields.nlink),
                        repaired: fixed,
                        nameless: false,
                    });
                }
            }
            if page.len() < PAGE {
                break;
            }
        }
        for (child, names) in &tally.multi {
            let key = keys::link_parent(*child, dir);
            let recorded = self.read_counter_key(&key).await?;
            if recorded != *names {
                report.problems.push(problem(
                    *child,
                    format!("{names} names in directory {dir} but parent record says {recorded}"),
                ));
            }
        }
        Ok(tally)
    }

    async fn entry_page(&self, start: &[u8], prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.txn(|tx| {
            Box::pin(async move { Ok(tx.scan(start, &prefix_end(prefix), PAGE, false).await?) })
        })
        .await
    }

    /// A multiply-linked file's link count must equal the sum of its parent records.
    async fn check_link_records(
        &self,
        inode: &Inode,
        repair: bool,
        report: &mut NamespaceReport,
    ) -> Result<()> {
        let ino = inode.ino;
        let total: i64 = self
            .txn(|tx| {
                Box::pin(async move {
                    let prefix = keys::link_parent_prefix(ino);
                    let rows = tx
                        .scan(&prefix, &prefix_end(&prefix), usize::MAX, false)
                        .await?;
                    let mut sum = 0;
                    for (k, v) in &rows {
                        sum += codec::decode_counter(k, Some(v))?;
                    }
                    Ok(sum)
                })
            })
            .await?;
        if u32::try_from(total).ok() != Some(inode.fields.nlink) {
            let fixed = repair && total > 0 && self.set_nlink(ino, total).await.is_ok();
            report.problems.push(NamespaceProblem {
                ino,
                what: format!("link count {} but {total} names", inode.fields.nlink),
                repaired: fixed,
                nameless: false,
            });
        }
        Ok(())
    }

    /// Compare a directory's usage record and link count with what its entries add up to.
    async fn check_dir_counters(
        &self,
        dir: Ino,
        tally: &DirTally,
        repair: bool,
        report: &mut NamespaceReport,
    ) -> Result<()> {
        let (fields, usage) = self
            .txn(|tx| {
                Box::pin(async move {
                    let inode = get_inode(tx, dir).await?;
                    let key = keys::dir_usage(dir);
                    let usage = match tx.get(&key).await? {
                        Some(v) => Some(codec::decode_slots(&key, &v, usage_slot::COUNT)?),
                        None => None,
                    };
                    Ok((inode.map(|i| i.fields), usage))
                })
            })
            .await?;
        let Some(fields) = fields else {
            return Ok(()); // removed while we walked
        };
        let want_nlink = 2 + tally.subdirs;
        if i64::from(fields.nlink) != want_nlink {
            let fixed = repair && self.set_nlink(dir, want_nlink).await.is_ok();
            report.problems.push(NamespaceProblem {
                ino: dir,
                what: format!(
                    "directory link count {} but {} subdirectories",
                    fields.nlink, tally.subdirs
                ),
                repaired: fixed,
                nameless: false,
            });
        }
        let stored = usage.as_deref().map(|u| (u[0], u[1]));
        if stored != Some((tally.bytes, tally.inodes)) {
            let fixed = repair && self.set_usage(dir, tally.bytes, tally.inodes).await.is_ok();
            let (b, i) = stored.unwrap_or((-1, -1));
            report.problems.push(NamespaceProblem {
                ino: dir,
                what: format!(
                    "usage record says {b} bytes / {i} inodes, entries add up to {} / {}",
                    tally.bytes, tally.inodes
                ),
                repaired: fixed,
                nameless: false,
            });
        }
        Ok(())
    }

    pub(crate) async fn read_counter_key(&self, key: &[u8]) -> Result<i64> {
        self.txn(|tx| {
            Box::pin(async move { codec::decode_counter(key, tx.get(key).await?.as_deref()) })
        })
        .await
    }

    async fn set_nlink(&self, ino: Ino, nlink: i64) -> Result<()> {
        self.txn(|tx| {
            Box::pin(async move {
                let op = FieldOp {
                    slot: slot::NLINK,
                    update: FieldUpdate::Set(nlink),
                };
                tx.update_fields(keys::inode_fields(ino), &[op])?;
                Ok(())
            })
        })
        .await
    }

    async fn set_usage(&self, dir: Ino, bytes: i64, inodes: i64) -> Result<()> {
        self.txn(|tx| {
            Box::pin(async move {
                tx.put(keys::dir_usage(dir), codec::encode_slots(&[bytes, inodes]));
                Ok(())
            })
        })
        .await
    }

    /// A path of `ino` (`/a/b`, `/.trash/...`), following parents up to the root; `None`
    /// when the inode no longer exists or is linked nowhere (deleted but open).
    pub async fn path_of(&self, ino: Ino) -> Result<Option<String>> {
        let mut parts: Vec<String> = Vec::new();
        let mut current = ino;
        for _ in 0..4096 {
            if current == Ino::ROOT {
                parts.reverse();
                return Ok(Some(format!("/{}", parts.join("/"))));
            }
            if current == Ino::TRASH {
                parts.push(".trash".into());
                current = Ino::ROOT;
                continue;
            }
            let Some((parent, name)) = self.name_in_parent(current).await? else {
                return Ok(None);
            };
            parts.push(String::from_utf8_lossy(&name).into_owned());
            current = parent;
        }
        Err(MetaError::Invalid(format!(
            "inode {ino}: parent chain too deep"
        )))
    }

    /// The inodes sessions keep (files still open after their last name went, and files
    /// made by `O_TMPFILE`), sorted.
    pub async fn kept_by_sessions(&self) -> Result<Vec<Ino>> {
        self.txn(|tx| Box::pin(async move { kept_by_sessions(tx).await }))
            .await
    }

    /// Which of `inos` a directory entry names now. Each directory that one of them
    /// records as a parent is read once, however many of them it holds (`path_of` per
    /// inode would read a large directory once per inode).
    pub async fn named_among(&self, inos: &[Ino]) -> Result<HashSet<Ino>> {
        let mut wanted_in: HashMap<Ino, HashSet<Ino>> = HashMap::new();
        for ino in inos {
            for parent in self.recorded_parents(*ino).await? {
                wanted_in.entry(parent).or_default().insert(*ino);
            }
        }
        let mut named = HashSet::new();
        for (parent, wanted) in wanted_in {
            let prefix = keys::dentry_prefix(parent);
            let mut start = prefix.clone();
            loop {
                let page = self.entry_page(&start, &prefix).await?;
                for (key, value) in &page {
                    let child = codec::decode_dentry(key, value)?.1;
                    if wanted.contains(&child) {
                        named.insert(child);
                    }
                }
                match page.last() {
                    Some((key, _)) if page.len() == PAGE => start = after(key),
                    _ => break,
                }
            }
        }
        Ok(named)
    }

    /// The directories `ino`'s records name as its parents (none if it is gone).
    async fn recorded_parents(&self, ino: Ino) -> Result<Vec<Ino>> {
        self.txn(|tx| {
            Box::pin(async move {
                let key = keys::inode_core(ino);
                let Some(v) = tx.get(&key).await? else {
                    return Ok(Vec::new());
                };
                let parent = InodeCore::decode(&key, &v)?.parent;
                if parent != Ino(0) {
                    return Ok(vec![parent]);
                }
                let prefix = keys::link_parent_prefix(ino);
                let rows = tx
                    .scan(&prefix, &prefix_end(&prefix), usize::MAX, false)
                    .await?;
                Ok(rows
                    .iter()
                    .filter_map(|(k, _)| keys::be_u64(k, 10).map(Ino))
                    .collect())
            })
        })
        .await
    }

    /// One (parent, name) of `ino`.
    async fn name_in_parent(&self, ino: Ino) -> Result<Option<(Ino, Vec<u8>)>> {
        self.txn(|tx| {
            Box::pin(async move {
                let key = keys::inode_core(ino);
                let Some(v) = tx.get(&key).await? else {
                    return Ok(None);
                };
                let mut parent = InodeCore::decode(&key, &v)?.parent;
                if parent == Ino(0) {
                    let prefix = keys::link_parent_prefix(ino);
                    let rows = tx.scan(&prefix, &prefix_end(&prefix), 1, false).await?;
                    match rows.first().and_then(|(k, _)| keys::be_u64(k, 10)) {
                        Some(p) => parent = Ino(p),
                        None => return Ok(None),
                    }
                }
                let prefix = keys::dentry_prefix(parent);
                let end = prefix_end(&prefix);
                let mut start = prefix.clone();
                loop {
                    let rows = tx.scan(&start, &end, PAGE, false).await?;
                    for (k, v) in &rows {
                        if codec::decode_dentry(k, v)?.1 == ino {
                            return Ok(Some((parent, k[prefix.len()..].to_vec())));
                        }
                    }
                    match rows.last() {
                        Some((k, _)) if rows.len() == PAGE => start = [&k[..], &[0u8][..]].concat(),
                        _ => return Ok(None),
                    }
                }
            })
        })
        .await
    }
}

/// The inodes of every session's sustained records, sorted.
async fn kept_by_sessions(tx: &mut Txn<'_>) -> Result<Vec<Ino>> {
    let rows = tx.scan(b"SS", b"ST", usize::MAX, false).await?;
    let mut inos: Vec<Ino> = rows
        .iter()
        .filter_map(|(k, _)| keys::be_u64(k, 10).map(Ino))
        .collect();
    inos.sort();
    inos.dedup();
    Ok(inos)
}

/// Charge one inode (seen once) to the walk's volume count.
fn count_inode(report: &mut NamespaceReport, inode: &Inode) {
    report.volume_counted.0 += space_of(inode.core.kind, inode.fields.length);
    report.volume_counted.1 += 1;
}

fn problem(ino: Ino, what: String) -> NamespaceProblem {
    NamespaceProblem {
        ino,
        what,
        repaired: false,
        nameless: false,
    }
}

fn show_name(key: &[u8], prefix: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(&key[prefix.len()..]))
}

type Child = (Vec<u8>, FileType, Ino, Option<Inode>);

/// Decode a page of entries and load their inodes in one round trip.
async fn page_children(page: &[(Vec<u8>, Vec<u8>)], meta: &Meta) -> Result<Vec<Child>> {
    let mut out = Vec::with_capacity(page.len());
    let mut ks = Vec::with_capacity(page.len() * 2);
    for (k, v) in page {
        let (kind, child) = codec::decode_dentry(k, v)?;
        ks.push(keys::inode_core(child));
        ks.push(keys::inode_fields(child));
        out.push((k.clone(), kind, child, None));
    }
    let vals = meta
        .txn(|tx| {
            let ks = ks.clone();
            Box::pin(async move { Ok(tx.get_many(&ks).await?) })
        })
        .await?;
    for (i, entry) in out.iter_mut().enumerate() {
        if let (Some(core), Some(fields)) = (&vals[2 * i], &vals[2 * i + 1]) {
            entry.3 = Some(Inode {
                ino: entry.2,
                core: InodeCore::decode(&ks[2 * i], core)?,
                fields: InodeFields::decode(&ks[2 * i + 1], fields)?,
            });
        }
    }
    Ok(out)
}

/// What a subtree holds, summed from directory usage records (files are never read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubtreeUsage {
    pub bytes: i64,
    pub files: i64,
    pub dirs: i64,
}

impl Meta {
    /// Usage of the tree under `dir` (not counting `dir` itself): bytes, non-directory
    /// inodes and directories, from the usage records of its directories. Only
    /// directories with subdirectories are listed (see [`Meta::subdirectories`]), so the
    /// cost is a read or two per directory, whatever the number of files.
    pub async fn subtree_usage(&self, dir: Ino) -> Result<SubtreeUsage> {
        let mut total = SubtreeUsage::default();
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            let (bytes, inodes, nlink) = self.usage_and_links(d).await?;
            total.bytes += bytes;
            let subdirs = if nlink > 2 {
                self.list_subdirectories(d).await?
            } else {
                Vec::new()
            };
            let count = i64::try_from(subdirs.len()).unwrap_or(i64::MAX);
            stack.extend(subdirs.into_iter().map(|(_, ino)| ino));
            total.dirs += count;
            total.files += inodes - count;
        }
        Ok(total)
    }

    /// The subdirectories of `dir` (names and inodes, in name order). A directory's link
    /// count is 2 plus its subdirectories (kept by every change, checked and repaired by
    /// fsck), so one whose count is 2 is not listed: a directory of a million files costs
    /// one read, as `find`'s leaf optimisation does on Linux file systems.
    pub async fn subdirectories(&self, dir: Ino) -> Result<Vec<(Vec<u8>, Ino)>> {
        if self.getattr(dir).await?.nlink <= 2 {
            return Ok(Vec::new());
        }
        self.list_subdirectories(dir).await
    }

    /// A directory's usage record (bytes, inodes of its direct children) and its link
    /// count, in one engine read.
    async fn usage_and_links(&self, dir: Ino) -> Result<(i64, i64, u32)> {
        self.txn(|tx| {
            Box::pin(async move {
                let ks = [keys::dir_usage(dir), keys::inode_fields(dir)];
                let vals = tx.get_many(&ks).await?;
                let (Some(usage), Some(fields)) = (&vals[0], &vals[1]) else {
                    return Err(MetaError::Posix(strata_types::Errno::ENOENT));
                };
                let slots = codec::decode_slots(&ks[0], usage, usage_slot::COUNT)?;
                let fields = InodeFields::decode(&ks[1], fields)?;
                Ok((
                    slots[usage_slot::BYTES],
                    slots[usage_slot::INODES],
                    fields.nlink,
                ))
            })
        })
        .await
    }

    /// Every subdirectory of `dir`, by listing all its entries.
    async fn list_subdirectories(&self, dir: Ino) -> Result<Vec<(Vec<u8>, Ino)>> {
        let mut subdirs = Vec::new();
        let mut pages = self.entry_pages(dir, false);
        while let Some(page) = pages.next(self).await? {
            subdirs.extend(
                page.into_iter()
                    .filter(|e| e.kind == FileType::Directory)
                    .map(|e| (e.name, e.ino)),
            );
        }
        Ok(subdirs)
    }
}
