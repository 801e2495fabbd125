//! Loading a dump (dump v1, see `dump.rs`) into an empty engine, line by line: records are
//! written in batches of blind puts, volume counters are recomputed from what was
//! loaded, link records of hard-linked files are rebuilt from the entries, and the format
//! record is written last — until then the engine holds no volume.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use strata_types::{FileType, Ino, Slice};

use super::acl_store::{AclIds, AclKind};
use super::dump::{DUMP_VERSION, DumpLine, DumpNode, DumpStats};
use super::load_sink::LoadSink;
use super::{Meta, NEXT_INODE, NEXT_SESSION, NEXT_SLICE, TOTAL_INODES, USED_SPACE, space_of};
use crate::acl::Acl;
use crate::codec::{self, InodeCore, InodeFields};
use crate::error::{MetaError, Result};
use crate::format::Format;
use crate::keys;
use crate::kv::{FieldOp, FieldUpdate, Key, Value};

/// Puts per load transaction (or bulk writer's batch).
const BATCH: usize = 500;
/// Load transactions written at once.
const IN_FLIGHT: usize = 8;

/// Running state of a load.
#[derive(Default)]
struct Loader {
    batch: Vec<(Key, Value)>,
    stats: DumpStats,
    used_space: i64,
    total_inodes: i64,
    max_ino: u64,
    max_slice: u64,
    /// Inodes with several names, and the names they have per parent.
    multi: HashSet<u64>,
    multi_parents: HashMap<(u64, u64), i64>,
    /// The last entry read: a node that follows it is that entry's inode.
    last_entry: Option<(u64, u64)>,
    /// Access control lists written so far, by id (the volume starts with none).
    acls: AclIds,
    /// Lines taken so far.
    lines: usize,
    /// The header line's format record and id counters.
    header: Option<(Format, std::collections::BTreeMap<String, i64>)>,
    /// The end line came, its counts matching.
    ended: bool,
    /// Some inode carries protections (the volume's metadata version rises for them).
    protected: bool,
}

fn bad(line: usize, what: impl std::fmt::Display) -> MetaError {
    MetaError::Invalid(format!("dump line {line}: {what}"))
}

/// What a load's target engine holds.
enum Contents {
    Nothing,
    /// Records but no format record: an interrupted load or populate.
    Leftovers,
    Volume,
}

impl Meta {
    /// Load a dump into this client's engine, which must be empty. `progress` is told the
    /// running count of lines.
    pub async fn load_dump(
        &self,
        input: &mut (dyn BufRead + Send),
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<DumpStats> {
        let mut text = String::new();
        let mut number = 0usize;
        let lines = std::iter::from_fn(move || {
            text.clear();
            match input.read_line(&mut text) {
                Ok(0) => None,
                Ok(_) => {
                    number += 1;
                    Some(serde_json::from_str(text.trim_end()).map_err(|e| bad(number, e)))
                }
                Err(e) => Some(Err(MetaError::Invalid(format!("reading the dump: {e}")))),
            }
        });
        self.load_lines(lines, progress).await
    }

    /// Load dump lines (as [`load_dump`](Self::load_dump) reads them, or made by a
    /// generator) into this client's engine, which must be empty.
    pub async fn load_lines(
        &self,
        lines: impl Iterator<Item = Result<DumpLine>> + Send,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<DumpStats> {
        self.ensure_empty().await?;
        let mut loader = Loader::default();
        let mut sink = LoadSink::open(self, IN_FLIGHT).await?;
        let read: Result<()> = async {
            for line in lines {
                loader.line(line?)?;
                if loader.batch.len() >= BATCH {
                    sink.put(std::mem::take(&mut loader.batch)).await?;
                }
                progress(u64::try_from(loader.lines).unwrap_or(u64::MAX));
            }
            Ok(())
        }
        .await;
        sink.finish(read).await?;
        let Some((format, counters)) = loader.header.take() else {
            return Err(MetaError::Invalid("the dump is empty".into()));
        };
        if !loader.ended {
            return Err(MetaError::Invalid(format!(
                "the dump ends at line {} without its end line (cut off?)",
                loader.lines
            )));
        }
        loader.finish(&counters);
        self.put_batch(std::mem::take(&mut loader.batch)).await?;
        self.fix_multi_links(&loader).await?;
        // Every record is written in this client's layout (inode flags included).
        let (encryption, foreign) = (format.encryption.clone(), format.foreign.clone());
        let format = Format {
            meta_version: crate::format::META_VERSION,
            encryption: None,
            foreign: None,
            stores: Vec::new(),
            ..format
        }
        .with_encryption(encryption)
        .with_foreign(foreign)
        .with_protection(loader.protected);
        let record = format.encode()?;
        self.put_batch(vec![(keys::setting("format"), record)])
            .await?;
        Ok(loader.stats)
    }

    /// What the engine holds: nothing, records of no volume, or a volume.
    async fn contents(&self) -> Result<Contents> {
        let (any, format) = self
            .txn(|tx| {
                Box::pin(async move {
                    let any = tx.scan(b"", &[0xff; 4], 1, false).await?;
                    let format = tx.get(&keys::setting("format")).await?;
                    Ok((!any.is_empty(), format.is_some()))
                })
            })
            .await?;
        Ok(match (any, format) {
            (_, true) => Contents::Volume,
            (true, false) => Contents::Leftovers,
            (false, false) => Contents::Nothing,
        })
    }

    pub(super) async fn ensure_empty(&self) -> Result<()> {
        match self.contents().await? {
            Contents::Nothing => Ok(()),
            Contents::Volume => Err(MetaError::Invalid(
                "the target engine is not empty: it holds a volume; load (or populate) only \
                 into an empty database (`strata destroy` removes a volume)"
                    .into(),
            )),
            Contents::Leftovers => Err(MetaError::Invalid(
                "the target engine is not empty: it holds records but no volume (what an \
                 interrupted load or populate leaves); `strata load --force` erases them first"
                    .into(),
            )),
        }
    }

    /// Erase what an interrupted load or populate left (records without a volume's
    /// format record), so a load can start again; a volume is never erased. Returns the
    /// records erased.
    pub async fn erase_leftovers(&self) -> Result<u64> {
        match self.contents().await? {
            Contents::Nothing => Ok(0),
            Contents::Volume => Err(MetaError::Invalid(
                "the target engine holds a volume, which --force does not erase \
                 (`strata destroy` removes a volume)"
                    .into(),
            )),
            Contents::Leftovers => self.erase_everything(&mut |_| {}).await,
        }
    }

    pub(super) async fn put_batch(&self, batch: Vec<(Key, Value)>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.uncached_txn(|tx| {
            let batch = batch.clone();
            Box::pin(async move {
                for (k, v) in batch {
                    tx.put(k, v);
                }
                Ok(())
            })
        })
        .await
    }

    /// Parent records and link counts of hard-linked files, from the entries loaded.
    async fn fix_multi_links(&self, loader: &Loader) -> Result<()> {
        let mut totals: HashMap<u64, i64> = HashMap::new();
        let mut batch = Vec::new();
        for ((ino, parent), count) in &loader.multi_parents {
            *totals.entry(*ino).or_default() += count;
            batch.push((
                keys::link_parent(Ino(*ino), Ino(*parent)),
                codec::encode_slots(&[*count]),
            ));
        }
        self.put_batch(batch).await?;
        for (ino, total) in totals {
            self.txn(|tx| {
                Box::pin(async move {
                    let op = FieldOp {
                        slot: codec::slot::NLINK,
                        update: FieldUpdate::Set(total),
                    };
                    tx.update_fields(keys::inode_fields(Ino(ino)), &[op])?;
                    Ok(())
                })
            })
            .await?;
        }
        Ok(())
    }
}

impl Loader {
    /// Take the next line of the dump.
    fn line(&mut self, line: DumpLine) -> Result<()> {
        self.lines += 1;
        let number = self.lines;
        match line {
            DumpLine::Header {
                strata_dump,
                format,
                counters,
                ..
            } => {
                if strata_dump > DUMP_VERSION {
                    return Err(bad(
                        number,
                        format!("dump version {strata_dump} is newer than this client"),
                    ));
                }
                let format: Format = serde_json::from_value(format).map_err(|e| bad(number, e))?;
                self.header = Some((format, counters));
            }
            _ if self.header.is_none() => return Err(bad(number, "no header line")),
            DumpLine::Node(node) => self.node(node, number)?,
            DumpLine::Entry {
                parent,
                name,
                ino,
                kind,
            } => self.entry(parent, &name.bytes()?, ino, kind, number)?,
            DumpLine::SliceRef { id, size, refs } => {
                self.batch
                    .push((keys::slice_ref(id, size), codec::encode_slots(&[refs])));
                self.stats.slice_refs += 1;
            }
            DumpLine::Placement {
                id,
                stores,
                leaving,
                leave_after,
            } => {
                let p = super::Placement {
                    stores,
                    leaving,
                    leave_after,
                };
                if p.stores.is_empty() {
                    return Err(bad(number, "a placement names no store"));
                }
                self.batch.push((keys::placement(id), p.encode()));
            }
            DumpLine::TierPolicy {
                ino,
                store,
                copies,
                after_secs,
            } => {
                let p = super::TierPolicy {
                    store,
                    copies,
                    after_secs,
                };
                self.batch.push((keys::tier_policy(Ino(ino)), p.encode()));
            }
            DumpLine::End { nodes, entries } => {
                if (nodes, entries) != (self.stats.nodes, self.stats.entries) {
                    return Err(bad(number, "counts do not match the lines before it"));
                }
                self.ended = true;
            }
        }
        Ok(())
    }

    fn node(&mut self, node: DumpNode, number: usize) -> Result<()> {
        let kind = FileType::from_code(node.kind).ok_or_else(|| bad(number, "unknown type"))?;
        let ino = Ino(node.ino);
        if node.parent == 0 {
            match self.last_entry {
                Some((_, child)) if child == node.ino => {}
                _ => {
                    return Err(bad(
                        number,
                        "a hard-linked node must follow one of its entries",
                    ));
                }
            }
            self.multi.insert(node.ino);
            if let Some((parent, child)) = self.last_entry {
                *self.multi_parents.entry((child, parent)).or_default() += 1;
            }
        }
        let mut core = InodeCore {
            kind,
            mode: node.mode,
            uid: node.uid,
            gid: node.gid,
            rdev: node.rdev,
            parent: Ino(node.parent),
            linkable: false,
            xattrs: false,
            access_acl: 0,
            default_acl: 0,
            protection: match &node.protection {
                Some(p) => {
                    self.protected = true;
                    p.protection()?
                }
                None => strata_types::Protection::default(),
            },
        };
        let fields = InodeFields {
            atime: node.atime,
            mtime: node.mtime,
            ctime: node.ctime,
            nlink: node.nlink,
            length: node.length,
        };
        self.batch.push((keys::inode_fields(ino), fields.encode()));
        if let Some(target) = &node.target {
            self.batch.push((keys::symlink(ino), target.bytes()?));
        }
        for (name, value) in &node.xattrs {
            let (name, value) = (name.bytes()?, value.bytes()?);
            match AclKind::of_xattr(&name) {
                Some(kind) => self.load_acl(number, &mut core, kind, &value)?,
                None => {
                    core.xattrs = true;
                    self.batch.push((keys::xattr(ino, &name), value));
                }
            }
        }
        self.batch.push((keys::inode_core(ino), core.encode()));
        for (index, records) in &node.chunks {
            let slices: Vec<Slice> = records
                .iter()
                .map(|r| slice_of(r).ok_or_else(|| bad(number, "slice record out of range")))
                .collect::<Result<_>>()?;
            self.max_slice = self
                .max_slice
                .max(slices.iter().map(|s| s.id).max().unwrap_or(0));
            self.batch
                .push((keys::chunk(ino, *index), codec::encode_slices(&slices)));
        }
        if let Some([bytes, inodes]) = node.usage {
            self.batch
                .push((keys::dir_usage(ino), codec::encode_slots(&[bytes, inodes])));
        }
        // The root, the trash and its hour directories are not charged to the volume.
        let trash_hour = node.parent == Ino::TRASH.0 && kind == FileType::Directory;
        let counted = ino != Ino::ROOT && ino != Ino::TRASH && !trash_hour;
        if counted {
            self.used_space += space_of(kind, node.length);
            self.total_inodes += 1;
        }
        if node.ino < Ino::FIRST_RESERVED {
            self.max_ino = self.max_ino.max(node.ino);
        }
        self.stats.nodes += 1;
        Ok(())
    }

    /// An access control list given as its extended attribute: the inode refers to a
    /// record holding it (written with the first inode that has it).
    fn load_acl(
        &mut self,
        number: usize,
        core: &mut InodeCore,
        kind: AclKind,
        value: &[u8],
    ) -> Result<()> {
        let acl =
            Acl::from_xattr(value).map_err(|e| bad(number, format!("access control list: {e}")))?;
        let Some(acl) = acl else {
            return Ok(());
        };
        let stored = match kind {
            AclKind::Access if acl.is_minimal() => return Ok(()),
            AclKind::Access => acl.without_mode(),
            AclKind::Default if core.kind != FileType::Directory => {
                return Err(bad(
                    number,
                    "a default access control list on a non-directory",
                ));
            }
            AclKind::Default => acl,
        };
        let (id, new_record) = self.acls.id_of(&stored);
        if let Some(bytes) = new_record {
            self.batch.push((keys::acl(id), bytes));
        }
        match kind {
            AclKind::Access => core.access_acl = id,
            AclKind::Default => core.default_acl = id,
        }
        Ok(())
    }

    fn entry(&mut self, parent: u64, name: &[u8], ino: u64, kind: u8, number: usize) -> Result<()> {
        let kind = FileType::from_code(kind).ok_or_else(|| bad(number, "unknown type"))?;
        if name.is_empty() || name.len() > strata_types::MAX_NAME_LEN || name.contains(&b'/') {
            return Err(bad(number, "invalid entry name"));
        }
        self.batch.push((
            keys::dentry(Ino(parent), name),
            codec::encode_dentry(kind, Ino(ino)),
        ));
        if self.multi.contains(&ino) {
            *self.multi_parents.entry((ino, parent)).or_default() += 1;
        }
        self.last_entry = Some((parent, ino));
        self.stats.entries += 1;
        Ok(())
    }

    /// Counters: id counters past everything loaded, usage recomputed.
    fn finish(&mut self, dumped: &std::collections::BTreeMap<String, i64>) {
        let at_least = |name: &str, floor: u64| {
            let floor = i64::try_from(floor).unwrap_or(i64::MAX);
            dumped.get(name).copied().unwrap_or(1).max(floor)
        };
        let counters = [
            (NEXT_INODE, at_least(NEXT_INODE, self.max_ino + 1)),
            (NEXT_SLICE, at_least(NEXT_SLICE, self.max_slice + 1)),
            (NEXT_SESSION, at_least(NEXT_SESSION, 1)),
            (USED_SPACE, self.used_space),
            (TOTAL_INODES, self.total_inodes),
        ];
        for (name, value) in counters {
            self.batch
                .push((keys::counter(name), codec::encode_slots(&[value])));
        }
    }
}

fn slice_of(r: &[u64; 5]) -> Option<Slice> {
    Some(Slice {
        pos: u32::try_from(r[0]).ok()?,
        id: r[1],
        size: u32::try_from(r[2]).ok()?,
        off: u32::try_from(r[3]).ok()?,
        len: u32::try_from(r[4]).ok()?,
    })
}
