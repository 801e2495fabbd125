//! Metadata dumps (dump v1, docs/FORMAT.md): the namespace as JSON lines, written while
//! walking the tree and read back line by line, so neither side holds a large volume in
//! memory. A dump is engine-neutral: loaded into an empty engine of any kind it gives the
//! same volume. This module owns the line types and the writer; `load.rs` the reader.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;

use serde::{Deserialize, Serialize};
use strata_types::{FileType, Ino, Protection, Retention, RetentionMode};

use super::{Meta, NEXT_INODE, NEXT_SESSION, NEXT_SLICE};
use crate::acl::{XATTR_ACCESS, XATTR_DEFAULT};
use crate::codec::{self, InodeCore, InodeFields, usage_slot};
use crate::error::{MetaError, Result};
use crate::keys;
use crate::kv::{Txn, prefix_end};

/// Version of the dump format.
pub const DUMP_VERSION: u32 = 1;
const PAGE: usize = 1000;

/// Bytes in a dump: a JSON string when they are UTF-8, else `{"hex": "..."}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Raw {
    Text(String),
    Hex { hex: String },
}

impl Raw {
    pub fn of(bytes: &[u8]) -> Raw {
        match std::str::from_utf8(bytes) {
            Ok(s) => Raw::Text(s.to_string()),
            Err(_) => Raw::Hex {
                hex: strata_types::hex::encode(bytes),
            },
        }
    }

    pub fn bytes(&self) -> Result<Vec<u8>> {
        match self {
            Raw::Text(s) => Ok(s.as_bytes().to_vec()),
            Raw::Hex { hex } => strata_types::hex::decode(hex)
                .ok_or_else(|| MetaError::Invalid(format!("bad hex in dump: {hex:?}"))),
        }
    }
}

/// One inode with everything it owns except directory entries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpNode {
    pub ino: u64,
    #[serde(rename = "type")]
    pub kind: u8,
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    #[serde(default)]
    pub rdev: u32,
    pub atime: i64,
    pub mtime: i64,
    pub ctime: i64,
    pub nlink: u32,
    pub length: u64,
    pub parent: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Raw>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xattrs: Vec<(Raw, Raw)>,
    /// (chunk index, records `[pos, id, size, off, len]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<(u32, Vec<[u64; 5]>)>,
    /// Directories: usage of direct children (bytes, inodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<[i64; 2]>,
    /// Immutable, append-only, object lock; absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<DumpProtection>,
}

/// An inode's protections in a dump (docs/FORMAT.md, "dump v1").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpProtection {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub immutable: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append_only: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
    /// `GOVERNANCE` or `COMPLIANCE`, with `retain_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_mode: Option<String>,
    /// Nanoseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_until: Option<i64>,
}

impl DumpProtection {
    pub fn of(p: &Protection) -> Option<DumpProtection> {
        (!p.is_none()).then(|| DumpProtection {
            immutable: p.immutable,
            append_only: p.append_only,
            legal_hold: p.legal_hold,
            retention_mode: p.retention.map(|r| r.mode.as_str().to_string()),
            retain_until: p.retention.map(|r| r.until),
        })
    }

    pub fn protection(&self) -> Result<Protection> {
        let retention = match (&self.retention_mode, self.retain_until) {
            (None, None) => None,
            (Some(mode), Some(until)) => Some(Retention {
                mode: RetentionMode::parse(mode)
                    .ok_or_else(|| MetaError::Invalid(format!("retention mode {mode:?}")))?,
                until,
            }),
            _ => {
                return Err(MetaError::Invalid(
                    "retention_mode and retain_until come together".into(),
                ));
            }
        };
        Ok(Protection {
            immutable: self.immutable,
            append_only: self.append_only,
            legal_hold: self.legal_hold,
            retention,
        })
    }
}

/// A line of a dump.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum DumpLine {
    /// First line: the format record (secrets removed unless asked to keep them) and the
    /// id counters.
    Header {
        strata_dump: u32,
        format: serde_json::Value,
        counters: BTreeMap<String, i64>,
        #[serde(default)]
        subdir: Option<String>,
    },
    Node(DumpNode),
    Entry {
        parent: u64,
        name: Raw,
        ino: u64,
        #[serde(rename = "type")]
        kind: u8,
    },
    /// Reference count of a shared slice (absent = 1).
    SliceRef {
        id: u64,
        size: u32,
        refs: i64,
    },
    /// Where a slice is on a volume with several stores (the `P` record; absent = store
    /// 0 only).
    Placement {
        id: u64,
        stores: Vec<u8>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        leaving: Vec<u8>,
        #[serde(default, skip_serializing_if = "is_zero")]
        leave_after: i64,
    },
    /// A directory's tier policy (the `G` record; whole-volume dumps only).
    TierPolicy {
        ino: u64,
        store: u8,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        copies: Vec<u8>,
        #[serde(default, skip_serializing_if = "is_zero_u64")]
        after_secs: u64,
    },
    /// Last line: what came before, so a cut-off dump is detected.
    End {
        nodes: u64,
        entries: u64,
    },
}

/// What to dump.
#[derive(Clone, Debug, Default)]
pub struct DumpOptions {
    /// Only this directory's tree, which becomes the root of the dump.
    pub subdir: Option<Ino>,
    pub subdir_path: Option<String>,
    pub keep_secret_key: bool,
}

/// Counts of a dump or load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpStats {
    pub nodes: u64,
    pub entries: u64,
    pub slice_refs: u64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn write_line(out: &mut (dyn Write + Send), line: &DumpLine) -> Result<()> {
    let mut text =
        serde_json::to_vec(line).map_err(|e| MetaError::Invalid(format!("dump encoding: {e}")))?;
    text.push(b'\n');
    out.write_all(&text)
        .map_err(|e| MetaError::Invalid(format!("writing the dump: {e}")))
}

impl Meta {
    /// Write a dump of the volume (or of `opts.subdir`) to `out`, line by line; `progress`
    /// is told the running count of inodes.
    pub async fn dump(
        &self,
        out: &mut (dyn Write + Send),
        opts: &DumpOptions,
        progress: &mut (dyn FnMut(u64) + Send),
    ) -> Result<DumpStats> {
        write_line(out, &self.dump_header(opts).await?)?;
        let mut stats = DumpStats::default();
        let root = opts.subdir.unwrap_or(Ino::ROOT);
        let mut stack = vec![root];
        if opts.subdir.is_none() {
            stack.push(Ino::TRASH);
        }
        let mut linked_seen: HashSet<Ino> = HashSet::new();
        while let Some(dir) = stack.pop() {
            let mut node = self.dump_node(dir).await?;
            if dir == root {
                node.ino = Ino::ROOT.0;
                node.parent = Ino::ROOT.0;
            } else if node.parent == root.0 {
                node.parent = Ino::ROOT.0;
            }
            write_line(out, &DumpLine::Node(node))?;
            stats.nodes += 1;
            progress(stats.nodes);
            let shown_as = if dir == root { Ino::ROOT } else { dir };
            self.dump_entries(dir, shown_as, out, &mut stack, &mut linked_seen, &mut stats)
                .await?;
        }
        // All of them, also for a --subdir dump: a count can only be too high there (safe:
        // the slice is freed late, by gc), never too low.
        stats.slice_refs = self.dump_slice_refs(out).await?;
        self.dump_placements(out, opts.subdir.is_none()).await?;
        write_line(
            out,
            &DumpLine::End {
                nodes: stats.nodes,
                entries: stats.entries,
            },
        )?;
        Ok(stats)
    }

    /// The format record as a dump (either kind) carries it: the object stores' secret
    /// keys and session token removed unless asked to keep them.
    pub(super) fn dumped_format(&self, keep_secret_key: bool) -> Result<serde_json::Value> {
        let mut format = (*self.current_format()?).clone();
        if !keep_secret_key {
            format.secret_key = None;
            format.session_token = None;
            for store in &mut format.stores {
                store.secret_key = None;
            }
        }
        serde_json::to_value(&format).map_err(|e| MetaError::Invalid(format!("format record: {e}")))
    }

    async fn dump_header(&self, opts: &DumpOptions) -> Result<DumpLine> {
        let format = self.dumped_format(opts.keep_secret_key)?;
        let names = [NEXT_INODE, NEXT_SLICE, NEXT_SESSION];
        let values = self
            .txn(|tx| {
                Box::pin(async move {
                    let ks: Vec<_> = names.iter().map(|n| keys::counter(n)).collect();
                    let vals = tx.get_many(&ks).await?;
                    ks.iter()
                        .zip(&vals)
                        .map(|(k, v)| codec::decode_counter(k, v.as_deref()))
                        .collect::<Result<Vec<i64>>>()
                })
            })
            .await?;
        Ok(DumpLine::Header {
            strata_dump: DUMP_VERSION,
            format,
            counters: names.iter().map(|n| n.to_string()).zip(values).collect(),
            subdir: opts.subdir_path.clone(),
        })
    }

    /// Write the entries of `dir` (as `shown_as`), and the nodes of its non-directory
    /// children; directories are pushed for later.
    async fn dump_entries(
        &self,
        dir: Ino,
        shown_as: Ino,
        out: &mut (dyn Write + Send),
        stack: &mut Vec<Ino>,
        linked_seen: &mut HashSet<Ino>,
        stats: &mut DumpStats,
    ) -> Result<()> {
        let mut pages = self.entry_pages(dir, false);
        while let Some(page) = pages.next(self).await? {
            for e in &page {
                write_line(
                    out,
                    &DumpLine::Entry {
                        parent: shown_as.0,
                        name: Raw::of(&e.name),
                        ino: e.ino.0,
                        kind: e.kind.code(),
                    },
                )?;
                stats.entries += 1;
                if e.kind == FileType::Directory {
                    stack.push(e.ino);
                    continue;
                }
                let mut node = self.dump_node(e.ino).await?;
                if node.parent == 0 && !linked_seen.insert(e.ino) {
                    continue; // another name of a node already written
                }
                if node.parent == dir.0 {
                    node.parent = shown_as.0;
                }
                write_line(out, &DumpLine::Node(node))?;
                stats.nodes += 1;
            }
        }
        Ok(())
    }

    /// Everything one inode owns (core, fields, target, xattrs, chunks, usage) from one
    /// scan of its key range (directories skip their entries).
    pub(crate) async fn dump_node(&self, ino: Ino) -> Result<DumpNode> {
        self.txn(|tx| {
            Box::pin(async move {
                let prefix = keys::inode_prefix(ino);
                let core_key = keys::inode_core(ino);
                let core_value = tx
                    .get(&core_key)
                    .await?
                    .ok_or_else(|| MetaError::corrupt(&core_key, "entry names a missing inode"))?;
                let core = InodeCore::decode(&core_key, &core_value)?;
                let start = if core.kind == FileType::Directory {
                    core_key.clone()
                } else {
                    prefix.clone()
                };
                let rows = tx
                    .scan(&start, &prefix_end(&prefix), usize::MAX, false)
                    .await?;
                let mut node = empty_node(ino, &core);
                for (key, value) in &rows {
                    fill_node(&mut node, key, value)?;
                }
                self.dump_acls(tx, &core, &mut node).await?;
                if core.kind == FileType::Directory {
                    let key = keys::dir_usage(ino);
                    if let Some(v) = tx.get(&key).await? {
                        let u = codec::decode_slots(&key, &v, usage_slot::COUNT)?;
                        node.usage = Some([u[0], u[1]]);
                    }
                }
                Ok(node)
            })
        })
        .await
    }

    /// An inode's access control lists, as the extended attributes they are read as.
    async fn dump_acls(
        &self,
        tx: &mut Txn<'_>,
        core: &InodeCore,
        node: &mut DumpNode,
    ) -> Result<()> {
        if let Some(access) = self.acls.access_list(tx, core).await? {
            node.xattrs
                .push((Raw::of(XATTR_ACCESS), Raw::of(&access.to_xattr())));
        }
        if core.default_acl != 0 {
            let default = self.acls.record(tx, core.default_acl).await?;
            node.xattrs
                .push((Raw::of(XATTR_DEFAULT), Raw::of(&default.to_xattr())));
        }
        Ok(())
    }

    /// Every placement record, and (for a whole-volume dump, whose inode numbers stay)
    /// every tier policy.
    async fn dump_placements(&self, out: &mut (dyn Write + Send), policies: bool) -> Result<()> {
        let mut after = 0;
        loop {
            let page = self.list_placements(after, PAGE).await?;
            let Some(&(last, _)) = page.last() else { break };
            after = last;
            for (id, p) in page {
                let line = DumpLine::Placement {
                    id,
                    stores: p.stores,
                    leaving: p.leaving,
                    leave_after: p.leave_after,
                };
                write_line(out, &line)?;
            }
        }
        if policies {
            for (ino, p) in self.tier_policies().await? {
                let line = DumpLine::TierPolicy {
                    ino: ino.0,
                    store: p.store,
                    copies: p.copies,
                    after_secs: p.after_secs,
                };
                write_line(out, &line)?;
            }
        }
        Ok(())
    }

    async fn dump_slice_refs(&self, out: &mut (dyn Write + Send)) -> Result<u64> {
        let mut start = b"K".to_vec();
        let mut count = 0;
        loop {
            let rows = self
                .txn(|tx| {
                    let start = start.clone();
                    Box::pin(async move { Ok(tx.scan(&start, b"L", PAGE, false).await?) })
                })
                .await?;
            for (key, value) in &rows {
                let (Some(id), Some(size)) = (keys::be_u64(key, 1), keys::be_u32(key, 9)) else {
                    return Err(MetaError::corrupt(key, "malformed slice reference key"));
                };
                let refs = codec::decode_counter(key, Some(value))?;
                write_line(out, &DumpLine::SliceRef { id, size, refs })?;
                count += 1;
            }
            match rows.last() {
                Some((k, _)) if rows.len() == PAGE => start = [&k[..], &[0u8][..]].concat(),
                _ => return Ok(count),
            }
        }
    }
}

fn empty_node(ino: Ino, core: &InodeCore) -> DumpNode {
    DumpNode {
        ino: ino.0,
        kind: core.kind.code(),
        mode: core.mode,
        uid: core.uid,
        gid: core.gid,
        rdev: core.rdev,
        atime: 0,
        mtime: 0,
        ctime: 0,
        nlink: 0,
        length: 0,
        parent: core.parent.0,
        target: None,
        xattrs: Vec::new(),
        chunks: Vec::new(),
        usage: None,
        protection: DumpProtection::of(&core.protection),
    }
}

/// Add one record of an inode's key range to its node.
fn fill_node(node: &mut DumpNode, key: &[u8], value: &[u8]) -> Result<()> {
    match key.get(9) {
        Some(b'T') => {
            let f = InodeFields::decode(key, value)?;
            (node.atime, node.mtime, node.ctime) = (f.atime, f.mtime, f.ctime);
            (node.nlink, node.length) = (f.nlink, f.length);
        }
        Some(b'S') => node.target = Some(Raw::of(value)),
        Some(b'X') => node.xattrs.push((Raw::of(&key[10..]), Raw::of(value))),
        Some(b'C') => {
            let index = keys::be_u32(key, 10)
                .ok_or_else(|| MetaError::corrupt(key, "malformed chunk key"))?;
            let records = codec::decode_slices(key, value)?
                .iter()
                .map(|s| {
                    [
                        u64::from(s.pos),
                        s.id,
                        u64::from(s.size),
                        u64::from(s.off),
                        u64::from(s.len),
                    ]
                })
                .collect();
            node.chunks.push((index, records));
        }
        // Core (read already) and parent-link records (rebuilt from entries on load).
        _ => {}
    }
    Ok(())
}
